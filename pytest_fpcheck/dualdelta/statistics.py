"""The statistics of a dual-delta test and the rule that turns them into verdicts.

Dual-Delta paper, section 4. With Delta_c (custom) and Delta_r (reference) the per-trial errors
against the oracle, paired by input, and D = Delta_c - Delta_r:

Descriptive (section 4.1), per side: mean, median, std (n - 1 in the denominator), the
percentiles p50, p90, p95, p99 (linear interpolation) and max.

Tests (section 4.3). For each, "greater" means the custom side is larger (larger errors, or a
larger variance), "less" the reverse; ``pvalue`` is two-sided.

* ``ks``: two-sample Kolmogorov-Smirnov test of equal distributions (it ignores the pairing;
  asymptotic p-values, which are exact enough for supporting evidence and never fail);
* ``wilcoxon``: Wilcoxon signed-rank test of D (zero differences dropped, as in Wilcoxon's
  original procedure); the statistic is W+, the rank sum of the positive differences;
* ``sign``: sign test, the number of positive differences among the non-zero ones against
  Binomial(m, 1/2); the statistic is that number;
* ``shapiro``: Shapiro-Wilk test of normality of D (on at most 5000 evenly spaced differences,
  where its p-value is accurate);
* ``t``: paired t-test of D;
* ``variance``: Pitman-Morgan test of equal variances for paired samples, in a robust form.
  With S = Delta_c + Delta_r, Var(Delta_c) - Var(Delta_r) = Cov(S, D); the statistic is the sum
  of the centred products, T = sum_i (S_i - mean S)(D_i - mean D), divided by its
  heteroscedasticity-consistent standard error under the null, sqrt(sum_i of their squares)
  (White's robust score test of the slope of D on S), against t(n - 2). Unlike the classic test
  it needs no normality, which errors rarely have: the classic test does not hold its level
  for non-normal errors (R. R. Wilcox, "Comparing the variances of two dependent variables",
  J. Statistical Distributions and Applications 2:7, 2015). For equally accurate
  implementations the products are symmetric about 0 and T is a self-normalised sum, which
  errs on the conservative side (Efron 1969, "Student's t-test under symmetry conditions");
* ``pitman_morgan``: the classic Pitman-Morgan test (Pearson correlation of S and D, t(n - 2)),
  valid for bivariate normal errors; reported for comparison.

Besides, ``mean_ratio``: mean(Delta_c) / mean(Delta_r) with a paired percentile bootstrap
confidence interval at level 1 - alpha (1000 resamples of the trial pairs, generator seeded
from ``seed``, empirical quantiles without interpolation).

Decision rule (Propositions 1-3 of the paper), at level alpha:

1. Accuracy. The location test is the paired t-test when Shapiro-Wilk does not reject normality
   of D at alpha (and D is not constant), otherwise the Wilcoxon signed-rank test (the paper's
   default for non-normal errors). ``accuracy`` is ``"custom_less_accurate"`` when its one-sided
   p-value for "greater" is below alpha / 2, ``"custom_more_accurate"`` when the one for "less"
   is, and ``"equivalent"`` otherwise.
2. Stability. Likewise with the robust Pitman-Morgan test: ``"custom_less_stable"``,
   ``"custom_more_stable"`` or ``"equivalent"``.
3. The KS and sign tests and the classic Pitman-Morgan test are supporting evidence, shown but
   not deciding: KS ignores the pairing and would give away the power the pairing brings.

Splitting alpha between the two directions makes each verdict a two-sided test at level alpha:
when the implementations are equally accurate, a verdict other than "equivalent" has
probability at most alpha and "custom_less_accurate" at most alpha / 2; likewise for
stability. :func:`~pytest_fpcheck.dualdelta.run.assert_dual_delta` fails on
"custom_less_accurate" or "custom_less_stable", so for equally accurate and stable
implementations it fails with probability at most alpha / 2 + alpha / 2 = alpha (union bound).
These bounds are nominal: the p-values are large-sample approximations. Measured rates
(``benchmarks/bench_dualdelta_power.py``, 10000 repetitions at n = 1000, alpha = 0.01): 0.63 %
and 0.40 % for the two accuracy directions, 0.28 % and 0.24 % for stability, 0.90 % failures.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Analysis", "MeanRatio", "TestResult", "analyse", "describe", "json_value", "mean_ratio"]

Array = NDArray[np.float64]
PERCENTILES = (50, 90, 95, 99)
BOOTSTRAP_RESAMPLES = 1000
SHAPIRO_LIMIT = 5000
_BOOTSTRAP_KEY = 1


@dataclass(frozen=True)
class TestResult:
    """One hypothesis test: its statistic and p-values ("greater": the custom side larger).

    ``role`` says how the decision rule used it; ``note`` why a test could not be applied."""

    __test__ = False  # not a pytest test class

    name: str
    statistic: float
    pvalue: float
    pvalue_greater: float | None
    pvalue_less: float | None
    role: str = "supporting"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (non-finite numbers as None)."""
        result: dict[str, Any] = json_value(asdict(self))
        return result


