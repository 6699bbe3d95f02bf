"""The model zoo's tracked forward and backward passes against the plain ones (issue 19).

For each model: the median time of the forward pass plus ``loss.backward()`` run plainly, under
``fp.track()``, and the floor of ``bench_tracking.py`` (the plain run plus two float64 matmuls
of the same shapes for every matmul-class operation, forward and backward: mm, bmm, addmm,
baddbmm, and the products inside the fused attention kernels, the forward's two and the
backward's five). Budget: tracked at most 1.5x the floor. Convolutions are not in the floor.

Sizes: the zoo's own tiny configurations (``tests/models/zoo.py``: hidden size 16, 8 tokens),
where each operation costs the tracker far more than its arithmetic; or, with ``--hidden``, a
realistic width (heads of 64, MLPs four times as wide, ``--seq`` tokens, ``--batch``
sequences, ``--layers`` blocks, ``--vocab`` tokens) for the token models (nanoGPT, GPT-2,
Llama, BERT), where the arithmetic dominates as in users' models.

Besides the times: how many operations the tracker saw, its cost per operation ((tracked -
plain) / operations), and, from one more instrumented tracked run, the CPU time spent bounding
operations through their decompositions (``tracking/torch/decompose.py``: the decomposition
run under the tracker and the check of the kernel's value), by operation, whether the
loss's enclosure is finite (where it is the whole line, every bound after it is too, and the
backward pass runs the tracker's NaN propagation, :mod:`pytest_fpcheck.tracking.torch.nan`),
and the share of the parameters' gradient elements whose enclosures are finite (a step
whose bounds are the whole line skips the rules' arithmetic: its time is not the
budget's subject). Times are thread CPU
time by default (``--clock wall`` for wall time): the development machine is shared, and CPU
time is what a loaded machine changes least; BLAS runs on this thread (one thread).

Run: ``python benchmarks/bench_zoo.py [--models gpt2,llama] [--dtype float32] [--repeats 3]
[--hidden 256 --seq 128 --batch 4 --layers 2]``.
"""

from __future__ import annotations

import os

# one BLAS thread, set before NumPy loads OpenBLAS: CPU time then counts all of the floor's work
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# every compiled kernel built before its first call returns (interval/jit.py): otherwise the
# NumPy twins run until the background compilation ends, and a timing that catches them
# measures the warm-up (about 2x on small models), not the steady state
os.environ.setdefault("FPCHECK_JIT", "eager")


import argparse
import json
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tracking import _ATTENTION, MatmulShapes  # noqa: E402

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.tracking.torch import decompose  # noqa: E402
from pytest_fpcheck.tracking.torch.mode import Tracker  # noqa: E402
from tests.models.zoo import MODELS, SCALABLE, build, loss_of, scaled  # noqa: E402

_ATTENTION_BACKWARD = (
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward",
)


