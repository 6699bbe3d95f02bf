"""The probe campaign (issue 9): fp.probe_matmul against every emulated configuration of the
grid, and the cost of probing real matmuls.

Grid: width 1, 2, 4, 8, 16, 32; extra bits 0-3; rounding nearest-even, toward-zero, down, up;
subnormals keep, flush, flush-inputs, flush-outputs; for each (input, result) format pair below.
A configuration passes when every feature is recovered exactly, except those no input can reach
(subnormal results of float16 products in float32; float8_e4m3fn with flushed inputs), which must
be reported unknown. Also records the most matmul calls one probe made (budget: 200).

    python benchmarks/bench_probe.py              # the whole grid (about 3000 probes)
    python benchmarks/bench_probe.py --sample 300 # a seeded sample
"""

from __future__ import annotations

import argparse
import functools
import itertools
import time

import numpy as np

from pytest_fpcheck.diagnostics.probe import MAX_CALLS, probe_matmul
from pytest_fpcheck.emulate import fused_matmul

PAIRS = [
    ("float32", "float32"),
    ("tfloat32", "float32"),
    ("bfloat16", "float32"),
    ("bfloat16", "bfloat16"),
    ("float16", "float16"),
    ("float16", "float32"),
    ("float8_e5m2", "float16"),
    ("float8_e4m3fn", "float16"),
]
WIDTHS = (1, 2, 4, 8, 16, 32)
ROUNDINGS = ("nearest-even", "toward-zero", "down", "up")
SUBNORMALS = ("keep", "flush", "flush-inputs", "flush-outputs")


def hidden(in_dtype: str, out: str, subnormals: str) -> set[str]:
    if (in_dtype, out) == ("float16", "float32"):
        return {"subnormal_outputs"}
    if in_dtype == "float8_e4m3fn" and subnormals in ("flush", "flush-inputs"):
        return {"subnormal_outputs"}
    return set()


def check(config: tuple[str, str, int, int, str, str]) -> tuple[bool, int, float, str]:
    in_dtype, out, width, extra, rounding, subnormals = config
    matmul = functools.partial(
        fused_matmul,
        width=width,
        extra_bits=extra,
        rounding=rounding,
        out_dtype=out,
        subnormals=subnormals,
    )
    start = time.perf_counter()
    features = probe_matmul(matmul, in_dtype=in_dtype)
    seconds = time.perf_counter() - start
    want = {
        "block_width": width,
        "extra_bits": extra,
        "rounding": rounding,
        "subnormal_inputs": subnormals in ("keep", "flush-outputs"),
        "subnormal_outputs": subnormals in ("keep", "flush-inputs"),
        "products_exact": True,
        "accumulator": out,
    }
    wrong = [
        name
        for name, value in want.items()
        if getattr(features, name) != (None if name in hidden(in_dtype, out, subnormals) else value)
    ]
    return not wrong, features.calls, seconds, ", ".join(wrong)


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
        ok, n, seconds, wrong = check(config)
        calls.append(n)
        times.append(seconds)
        if not ok:
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
