"""Kernels of correctly rounded element-wise arithmetic (:mod:`pytest_fpcheck.interval.elementwise`):
the enclosures of a sum or difference (:func:`add_bounds`) and of a product (:func:`mul_bounds`)
of broadcast interval operands (rounded outward, or onto float64 and then to nearest onto the
result's format in the same pass: :func:`..rounding.nearest`), of a quotient
(:func:`div_bounds`), of an integer power computed by repeated multiplication
(:func:`power_bounds`), and of a monotone library function from its float64 values at the ends
(:func:`library_bounds`), rounded outward onto the result format in one pass.
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
    float32_directed,
    nearest_args,
    nearest_pair,
    next_down,
    next_up,
    steps_out,
)
from .base import (
    block_length,
    broadcast_flat,
    format_args,
    hull4,
    outward,
    outward_step,
    radius_of,
    sum_lower,
    sum_upper,
    summarised,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]
    #: (product, switch, nearest, outward32, (is32, precision, lowest, highest, has_inf,
    #: drifts)): what :func:`_usual_run` computes
    PassArgs = tuple[
        bool,
        bool,
        bool,
        bool,
        tuple[bool, int, np.int64, np.int64, bool, tuple[float, float, float]],
    ]

__all__ = ["add_bounds", "div_bounds", "library_bounds", "mul_bounds", "power_bounds"]

_FLOAT64 = FORMATS["float64"]


@jit(cache=True, forceinline=True)
def sum_element(
    x_lo: float,
    x_hi: float,
    y_lo: float,
    y_hi: float,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """[x_lo + y_lo, x_hi + y_hi], each end exact where TwoSum shows it, else stepped out; the
    whole line where inf - inf is possible or an end is NaN; rounded outward onto the format."""
    low, high = sum_lower(x_lo, y_lo), sum_upper(x_hi, y_hi)
    # | and & rather than or and and, here and in the product's loop: the same tests
    # without a branch each (a mispredicted one per element cost over half the time)
    opposite = ((x_hi == math.inf) & (y_lo == -math.inf)) | (
        (x_lo == -math.inf) & (y_hi == math.inf)
    )
    if opposite | (low != low) | (high != high):
        return -math.inf, math.inf
    return outward(low, high, fa, fast32)


@jit(cache=True, forceinline=True)
def _sum64_usual(
    x_lo: float, x_hi: float, y_lo: float, y_hi: float
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`sum_element` onto float64 for the usual element, without a branch (so that a
    loop of it vectorises), and whether the element is usual: no end NaN, no inf - inf
    possible, and each sum of finite ends finite (an infinite end, a mask's -inf, is usual).
    There the general path takes these steps and no other: each end is the float64 sum where
    an operand end is infinite (the sum is that infinity, exact) or TwoSum's error points
    inward (or is 0), else one float64 step out, one unit of the finite sum's pattern (a zero
    sum is exact, its error 0: the step, not a number from a zero pattern, is never selected);
    no end is NaN, so the whole line is not given, and float64 keeps both."""
    s, t = x_lo + y_lo, x_hi + y_hi
    s_virtual, t_virtual = s - x_lo, t - x_hi
    s_error = (x_lo - (s - s_virtual)) + (y_lo - s_virtual)
    t_error = (x_hi - (t - t_virtual)) + (y_hi - t_virtual)
    below, above, _ = steps_out(s, t)
    infinite_lo = (abs(x_lo) == math.inf) | (abs(y_lo) == math.inf)
    infinite_hi = (abs(x_hi) == math.inf) | (abs(y_hi) == math.inf)
    # no inf - inf possible: the negation of sum_element's ``opposite``
    apart = ((x_hi != math.inf) | (y_lo != -math.inf)) & ((x_lo != -math.inf) | (y_hi != math.inf))
    usual = (
        (s == s)
        & (t == t)
        & (x_lo == x_lo)
        & (x_hi == x_hi)
        & (y_lo == y_lo)
        & (y_hi == y_hi)
        & apart
        & ((abs(s) < math.inf) | infinite_lo)
        & ((abs(t) < math.inf) | infinite_hi)
    )
    low = _select((s_error >= 0) | infinite_lo, s, below)
    return low, _select((t_error <= 0) | infinite_hi, t, above), usual


