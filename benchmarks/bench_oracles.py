"""The Arb oracle beside the mpmath and fp64 oracles (run: ``python benchmarks/bench_oracles.py``).

Three workloads, each oracle timed in the same run:

1. a 128x128 matmul of float32 inputs (reference ``a @ b``): mpmath against Arb. Budget (issue
   22): Arb at least 50x faster.
2. the forward pass of a 2-layer transformer of width 128 (sequence 16, 4 heads, MLP 512), written
   with the operations both high-precision oracles support (layer norm from mean / sqrt, softmax
   from exp / sum, GELU in its tanh form), so that one reference runs under both; Arb also runs
   the same model written with ``torch.nn.functional`` (layer_norm, softmax, gelu, scaled dot
   product attention), which the mpmath oracle cannot evaluate.
3. ``dual_delta`` of 1,000 trials of a 64x64 float16 matmul (custom ``a @ b`` in float16,
   reference in float32 rounded to float16): the fp64 oracle against Arb. Budget: Arb at most
   10x the fp64 run. (mpmath would take about 0.4 s a trial, 7 minutes: it is timed on 5 trials
   and the figure scaled.)

Each figure is the fastest of ``--repeats`` runs (default 3; mpmath runs once on the large
workloads). Both oracles' results are checked to agree. PyTorch runs single-threaded. Prints a
Markdown section for docs/performance.md, with the machine and its load average.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from pytest_fpcheck.dualdelta import dual_delta
from pytest_fpcheck.oracle import mpmath_oracle
from pytest_fpcheck.oracle.arb_eval import arb_oracle

WIDTH, HEADS, SEQUENCE, HIDDEN, LAYERS = 128, 4, 16, 512, 2


def best_of(repeats: int, function: Callable[[], Any]) -> tuple[float, Any]:
    best, value = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def matmul(a: Any, b: Any) -> Any:
    return a @ b


def layer_weights(generator: torch.Generator) -> dict[str, torch.Tensor]:
    def linear(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=generator) / math.sqrt(cols)

    return {
        "q": linear(WIDTH, WIDTH),
        "k": linear(WIDTH, WIDTH),
        "v": linear(WIDTH, WIDTH),
        "o": linear(WIDTH, WIDTH),
        "up": linear(HIDDEN, WIDTH),
        "down": linear(WIDTH, HIDDEN),
        "gain": 1 + 0.1 * torch.randn(WIDTH, generator=generator),
    }


def primitive_layer_norm(x: Any, gain: Any) -> Any:
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    variance = (centred * centred).mean(-1, keepdim=True)
    return centred / torch.sqrt(variance + 1e-5) * gain


def primitive_gelu(x: Any) -> Any:
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def primitive_attention(q: Any, k: Any, v: Any) -> Any:
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(WIDTH // HEADS)
    weights = torch.exp(scores)
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.bmm(weights, v)


def heads(x: Any) -> Any:
    return x.reshape(SEQUENCE, HEADS, WIDTH // HEADS).transpose(0, 1)


def primitive_transformer(x: Any, *weights: Any) -> Any:
    """The model with mean / sqrt / exp / sum / tanh only (both oracles support them)."""
    for layer in range(LAYERS):
        w = dict(
            zip(
                ("q", "k", "v", "o", "up", "down", "gain"),
                weights[7 * layer : 7 * layer + 7],
                strict=True,
            )
        )
        h = primitive_layer_norm(x, w["gain"])
        attended = primitive_attention(
            heads(h @ w["q"].T), heads(h @ w["k"].T), heads(h @ w["v"].T)
        )
        x = x + attended.transpose(0, 1).reshape(SEQUENCE, WIDTH) @ w["o"].T
        h = primitive_layer_norm(x, w["gain"])
        x = x + primitive_gelu(h @ w["up"].T) @ w["down"].T
    return x


def functional_transformer(x: Any, *weights: Any) -> Any:
    """The same model with torch.nn.functional's operations (only the Arb oracle has them)."""
    for layer in range(LAYERS):
        w = dict(
            zip(
                ("q", "k", "v", "o", "up", "down", "gain"),
                weights[7 * layer : 7 * layer + 7],
                strict=True,
            )
        )
        h = F.layer_norm(x, (WIDTH,), w["gain"])
        attended = F.scaled_dot_product_attention(
            heads(F.linear(h, w["q"])), heads(F.linear(h, w["k"])), heads(F.linear(h, w["v"]))
        )
        x = x + F.linear(attended.transpose(0, 1).reshape(SEQUENCE, WIDTH), w["o"])
        h = F.layer_norm(x, (WIDTH,), w["gain"])
        x = x + F.linear(F.gelu(F.linear(h, w["up"]), approximate="tanh"), w["down"])
    return x


