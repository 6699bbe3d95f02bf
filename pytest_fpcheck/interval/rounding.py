"""Outward rounding of float64 interval endpoints (RENDER section II-C; STYLE principle 8).

Every endpoint the engine computes is a float64 number produced by a correctly rounded float64
operation, so the exact value lies within one float64 step of it. The helpers here name their
direction: ``down`` moves a lower endpoint toward -inf, ``up`` an upper endpoint toward +inf.

``down_to(x, fmt)`` / ``up_to(x, fmt)`` round onto a format's grid in the named direction, which
is how a result stored in ``fmt`` is enclosed: any faithful rounding (nearest, directed,
truncation, and a double rounding through a finer format) of a value in ``[lo, hi]`` lies in
``[down_to(lo), up_to(hi)]``.

Speed matters here (every tracked operation calls these on whole tensors), so stepping is done
with arithmetic rather than ``nextafter``: for a normal number x of precision p,
``x + max(|x| * 0.6 * 2**(1-p), tiny)`` rounds to exactly the next number up, because the step
lies strictly between half a unit and one and a half units in the last place on either side of
x (below a power of two the spacing halves, and 0.6 * 2 = 1.2 units of it is still in range);
near the bottom of the normal range, where the step itself would underflow and be rounded,
``nextafter`` takes over. Casting to float32 or float16 is
correct rounding to nearest; one step from the wrong side of x then gives the directed result.

A NaN endpoint becomes the infinity of its direction rather than poisoning the interval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..formats import Format, round_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["down", "down_to", "up", "up_to"]

_STEP = {"float64": 0.6 * 2.0**-52, "float32": 0.6 * 2.0**-23, "float16": 0.6 * 2.0**-10}
_TINY = {"float64": 5e-324, "float32": 2.0**-149, "float16": 2.0**-24}
# below these the step is itself subnormal and rounded: such elements use nextafter
_SMALL_STEP = {
    "float64": 2.0**-1020,
    "float32": 2.0**-124,
    "float16": 0.0,
}  # float16 steps run in float32


def _step(x: Array, direction: int) -> Array:
    """One float64 step in ``direction`` (+1 up, -1 down), exact for normal numbers."""
    with np.errstate(over="ignore", invalid="ignore"):
        step = np.maximum(np.abs(x) * _STEP["float64"], _TINY["float64"])
        result: Array = x + step if direction > 0 else x - step
        small = step < _SMALL_STEP["float64"]  # the step itself lost bits to underflow
        if small.any():
            result = np.where(small, np.nextafter(x, np.inf * direction), result)
        if not np.isfinite(result).all():
            infinity = np.inf * direction
            result = np.where(np.isnan(x), infinity, result)
            # an infinite endpoint may stand for an overflowed finite value: as nextafter does,
            # step from it to the largest finite number (toward the interior), else keep it
            result = np.where(np.isinf(x), np.nextafter(x, infinity), result)
    return result


def down(x: Array) -> Array:
    """One float64 step toward -inf (a NaN becomes -inf): encloses an exact value from below
    when ``x`` was correctly rounded."""
    return _step(np.asarray(x, dtype=np.float64), -1)


def up(x: Array) -> Array:
    """One float64 step toward +inf (a NaN becomes +inf)."""
    return _step(np.asarray(x, dtype=np.float64), +1)


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
    if fmt.name == "float64":
        if np.isnan(x).any():
            return np.where(np.isnan(x), infinity, x)
        return x
    if fmt.name not in ("float32", "float16"):
        mode = "up" if direction > 0 else "down"
        rounded = round_to(x, fmt, mode)
        # formats without infinities overflow to NaN; an enclosure wants the infinity there
        result: Array = np.where(np.isnan(rounded), infinity, rounded)
        return result
    native: Any = np.float32  # float16 steps are computed in float32, then cast (exactly)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x.astype(np.float16 if fmt.name == "float16" else np.float32)
        wide = nearest.astype(np.float32)
        back = nearest.astype(np.float64)
        wrong = back < x if direction > 0 else back > x
        if wrong.any():
            step = np.maximum(np.abs(wide) * native(_STEP[fmt.name]), native(_TINY[fmt.name]))
            moved = wide + step if direction > 0 else wide - step
            small = step < native(_SMALL_STEP[fmt.name])
            if small.any():
                exact = np.nextafter(nearest, nearest.dtype.type(np.inf * direction))
                moved = np.where(small, exact.astype(np.float32), moved)
            # from a wrong-side infinity (an overflowed cast) the step lands on the largest
            # finite number of the same sign
            moved = np.where(np.isinf(wide), native(-fmt.max_finite * direction), moved)
            stepped = np.where(wrong, moved.astype(nearest.dtype), nearest)
        else:
            stepped = nearest
        out: Array = stepped.astype(np.float64)
        if np.isnan(out).any():
            out = np.where(np.isnan(out), infinity, out)
    return out
