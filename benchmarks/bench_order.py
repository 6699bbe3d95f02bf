"""Speed of revealing accumulation orders (FPRev), with the number of implementation calls.

Budgets (issue 6): ``numpy.sum`` of float32 at n = 1024 in about 0.07 s or less (the paper's
published implementation takes 0.024 s on its machine, outputs/rq1.csv of peichenxie/FPRev);
n = 65,536 in under 60 s for sequential, pairwise and 8-way orders; a reverse-sequential order of
100,000 terms revealed without recursion. The paper's complexity, in calls: FPRev n - 1 (best,
sequential) to n(n-1)/2 (worst, reverse); BasicFPRev n(n-1)/2 always; NaiveSol the Catalan number
C(n-1) of trees, times random tests.

The synthetic orders are Numba loops (compiled before timing) so that the implementation costs
little next to FPRev's own work.

    python benchmarks/bench_order.py            # everything (a few minutes)
    python benchmarks/bench_order.py --quick    # n = 4096 instead of 65,536 and 100,000
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from pytest_fpcheck.diagnostics.order import reveal_order, sum_of


@numba.njit
def sequential(x: Any) -> Any:
    total = x[0]
    for i in range(1, x.size):
        total += x[i]
    return total


@numba.njit
def reverse(x: Any) -> Any:
    total = x[x.size - 1]
    for i in range(x.size - 2, -1, -1):
        total += x[i]
    return total


@numba.njit
def pairwise(x: Any) -> Any:
    buffer = x.copy()
    m = x.size
    while m > 1:
        half = m // 2
        for i in range(half):
            buffer[i] = buffer[2 * i] + buffer[2 * i + 1]
        if m % 2:
            buffer[half] = buffer[m - 1]
            half += 1
        m = half
    return buffer[0]


@numba.njit
def eight_way(x: Any) -> Any:
    lanes = x[:8].copy()
    for i in range(8, x.size - x.size % 8, 8):
        for lane in range(8):
            lanes[lane] += x[i + lane]
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + (
        (lanes[4] + lanes[5]) + (lanes[6] + lanes[7])
    )


def counted(fn: Callable[[Any], Any]) -> tuple[Callable[[Any], Any], list[int]]:
    calls = [0]

    def impl(x: Any) -> Any:
        calls[0] += 1
        return fn(x)

    return impl, calls


def run(label: str, fn: Callable[[Any], Any], n: int, algorithm: str, repeat: int) -> str:
    """Best time over ``repeat`` runs, and the calls of one run, as a Markdown table row."""
    impl, calls = counted(fn)
    best = math.inf
    tree = None
    for _ in range(repeat):
        calls[0] = 0
        start = time.perf_counter()
        tree = reveal_order(sum_of(impl, backend="numpy"), n, algorithm=algorithm)
        best = min(best, time.perf_counter() - start)
    if tree is None or not tree.verify(sum_of(fn, backend="numpy"), trials=4):
        raise SystemExit(f"{label}: the revealed tree does not reproduce the implementation")
    return (
        f"| {label} | {algorithm} | {n:,} | {best:.3f} | {calls[0]:,} | "
        f"{calls[0] / n:.2f} | {tree.depth()} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    args = parser.parse_args()
    big, huge = (4096, 4096) if args.quick else (65_536, 100_000)
    warm = np.ones(16, dtype=np.float32)
    for fn in (sequential, reverse, pairwise, eight_way):
        fn(warm)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, NumPy {np.__version__}, Numba {numba.__version__}"
    )
    print()
    print("| order | algorithm | n | seconds | calls | calls / n | depth |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(run("numpy.sum", np.sum, 1024, "fprev", 10))
    print(run("numpy.sum", np.sum, 1024, "basic", 1))
    print(run("numpy.sum", np.sum, 8, "naive", 3))
    print(run("numpy.sum", np.sum, big, "fprev", 1))
    print(run("sequential", sequential, big, "fprev", 1))
    print(run("pairwise", pairwise, big, "fprev", 1))
    print(run("8-way, pairwise combine", eight_way, big, "fprev", 1))
    print(run("reverse sequential", reverse, huge, "fprev", 1))


if __name__ == "__main__":
    main()
