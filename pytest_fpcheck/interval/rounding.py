"""Outward rounding of float64 interval endpoints (RENDER section II-C; STYLE principle 8).

Every endpoint the engine computes is a float64 number produced by a correctly rounded float64
operation, so the exact value lies within one float64 step of it. The helpers here name their
direction: ``down`` moves a lower endpoint toward -inf, ``up`` an upper endpoint toward +inf.

``down_to(x, fmt)`` / ``up_to(x, fmt)`` round onto a format's grid in the named direction, which
is how a result stored in ``fmt`` is enclosed: any faithful rounding (nearest, directed,
truncation, and a double rounding through a finer format) of a value in ``[lo, hi]`` lies in
``[down_to(lo), up_to(hi)]``. For float32 and float16 this uses NumPy's (correctly rounded) casts
and one ``nextafter`` step; the other formats use the exact :func:`~pytest_fpcheck.formats.round_to`.

A NaN endpoint widens to the infinity of its direction rather than poisoning the interval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..formats import Format, round_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["down", "down_to", "up", "up_to"]

_NATIVE = {"float32": np.float32, "float16": np.float16}


def down(x: Array) -> Array:
    """One float64 step toward -inf (a NaN becomes -inf): encloses an exact value from below
    when ``x`` was correctly rounded."""
    with np.errstate(invalid="ignore"):
        stepped: Array = np.nextafter(np.where(np.isnan(x), -np.inf, x), -np.inf)
    return stepped


def up(x: Array) -> Array:
    """One float64 step toward +inf (a NaN becomes +inf)."""
    with np.errstate(invalid="ignore"):
        stepped: Array = np.nextafter(np.where(np.isnan(x), np.inf, x), np.inf)
    return stepped


def down_to(x: Array, fmt: Format) -> Array:
    """The largest ``fmt`` number <= ``x`` (-inf past the most negative finite one; a NaN
    becomes -inf)."""
    return _directed(x, fmt, -1)


def up_to(x: Array, fmt: Format) -> Array:
    """The smallest ``fmt`` number >= ``x`` (+inf past the largest finite one; a NaN becomes
    +inf)."""
    return _directed(x, fmt, +1)


def _directed(x: Array, fmt: Format, direction: int) -> Array:
    infinity = np.inf * direction
    x = np.where(np.isnan(x), infinity, x)
    if fmt.name == "float64":
        return x
    native = _NATIVE.get(fmt.name)
    if native is None:
        mode = "up" if direction > 0 else "down"
        rounded = round_to(x, fmt, mode)
        # formats without infinities overflow to NaN; an enclosure wants the infinity there
        result: Array = np.where(np.isnan(rounded), infinity, rounded)
        return result
    with np.errstate(over="ignore", invalid="ignore"):
        cast = x.astype(native)
        wrong_side = cast < x if direction > 0 else cast > x
        toward: Any = native(infinity)
        stepped = np.where(wrong_side, np.nextafter(cast, toward), cast)
    out: Array = stepped.astype(np.float64)
    return out
