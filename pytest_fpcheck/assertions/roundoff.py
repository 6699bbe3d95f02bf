"""``assert_roundoff_close``: fail when the difference is more than round-off, and when the
enclosure is too wide to tell (an "inconclusive" verdict, unless it is accepted)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InconclusiveVerdict, InvalidArgument, RoundoffMismatch
from ..interval.bounds import Bounds
from .messages import with_user_message
from .verdict import Verdict, classify, split_expected

__all__ = ["assert_roundoff_close"]


def assert_roundoff_close(
    actual: Any,
    expected: Any,
    *,
    bounds: Bounds | None = None,
    expected_bounds: Bounds | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    max_resolution: float | None = None,
    accept_inconclusive: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> Verdict:
    """Raise :class:`~pytest_fpcheck.errors.RoundoffMismatch` when the verdict is "bug", and
    :class:`~pytest_fpcheck.errors.InconclusiveVerdict` when it is "inconclusive" (the
    enclosure's resolution is worse than ``max_resolution``, or unbounded on a finite value)
    unless ``accept_inconclusive=True``; return the verdict otherwise ("exact", "roundoff", or
    "close" when no bounds were recorded and the rtol/atol fallback passed). ``expected`` may
    be a Bounds, ``fp.exact_reference``'s for one: its value, judged two-sided against its
    enclosure (:func:`~pytest_fpcheck.assertions.verdict.classify`)."""
    __tracebackhide__ = True
    if not isinstance(equal_nan, bool):
        raise InvalidArgument("equal_nan", equal_nan, "True or False")
    if not isinstance(accept_inconclusive, bool):
        raise InvalidArgument("accept_inconclusive", accept_inconclusive, "True or False")
    expected, expected_bounds = split_expected(expected, expected_bounds)
    verdict = classify(
        actual,
        expected,
        bounds=bounds,
        expected_bounds=expected_bounds,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        max_resolution=max_resolution,
    )
    from .record import record_verdict

    record_verdict(verdict, actual, expected, bounds, expected_bounds)
    if verdict.kind == "bug":
        raise RoundoffMismatch(with_user_message(verdict.report(), msg), verdict) from None
    if verdict.kind == "inconclusive" and not accept_inconclusive:
        raise InconclusiveVerdict(with_user_message(verdict.report(), msg), verdict) from None
    return verdict
