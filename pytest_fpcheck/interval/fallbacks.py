"""Exact NumPy twins of compiled kernels: the same float64 operations in the same order on whole
arrays, giving the same bits as the compiled loops (RENDER section II-C's outward rounding, as
:mod:`pytest_fpcheck.interval.rounding` states it), run while a kernel is not yet compiled (see
:mod:`pytest_fpcheck.interval.jit`).

Each twin takes the compiled kernel's arguments (a kernel compiled per switch setting takes the
switches first) and writes or returns what the kernel does. The scalar helpers below are the
element-wise forms of :mod:`pytest_fpcheck.interval.rounding`'s compiled ones: branches become
``np.where`` selections, integer bit arithmetic wraps as in compiled code, and Numba's
``min(a, b)`` / ``max(a, b)`` are ``b if b < a else a`` / ``b if b > a else a`` (which decides
where a NaN goes). ``tests/test_fallbacks.py`` checks every twin against its kernel bit for bit
on adversarial inputs (NaN, infinities, signed zeros, subnormals, the formats' edges).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..formats import overflow_limits, quantize

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = [
    "accumulated",
    "add",
    "any_subnormal",
    "div",
    "epilogue",
    "float32_magnitudes",
    "hull",
    "join_computed",
    "library",
    "mul",
    "nearest_all",
    "nearest_elementwise",
    "outward",
    "outward_step",
    "round_all",
    "row_sums",
    "step_all",
    "sum_ends",
    "summary",
]

_BIG64 = float(np.finfo(np.float64).max)
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
_INF_BITS = np.int64(0x7FF0000000000000)
FormatArgs = tuple[bool, int, float, int, float, bool]


def _bits(v: Array | np.float64) -> NDArray[np.int64]:
    return np.ascontiguousarray(v, dtype=np.float64).view(np.int64)


def _from_bits(b: NDArray[np.int64]) -> Array:
    return np.ascontiguousarray(b, dtype=np.int64).view(np.float64)


def _minimum(a: Array, b: Array | np.float64) -> Array:
    """Numba's (and Python's) ``min(a, b)``: ``b if b < a else a``."""
    return np.where(b < a, b, a)


def _maximum(a: Array, b: Array | np.float64) -> Array:
    """Numba's (and Python's) ``max(a, b)``: ``b if b > a else a``."""
    return np.where(b > a, b, a)


def next_up(v: Array) -> Array:
    """:func:`..rounding.next_up` element-wise."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    regular = (magnitude > 0) & (magnitude < _INF_BITS)
    stepped = _from_bits(b + (np.int64(1) | (b >> 63)))
    other = np.where(v != v, math.inf, np.where(v == 0.0, 5e-324, np.where(v > 0, v, -_BIG64)))
    return np.where(regular, stepped, other)


def next_down(v: Array) -> Array:
    """:func:`..rounding.next_down` element-wise."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    regular = (magnitude > 0) & (magnitude < _INF_BITS)
    stepped = _from_bits(b - (np.int64(1) | (b >> 63)))
    other = np.where(v != v, -math.inf, np.where(v == 0.0, -5e-324, np.where(v < 0, v, _BIG64)))
    return np.where(regular, stepped, other)


def _round_one(x: Array, precision: int, emin: int, big: float, has_inf: bool, up: bool) -> Array:
    """:func:`..rounding._round_one` element-wise (with :func:`..rounding.round_scalar`)."""
    mode = 3 if up else 2
    with np.errstate(all="ignore"):
        y = quantize(x, precision, emin, mode) + 0.0
    above, below = overflow_limits(mode, big, math.inf)
    rounded = np.where(y > big, above, np.where(y < -big, below, y))
    if has_inf:
        infinite = x
    else:
        keep = (x > 0) == up
        infinite = np.where(keep, x, np.where(x > 0, big, -big))
    nan = math.inf if up else -math.inf
    return np.where(x != x, nan, np.where(np.isinf(x), infinite, np.where(x == 0.0, x, rounded)))


def round_to(
    v: Array, precision: int, smallest_normal: float, emin: int, big: float, has_inf: bool, up: bool
) -> Array:
    """:func:`..rounding.round_to` element-wise."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    normal = (magnitude >= _bits(np.float64(smallest_normal))) & (magnitude < _INF_BITS)
    drop = 53 - precision
    low = (np.int64(1) << drop) - 1
    kept = b & ~low
    away = (b >= 0) == up
    y = _from_bits(np.where((b & low) == 0, b, np.where(away, kept + (np.int64(1) << drop), kept)))
    if up:
        y = np.where(y > big, math.inf, np.where(y < -big, -big, y))
    else:
        y = np.where(y > big, big, np.where(y < -big, -math.inf, y))
    return np.where(normal, y, _round_one(v, precision, emin, big, has_inf, up))


