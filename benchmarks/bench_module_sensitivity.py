"""Sensitivity and cost of module-by-module checks (issue 20, part 2; docs/performance.md).

For each model (nanoGPT, tiny GPT-2, Llama, BERT from ``tests/assertions/models.py``), format
and seed: the correct model is compared with its float64 copy (any Type-II verdict there is a
false alarm); then, for each relative error ``k * u`` (``u`` the unit round-off of the format),
one module drawn at random (any module but the model itself) returns its output times
``1 + k * u``, and the comparison is run again:

* detected: some module call is Type-II;
* localised: ``first_bug`` is the planted module;
* end to end: ``classify`` on the whole model's output of the same run (never "roundoff" for
  errors of 64u and more is the budget; "inconclusive" is allowed).

Cost: ``compare_modules`` against its floor, one plain run of the reference plus one tracked run
of the model under test, measured in the same process (isolated; and leaves only).

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
    start = time.perf_counter()
    with torch.no_grad():
        reference(ids)
        with fp.track():
            custom(ids)
    return time.perf_counter() - start


def timed(function, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def run(name: str, dtype: torch.dtype, seeds: int, errors: list[int]) -> dict[str, object]:
    counts: Counter[str] = Counter()
    costs: list[tuple[float, float, float]] = []
    for seed in range(seeds):
        model = models.MODELS[name](seed)
        ids = models.tokens(seed)
        custom, reference = models.pair(model, dtype)
        floor_seconds(custom, reference, ids)  # warm-up: the first tracked run loads the rules
        floor = floor_seconds(custom, reference, ids)
        correct, whole = timed(fp.compare_modules, custom, reference, ids)
        _, leaves = timed(fp.compare_modules, custom, reference, ids, leaves_only=True)
        costs.append((floor, whole, leaves))
        counts["correct type-II"] += len(correct.bugs)
        counts["correct calls"] += len(correct.calls)
        counts["correct inconclusive"] += len(correct.inconclusive)
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
            with torch.no_grad():
                with fp.track():
                    out = custom(ids)
                expected = reference(ids)
            if hasattr(out, "last_hidden_state"):
                out, expected = out.last_hidden_state, expected.last_hidden_state
            kind = fp.classify(out, expected).kind
            counts[f"{k}u end-to-end {kind}"] += 1
    return {"counts": counts, "costs": costs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(models.MODELS))
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--errors", nargs="+", type=int, default=[4, 16, 64])
    options = parser.parse_args()
    print(f"torch {torch.__version__}, {options.seeds} seeds, errors {options.errors} u")
    header = "model    dtype     Type-II on correct  inconcl. calls"
    for k in options.errors:
        header += f"  {k}u det/loc"
    header += "  e2e roundoff>=64u  cost/floor (leaves)"
    print(header)
    for name in options.models:
        for dtype_name in options.dtypes:
            result = run(name, DTYPES[dtype_name], options.seeds, options.errors)
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
            line += f"  {whole / floor:6.2f}x ({leaves / floor:.2f}x)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
