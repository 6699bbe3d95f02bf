"""Sensitivity and cost of module-by-module checks (issue 20, part 2; docs/performance.md).

For each model (nanoGPT, tiny GPT-2, Llama, BERT from ``tests/assertions/models.py``), format
and seed: the correct model is compared with its float64 copy (any Type-II verdict there is a
false alarm); then, for each relative error ``k * u`` (``u`` the unit round-off of the format),
one module drawn at random (any module but the model itself) returns its output times
``1 + k * u``, and the comparison is run again:

* detected: some module call is Type-II (each plant not detected is listed with the planted
  call's resolution: the relative deviation its enclosure would have flagged);
* localised: ``first_bug`` is the planted module;
* end to end: ``classify`` on each floating output of the whole model (BERT's pooled output
  too) in the same run, the worst verdict (never "roundoff" for errors of 64u and more is the
  budget; "inconclusive" is allowed). Each end-to-end
  "roundoff" at 64u or more is listed with the plant's actual deviation of the model output
  (median over the elements of |planted - correct| / |correct|, against the correct model's
  output in the same format; the largest over the outputs) beside the verdicts' resolution.

Cost (budget: the number of module levels, printed, times the floor; leaves only 1.5x):
``compare_modules`` against its floor, one plain run of the reference plus one tracked run of
the model under test (``fp.track()``; and, printed after, with that run tracked a posteriori as
the comparison's replays are) (isolated; and leaves only), ``--repeats`` alternated runs per seed on the
first ``--cost-seeds`` seeds, in thread CPU time on one torch thread with the garbage collector
paused (the development machine is shared: wall time there measures the other jobs;
``--threads`` changes it); the ratio of the medians, and in parentheses of the least runs (on a
loaded machine the short floor meets a quiet moment more often than the longer comparison).
``--errors`` with no value measures the cost alone.

    python benchmarks/bench_module_sensitivity.py --seeds 2 --models nanogpt bert
    python benchmarks/bench_module_sensitivity.py --seeds 3 --errors --repeats 7
"""

from __future__ import annotations

import os

# every compiled kernel built before its first call returns (interval/jit.py): otherwise the
# NumPy twins run until the background compilation ends, and a timing that catches them
# measures the warm-up (about 2x on small models), not the steady state
os.environ.setdefault("FPCHECK_JIT", "eager")

import argparse
import gc
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "assertions"))

import models

import pytest_fpcheck as fp

P = ParamSpec("P")
R = TypeVar("R")

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}


def floor_seconds(
    custom: torch.nn.Module, reference: torch.nn.Module, ids: torch.Tensor, mode: str = "rigorous"
) -> float:
    def floor() -> None:
        with torch.no_grad():
            reference(ids)
            with fp.track(mode=mode):
                custom(ids)

    return timed(floor)[1]