@dataclass(frozen=True)
class MeanRatio:
    """mean(Delta_c) / mean(Delta_r) with its bootstrap confidence interval [low, high]."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (non-finite numbers as None)."""
        result: dict[str, Any] = json_value(asdict(self))
        return result


@dataclass(frozen=True)
class Analysis:
    """Everything :func:`analyse` finds: statistics, tests, verdicts."""

    stats: dict[str, dict[str, float]]
    tests: dict[str, TestResult]
    mean_ratio: MeanRatio
    accuracy: str
    stability: str
    accuracy_test: str


def json_value(value: Any) -> Any:
    """``value`` for JSON: non-finite floats become None, dicts are converted item by item."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    return value


def describe(deltas: Array) -> dict[str, float]:
    """mean, median, std (ddof 1), p50, p90, p95, p99 and max of one side's errors."""
    percentiles = np.percentile(deltas, PERCENTILES)
    stats = {
        "mean": float(np.mean(deltas)),
        "median": float(np.median(deltas)),
        "std": float(np.std(deltas, ddof=1)),
    }
    stats.update({f"p{q}": float(v) for q, v in zip(PERCENTILES, percentiles, strict=True)})
    stats["max"] = float(np.max(deltas))
    return stats


def _two_sided(greater: float, less: float) -> float:
    return min(1.0, 2.0 * min(greater, less))


def _ks(custom: Array, reference: Array) -> TestResult:
    from scipy.stats import ks_2samp

    both = ks_2samp(custom, reference, method="asymp")
    # scipy's "less" alternative: the first sample's CDF lies below, i.e. its values are larger.
    greater = ks_2samp(custom, reference, alternative="less", method="asymp")
    less = ks_2samp(custom, reference, alternative="greater", method="asymp")
    return TestResult(
        "Kolmogorov-Smirnov (2-sample)",
        float(both.statistic),
        float(both.pvalue),
        float(greater.pvalue),
        float(less.pvalue),
    )


def _no_difference(name: str) -> TestResult:
    return TestResult(name, 0.0, 1.0, 1.0, 1.0, note="all paired differences are zero")


def _wilcoxon(differences: Array) -> TestResult:
    from scipy.stats import wilcoxon

    name = "Wilcoxon signed-rank (paired)"
    if not np.any(differences):
        return _no_difference(name)
    greater = wilcoxon(differences, alternative="greater", zero_method="wilcox")
    less = wilcoxon(differences, alternative="less", zero_method="wilcox")
    both = wilcoxon(differences, alternative="two-sided", zero_method="wilcox")
    return TestResult(
        name,
        float(greater.statistic),
        float(both.pvalue),
        float(greater.pvalue),
        float(less.pvalue),
    )


def _sign(differences: Array) -> TestResult:
    from scipy.stats import binomtest

    name = "sign test (paired)"
    nonzero = int(np.count_nonzero(differences))
    if nonzero == 0:
        return _no_difference(name)
    positive = int(np.count_nonzero(differences > 0))
    greater = binomtest(positive, nonzero, 0.5, alternative="greater").pvalue
    less = binomtest(positive, nonzero, 0.5, alternative="less").pvalue
    both = binomtest(positive, nonzero, 0.5).pvalue
    return TestResult(name, float(positive), float(both), float(greater), float(less))


def _not_applicable(name: str, note: str) -> TestResult:
    return TestResult(
        name, math.nan, math.nan, math.nan, math.nan, role="not applicable", note=note
    )


def _shapiro(differences: Array) -> TestResult:
    from scipy.stats import shapiro

    name = "Shapiro-Wilk (normality of differences)"
    if differences.size < 3:
        return _not_applicable(name, "needs at least 3 trials")
    if np.ptp(differences) == 0:
        return _not_applicable(name, "the differences are constant")
    sample = differences
    if differences.size > SHAPIRO_LIMIT:
        sample = differences[np.linspace(0, differences.size - 1, SHAPIRO_LIMIT).astype(np.int64)]
    result = shapiro(sample)
    return TestResult(name, float(result.statistic), float(result.pvalue), None, None)


def _paired_t(differences: Array) -> TestResult:
    from scipy.stats import t as student

    name = "paired t-test"
    if np.ptp(differences) == 0:
        return _not_applicable(name, "the differences are constant")
    n = differences.size
    statistic = float(np.mean(differences) / (np.std(differences, ddof=1) / math.sqrt(n)))
    greater = float(student.sf(statistic, n - 1))
    less = float(student.cdf(statistic, n - 1))
    return TestResult(name, statistic, _two_sided(greater, less), greater, less)


def _slope_test(name: str, statistic: float, df: int) -> TestResult:
    from scipy.stats import t as student

    greater = float(student.sf(statistic, df))
    less = float(student.cdf(statistic, df))
    return TestResult(name, statistic, _two_sided(greater, less), greater, less)


