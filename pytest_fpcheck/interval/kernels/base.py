"""The compiled steps every kernel shares: a format as kernels take it (:func:`format_args`),
outward rounding of a pair of ends onto a format (:func:`outward`, :func:`outward_step`), the
"at least one float64 step above" of a non-negative quantity (:func:`bump`), directed float64 sums
(:func:`sum_lower`, :func:`sum_upper`), the flat layouts kernels loop over (:func:`flat_views`,
:func:`empty_like_order`, :func:`flat`, :func:`broadcast_flat`), the radius summary of an
enclosure (:func:`summary`, what the side store keeps of each record), and the hull of an
enclosure with the values a run computed, summarised in the same pass (:func:`join_computed`,
a posteriori tracking's rule).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...formats import Format
from .. import fallbacks
from ..jit import jit
from ..rounding import (
    _bits,
    _from_bits,
    float32_directed,
    next_down,
    next_up,
    round_to,
    step_down_to,
    step_up_to,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = [
    "FormatArgs",
    "block_length",
    "broadcast_flat",
    "bump",
    "empty_like_order",
    "flat",
    "flat_views",
    "format_args",
    "join_computed",
    "outward",
    "outward_step",
    "sum_lower",
    "sum_upper",
    "summary",
]

#: (is float64, precision, smallest normal, emin, largest finite, has infinities): a format as
#: kernels take it
FormatArgs = tuple[bool, int, float, int, float, bool]


def format_args(fmt: Format) -> FormatArgs:
    return (
        fmt.name == "float64",
        fmt.precision,
        fmt.smallest_normal,
        fmt.emin,
        fmt.max_finite,
        fmt.has_inf,
    )


@jit(cache=True, forceinline=True)
def outward(
    lo: float, hi: float, fa: tuple[bool, int, float, int, float, bool], fast32: bool
) -> tuple[float, float]:  # pragma: no cover - compiled
    """[lo, hi] rounded outward onto the format (float64: NaN ends become -inf / +inf).
    ``fast32``: the format is float32, known when the kernel is compiled (see the module
    docstring)."""
    if fast32:
        return float32_directed(lo, False, False), float32_directed(hi, True, False)
    if fa[0]:
        return (-math.inf if lo != lo else lo), (math.inf if hi != hi else hi)
    return (
        round_to(lo, fa[1], fa[2], fa[3], fa[4], fa[5], False),
        round_to(hi, fa[1], fa[2], fa[3], fa[4], fa[5], True),
    )


@jit(cache=True, forceinline=True)
def outward_step(
    lo: float, hi: float, fa: tuple[bool, int, float, int, float, bool], fast32: bool
) -> tuple[float, float]:  # pragma: no cover - compiled
    """``outward(next_down(lo), next_up(hi), fa, fast32)`` (ends of inexact float64 results,
    stepped outward, then rounded onto the format), fused."""
    if fast32:
        return float32_directed(lo, False, True), float32_directed(hi, True, True)
    if fa[0]:
        return next_down(lo), next_up(hi)
    return (
        step_down_to(lo, fa[1], fa[2], fa[3], fa[4], fa[5]),
        step_up_to(hi, fa[1], fa[2], fa[3], fa[4], fa[5]),
    )


@jit(cache=True, forceinline=True)
def hull4(a: float, b: float, c: float, d: float) -> tuple[float, float]:  # pragma: no cover
    """(least, greatest) of four numbers, as Numba's min and max pick them (a NaN goes where
    they put it): the hull of an interval product's or quotient's four end values."""
    return min(min(a, b), min(c, d)), max(max(a, b), max(c, d))


@jit(cache=True, forceinline=True)
def bump(r: float) -> float:  # pragma: no cover - compiled
    """A float64 number >= the next float64 above ``r >= 0`` (NaN and inf stay)."""
    if r >= 2.0**-1000:
        return r * (1.0 + 2.0**-51)
    return r + 2.0**-1022


def flat_views(
    *arrays: Array, copy_in_order: bool = False
) -> tuple[list[np.ndarray], tuple[int, ...], tuple[int, ...]]:
    """Flat (1-d) views of float64 arrays of one shape, the axis order that makes them
    C-contiguous (the first array's, by decreasing stride) and its inverse; contiguous copies
    (and the identity order) when some array's memory has gaps or another layout, or with
    ``copy_in_order`` copies in that axis order (a slice of a transposed operand is then copied
    row by row of its memory, not gathered across it)."""
    first = arrays[0]
    if all(array.flags.c_contiguous and array.dtype == np.float64 for array in arrays):
        natural = tuple(range(first.ndim))  # the usual case: no axis order to find
        return [array.reshape(-1) for array in arrays], natural, natural
    order = tuple(sorted(range(first.ndim), key=lambda axis: -abs(first.strides[axis])))
    moved = [array.transpose(order) for array in arrays]
    if copy_in_order or all(m.flags.c_contiguous and m.dtype == np.float64 for m in moved):
        inverse = tuple(int(i) for i in np.argsort(order))
        flats = [np.ascontiguousarray(m, dtype=np.float64).reshape(-1) for m in moved]
        return flats, order, inverse
    identity = tuple(range(first.ndim))
    flats = [np.ascontiguousarray(array, dtype=np.float64).reshape(-1) for array in arrays]
    return flats, identity, identity


def empty_like_order(shape: tuple[int, ...], order: tuple[int, ...]) -> np.ndarray:
    """An uninitialised float64 array of ``shape`` whose memory runs in axis order ``order``
    (one that owns its memory when the order is the natural one)."""
    if order == tuple(range(len(shape))):
        return np.empty(shape)
    return np.empty(tuple(shape[axis] for axis in order)).transpose(np.argsort(order))


def flat(array: np.ndarray) -> np.ndarray:
    """The flat view of an array from :func:`empty_like_order`, in memory order."""
    order = sorted(range(array.ndim), key=lambda axis: -abs(array.strides[axis]))
    moved = array.transpose(order)
    assert moved.flags.c_contiguous  # so that reshape gives a view, never a copy
    return moved.reshape(-1)


@jit(cache=True, error_model="numpy", fallback=fallbacks.summary)
def _summary(lo: np.ndarray, hi: np.ndarray) -> tuple[float, bool]:  # pragma: no cover
    # branch-free, and the largest width kept as its bit pattern: widths are not negative, and
    # the patterns of non-negative float64 numbers order as the numbers do, so the maximum is
    # an integer one, which (unlike a float one) lets the loop be vectorised
    widest = np.int64(0)
    unbounded = False
    for i in range(lo.size):
        a, b = lo[i], hi[i]
        pattern = _width_bits(a, b)
        widest = pattern if pattern > widest else widest
        unbounded |= (a == -math.inf) & (b == math.inf)
    return _from_bits(widest), unbounded


@jit(cache=True, forceinline=True)
def _width_bits(a: float, b: float) -> np.int64:  # pragma: no cover - compiled
    """The bit pattern of [a, b]'s width: 0 where a == b, +inf where b - a overflows or is
    NaN."""
    width = 0.0 if a == b else b - a
    return _bits(math.inf if width != width else width)


@jit(cache=True, forceinline=True)
def summarised(
    widest: np.int64, unbounded: bool, low: float, high: float, counted: bool
) -> tuple[np.int64, bool]:  # pragma: no cover - compiled
    """A kernel's running :func:`summary` (``widest`` a width's bit pattern, as ``_summary``
    keeps it) with the element [``low``, ``high``] it wrote, where ``counted`` (a first pass
    counts only the elements it wrote for good; a second pass then counts those it rewrites),
    without a branch."""
    pattern = _width_bits(low, high) if counted else np.int64(0)
    return max(widest, pattern), unbounded | (counted & (low == -math.inf) & (high == math.inf))


def summary(lo: Array, hi: Array) -> tuple[float, bool]:
    """(largest radius, some element is the whole line) of [lo, hi]: the radius is half the
    largest width hi - lo (0 where lo == hi, +inf where the width overflows or is NaN)."""
    if lo is hi or lo.size == 0:
        return 0.0, False
    flats, _, _ = flat_views(lo, hi)
    return radius_of(*_summary(flats[0], flats[1]))


def radius_of(widest: float, unbounded: bool) -> tuple[float, bool]:
    """(largest radius, some element is the whole line) from a kernel's (largest width,
    some element is the whole line)."""
    return (widest / 2 if math.isfinite(widest) else math.inf), unbounded


@jit(cache=True, error_model="numpy", fallback=fallbacks.join_computed)
def _join_computed(
    lo: np.ndarray, hi: np.ndarray, value: np.ndarray, out_lo: np.ndarray, out_hi: np.ndarray
) -> tuple[bool, float, bool]:  # pragma: no cover - compiled
    # the hull element by element, NaN anywhere giving the whole line; ``differs``: some value
    # is not ``lo``'s (NaN matching NaN), what a point enclosure asks; the summary as _summary's
    differs = False
    widest = np.int64(0)
    unbounded = False
    for i in range(value.size):
        a, b, v = lo[i], hi[i], value[i]
        differs |= (a != v) & ((a == a) | (v == v))
        undefined = (a != a) | (b != b) | (v != v)
        low = -math.inf if undefined else (v if v < a else a)
        high = math.inf if undefined else (v if v > b else b)
        out_lo[i], out_hi[i] = low, high
        pattern = _width_bits(low, high)
        widest = pattern if pattern > widest else widest
        unbounded |= (low == -math.inf) & (high == math.inf)
    return differs, _from_bits(widest), unbounded


def join_computed(
    interval_lo: Array, interval_hi: Array, value: Array
) -> tuple[Array, Array, tuple[float, bool]] | None:
    """The hull of ``[interval_lo, interval_hi]`` (broadcast to ``value``'s shape) and the
    computed ``value``, and that hull's :func:`summary`, in one pass; an element where an end
    or the value is NaN becomes the whole line. None when the enclosure is a point (``lo is
    hi``) that already is ``value`` (equal everywhere, NaN matching NaN): it stays as it is."""
    shape = value.shape
    lo = interval_lo if interval_lo.shape == shape else np.broadcast_to(interval_lo, shape)
    point = interval_lo is interval_hi
    hi = (
        lo
        if point
        else (interval_hi if interval_hi.shape == shape else np.broadcast_to(interval_hi, shape))
    )
    (flat_lo, flat_hi, flat_value), order, _ = flat_views(lo, hi, value)
    out_lo, out_hi = empty_like_order(shape, order), empty_like_order(shape, order)
    differs, widest, unbounded = _join_computed(
        flat_lo, flat_hi, flat_value, flat(out_lo), flat(out_hi)
    )
    if point and not differs:
        return None
    return out_lo, out_hi, radius_of(widest, unbounded)


def broadcast_flat(array: Array, shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """(flat float64 data, period) of ``array`` broadcast to ``shape`` in C order: element i of
    the broadcast is ``data[i % period]``. A C-contiguous array whose shape is a trailing part of
    ``shape`` (leading ones aside) is used as it is; anything else is broadcast and copied."""
    dims = list(array.shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    trailing = len(dims) <= len(shape) and tuple(dims) == shape[len(shape) - len(dims) :]
    if trailing and array.flags.c_contiguous and array.dtype == np.float64:
        return array.reshape(-1), max(array.size, 1)
    data = np.ascontiguousarray(np.broadcast_to(array, shape), dtype=np.float64).reshape(-1)
    return data, max(data.size, 1)


@jit(cache=True, forceinline=True)
def sum_lower(a: float, b: float) -> float:  # pragma: no cover - compiled
    """a + b rounded down: the float64 sum when TwoSum shows it exact or below, else a step
    below it (an infinite operand makes the sum exact)."""
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    stepped = next_down(s)  # both computed, then selected: the error's sign is unpredictable
    exact = (error >= 0) | (math.isinf(s) & (error == error)) | math.isinf(a) | math.isinf(b)
    return s if exact else stepped


@jit(cache=True, forceinline=True)
def sum_upper(a: float, b: float) -> float:  # pragma: no cover - compiled
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    stepped = next_up(s)
    exact = (error <= 0) | (math.isinf(s) & (error == error)) | math.isinf(a) | math.isinf(b)
    return s if exact else stepped


@jit(cache=True, forceinline=True)
def block_length(size: int, a_period: int, b_period: int) -> int:  # pragma: no cover - compiled
    """The run of consecutive outputs over which neither broadcast operand wraps around: the
    smaller period, a period of 1 (a scalar, read at index 0 throughout) aside."""
    block = size
    if a_period > 1:
        block = min(block, a_period)
    if b_period > 1:
        block = min(block, b_period)
    return max(block, 1)
