"""Outward rounding of float64 interval endpoints (RENDER section II-C; STYLE principle 8).

Every endpoint the engine computes is a float64 number produced by a correctly rounded float64
operation, so the exact value lies within one float64 step of it. The helpers here name their
direction: ``down`` moves a lower endpoint toward -inf, ``up`` an upper endpoint toward +inf.

``down_to(x, fmt)`` / ``up_to(x, fmt)`` round onto a format's grid in the named direction, which
is how a result stored in ``fmt`` is enclosed: any faithful rounding (nearest, directed,
truncation, and a double rounding through a finer format) of a value in ``[lo, hi]`` lies in
``[down_to(lo), up_to(hi)]``. Where the run is known to round to nearest, :func:`nearest`
encloses the result by the hull of ``[lo, hi]`` and its nearest roundings instead, which
charges a result its actual rounding error rather than a whole ULP (its docstring has the rule
and the proof); its ends lie on a 26-bit grid rather than the format's.

Both are exact and run as one compiled pass (Numba, a core dependency; compiled on first use
and cached): the step is nextafter computed from the bit pattern, and directed rounding is the
package's one rounding rule, :func:`pytest_fpcheck.formats.quantize` (scale by the format's
quantum 2**(E - p + 1), E = max(floor(log2 |x|), emin), take floor or ceil, scale back) with
IEEE 754's overflow rule, compiled here as :func:`round_scalar`, which the emulators call too.
Two shortcuts give the same results with less work: in the format's normal range, truncating
the float64 pattern to p significant bits and adding one unit of the kept part
(:func:`round_to`); onto float32, the hardware's round-to-nearest conversion and one float32 step
where it went the wrong way (:func:`float32_directed`); to nearest, one conversion onto
float32 (:func:`_nearest32`) or the dropped bits against half a unit (:func:`_nearest_normal`),
and no branch where the choice is unpredictable (:func:`_select`). Bit casts are
``np.float64(v).view(np.int64)`` and its inverse, which Numba compiles to a register bitcast.
A zero reached from a nonzero value is +0 (the sign of an underflowed value is not kept; -0
only as the strict upper neighbour of -2**-1074, where :func:`next_up` gives it). Past the
largest finite number the outward
direction gives an infinity (also for float8_e4m3fn, which has none: an enclosure wants the
infinity there) and the inward one the largest finite number. A NaN endpoint becomes the
infinity of its direction rather than poisoning the interval; an infinite endpoint steps to the
largest finite number toward the interior, as nextafter does, because it may stand for a finite
value that overflowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import numpy as np

from ..formats import Format, overflow_limits, quantize
from . import fallbacks
from .jit import jit

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["NEAREST_BITS", "down", "down_to", "nearest", "round_scalar", "up", "up_to"]

_BIG64 = float(np.finfo(np.float64).max)

#: Significant bits of the grid :func:`nearest` rounds an off-grid end onto (see its docstring)
NEAREST_BITS = 26

# the scalar signatures the compiled code calls them with (formats annotates the array form)
_quantize = cast("Callable[[float, int, int, int], float]", jit(forceinline=True)(quantize))
_overflow_limits = jit(forceinline=True)(overflow_limits)


@jit(forceinline=True)
def _bits(v: float) -> np.int64:  # pragma: no cover - compiled
    """The int64 bit pattern of a float64."""
    return np.float64(v).view(np.int64)


@jit(forceinline=True)
def _from_bits(b: np.int64) -> float:  # pragma: no cover - compiled
    """The float64 whose bit pattern is the int64 ``b``."""
    return np.int64(b).view(np.float64)


@jit(forceinline=True)
def _bits32(x: np.float32) -> np.int32:  # pragma: no cover - compiled
    """The int32 bit pattern of a float32."""
    return np.float32(x).view(np.int32)


@jit(forceinline=True)
def _from_bits32(b: np.int64) -> np.float32:  # pragma: no cover - compiled
    """The float32 whose bit pattern is the low 32 bits of the int64 ``b``."""
    return np.int32(b).view(np.float32)


_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
#: the float64 pattern's bits below a float32 tie's last one: a tie between two float32
#: numbers has at most 25 significant bits (fewer below float32's normal range)
_BELOW_TIE = np.int64((1 << 28) - 1)
_INF_BITS = np.int64(0x7FF0000000000000)


@jit(cache=True, forceinline=True)
def next_up(v: float) -> float:  # pragma: no cover - compiled
    """One float64 step toward +inf; NaN -> +inf; -inf -> the most negative finite number."""
    # float64 bit patterns are sign-magnitude: one step away from zero adds 1 to the pattern,
    # toward zero subtracts 1 (across binades and into the subnormals alike); b >> 63 is 0 for
    # a positive number and -1 for a negative one
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    if 0 < magnitude < _INF_BITS:
        return _from_bits(b + (np.int64(1) | (b >> 63)))
    if v != v:
        return math.inf
    if v == 0.0:
        return 5e-324
    return v if v > 0 else -_BIG64


@jit(cache=True, forceinline=True)
def next_down(v: float) -> float:  # pragma: no cover - compiled
    """One float64 step toward -inf; NaN -> -inf; +inf -> the largest finite number."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    if 0 < magnitude < _INF_BITS:
        return _from_bits(b - (np.int64(1) | (b >> 63)))
    if v != v:
        return -math.inf
    if v == 0.0:
        return -5e-324
    return v if v < 0 else _BIG64


