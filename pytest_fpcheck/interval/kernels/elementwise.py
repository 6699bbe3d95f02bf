"""Kernels of correctly rounded element-wise arithmetic (:mod:`pytest_fpcheck.interval.elementwise`):
the enclosures of a sum or difference (:func:`add_bounds`) and of a product (:func:`mul_bounds`)
of broadcast interval operands, and of an integer power computed by repeated multiplication
(:func:`power_bounds`), rounded outward onto the result format in one pass.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...formats import Format
from .. import fallbacks
from ..jit import jit
from ..rounding import _select, steps_out
from .base import (
    block_length,
    broadcast_flat,
    format_args,
    outward,
    outward_step,
    sum_lower,
    sum_upper,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["add_bounds", "mul_bounds", "power_bounds"]


@jit(cache=True, inline="always")
def _sum_element(
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


@jit(cache=True, inline="always")
def _sum64_usual(
    x_lo: float, x_hi: float, y_lo: float, y_hi: float
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`_sum_element` onto float64 for the usual element, without a branch (so that a
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
    # no inf - inf possible: the negation of _sum_element's ``opposite``
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


@jit(cache=True, inline="always")
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
) -> None:  # pragma: no cover - compiled
    block = block_length(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    # onto float64 (what a run that rounds to nearest asks first), the usual elements in one
    # branch-free pass that vectorises, then the others element by element
    missed = 0
    if fa[0] and a_period == lo.size and b_period == lo.size:
        for n in range(lo.size):
            i = np.uint64(n)  # unsigned: numba then skips its negative-index wraparound
            x_lo, x_hi = a_lo[i], a_hi[i]
            y_lo, y_hi = (-b_hi[i], -b_lo[i]) if negate_b else (b_lo[i], b_hi[i])
            lo[i], hi[i], usual = _sum64_usual(x_lo, x_hi, y_lo, y_hi)
            missed += not usual
        if not missed:
            return
    elif fa[0]:
        for start in range(0, lo.size, block):
            a0, b0 = start % a_period, start % b_period
            for j in range(block):
                # unsigned indices: numba then skips its negative-index wraparound
                i = np.uint64(start + j)
                ja, jb = np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
                x_lo, x_hi = a_lo[ja], a_hi[ja]
                y_lo, y_hi = (-b_hi[jb], -b_lo[jb]) if negate_b else (b_lo[jb], b_hi[jb])
                lo[i], hi[i], usual = _sum64_usual(x_lo, x_hi, y_lo, y_hi)
                missed += not usual
        if not missed:
            return
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi = a_lo[ja], a_hi[ja]
            y_lo, y_hi = (-b_hi[jb], -b_lo[jb]) if negate_b else (b_lo[jb], b_hi[jb])
            if missed and _sum64_usual(x_lo, x_hi, y_lo, y_hi)[2]:
                continue  # written by the first pass
            lo[i], hi[i] = _sum_element(x_lo, x_hi, y_lo, y_hi, fa, fast32)


@functools.cache
def _add_bounds(negate_b: bool, fast32: bool) -> Callable[..., None]:
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
    ) -> None:  # pragma: no cover - compiled
        _add_bounds_loop(a_lo, a_hi, a_period, b_lo, b_hi, b_period, negate_b, fa, fast32, lo, hi)

    return kernel


def add_bounds(
    a_lo: Array,
    a_hi: Array,
    b_lo: Array,
    b_hi: Array,
    negate_b: bool,
    fmt: Format,
) -> tuple[Array, Array]:
    """[a_lo + b_lo, a_hi + b_hi] (b negated first when ``negate_b``: a - b), broadcast, each
    end exact where TwoSum shows the float64 sum exact, else stepped outward; the whole line
    where inf - inf is possible or an end is NaN; rounded outward onto ``fmt``. For a point,
    pass the same array as both ends: its sum is then rounded in both directions."""
    shape = np.broadcast_shapes(a_lo.shape, b_lo.shape)
    a_low, a_period = broadcast_flat(a_lo, shape)
    a_high = a_low if a_hi is a_lo else broadcast_flat(a_hi, shape)[0]
    b_low, b_period = broadcast_flat(b_lo, shape)
    b_high = b_low if b_hi is b_lo else broadcast_flat(b_hi, shape)[0]
    if a_high.size != a_low.size:  # the two ends of an operand broadcast differently
        a_low, a_high = (np.ascontiguousarray(np.broadcast_to(x, shape)) for x in (a_lo, a_hi))
        a_low, a_high, a_period = a_low.reshape(-1), a_high.reshape(-1), max(a_low.size, 1)
    if b_high.size != b_low.size:
        b_low, b_high = (np.ascontiguousarray(np.broadcast_to(x, shape)) for x in (b_lo, b_hi))
        b_low, b_high, b_period = b_low.reshape(-1), b_high.reshape(-1), max(b_low.size, 1)
    lo, hi = np.empty(shape), np.empty(shape)
    if lo.size:
        _add_bounds(negate_b, fmt.name == "float32")(
            a_low,
            a_high,
            a_period,
            b_low,
            b_high,
            b_period,
            format_args(fmt),
            lo.reshape(-1),
            hi.reshape(-1),
        )
    return lo, hi


@jit(cache=True, inline="always")
def _product(
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
    low = min(min(p1, p2), min(p3, p4))
    high = max(max(p1, p2), max(p3, p4))
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


@jit(cache=True, inline="always")
def _product64_usual(
    x_lo: float, x_hi: float, y_lo: float, y_hi: float, step: bool
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`_product` onto float64 for the usual element, without a branch (so that a loop
    of it vectorises), and whether the element is usual: its four ends and the hull of the
    four products finite, and, when ``step``, the hull's ends nonzero. There the general path
    takes these steps and no other: no product is infinite or NaN (an infinite one would make
    an end of the hull infinite), so the whole line is never given; the hull is stepped one
    unit of its patterns out when ``step`` (a nonzero finite pattern), and float64 keeps it."""
    p1, p2, p3, p4 = x_lo * y_lo, x_lo * y_hi, x_hi * y_lo, x_hi * y_hi
    low = min(min(p1, p2), min(p3, p4))
    high = max(max(p1, p2), max(p3, p4))
    usual = (
        (abs(x_lo) < math.inf)
        & (abs(x_hi) < math.inf)
        & (abs(y_lo) < math.inf)
        & (abs(y_hi) < math.inf)
        & (abs(low) < math.inf)
        & (abs(high) < math.inf)
    )
    if step:
        low, high, ordinary = steps_out(low, high)
        usual &= ordinary
    return low, high, usual


