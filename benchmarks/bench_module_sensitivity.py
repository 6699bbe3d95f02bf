"""Sensitivity and cost of module-by-module checks (issue 20, part 2; docs/performance.md).

For each model (nanoGPT, tiny GPT-2, Llama, BERT from ``tests/assertions/models.py``), format
and seed: the correct model is compared with its float64 copy (any Type-II verdict there is a
false alarm); then, for each relative error ``k * u`` (``u`` the unit round-off of the format),
one module drawn at random (any module but the model itself) returns its output times
``1 + k * u``, and the comparison is run again:

* detected: some module call is Type-II (each plant not detected is listed with the planted
  call's resolution: the relative deviation its enclosure would have flagged);
* localised: ``first_bug`` is the planted module;
* end to end: ``classify`` on the whole model's output of the same run (never "roundoff" for
  errors of 64u and more is the budget; "inconclusive" is allowed). Each end-to-end
  "roundoff" at 64u or more is listed with the plant's actual deviation of the model output
  (median over the elements of |planted - correct| / |correct|, against the correct model's
  output in the same format) beside the verdict's resolution.

Cost (budget: the number of module levels, printed, times the floor; leaves only 1.5x):
``compare_modules`` against its floor, one plain run of the reference plus one tracked run of
the model under test (isolated; and leaves only), each the least of ``--repeats`` alternated
runs per seed on the first ``--cost-seeds`` seeds, in thread CPU time on one torch thread (the
development machine is shared: wall time there measures the other jobs; ``--threads`` changes
it).

    python benchmarks/bench_module_sensitivity.py --seeds 2 --models nanogpt bert
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "assertions"))

import models

import pytest_fpcheck as fp

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}


def floor_seconds(custom: torch.nn.Module, reference: torch.nn.Module, ids: torch.Tensor) -> float:
    start = time.thread_time()
    with torch.no_grad():
        reference(ids)
        with fp.track():
            custom(ids)
    return time.thread_time() - start


def timed(function, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.thread_time()
    result = function(*args, **kwargs)
    return result, time.thread_time() - start


def costs(
    custom: torch.nn.Module, reference: torch.nn.Module, ids: torch.Tensor, repeats: int
) -> tuple[float, float, float]:
    """(floor, isolated comparison, leaves only): the least of ``repeats`` alternated runs."""
    floor_seconds(custom, reference, ids)  # warm-up: the first tracked run loads the rules
    fp.compare_modules(custom, reference, ids)  # and the casts' and verdicts' first calls
    runs = [
        (
            floor_seconds(custom, reference, ids),
            timed(fp.compare_modules, custom, reference, ids)[1],
            timed(fp.compare_modules, custom, reference, ids, leaves_only=True)[1],
        )
        for _ in range(repeats)
    ]
    floor, whole, leaves = (min(column) for column in zip(*runs, strict=True))
    return floor, whole, leaves


def output_of(result: object) -> torch.Tensor:
    hidden = getattr(result, "last_hidden_state", None)
    return hidden if isinstance(hidden, torch.Tensor) else result  # type: ignore[return-value]


def median_deviation(planted: torch.Tensor, correct: torch.Tensor) -> float:
    """Median over the elements of |planted - correct| / |correct|."""
    p, c = planted.double(), correct.double()
    return float(((p - c).abs() / c.abs()).nanmedian())


def run(
    name: str, dtype: torch.dtype, seeds: int, errors: list[int], repeats: int, cost_seeds: int
) -> dict[str, object]:
    counts: Counter[str] = Counter()
    cost: list[tuple[float, float, float]] = []
    missed: list[str] = []
    undetected: list[str] = []
    for seed in range(seeds):
        model = models.MODELS[name](seed)
        ids = models.tokens(seed)
        custom, reference = models.pair(model, dtype)
        if seed < cost_seeds:
            cost.append(costs(custom, reference, ids, repeats))
        correct = fp.compare_modules(custom, reference, ids)
        counts["correct type-II"] += len(correct.bugs)
        counts["correct calls"] += len(correct.calls)
        counts["correct inconclusive"] += len(correct.inconclusive)
        counts["levels"] = max(counts["levels"], 1 + max(call.depth for call in correct.calls))
        with torch.no_grad():
            correct_out = output_of(custom(ids))
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
                    out = output_of(custom(ids))
                expected = output_of(reference(ids))
            verdict = fp.classify(out, expected)
            counts[f"{k}u end-to-end {verdict.kind}"] += 1
            if k >= 64 and verdict.kind == "roundoff":
                missed.append(
                    f"  end to end roundoff: {name} {dtype} seed {seed}: {k}u in {site}: output deviation "
                    f"{median_deviation(out, correct_out):.3g}, resolution {verdict.resolution:.3g}"
                )
    return {"counts": counts, "costs": cost, "missed": missed + undetected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.MODELS))
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--errors", nargs="+", type=int, default=[4, 16, 64])
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
    header += "  e2e roundoff>=64u  cost/floor (leaves)  levels"
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
            line += f"  {wrong:>17d}"
            costs = result["costs"]
            assert isinstance(costs, list)
            floor = sum(f for f, _, _ in costs)
            whole = sum(w for _, w, _ in costs)
            leaves = sum(leaf for _, _, leaf in costs)
            line += f"  {whole / floor:6.2f}x ({leaves / floor:.2f}x)  {c['levels']:6d}"
            print(line, flush=True)
            missed = result["missed"]
            assert isinstance(missed, list)
            for entry in missed:
                print(entry, flush=True)


if __name__ == "__main__":
    main()
