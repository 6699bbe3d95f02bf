"""Budget of issue 4 (the instrumented Triton interpreter).

* Time: an instrumented launch (inside ``fp.track()``) at most 2x the plain interpreter launch
  of the same kernel at the median over the example kernels, and at most 4x for any one
  (RENDER's prototype: median 2.1x, mean 2.7x, maximum 9.1x).
* Memory: peak traced allocation (``tracemalloc``, which sees NumPy's buffers) of the
  instrumented launch at most 3x the plain one.

Kernels: those of ``examples/test_triton_kernels.py`` at their example sizes. Each ratio is the
ratio of medians of ``--repeats`` alternated launches. Run:
``python benchmarks/bench_triton.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from test_triton_kernels import (
    attention_kernel,
    matmul_kernel,
    row_sum_kernel,
    softmax_kernel,
)

import pytest_fpcheck as fp


def launches() -> dict[str, Callable[[], object]]:
    torch.manual_seed(0)
    a, b = torch.randn(32, 128), torch.randn(128, 32)
    c = torch.zeros(32, 32)
    h16a, h16b = (torch.rand(32, 64) + 0.5).half(), (torch.rand(64, 32) + 0.5).half()
    c16 = torch.zeros(32, 32, dtype=torch.float16)
    x = (3 * torch.randn(16, 100)).half()
    y = torch.empty_like(x)
    q, k, v = (torch.randn(64, 16).half() for _ in range(3))
    o = torch.empty_like(q)
    rows, sums = torch.randn(8, 100), torch.empty(8)

    def gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, precision: str, split: int) -> None:
        m, kk = a.shape
        n = b.shape[1]
        matmul_kernel[(2, 2, split)](
            a, b, c, m, n, kk, *a.stride(), *b.stride(),
            BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, PRECISION=precision, SPLIT_K=split,
        )  # fmt: skip

    return {
        "split-K matmul (atomics)": lambda: gemm(a, b, c.zero_(), "ieee", 4),
        "TF32 matmul": lambda: gemm(a, b, c, "tf32", 1),
        "float16 GEMM": lambda: gemm(h16a, h16b, c16, "ieee", 1),
        "fused softmax": lambda: softmax_kernel[(16,)](x, y, 100, BLOCK=128),
        "flash attention": lambda: attention_kernel[(4,)](
            q, k, v, o, 64, 0.25, D=16, BLOCK_M=16, BLOCK_N=16
        ),
        "row sum": lambda: row_sum_kernel[(7,)](rows, sums, 100, BLOCK=128),
    }


def tracked(run: Callable[[], object]) -> Callable[[], object]:
    def instrumented() -> None:
        with np.errstate(all="ignore"), fp.track():
            run()

    return instrumented


def plain(run: Callable[[], object]) -> Callable[[], object]:
    def uninstrumented() -> None:
        with np.errstate(all="ignore"):
            run()

    return uninstrumented


def median_seconds(runs: tuple[Callable[[], object], ...], repeats: int) -> list[float]:
    times: list[list[float]] = [[] for _ in runs]
    for run in runs:
        run()
    for _ in range(repeats):
        for run, kept in zip(runs, times, strict=True):
            start = time.perf_counter()
            run()
            kept.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def peak_bytes(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ratios = []
    print(f"{'kernel':28} {'plain s':>9} {'tracked s':>9} {'time':>6} {'memory':>7}")
    for name, run in launches().items():
        base, inst = median_seconds((plain(run), tracked(run)), args.repeats)
        memory = peak_bytes(tracked(run)) / max(peak_bytes(plain(run)), 1)
        ratios.append(inst / base)
        print(f"{name:28} {base:9.4f} {inst:9.4f} {inst / base:5.2f}x {memory:6.2f}x")
    print(
        f"median {statistics.median(ratios):.2f}x (budget 2x), max {max(ratios):.2f}x (budget 4x)"
    )


if __name__ == "__main__":
    main()
