"""Kernels of the midpoint-radius matrix products (:mod:`pytest_fpcheck.interval.linalg`): an
operand split into midpoint and radius (:func:`split_operand`), the float32 magnitudes of a point
operand (:func:`float32_magnitudes`), the epilogue that turns the products into rounded
enclosures (:func:`matmul_epilogue`), the scan for subnormal operands that a CPU product may
flush to zero (:func:`any_subnormal`), and the sums of an interval's ends over axes that
:func:`pytest_fpcheck.interval.linalg.reduce_sum` bounds (:func:`sum_ends`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...formats import FORMATS, Format
from .. import fallbacks
from ..jit import jit
from ..rounding import (
    NearestArgs,
    _bits,
    _from_bits,
    _nearest32_usual,
    _nearest_usual,
    _select,
    nearest_args,
    nearest_pair,
    steps_out,
)
from ..rounding import nearest as rounding_nearest
from .base import (
    bump,
    flat_views,
    format_args,
    outward_step,
    radius_of,
    summarised,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = [
    "any_subnormal",
    "float32_magnitudes",
    "matmul_epilogue",
    "radius_share",
    "split_float32",
    "split_operand",
    "sum_ends",
]


_FLOAT64 = FORMATS["float64"]


@jit(cache=True, forceinline=True)
def _split_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    point: bool,
    c: tuple[float, float, float, float],
    want_y: bool,
    inflate: float,
    floor: float,
    mid: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
) -> None:  # pragma: no cover - compiled
    for i in range(lo.size):
        a, b = lo[i], hi[i]
        if point:
            m, r = a, 0.0
        else:
            m = a * 0.5 + b * 0.5
            if not math.isfinite(m):
                m = 0.0
            r = max(b - m, m - a)
            r = math.inf if r != r else bump(r)
            mid[i] = m
        am = abs(m)
        xv = 0.0
        if c[0] != 0.0 and r != 0.0:
            xv = c[0] * r
        if c[1] != 0.0 and am != 0.0:
            xv = xv + c[1] * am
        if xv != 0.0:
            xv = max(xv, floor) * inflate
        x[i] = xv
        if want_y:
            yv = 0.0
            if c[2] != 0.0 and r != 0.0:
                yv = c[2] * r
            if c[3] != 0.0 and am != 0.0:
                yv = yv + c[3] * am
            if yv != 0.0:
                yv = max(yv, floor) * inflate
            y[i] = yv


@functools.cache
def _split(point: bool, want_y: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(cache=True, error_model="numpy")
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        c: tuple[float, float, float, float],
        inflate: float,
        floor: float,
        mid: np.ndarray,
        x: np.ndarray,
        y: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _split_loop(lo, hi, point, c, want_y, inflate, floor, mid, x, y)

    return kernel


@jit(cache=True, error_model="numpy", fallback=fallbacks.float32_magnitudes)
def _magnitudes(
    x: np.ndarray, bits: np.ndarray, floor: float, out: np.ndarray
) -> bool:  # pragma: no cover - compiled
    low = np.float32(floor)
    subnormal = False
    for i in range(x.size):
        a = abs(x[i])
        # on the bits: with denormals-are-zero set (torch.set_flush_denormal), a comparison
        # reads a subnormal as 0
        b = bits[i]
        subnormal |= ((b & 0x7F800000) == 0) & ((b & 0x7FFFFF) != 0)
        out[i] = low if a < low else a  # a NaN stays NaN
    return subnormal


def float32_magnitudes(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """max(|x|, 2**-126) of a float32 array, in one pass, as a float32 array of x's shape
    (laid out as x's memory is, where x's memory is one block): a radius product's operand;
    and whether x holds a subnormal number (which a product may flush to zero)."""
    order = tuple(sorted(range(x.ndim), key=lambda axis: -abs(x.strides[axis])))
    moved = x.transpose(order)
    if not moved.flags.c_contiguous:
        order = tuple(range(x.ndim))
        moved = np.ascontiguousarray(x)
    out = np.empty(moved.shape, dtype=np.float32)
    flat = moved.reshape(-1)
    subnormal = _magnitudes(flat, flat.view(np.uint32), 2.0**-126, out.reshape(-1))
    return out.transpose(np.argsort(order)), bool(subnormal)


@jit(cache=True, forceinline=True)
def _split32_one(
    a: float, b: float, c: tuple[float, float, float, float], inflate: float, floor: float
) -> tuple[float, float, float, float]:  # pragma: no cover - compiled
    """(midpoint, first radius operand, second, |midpoint|) of one element, as
    :func:`_split_loop` computes them (any ends: NaN and infinities included)."""
    m = a * 0.5 + b * 0.5
    if not math.isfinite(m):
        m = 0.0
    r = max(b - m, m - a)
    r = math.inf if r != r else bump(r)
    am = abs(m)
    xv, yv = 0.0, 0.0
    if r != 0.0:
        xv, yv = c[0] * r, c[2] * r
    if am != 0.0:
        xv, yv = xv + c[1] * am, yv + c[3] * am
    if xv != 0.0:
        xv = max(xv, floor) * inflate
    if yv != 0.0:
        yv = max(yv, floor) * inflate
    return m, xv, yv, am


@jit(cache=True, error_model="numpy")
def _split32(
    lo: np.ndarray,
    hi: np.ndarray,
    c: tuple[float, float, float, float],
    want_y: bool,
    inflate: float,
    floor: float,
    mid: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    c0, c1, c2, c3 = c
    tiny = False
    # elements with finite ends in one branch-free pass that vectorises (there the midpoint is
    # finite, r = max(b - m, m - a) >= 0 is no NaN, and c0 r + c1 |m| no NaN: the general
    # path's tests all pass or change nothing), the others after it by the general path
    missed = 0
    for i in range(lo.size):
        a, b = lo[i], hi[i]
        m = a * 0.5 + b * 0.5
        r = max(b - m, m - a)
        r = _select(r >= 2.0**-1000, r * (1.0 + 2.0**-51), r + 2.0**-1022)  # bump(r)
        am = abs(m)
        xv = c0 * r + c1 * am
        x[i] = _select(xv != 0.0, max(xv, floor) * inflate, 0.0)
        if want_y:
            yv = c2 * r + c3 * am
            y[i] = _select(yv != 0.0, max(yv, floor) * inflate, 0.0)
        mid[i] = m  # rounded to the nearest float32
        tiny |= (am != 0.0) & (am < 2.0**-100)
        missed += not ((abs(a) < math.inf) & (abs(b) < math.inf))
    if missed:
        for i in range(lo.size):
            a, b = lo[i], hi[i]
            if not (abs(a) < math.inf and abs(b) < math.inf):
                m, xv, yv, am = _split32_one(a, b, c, inflate, floor)
                mid[i] = m
                x[i] = xv
                if want_y:
                    y[i] = yv
                tiny |= (am != 0.0) & (am < 2.0**-100)
    return tiny


#: how many elements :func:`radius_share` reads at most
_SAMPLE = 4096


def radius_share(a_lo: Array, a_hi: Array) -> float:
    """sum rad / sum |mid| of an interval operand, estimated on at most :data:`_SAMPLE` of its
    elements evenly spaced in memory (inf where some radius is infinite or NaN, NaN where
    every sampled element is 0): how much of a product's radius its operand's radii make,
    against round-off of its midpoints. A choice of speed, never of soundness. An operand whose
    memory has gaps (a slice of a wider tensor) is sampled where it lies, in the order of its
    axes by decreasing stride, not copied whole first."""
    if all(end.flags.c_contiguous and end.dtype == np.float64 for end in (a_lo, a_hi)):
        flats = [a_lo.reshape(-1), a_hi.reshape(-1)]
    else:
        order = sorted(range(a_lo.ndim), key=lambda axis: -abs(a_lo.strides[axis]))
        moved = [np.asarray(end, dtype=np.float64).transpose(order) for end in (a_lo, a_hi)]
        if all(end.flags.c_contiguous for end in moved):
            flats = [end.reshape(-1) for end in moved]
        else:
            step = max(1, a_lo.size // _SAMPLE)
            where = np.unravel_index(np.arange(0, a_lo.size, step), moved[0].shape)
            flats = [end[where] for end in moved]
    step = max(1, flats[0].size // _SAMPLE)
    return float(_radius_share(flats[0], flats[1], step))


@jit(cache=True, error_model="numpy")
def _radius_share(lo: np.ndarray, hi: np.ndarray, step: int) -> float:  # pragma: no cover
    # the midpoint as Interval.mid_rad takes it (0 where not finite), the radius the larger
    # distance to an end (inf where NaN)
    radii, sizes = 0.0, 0.0
    for i in range(0, lo.size, step):
        a, b = lo[i], hi[i]
        m = a * 0.5 + b * 0.5
        m = m if abs(m) < math.inf else 0.0
        r = max(b - m, m - a)
        radii += r if (r == r) & (a == a) & (b == b) else math.inf
        sizes += abs(m)
    return radii / sizes


def split_float32(
    a_lo: Array,
    a_hi: Array,
    x_coefficients: tuple[float, float],
    y_coefficients: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """(mid, x, y) of an interval operand of a product whose midpoint product runs in float32:
    ``mid`` the midpoint (as :meth:`Interval.mid_rad` gives it) rounded to the nearest
    float32, ``x = cx0 rad + cx1 |mid|`` and ``y = cy0 rad + cy1 |mid|`` (None without
    coefficients) as :func:`split_operand` stores them when ``narrow`` (float32, rounded
    upward, at least float32's smallest normal); None where some midpoint is non-zero and below
    2**-100 in magnitude (its float32 rounding would not be relative)."""
    flats, order, inverse = flat_views(a_lo, a_hi, copy_in_order=True)
    shape = tuple(a_lo.shape[axis] for axis in order)
    size = flats[0].size
    mid = np.empty(size, dtype=np.float32)
    x = np.empty(size, dtype=np.float32)
    y = np.empty(size if y_coefficients is not None else 0, dtype=np.float32)
    coefficients = (*x_coefficients, *(y_coefficients or (0.0, 0.0)))
    want_y = y_coefficients is not None
    if _split32(flats[0], flats[1], coefficients, want_y, 1.0 + 2.0**-22, 2.0**-126, mid, x, y):
        return None

    def back(v: np.ndarray) -> np.ndarray:
        return v.reshape(shape).transpose(inverse)

    return back(mid), back(x), (back(y) if want_y else None)


def split_operand(
    a_lo: Array,
    a_hi: Array,
    point: bool,
    x_coefficients: tuple[float, float],
    y_coefficients: tuple[float, float] | None,
    narrow: bool,
) -> tuple[Array, np.ndarray, np.ndarray | None]:
    """(mid, x, y) of an interval operand of a product: ``mid`` as :meth:`Interval.mid_rad`
    gives it (``a_lo`` itself for a point), ``x = cx0 rad + cx1 |mid|`` and ``y = cy0 rad + cy1 |mid|`` (None without
    coefficients), each evaluated in float64 (three roundings, non-negative terms) and, when
    ``narrow``, stored as float32 rounded upward (values below float32's smallest normal raised
    to it): the non-negative operands of a radius product."""
    flats, order, inverse = flat_views(a_lo, a_hi, copy_in_order=True)
    shape = tuple(a_lo.shape[axis] for axis in order)
    dtype = np.float32 if narrow else np.float64
    # nearest rounding of x (1 + 2**-22) to float32 is >= x for x >= float32's smallest normal
    inflate, floor = (1.0 + 2.0**-22, 2.0**-126) if narrow else (1.0, 0.0)
    mid = np.empty(0 if point else flats[0].size)
    x = np.empty(flats[0].size, dtype=dtype)
    y = np.empty(flats[0].size if y_coefficients is not None else 0, dtype=dtype)
    coefficients = (*x_coefficients, *(y_coefficients or (0.0, 0.0)))
    _split(point, y_coefficients is not None)(
        flats[0],
        flats[1],
        coefficients,
        inflate,
        floor,
        mid,
        x,
        y,
    )

    def back(v: np.ndarray) -> np.ndarray:
        return v.reshape(shape).transpose(inverse)

    return (
        a_lo if point else back(mid),
        back(x),
        (back(y) if y_coefficients is not None else None),
    )


@jit(cache=True, forceinline=True)
def _epilogue64_usual(
    m: float, r: float, limit: float
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """The epilogue's ends onto float64 for the usual element (``r`` before :func:`bump`),
    without a branch (so that a loop of it vectorises), and whether it is usual: ``m`` finite,
    the bumped radius below ``limit``, and m - r and m + r nonzero and finite. There the
    general path steps each end one unit of its pattern out and float64 keeps it."""
    r = _select(r >= 2.0**-1000, r * (1.0 + 2.0**-51), r + 2.0**-1022)  # bump(r)
    low, high, ordinary = steps_out(m - r, m + r)
    return low, high, (r < limit) & (abs(m) < math.inf) & ordinary


@jit(cache=True, forceinline=True)
def _terms(
    mid: np.ndarray,
    rad: np.ndarray,
    addend_mid: np.ndarray,
    addend_rad: np.ndarray,
    i: np.uint64,
    j: int,
    c: tuple[float, float, float, float],
    has_addend: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """(midpoint, radius before :func:`bump`) of output ``i`` (``j`` its place in the addend's
    period): ``(rad multiplier + addend radius + eta) scale``."""
    multiplier, scale, eta, _ = c
    m = np.float64(mid[i])  # a float32 midpoint product's too
    r = float(rad[i]) * multiplier
    if has_addend:
        m = m + addend_mid[j]
        r = r + addend_rad[j]
    return m, (r + eta) * scale


@jit(cache=True, forceinline=True)
def _epilogue_loop(
    mid: np.ndarray,
    rad: np.ndarray,
    addend_mid: np.ndarray,
    addend_rad: np.ndarray,
    c: tuple[float, float, float, float],
    has_addend: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[float, bool]:  # pragma: no cover - compiled
    limit = c[3]
    period = addend_mid.size if has_addend else mid.size
    widest, unbounded = np.int64(0), False
    # onto float64 (a run that rounds to nearest), the usual elements in one branch-free pass
    # that vectorises, then the others
    missed = 0
    if fa[0]:
        for start in range(0, mid.size, period):
            for j in range(period):
                i = np.uint64(start + j)
                m, r = _terms(mid, rad, addend_mid, addend_rad, i, j, c, has_addend)
                low, high, usual = _epilogue64_usual(m, r, limit)
                lo[i], hi[i] = low, high
                widest, unbounded = summarised(widest, unbounded, low, high, usual)
                missed += not usual
        if not missed:
            return _from_bits(widest), unbounded
    for start in range(0, mid.size, period):
        for j in range(period):
            i = np.uint64(start + j)
            m, r = _terms(mid, rad, addend_mid, addend_rad, i, j, c, has_addend)
            if missed and _epilogue64_usual(m, r, limit)[2]:
                continue  # written by the first pass
            r = bump(r)
            if not (r < limit) or not math.isfinite(m):
                low, high = -math.inf, math.inf
            else:
                low, high = outward_step(m - r, m + r, fa, fast32)
            lo[i], hi[i] = low, high
            widest, unbounded = summarised(widest, unbounded, low, high, True)
    return _from_bits(widest), unbounded


@functools.cache
def _epilogue(has_addend: bool, fast32: bool) -> Callable[..., tuple[float, bool]]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.epilogue, has_addend, fast32),
    )
    def kernel(
        mid: np.ndarray,
        rad: np.ndarray,
        addend_mid: np.ndarray,
        addend_rad: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> tuple[float, bool]:  # pragma: no cover - compiled
        return _epilogue_loop(mid, rad, addend_mid, addend_rad, c, has_addend, fa, fast32, lo, hi)

    return kernel


@jit(cache=True, forceinline=True)
def _epilogue_nearest_loop(
    mid: np.ndarray,
    rad: np.ndarray,
    addend_mid: np.ndarray,
    addend_rad: np.ndarray,
    c: tuple[float, float, float, float],
    has_addend: bool,
    fa: tuple[bool, int, float, int, float, bool],
    n: tuple[int, int, float, bool, tuple[float, float, float]],
    is32: bool,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[float, bool]:  # pragma: no cover - compiled
    precision, emin, big, has_inf, cn = n
    smallest_normal = math.ldexp(1.0, emin)
    lowest, highest = _bits(2.0 * smallest_normal), _bits(0.5 * big)
    limit = c[3]
    period = addend_mid.size if has_addend else mid.size
    widest, unbounded = np.int64(0), False
    # the usual elements (usual to the epilogue onto float64 and to the nearest rounding) in
    # one branch-free pass that vectorises, then the others by both general paths
    missed = 0
    for start in range(0, mid.size, period):
        for j in range(period):
            i = np.uint64(start + j)
            m, r = _terms(mid, rad, addend_mid, addend_rad, i, j, c, has_addend)
            low, high, usual = _epilogue64_usual(m, r, limit)
            if is32:
                lower, upper, near = _nearest32_usual(low, high)
            else:
                lower, upper, near = _nearest_usual(
                    low, high, precision, lowest, highest, has_inf, cn
                )
            lo[i], hi[i] = lower, upper
            widest, unbounded = summarised(widest, unbounded, lower, upper, usual & near)
            missed += not (usual & near)
    if not missed:
        return _from_bits(widest), unbounded
    for start in range(0, mid.size, period):
        for j in range(period):
            i = np.uint64(start + j)
            m, r = _terms(mid, rad, addend_mid, addend_rad, i, j, c, has_addend)
            low, high, usual = _epilogue64_usual(m, r, limit)
            if not usual:
                r = bump(r)
                if not (r < limit) or not math.isfinite(m):
                    low, high = -math.inf, math.inf
                else:
                    low, high = outward_step(m - r, m + r, fa, False)
            elif is32:
                if _nearest32_usual(low, high)[2]:
                    continue  # written by the first pass
            elif _nearest_usual(low, high, precision, lowest, highest, has_inf, cn)[2]:
                continue
            lower, upper = nearest_pair(
                low, high, precision, smallest_normal, emin, big, has_inf, cn, is32
            )
            lo[i], hi[i] = lower, upper
            widest, unbounded = summarised(widest, unbounded, lower, upper, True)
    return _from_bits(widest), unbounded


@functools.cache
def _epilogue_nearest(has_addend: bool, is32: bool) -> Callable[..., tuple[float, bool]]:
    """The compiled epilogue with nearest rounding for these switches (``is32``: onto
    float32), compiled on first use, then cached."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.epilogue_nearest, has_addend),
    )
    def kernel(
        mid: np.ndarray,
        rad: np.ndarray,
        addend_mid: np.ndarray,
        addend_rad: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        n: tuple[int, int, float, bool, tuple[float, float, float]],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> tuple[float, bool]:  # pragma: no cover - compiled
        return _epilogue_nearest_loop(
            mid, rad, addend_mid, addend_rad, c, has_addend, fa, n, is32, lo, hi
        )

    return kernel


def matmul_epilogue(
    mid: Array,
    rad: np.ndarray,
    addend: tuple[Array, Array] | None,
    multiplier: float,
    scale: float,
    eta: float,
    limit: float,
    fmt: Format,
    *,
    nearest: bool = False,
) -> tuple[Array, Array, tuple[float, bool] | None]:
    """lo, hi of a product from its float64 (or float32) midpoint and its radius product:
    ``r = bump(((rad multiplier + addend radius) + eta) scale)`` (an addend adds its midpoint
    to ``mid``), [down(mid - r), up(mid + r)] rounded outward onto ``fmt``, and the whole line
    where ``r`` reaches ``limit`` (g times the accumulator's overflow threshold: a partial sum
    may overflow) or ``mid`` is not finite; with ``nearest``, those ends onto float64, then
    rounded to nearest onto ``fmt`` (:func:`..rounding.nearest`) in the same pass, bit for
    bit the two steps; and their :func:`.base.summary`, taken in the same pass (None where a
    format other than float32 and float64 is rounded to nearest after it).
    ``addend`` = (midpoint, radius term) arrays whose shape is a trailing part of mid's."""
    shape = mid.shape
    mid_flat = np.ascontiguousarray(mid).reshape(-1)
    rad_flat = np.ascontiguousarray(rad).reshape(-1)
    addend_mid, addend_rad = (np.zeros(0), np.zeros(0)) if addend is None else addend
    lo, hi = np.empty(shape), np.empty(shape)  # arrays that own their memory (see store.write)
    if mid_flat.size == 0:
        return lo, hi, (0.0, False)  # an empty product (a group with no rows): no element
    arrays = (
        mid_flat,
        rad_flat,
        np.ascontiguousarray(addend_mid, dtype=np.float64).reshape(-1),
        np.ascontiguousarray(addend_rad, dtype=np.float64).reshape(-1),
        (multiplier, scale, eta, limit),
    )
    rounding: NearestArgs | None = nearest_args(fmt) if nearest else None
    if rounding is not None:
        kernel = _epilogue_nearest(addend_mid.size > 0, fmt.name == "float32")
        found = kernel(*arrays, format_args(_FLOAT64), rounding, lo.reshape(-1), hi.reshape(-1))
        return lo, hi, radius_of(*found)
    target = _FLOAT64 if nearest else fmt
    kernel = _epilogue(addend_mid.size > 0, target.name == "float32")
    found = kernel(*arrays, format_args(target), lo.reshape(-1), hi.reshape(-1))
    if nearest and fmt.name != "float64":  # a format rounded outward by rounding.nearest
        return (*rounding_nearest(lo, hi, fmt), None)
    return lo, hi, radius_of(*found)


@jit(cache=True, error_model="numpy", fallback=fallbacks.any_subnormal)
def _any_subnormal(bits: np.ndarray, exponent: int, magnitude: int) -> bool:  # pragma: no cover
    # no early exit: the loop is branch-free and vectorised, a full pass costs less than one
    # that tests and leaves
    found = False
    for i in range(bits.size):
        b = bits[i] & magnitude
        found |= (b != 0) & ((b & exponent) == 0)
    return found


def any_subnormal(bits: np.ndarray, fmt: Format) -> bool:
    """Whether the 16-bit patterns ``bits`` (the memory of a float16 or bfloat16 array, in any
    layout) hold a subnormal number of ``fmt``: a non-zero magnitude whose exponent field is
    zero. One pass over the memory, where a test on the values takes four."""
    if bits.dtype != np.uint16 or fmt.precision > 15:
        raise ValueError(
            f"16-bit patterns of a 16-bit format expected, not {bits.dtype}, {fmt.name}"
        )
    fraction = fmt.precision - 1
    exponent = ((1 << (15 - fraction)) - 1) << fraction
    return bool(_any_subnormal(np.ravel(bits, order="K"), exponent, 0x7FFF))


@jit(cache=True, error_model="numpy", fallback=fallbacks.sum_ends)
def _sum_ends(lo: np.ndarray, hi: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    # lo, hi: (outer, terms, inner); out: (5, outer, inner). Each sum from +0.0, term after
    # term in order; a NaN end makes the magnitude NaN and sticks in the least and the most
    outer, terms, inner = lo.shape
    for o in range(outer):
        if inner == 1:  # a row's sums: in registers
            lo_sum, hi_sum, size, least, most = 0.0, 0.0, 0.0, math.inf, -math.inf
            for k in range(terms):
                a, b = lo[o, k, 0], hi[o, k, 0]
                lo_sum += a
                hi_sum += b
                size += _select((a != a) | (b != b), math.nan, max(abs(a), abs(b)))
                least = _select((a < least) | (a != a), a, least)
                most = _select((b > most) | (b != b), b, most)
            out[0, o, 0], out[1, o, 0], out[2, o, 0] = lo_sum, hi_sum, size
            out[3, o, 0], out[4, o, 0] = least, most
            continue
        # the accumulators in arrays of the kernel's own, which LLVM knows alias no operand
        sums_lo, sums_hi, sizes = np.empty(inner), np.empty(inner), np.empty(inner)
        leasts, mosts = np.empty(inner), np.empty(inner)
        sums_lo[:], sums_hi[:], sizes[:], leasts[:], mosts[:] = 0.0, 0.0, 0.0, math.inf, -math.inf
        for k in range(terms):
            row_lo, row_hi = lo[o, k], hi[o, k]
            for j in range(inner):
                i = np.uint64(j)
                a, b = row_lo[i], row_hi[i]
                sums_lo[i] += a
                sums_hi[i] += b
                sizes[i] += _select((a != a) | (b != b), math.nan, max(abs(a), abs(b)))
                leasts[i] = _select((a < leasts[i]) | (a != a), a, leasts[i])
                mosts[i] = _select((b > mosts[i]) | (b != b), b, mosts[i])
        out[0, o], out[1, o], out[2, o], out[3, o], out[4, o] = (
            sums_lo,
            sums_hi,
            sizes,
            leasts,
            mosts,
        )


def sum_ends(
    lo: Array, hi: Array, axes: tuple[int, ...], keepdims: bool
) -> tuple[Array, Array, Array, Array, Array]:
    """(sum of ``lo``, sum of ``hi``, sum of max(|lo|, |hi|), least ``lo``, most ``hi``) over
    ``axes`` (NumPy's keepdims), in one pass: each sum's terms added in order from +0.0 in
    float64 (an order the caller's allowance covers), NaN propagating as NumPy's sum, minimum
    and maximum propagate it. Reduced axes that form one block of a C-contiguous array are
    read in place; others are moved last and copied."""
    shape = np.shape(lo)
    ndim = len(shape)
    axes = tuple(sorted(axis % ndim for axis in axes)) if ndim else ()
    kept = tuple(1 if axis in axes else k for axis, k in enumerate(shape))
    result_shape = (
        kept if keepdims else tuple(k for axis, k in enumerate(shape) if axis not in axes)
    )
    block = not axes or axes == tuple(range(axes[0], axes[-1] + 1))
    ends = []
    for end in (lo,) if hi is lo else (lo, hi):
        array = np.asarray(end, dtype=np.float64)
        if block and array.flags.c_contiguous:
            first, last = (axes[0], axes[-1] + 1) if axes else (ndim, ndim)
            layout = (
                math.prod(shape[:first]),
                math.prod(shape[first:last]),
                math.prod(shape[last:]),
            )
            ends.append(array.reshape(layout))
        else:
            kept_axes = [axis for axis in range(ndim) if axis not in axes]
            moved = np.ascontiguousarray(np.transpose(array, (*kept_axes, *axes)))
            terms = math.prod(shape[a] for a in axes)
            ends.append(moved.reshape(math.prod(shape[a] for a in kept_axes), terms, 1))
    out = np.empty((5, ends[0].shape[0], ends[0].shape[2]))
    _sum_ends(ends[0], ends[-1], out)
    lo_sum, hi_sum, size, least, most = (part.reshape(result_shape) for part in out)
    return lo_sum, hi_sum, size, least, most
