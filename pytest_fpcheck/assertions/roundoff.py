"""``assert_roundoff_close``: fail only when the difference is more than round-off."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument, RoundoffMismatch
from ..interval.bounds import Bounds
from .messages import with_user_message
from .verdict import Verdict, classify

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
    msg: str | Callable[[str], str] | None = None,
) -> Verdict:
    """Raise :class:`~pytest_fpcheck.errors.RoundoffMismatch` when the verdict is "bug";
    return the verdict otherwise ("exact", "roundoff", or "close" when no bounds were recorded
    and the rtol/atol fallback passed)."""
    __tracebackhide__ = True
    if not isinstance(equal_nan, bool):
        raise InvalidArgument("equal_nan", equal_nan, "True or False")
    verdict = classify(
        actual,
        expected,
        bounds=bounds,
        expected_bounds=expected_bounds,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
    )
    from ..report.points import element_points
    from .record import record_verdict

    record_verdict(
        verdict, lambda: element_points(verdict, actual, expected, bounds, expected_bounds)
    )
    if verdict.kind == "bug":
        raise RoundoffMismatch(with_user_message(verdict.report(), msg), verdict) from None
    return verdict
