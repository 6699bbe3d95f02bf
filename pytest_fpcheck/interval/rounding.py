"""Outward rounding of float64 interval endpoints (RENDER section II-C; STYLE principle 8).

Every endpoint the engine computes is a float64 number produced by a correctly rounded float64
operation, so the exact value lies within one float64 step of it. The helpers here name their
direction: ``down`` moves a lower endpoint toward -inf, ``up`` an upper endpoint toward +inf.

``down_to(x, fmt)`` / ``up_to(x, fmt)`` round onto a format's grid in the named direction, which
is how a result stored in ``fmt`` is enclosed: any faithful rounding (nearest, directed,
truncation, and a double rounding through a finer format) of a value in ``[lo, hi]`` lies in
``[down_to(lo), up_to(hi)]``.

Both are exact and run as one compiled pass (Numba, a core dependency; compiled on first use
and cached): the step is nextafter computed from the exponent (half a unit below a negative
power of two), and directed rounding scales by the format's quantum 2**(E - p + 1),
E = max(floor(log2 |x|), emin), takes floor or ceil, and scales back, exactly as
:func:`pytest_fpcheck.formats.round_to` does. Past the largest finite number the outward
direction gives an infinity (also for float8_e4m3fn, which has none: an enclosure wants the
infinity there) and the inward one the largest finite number. A NaN endpoint becomes the
infinity of its direction rather than poisoning the interval; an infinite endpoint steps to the
largest finite number toward the interior, as nextafter does, because it may stand for a finite
value that overflowed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numba
import numpy as np

from ..formats import Format

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["down", "down_to", "up", "up_to"]

_BIG64 = float(np.finfo(np.float64).max)


@numba.njit(cache=True, inline="always")
def _step_one(x: float, direction: float) -> float:  # pragma: no cover - compiled
    if x != x:
        return math.inf * direction
    if math.isinf(x):
        if x * direction > 0:
            return x
        return -_BIG64 * direction
    if x == 0.0:
        return 5e-324 * direction
    mantissa, exponent = math.frexp(abs(x))
    e = max(exponent - 1, -1022)
    unit = math.ldexp(1.0, e - 52)
    toward_zero = (x > 0) != (direction > 0)
    if toward_zero and mantissa == 0.5 and e > -1022:
        unit = unit * 0.5  # below a power of two the spacing halves
    return x + unit * direction


@numba.njit(cache=True)
def _step_all(x: np.ndarray, direction: float) -> np.ndarray:  # pragma: no cover - compiled
    # float64 bit patterns are sign-magnitude: one step away from zero adds 1 to the pattern,
    # toward zero subtracts 1 (across binades and into the subnormals alike)
    out = np.empty_like(x)
    bits = x.view(np.int64)
    out_bits = out.view(np.int64)
    for i in range(x.size):
        v = x[i]
        if v != v or math.isinf(v) or v == 0.0:
            out[i] = _step_one(v, direction)
        elif (v > 0) == (direction > 0):
            out_bits[i] = bits[i] + 1
        else:
            out_bits[i] = bits[i] - 1
    return out


@numba.njit(cache=True, inline="always")
def _round_one(
    x: float, precision: int, emin: int, big: float, has_inf: bool, up: bool
) -> float:  # pragma: no cover - compiled
    if x != x:
        return math.inf if up else -math.inf
    if math.isinf(x):
        if has_inf or (x > 0) == up:
            return x
        return big if x > 0 else -big  # a format without infinities may saturate (torch does)
    if x == 0.0:
        return x
    _, exponent = math.frexp(abs(x))
    e = max(exponent - 1, emin)
    quantum = math.ldexp(1.0, e - precision + 1)
    scaled = x / quantum
    y = (math.ceil(scaled) if up else math.floor(scaled)) * quantum
    if y > big:
        return math.inf if up else big
    if y < -big:
        return -big if up else -math.inf
    return y


@numba.njit(cache=True)
def _round_all(
    x: np.ndarray, precision: int, emin: int, big: float, has_inf: bool, up: bool
) -> np.ndarray:  # pragma: no cover - compiled
    # In the target's normal range, rounding to p significant bits keeps the top p - 1 fraction
    # bits of the float64 pattern: truncation rounds the magnitude down, and adding one unit of
    # the kept part rounds it up (a carry moves into the exponent, as it should).
    out = np.empty_like(x)
    bits = x.view(np.int64)
    out_bits = out.view(np.int64)
    drop = 53 - precision
    low = (np.int64(1) << drop) - 1
    unit = np.int64(1) << drop
    smallest_normal = math.ldexp(1.0, emin)
    for i in range(x.size):
        v = x[i]
        if v != v or math.isinf(v) or v == 0.0 or abs(v) < smallest_normal:
            out[i] = _round_one(v, precision, emin, big, has_inf, up)
            continue
        b = bits[i]
        if b & low == 0:
            y = v
        else:
            kept = b & ~low
            out_bits[i] = kept + unit if (v > 0) == up else kept
            y = out[i]
        if y > big:
            y = math.inf if up else big
        elif y < -big:
            y = -big if up else -math.inf
        out[i] = y
    return out


def _flat(x: Array) -> tuple[np.ndarray, tuple[int, ...]]:
    array = np.asarray(x, dtype=np.float64, order="C")  # keeps 0-d shapes, unlike ascontiguousarray
    return array.reshape(-1), array.shape


def _step(x: Array, direction: float) -> Array:
    flat, shape = _flat(x)
    result: Array = _step_all(flat, direction).reshape(shape)
    return result


def down(x: Array) -> Array:
    """One float64 step toward -inf (a NaN becomes -inf): encloses an exact value from below
    when ``x`` was correctly rounded."""
    return _step(x, -1.0)


def up(x: Array) -> Array:
    """One float64 step toward +inf (a NaN becomes +inf)."""
    return _step(x, 1.0)


def _directed(x: Array, fmt: Format, upward: bool) -> Array:
    flat, shape = _flat(x)
    if fmt.name == "float64":
        infinity = math.inf if upward else -math.inf
        result: Array = np.where(np.isnan(flat), infinity, flat).reshape(shape)
        return result
    rounded: Array = _round_all(flat, fmt.precision, fmt.emin, fmt.max_finite, fmt.has_inf, upward)
    return rounded.reshape(shape)


def down_to(x: Array, fmt: Format) -> Array:
    """The largest ``fmt`` number <= ``x`` (-inf past the most negative finite one; a NaN
    becomes -inf)."""
    return _directed(x, fmt, False)


def up_to(x: Array, fmt: Format) -> Array:
    """The smallest ``fmt`` number >= ``x`` (+inf past the largest finite one; a NaN becomes
    +inf)."""
    return _directed(x, fmt, True)