@jit(cache=True, forceinline=True)
def steps_out(low: float, high: float) -> tuple[float, float, bool]:  # pragma: no cover
    """(:func:`next_down` of ``low``, :func:`next_up` of ``high``, whether those are what they
    give) without a branch, so that a loop of it vectorises: one unit of each pattern out, what
    they take for a nonzero finite pattern (the flag); for zeros, infinities and NaN the two
    numbers are not theirs."""
    b, t = _bits(low), _bits(high)
    m, n = b & _MAGNITUDE, t & _MAGNITUDE
    ordinary = (m != 0) & (m < _INF_BITS) & (n != 0) & (n < _INF_BITS)
    down = _from_bits(b - (np.int64(1) | (b >> 63)))
    return down, _from_bits(t + (np.int64(1) | (t >> 63))), ordinary


@jit(cache=True, forceinline=True)
def float32_directed(v: float, up: bool, strict: bool) -> float:  # pragma: no cover - compiled
    """``v`` rounded onto float32 toward +inf when ``up``, else toward -inf (``strict``: to the
    float32 number strictly beyond ``v``, as :func:`step_up_to` / :func:`step_down_to`), using
    the hardware's round-to-nearest conversion and one float32 step where it went the wrong
    way: every float32 number is a float64 number, so comparing the conversion with ``v``
    decides exactly. The conversion rounds subnormal results on float32's subnormal grid and
    overflows to an infinity, which the step brings back to the largest finite number where
    the direction wants it. A NaN becomes the infinity of the direction."""
    if v != v:
        return math.inf if up else -math.inf
    if v == 0.0 and not strict:
        return v
    r = np.float32(v)
    back = np.float64(r)
    # branch-free below: whether the conversion went the wrong way is unpredictable
    if up:
        step = int(back < v) | (int(strict) & int(back == v) & int(v != math.inf))
    else:
        step = int(back > v) | (int(strict) & int(back == v) & int(v != -math.inf))
    b = np.int64(_bits32(r))
    # float32 patterns are sign-magnitude: up from a positive number (or down from a negative
    # one) adds one to the pattern, the other way subtracts one; from a zero, the step goes to
    # the smallest subnormal of the direction (pattern 1 or 0x80000001)
    toward = (b >> 31) | 1  # 1 for a non-negative pattern, -1 for a negative one
    delta = toward if up else -toward
    zero = int((b & 0x7FFFFFFF) == 0)
    from_zero = 1 if up else -0x7FFFFFFF
    stepped = (b + delta) * (1 - zero) + from_zero * zero
    bits = b + step * (stepped - b)
    # + 0.0: a zero reached from a nonzero v is +0, as the general path gives it (which keeps
    # -0 only as the strict upper neighbour of -2**-1074, where next_up gives -0)
    keep_sign = -0.0 if strict and up and v == -(2.0**-1074) else 0.0
    return np.float64(_from_bits32(bits)) + keep_sign