def _step_to(
    v: Array, precision: int, smallest_normal: float, emin: int, big: float, has_inf: bool, up: bool
) -> Array:
    """:func:`..rounding.step_up_to` (``up``) or :func:`..rounding.step_down_to` element-wise."""
    b = _bits(v)
    magnitude = b & _MAGNITUDE
    normal = (magnitude > _bits(np.float64(smallest_normal))) & (magnitude < _INF_BITS)
    drop = 53 - precision
    low = (np.int64(1) << drop) - 1
    unit = np.int64(1) << drop
    kept = b & ~low
    negative = b >> 63
    on_grid = ((b & low) == 0).astype(np.int64)
    if up:
        y = _from_bits(kept + ((~negative & unit) | (negative & -(unit * on_grid))))
        y = np.where(y > big, math.inf, np.where(y < -big, -big, y))
        other = round_to(next_up(v), precision, smallest_normal, emin, big, has_inf, True)
    else:
        y = _from_bits(kept + ((negative & unit) | (~negative & -(unit * on_grid))))
        y = np.where(y > big, big, np.where(y < -big, -math.inf, y))
        other = round_to(next_down(v), precision, smallest_normal, emin, big, has_inf, False)
    return np.where(normal, y, other)


def float32_directed(v: Array, up: bool, strict: bool) -> Array:
    """:func:`..rounding.float32_directed` element-wise."""
    with np.errstate(all="ignore"):
        r = v.astype(np.float32)
    back = r.astype(np.float64)
    if up:
        step = (back < v) | (strict & (back == v) & (v != math.inf))
    else:
        step = (back > v) | (strict & (back == v) & (v != -math.inf))
    b = r.view(np.int32).astype(np.int64)
    toward = (b >> 31) | 1
    delta = toward if up else -toward
    zero = ((b & 0x7FFFFFFF) == 0).astype(np.int64)
    from_zero = 1 if up else -0x7FFFFFFF
    stepped = (b + delta) * (1 - zero) + from_zero * zero
    bits = b + step.astype(np.int64) * (stepped - b)
    result = bits.astype(np.int32).view(np.float32).astype(np.float64)
    # + 0.0: a zero reached from a nonzero v is +0 (-0 only as the strict upper neighbour of
    # -2**-1074)
    keep_sign = np.where(v == -(2.0**-1074), -0.0, 0.0) if strict and up else 0.0
    result = result + keep_sign
    nan = math.inf if up else -math.inf
    result = np.where(v != v, nan, result)
    if not strict:
        result = np.where(v == 0.0, v, result)
    return result


def outward(lo: Array, hi: Array, fa: FormatArgs, fast32: bool) -> tuple[Array, Array]:
    """:func:`.kernels.base.outward` element-wise."""
    if fast32:
        return float32_directed(lo, False, False), float32_directed(hi, True, False)
    if fa[0]:
        return np.where(lo != lo, -math.inf, lo), np.where(hi != hi, math.inf, hi)
    return (
        round_to(lo, fa[1], fa[2], fa[3], fa[4], fa[5], False),
        round_to(hi, fa[1], fa[2], fa[3], fa[4], fa[5], True),
    )


