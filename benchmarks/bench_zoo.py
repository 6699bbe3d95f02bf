"""The model zoo's tracked forward and backward passes against the plain ones (issue 19).

For each model of ``tests/models/zoo.py`` (tiny configurations, random weights): the median
wall time of the forward pass plus ``loss.backward()`` run plainly, under ``fp.track()``, and
the floor of ``bench_tracking.py`` (the plain run plus two float64 matmuls of the same shapes
for every matmul-class operation, attention's two products included, forward and backward).
Budget: tracked at most 1.5x the floor. Run:
``python benchmarks/bench_zoo.py [--models gpt2,llama] [--dtype float32] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tracking import MatmulShapes, interleaved_medians  # noqa: E402

import pytest_fpcheck as fp  # noqa: E402
from tests.models.zoo import MODELS, build, loss_of  # noqa: E402


def measure(name: str, dtype: torch.dtype, repeats: int) -> dict[str, float]:
    model, batch = build(name, dtype)
    model.train()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss_of(name, model, batch).backward()

    recorder = MatmulShapes()
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
        with fp.track():
            step()

    medians = interleaved_medians(
        {"plain": step, "matmuls": two_f64_matmuls, "tracked": tracked}, repeats
    )
    floor = medians["plain"] + medians["matmuls"]
    return {
        "plain_s": medians["plain"],
        "floor_s": floor,
        "tracked_s": medians["tracked"],
        "tracked_over_plain": medians["tracked"] / medians["plain"],
        "tracked_over_floor": medians["tracked"] / floor,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, 1 thread, load average {os.getloadavg()[0]:.1f}, {args.dtype}"
    )
    print(f"{'model':<9} {'plain':>9} {'floor':>9} {'tracked':>9} {'tr/plain':>9} {'tr/floor':>9}")
    results = {}
    for name in args.models.split(","):
        r = measure(name, getattr(torch, args.dtype), args.repeats)
        results[name] = r
        print(
            f"{name:<9} {r['plain_s'] * 1e3:7.1f}ms {r['floor_s'] * 1e3:7.1f}ms "
            f"{r['tracked_s'] * 1e3:7.1f}ms {r['tracked_over_plain']:8.1f}x "
            f"{r['tracked_over_floor']:8.1f}x",
            flush=True,
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