@jit(cache=True, forceinline=True)
def _is_float32(precision: int, emin: int, has_inf: bool) -> bool:  # pragma: no cover - compiled
    """Whether a format's parameters are float32's (the formats share no other combination)."""
    return precision == 24 and emin == -126 and has_inf


@jit(cache=True, forceinline=True)
def round_scalar(
    x: float, precision: int, emin: int, big: float, mode: int
) -> float:  # pragma: no cover - compiled
    """The finite, nonzero ``x`` rounded onto the grid of a format (``precision`` significant
    bits, ``emin``, largest finite ``big``) in the mode of code ``mode``
    (:data:`pytest_fpcheck.formats.MODE_CODES`); past ``big``, IEEE 754's overflow to an
    infinity (also for a format without one: an enclosure wants it there, and the emulators
    keep their sums in float64). A result of zero is +0."""
    y = _quantize(x, precision, emin, mode) + 0.0
    above, below = _overflow_limits(mode, big, math.inf)
    if y > big:
        return above
    if y < -big:
        return below
    return y


@jit(cache=True)
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
    return round_scalar(x, precision, emin, big, 3 if up else 2)


@jit(cache=True)
def round_to(
    v: float, precision: int, smallest_normal: float, emin: int, big: float, has_inf: bool, up: bool
) -> float:  # pragma: no cover - compiled
    """``v`` rounded onto the grid of a format with ``precision`` significant bits (smallest
    normal number ``smallest_normal`` = 2**emin, largest finite ``big``), toward +inf when
    ``up``, else toward -inf."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    if _bits(smallest_normal) <= magnitude < _INF_BITS:
        # In the target's normal range, rounding to p significant bits keeps the top p - 1
        # fraction bits of the float64 pattern: truncation rounds the magnitude down, and adding
        # one unit of the kept part rounds it up (a carry moves into the exponent, as it should).
        drop = 53 - precision
        low = (np.int64(1) << drop) - 1
        kept = b & ~low  # b itself when v is on the grid
        # branch-free: the sign of interval ends is unpredictable
        away = np.int64((b & low) != 0) & np.int64((b >= 0) == up)
        y = _from_bits(kept + (away << drop))
        if y > big:
            return math.inf if up else big
        if y < -big:
            return -big if up else -math.inf
        return y
    return _round_one(v, precision, emin, big, has_inf, up)


@jit(cache=True)
def step_down_to(
    v: float, precision: int, smallest_normal: float, emin: int, big: float, has_inf: bool
) -> float:  # pragma: no cover - compiled
    """``round_to(next_down(v), ..., up=False)``: the largest number of the format strictly
    below the float64 ``v`` (the lower end of an inexact float64 result, rounded onto the
    format), in one step where ``v`` is a normal number of the format's range."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    if _bits(smallest_normal) < magnitude < _INF_BITS:
        drop = 53 - precision
        low = (np.int64(1) << drop) - 1
        unit = np.int64(1) << drop
        kept = b & ~low
        negative = b >> 63  # -1 for a negative number, else 0
        on_grid = np.int64((b & low) == 0)
        # negative: away from zero by one unit of the format, on its grid or not; positive:
        # toward zero, by truncation, or by one unit from a number of the grid (branch-free:
        # the sign of interval ends is unpredictable)
        y = _from_bits(kept + ((negative & unit) | (~negative & -(unit * on_grid))))
        if y > big:
            return big
        if y < -big:
            return -math.inf
        return y
    return round_to(next_down(v), precision, smallest_normal, emin, big, has_inf, False)