def custom(a: Any, b: Any) -> Any:
    return a @ b


def reference(a: Any, b: Any) -> Any:
    return (a.float() @ b.float()).half()


def inputs(rng: np.random.Generator) -> tuple[Any, Any]:
    a = torch.from_numpy(rng.standard_normal((64, 64), dtype=np.float32)).half()
    b = torch.from_numpy(rng.standard_normal((64, 64), dtype=np.float32)).half()
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=1000)
    options = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    generator = torch.Generator().manual_seed(0)

    a, b = torch.randn(128, 128, generator=generator), torch.randn(128, 128, generator=generator)
    for warm_up in (mpmath_oracle, arb_oracle):  # imports and first-call costs, not timed
        warm_up(matmul)(a[:4, :4], b[:4, :4])
    mp_matmul, mp_value = best_of(1, lambda: mpmath_oracle(matmul)(a, b))
    arb_matmul, arb_value = best_of(options.repeats, lambda: arb_oracle(matmul)(a, b))
    assert np.array_equal(mp_value, arb_value), "the two oracles disagree on the matmul"

    x = torch.randn(SEQUENCE, WIDTH, generator=generator)
    weights = [t for _ in range(LAYERS) for t in layer_weights(generator).values()]
    mp_model, mp_out = best_of(1, lambda: mpmath_oracle(primitive_transformer)(x, *weights))
    arb_model, arb_out = best_of(
        options.repeats, lambda: arb_oracle(primitive_transformer)(x, *weights)
    )
    model_gap = float(np.max(np.abs(mp_out - arb_out) / (1 + np.abs(arb_out))))
    arb_functional, _ = best_of(
        options.repeats, lambda: arb_oracle(functional_transformer)(x, *weights)
    )

    for warm_up in ("fp64", "arb"):
        dual_delta(custom, reference, inputs=inputs, oracle=warm_up, n=5)
    fp64_run, fp64_result = best_of(
        1, lambda: dual_delta(custom, reference, inputs=inputs, oracle="fp64", n=options.trials)
    )
    arb_run, arb_result = best_of(
        1, lambda: dual_delta(custom, reference, inputs=inputs, oracle="arb", n=options.trials)
    )
    mp_slice, _ = best_of(
        1,
        lambda: dual_delta(custom, reference, inputs=inputs, oracle=mpmath_oracle(reference), n=5),
    )
    same_verdict = arb_result.accuracy == fp64_result.accuracy

    print("## Oracles: Arb ball arithmetic beside mpmath and fp64\n")
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, torch {torch.__version__} (1 thread), python-flint "
        f"{__import__('flint').__version__}; load average {load:.1f} at the start. Command: "
        f"`python benchmarks/bench_oracles.py --repeats {options.repeats}`.\n"
    )
    print("| workload | mpmath | fp64 | Arb | ratio |")
    print("|---|---:|---:|---:|---|")
    print(
        f"| 128x128 matmul | {mp_matmul:.2f} s | | {arb_matmul:.3f} s | mpmath / Arb "
        f"**{mp_matmul / arb_matmul:.0f}x** (budget >= 50x); same float64 results |"
    )
    print(
        f"| 2-layer width-128 transformer forward (primitive operations) | {mp_model:.1f} s | | "
        f"{arb_model:.2f} s | mpmath / Arb **{mp_model / arb_model:.0f}x**; results within "
        f"{model_gap:.1g} |"
    )
    print(
        f"| the same model, torch.nn.functional operations | (unsupported) | | "
        f"{arb_functional:.2f} s | |"
    )
    print(
        f"| dual-delta, {options.trials} trials of a 64x64 fp16 matmul | "
        f"{mp_slice * options.trials / 5:.0f} s (5 trials scaled) | {fp64_run:.2f} s | "
        f"{arb_run:.2f} s | Arb / fp64 **{arb_run / fp64_run:.1f}x** (budget <= 10x); same "
        f"verdict: {same_verdict} |"
    )


if __name__ == "__main__":
    main()
