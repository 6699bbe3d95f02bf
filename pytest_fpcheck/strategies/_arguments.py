"""Eager validation of the strategies' arguments (Hypothesis ``guides/api-style.rst``: invalid
arguments raise at call time, never an empty strategy).

Each check returns the argument in canonical form or raises
:class:`~pytest_fpcheck.errors.InvalidArgument` naming the argument, its value and what would be
valid.
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

from ..errors import InvalidArgument
from ..formats import Format, round_to

__all__ = [
    "check_bool",
    "check_bound",
    "check_fraction",
    "check_positions",
    "check_shape",
]


def check_bool(value: Any, name: str) -> bool:
    """``value`` itself when it is a bool (``0`` and ``1`` are not accepted)."""
    if not isinstance(value, bool):
        raise InvalidArgument(name, value, "True or False")
    return value


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_fraction(value: Any, name: str) -> float:
    """``value`` as a float when it is a real number in [0, 1]."""
    if not _is_real(value) or not 0 <= value <= 1:
        raise InvalidArgument(name, value, "a number in [0, 1]")
    return float(value)


def check_bound(value: Any, name: str, fmt: Format) -> float | None:
    """A ``min_value`` / ``max_value`` as a float on ``fmt``'s grid, or None for no bound.

    The rule follows Hypothesis' ``floats(width=...)``: a bound must be exactly representable
    in the format; it is never rounded silently, and the message names the nearest value
    inside the range. An infinite bound on the open side (``min_value=-inf``,
    ``max_value=inf``) means no bound; an infinite bound on the closed side is refused.
    """
    if value is None:
        return None
    if not _is_real(value):
        raise InvalidArgument(name, value, "a real number or None")
    try:
        bound = float(value)
    except OverflowError:
        raise InvalidArgument(
            name,
            value,
            f"a value exactly representable in {fmt.name}",
            hint="It overflows float64.",
        ) from None
    open_side = -math.inf if name == "min_value" else math.inf
    if math.isnan(bound) or (math.isinf(bound) and bound != open_side):
        raise InvalidArgument(name, value, f"a finite number, {open_side} or None")
    if bound == open_side:
        return None
    inward = float(round_to(bound, fmt, "up" if name == "min_value" else "down"))
    if inward != bound or bound != value:
        if math.isfinite(inward) and abs(inward) <= fmt.max_finite:
            hint = f"The nearest {fmt.name} value inside the range is {inward!r}: pass that."
        else:
            relation = ">=" if name == "min_value" else "<="
            hint = f"No finite {fmt.name} value is {relation} {value!r}."
        raise InvalidArgument(
            name, value, f"a value exactly representable in {fmt.name}", hint=hint
        )
    return bound


def _check_index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple: an int or a sequence of ints, each at least 0."""
    sides = [shape] if _check_index(shape) is not None else shape
    if not isinstance(sides, (list, tuple)):
        raise InvalidArgument(
            "shape", shape, "an int >= 0, a tuple of ints >= 0, or a strategy of shapes"
        )
    checked = [_check_index(side) for side in sides]
    if any(side is None or side < 0 for side in checked):
        raise InvalidArgument(
            "shape", shape, "an int >= 0, a tuple of ints >= 0, or a strategy of shapes"
        )
    return tuple(side for side in checked if side is not None)


def check_positions(positions: Any, n: int) -> tuple[int, int] | None:
    """``positions`` as (i, j): two distinct indices in [0, n), or None to draw them."""
    if positions is None:
        return None
    pair = list(positions) if isinstance(positions, (list, tuple)) else []
    indices = [index for index in map(_check_index, pair) if index is not None]
    if len(pair) != 2 or len(indices) != 2:
        raise InvalidArgument(
            "positions", positions, "None or a pair (i, j) of ints: where +M and -M go"
        )
    i, j = indices
    if not (0 <= i < n and 0 <= j < n):
        raise InvalidArgument("positions", positions, f"indices in [0, {n - 1}] for n={n}")
    if i == j:
        raise InvalidArgument("positions", positions, "two distinct indices (one +M, one -M)")
    return i, j