@jit(cache=True)
def step_up_to(
    v: float, precision: int, smallest_normal: float, emin: int, big: float, has_inf: bool
) -> float:  # pragma: no cover - compiled
    """``round_to(next_up(v), ..., up=True)``: the smallest number of the format strictly
    above the float64 ``v``."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    if _bits(smallest_normal) < magnitude < _INF_BITS:
        drop = 53 - precision
        low = (np.int64(1) << drop) - 1
        unit = np.int64(1) << drop
        kept = b & ~low
        negative = b >> 63
        on_grid = np.int64((b & low) == 0)
        y = _from_bits(kept + ((~negative & unit) | (negative & -(unit * on_grid))))
        if y > big:
            return math.inf
        if y < -big:
            return -big
        return y
    return round_to(next_up(v), precision, smallest_normal, emin, big, has_inf, True)


@jit(cache=True, forceinline=True)
def _nearest_end(
    x: float,
    precision: int,
    smallest_normal: float,
    emin: int,
    big: float,
    has_inf: bool,
    threshold: float,
    fast32: bool,
    up: bool,
) -> float:  # pragma: no cover - compiled
    """``x`` (not NaN) rounded to nearest onto the format, a tie going toward +inf when ``up``,
    else toward -inf; past the overflow ``threshold`` (the largest finite number plus half its
    ULP) an infinity, as IEEE 754's nearest rounding gives one. A zero reached from a nonzero
    ``x`` is +0. Shortcuts (:func:`_nearest32`, :func:`_nearest_normal`) where they apply, else
    :func:`_nearest_general`; all three give the same bits."""
    if fast32:
        return _nearest32(x, big, threshold, up)
    b = _bits(x)
    magnitude = b & _MAGNITUDE
    if _bits(smallest_normal) <= magnitude < _INF_BITS:
        y = _nearest_normal(b, precision, up)
        if -big <= y <= big:
            return y
    return _nearest_general(x, precision, smallest_normal, emin, big, has_inf, threshold, up)


@jit(cache=True, forceinline=True)
def _nearest32(x: float, big: float, threshold: float, up: bool) -> float:  # pragma: no cover
    """:func:`_nearest_end` onto float32 with one hardware conversion (round to nearest even,
    subnormals and overflow included): where ``x`` is not a float32 number, the conversion is
    the nearer neighbour, except at a tie, where the neighbour the direction names is taken
    (the tie is ``x`` equal to the neighbours' midpoint, exact in float64; the other neighbour
    is one step of the float32 pattern away, toward ``x``); at the overflow threshold itself
    the conversion gives the infinity, and the downward direction the largest finite number."""
    r = np.float32(x)
    back = np.float64(r)
    if back == x:
        return x
    if math.isinf(back):
        if x == threshold and not up:
            return big
        if x == -threshold and up:
            return -big
        return back
    if _bits(x) & _BELOW_TIE == 0:  # else x has over 25 significant bits: not a tie
        b = np.int64(_bits32(r))
        # sign-magnitude patterns: one step away from zero adds 1, toward zero subtracts 1
        # (from a zero, away: the sign of r is the sign of x)
        other = np.float64(_from_bits32(b + 2 * np.int64(abs(x) > abs(back)) - 1))
        if x == 0.5 * back + 0.5 * other:
            back = max(back, other) if up else min(back, other)
    return back + 0.0


@jit(cache=True, forceinline=True)
def _nearest_normal(b: np.int64, precision: int, up: bool) -> float:  # pragma: no cover
    """:func:`_nearest_end` for the float64 of pattern ``b`` in the format's normal range
    (before any overflow, which the caller checks): the dropped bits of the pattern against
    half a unit of the kept ones decide; a tie goes away from zero when its direction is the
    sign's (a carry moves into the exponent, as it should)."""
    drop = 53 - precision
    low = (np.int64(1) << drop) - 1
    rest = b & low
    half = np.int64(1) << (drop - 1)
    kept = b & ~low  # b itself when x is on the grid (rest 0)
    # branch-free: whether x lies above its midpoint is unpredictable
    away = np.int64(rest > half) | (np.int64(rest == half) & np.int64((b >= 0) == up))
    return _from_bits(kept + (away << drop))


