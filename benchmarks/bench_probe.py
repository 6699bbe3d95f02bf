"""The probe campaign (issue 9): fp.probe_matmul against every emulated configuration of the
grid, and the cost of probing real matmuls.

Grid: width 1, 2, 4, 8, 16, 32; extra bits 0-3; rounding nearest-even, toward-zero, down, up;
subnormals keep, flush, flush-inputs, flush-outputs; for each (input, result) format pair below.
A configuration passes when every feature is recovered exactly, except those no input can reach
(subnormal results of float16 products in float32; float8_e4m3fn with flushed inputs), which must
be reported unknown, within 200 calls, and with the revealed tree's fan-out width + 1: the check
of tests/diagnostics/probe/probe_grid.py, which the CI slice uses too.

    python benchmarks/bench_probe.py              # the whole grid (about 3000 probes)
    python benchmarks/bench_probe.py --sample 300 # a seeded sample
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "diagnostics" / "probe"))

from probe_grid import (
    PAIRS,
    ROUNDINGS,
    SUBNORMALS,
    WIDTHS,
    Config,
    emulated,
    mismatches,
)

from pytest_fpcheck.diagnostics.probe import MAX_CALLS, probe_matmul


def check(config: Config) -> tuple[list[str], int, float]:
    """(what the probe got wrong, its calls, its seconds) for one configuration."""
    start = time.perf_counter()
    features = probe_matmul(emulated(config), in_dtype=config[0])
    return mismatches(features, config), features.calls, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of this size")
    args = parser.parse_args()
    grid = [
        (i, o, w, e, r, s)
        for (i, o), w, e, r, s in itertools.product(PAIRS, WIDTHS, range(4), ROUNDINGS, SUBNORMALS)
    ]
    if args.sample:
        rng = np.random.default_rng(7)
        grid = [grid[int(j)] for j in rng.choice(len(grid), size=args.sample, replace=False)]
    failures, calls, times = [], [], []
    for config in grid:
        wrong, n, seconds = check(config)
        calls.append(n)
        times.append(seconds)
        if wrong:
            failures.append((config, wrong))
            print("FAIL", config, wrong, flush=True)
    print(f"configurations: {len(grid)}, recovered exactly: {len(grid) - len(failures)}")
    print(
        f"matmul calls per probe: median {int(np.median(calls))}, max {max(calls)} (budget {MAX_CALLS})"
    )
    print(
        f"seconds per probe: median {np.median(times):.2f}, max {max(times):.2f}, total {sum(times):.0f}"
    )
    for library in ("numpy",):
        for dtype in ("float32", "float16", "bfloat16"):
            start = time.perf_counter()
            features = probe_matmul(np.matmul, in_dtype=dtype)
            print(
                f"{library}.matmul {dtype}: {features.calls} calls, {time.perf_counter() - start:.2f} s"
            )


if __name__ == "__main__":
    main()
