"""Statistics of two paired error samples and the decision rule: each test against an
independent computation, the direction conventions, degenerate samples, and a seeded slice of
the error-rate study (the full study: benchmarks/bench_dualdelta_power.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_fpcheck.dualdelta.statistics import analyse, describe, mean_ratio

ALPHA = 0.01


def lognormal_pair(
    seed: int, n: int, scale: float, spread: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Paired positive errors: a shared input difficulty times independent noise."""
    rng = np.random.default_rng(seed)
    difficulty = rng.lognormal(0.0, 0.5, n)
    reference = difficulty * rng.lognormal(0.0, 0.3, n)
    custom = scale * difficulty * rng.lognormal(0.0, 0.3 * spread, n)
    return custom, reference


def fp16_summation_errors(seed: int, n: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Hybrid errors of summing 64 float16 normals forward (custom, scaled) and backward
    (reference) in float16: exchangeable errors when scale == 1."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 64)).astype(np.float16)
    exact = x.astype(np.float64).sum(axis=1)
    forward = np.zeros(n, np.float16)
    backward = np.zeros(n, np.float16)
    for j in range(64):
        forward = forward + x[:, j]
        backward = backward + x[:, 63 - j]
    scaled = 1.0 + np.abs(exact)
    custom = scale * np.abs(forward.astype(np.float64) - exact) / scaled
    return custom, np.abs(backward.astype(np.float64) - exact) / scaled


def test_describe_matches_numpy() -> None:
    x = np.arange(1.0, 101.0)
    assert describe(x) == {
        "mean": 50.5,
        "median": 50.5,
        "std": float(np.std(x, ddof=1)),
        "p50": 50.5,
        "p90": float(np.percentile(x, 90)),
        "p95": float(np.percentile(x, 95)),
        "p99": float(np.percentile(x, 99)),
        "max": 100.0,
    }
    assert describe(x)["p90"] == pytest.approx(90.1)


def test_location_tests_point_the_right_way() -> None:
    custom, reference = lognormal_pair(0, 400, scale=1.3)
    tests = analyse(custom, reference, alpha=ALPHA, seed=0).tests
    diff = custom - reference
    assert tests["wilcoxon"].pvalue_greater == stats.wilcoxon(diff, alternative="greater").pvalue
    assert tests["wilcoxon"].pvalue_less == stats.wilcoxon(diff, alternative="less").pvalue
    assert tests["wilcoxon"].statistic == stats.wilcoxon(diff, alternative="greater").statistic
    assert tests["wilcoxon"].pvalue_greater < 1e-10 < 0.99 < tests["wilcoxon"].pvalue_less
    positive = int(np.sum(diff > 0))
    assert tests["sign"].statistic == positive
    assert (
        tests["sign"].pvalue_greater == stats.binomtest(positive, 400, alternative="greater").pvalue
    )
    t = stats.ttest_rel(custom, reference, alternative="greater")
    assert tests["t"].statistic == pytest.approx(t.statistic, rel=1e-12)
    assert tests["t"].pvalue_greater == pytest.approx(t.pvalue, rel=1e-9)
    ks = stats.ks_2samp(custom, reference, alternative="less", method="asymp")
    assert tests["ks"].pvalue_greater == ks.pvalue
    assert tests["ks"].pvalue_greater < 0.01 < tests["ks"].pvalue_less


def robust_score_t(custom: np.ndarray, reference: np.ndarray) -> float:
    """OLS slope of D on S over its HC0 standard error computed from the residuals under the
    null (slope 0), written as the textbook sandwich."""
    s, d = custom + reference, custom - reference
    x = np.column_stack([np.ones_like(s), s])
    bread = np.linalg.inv(x.T @ x)
    slope = (bread @ x.T @ d)[1]
    null_residuals = d - d.mean()
    meat = x.T @ (x * (null_residuals**2)[:, None])
    return float(slope / math.sqrt((bread @ meat @ bread)[1, 1]))


def test_variance_test_is_the_robust_pitman_morgan_score_test() -> None:
    custom, reference = lognormal_pair(1, 1000, scale=1.0, spread=4.0)
    result = analyse(custom, reference, alpha=ALPHA, seed=0)
    variance = result.tests["variance"]
    assert variance.statistic == pytest.approx(robust_score_t(custom, reference), rel=1e-9)
    assert variance.pvalue_greater == pytest.approx(stats.t.sf(variance.statistic, 998), rel=1e-9)
    assert variance.pvalue_greater < ALPHA / 2
    assert result.stability == "custom_less_stable"
    assert variance.role == "primary: stability"


def test_a_constant_shift_keeps_the_variance() -> None:
    reference = np.random.default_rng(6).permutation(200) / 64
    result = analyse(reference + 0.25, reference, alpha=ALPHA, seed=0)
    assert result.tests["variance"].statistic == 0.0
    assert result.stability == "equivalent"


def test_classic_pitman_morgan_is_the_correlation_t_test() -> None:
    custom, reference = lognormal_pair(2, 200, scale=1.0, spread=0.5)
    r = stats.pearsonr(custom + reference, custom - reference).statistic
    expected = r * math.sqrt(198 / (1 - r * r))
    classic = analyse(custom, reference, alpha=ALPHA, seed=0).tests["pitman_morgan"]
    assert classic.statistic == pytest.approx(expected, rel=1e-9)
    assert classic.pvalue_less == pytest.approx(stats.t.cdf(expected, 198), rel=1e-9)


def test_wilcoxon_decides_when_differences_are_not_normal() -> None:
    custom, reference = lognormal_pair(3, 500, scale=1.2)
    result = analyse(custom, reference, alpha=ALPHA, seed=0)
    assert result.tests["shapiro"].pvalue < ALPHA
    assert result.accuracy_test == "wilcoxon"
    assert result.tests["wilcoxon"].role == "primary: accuracy"
    assert result.tests["t"].role == "not used"
    assert result.tests["t"].note == "normality rejected"
    assert result.accuracy == "custom_less_accurate"


def test_t_test_decides_when_differences_look_normal() -> None:
    rng = np.random.default_rng(4)
    reference = 10.0 + rng.standard_normal(300)
    custom = reference + rng.normal(-0.3, 1.0, 300)
    result = analyse(custom, reference, alpha=ALPHA, seed=0)
    assert result.tests["shapiro"].pvalue >= ALPHA
    assert result.tests["shapiro"].note == "not rejected at alpha"
    assert result.accuracy_test == "t"
    assert result.tests["t"].role == "primary: accuracy"
    assert result.accuracy == "custom_more_accurate"


def test_identical_errors_are_equivalent() -> None:
    errors = np.linspace(1e-4, 2e-4, 50)
    result = analyse(errors, errors.copy(), alpha=ALPHA, seed=0)
    assert (result.accuracy, result.stability) == ("equivalent", "equivalent")
    assert result.tests["wilcoxon"].pvalue == 1.0
    assert result.tests["wilcoxon"].note == "all paired differences are zero"
    assert result.tests["variance"].pvalue_greater == 1.0
    assert result.tests["variance"].note == "all paired differences are zero"
    assert result.tests["shapiro"].role == "not applicable"
    assert result.mean_ratio.estimate == 1.0


def test_two_trials_give_no_verdict() -> None:
    result = analyse(np.array([1.0, 3.0]), np.array([1.0, 2.0]), alpha=ALPHA, seed=0)
    assert (result.accuracy, result.stability) == ("equivalent", "equivalent")
    assert result.tests["variance"].note == "needs at least 3 trials"


def test_constant_excess_is_less_accurate() -> None:
    reference = np.arange(40) / 8
    result = analyse(reference + 0.5, reference, alpha=ALPHA, seed=0)
    assert result.accuracy == "custom_less_accurate"
    assert result.tests["t"].note == "the differences are constant"


def test_mean_ratio_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    custom, reference = lognormal_pair(5, 300, scale=1.5)
    first = mean_ratio(custom, reference, confidence=0.99, seed=11)
    assert first == mean_ratio(custom, reference, confidence=0.99, seed=11)
    assert first != mean_ratio(custom, reference, confidence=0.99, seed=12)
    assert first.low < first.estimate < first.high
    assert first.estimate == pytest.approx(custom.mean() / reference.mean())
    exact = mean_ratio(2 * reference, reference, confidence=0.99, seed=0)
    assert exact.low == pytest.approx(2.0)
    assert exact.high == pytest.approx(2.0)


def test_mean_ratio_of_zero_reference_errors() -> None:
    ratio = mean_ratio(np.ones(5), np.zeros(5), confidence=0.9, seed=0)
    assert ratio.estimate == math.inf
    both_zero = mean_ratio(np.zeros(5), np.zeros(5), confidence=0.9, seed=0)
    assert math.isnan(both_zero.estimate)
    assert math.isnan(both_zero.low)


def test_error_rates_on_a_seeded_slice() -> None:
    """20 repetitions at n = 1000: no false "less accurate" with exchangeable errors, and an
    error 1.5x the reference's always detected (the full study has 1000 repetitions)."""
    false_alarms = 0
    detected = 0
    for repetition in range(20):
        custom, reference = fp16_summation_errors(repetition, 1000, scale=1.0)
        false_alarms += (
            analyse(custom, reference, alpha=ALPHA, seed=0).accuracy == "custom_less_accurate"
        )
        custom, reference = fp16_summation_errors(100 + repetition, 1000, scale=1.5)
        detected += (
            analyse(custom, reference, alpha=ALPHA, seed=0).accuracy == "custom_less_accurate"
        )
    assert false_alarms == 0
    assert detected == 20