def timed(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> tuple[R, float]:
    """``function(*args, **kwargs)`` and its thread CPU time, the garbage collector paused (as
    ``timeit`` does: a collection belongs to whichever run it falls in)."""
    gc.collect()
    gc.disable()
    try:
        start = time.thread_time()
        result = function(*args, **kwargs)
        return result, time.thread_time() - start
    finally:
        gc.enable()


def costs(
    custom: torch.nn.Module, reference: torch.nn.Module, ids: torch.Tensor, repeats: int
) -> list[tuple[float, float, float, float]]:
    """(floor, floor tracked a posteriori, isolated comparison, leaves only) of ``repeats``
    alternated runs."""
    floor_seconds(custom, reference, ids)  # warm-up: the first tracked run loads the rules
    fp.compare_modules(custom, reference, ids)  # and the casts' and verdicts' first calls
    return [
        (
            floor_seconds(custom, reference, ids),
            floor_seconds(custom, reference, ids, "a_posteriori"),
            timed(fp.compare_modules, custom, reference, ids)[1],
            timed(fp.compare_modules, custom, reference, ids, leaves_only=True)[1],
        )
        for _ in range(repeats)
    ]


def ratios(runs: list[tuple[float, float, float, float]]) -> str:
    """The comparison's and leaves only's cost over the floor (``fp.track()``, the issue's):
    of the medians, and (in parentheses) of the least runs; then over the floor whose tracked
    run is a posteriori, as the comparison's is (medians)."""
    if not runs:
        return "-"
    floor, floor_ap, whole, leaves = zip(*runs, strict=True)
    med = [statistics.median(column) for column in (floor, floor_ap, whole, leaves)]
    least = [min(column) for column in (floor, floor_ap, whole, leaves)]
    return (
        f"{med[2] / med[0]:.2f}x ({least[2] / least[0]:.2f}x)  "
        f"{med[3] / med[0]:.2f}x ({least[3] / least[0]:.2f}x)  "
        f"a posteriori floor: {med[2] / med[1]:.2f}x  {med[3] / med[1]:.2f}x"
    )


def outputs_of(result: object) -> list[torch.Tensor]:
    """The floating tensors a model returns: a tensor, or a ``ModelOutput``'s fields (BERT's
    pooled output too, where a plant in the pooler shows)."""
    if isinstance(result, torch.Tensor):
        return [result]
    assert isinstance(result, dict), type(result)
    return [t for t in result.values() if isinstance(t, torch.Tensor) and t.is_floating_point()]


def median_deviation(planted: torch.Tensor, correct: torch.Tensor) -> float:
    """Median over the elements of |planted - correct| / |correct|."""
    p, c = planted.double(), correct.double()
    return float(((p - c).abs() / c.abs()).nanmedian())


#: the kinds of an end-to-end verdict, from the worst (several outputs: the worst one's)
KINDS = ("bug", "inconclusive", "close", "roundoff", "exact")


def run(
    name: str, dtype: torch.dtype, seeds: int, errors: list[int], repeats: int, cost_seeds: int
) -> dict[str, object]:
    counts: Counter[str] = Counter()
    cost: list[tuple[float, float, float, float]] = []
    missed: list[str] = []
    undetected: list[str] = []
    for seed in range(seeds):
        model = models.MODELS[name](seed)
        ids = models.tokens(seed)
        custom, reference = models.pair(model, dtype)
        if seed < cost_seeds:
            cost += costs(custom, reference, ids, repeats)
        correct = fp.compare_modules(custom, reference, ids)
        counts["correct type-II"] += len(correct.bugs)
        counts["correct calls"] += len(correct.calls)
        counts["correct inconclusive"] += len(correct.inconclusive)
        counts["levels"] = max(counts["levels"], 1 + max(call.depth for call in correct.calls))
        if not errors:
            continue
        with torch.no_grad():
            correct_out = outputs_of(custom(ids))
        paths = [call.path for call in correct.calls if call.path]
        chooser = random.Random(seed)
        for k in errors:
            custom, reference = models.pair(model, dtype)
            site = chooser.choice(paths)
            models.plant_relative_error(custom, site, k * UNIT[dtype])
            comparison = fp.compare_modules(custom, reference, ids)
            counts[f"{k}u planted"] += 1
            counts[f"{k}u detected"] += bool(comparison.bugs)
            first = comparison.first_bug
            counts[f"{k}u localised"] += first is not None and first.path == site
            if not comparison.bugs:
                planted = next(call for call in comparison.calls if call.path == site)
                resolution = planted.resolution
                undetected.append(
                    f"  undetected: {name} {dtype} seed {seed}: {k}u = {k * UNIT[dtype]:.3g} "
                    f"in {site} ({planted.module_class}), its resolution "
                    + ("-" if resolution is None else f"{resolution:.3g}")
                )
            with torch.no_grad():
                with fp.track():
                    out = outputs_of(custom(ids))
                expected = outputs_of(reference(ids))
            verdicts = [fp.classify(o, e) for o, e in zip(out, expected, strict=True)]
            verdict = min(verdicts, key=lambda v: KINDS.index(v.kind))
            counts[f"{k}u end-to-end {verdict.kind}"] += 1
            if k >= 64 and verdict.kind == "roundoff":
                deviation = max(
                    median_deviation(o, c) for o, c in zip(out, correct_out, strict=True)
                )
                resolution = max(v.resolution or 0.0 for v in verdicts)
                missed.append(
                    f"  end to end roundoff: {name} {dtype} seed {seed}: {k}u in {site}: output "
                    f"deviation {deviation:.3g}, resolution {resolution:.3g}"
                )
    return {"counts": counts, "costs": cost, "missed": missed + undetected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.MODELS))
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--errors", nargs="*", type=int, default=[4, 16, 64], help="none: the cost alone"
    )
    parser.add_argument("--repeats", type=int, default=5, help="cost runs per seed (least)")
    parser.add_argument("--cost-seeds", type=int, default=3, help="seeds whose cost is timed")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    print(
        f"torch {torch.__version__}, {options.seeds} seeds, errors {options.errors} u, "
        f"{options.threads} thread(s)"
    )
    header = "model    dtype     Type-II on correct  inconcl. calls"
    for k in options.errors:
        header += f"  {k}u det/loc"
    header += "  e2e roundoff>=64u  levels  cost/floor median (least)  leaves only"
    print(header)
    for name in options.models:
        for dtype_name in options.dtypes:
            result = run(
                name,
                DTYPES[dtype_name],
                options.seeds,
                options.errors,
                options.repeats,
                options.cost_seeds,
            )
            c = result["counts"]
            assert isinstance(c, Counter)
            line = f"{name:8s} {dtype_name:9s} {c['correct type-II']:5d} / {c['correct calls']:<9d}"
            line += f"  {c['correct inconclusive']:5d}"
            for k in options.errors:
                n = c[f"{k}u planted"]
                line += f"  {c[f'{k}u detected']:3d}/{c[f'{k}u localised']:<3d}of {n:<2d}"
            wrong = sum(c[f"{k}u end-to-end roundoff"] for k in options.errors if k >= 64)
            line += f"  {wrong:>17d}  {c['levels']:6d}"
            cost = result["costs"]
            assert isinstance(cost, list)
            line += f"  {ratios(cost)}"
            print(line, flush=True)
            missed = result["missed"]
            assert isinstance(missed, list)
            for entry in missed:
                print(entry, flush=True)


if __name__ == "__main__":
    main()
