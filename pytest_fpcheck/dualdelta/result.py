"""The result of a dual-delta test: the two error samples, their statistics, the verdicts, and
the text table that both :meth:`DualDeltaResult.summary` and the failure message show.

Dual-Delta paper, sections 2.2 (the two distributions Delta_1, Delta_2) and 4 (their analysis).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..assertions import messages
from .statistics import MeanRatio, TestResult, json_value

__all__ = ["DualDeltaResult"]

_STAT_ROWS = ("mean", "median", "std", "p50", "p90", "p95", "p99", "max")
_DIRECTION = {
    "custom_less_accurate": "greater",
    "custom_more_accurate": "less",
    "custom_less_stable": "greater",
    "custom_more_stable": "less",
}
#: the verdicts that fail a test, and what they say of the custom implementation
_WORSE = {"custom_less_accurate": "less accurate", "custom_less_stable": "less stable"}


def _number(value: float | None, spec: str, width: int = 0) -> str:
    """``value`` formatted by ``spec``, right-aligned in ``width``; "-" for a p-value the test
    does not have, "n/a" for one it could not compute."""
    if value is None:
        text = "-"
    elif math.isnan(value):
        text = "n/a"
    else:
        text = format(value, spec)
    return text.rjust(width)


@dataclass(frozen=True, eq=False)
class DualDeltaResult:
    """Errors of the custom and reference implementations against the oracle, paired by trial,
    with their analysis (:mod:`pytest_fpcheck.dualdelta.statistics` states the decision rule).

    ``stats`` maps ``"custom"`` and ``"reference"`` to mean, median, std, p50, p90, p95, p99 and
    max; ``tests`` maps ``ks``, ``wilcoxon``, ``sign``, ``shapiro``, ``t``, ``variance`` and
    ``pitman_morgan`` to :class:`~pytest_fpcheck.dualdelta.statistics.TestResult`;
    ``accuracy_test`` names the test that decided ``accuracy``.
    """

    delta_custom: NDArray[np.float64]
    delta_reference: NDArray[np.float64]
    stats: dict[str, dict[str, float]]
    tests: dict[str, TestResult]
    mean_ratio: MeanRatio
    accuracy: str
    stability: str
    accuracy_test: str
    alpha: float
    seed: int
    oracle: str
    metric: str
    custom: str
    reference: str

    @property
    def n(self) -> int:
        """The number of trials."""
        return int(self.delta_custom.size)

    @property
    def failed(self) -> bool:
        """Whether the custom implementation is significantly less accurate or less stable."""
        return self.accuracy == "custom_less_accurate" or self.stability == "custom_less_stable"

    def _verdict_line(self, label: str, verdict: str, test: TestResult) -> str:
        direction = _DIRECTION.get(verdict)
        if direction is None:
            worse = _number(test.pvalue_greater, ".3g")
            better = _number(test.pvalue_less, ".3g")
            reason = f"p(custom larger) = {worse}, p(custom smaller) = {better}, neither"
            reason += f" < alpha/2 = {self.alpha / 2:g}"
        else:
            p = test.pvalue_greater if direction == "greater" else test.pvalue_less
            side = "larger" if direction == "greater" else "smaller"
            reason = f"p(custom {side}) = {_number(p, '.3g')} < alpha/2 = {self.alpha / 2:g}"
        return f"{label:<10} {verdict:<22} by {test.name}: {reason}"

    def summary(self) -> str:
        """The results as a text table: verdicts, mean-error ratio, statistics, tests."""
        ratio = self.mean_ratio
        lines = [
            f"dual-delta test of custom {self.custom} against reference {self.reference}",
            f"oracle {self.oracle}, metric {self.metric}, n = {self.n}, seed = {self.seed}, "
            f"alpha = {self.alpha:g}",
            self._verdict_line("accuracy:", self.accuracy, self.tests[self.accuracy_test]),
            self._verdict_line("stability:", self.stability, self.tests["variance"]),
            f"mean error ratio custom / reference: {_number(ratio.estimate, '.4g')} "
            f"({ratio.confidence:.0%} bootstrap CI {_number(ratio.low, '.4g')} .. "
            f"{_number(ratio.high, '.4g')})",
            "",
            f"{'error':<8} {'custom':>12} {'reference':>12}",
        ]
        for row in _STAT_ROWS:
            custom, reference = self.stats["custom"][row], self.stats["reference"][row]
            lines.append(f"{row:<8} {_number(custom, '.4e', 12)} {_number(reference, '.4e', 12)}")
        lines += [
            "",
            f"{'test':<40} {'statistic':>10} {'p two-sided':>11} {'p(c larger)':>11} "
            f"{'p(c smaller)':>12}  role",
        ]
        for test in self.tests.values():
            role = f"{test.role} ({test.note})" if test.note else test.role
            lines.append(
                f"{test.name:<40} {_number(test.statistic, '.4g', 10)} "
                f"{_number(test.pvalue, '.3g', 11)} {_number(test.pvalue_greater, '.3g', 11)} "
                f"{_number(test.pvalue_less, '.3g', 12)}  {role}"
            )
        lines.append("(c larger: the custom errors, or their variance, are larger)")
        return "\n".join(lines)

    def failure_message(self) -> str:
        """The message of :class:`~pytest_fpcheck.errors.DualDeltaFailure`: the headline of
        every failure message (:mod:`~pytest_fpcheck.assertions.messages`), then
        :meth:`summary`."""
        failing = [v for v in (self.accuracy, self.stability) if v in _WORSE]
        text = (
            f"custom {self.custom} is significantly {' and '.join(_WORSE[v] for v in failing)} "
            f"than reference {self.reference} (alpha = {self.alpha:g})"
        )
        return messages.message(
            [messages.headline("dual-delta", failing, text), "", self.summary()]
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-serialisable values (non-finite numbers as None)."""
        return {
            "custom": self.custom,
            "reference": self.reference,
            "oracle": self.oracle,
            "metric": self.metric,
            "n": self.n,
            "seed": self.seed,
            "alpha": self.alpha,
            "accuracy": self.accuracy,
            "stability": self.stability,
            "accuracy_test": self.accuracy_test,
            "stats": json_value(self.stats),
            "mean_ratio": self.mean_ratio.to_dict(),
            "tests": {key: test.to_dict() for key, test in self.tests.items()},
            "delta_custom": self.delta_custom.tolist(),
            "delta_reference": self.delta_reference.tolist(),
        }

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Write one PNG to ``path``: overlaid histograms on a shared log-scaled error axis, a
        box plot, a Q-Q plot and the paired scatter with its diagonal. Needs matplotlib."""
        from .plots import plot_result

        title = (
            f"dual-delta: {self.custom} vs {self.reference} ({self.metric}, oracle "
            f"{self.oracle}, n = {self.n})\naccuracy: {self.accuracy}, "
            f"stability: {self.stability}"
        )
        return plot_result(self.delta_custom, self.delta_reference, title, path)

    def __repr__(self) -> str:
        return (
            f"<DualDeltaResult n={self.n} accuracy={self.accuracy} stability={self.stability} "
            f"mean ratio={self.mean_ratio.estimate:.4g}>"
        )