def outward_step(lo: Array, hi: Array, fa: FormatArgs, fast32: bool) -> tuple[Array, Array]:
    """:func:`.kernels.base.outward_step` element-wise."""
    if fast32:
        return float32_directed(lo, False, True), float32_directed(hi, True, True)
    if fa[0]:
        return next_down(lo), next_up(hi)
    return (
        _step_to(lo, fa[1], fa[2], fa[3], fa[4], fa[5], False),
        _step_to(hi, fa[1], fa[2], fa[3], fa[4], fa[5], True),
    )


def bump(r: Array) -> Array:
    """:func:`.kernels.base.bump` element-wise."""
    return np.where(r >= 2.0**-1000, r * (1.0 + 2.0**-51), r + 2.0**-1022)


def sum_lower(a: Array, b: Array) -> Array:
    """:func:`.kernels.base.sum_lower` element-wise: a + b rounded down (TwoSum decides)."""
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    exact = (error >= 0) | (np.isinf(s) & (error == error)) | np.isinf(a) | np.isinf(b)
    return np.where(exact, s, next_down(s))


def sum_upper(a: Array, b: Array) -> Array:
    """:func:`.kernels.base.sum_upper` element-wise: a + b rounded up."""
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    exact = (error <= 0) | (np.isinf(s) & (error == error)) | np.isinf(a) | np.isinf(b)
    return np.where(exact, s, next_up(s))


# the twins of kernels


def step_all(x: Array, direction: float) -> Array:
    """``rounding._step_all``: one float64 step up (``direction > 0``) or down."""
    return next_up(x) if direction > 0 else next_down(x)


def round_all(x: Array, precision: int, emin: int, big: float, has_inf: bool, up: bool) -> Array:
    """``rounding._round_all``: directed rounding onto a format (float32's parameters take the
    hardware conversion's path, as the kernel does)."""
    if precision == 24 and emin == -126 and has_inf:
        return float32_directed(x, up, False)
    return round_to(x, precision, math.ldexp(1.0, emin), emin, big, has_inf, up)


def _nearest_end(
    x: Array, precision: int, emin: int, big: float, has_inf: bool, threshold: float, up: bool
) -> Array:
    """``rounding._nearest_end`` element-wise."""
    smallest_normal = math.ldexp(1.0, emin)
    if precision == 24 and emin == -126 and has_inf:
        d, u = float32_directed(x, False, False), float32_directed(x, True, False)
    else:
        d = round_to(x, precision, smallest_normal, emin, big, has_inf, False)
        u = round_to(x, precision, smallest_normal, emin, big, has_inf, True)
    with np.errstate(all="ignore"):
        middle = np.where(
            u == math.inf, threshold, np.where(d == -math.inf, -threshold, 0.5 * d + 0.5 * u)
        )
    chosen = np.where(x >= middle, u, d) if up else np.where(x <= middle, d, u)
    return np.where(d == u, d, chosen)


def nearest_all(
    lo: Array,
    hi: Array,
    precision: int,
    emin: int,
    big: float,
    has_inf: bool,
    c: tuple[float, float, float],
    out_lo: Array,
    out_hi: Array,
) -> None:
    """``rounding._nearest_all``: the ends of ``rounding.nearest``, written into ``out_lo`` and
    ``out_hi``."""
    threshold, relative, absolute = c
    smallest_normal = math.ldexp(1.0, emin)
    bits = 26  # rounding.NEAREST_BITS (this module cannot import rounding)
    with np.errstate(all="ignore"):
        x = np.where(np.isinf(lo), lo, next_down(lo - (np.abs(lo) * relative + absolute)))
        y = np.where(np.isinf(hi), hi, next_up(hi + (np.abs(hi) * relative + absolute)))
    near_lo = _nearest_end(x, precision, emin, big, has_inf, threshold, False)
    grid_lo = round_to(lo, bits, smallest_normal, emin, big, has_inf, False)
    near_hi = _nearest_end(y, precision, emin, big, has_inf, threshold, True)
    grid_hi = round_to(hi, bits, smallest_normal, emin, big, has_inf, True)
    out_lo[...] = np.where(lo != lo, -math.inf, np.where(near_lo < grid_lo, near_lo, grid_lo))
    out_hi[...] = np.where(hi != hi, math.inf, np.where(near_hi > grid_hi, near_hi, grid_hi))