class ZooMatmulShapes(MatmulShapes):
    """:class:`bench_tracking.MatmulShapes`, with the products of the fused attention kernels
    counted per query head (grouped-query attention's key and value heads serve several) and
    those of their backward kernels too: the scores q k^T again, dV = P^T dO, dP = dO V^T,
    dQ = dS k, dK = dS^T q."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = func.overloadpacket.__name__
        if name in _ATTENTION or name in _ATTENTION_BACKWARD:
            backward = name in _ATTENTION_BACKWARD
            q, k, v = args[1:4] if backward else args[:3]
            *batch, length, width = q.shape
            source, value_width = k.shape[-2], v.shape[-1]
            q_shape, scores = tuple(q.shape), (*batch, length, source)
            weights_t = (*batch, source, length)
            out = (*batch, length, value_width)
            self.attention += [(q_shape, (*batch, width, source))]  # q k^T
            if backward:
                self.attention += [
                    (weights_t, out),  # P^T dO
                    (out, (*batch, value_width, source)),  # dO V^T
                    (scores, (*batch, source, width)),  # dS k
                    (weights_t, q_shape),  # dS^T q
                ]
            else:
                self.attention += [(scores, (*batch, source, value_width))]  # P v
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)


def medians(functions: dict[str, Callable[[], Any]], repeats: int, clock: str) -> dict[str, float]:
    """Median time of each function, run in turn within each repeat after one warm-up round
    (a load that changes during the run then weighs on all of them alike)."""
    now = time.thread_time if clock == "cpu" else time.perf_counter
    for fn in functions.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, fn in functions.items():
            start = now()
            fn()
            times[name].append(now() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def instrumented(tracked: Callable[[], None]) -> tuple[int, float, float, Counter[str]]:
    """One tracked run with counters: (operations the tracker saw, its CPU time, the CPU time
    of the rules that bound operations through their decompositions, that time by operation)."""
    seen = [0]
    by_operation: Counter[str] = Counter()
    depth = [0]
    handle, by_decomposition = Tracker.handle, decompose._by_decomposition

    def counting_handle(self: Tracker, call: Any, run: Any) -> Any:
        seen[0] += 1
        return handle(self, call, run)

    def timed_decomposition(call: Any, reentered: Any, decomposition: Any) -> Any:
        rule = by_decomposition(call, reentered, decomposition)

        def timed(ctx: Any) -> Any:
            depth[0] += 1
            start = time.thread_time()
            try:
                return rule(ctx)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # a decomposition's own decompositions count once
                    by_operation[call.packet] += time.thread_time() - start

        return timed

    Tracker.handle = counting_handle  # type: ignore[method-assign]
    decompose._by_decomposition = timed_decomposition  # type: ignore[assignment]
    try:
        start = time.thread_time()
        tracked()
        total = time.thread_time() - start
    finally:
        Tracker.handle = handle  # type: ignore[method-assign]
        decompose._by_decomposition = by_decomposition
    return seen[0], total, sum(by_operation.values()), by_operation


def measure(
    model: nn.Module,
    batch: dict[str, torch.Tensor],
    name: str,
    repeats: int,
    clock: str,
    mode: str = "rigorous",
) -> dict[str, Any]:
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss_of(name, model, batch).backward()

    recorder = ZooMatmulShapes()
    with recorder:
        step()
    operands = [
        (np.random.rand(*a), np.random.rand(*b)) for a, b in recorder.shapes + recorder.attention
    ]

    def two_f64_matmuls() -> None:
        for a, b in operands:
            np.matmul(a, b)
            np.matmul(a, b)

    def tracked() -> None:
        with fp.track(mode=mode):
            step()

    finite: list[bool] = []
    gradients: list[float] = []

    def tracked_and_checked() -> None:
        with fp.track(mode=mode):
            model.zero_grad(set_to_none=True)
            loss = loss_of(name, model, batch)
            bounds = fp.bounds_of(loss)
            finite.append(bool(np.isfinite(bounds.lo).all() and np.isfinite(bounds.hi).all()))
            loss.backward()
            bounded = total = 0
            for parameter in model.parameters():
                if parameter.grad is None:
                    continue
                ends = fp.bounds_of(parameter.grad)
                total += parameter.grad.numel()
                if ends is not None:  # an untracked gradient is exact
                    bounded += int((np.isfinite(ends.lo) & np.isfinite(ends.hi)).sum())
                else:
                    bounded += parameter.grad.numel()
            gradients.append(bounded / max(total, 1))

    times = medians({"plain": step, "matmuls": two_f64_matmuls, "tracked": tracked}, repeats, clock)
    floor = times["plain"] + times["matmuls"]
    operations, cpu, decomposed, by_operation = instrumented(tracked_and_checked)
    return {
        "plain_s": times["plain"],
        "floor_s": floor,
        "tracked_s": times["tracked"],
        "tracked_over_plain": times["tracked"] / times["plain"],
        "tracked_over_floor": times["tracked"] / floor,
        "operations": operations,
        "us_per_operation": (times["tracked"] - times["plain"]) / operations * 1e6,
        "decompositions_share": decomposed / cpu,
        "loss_bounded": finite[0],
        "gradients_bounded": gradients[0],
        "decompositions_s": {op: t for op, t in by_operation.most_common()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--models",
        default=None,
        help=f"default: every zoo model, or with --hidden those it widens ({','.join(SCALABLE)})",
    )
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument(
        "--mode",
        choices=("rigorous", "a_posteriori"),
        default="rigorous",
        help="fp.track(mode=...): a_posteriori keeps the loss bounded at widths where the "
        "rigorous bounds become the whole line",
    )
    parser.add_argument("--hidden", type=int, default=None, help="a realistic width")
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1024)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    names = (args.models or ",".join(SCALABLE if args.hidden else MODELS)).split(",")
    size = (
        "the zoo's sizes (hidden 16)"
        if args.hidden is None
        else f"hidden {args.hidden}, {args.layers} layers, seq {args.seq}, batch {args.batch}, "
        f"vocab {args.vocab}"
    )
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, 1 thread, {args.clock} time, load average "
        f"{os.getloadavg()[0]:.1f}, {args.dtype}, {size}, mode {args.mode}"
    )
    print(
        f"{'model':<9} {'plain':>9} {'floor':>9} {'tracked':>10} {'tr/plain':>9} {'tr/floor':>9}"
        f" {'ops':>6} {'us/op':>6} {'decomp':>7} {'loss bounded':>13} {'grads bounded':>14}"
    )
    results = {}
    for name in names:
        if args.hidden is None:
            model, batch = build(name, dtype)
        else:
            model, batch = scaled(
                name,
                hidden=args.hidden,
                seq=args.seq,
                batch=args.batch,
                layers=args.layers,
                vocab=args.vocab,
            )
            model = model.to(dtype)
        r = measure(model, batch, name, args.repeats, args.clock, args.mode)
        results[name] = r
        print(
            f"{name:<9} {r['plain_s'] * 1e3:7.1f}ms {r['floor_s'] * 1e3:7.1f}ms "
            f"{r['tracked_s'] * 1e3:8.1f}ms {r['tracked_over_plain']:8.1f}x "
            f"{r['tracked_over_floor']:8.2f}x {r['operations']:6d} {r['us_per_operation']:6.0f}"
            f" {r['decompositions_share']:6.0%} {'yes' if r['loss_bounded'] else 'no (±inf)':>13}"
            f" {r['gradients_bounded']:13.1%}",
            flush=True,
        )
        top = list(r["decompositions_s"].items())[:4]
        print("          decompositions: " + ", ".join(f"{op} {t * 1e3:.1f}ms" for op, t in top))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
