"""Tightness of the round-off bounds of each leaf module on point inputs (issue 20, part 3).

For each leaf module class of the model zoo (Linear, LayerNorm, RMSNorm (PyTorch's and Hugging
Face Llama's Python one), attention (SDPA, and Hugging Face's eager attention with its float32
softmax), MLP (Linear-GELU-Linear and Llama's SwiGLU), Embedding, softmax), in bfloat16, float16
and float32: the module runs alone under ``fp.track()`` on an exact input (a point: the input
tensor as it is, in the module's dtype), and

    ratio = median over elements of the bound's radius
            / median over elements of |tracked output - float64 evaluation|,

the float64 evaluation being the same module's formula on the same (exactly converted) inputs
and weights in float64. The ratio of medians, not the median of per-element ratios: an element
whose computed value happens to be exact has no actual error, and its ratio is undefined. A
module that is exact on points (Embedding: radius 0 and error 0) reports 1; an output without
recorded bounds (a lookup tracking saw no rounding in) is a point. ``outside`` counts
elements whose float64 evaluation or whose computed value lies outside the bound (the float64 value is within about
1e-16 relatively of the exact one; any count above 0 is worth a look).

Budget: ratio at most 16 for every class in bfloat16 and float16, at most 1,000 in float32.

Run: ``python benchmarks/bench_module_tightness.py [--seeds 3] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import pytest_fpcheck as fp

WIDTH, HEADS, KV_HEADS, SEQ, BATCH = 128, 4, 2, 32, 2
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
BUDGET = {"bfloat16": 16.0, "float16": 16.0, "float32": 1000.0}

Case = tuple[Callable[..., Any], tuple[torch.Tensor, ...], Callable[..., torch.Tensor]]


def _llama_rms_norm(weight: torch.Tensor, eps: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """Hugging Face's ``LlamaRMSNorm.forward`` (float32 inside, for any input dtype)."""

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        dtype = hidden.dtype
        hidden = hidden.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + eps)
        return weight * hidden.to(dtype)

    return forward


def _eager_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """Hugging Face's ``eager_attention_forward`` (Llama, grouped keys and values)."""
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    weights = torch.matmul(query, key.transpose(2, 3)) * scale + mask
    weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value)


def _eager_reference(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    weights = torch.softmax(torch.matmul(query, key.transpose(2, 3)) * scale + mask, dim=-1)
    return torch.matmul(weights, value)


def cases(dtype: torch.dtype, seed: int) -> dict[str, Case]:
    """name -> (tracked function, its point inputs, the float64 evaluation)."""
    torch.manual_seed(seed)
    x = torch.randn(BATCH, SEQ, WIDTH).to(dtype)
    built: dict[str, Case] = {}

    linear = torch.nn.Linear(WIDTH, WIDTH).to(dtype)
    built["Linear"] = (linear, (x,), _copy_double(linear))

    norm = torch.nn.LayerNorm(WIDTH).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.1 * torch.randn(WIDTH))
        norm.bias.copy_(0.1 * torch.randn(WIDTH))
    built["LayerNorm"] = (norm, (x,), _copy_double(norm))

    rms = torch.nn.RMSNorm(WIDTH, eps=1e-6).to(dtype)
    with torch.no_grad():
        rms.weight.copy_(1 + 0.1 * torch.randn(WIDTH))
    built["RMSNorm"] = (rms, (x,), _copy_double(rms))

    weight = (1 + 0.1 * torch.randn(WIDTH)).to(dtype)
    built["LlamaRMSNorm"] = (
        _llama_rms_norm(weight, 1e-6),
        (x,),
        lambda h: h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.double(),
    )

    head = WIDTH // HEADS
    q = torch.randn(BATCH, HEADS, SEQ, head).to(dtype)
    k = torch.randn(BATCH, KV_HEADS, SEQ, head).to(dtype)
    v = torch.randn(BATCH, KV_HEADS, SEQ, head).to(dtype)
    k_full, v_full = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    built["SDPA"] = (
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
        (q, k_full, v_full),
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
    )
    causal = torch.full((SEQ, SEQ), -math.inf).triu(1)
    built["EagerAttention"] = (
        lambda a, b, c: _eager_attention(a, b, c, causal.to(dtype), head**-0.5),
        (q, k, v),
        lambda a, b, c: _eager_reference(a, b, c, causal.double(), head**-0.5),
    )

    mlp = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, 4 * WIDTH), torch.nn.GELU(), torch.nn.Linear(4 * WIDTH, WIDTH)
    ).to(dtype)
    built["MLP"] = (mlp, (x,), _copy_double(mlp))

    gate, up, down = (
        torch.nn.Linear(WIDTH, 2 * WIDTH, bias=False).to(dtype),
        torch.nn.Linear(WIDTH, 2 * WIDTH, bias=False).to(dtype),
        torch.nn.Linear(2 * WIDTH, WIDTH, bias=False).to(dtype),
    )
    swiglu = [_copy_double(m) for m in (gate, up, down)]
    built["SwiGLU"] = (
        lambda h: down(F.silu(gate(h)) * up(h)),
        (x,),
        lambda h: swiglu[2](F.silu(swiglu[0](h)) * swiglu[1](h)),
    )

    embedding = torch.nn.Embedding(1000, WIDTH).to(dtype)
    tokens = torch.randint(0, 1000, (BATCH, SEQ))
    built["Embedding"] = (embedding, (tokens,), _copy_double(embedding))

    scores = (3 * torch.randn(BATCH, HEADS, SEQ, SEQ)).to(dtype)
    built["softmax"] = (
        lambda s: torch.softmax(s, -1),
        (scores,),
        lambda s: torch.softmax(s, -1),
    )
    return built