def summary(lo: Array, hi: Array) -> tuple[float, bool]:
    """``kernels.base._summary``: (largest width, some element is the whole line)."""
    with np.errstate(all="ignore"):
        width = hi - lo
    width = np.where(lo == hi, 0.0, width)
    width = np.where(width != width, math.inf, width)
    widest = max(int(np.max(_bits(width), initial=0)), 0)
    unbounded = bool(np.any((lo == -math.inf) & (hi == math.inf)))
    return float(np.int64(widest).view(np.float64)), unbounded


def sum_ends(lo: Array, hi: Array, out: Array) -> None:
    """``kernels.linalg._sum_ends``: over the middle axis of (outer, terms, inner), the sums
    of lo, of hi and of max(|lo|, |hi|) (NaN where an end is), term after term from +0.0, the
    least lo and the most hi (a NaN sticks), written into ``out`` (5, outer, inner)."""
    outer, terms, inner = lo.shape
    sums = [np.zeros((outer, inner)) for _ in range(3)]
    least, most = np.full((outer, inner), math.inf), np.full((outer, inner), -math.inf)
    with np.errstate(all="ignore"):
        for k in range(terms):
            a, b = lo[:, k, :], hi[:, k, :]
            undefined = (a != a) | (b != b)
            sums[0] += a
            sums[1] += b
            sums[2] += np.where(undefined, math.nan, _maximum(np.abs(a), np.abs(b)))
            least = np.where((a < least) | (a != a), a, least)
            most = np.where((b > most) | (b != b), b, most)
    out[0], out[1], out[2], out[3], out[4] = sums[0], sums[1], sums[2], least, most


def row_sums(
    g_lo: Array,
    g_hi: Array,
    rows: NDArray[np.int64],
    skip: int,
    lo: Array,
    hi: Array,
    total: Array,
    count: Array,
) -> None:
    """``kernels.scatter._row_sums``: the rows of ``g_lo``, ``g_hi`` and their magnitudes (NaN
    where an end is) added into the rows ``rows`` of ``lo``, ``hi``, ``total`` one row after
    another in order (``np.add.at`` is unbuffered), rows indexed ``skip`` left out, and one
    added to ``count`` per row added."""
    keep = rows != skip
    index = rows[keep]
    a, b = g_lo[keep], g_hi[keep]
    with np.errstate(invalid="ignore"):
        magnitude = np.where((a != a) | (b != b), math.nan, _maximum(np.abs(a), np.abs(b)))
    np.add.at(lo, index, a)
    np.add.at(hi, index, b)
    np.add.at(total, index, magnitude)
    np.add.at(count, index, 1.0)


def _gamma(m: Array, u: float) -> Array:
    nu = m * u
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(nu < 1.0, next_up(nu / next_down(1.0 - nu)), math.inf)


def accumulated(
    fast32: bool,
    lo: Array,
    hi: Array,
    total: Array,
    count: Array,
    width: int,
    c: tuple[float, float, float],
    fa: FormatArgs,
    out_lo: Array,
    out_hi: Array,
) -> None:
    """``kernels.scatter._accumulated``: sums of ``count`` terms (one count per ``width``
    elements) widened by gamma_m(u) and gamma_{m+1}(2**-53) of their magnitudes and m smallest
    subnormals, stepped out; the whole line where they may overflow; the given ends where the
    count is 0; rounded outward."""
    u, eta, big = c
    m = np.repeat(count, width)
    with np.errstate(invalid="ignore", over="ignore"):
        relative, evaluation = _gamma(m, u), _gamma(m + 1.0, 2.0**-53)
        spread = next_up(relative * total + evaluation * total + m * eta)
        overflow = next_up(total * (1.0 + relative) * (1.0 + evaluation)) > big
        low = np.where(overflow, -math.inf, next_down(lo - spread))
        high = np.where(overflow, math.inf, next_up(hi + spread))
        low, high = np.where(m == 0.0, lo, low), np.where(m == 0.0, hi, high)
    out_lo[...], out_hi[...] = outward(low, high, fa, fast32)