def _variance_robust(custom: Array, reference: Array) -> TestResult:
    name = "Pitman-Morgan, robust (equal variances)"
    n = custom.size
    if n < 3:
        return _not_applicable(name, "needs at least 3 trials")
    sums = custom + reference
    differences = custom - reference
    if not np.any(differences):
        return _no_difference(name)
    centred_sums = sums - np.mean(sums)
    if not np.any(centred_sums):
        return _not_applicable(name, "the sums of paired errors are constant")
    terms = centred_sums * (differences - np.mean(differences))
    spread = math.sqrt(float(np.sum(terms**2)))
    statistic = float(np.sum(terms)) / spread if spread > 0.0 else 0.0
    return _slope_test(name, statistic, n - 2)


def _pitman_morgan(custom: Array, reference: Array) -> TestResult:
    name = "Pitman-Morgan, classic"
    n = custom.size
    if n < 3:
        return _not_applicable(name, "needs at least 3 trials")
    sums = custom + reference
    differences = custom - reference
    if np.ptp(sums) == 0 or np.ptp(differences) == 0:
        return _not_applicable(name, "the sums or the differences are constant")
    r = float(np.corrcoef(sums, differences)[0, 1])
    if abs(r) >= 1.0:
        statistic = math.copysign(math.inf, r)
    else:
        statistic = r * math.sqrt((n - 2) / (1.0 - r * r))
    return _slope_test(name, statistic, n - 2)


def _ratio(numerator: float, denominator: float) -> float:
    if denominator == 0.0:
        return math.nan if numerator == 0.0 else math.inf
    return numerator / denominator


def mean_ratio(custom: Array, reference: Array, *, confidence: float, seed: int) -> MeanRatio:
    """mean(custom) / mean(reference) and its paired percentile bootstrap interval."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_BOOTSTRAP_KEY,)))
    n = custom.size
    ratios = np.empty(BOOTSTRAP_RESAMPLES)
    for resample in range(BOOTSTRAP_RESAMPLES):
        picked = rng.integers(0, n, size=n)
        ratios[resample] = _ratio(float(custom[picked].sum()), float(reference[picked].sum()))
    tail = (1.0 - confidence) / 2.0
    defined = ratios[~np.isnan(ratios)]
    low, high = (
        (float(v) for v in np.quantile(defined, [tail, 1.0 - tail], method="inverted_cdf"))
        if defined.size
        else (math.nan, math.nan)
    )
    estimate = _ratio(float(np.sum(custom)), float(np.sum(reference)))
    return MeanRatio(estimate, low, high, confidence, BOOTSTRAP_RESAMPLES)


def _direction(result: TestResult, alpha: float) -> int:
    """+1 when "greater" is significant at alpha / 2, -1 for "less", 0 otherwise."""
    if result.pvalue_greater is not None and result.pvalue_greater < alpha / 2:
        return 1
    if result.pvalue_less is not None and result.pvalue_less < alpha / 2:
        return -1
    return 0


def _with_role(result: TestResult, role: str, note: str = "") -> TestResult:
    return replace(result, role=role, note=note or result.note)


def analyse(custom: Array, reference: Array, *, alpha: float, seed: int) -> Analysis:
    """The descriptive statistics, the tests and the verdicts (rule in the module docstring)."""
    differences = custom - reference
    normality = _shapiro(differences)
    t_test = _paired_t(differences)
    wilcoxon = _wilcoxon(differences)
    normal = normality.role != "not applicable" and normality.pvalue >= alpha
    use_t = normal and t_test.role != "not applicable"
    if normality.role != "not applicable":
        verdict = "not rejected" if normal else "rejected"
        normality = _with_role(normality, "normality check", f"{verdict} at alpha")
    if use_t:
        t_test = _with_role(t_test, "primary: accuracy")
        wilcoxon = _with_role(wilcoxon, "supporting")
    else:
        wilcoxon = _with_role(wilcoxon, "primary: accuracy")
        if t_test.role != "not applicable":
            t_test = _with_role(t_test, "not used", "normality rejected")
    variance = _variance_robust(custom, reference)
    if variance.role != "not applicable":
        variance = _with_role(variance, "primary: stability")
    tests = {
        "ks": _ks(custom, reference),
        "wilcoxon": wilcoxon,
        "sign": _sign(differences),
        "shapiro": normality,
        "t": t_test,
        "variance": variance,
        "pitman_morgan": _pitman_morgan(custom, reference),
    }
    accuracy_test = "t" if use_t else "wilcoxon"
    accuracy = ("custom_more_accurate", "equivalent", "custom_less_accurate")[
        _direction(tests[accuracy_test], alpha) + 1
    ]
    stability = ("custom_more_stable", "equivalent", "custom_less_stable")[
        _direction(variance, alpha) + 1
    ]
    return Analysis(
        stats={"custom": describe(custom), "reference": describe(reference)},
        tests=tests,
        mean_ratio=mean_ratio(custom, reference, confidence=1.0 - alpha, seed=seed),
        accuracy=accuracy,
        stability=stability,
        accuracy_test=accuracy_test,
    )