@jit(cache=True, forceinline=True)
def _nearest_general(
    x: float,
    precision: int,
    smallest_normal: float,
    emin: int,
    big: float,
    has_inf: bool,
    threshold: float,
    up: bool,
) -> float:  # pragma: no cover - compiled
    """:func:`_nearest_end` from the two directed roundings, which are exact; their midpoint
    is exact in float64 (two neighbours of a grid of at most 24 bits whose spacing is at least
    2**-149)."""
    d = round_to(x, precision, smallest_normal, emin, big, has_inf, False)
    u = round_to(x, precision, smallest_normal, emin, big, has_inf, True)
    if d == u:
        return d
    if u == math.inf:
        middle = threshold
    elif d == -math.inf:
        middle = -threshold
    else:
        middle = 0.5 * d + 0.5 * u
    if up:
        return u if x >= middle else d
    return d if x <= middle else u


@jit(cache=True, forceinline=True)
def _select(condition: bool, a: float, b: float) -> float:  # pragma: no cover - compiled
    """``a if condition else b``, bit for bit (signed zeros included), without a branch: which
    of a rounded end and its grid neighbour is farther out is unpredictable, and a mispredicted
    branch per end cost half of :func:`_nearest_all`'s time."""
    bits_a, bits_b = _bits(a), _bits(b)
    return _from_bits(bits_b ^ ((bits_a ^ bits_b) & -np.int64(condition)))


