"""Speed budgets of dual-delta testing (run: ``python benchmarks/bench_dualdelta.py``).

1. The framework's own cost: ``dual_delta`` at n = 1000 on a 128x128x128 fp16 matmul (custom:
   ``a @ b`` in fp16; reference: fp32 product rounded to fp16; oracle: the fp64 oracle of the
   reference) against a bare loop that draws the same inputs, calls the same three functions
   and computes the same max-hybrid metric. Budget: at most 1.1x. The two are run alternately,
   ``--rounds`` times each (default 10); the fastest of each is compared (the minimum is the
   estimate least disturbed by other processes), and the median of the per-round ratios is
   shown beside it.
2. Statistics and plot of n = 100,000 trials (synthetic paired errors): ``analyse`` plus
   ``DualDeltaResult.plot``. Budget: under 5 s.

PyTorch runs single-threaded here (``torch.set_num_threads(1)``) so that timings do not swing
with OpenMP threads waiting for busy cores. Prints a Markdown section for docs/performance.md.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pytest_fpcheck.dualdelta import DualDeltaResult, dual_delta, trial_rng
from pytest_fpcheck.dualdelta.statistics import analyse
from pytest_fpcheck.oracle import fp64_oracle

N_TRIALS = 1000
N_LARGE = 100_000


def custom(a: Any, b: Any) -> Any:
    return a @ b


def reference(a: Any, b: Any) -> Any:
    return (a.float() @ b.float()).half()


def inputs(rng: np.random.Generator) -> tuple[Any, Any]:
    a = torch.from_numpy(rng.standard_normal((128, 128), dtype=np.float32)).half()
    b = torch.from_numpy(rng.standard_normal((128, 128), dtype=np.float32)).half()
    return a, b


ORACLE = fp64_oracle(reference)


def bare_loop(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 without the framework: same inputs, functions and metric."""
    delta_custom, delta_reference = np.empty(n), np.empty(n)
    for trial in range(n):
        args = inputs(trial_rng(0, trial))
        y_custom, y_reference = custom(*args), reference(*args)
        exact = ORACLE(*args).numpy()
        scale = 1.0 + np.abs(exact)
        delta_custom[trial] = np.max(np.abs(y_custom.double().numpy() - exact) / scale)
        delta_reference[trial] = np.max(np.abs(y_reference.double().numpy() - exact) / scale)
    return delta_custom, delta_reference


def framework(n: int) -> DualDeltaResult:
    return dual_delta(custom, reference, inputs=inputs, oracle=ORACLE, n=n)


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def overhead(rounds: int) -> tuple[float, float, float, bool]:
    """Fastest bare loop, fastest framework run, the median of the per-round ratios, and
    whether both computed the same deltas."""
    bare_loop(50)
    framework(50)
    bare_times, framework_times = [], []
    same = True
    for _ in range(rounds):
        seconds, deltas = timed(lambda: bare_loop(N_TRIALS))
        bare_times.append(seconds)
        seconds, result = timed(lambda: framework(N_TRIALS))
        framework_times.append(seconds)
        same = same and np.array_equal(deltas[0], result.delta_custom)
    ratios = [full / bare for full, bare in zip(framework_times, bare_times, strict=True)]
    return min(bare_times), min(framework_times), float(np.median(ratios)), same


def large_analysis(rounds: int) -> float:
    rng = np.random.default_rng(0)
    difficulty = rng.lognormal(0.0, 0.5, N_LARGE)
    delta_reference = 4.6e-4 * difficulty * rng.lognormal(0.0, 0.1, N_LARGE)
    delta_custom = 1.1 * 4.6e-4 * difficulty * rng.lognormal(0.0, 0.1, N_LARGE)
    best = float("inf")
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(rounds):
            start = time.perf_counter()
            analysis = analyse(delta_custom, delta_reference, alpha=0.01, seed=0)
            result = DualDeltaResult(
                delta_custom=delta_custom,
                delta_reference=delta_reference,
                stats=analysis.stats,
                tests=analysis.tests,
                mean_ratio=analysis.mean_ratio,
                accuracy=analysis.accuracy,
                stability=analysis.stability,
                accuracy_test=analysis.accuracy_test,
                alpha=0.01,
                seed=0,
                oracle="synthetic",
                metric="max_hybrid",
                custom="custom",
                reference="reference",
            )
            result.summary()
            result.plot(Path(folder) / "large.png")
            best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    options = parser.parse_args()
    torch.set_num_threads(1)
    bare, full, median_ratio, same = overhead(options.rounds)
    large = large_analysis(max(2, options.rounds // 2))
    ratio = full / bare
    print("### Dual-delta testing\n")
    print(
        f"Machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, torch {torch.__version__} (1 thread). "
        "Command: `python benchmarks/bench_dualdelta.py`.\n"
    )
    print("| measurement | budget | measured |")
    print("|---|---|---|")
    print(
        f"| `dual_delta`, n = {N_TRIALS}, 128x128x128 fp16 matmul, fp64 oracle, vs. a bare loop "
        f"(fastest of {options.rounds}) | <= 1.1x | {full:.2f} s vs {bare:.2f} s = "
        f"**{ratio:.3f}x** (median of the per-round ratios {median_ratio:.3f}x)"
        f"{'' if same else ' DELTAS DIFFER'} |"
    )
    print(f"| statistics + summary + plot, n = {N_LARGE:,} trials | < 5 s | **{large:.2f} s** |")
    verdict = "within" if ratio <= 1.1 and large < 5.0 else "OVER"
    print(f"\nBoth budgets: {verdict}.")


if __name__ == "__main__":
    main()