def _copy_double(module: torch.nn.Module) -> Callable[..., torch.Tensor]:
    import copy

    reference = copy.deepcopy(module).to(torch.float64)
    return lambda *args: reference(*args)


def measure(case: Case, mode: str = "rigorous") -> dict[str, float]:
    function, inputs, reference = case
    with torch.no_grad():
        with fp.track(mode=mode):
            out = function(*inputs)
            bounds = fp.bounds_of(out)
        exact = reference(*(t.double() if t.is_floating_point() else t for t in inputs))
    value = out.double().numpy()
    error = np.abs(value - exact.numpy())
    # no bounds: tracking saw no rounding (a lookup of exact values), the output is a point
    lo, hi = (value, value) if bounds is None else (bounds.lo, bounds.hi)
    radius = (hi - lo) / 2
    # both the float64 value and the tracked run's own value must lie in the enclosure
    inside = (lo <= exact.numpy()) & (exact.numpy() <= hi) & (lo <= value) & (value <= hi)
    median_radius, median_error = float(np.median(radius)), float(np.median(error))
    if median_radius == 0 and median_error == 0:
        ratio = 1.0
    elif median_error == 0:
        ratio = math.inf
    else:
        ratio = median_radius / median_error
    return {
        "ratio": ratio,
        "median_radius": median_radius,
        "median_error": median_error,
        "median_abs_value": float(np.median(np.abs(value))),
        "outside": int((~inside).sum()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="case names to run")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--mode",
        default="rigorous",
        choices=("rigorous", "a_posteriori"),
        help="the tracking mode (compare_modules judges each module a posteriori)",
    )
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    print(
        f"{'module':16s} {'dtype':9s} {'ratio':>10s} {'radius':>10s} {'error':>10s} "
        f"{'|value|':>8s} {'out':>4s} budget"
    )
    for dtype_name, dtype in DTYPES.items():
        names = list(cases(dtype, 0))
        for name in names:
            if args.only and name not in args.only:
                continue
            results = [measure(cases(dtype, seed)[name], args.mode) for seed in range(args.seeds)]
            ratio = statistics.median(r["ratio"] for r in results)
            row = {
                "mode": args.mode,
                "module": name,
                "dtype": dtype_name,
                "ratio": ratio,
                "median_radius": statistics.median(r["median_radius"] for r in results),
                "median_error": statistics.median(r["median_error"] for r in results),
                "median_abs_value": statistics.median(r["median_abs_value"] for r in results),
                "outside": sum(r["outside"] for r in results),
            }
            rows.append(row)
            verdict = "within" if ratio <= BUDGET[dtype_name] else "OVER"
            print(
                f"{name:16s} {dtype_name:9s} {ratio:10.3g} {row['median_radius']:10.3g} "
                f"{row['median_error']:10.3g} {row['median_abs_value']:8.3g} "
                f"{row['outside']:4d} {verdict} ({BUDGET[dtype_name]:g})",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
