"""Where a tracked run spends its time: CPU time per ATen operation of issue 3's benchmark models.

Each operation's time is the thread CPU time of ``Tracker.handle`` for it (the plain kernel, the
interval rule and the record), less that of the operations it runs itself (a substitute's, shown
as ``outer > inner``); the record-keeping alone is shown beside it. Median over
``--repeats`` runs. Run: ``OMP_NUM_THREADS=1 python benchmarks/profile_tracking.py --model block
--dtype float32``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tracking import DTYPES, MODELS

import pytest_fpcheck as fp
from pytest_fpcheck.tracking import track as track_module


def profile(model_name: str, dtype_name: str, repeats: int) -> None:
    model, x = MODELS[model_name](DTYPES[dtype_name])
    handle, record = track_module.Tracker.handle, track_module.Tracker._record
    runs: list[dict[str, float]] = []
    records: list[dict[str, float]] = []
    stack: list[tuple[str, list[float]]] = []  # (label, [children's time]) of open calls

    def timed_handle(self, call, run):  # type: ignore[no-untyped-def]
        label = " > ".join([*(name.split(" > ")[-1] for name, _ in stack[-1:]), call.packet])
        stack.append((label, [0.0]))
        start = time.thread_time()
        try:
            return handle(self, call, run)
        finally:
            spent = time.thread_time() - start
            _, children = stack.pop()
            runs[-1][label] += spent - children[0]
            if stack:
                stack[-1][1][0] += spent

    def timed_record(self, ctx, *args):  # type: ignore[no-untyped-def]
        start = time.thread_time()
        try:
            return record(self, ctx, *args)
        finally:
            records[-1][stack[-1][0]] += time.thread_time() - start

    track_module.Tracker.handle = timed_handle  # type: ignore[method-assign]
    track_module.Tracker._record = timed_record  # type: ignore[method-assign]
    totals = []
    try:
        with torch.no_grad():
            for i in range(repeats + 1):
                runs.append(defaultdict(float))
                records.append(defaultdict(float))
                start = time.thread_time()
                with fp.track():
                    model(x)
                totals.append(time.thread_time() - start)
                if i == 0:  # compilation and first-use costs
                    runs.pop()
                    records.pop()
                    totals.pop()
    finally:
        track_module.Tracker.handle = handle  # type: ignore[method-assign]
        track_module.Tracker._record = record  # type: ignore[method-assign]
    packets = {p for r in runs for p in r}
    rows = sorted(((statistics.median(r[p] for r in runs), p) for p in packets), reverse=True)
    print(f"{model_name} {dtype_name}: tracked run {statistics.median(totals) * 1e3:.1f} ms CPU")
    print(f"{'operation':<60} {'ms':>7} {'record ms':>10}")
    for seconds, packet in rows:
        kept = statistics.median(r[packet] for r in records)
        print(f"{packet:<60} {seconds * 1e3:7.2f} {kept * 1e3:10.2f}")
    print(f"{'(sum of operations)':<60} {sum(s for s, _ in rows) * 1e3:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=sorted(MODELS), default="block")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    profile(options.model, options.dtype, options.repeats)


if __name__ == "__main__":
    main()