@jit(cache=True, inline="always")
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
) -> None:  # pragma: no cover - compiled
    block = block_length(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    # onto float64, the usual elements in one branch-free pass first (as for sums)
    missed = 0
    if fa[0] and a_period == lo.size and b_period == lo.size:
        for n in range(lo.size):
            i = np.uint64(n)  # unsigned: numba then skips its negative-index wraparound
            lo[i], hi[i], usual = _product64_usual(a_lo[i], a_hi[i], b_lo[i], b_hi[i], step)
            missed += not usual
        if not missed:
            return
    elif fa[0]:
        for start in range(0, lo.size, block):
            a0, b0 = start % a_period, start % b_period
            for j in range(block):
                i = np.uint64(start + j)
                ja, jb = np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
                lo[i], hi[i], usual = _product64_usual(a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb], step)
                missed += not usual
        if not missed:
            return
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi, y_lo, y_hi = a_lo[ja], a_hi[ja], b_lo[jb], b_hi[jb]
            if missed and _product64_usual(x_lo, x_hi, y_lo, y_hi, step)[2]:
                continue  # written by the first pass
            lo[i], hi[i] = _product(x_lo, x_hi, y_lo, y_hi, step, fa, fast32)


@functools.cache
def _mul_bounds(step: bool, fast32: bool) -> Callable[..., None]:
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
    ) -> None:  # pragma: no cover - compiled
        _mul_bounds_loop(a_lo, a_hi, a_period, b_lo, b_hi, b_period, step, fa, fast32, lo, hi)

    return kernel