def any_subnormal(bits: NDArray[np.uint16], exponent: int, magnitude: int) -> bool:
    """``kernels.linalg._any_subnormal``: some pattern is a non-zero magnitude with a zero
    exponent field."""
    b = bits.astype(np.int64) & magnitude
    return bool(np.any((b != 0) & ((b & exponent) == 0)))


def float32_magnitudes(
    x: NDArray[np.float32], bits: NDArray[np.uint32], floor: float, out: NDArray[np.float32]
) -> bool:
    """``kernels.linalg._magnitudes``: max(|x|, floor) written (a NaN stays NaN), and whether
    some float32 pattern is subnormal (read on the bits)."""
    a = np.abs(x)
    low = np.float32(floor)
    out[...] = np.where(a < low, low, a)
    return bool(np.any(((bits & 0x7F800000) == 0) & ((bits & 0x7FFFFF) != 0)))


def join_computed(
    lo: Array, hi: Array, value: Array, out_lo: Array, out_hi: Array
) -> tuple[bool, float, bool]:
    """``kernels.base._join_computed``: the hull with the computed values, written, and
    (some value is not ``lo``'s, largest width, some element is the whole line)."""
    differs = bool(np.any((lo != value) & ((lo == lo) | (value == value))))
    undefined = np.isnan(lo) | np.isnan(hi) | np.isnan(value)
    out_lo[...] = np.where(undefined, -math.inf, np.where(value < lo, value, lo))
    out_hi[...] = np.where(undefined, math.inf, np.where(value > hi, value, hi))
    widest, unbounded = summary(out_lo, out_hi)
    return differs, widest, unbounded


def epilogue(
    has_addend: bool,
    fast32: bool,
    mid: Array,
    rad: np.ndarray,
    addend_mid: Array,
    addend_rad: Array,
    c: tuple[float, float, float, float],
    fa: FormatArgs,
    lo: Array,
    hi: Array,
) -> tuple[float, bool]:
    """``kernels.linalg._epilogue(has_addend, fast32)``: a product's enclosure from its midpoint
    and radius product, written, and its :func:`summary`."""
    multiplier, scale, eta, limit = c
    if mid.size == 0:
        return 0.0, False
    m = mid.astype(np.float64)  # a float32 midpoint product's too
    with np.errstate(all="ignore"):
        r = rad.astype(np.float64) * multiplier
        if has_addend:
            index = np.arange(mid.size) % addend_mid.size
            m = m + addend_mid[index]
            r = r + addend_rad[index]
        r = bump((r + eta) * scale)
        whole = ~(r < limit) | ~np.isfinite(m)
        low, high = outward_step(m - r, m + r, fa, fast32)
    lo[:] = np.where(whole, -math.inf, low)
    hi[:] = np.where(whole, math.inf, high)
    return summary(lo, hi)


def epilogue_nearest(
    has_addend: bool,
    mid: Array,
    rad: np.ndarray,
    addend_mid: Array,
    addend_rad: Array,
    c: tuple[float, float, float, float],
    fa: FormatArgs,
    n: tuple[int, int, float, bool, tuple[float, float, float]],
    lo: Array,
    hi: Array,
) -> tuple[float, bool]:
    """``kernels.linalg._epilogue_nearest(has_addend, ...)``: the epilogue onto float64
    (``fa``), then its ends rounded to nearest (``rounding._nearest_all``'s arguments ``n``),
    written, and their :func:`summary`."""
    low, high = np.empty(lo.shape), np.empty(hi.shape)
    epilogue(has_addend, False, mid, rad, addend_mid, addend_rad, c, fa, low, high)
    nearest_all(low, high, *n, lo, hi)
    return summary(lo, hi)


