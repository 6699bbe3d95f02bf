"""What "agrees with the reference" means for :func:`~pytest_fpcheck.isolate`. No torch import.

``fn``'s result (a tensor, array or float, or a tuple / list / dict of them) agrees with the
reference when, leaf by leaf and element by element, ``|actual - reference| <= atol + rtol *
|reference|`` and NaN and infinity positions coincide (NaN and Inf positions are compared
before values). ``tol=None`` takes ``(rtol, atol)`` per leaf from the leaf's format, as
``torch.testing.assert_close`` does; ``tol=t`` means ``rtol = atol = t`` (the hybrid error
``|actual - reference| / (1 + |reference|) <= t``, dual-delta's ``max_hybrid``); ``tol=(rtol,
atol)`` gives both. The *error* of a run is the largest ratio of the difference to what was
allowed (``<= 1`` agrees).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ...adapters import as_float64, storage_format
from ...assertions.verdict import default_tolerances
from ...errors import InvalidArgument

__all__ = ["Check", "Comparison", "failure_check", "parse_tolerance"]

_TOL_EXPECTED = (
    "None (torch.testing's tolerances for the result's dtype), a non-negative number "
    "(rtol = atol = tol) or a pair (rtol, atol) of non-negative numbers"
)


class Check(NamedTuple):
    """How one run of the program compared: whether it agrees, its error (the largest ratio of a
    difference to its tolerance; NaN when the criterion has no number) and a line saying so."""

    agrees: bool
    error: float
    detail: str


def _non_negative(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
        and float(value) >= 0
    )


def parse_tolerance(tol: Any) -> tuple[float, float] | None:
    """``tol`` as ``(rtol, atol)``, or None for the per-dtype defaults."""
    if tol is None:
        return None
    if _non_negative(tol):
        return float(tol), float(tol)
    if isinstance(tol, tuple) and len(tol) == 2 and all(_non_negative(t) for t in tol):
        return float(tol[0]), float(tol[1])
    raise InvalidArgument("tol", tol, _TOL_EXPECTED)


def _is_structure(value: Any) -> bool:
    """A tuple or dict of results, or a list holding arrays (a list of numbers is an array)."""
    if isinstance(value, (tuple, dict)):
        return True
    return isinstance(value, list) and any(
        isinstance(item, (tuple, dict)) or hasattr(item, "shape") for item in value
    )


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if not _is_structure(value):
        return [(path, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return [leaf for key, item in items for leaf in _leaves(item, f"{path}[{key!r}]")]


def _index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    index = np.unravel_index(flat, shape)
    return "(" + ", ".join(str(int(i)) for i in index) + ("," if len(index) == 1 else "") + ")"


@dataclass(frozen=True)
class _Leaf:
    path: str
    values: np.ndarray
    rtol: float
    atol: float
    fmt: str


class Comparison:
    """Compares results of ``fn`` with the reference values (computed once)."""

    def __init__(self, reference: Any, tolerance: tuple[float, float] | None) -> None:
        self._reference = reference
        self._tolerance = tolerance
        self._leaves: list[_Leaf] | None = None

    def describe(self) -> str:
        """What agreement means, with the tolerances in force."""
        rule = "|actual - reference| <= atol + rtol * |reference| element-wise"
        if self._tolerance is not None:
            return f"{rule}, rtol={self._tolerance[0]:g}, atol={self._tolerance[1]:g} (tol=)"
        assert self._leaves is not None
        given = dict.fromkeys(
            f"{leaf.fmt}: rtol={leaf.rtol:g}, atol={leaf.atol:g}" for leaf in self._leaves
        )
        return f"{rule}, {'; '.join(given)} (torch.testing's defaults; pass tol= to choose)"

    def _bind(self, result: Any) -> list[_Leaf]:
        """Read the reference against the first result: its structure and shapes must match."""
        actual = _leaves(result)
        reference = _leaves(self._reference)
        if len(actual) != len(reference):
            raise InvalidArgument(
                "reference",
                self._reference,
                f"{len(actual)} array(s), like fn's result",
            )
        leaves = []
        for (path, value), (_, expected) in zip(actual, reference, strict=True):
            fmt = storage_format(value, argument=f"fn's result{path}")
            values = as_float64(expected, argument=f"reference{path}")
            shape = np.shape(as_float64(value, argument=f"fn's result{path}"))
            if values.shape != shape:
                raise InvalidArgument(
                    f"reference{path}", expected, f"an array of shape {shape}, like fn's result"
                )
            rtol, atol = self._tolerance or default_tolerances(fmt)
            leaves.append(_Leaf(path, values, rtol, atol, fmt.name))
        return leaves

    def __call__(self, result: Any) -> Check:
        if self._leaves is None:
            self._leaves = self._bind(result)
        worst = (-1.0, "")
        for leaf, (_, value) in zip(self._leaves, _leaves(result), strict=True):
            actual = as_float64(value, argument=f"fn's result{leaf.path}")
            error, detail = _leaf_error(actual, leaf)
            if error > worst[0] or math.isnan(error):
                worst = (error, f"{leaf.path} {detail}".strip() if leaf.path else detail)
                if math.isnan(error):
                    break
        error, detail = worst
        return Check(bool(error <= 1.0), error, detail)


def _leaf_error(actual: np.ndarray, leaf: _Leaf) -> tuple[float, str]:
    expected = leaf.values
    if actual.size == 0:
        return 0.0, "empty result"
    with np.errstate(invalid="ignore", over="ignore"):
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        finite = np.isfinite(actual) & np.isfinite(expected)
        mismatch = ~same & ~finite
        if mismatch.any():
            flat = int(np.flatnonzero(mismatch)[0])
            return math.inf, (
                f"NaN/Inf positions differ: actual={actual.flat[flat]!r}, "
                f"reference={expected.flat[flat]!r} at {_index(flat, actual.shape)}"
            )
        difference = np.where(finite, np.abs(actual - expected), 0.0)
        allowed = leaf.atol + leaf.rtol * np.abs(np.where(finite, expected, 0.0))
        ratio = np.where(difference == 0, 0.0, difference / np.where(allowed > 0, allowed, 1.0))
        ratio = np.where((difference > 0) & (allowed == 0), np.inf, ratio)
    flat = int(np.argmax(ratio))
    return float(ratio.flat[flat]), (
        f"worst at {_index(flat, actual.shape)}: |actual - reference| = "
        f"{float(difference.flat[flat]):.3g}, {float(ratio.flat[flat]):.3g} x its tolerance"
    )


def failure_check(call: Callable[[], object], failure_type: type[BaseException]) -> Check:
    """Run ``call``: it agrees when it returns; raising ``failure_type`` (or anything else) is
    the inconsistency, with the first line of the exception as the detail."""
    try:
        call()
    except Exception as error:
        first = str(error).strip().splitlines()
        kind = "failed" if isinstance(error, failure_type) else "raised"
        return Check(
            False, math.nan, f"{kind}: {type(error).__name__}: {first[0] if first else ''}"
        )
    return Check(True, math.nan, "passed")
