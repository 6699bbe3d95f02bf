"""Do the interpreter's enclosures hold what the compiled kernels computed on a GPU? Reads the
``.npz`` of ``gpu_checks.py --sections triton`` (inputs and outputs of the example kernels,
compiled and run on a GPU), reruns each case through the instrumented interpreter on the CPU
under ``fp.track()``, and counts the compiled outputs outside their enclosures (there must be
none), with the largest excess in units of the enclosure's radius, and how many compiled
outputs differ from the interpreter's.

Run (here, on the CPU): ``python benchmarks/gpu_triton_bounds.py gpu_triton.npz``.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: the kernels are interpreted

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpu_triton_cases as cases

import pytest_fpcheck as fp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("npz", type=Path)
    options = parser.parse_args()
    saved = np.load(options.npz)
    runs: dict[tuple[str, int], dict[str, np.ndarray]] = defaultdict(dict)
    for key in saved.files:
        name, seed, *rest = key.split("|")
        runs[(name, int(seed))]["|".join(rest)] = saved[key]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    worst: dict[str, float] = defaultdict(float)
    for (name, _seed), arrays in sorted(runs.items()):
        inputs = {k[3:]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("in|")}
        compiled = arrays["out"].astype(np.float64)
        with fp.track():
            out = cases.launch(name, inputs)
        bounds = fp.bounds_of(out)
        assert bounds is not None, name
        inside = bounds.contains(torch.from_numpy(compiled))
        radius = np.maximum(bounds.radius, np.finfo(np.float64).tiny)
        mid = (bounds.lo + bounds.hi) / 2
        excess = np.abs(compiled - mid) / radius
        counts = totals[name]
        counts[0] += compiled.size
        counts[1] += int((~inside).sum())
        counts[2] += int((compiled != out.double().numpy()).sum())
        counts[3] += 1
        worst[name] = max(worst[name], float(excess.max()))
    print(
        "| kernel | runs | values | outside | worst |compiled - mid| / radius | differ from interpreter |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (values, outside, differ, count) in totals.items():
        print(f"| {name} | {count} | {values} | {outside} | {worst[name]:.3f} | {differ} |")
    sys.exit(1 if any(t[1] for t in totals.values()) else 0)


if __name__ == "__main__":
    main()