def hull(
    point: bool,
    fast32: bool,
    gelu: bool,
    lo: Array,
    hi: Array,
    v_lo: Array,
    v_hi: Array,
    c: tuple[float, float, float, float],
    fa: FormatArgs,
    out_lo: Array,
    out_hi: Array,
) -> None:
    """``kernels.composite._hull_bounds(point, fast32, gelu)``: a unimodal function's
    enclosure from ``v`` at the ends (with ``gelu``: erf(x / sqrt 2), GELU's allowance; else f,
    the allowance per |f|)."""
    x_min, f_min, k1, k2 = c
    with np.errstate(all="ignore"):
        a = lo
        f_a = 0.5 * a * (1.0 + v_lo) if gelu else v_lo
        if point:
            b, low, high = a, f_a, f_a
        else:
            b = hi
            f_b = 0.5 * b * (1.0 + v_hi) if gelu else v_hi
            low, high = _minimum(f_a, f_b), _maximum(f_a, f_b)
            holds_minimum = (a <= x_min + 1e-9) & (x_min - 1e-9 <= b)
            low = np.where(holds_minimum, _minimum(low, np.float64(f_min)), low)
            undefined = (f_a != f_a) | (f_b != f_b)
            low, high = np.where(undefined, math.nan, low), np.where(undefined, math.nan, high)
        x_mag = _maximum(np.abs(a), np.abs(b))
        f_mag = _maximum(np.abs(low), np.abs(high))
        allowance = x_mag * k1 * (9.0 + 0.5 * x_mag) + k2 if gelu else k1 * f_mag + k2
        spread = allowance + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
        down_end, up_end = low - spread, high + spread
        whole = (down_end != down_end) | (up_end != up_end)
        low_out, high_out = outward_step(down_end, up_end, fa, fast32)
    out_lo[:] = np.where(whole, -math.inf, low_out)
    out_hi[:] = np.where(whole, math.inf, high_out)


def _operands(
    size: int,
    a_lo: Array,
    a_hi: Array,
    a_period: int,
    b_lo: Array,
    b_hi: Array,
    b_period: int,
) -> tuple[Array, Array, Array, Array]:
    """Both operands' ends at every output element: element i reads ``a[i % a_period]`` (the
    kernels' blocks, whose periods divide one another, read the same)."""
    index = np.arange(size)
    a_index, b_index = index % a_period, index % b_period
    return a_lo[a_index], a_hi[a_index], b_lo[b_index], b_hi[b_index]


def power(
    fast32: bool,
    n: int,
    magnitude: bool,
    x_lo: Array,
    x_hi: Array,
    point: bool,
    fa: FormatArgs,
    lo: Array,
    hi: Array,
) -> None:
    """``kernels.elementwise._power_bounds(fast32, n, magnitude)``: n - 1 interval products of
    each end's chain by the point it starts from (:func:`mul`, stepped outward), the lower end's
    lower end and the upper end's upper end (a point's two chains are one: ``point`` changes
    nothing); with ``magnitude`` of |x| over the ends (0 below where it spans 0, NaN where an
    end is)."""
    if magnitude:
        size_lo, size_hi = np.abs(x_lo), np.abs(x_hi)
        with np.errstate(invalid="ignore"):
            spans = (x_lo < 0) & (x_hi > 0)
            x_lo, x_hi = (
                np.where(spans, 0.0, np.minimum(size_lo, size_hi)),
                np.maximum(size_lo, size_hi),
            )
    for start, out, pick in ((x_lo, lo, 0), (x_hi, hi, 1)):
        chain = (start, start)
        for _ in range(n - 1):
            low, high = np.empty(start.size), np.empty(start.size)
            mul(True, fast32, *chain, start.size, start, start, start.size, fa, low, high)
            chain = (low, high)
        out[:] = chain[pick]
    if fast32 and n > 1:
        low, high, usual = _power_usual(x_lo, x_hi, n)
        lo[...] = np.where(usual, low, lo)
        hi[...] = np.where(usual, high, hi)


