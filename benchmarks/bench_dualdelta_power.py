"""Error rates of the dual-delta decision rule.

Run: ``python benchmarks/bench_dualdelta_power.py [--repetitions R]``.

Every repetition is a complete ``dual_delta`` run (n = 1000, alpha = 0.01, max-hybrid metric)
on real float16 arithmetic, with its own input seed:

* ``equal``: custom sums 64 float16 normals left to right in float16, the reference right to
  left. The inputs are i.i.d., so the two error samples are exchangeable: the implementations
  are exactly equally accurate and stable, and every verdict other than "equivalent" is a false
  positive. The rule promises P("custom_less_accurate") <= alpha / 2 and P(assert fails) <=
  alpha.
* ``1.5x``: custom returns oracle + 1.5 * (left-to-right sum - oracle): its error is 1.5 times
  that of an implementation exactly as accurate as the reference. Target: detected as
  "custom_less_accurate" in at least 95 % of repetitions.

The oracle is the correctly rounded sum (``math.fsum`` of the float16 values).

A second, statistics-only study narrows the false-positive rates: the same float16 sums
computed for all trials at once (the float64 sum of 64 float16 values is exact, so it is the
oracle), each pair of error samples passed to ``analyse``, the function that decides the
verdicts; ``--statistics-repetitions`` (default 10000) repetitions without a difference,
``--repetitions`` with the 1.5x one.

Prints each verdict's rate with a 95 % Clopper-Pearson interval, as Markdown for
docs/performance.md.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import binomtest

from pytest_fpcheck.dualdelta import dual_delta
from pytest_fpcheck.dualdelta.statistics import analyse

N_TRIALS = 1000
ALPHA = 0.01
LENGTH = 64


def normals(rng: np.random.Generator) -> tuple[Any, ...]:
    return (rng.standard_normal(LENGTH).astype(np.float16),)


def forward_fp16(x: np.ndarray) -> float:
    return float(np.cumsum(x, dtype=np.float16)[-1])


def backward_fp16(x: np.ndarray) -> float:
    return float(np.cumsum(x[::-1], dtype=np.float16)[-1])


def exact_sum(x: np.ndarray) -> float:
    return math.fsum(x.astype(np.float64).tolist())


def forward_error_times_1_5(x: np.ndarray) -> float:
    exact = exact_sum(x)
    return exact + 1.5 * (forward_fp16(x) - exact)


SCENARIOS: dict[str, Callable[[np.ndarray], float]] = {
    "equal": forward_fp16,
    "1.5x": forward_error_times_1_5,
}


def run(custom: Callable[[np.ndarray], float], repetitions: int) -> tuple[Counter[str], float]:
    verdicts: Counter[str] = Counter()
    start = time.perf_counter()
    for repetition in range(repetitions):
        result = dual_delta(
            custom,
            backward_fp16,
            inputs=normals,
            oracle=exact_sum,
            n=N_TRIALS,
            seed=repetition,
            alpha=ALPHA,
        )
        verdicts[f"accuracy {result.accuracy}"] += 1
        verdicts[f"stability {result.stability}"] += 1
        verdicts["assert_dual_delta fails"] += result.failed
    return verdicts, time.perf_counter() - start


def batched_errors(seed: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The hybrid errors of one repetition's N_TRIALS sums, computed all at once."""
    x = np.random.default_rng(seed).standard_normal((N_TRIALS, LENGTH)).astype(np.float16)
    exact = x.astype(np.float64).sum(axis=1)
    forward = np.cumsum(x, axis=1, dtype=np.float16)[:, -1].astype(np.float64)
    backward = np.cumsum(x[:, ::-1], axis=1, dtype=np.float16)[:, -1].astype(np.float64)
    scaled = 1.0 + np.abs(exact)
    return scale * np.abs(forward - exact) / scaled, np.abs(backward - exact) / scaled


def run_statistics(scale: float, repetitions: int) -> tuple[Counter[str], float]:
    verdicts: Counter[str] = Counter()
    start = time.perf_counter()
    for repetition in range(repetitions):
        custom, reference = batched_errors(repetition, scale)
        analysis = analyse(custom, reference, alpha=ALPHA, seed=repetition)
        verdicts[f"accuracy {analysis.accuracy}"] += 1
        verdicts[f"stability {analysis.stability}"] += 1
        verdicts["assert_dual_delta fails"] += (
            analysis.accuracy == "custom_less_accurate"
            or analysis.stability == "custom_less_stable"
        )
    return verdicts, time.perf_counter() - start


def rate(count: int, total: int) -> str:
    interval = binomtest(count, total).proportion_ci(confidence_level=0.95)
    return f"{count}/{total} = {count / total:.2%} [{interval.low:.2%}, {interval.high:.2%}]"


TARGETS = {
    ("equal", "accuracy custom_less_accurate"): f"<= alpha/2 = {ALPHA / 2}",
    ("equal", "accuracy custom_more_accurate"): f"<= alpha/2 = {ALPHA / 2}",
    ("equal", "stability custom_less_stable"): f"<= alpha/2 = {ALPHA / 2}",
    ("equal", "stability custom_more_stable"): f"<= alpha/2 = {ALPHA / 2}",
    ("equal", "assert_dual_delta fails"): f"<= alpha = {ALPHA}",
    ("1.5x", "accuracy custom_less_accurate"): ">= 95%",
    ("1.5x", "stability custom_less_stable"): "(reported)",
}
SCALES = {"equal": 1.0, "1.5x": 1.5}


def report(name: str, verdicts: Counter[str], total: int, seconds: float) -> None:
    for (scenario, verdict), target in TARGETS.items():
        if scenario == name:
            print(f"| {name} | {verdict} | {rate(verdicts[verdict], total)} | {target} |")
    print(f"| {name} | (time) | {seconds:.0f} s | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--statistics-repetitions", type=int, default=10000)
    options = parser.parse_args()
    total, many = options.repetitions, options.statistics_repetitions
    print("### Dual-delta decision rule: error rates\n")
    print(
        f"Float16 sums of {LENGTH} normals, n = {N_TRIALS} trials, alpha = {ALPHA}. Command: "
        f"`python benchmarks/bench_dualdelta_power.py --repetitions {total} "
        f"--statistics-repetitions {many}`. Rates with 95 % Clopper-Pearson intervals.\n"
    )
    print(f"Complete `dual_delta` runs, {total} repetitions per scenario:\n")
    print("| scenario | verdict | rate | target |")
    print("|---|---|---|---|")
    for name, custom in SCENARIOS.items():
        verdicts, seconds = run(custom, total)
        report(name, verdicts, total, seconds)
    print(
        f"\nStatistics only (`analyse` on batched errors), {many} repetitions without a "
        f"difference and {total} with the 1.5x one:\n"
    )
    print("| scenario | verdict | rate | target |")
    print("|---|---|---|---|")
    for name, scale in SCALES.items():
        repetitions = many if name == "equal" else total
        verdicts, seconds = run_statistics(scale, repetitions)
        report(name, verdicts, repetitions, seconds)


if __name__ == "__main__":
    main()