def mul_bounds(
    a_lo: Array,
    a_hi: Array,
    b_lo: Array,
    b_hi: Array,
    step: bool,
    fmt: Format,
) -> tuple[Array, Array]:
    """The interval product, broadcast: the hull of the four endpoint products, stepped outward
    when ``step`` (float64 products inexact);
    the whole line where 0 * inf or an undefined product is possible; rounded onto ``fmt``."""
    shape = np.broadcast_shapes(a_lo.shape, b_lo.shape)
    operands = []
    for low_end, high_end in ((a_lo, a_hi), (b_lo, b_hi)):
        low, period = broadcast_flat(low_end, shape)
        high = low if high_end is low_end else broadcast_flat(high_end, shape)[0]
        if high.size != low.size:  # the two ends broadcast differently
            low, high = (
                np.ascontiguousarray(np.broadcast_to(x, shape), dtype=np.float64).reshape(-1)
                for x in (low_end, high_end)
            )
            period = max(low.size, 1)
        operands.append((low, high, period))
    lo, hi = np.empty(shape), np.empty(shape)
    if lo.size:
        (x_lo, x_hi, x_period), (y_lo, y_hi, y_period) = operands
        _mul_bounds(step, fmt.name == "float32")(
            x_lo,
            x_hi,
            x_period,
            y_lo,
            y_hi,
            y_period,
            format_args(fmt),
            lo.reshape(-1),
            hi.reshape(-1),
        )
    return lo, hi


@functools.cache
def _power_bounds(fast32: bool, n: int) -> Callable[..., None]:
    """The compiled kernel for this switch and exponent (compiled on first use, then cached):
    ``n`` is a constant of the compiled code, so that the chain of products is unrolled and the
    loop over elements vectorises."""

    @jit(cache=True, error_model="numpy", fallback=functools.partial(fallbacks.power, fast32, n))
    def kernel(
        x_lo: np.ndarray,
        x_hi: np.ndarray,
        point: bool,
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        for i in range(lo.size):
            # each end's power by n - 1 products by the end itself, each rounded onto the
            # format in an unknown direction: interval products by a point, stepped outward
            x = x_lo[i]
            low, high = x, x
            for _ in range(n - 1):
                low, high = _product(low, high, x, x, True, fa, fast32)
            if not point:  # a point's one chain gives both ends
                x = x_hi[i]
                upper_low, high = x, x
                for _ in range(n - 1):
                    upper_low, high = _product(upper_low, high, x, x, True, fa, fast32)
            lo[i], hi[i] = low, high

    return kernel


def power_bounds(x_lo: Array, x_hi: Array, n: int, fmt: Format) -> tuple[Array, Array]:
    """[lo, hi]: lo the lower end of the enclosure of ``x_lo ** n`` computed by n - 1
    multiplications in ``fmt`` (each rounded in an unknown direction), hi the upper end of that
    of ``x_hi ** n`` (``n >= 1``): the enclosure of the n-th power over a range on which it is
    increasing (non-negative ends, or any ends for odd ``n``), in one pass."""
    shape = np.broadcast_shapes(np.shape(x_lo), np.shape(x_hi))
    low = np.ascontiguousarray(np.broadcast_to(x_lo, shape), dtype=np.float64).reshape(-1)
    high = (
        low
        if x_hi is x_lo
        else np.ascontiguousarray(np.broadcast_to(x_hi, shape), dtype=np.float64).reshape(-1)
    )
    lo, hi = np.empty(shape), np.empty(shape)
    if lo.size:
        _power_bounds(fmt.name == "float32", int(n))(
            low, high, high is low, format_args(fmt), lo.reshape(-1), hi.reshape(-1)
        )
    return lo, hi