def _power_usual(a: Array, b: Array, n: int) -> tuple[Array, Array, NDArray[np.bool_]]:
    """``kernels.elementwise._power_usual`` element-wise."""
    low_lo, low_hi, high_lo, high_hi = a, a, b, b
    with np.errstate(all="ignore"):
        for _ in range(n - 1):
            p1, p2, q1, q2 = low_lo * a, low_hi * a, high_lo * b, high_hi * b
            low_lo = float32_directed(_minimum(p1, p2), False, False)
            low_hi = float32_directed(_maximum(p1, p2), True, False)
            high_lo = float32_directed(_minimum(q1, q2), False, False)
            high_hi = float32_directed(_maximum(q1, q2), True, False)
        below = np.int64((1 << 27) - 1)
        usual = (
            ((_bits(a) & below) == 0)
            & ((_bits(b) & below) == 0)
            & (np.abs(a) < math.inf)
            & (np.abs(b) < math.inf)
            & (np.abs(low_lo) < 3.0e38)
            & (np.abs(high_hi) < 3.0e38)
        )
    return low_lo, high_hi, usual


def add(
    negate_b: bool,
    fast32: bool,
    a_lo: Array,
    a_hi: Array,
    a_period: int,
    b_lo: Array,
    b_hi: Array,
    b_period: int,
    fa: FormatArgs,
    lo: Array,
    hi: Array,
) -> tuple[float, bool]:
    """``kernels.elementwise._add_bounds(negate_b, fast32)``: the enclosure of a sum (a
    difference when ``negate_b``) of broadcast intervals, written, and its :func:`summary`."""
    x_lo, x_hi, y_lo, y_hi = _operands(lo.size, a_lo, a_hi, a_period, b_lo, b_hi, b_period)
    if negate_b:
        y_lo, y_hi = -y_hi, -y_lo
    with np.errstate(all="ignore"):
        low, high = sum_lower(x_lo, y_lo), sum_upper(x_hi, y_hi)
        opposite = ((x_hi == math.inf) & (y_lo == -math.inf)) | (
            (x_lo == -math.inf) & (y_hi == math.inf)
        )
        whole = opposite | (low != low) | (high != high)
        low_out, high_out = outward(low, high, fa, fast32)
    lo[:] = np.where(whole, -math.inf, low_out)
    hi[:] = np.where(whole, math.inf, high_out)
    return summary(lo, hi)


def mul(
    step: bool,
    fast32: bool,
    a_lo: Array,
    a_hi: Array,
    a_period: int,
    b_lo: Array,
    b_hi: Array,
    b_period: int,
    fa: FormatArgs,
    lo: Array,
    hi: Array,
) -> tuple[float, bool]:
    """``kernels.elementwise._mul_bounds(step, fast32)``: the enclosure of a product of
    broadcast intervals (the hull of the four end products; a zero end the factors' signs
    decide kept at zero), written, and its :func:`summary`."""
    x_lo, x_hi, y_lo, y_hi = _operands(lo.size, a_lo, a_hi, a_period, b_lo, b_hi, b_period)
    with np.errstate(all="ignore"):
        p1, p2, p3, p4 = x_lo * y_lo, x_lo * y_hi, x_hi * y_lo, x_hi * y_hi
        low = _minimum(_minimum(p1, p2), _minimum(p3, p4))
        high = _maximum(_maximum(p1, p2), _maximum(p3, p4))
        undefined = (p1 != p1) | (p2 != p2) | (p3 != p3) | (p4 != p4)
        zero_times_infinity = ((x_lo <= 0) & (x_hi >= 0) & (np.isinf(y_lo) | np.isinf(y_hi))) | (
            (y_lo <= 0) & (y_hi >= 0) & (np.isinf(x_lo) | np.isinf(x_hi))
        )
        whole = undefined | zero_times_infinity
        low_out, high_out = (outward_step if step else outward)(low, high, fa, fast32)
        # a product whose sign the factors' signs decide keeps a zero end at zero
        non_negative = ((x_lo >= 0) & (y_lo >= 0)) | ((x_hi <= 0) & (y_hi <= 0))
        non_positive = ((x_lo >= 0) & (y_hi <= 0)) | ((x_hi <= 0) & (y_lo >= 0))
        low_out = np.where(non_negative & (low_out < 0), 0.0, low_out)
        high_out = np.where(non_positive & (high_out > 0), 0.0, high_out)
    lo[:] = np.where(whole, -math.inf, low_out)
    hi[:] = np.where(whole, math.inf, high_out)
    return summary(lo, hi)