@jit(cache=True, forceinline=True)
def _add_bounds_loop(
    a_lo: np.ndarray,
    a_hi: np.ndarray,
    a_period: int,
    b_lo: np.ndarray,
    b_hi: np.ndarray,
    b_period: int,
    negate_b: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[float, bool]:  # pragma: no cover - compiled
    block = block_length(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    # onto float64 (what a run that rounds to nearest asks first) or float32, the usual
    # elements in one branch-free pass that vectorises, then the others element by element
    missed = 0
    widest, unbounded = np.int64(0), False
    if fa[0] or fast32:
        u = (a_lo, a_hi, b_lo, b_hi, lo, hi)
        v = (False, negate_b, False, fast32, _NO_NEAREST)
        missed, (widest, unbounded) = _usual_pass(u, v, a_period, b_period)
        if not missed:
            return _from_bits(widest), unbounded
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi = a_lo[ja], a_hi[ja]
            y_lo, y_hi = (-b_hi[jb], -b_lo[jb]) if negate_b else (b_lo[jb], b_hi[jb])
            if missed and usual_ends(x_lo, x_hi, y_lo, y_hi, False, False, fast32)[2]:
                continue  # written by the first pass
            low, high = sum_element(x_lo, x_hi, y_lo, y_hi, fa, fast32)
            lo[i], hi[i] = low, high
            widest, unbounded = summarised(widest, unbounded, low, high, True)
    return _from_bits(widest), unbounded


@jit(cache=True, forceinline=True)
def _element64_usual(
    x_lo: float, x_hi: float, y_lo: float, y_hi: float, product: bool, switch: bool
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`_sum64_usual` (``switch``: b negated) or :func:`_product64_usual` (``switch``:
    stepped) of one element."""
    if product:
        return _product64_usual(x_lo, x_hi, y_lo, y_hi, switch)
    if switch:
        return _sum64_usual(x_lo, x_hi, -y_hi, -y_lo)
    return _sum64_usual(x_lo, x_hi, y_lo, y_hi)


@jit(cache=True, forceinline=True)
def usual_ends(
    x_lo: float, x_hi: float, y_lo: float, y_hi: float, product: bool, switch: bool, fast32: bool
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`_element64_usual`, then onto float32 (``fast32``) rounded outward by
    :func:`..rounding.float32_directed`, and whether the element is usual onto float64. There
    the general path onto float32 gives those ends: a sum rounds its float64 ends so
    (:func:`sum_element`), and a stepped product's float32 step strictly beyond each hull end
    is the rounding of the float64 step beyond it (no float32 number lies strictly between
    them; a zero end put back at +0 by the sign rule stays +0 on both paths)."""
    low, high, usual = _element64_usual(x_lo, x_hi, y_lo, y_hi, product, switch)
    if fast32:
        low, high = float32_directed(low, False, False), float32_directed(high, True, False)
    return low, high, usual


@jit(cache=True, forceinline=True)
def _element64(
    x_lo: float,
    x_hi: float,
    y_lo: float,
    y_hi: float,
    product: bool,
    switch: bool,
    fa: tuple[bool, int, float, int, float, bool],
) -> tuple[float, float]:  # pragma: no cover - compiled
    """:func:`sum_element` or :func:`product_element` of one element onto float64 (``fa``)."""
    if product:
        return product_element(x_lo, x_hi, y_lo, y_hi, switch, fa, False)
    if switch:
        return sum_element(x_lo, x_hi, -y_hi, -y_lo, fa, False)
    return sum_element(x_lo, x_hi, y_lo, y_hi, fa, False)


@jit(cache=True, forceinline=True)
def _usual_run(
    u: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    v: PassArgs,
    start: int,
    block: int,
    a0: int,
    a_step: int,
    b0: int,
    b_step: int,
    s: tuple[np.int64, bool],
) -> tuple[int, tuple[np.int64, bool]]:  # pragma: no cover - compiled
    """The branch-free pass over the ``block`` outputs from ``start`` (operand a read from
    ``a0`` by ``a_step``, b from ``b0`` by ``b_step``): each element's sum or product onto
    float64 by its usual path (:func:`_element64_usual`; ``v`` = (product, switch, nearest,
    outward32, rounding)), with ``outward32`` then rounded outward onto float32
    (:func:`usual_ends`), with ``nearest`` rounded to nearest by the usual path of the format
    that ``rounding`` = (is32, precision, lowest, highest, has_inf, drifts) describes; writes
    each element's ends and gives how many elements miss the usual paths, and the running
    summary ``s`` (:func:`.base.summarised`) with the usual elements' ends."""
    a_lo, a_hi, b_lo, b_hi, lo, hi = u
    product, switch, nearest, outward32, rounding = v
    is32, precision, lowest, highest, has_inf, cn = rounding
    widest, unbounded = s
    missed = 0
    for j in range(block):
        i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
        x_lo, x_hi, y_lo, y_hi = a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb]
        low, high, usual = usual_ends(x_lo, x_hi, y_lo, y_hi, product, switch, outward32)
        if nearest and is32:
            low, high, near = _nearest32_usual(low, high)
            usual &= near
        elif nearest:
            low, high, near = _nearest_usual(low, high, precision, lowest, highest, has_inf, cn)
            usual &= near
        lo[i], hi[i] = low, high
        widest, unbounded = summarised(widest, unbounded, low, high, usual)
        missed += not usual
    return missed, (widest, unbounded)


@jit(cache=True, forceinline=True)
def _usual_pass(
    u: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    v: PassArgs,
    a_period: int,
    b_period: int,
) -> tuple[int, tuple[np.int64, bool]]:  # pragma: no cover - compiled
    """:func:`_usual_run` over every output, block by block (:func:`.base.block_length`), each
    operand's step a constant of the compiled code: a loop that reads each operand
    contiguously or as one broadcast value, not by gathered indices, which took half the time
    of a sum or product. Gives how many elements miss the usual paths and the summary of the
    others (:func:`.base.summarised`)."""
    size = u[4].size
    block = block_length(size, a_period, b_period)
    missed = 0
    s = (np.int64(0), False)
    for start in range(0, size, block):
        a0, b0 = start % a_period, start % b_period
        if (a_period > 1) & (b_period > 1):
            m, s = _usual_run(u, v, start, block, a0, 1, b0, 1, s)
        elif a_period > 1:
            m, s = _usual_run(u, v, start, block, a0, 1, b0, 0, s)
        elif b_period > 1:
            m, s = _usual_run(u, v, start, block, a0, 0, b0, 1, s)
        else:
            m, s = _usual_run(u, v, start, block, a0, 0, b0, 0, s)
        missed += m
    return missed, s


#: the rounding argument of :func:`_usual_run` for a pass without nearest rounding
_NO_NEAREST = (False, 0, np.int64(0), np.int64(0), False, (0.0, 0.0, 0.0))


@jit(cache=True, forceinline=True)
def _nearest_loop(
    a_lo: np.ndarray,
    a_hi: np.ndarray,
    a_period: int,
    b_lo: np.ndarray,
    b_hi: np.ndarray,
    b_period: int,
    product: bool,
    switch: bool,
    fa: tuple[bool, int, float, int, float, bool],
    n: tuple[int, int, float, bool, tuple[float, float, float]],
    is32: bool,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[float, bool]:  # pragma: no cover - compiled
    """A sum or product (``product``; ``switch`` as :func:`_element64_usual` takes it) onto
    float64, then rounded to nearest onto the format of ``n`` (``rounding.nearest_args``;
    ``is32``: float32): the elements usual to both steps in one branch-free pass, then the
    others by both general paths; gives the ends' summary (largest width, some element the
    whole line)."""
    precision, emin, big, has_inf, cn = n
    smallest_normal = math.ldexp(1.0, emin)
    lowest, highest = _bits(2.0 * smallest_normal), _bits(0.5 * big)
    block = block_length(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    u = (a_lo, a_hi, b_lo, b_hi, lo, hi)
    rounding = (is32, precision, lowest, highest, has_inf, cn)
    missed, (widest, unbounded) = _usual_pass(
        u, (product, switch, True, False, rounding), a_period, b_period
    )
    if not missed:
        return _from_bits(widest), unbounded
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi, y_lo, y_hi = a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb]
            low, high, usual = _element64_usual(x_lo, x_hi, y_lo, y_hi, product, switch)
            if not usual:
                low, high = _element64(x_lo, x_hi, y_lo, y_hi, product, switch, fa)
            elif is32:
                if _nearest32_usual(low, high)[2]:
                    continue  # written by the first pass
            elif _nearest_usual(low, high, precision, lowest, highest, has_inf, cn)[2]:
                continue
            low, high = nearest_pair(
                low, high, precision, smallest_normal, emin, big, has_inf, cn, is32
            )
            lo[i], hi[i] = low, high
            widest, unbounded = summarised(widest, unbounded, low, high, True)
    return _from_bits(widest), unbounded


@functools.cache
def _nearest_bounds(product: bool, switch: bool, is32: bool) -> Callable[..., tuple[float, bool]]:
    """The compiled sum or product with nearest rounding for these switches (compiled on
    first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.nearest_elementwise, product, switch),
    )
    def kernel(
        a_lo: np.ndarray,
        a_hi: np.ndarray,
        a_period: int,
        b_lo: np.ndarray,
        b_hi: np.ndarray,
        b_period: int,
        fa: tuple[bool, int, float, int, float, bool],
        n: tuple[int, int, float, bool, tuple[float, float, float]],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> tuple[float, bool]:  # pragma: no cover - compiled
        return _nearest_loop(
            a_lo, a_hi, a_period, b_lo, b_hi, b_period, product, switch, fa, n, is32, lo, hi
        )

    return kernel


@functools.cache
def _add_bounds(negate_b: bool, fast32: bool) -> Callable[..., tuple[float, bool]]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.add, negate_b, fast32),
    )
    def kernel(
        a_lo: np.ndarray,
        a_hi: np.ndarray,
        a_period: int,
        b_lo: np.ndarray,
        b_hi: np.ndarray,
        b_period: int,
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> tuple[float, bool]:  # pragma: no cover - compiled
        return _add_bounds_loop(
            a_lo, a_hi, a_period, b_lo, b_hi, b_period, negate_b, fa, fast32, lo, hi
        )

    return kernel


def add_bounds(
    a_lo: Array,
    a_hi: Array,
    b_lo: Array,
    b_hi: Array,
    negate_b: bool,
    fmt: Format,
    nearest: bool = False,
) -> tuple[Array, Array, tuple[float, bool]]:
    """[a_lo + b_lo, a_hi + b_hi] (b negated first when ``negate_b``: a - b), broadcast, each
    end exact where TwoSum shows the float64 sum exact, else stepped outward; the whole line
    where inf - inf is possible or an end is NaN; rounded outward onto ``fmt``, or with
    ``nearest`` onto float64 and then to nearest onto ``fmt`` (:func:`_finish`). For a point,
    pass the same array as both ends: its sum is then rounded in both directions."""
    shape, operands = _broadcast_operands(a_lo, a_hi, b_lo, b_hi)
    return _finish(_add_bounds, False, negate_b, operands, shape, fmt, nearest)


@jit(cache=True, forceinline=True)
def product_element(
    x_lo: float,
    x_hi: float,
    y_lo: float,
    y_hi: float,
    step: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The enclosure of [x_lo, x_hi] * [y_lo, y_hi]: the hull of the four end products (also
    for a point, whose ends are equal: the same hull), stepped outward when ``step``, rounded
    onto the format; the whole line where 0 * inf or an undefined product is possible. Where
    the factors' signs decide the product's (both >= 0 or both <= 0: it is >= 0; opposite: <=
    0), a zero end stepped outward is put back at zero: a step crossing zero would make a
    square's or a product of magnitudes' enclosure hold negative numbers (the square root of
    Adam's second moment NaN, its parameter the whole line)."""
    p1, p2, p3, p4 = x_lo * y_lo, x_lo * y_hi, x_hi * y_lo, x_hi * y_hi
    low, high = hull4(p1, p2, p3, p4)
    undefined = (p1 != p1) | (p2 != p2) | (p3 != p3) | (p4 != p4)
    zero_times_infinity = ((x_lo <= 0) & (x_hi >= 0) & (math.isinf(y_lo) | math.isinf(y_hi))) | (
        (y_lo <= 0) & (y_hi >= 0) & (math.isinf(x_lo) | math.isinf(x_hi))
    )
    if undefined | zero_times_infinity:
        return -math.inf, math.inf
    if step:
        low, high = outward_step(low, high, fa, fast32)
    else:
        low, high = outward(low, high, fa, fast32)
    if (((x_lo >= 0) & (y_lo >= 0)) | ((x_hi <= 0) & (y_hi <= 0))) & (low < 0):
        low = 0.0
    if (((x_lo >= 0) & (y_hi <= 0)) | ((x_hi <= 0) & (y_lo >= 0))) & (high > 0):
        high = 0.0
    return low, high


@jit(cache=True, forceinline=True)
def _product64_usual(
    x_lo: float, x_hi: float, y_lo: float, y_hi: float, step: bool
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`product_element` onto float64 for the usual element, without a branch (so that a loop
    of it vectorises), and whether the element is usual: its four ends and the hull of the
    four products finite. There the general path takes these steps and no other: no product
    is infinite or NaN (an infinite one would make an end of the hull infinite), so the whole
    line is never given; the hull is stepped one unit of its patterns out when ``step``, a
    zero end to the smallest subnormal beyond it or, where the factors' signs decide the
    product's, back to +0 (the general path's sign rule, which moves no other end: a nonzero
    end stepped out keeps its sign or reaches a zero); float64 keeps it. Zero ends are usual:
    a square of an interval holding 0 has one, so does every product with an exact zero."""
    p1, p2, p3, p4 = x_lo * y_lo, x_lo * y_hi, x_hi * y_lo, x_hi * y_hi
    low, high = hull4(p1, p2, p3, p4)
    usual = (
        (abs(x_lo) < math.inf)
        & (abs(x_hi) < math.inf)
        & (abs(y_lo) < math.inf)
        & (abs(y_hi) < math.inf)
        & (abs(low) < math.inf)
        & (abs(high) < math.inf)
    )
    if step:
        below, above, _ = steps_out(low, high)
        at_least_zero = ((x_lo >= 0) & (y_lo >= 0)) | ((x_hi <= 0) & (y_hi <= 0))
        at_most_zero = ((x_lo >= 0) & (y_hi <= 0)) | ((x_hi <= 0) & (y_lo >= 0))
        below = _select(low == 0, _select(at_least_zero, 0.0, -(2.0**-1074)), below)
        above = _select(high == 0, _select(at_most_zero, 0.0, 2.0**-1074), above)
        low, high = below, above
    return low, high, usual


@jit(cache=True, forceinline=True)
def _mul_bounds_loop(
    a_lo: np.ndarray,
    a_hi: np.ndarray,
    a_period: int,
    b_lo: np.ndarray,
    b_hi: np.ndarray,
    b_period: int,
    step: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    lo: np.ndarray,
    hi: np.ndarray,
) -> tuple[float, bool]:  # pragma: no cover - compiled
    block = block_length(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    # onto float64 or float32, the usual elements in one branch-free pass first (as for sums)
    missed = 0
    widest, unbounded = np.int64(0), False
    if fa[0] or fast32:
        u = (a_lo, a_hi, b_lo, b_hi, lo, hi)
        v = (True, step, False, fast32, _NO_NEAREST)
        missed, (widest, unbounded) = _usual_pass(u, v, a_period, b_period)
        if not missed:
            return _from_bits(widest), unbounded
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi, y_lo, y_hi = a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb]
            if missed and usual_ends(x_lo, x_hi, y_lo, y_hi, True, step, fast32)[2]:
                continue  # written by the first pass
            low, high = product_element(x_lo, x_hi, y_lo, y_hi, step, fa, fast32)
            lo[i], hi[i] = low, high
            widest, unbounded = summarised(widest, unbounded, low, high, True)
    return _from_bits(widest), unbounded


@functools.cache
def _mul_bounds(step: bool, fast32: bool) -> Callable[..., tuple[float, bool]]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.mul, step, fast32),
    )
    def kernel(
        a_lo: np.ndarray,
        a_hi: np.ndarray,
        a_period: int,
        b_lo: np.ndarray,
        b_hi: np.ndarray,
        b_period: int,
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> tuple[float, bool]:  # pragma: no cover - compiled
        return _mul_bounds_loop(
            a_lo, a_hi, a_period, b_lo, b_hi, b_period, step, fa, fast32, lo, hi
        )

    return kernel


def mul_bounds(
    a_lo: Array,
    a_hi: Array,
    b_lo: Array,
    b_hi: Array,
    step: bool,
    fmt: Format,
    nearest: bool = False,
) -> tuple[Array, Array, tuple[float, bool]]:
    """The interval product, broadcast: the hull of the four endpoint products, stepped outward
    when ``step`` (float64 products inexact);
    the whole line where 0 * inf or an undefined product is possible; rounded outward onto
    ``fmt``, or with ``nearest`` onto float64 and then to nearest onto ``fmt``
    (:func:`_finish`)."""
    shape, flat = _broadcast_operands(a_lo, a_hi, b_lo, b_hi)
    return _finish(_mul_bounds, True, step, flat, shape, fmt, nearest)


def _broadcast_operands(
    a_lo: Array, a_hi: Array, b_lo: Array, b_hi: Array
) -> tuple[tuple[int, ...], tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray, int]]:
    """The broadcast shape of two interval operands and their flat ends with their periods
    (:func:`.base.broadcast_flat`; a point's one array serves as both ends; an operand whose
    two ends broadcast differently is broadcast and copied whole)."""
    shape = np.broadcast_shapes(a_lo.shape, b_lo.shape)
    flat: list[np.ndarray | int] = []
    for low_end, high_end in ((a_lo, a_hi), (b_lo, b_hi)):
        low, period = broadcast_flat(low_end, shape)
        high = low if high_end is low_end else broadcast_flat(high_end, shape)[0]
        if high.size != low.size:  # the two ends broadcast differently
            low, high = (
                np.ascontiguousarray(np.broadcast_to(x, shape), dtype=np.float64).reshape(-1)
                for x in (low_end, high_end)
            )
            period = max(low.size, 1)
        flat += [low, high, period]
    return shape, tuple(flat)  # type: ignore[return-value]


def _finish(
    factory: Callable[[bool, bool], Callable[..., tuple[float, bool]]],
    product: bool,
    switch: bool,
    operands: tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray, int],
    shape: tuple[int, ...],
    fmt: Format,
    nearest: bool,
) -> tuple[Array, Array, tuple[float, bool]]:
    """Run a sum's or product's kernel (``factory``'s, for ``switch``) on flat broadcast
    operands into new arrays of ``shape``: rounded outward onto ``fmt``; with ``nearest``, for
    the formats :func:`..rounding.nearest` rounds to nearest, onto float64 and then to nearest
    in the same pass (:func:`_nearest_bounds`, bit for bit the two steps); for the others
    outward onto ``fmt`` (what ``nearest`` gives them). With the ends, their
    :func:`.base.summary`, taken in the same pass."""
    lo, hi = np.empty(shape), np.empty(shape)
    if not lo.size:
        return lo, hi, (0.0, False)
    rounding: NearestArgs | None = nearest_args(fmt) if nearest else None
    if rounding is not None:
        kernel = _nearest_bounds(product, switch, fmt.name == "float32")
        found = kernel(*operands, format_args(_FLOAT64), rounding, lo.reshape(-1), hi.reshape(-1))
    else:
        found = factory(switch, fmt.name == "float32")(
            *operands, format_args(fmt), lo.reshape(-1), hi.reshape(-1)
        )
    return lo, hi, radius_of(*found)


@jit(cache=True, forceinline=True)
def _power_operand(
    a: float, b: float, point: bool, magnitude: bool
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The ends whose powers are taken: [a, b] itself, or with ``magnitude`` |x| over it as
    :func:`..elementwise.absolute` gives it (0 below where it spans 0, NaN at both ends where an
    end is NaN: NumPy's minimum and maximum)."""
    if not magnitude:
        return a, b
    if point:
        return abs(a), abs(a)
    low = _select((a < 0) & (b > 0), 0.0, min(abs(a), abs(b)))
    undefined = (a != a) | (b != b)
    return _select(undefined, math.nan, low), _select(undefined, math.nan, max(abs(a), abs(b)))


@jit(cache=True, forceinline=True)
def _power_element(
    a: float,
    b: float,
    point: bool,
    n: int,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """Each end's power by n - 1 products by the end itself, each rounded onto the format in
    an unknown direction (interval products by a point, stepped outward): the lower end's
    chain's lower end, the upper end's chain's upper end (a point's one chain gives both)."""
    low, high = a, a
    for _ in range(n - 1):
        low, high = product_element(low, high, a, a, True, fa, fast32)
    if not point:
        upper_low, high = b, b
        for _ in range(n - 1):
            upper_low, high = product_element(upper_low, high, b, b, True, fa, fast32)
    return low, high


#: the float64 bits below a 26-bit significand: zero on the 26-bit grid
_BELOW_26 = np.int64((1 << 27) - 1)


@jit(cache=True, forceinline=True)
def _power_usual(a: float, b: float, n: int) -> tuple[float, float, bool]:  # pragma: no cover
    """The n-th power of [a, b] onto float32 (an increasing range: non-negative ends, or any
    ends for odd n) for the usual element, without a branch, and whether it is usual: both
    ends finite and on the 26-bit grid (what a float32 tensor's recorded ends are on), every
    end of the chains below float32's overflow threshold. Each end's chain is that of
    :func:`_power_element` (n - 1 interval products by the end itself, the kernel rounding
    each in a direction not known), but each product of a float32 number by a 26-bit one is
    exact in float64 (50 significant bits), so its ends are rounded outward onto float32 with
    no float64 step first: the float32 numbers either side of the exact product, which hold it
    and its rounding to nearest."""
    low_lo, low_hi, high_lo, high_hi = a, a, b, b
    for _ in range(n - 1):
        p1, p2, q1, q2 = low_lo * a, low_hi * a, high_lo * b, high_hi * b
        low_lo = float32_directed(min(p1, p2), False, False)
        low_hi = float32_directed(max(p1, p2), True, False)
        high_lo = float32_directed(min(q1, q2), False, False)
        high_hi = float32_directed(max(q1, q2), True, False)
    grid = (_bits(a) & _BELOW_26) == 0
    usual = (
        grid
        & ((_bits(b) & _BELOW_26) == 0)
        & (abs(a) < math.inf)
        & (abs(b) < math.inf)
        & (abs(low_lo) < 3.0e38)
        & (abs(high_hi) < 3.0e38)
    )
    return low_lo, high_hi, usual


@functools.cache
def _power_bounds(fast32: bool, n: int, magnitude: bool) -> Callable[..., None]:
    """The compiled kernel for these switches and exponent (compiled on first use, then
    cached): ``n`` is a constant of the compiled code, so that the chain of products is
    unrolled; ``magnitude``: the powers of |x|."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.power, fast32, n, magnitude),
    )
    def kernel(
        x_lo: np.ndarray,
        x_hi: np.ndarray,
        point: bool,
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        # onto float32, the usual elements in one branch-free pass (:func:`_power_usual`: the
        # chains' exact float64 products rounded outward), then the others by the chains of
        # stepped interval products; other formats by those alone
        missed = lo.size
        if fast32 and n > 1:
            missed = 0
            for k in range(lo.size):
                i = np.uint64(k)
                a, b = _power_operand(x_lo[i], x_hi[i], point, magnitude)
                lo[i], hi[i], usual = _power_usual(a, b, n)
                missed += not usual
        if not missed:
            return
        for k in range(lo.size):
            i = np.uint64(k)
            a, b = _power_operand(x_lo[i], x_hi[i], point, magnitude)
            if fast32 and n > 1 and _power_usual(a, b, n)[2]:
                continue  # written by the first pass
            lo[i], hi[i] = _power_element(a, b, point, n, fa, fast32)

    return kernel


def power_bounds(
    x_lo: Array, x_hi: Array, n: int, fmt: Format, *, magnitude: bool = False
) -> tuple[Array, Array]:
    """[lo, hi]: lo the lower end of the enclosure of ``x_lo ** n`` computed by n - 1
    multiplications in ``fmt`` (each rounded in an unknown direction), hi the upper end of that
    of ``x_hi ** n`` (``n >= 1``): the enclosure of the n-th power over a range on which it is
    increasing (non-negative ends, or any ends for odd ``n``), in one pass; with ``magnitude``
    of |x| over [``x_lo``, ``x_hi``] (an even power's), taken in the same pass. Onto float32,
    the usual elements' chains round their exact float64 products outward with no step first
    (:func:`_power_usual`), in a branch-free pass."""
    shape = np.broadcast_shapes(np.shape(x_lo), np.shape(x_hi))
    low = np.ascontiguousarray(np.broadcast_to(x_lo, shape), dtype=np.float64).reshape(-1)
    high = (
        low
        if x_hi is x_lo
        else np.ascontiguousarray(np.broadcast_to(x_hi, shape), dtype=np.float64).reshape(-1)
    )
    lo, hi = np.empty(shape), np.empty(shape)
    if lo.size:
        _power_bounds(fmt.name == "float32", int(n), magnitude)(
            low, high, high is low, format_args(fmt), lo.reshape(-1), hi.reshape(-1)
        )
    return lo, hi


@jit(cache=True, forceinline=True)
def library_element(
    f_lo: float,
    f_hi: float,
    increasing: bool,
    c: tuple[float, float],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """One element of :func:`library_bounds`: ``c`` = (per magnitude, constant)."""
    per_magnitude, constant = c
    low, high = (f_lo, f_hi) if increasing else (f_hi, f_lo)
    if (low != low) | (high != high):
        return -math.inf, math.inf
    magnitude = max(abs(low), abs(high))
    allowance = 0.0 if magnitude == math.inf else per_magnitude * magnitude + constant
    return outward_step(low - allowance, high + allowance, fa, fast32)


@jit(cache=True, forceinline=True)
def library_usual(
    f_lo: float, f_hi: float, c: tuple[float, float], fast32: bool
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`library_element` of an increasing function onto float32 (``fast32``) or float64
    for the usual element, without a branch, and whether the element is usual: both values
    finite, and onto float64 both widened ends nonzero and finite. There the general path takes
    these steps and no other: no value is NaN and the magnitude is finite, so the allowance is
    ``per_magnitude * M + constant``; the widened ends are stepped outward, onto float32 by
    :func:`..rounding.float32_directed` (strict, as there), onto float64 one unit of each
    nonzero finite pattern out (:func:`..rounding.steps_out`, what next_down and next_up
    take there)."""
    per_magnitude, constant = c
    allowance = per_magnitude * max(abs(f_lo), abs(f_hi)) + constant
    low, high = f_lo - allowance, f_hi + allowance
    usual = (abs(f_lo) < math.inf) & (abs(f_hi) < math.inf)
    if fast32:
        return float32_directed(low, False, True), float32_directed(high, True, True), usual
    low, high, ordinary = steps_out(low, high)
    return low, high, usual & ordinary


@functools.cache
def _library_bounds(increasing: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.library, increasing, fast32),
    )
    def kernel(
        f_lo: np.ndarray,
        f_hi: np.ndarray,
        c: tuple[float, float],
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        for n in range(lo.size):
            i = np.uint64(n)  # unsigned: numba then skips its negative-index wraparound
            lo[i], hi[i] = library_element(f_lo[i], f_hi[i], increasing, c, fa, fast32)

    return kernel


def library_bounds(
    f_lo: Array,
    f_hi: Array,
    increasing: bool,
    per_magnitude: float,
    constant: float,
    fmt: Format,
) -> tuple[Array, Array]:
    """The enclosure of a monotone function's values over intervals from its float64 values
    at their ends (``f_hi is f_lo`` for points): with M the larger magnitude of an element's
    two values and ``allowance = per_magnitude * M + constant`` (0 where M is infinite),
    [f_lo - allowance, f_hi + allowance] (swapped first when not ``increasing``) stepped one
    float64 step outward and rounded outward onto ``fmt``; the whole line where a value is
    NaN. One pass (:func:`.elementwise.library_function` states the rule)."""
    # asarray keeps a 0-d shape (a scalar's value), unlike ascontiguousarray
    low = np.asarray(f_lo, dtype=np.float64, order="C")
    high = low if f_hi is f_lo else np.asarray(f_hi, dtype=np.float64, order="C")
    lo, hi = np.empty(low.shape), np.empty(low.shape)
    if lo.size:
        _library_bounds(bool(increasing), fmt.name == "float32")(
            low.reshape(-1),
            high.reshape(-1),
            (float(per_magnitude), float(constant)),
            format_args(fmt),
            lo.reshape(-1),
            hi.reshape(-1),
        )
    return lo, hi


@jit(cache=True, forceinline=True, error_model="numpy")
def quotient_element(
    x_lo: float,
    x_hi: float,
    y_lo: float,
    y_hi: float,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The enclosure of [x_lo, x_hi] / [y_lo, y_hi] (:func:`div_bounds` states the rule)."""
    q1, q2, q3, q4 = x_lo / y_lo, x_lo / y_hi, x_hi / y_lo, x_hi / y_hi
    # NumPy's minimum and maximum: a NaN quotient is their result
    low, high = hull4(q1, q2, q3, q4)
    undefined = (q1 != q1) | (q2 != q2) | (q3 != q3) | (q4 != q4)
    infinity_over_infinity = (math.isinf(x_lo) | math.isinf(x_hi)) & (
        math.isinf(y_lo) | math.isinf(y_hi)
    )
    if ((y_lo <= 0) & (y_hi >= 0)) | infinity_over_infinity:
        return -math.inf, math.inf
    if undefined:  # a NaN end stepped: the infinities of its side
        low, high = math.nan, math.nan
    low, high = next_down(low), next_up(high)
    if ((x_lo >= 0) & (y_lo > 0)) | ((x_hi <= 0) & (y_hi < 0)):
        low = max(low, 0.0)
    if ((x_lo >= 0) & (y_hi < 0)) | ((x_hi <= 0) & (y_lo > 0)):
        high = min(high, 0.0)
    return outward(low, high, fa, fast32)


@jit(cache=True, forceinline=True, error_model="numpy")
def quotient_usual(
    x_lo: float,
    x_hi: float,
    y_lo: float,
    y_hi: float,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`quotient_element` for the usual element, without a branch of its own (so that a
    loop of it vectorises), and whether the element is usual: every end finite, the divisor's
    interval clear of zero, and the hull's ends finite. There the general path is not the
    whole line and no quotient is NaN; it steps each end out by :func:`..rounding.next_down`
    and :func:`..rounding.next_up`, one unit of a nonzero finite pattern
    (:func:`..rounding.steps_out`) and +-2**-1074 from a zero of either sign, then keeps it on
    the side of zero the signs decide and rounds it outward: these steps."""
    q1, q2, q3, q4 = x_lo / y_lo, x_lo / y_hi, x_hi / y_lo, x_hi / y_hi
    low, high = hull4(q1, q2, q3, q4)
    usual = (
        (abs(x_lo) < math.inf)
        & (abs(x_hi) < math.inf)
        & (abs(y_lo) < math.inf)
        & (abs(y_hi) < math.inf)
        & ((y_lo > 0) | (y_hi < 0))
        & (abs(low) < math.inf)
        & (abs(high) < math.inf)
    )
    below, above, _ = steps_out(low, high)
    below = _select(low == 0, -(2.0**-1074), below)
    above = _select(high == 0, 2.0**-1074, above)
    at_least_zero = ((x_lo >= 0) & (y_lo > 0)) | ((x_hi <= 0) & (y_hi < 0))
    at_most_zero = ((x_lo >= 0) & (y_hi < 0)) | ((x_hi <= 0) & (y_lo > 0))
    below = _select(at_least_zero, max(below, 0.0), below)
    above = _select(at_most_zero, min(above, 0.0), above)
    below, above = outward(below, above, fa, fast32)
    return below, above, usual


@functools.cache
def _div_bounds(fast32: bool) -> Callable[..., None]:
    """The compiled kernel for this switch (compiled on first use, then cached)."""

    @jit(cache=True, error_model="numpy", fallback=functools.partial(fallbacks.div, fast32))
    def kernel(
        a_lo: np.ndarray,
        a_hi: np.ndarray,
        a_period: int,
        b_lo: np.ndarray,
        b_hi: np.ndarray,
        b_period: int,
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        # the usual elements in one branch-free pass that vectorises, then the others by the
        # general path
        missed = 0
        if b_period == 1 and a_period == lo.size and b_lo[0] == b_hi[0]:
            # by one number (a scale): its two ends one variable, so that LLVM computes each
            # dividend's quotient once and hoists the divisor's tests out of the loop
            y = b_lo[0]
            for k in range(lo.size):
                i = np.uint64(k)
                lo[i], hi[i], usual = quotient_usual(a_lo[i], a_hi[i], y, y, fa, fast32)
                missed += not usual
            if missed:
                for k in range(lo.size):
                    i = np.uint64(k)
                    if not quotient_usual(a_lo[i], a_hi[i], y, y, fa, fast32)[2]:
                        lo[i], hi[i] = quotient_element(a_lo[i], a_hi[i], y, y, fa, fast32)
            return
        block = block_length(lo.size, a_period, b_period)
        a_step, b_step = int(a_period > 1), int(b_period > 1)
        for start in range(0, lo.size, block):
            a0, b0 = start % a_period, start % b_period
            for j in range(block):
                i = np.uint64(start + j)
                ja, jb = np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
                x = (a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb])
                lo[i], hi[i], usual = quotient_usual(x[0], x[1], x[2], x[3], fa, fast32)
                missed += not usual
        if not missed:
            return
        for start in range(0, lo.size, block):
            a0, b0 = start % a_period, start % b_period
            for j in range(block):
                i = np.uint64(start + j)
                ja, jb = np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
                x = (a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb])
                if not quotient_usual(x[0], x[1], x[2], x[3], fa, fast32)[2]:
                    lo[i], hi[i] = quotient_element(x[0], x[1], x[2], x[3], fa, fast32)

    return kernel


def div_bounds(
    a_lo: Array, a_hi: Array, b_lo: Array, b_hi: Array, fmt: Format
) -> tuple[Array, Array]:
    """The interval quotient, broadcast: the hull of the four end quotients (each correctly
    rounded in float64) stepped one float64 step outward, rounded outward onto ``fmt``; the
    whole line where the divisor's interval holds zero (of either sign) or an infinity may be
    divided by one. Where the operands' signs decide the quotient's, a zero end stays at zero
    (0 / b is exactly 0, an underflowing quotient keeps its sign). One pass."""
    shape, operands = _broadcast_operands(a_lo, a_hi, b_lo, b_hi)
    lo, hi = np.empty(shape), np.empty(shape)
    if lo.size:
        _div_bounds(fmt.name == "float32")(
            *operands, format_args(fmt), lo.reshape(-1), hi.reshape(-1)
        )
    return lo, hi