@jit(cache=True, forceinline=True)
def nearest_pair(
    lo: float,
    hi: float,
    precision: int,
    smallest_normal: float,
    emin: int,
    big: float,
    has_inf: bool,
    c: tuple[float, float, float],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The ends of :func:`nearest` for one element: ``c`` = (overflow threshold, relative
    drift, absolute drift)."""
    threshold, relative, absolute = c
    if lo != lo or lo == -math.inf:  # -inf: what the general path gives, in one comparison
        lower = -math.inf
    else:
        x = lo if math.isinf(lo) else next_down(lo - (abs(lo) * relative + absolute))
        near = _nearest_end(
            x, precision, smallest_normal, emin, big, has_inf, threshold, fast32, False
        )
        grid = round_to(lo, NEAREST_BITS, smallest_normal, emin, big, has_inf, False)
        lower = _select(near < grid, near, grid)
    if hi != hi or hi == math.inf:
        upper = math.inf
    else:
        y = hi if math.isinf(hi) else next_up(hi + (abs(hi) * relative + absolute))
        near = _nearest_end(
            y, precision, smallest_normal, emin, big, has_inf, threshold, fast32, True
        )
        grid = round_to(hi, NEAREST_BITS, smallest_normal, emin, big, has_inf, True)
        upper = _select(near > grid, near, grid)
    return lower, upper


#: float32's smallest normal number and 2**127, as float64 magnitude patterns
_NORMAL32_BITS = np.int64(0x3810000000000000)
_BEYOND32_BITS = np.int64(0x47E0000000000000)
#: the float64 pattern's bits below the 26-bit grid (NEAREST_BITS) in its normal range
_BELOW_GRID = np.int64((1 << (53 - NEAREST_BITS)) - 1)


@jit(cache=True, forceinline=True)
def _grid26(b: np.int64, up: bool) -> float:  # pragma: no cover - compiled
    """:func:`round_to` onto the :data:`NEAREST_BITS` grid of the float64 of pattern ``b`` in its
    normal range, toward +inf when ``up``, without a branch: truncation rounds a magnitude
    down, one unit of the kept part more rounds it up (away from zero: a negative number
    downward, a positive one upward)."""
    away = np.int64((b & _BELOW_GRID) != 0) & np.int64((b >= 0) == up)
    return _from_bits((b & ~_BELOW_GRID) + (away << (53 - NEAREST_BITS)))


@jit(cache=True, forceinline=True)
def _nearest32_usual(lo: float, hi: float) -> tuple[float, float, bool]:  # pragma: no cover
    """:func:`nearest_pair` onto float32 for the usual pair, without a branch (so that a loop of
    it vectorises), and whether the pair is usual: each end of magnitude in [2**-126, 2**127)
    (NaN, subnormal results and the overflow threshold are not) and not a tie between two
    float32 numbers once stepped, or an infinity or a zero, which the general path gives back
    as it is (a zero's one step out rounds back to a zero, which the 26-bit grid holds and
    :func:`_select` keeps over it). For a usual finite nonzero end the general path takes
    these steps and no other: float32's drift is 0, so the end is stepped one float64 step out
    (:func:`next_down`, :func:`next_up`, on a nonzero finite pattern), converted to float32 by
    the hardware (:func:`_nearest32` where the value is no tie and far from overflow: that
    conversion), and selected against the end rounded outward onto the 26-bit grid
    (:func:`round_to` in its normal range, where nothing overflows below 2**127)."""
    b, t = _bits(lo), _bits(hi)
    x = _from_bits(b - (np.int64(1) | (b >> 63)))
    y = _from_bits(t + (np.int64(1) | (t >> 63)))
    near_x, near_y = float(np.float32(x)), float(np.float32(y))
    grid_x, grid_y = _grid26(b, False), _grid26(t, True)
    tie_x = ((_bits(x) & _BELOW_TIE) == 0) & (near_x != x)
    tie_y = ((_bits(y) & _BELOW_TIE) == 0) & (near_y != y)
    m, n = b & _MAGNITUDE, t & _MAGNITUDE
    # an infinite end is its own rounding (a mask's -inf), and so is a zero (ReLU's, a sparse
    # gradient's): usual too
    own_x, own_y = (m == _INF_BITS) | (m == 0), (n == _INF_BITS) | (n == 0)
    usual = (((m >= _NORMAL32_BITS) & (m < _BEYOND32_BITS) & ~tie_x) | own_x) & (
        ((n >= _NORMAL32_BITS) & (n < _BEYOND32_BITS) & ~tie_y) | own_y
    )
    lower = _select(own_x, lo, _select(near_x < grid_x, near_x, grid_x))
    return lower, _select(own_y, hi, _select(near_y > grid_y, near_y, grid_y)), usual


@jit(cache=True, forceinline=True)
def _nearest_usual(
    lo: float,
    hi: float,
    precision: int,
    lowest: np.int64,
    highest: np.int64,
    has_inf: bool,
    c: tuple[float, float, float],
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`nearest_pair` onto a format other than float32 (bfloat16, float16) for the usual
    pair, without a branch (so that a loop of it vectorises), and whether the pair is usual:
    each end of magnitude between ``lowest`` (the pattern of twice the smallest normal number)
    and ``highest`` (of half the largest finite one), or an infinity or a zero, which the
    general path gives back as it is (a zero moved out by its drift rounds back to a zero, and
    the 26-bit grid holds it). For the others the general path takes these steps
    and no other: the end moved out by its drift is nonzero and finite (the drift is below
    2**-23 of it plus 2**-149), so one float64 step out is one unit of its pattern; that value
    lies in the format's normal range, where :func:`_nearest_normal` rounds it (ties as the
    direction says) without overflow; and the end rounded outward onto the 26-bit grid
    (:func:`round_to` in its normal range) stays finite."""
    _, relative, absolute = c
    b, t = _bits(lo), _bits(hi)
    xb = _bits(lo - (abs(lo) * relative + absolute))
    yb = _bits(hi + (abs(hi) * relative + absolute))
    near_x = _nearest_normal(xb - (np.int64(1) | (xb >> 63)), precision, False)
    near_y = _nearest_normal(yb + (np.int64(1) | (yb >> 63)), precision, True)
    grid_x, grid_y = _grid26(b, False), _grid26(t, True)
    m, n = b & _MAGNITUDE, t & _MAGNITUDE
    # an infinite end is its own rounding where the general path's first test says so (-inf
    # below, +inf above) or the format has infinities (a mask's -inf), and so is a zero (its
    # drift rounds back to zero, and the 26-bit grid holds it): usual too
    own_x = (lo == -math.inf) | (has_inf & (lo == math.inf)) | (m == 0)
    own_y = (hi == math.inf) | (has_inf & (hi == -math.inf)) | (n == 0)
    usual = bool(
        (((m >= lowest) & (m <= highest)) | own_x) & (((n >= lowest) & (n <= highest)) | own_y)
    )
    lower = _select(own_x, lo, _select(near_x < grid_x, near_x, grid_x))
    return lower, _select(own_y, hi, _select(near_y > grid_y, near_y, grid_y)), usual


@jit(cache=True, fallback=fallbacks.nearest_all)
def _nearest_all(
    lo: np.ndarray,
    hi: np.ndarray,
    precision: int,
    emin: int,
    big: float,
    has_inf: bool,
    c: tuple[float, float, float],
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    smallest_normal = math.ldexp(1.0, emin)
    if _is_float32(precision, emin, has_inf):
        # the common ends in one branch-free pass that vectorises, the others element by element
        missed = 0
        for i in range(lo.size):
            lower, upper, usual = _nearest32_usual(lo[i], hi[i])
            out_lo[i], out_hi[i] = lower, upper
            missed += not usual
        if missed:
            for i in range(lo.size):
                if not _nearest32_usual(lo[i], hi[i])[2]:
                    out_lo[i], out_hi[i] = nearest_pair(
                        lo[i], hi[i], precision, smallest_normal, emin, big, has_inf, c, True
                    )
    else:
        lowest, highest = _bits(2.0 * smallest_normal), _bits(0.5 * big)
        missed = 0
        for i in range(lo.size):
            lower, upper, usual = _nearest_usual(
                lo[i], hi[i], precision, lowest, highest, has_inf, c
            )
            out_lo[i], out_hi[i] = lower, upper
            missed += not usual
        if missed:
            for i in range(lo.size):
                if not _nearest_usual(lo[i], hi[i], precision, lowest, highest, has_inf, c)[2]:
                    out_lo[i], out_hi[i] = nearest_pair(
                        lo[i], hi[i], precision, smallest_normal, emin, big, has_inf, c, False
                    )


@jit(cache=True, fallback=fallbacks.step_all)
def _step_all(x: np.ndarray, direction: float) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty_like(x)
    if direction > 0:
        for i in range(x.size):
            out[i] = next_up(x[i])
    else:
        for i in range(x.size):
            out[i] = next_down(x[i])
    return out


@jit(cache=True, fallback=fallbacks.round_all)
def _round_all(
    x: np.ndarray, precision: int, emin: int, big: float, has_inf: bool, up: bool
) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty_like(x)
    if _is_float32(precision, emin, has_inf):
        for i in range(x.size):
            out[i] = float32_directed(x[i], up, False)
        return out
    smallest_normal = math.ldexp(1.0, emin)
    for i in range(x.size):
        out[i] = round_to(x[i], precision, smallest_normal, emin, big, has_inf, up)
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


#: (relative, absolute) drift T of the roundings a result may pass before its last one
#: (:func:`nearest`): a float32 intermediate of a float16 or bfloat16 result; none for float32
_DRIFT = {
    "bfloat16": (2.0**-23, 2.0**-149),
    "float16": (2.0**-23, 2.0**-149),
    "float32": (0.0, 0.0),
}


def nearest(lo: Array, hi: Array, fmt: Format) -> tuple[Array, Array]:
    """The enclosure of a result stored in ``fmt`` by rounding to nearest, given an enclosure
    [``lo``, ``hi``] of the exact value and of the value the run rounds last (RENDER section
    II-C, tightened): where [lo, hi] is narrower than the format's spacing, the stored result's
    actual rounding error is known to be smaller than the ULP that outward rounding
    (:func:`down_to` / :func:`up_to`) charges, and this keeps that knowledge.

    The rule. Let R be the run's rounding: RN_F, or RN_F after nearest roundings onto float32
    and/or float64 (a chain RN_F o RN_Gk o ... o RN_G1; PyTorch's CPU kernels compute float16
    and bfloat16 in float32 and convert with round-to-nearest-even; a float64 value converted to
    bfloat16 passes through float32), ties broken any way. The caller guarantees that the run
    stores R(v) for some v in [lo, hi] (v a value of [lo, hi] on F's grid is the case R(v) = v).
    Then the stored value lies in [L, U] with

        L = RN_F(lo - T(lo)), ties toward -inf,    U = RN_F(hi + T(hi)), ties toward +inf,

    T(x) = |x| 2**-23 + 2**-149 for float16 and bfloat16, T = 0 for float32, and the enclosure
    is [min(lo', L), max(hi', U)] with lo', hi' the ends rounded outward onto the grid of
    :data:`NEAREST_BITS` (26) significant bits above F's exponent floor ``emin``.

    Why it is sound. (1) Every RN onto a grid is monotone (x <= y implies RN(x) <= RN(y), for
    any choice at ties; an overflow to an infinity included), so a chain of them is too:
    R(lo) <= R(v) <= R(hi) for v in [lo, hi]. It remains to bound R at the two ends, which are
    float64 numbers. (2) At a float64 number a rounding onto float64 changes nothing, so what
    the chain does before RN_F is at most one rounding onto float32 (float16 and bfloat16
    results; float32's grid holds theirs): y = RN_32(lo) moves lo by at most half a float32
    spacing, 2**-24 |lo| or 2**-150 below float32's normal range, less than T(lo); a float32
    result's chain has nothing before RN_F (T = 0). An RN_32 that overflows does so only past
    float32's threshold, beyond F's, where L and U are infinite anyway. (3) RN_F is monotone
    and L takes the lower choice at a tie, so R(lo) = RN_F(y) >= RN_F(lo - T) >= L; likewise
    R(hi) <= U. lo - T is evaluated in float64 and stepped down one float64 step (next_down),
    so the argument is at most the exact lo - T (hi + T: stepped up). (4) The exact value lies
    in [lo, hi], hence in [lo', hi']. (5) Overflow: RN_F gives an infinity from
    max_finite + ulp(max_finite) / 2 on (IEEE 754 section 7.4), which L and U reproduce; an
    end beyond max_finite rounds outward onto the 26-bit grid as :func:`down_to` /
    :func:`up_to` do (the infinity of its side or the largest finite number). Underflow needs
    nothing more: RN_F's subnormal grid is part of F's grid. Flush-to-zero is outside the
    model, as it is for outward rounding.

    The ends lie on F's grid or on the 26-bit grid above F's ``emin`` (whose quantum is at
    least 2**(emin - 25)): a product of two such ends has at most 52 significant bits and lies
    far inside float64's normal range, so it is exact in float64, which is what the rules that
    take a tensor's endpoints as products of at most 26-bit numbers
    (:func:`pytest_fpcheck.interval.elementwise.mul`'s ``operand_bits``) rely on. Formats other
    than float32, float16 and bfloat16 are rounded outward (:func:`down_to` / :func:`up_to`);
    float64 keeps its ends (a NaN end becomes the infinity of its side).

    Not for results whose last rounding is not to nearest or unknown (a library function's
    result in its own format, a directed or stochastic rounding, another device's epilogue):
    those keep outward rounding, which encloses any faithful rounding."""
    flat_lo, shape = _flat(lo)
    flat_hi = flat_lo if hi is lo else _flat(hi)[0]
    args = nearest_args(fmt)
    if args is None:
        return down_to(lo, fmt), up_to(hi, fmt)
    out_lo, out_hi = np.empty(flat_lo.shape), np.empty(flat_lo.shape)
    if flat_lo.size:
        _nearest_all(flat_lo, flat_hi, *args, out_lo, out_hi)
    return out_lo.reshape(shape), out_hi.reshape(shape)


NearestArgs = tuple[int, int, float, bool, tuple[float, float, float]]


def nearest_args(fmt: Format) -> NearestArgs | None:
    """The arguments of :func:`_nearest_all` after the ends for ``fmt``: (precision, emin,
    largest finite number, has infinities, (overflow threshold, relative drift, absolute
    drift)); None for a format :func:`nearest` rounds outward."""
    drift = _DRIFT.get(fmt.name)
    if drift is None:
        return None
    threshold = fmt.max_finite + math.ldexp(1.0, fmt.emax - fmt.precision)
    return fmt.precision, fmt.emin, fmt.max_finite, fmt.has_inf, (threshold, *drift)