def library(
    increasing: bool,
    fast32: bool,
    f_lo: Array,
    f_hi: Array,
    c: tuple[float, float],
    fa: FormatArgs,
    lo: Array,
    hi: Array,
) -> None:
    """``kernels.elementwise._library_bounds(increasing, fast32)``: a monotone function's
    enclosure from its values at the ends, widened by its allowance."""
    per_magnitude, constant = c
    low, high = (f_lo, f_hi) if increasing else (f_hi, f_lo)
    undefined = (low != low) | (high != high)
    with np.errstate(all="ignore"):
        magnitude = _maximum(np.abs(low), np.abs(high))
        allowance = np.where(magnitude == math.inf, 0.0, per_magnitude * magnitude + constant)
        low_out, high_out = outward_step(low - allowance, high + allowance, fa, fast32)
    lo[:] = np.where(undefined, -math.inf, low_out)
    hi[:] = np.where(undefined, math.inf, high_out)


def nearest_elementwise(
    product: bool,
    switch: bool,
    a_lo: Array,
    a_hi: Array,
    a_period: int,
    b_lo: Array,
    b_hi: Array,
    b_period: int,
    fa: FormatArgs,
    n: tuple[int, int, float, bool, tuple[float, float, float]],
    lo: Array,
    hi: Array,
) -> tuple[float, bool]:
    """``kernels.elementwise._nearest_bounds(product, switch, ...)``: the sum (``switch``: a
    difference) or product (``switch``: stepped) onto float64 (``fa``), then its ends rounded
    to nearest (``rounding._nearest_all``'s arguments ``n``), written, and their
    :func:`summary`."""
    low, high = np.empty(lo.shape), np.empty(hi.shape)
    kernel = mul if product else add
    kernel(switch, False, a_lo, a_hi, a_period, b_lo, b_hi, b_period, fa, low, high)
    nearest_all(low, high, *n, lo, hi)
    return summary(lo, hi)


def div(
    fast32: bool,
    a_lo: Array,
    a_hi: Array,
    a_period: int,
    b_lo: Array,
    b_hi: Array,
    b_period: int,
    fa: FormatArgs,
    lo: Array,
    hi: Array,
) -> None:
    """``kernels.elementwise._div_bounds(fast32)``: the enclosure of a quotient of broadcast
    intervals."""
    x_lo, x_hi, y_lo, y_hi = _operands(lo.size, a_lo, a_hi, a_period, b_lo, b_hi, b_period)
    with np.errstate(all="ignore"):
        q = (x_lo / y_lo, x_lo / y_hi, x_hi / y_lo, x_hi / y_hi)
        low = np.minimum(np.minimum(q[0], q[1]), np.minimum(q[2], q[3]))
        high = np.maximum(np.maximum(q[0], q[1]), np.maximum(q[2], q[3]))
        low, high = next_down(low), next_up(high)
        non_negative = ((x_lo >= 0) & (y_lo > 0)) | ((x_hi <= 0) & (y_hi < 0))
        non_positive = ((x_lo >= 0) & (y_hi < 0)) | ((x_hi <= 0) & (y_lo > 0))
        low = np.where(non_negative, _maximum(low, np.float64(0.0)), low)
        high = np.where(non_positive, _minimum(high, np.float64(0.0)), high)
        whole = ((y_lo <= 0) & (y_hi >= 0)) | (
            (np.isinf(x_lo) | np.isinf(x_hi)) & (np.isinf(y_lo) | np.isinf(y_hi))
        )
        low_out, high_out = outward(low, high, fa, fast32)
    lo[:] = np.where(whole, -math.inf, low_out)
    hi[:] = np.where(whole, math.inf, high_out)
