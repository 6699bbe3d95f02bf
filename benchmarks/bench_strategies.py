"""Budget (strategies issue): the strategies draw at least 10,000 float16 or bfloat16 values per
second.

Every figure is taken the public way: a ``@given`` test run under
``settings(max_examples=N, database=None, phases=[Phase.generate], deadline=None)`` that counts
the values it receives; the rate is values received / wall time of the run, so it includes
Hypothesis' own engine. The best of ``--repeats`` runs is shown. Three ways of drawing:

* ``arrays(dtype, 1000)``: whole arrays (the bulk route);
* ``lists(floats_on_grid(dtype), 100)``: scalars, 100 per test case;
* ``floats_on_grid(dtype)``: one scalar per test case (bounded by Hypothesis' per-test-case cost).

Hypothesis' own ``floats(width=16)`` and ``extra.numpy.arrays(float16, 1000)`` are measured in the
same run as the floor to compare against.

Run: ``python benchmarks/bench_strategies.py [--examples 300] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as xnp

from pytest_fpcheck import strategies as fst

BUDGET = 10_000.0
ARRAY_SIZE = 1000
LIST_SIZE = 100


def values_per_second(
    strategy: st.SearchStrategy[Any], count: Callable[[Any], int], examples: int, repeats: int
) -> float:
    """The best rate over ``repeats`` runs of a @given test that counts what it receives."""
    best = 0.0
    for _ in range(repeats):
        received = 0

        @settings(max_examples=examples, database=None, phases=[Phase.generate], deadline=None)
        @given(strategy)
        def receive(value: Any) -> None:
            nonlocal received
            received += count(value)

        start = time.perf_counter()
        receive()
        best = max(best, received / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: list[tuple[str, st.SearchStrategy[Any], Callable[[Any], int], bool]] = []
    for dtype in ("float16", "bfloat16", "float8_e4m3fn", "float32", "float64"):
        budgeted = dtype in ("float16", "bfloat16")
        runs += [
            (f"fst.arrays({dtype!r}, {ARRAY_SIZE})", fst.arrays(dtype, ARRAY_SIZE), len, budgeted),
            (
                f"lists(fst.floats_on_grid({dtype!r}), {LIST_SIZE})",
                st.lists(fst.floats_on_grid(dtype), min_size=LIST_SIZE, max_size=LIST_SIZE),
                len,
                budgeted,
            ),
            (f"fst.floats_on_grid({dtype!r})", fst.floats_on_grid(dtype), lambda _: 1, False),
        ]
    runs += [
        (
            f"floor: xnp.arrays(float16, {ARRAY_SIZE})",
            xnp.arrays(np.float16, ARRAY_SIZE),
            len,
            False,
        ),
        (
            f"floor: lists(st.floats(width=16), {LIST_SIZE})",
            st.lists(st.floats(width=16), min_size=LIST_SIZE, max_size=LIST_SIZE),
            len,
            False,
        ),
        ("floor: st.floats(width=16)", st.floats(width=16), lambda _: 1, False),
    ]
    print(f"{args.examples} test cases per run, best of {args.repeats} runs")
    print(f"| strategy | values / s | budget {BUDGET:,.0f} / s |")
    print("|---|---:|---|")
    for label, strategy, count, budgeted in runs:
        rate = values_per_second(strategy, count, args.examples, args.repeats)
        verdict = ("within" if rate >= BUDGET else "BELOW") if budgeted else ""
        print(f"| `{label}` | {rate:,.0f} | {verdict} |")


if __name__ == "__main__":
    main()
