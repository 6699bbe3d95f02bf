"""Where a tracked run spends its time: CPU time per ATen operation of issue 3's benchmark models
(their forward pass) or of a zoo model (issue 19: its forward pass and ``loss.backward()``).

Each operation's time is the thread CPU time of ``Tracker.handle`` for it (the plain kernel, the
interval rule and the record), less that of the operations it runs itself (a substitute's or a
decomposition's, shown as ``outer > inner``); the record-keeping alone is shown beside it, and
the count of each per run. Median over ``--repeats`` runs. The last lines: how many operations
the tracker handled and its CPU time per operation beyond the plain run's.

Run: ``OMP_NUM_THREADS=1 python benchmarks/profile_tracking.py --model block --dtype float32``;
a zoo model at its own size: ``--model zoo:gpt2``, or widened as ``bench_zoo.py --hidden``
widens it: ``--model zoo:gpt2 --hidden 256 [--layers 2]``. ``--cprofile N`` prints instead cProfile's N
functions of most own time over one tracked run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_tracking import DTYPES, MODELS

import pytest_fpcheck as fp
from pytest_fpcheck.tracking import track as track_module


def workload(
    model_name: str, dtype_name: str, hidden: int | None, layers: int = 2
) -> Callable[[], None]:
    """The untracked run to profile: a benchmark model's forward pass (no autograd), or a zoo
    model's forward pass and backward."""
    dtype = DTYPES[dtype_name]
    if not model_name.startswith("zoo:"):
        model, x = MODELS[model_name](dtype)

        def forward() -> None:
            with torch.no_grad():
                model(x)

        return forward
    from tests.models.zoo import build, loss_of, scaled

    name = model_name.removeprefix("zoo:")
    if hidden is None:
        zoo_model, batch = build(name, dtype)
    else:
        zoo_model, batch = scaled(name, hidden=hidden, seq=128, batch=4, layers=layers, vocab=1024)
        zoo_model = zoo_model.to(dtype)
    zoo_model.train()

    def step() -> None:
        zoo_model.zero_grad(set_to_none=True)
        loss_of(name, zoo_model, batch).backward()

    return step


def profile(label: str, run: Callable[[], None], repeats: int) -> None:
    handle, record = track_module.Tracker.handle, track_module.Tracker._record
    runs: list[dict[str, float]] = []
    counts: list[dict[str, int]] = []
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
            counts[-1][label] += 1
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
    totals, plain = [], []
    try:
        for i in range(repeats + 1):
            runs.append(defaultdict(float))
            counts.append(defaultdict(int))
            records.append(defaultdict(float))
            start = time.thread_time()
            with fp.track():
                run()
            totals.append(time.thread_time() - start)
            start = time.thread_time()
            run()
            plain.append(time.thread_time() - start)
            if i == 0:  # compilation and first-use costs
                for kept in (runs, counts, records, totals, plain):
                    kept.pop()
    finally:
        track_module.Tracker.handle = handle  # type: ignore[method-assign]
        track_module.Tracker._record = record  # type: ignore[method-assign]
    packets = {p for r in runs for p in r}
    rows = sorted(((statistics.median(r[p] for r in runs), p) for p in packets), reverse=True)
    tracked = statistics.median(totals)
    print(f"{label}: tracked run {tracked * 1e3:.1f} ms CPU")
    print(f"{'operation':<60} {'count':>6} {'ms':>8} {'record ms':>10}")
    for seconds, packet in rows:
        kept = statistics.median(r[packet] for r in records)
        print(f"{packet:<60} {counts[0][packet]:6d} {seconds * 1e3:8.2f} {kept * 1e3:10.2f}")
    print(f"{'(sum of operations)':<60} {'':6} {sum(s for s, _ in rows) * 1e3:8.2f}")
    operations = sum(counts[0].values())
    extra = tracked - statistics.median(plain)
    print(
        f"{operations} operations handled; plain run {statistics.median(plain) * 1e3:.1f} ms CPU; "
        f"the tracker's cost {extra / operations * 1e6:.0f} us per operation"
    )


def top_functions(run: Callable[[], None], count: int) -> None:
    """cProfile's ``count`` functions of most own time over one tracked run (after one to
    warm up)."""
    with fp.track():
        run()
    profiler = cProfile.Profile()
    profiler.enable()
    with fp.track():
        run()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--model", default="block", help=f"{', '.join(sorted(MODELS))}, or zoo:NAME"
    )
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=None, help="a zoo model's width")
    parser.add_argument("--layers", type=int, default=2, help="a widened zoo model's blocks")
    parser.add_argument("--cprofile", type=int, default=0, metavar="N")
    options = parser.parse_args()
    torch.set_num_threads(1)
    run = workload(options.model, options.dtype, options.hidden, options.layers)
    if options.cprofile:
        top_functions(run, options.cprofile)
    else:
        label = f"{options.model} {options.dtype}" + (
            f" hidden {options.hidden}, {options.layers} layers" if options.hidden else ""
        )
        profile(label, run, options.repeats)


if __name__ == "__main__":
    main()
