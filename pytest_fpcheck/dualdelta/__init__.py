"""Dual-delta testing: is a custom implementation as accurate as a reference one?

Dual-Delta paper (Xie, "Evaluating Numerical Accuracy in Mixed-Precision Computing by Dual-Delta
Testing"): instead of one error between the two implementations, measure two error samples
against a high-precision oracle on the same random inputs -- Delta_c for the custom
implementation, Delta_r for the reference -- and compare the two distributions statistically
(sections 2.2, 3.1, 4). The package holds:

* :mod:`.run` -- :func:`dual_delta` and :func:`assert_dual_delta` (Algorithm 1);
* :mod:`.inputs` -- the input sources: a callable ``inputs(rng)`` or a hypothesis strategy;
* :mod:`.metrics` -- the error metrics (section 3.2.3);
* :mod:`.statistics` -- descriptive statistics, tests and the decision rule (section 4);
* :mod:`.result` -- :class:`DualDeltaResult` and its text table;
* :mod:`.plots` -- its figure (section 4.2).

The oracles live in :mod:`pytest_fpcheck.oracle`. Importing this package imports neither scipy,
hypothesis, matplotlib nor torch: each loads when first needed.
"""

from __future__ import annotations

from .inputs import trial_rng
from .result import DualDeltaResult
from .run import assert_dual_delta, dual_delta
from .statistics import MeanRatio, TestResult

__all__ = [
    "DualDeltaResult",
    "MeanRatio",
    "TestResult",
    "assert_dual_delta",
    "dual_delta",
    "trial_rng",
]
