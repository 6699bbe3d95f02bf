"""Fused passes of the interval engine: one compiled loop per rule instead of a chain of NumPy
passes (RENDER section II-C's outward rounding, done element by element as each endpoint is
produced).

Every kernel evaluates the same float64 expressions as the NumPy formulation it replaces, with
the same outward steps (:func:`.rounding.next_up` / :func:`.rounding.next_down` are bit-exact
``nextafter``), so the enclosures are those of the documented rules; only the number of passes
over memory changes. Kernels work on flat arrays: :func:`flat_views` turns a (possibly
transposed) array into a flat one without copying where its memory allows.

Scalar helpers that need "a float64 number at least as large as the exact value" of a
non-negative quantity use :func:`bump`: ``r (1 + 2**-51)`` is at least one float64 step above
a normal ``r`` (the product's exact value exceeds the next float64), and ``r + 2**-1022`` above
a tiny one. Kernels keep subnormal operands out of their arithmetic (a subnormal operand costs
a microcode assist of a hundred cycles on x86): allowances below 2**-1022 are raised to it.

Each kernel is a loop (``*_loop``) and a factory that compiles it for one setting of its
switches (``fast32``, and the rule's variant: a point operand, a subtraction, an addend), the
switches being constants of the compiled code: numba does not hoist a branch on an argument out
of a loop, and such a branch costs these loops up to half their speed. A setting is compiled
when first used (and cached on disk), so a run compiles only the variants it needs. ``fast32``
(the result format is float32) rounds endpoints by the hardware's conversion
(:func:`.rounding.float32_directed`, bit-identical to the general path).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numba
import numpy as np

from ..formats import Format
from .core import gamma
from .rounding import (
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
    "add_bounds",
    "broadcast_flat",
    "bump",
    "empty_like_order",
    "flat",
    "flat_views",
    "float32_magnitudes",
    "format_args",
    "gelu_erf_bounds",
    "matmul_epilogue",
    "moments_rows",
    "mul_bounds",
    "normalise_rows",
    "outward",
    "outward_step",
    "softmax_bounds",
    "split_operand",
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


@numba.njit(cache=True, inline="always")
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


@numba.njit(cache=True, inline="always")
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


@numba.njit(cache=True, inline="always")
def bump(r: float) -> float:  # pragma: no cover - compiled
    """A float64 number >= the next float64 above ``r >= 0`` (NaN and inf stay)."""
    if r >= 2.0**-1000:
        return r * (1.0 + 2.0**-51)
    return r + 2.0**-1022


def flat_views(*arrays: Array) -> tuple[list[np.ndarray], tuple[int, ...], tuple[int, ...]]:
    """Flat (1-d) views of float64 arrays of one shape, the axis order that makes them
    C-contiguous (the first array's, by decreasing stride) and its inverse; contiguous copies
    (and the identity order) when some array's memory has gaps or another layout."""
    first = arrays[0]
    order = tuple(sorted(range(first.ndim), key=lambda axis: -abs(first.strides[axis])))
    moved = [array.transpose(order) for array in arrays]
    if all(m.flags.c_contiguous and m.dtype == np.float64 for m in moved):
        inverse = tuple(int(i) for i in np.argsort(order))
        return [m.reshape(-1) for m in moved], order, inverse
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


@numba.njit(cache=True, inline="always")
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

    @numba.njit(cache=True, error_model="numpy")
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


@numba.njit(cache=True, error_model="numpy")
def _magnitudes(x: np.ndarray, floor: float, out: np.ndarray) -> None:  # pragma: no cover
    low = np.float32(floor)
    for i in range(x.size):
        a = abs(x[i])
        out[i] = low if a < low else a  # a NaN stays NaN


def float32_magnitudes(x: np.ndarray) -> np.ndarray:
    """max(|x|, 2**-126) of a float32 array, in one pass, as a float32 array of x's shape
    (laid out as x's memory is, where x's memory is one block): a radius product's operand."""
    order = tuple(sorted(range(x.ndim), key=lambda axis: -abs(x.strides[axis])))
    moved = x.transpose(order)
    if not moved.flags.c_contiguous:
        order = tuple(range(x.ndim))
        moved = np.ascontiguousarray(x)
    out = np.empty(moved.shape, dtype=np.float32)
    _magnitudes(moved.reshape(-1), 2.0**-126, out.reshape(-1))
    return out.transpose(np.argsort(order))


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
    flats, order, inverse = flat_views(a_lo, a_hi)
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


@numba.njit(cache=True, inline="always")
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
) -> None:  # pragma: no cover - compiled
    multiplier, scale, eta, limit = c
    period = addend_mid.size if has_addend else mid.size
    for start in range(0, mid.size, period):
        for j in range(period):
            i = np.uint64(start + j)
            m = mid[i]
            r = float(rad[i]) * multiplier
            if has_addend:
                m = m + addend_mid[j]
                r = r + addend_rad[j]
            r = bump((r + eta) * scale)
            if not (r < limit) or not math.isfinite(m):
                lo[i], hi[i] = -math.inf, math.inf
            else:
                lo[i], hi[i] = outward_step(m - r, m + r, fa, fast32)


@functools.cache
def _epilogue(has_addend: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
    def kernel(
        mid: np.ndarray,
        rad: np.ndarray,
        addend_mid: np.ndarray,
        addend_rad: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        lo: np.ndarray,
        hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _epilogue_loop(mid, rad, addend_mid, addend_rad, c, has_addend, fa, fast32, lo, hi)

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
) -> tuple[Array, Array]:
    """lo, hi of a product from its float64 midpoint and its radius product:
    ``r = bump(((rad multiplier + addend radius) + eta) scale)`` (an addend adds its midpoint
    to ``mid``), [down(mid - r), up(mid + r)] rounded outward onto ``fmt``, and the whole line
    where ``r`` reaches ``limit`` (g times the accumulator's overflow threshold: a partial sum
    may overflow) or ``mid`` is not finite.
    ``addend`` = (midpoint, radius term) arrays whose shape is a trailing part of mid's."""
    shape = mid.shape
    mid_flat = np.ascontiguousarray(mid).reshape(-1)
    rad_flat = np.ascontiguousarray(rad).reshape(-1)
    addend_mid, addend_rad = (np.zeros(0), np.zeros(0)) if addend is None else addend
    lo, hi = np.empty(shape), np.empty(shape)  # arrays that own their memory (see store.write)
    _epilogue(addend_mid.size > 0, fmt.name == "float32")(
        mid_flat,
        rad_flat,
        np.ascontiguousarray(addend_mid, dtype=np.float64).reshape(-1),
        np.ascontiguousarray(addend_rad, dtype=np.float64).reshape(-1),
        (multiplier, scale, eta, limit),
        format_args(fmt),
        lo.reshape(-1),
        hi.reshape(-1),
    )
    return lo, hi


@numba.njit(cache=True, inline="always")
def _gelu_erf_bounds_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    point: bool,
    erf_lo: np.ndarray,
    erf_hi: np.ndarray,
    c: tuple[float, float, float, float],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    x_min, f_min, u, floor = c
    for i in range(lo.size):
        a = lo[i]
        f_a = 0.5 * a * (1.0 + erf_lo[i])
        if point:
            b, low, high = a, f_a, f_a
        else:
            b = hi[i]
            f_b = 0.5 * b * (1.0 + erf_hi[i])
            low, high = min(f_a, f_b), max(f_a, f_b)
            if a <= x_min + 1e-9 and x_min - 1e-9 <= b:
                low = min(low, f_min)
            if f_b != f_b:
                low = high = f_b
        x_mag = max(abs(a), abs(b))
        f_mag = max(abs(low), abs(high))
        spread = x_mag * u * (9.0 + 0.5 * x_mag) + floor + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
        down_end, up_end = low - spread, high + spread
        if f_a != f_a or down_end != down_end or up_end != up_end:
            out_lo[i], out_hi[i] = -math.inf, math.inf
        else:
            out_lo[i], out_hi[i] = outward_step(down_end, up_end, fa, fast32)


@functools.cache
def _gelu_erf_bounds(point: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        erf_lo: np.ndarray,
        erf_hi: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _gelu_erf_bounds_loop(lo, hi, point, erf_lo, erf_hi, c, fa, fast32, out_lo, out_hi)

    return kernel


def gelu_erf_bounds(
    lo: Array,
    hi: Array,
    point: bool,
    minimum: tuple[float, float],
    fmt: Format,
    compute: Format,
    erf: Callable[[Array], Array],
) -> tuple[Array, Array]:
    """The enclosure of ATen's erf GELU, x (1 + erf(x / sqrt 2)) / 2, over [lo, hi] (see
    ``torch_rules._gelu``): the hull of the end values (and of the minimum ``minimum`` =
    (abscissa, value) when [lo, hi] holds its abscissa), computed with ``erf`` (a float64 array
    function within a few ULPs, e.g. SLEEF's, vectorised), widened by ATen's evaluation error in
    ``compute``, ``|x| u (9 + |x| / 2) + 4 smallest normals``, and by 2**-48 (|f| + |x|) +
    2**-1000 for the float64 evaluation here, then rounded outward onto ``fmt``; the whole line
    where an end value is NaN."""
    flats, order, _ = flat_views(lo, hi)
    erf_lo = np.ascontiguousarray(erf(flats[0] * math.sqrt(0.5)), dtype=np.float64)
    erf_hi = erf_lo if point else np.ascontiguousarray(erf(flats[1] * math.sqrt(0.5)))
    out_lo, out_hi = empty_like_order(lo.shape, order), empty_like_order(lo.shape, order)
    constants = (minimum[0], minimum[1], compute.unit_roundoff, 4 * compute.smallest_normal)
    _gelu_erf_bounds(point, fmt.name == "float32")(
        flats[0],
        flats[1],
        erf_lo,
        erf_hi,
        constants,
        format_args(fmt),
        flat(out_lo),
        flat(out_hi),
    )
    return out_lo, out_hi


@numba.njit(cache=True, error_model="numpy")
def _summary(lo: np.ndarray, hi: np.ndarray) -> tuple[float, bool]:  # pragma: no cover
    # branch-free, and the largest width kept as its bit pattern: widths are not negative, and
    # the patterns of non-negative float64 numbers order as the numbers do, so the maximum is
    # an integer one, which (unlike a float one) lets the loop be vectorised
    widest = np.int64(0)
    unbounded = False
    for i in range(lo.size):
        a, b = lo[i], hi[i]
        width = b - a
        width = 0.0 if a == b else width
        width = math.inf if width != width else width
        pattern = _bits(width)
        widest = pattern if pattern > widest else widest
        unbounded |= (a == -math.inf) & (b == math.inf)
    return _from_bits(widest), unbounded


def summary(lo: Array, hi: Array) -> tuple[float, bool]:
    """(largest radius, some element is the whole line) of [lo, hi]: the radius is half the
    largest width hi - lo (0 where lo == hi, +inf where the width overflows or is NaN)."""
    if lo is hi or lo.size == 0:
        return 0.0, False
    flats, _, _ = flat_views(lo, hi)
    widest, unbounded = _summary(flats[0], flats[1])
    return (widest / 2 if math.isfinite(widest) else math.inf), unbounded


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


@numba.njit(cache=True, inline="always")
def _sum_lower(a: float, b: float) -> float:  # pragma: no cover - compiled
    """a + b rounded down: the float64 sum when TwoSum shows it exact or below, else a step
    below it (an infinite operand makes the sum exact)."""
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    stepped = next_down(s)  # both computed, then selected: the error's sign is unpredictable
    exact = (error >= 0) | (math.isinf(s) & (error == error)) | math.isinf(a) | math.isinf(b)
    return s if exact else stepped


@numba.njit(cache=True, inline="always")
def _sum_upper(a: float, b: float) -> float:  # pragma: no cover - compiled
    s = a + b
    b_virtual = s - a
    error = (a - (s - b_virtual)) + (b - b_virtual)
    stepped = next_up(s)
    exact = (error <= 0) | (math.isinf(s) & (error == error)) | math.isinf(a) | math.isinf(b)
    return s if exact else stepped


@numba.njit(cache=True, inline="always")
def _block(size: int, a_period: int, b_period: int) -> int:  # pragma: no cover - compiled
    """The run of consecutive outputs over which neither broadcast operand wraps around: the
    smaller period, a period of 1 (a scalar, read at index 0 throughout) aside."""
    block = size
    if a_period > 1:
        block = min(block, a_period)
    if b_period > 1:
        block = min(block, b_period)
    return max(block, 1)


@numba.njit(cache=True, inline="always")
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
    block = _block(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            # unsigned indices: numba then skips its negative-index wraparound
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi = a_lo[ja], a_hi[ja]
            if negate_b:
                y_lo, y_hi = -b_hi[jb], -b_lo[jb]
            else:
                y_lo, y_hi = b_lo[jb], b_hi[jb]
            low, high = _sum_lower(x_lo, y_lo), _sum_upper(x_hi, y_hi)
            opposite = (x_hi == math.inf and y_lo == -math.inf) or (
                x_lo == -math.inf and y_hi == math.inf
            )
            if opposite or low != low or high != high:
                lo[i], hi[i] = -math.inf, math.inf
            else:
                lo[i], hi[i] = outward(low, high, fa, fast32)


@functools.cache
def _add_bounds(negate_b: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
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


@numba.njit(cache=True, inline="always")
def _shifted_exp(d: float, upward: bool) -> float:  # pragma: no cover - compiled
    """exp(d) for d <= 0 widened by its evaluation error ((|d| + 8) 2**-51 relative: the
    rounding of d and libm's exp); below d = -700 (a result under 2**-1009) 0 as a lower and
    2**-1000 as an upper end, which keeps subnormal arithmetic out of the kernel."""
    if d < -700.0:
        return 2.0**-1000 if upward else 0.0
    finite = d if math.isfinite(d) else 0.0
    if upward:
        return math.exp(d) * (1.0 + (abs(finite) + 8.0) * 2.0**-51)
    return math.exp(d) * (1.0 - (abs(finite) + 8.0) * 2.0**-51)


@numba.njit(cache=True, inline="always")
def _softmax_rows_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    c: tuple[float, float, float],
    safe: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    kappa, absolute, factor = c
    rows, n = lo.shape
    e_lo = np.empty(n)
    e_hi = np.empty(n)
    # the float64 sums below err by at most (n - 1) 2**-53 relatively
    margin = 2.0**-40 + (n + 2) * 2.0**-52
    for row in range(rows):
        top = -math.inf
        undefined = False  # some upper end is NaN
        may_be_nan = False  # some element may be +inf, or every one -inf
        every_lower_neginf = True
        every_upper_neginf = True
        for j in range(n):
            h = hi[row, j]
            if h != h:
                undefined = True
            elif h > top:
                top = h
            if h == math.inf:
                may_be_nan = True
            if lo[row, j] != -math.inf:
                every_lower_neginf = False
            if h != -math.inf:
                every_upper_neginf = False
        if undefined or not math.isfinite(top):
            top = 0.0
        may_be_nan = may_be_nan or every_lower_neginf
        total_hi = 0.0
        total_lo = 0.0
        for j in range(n):
            e_lo[j] = _shifted_exp(lo[row, j] - top, False)
            e_hi[j] = _shifted_exp(hi[row, j] - top, True)
            total_hi += e_hi[j]
            total_lo += e_lo[j]
        total_hi = total_hi * (1.0 + margin)
        total_lo = max(total_lo * (1.0 - margin), 0.0)
        for j in range(n):
            if safe and every_upper_neginf:
                out_lo[row, j], out_hi[row, j] = 0.0, 0.0
                continue
            if may_be_nan:
                out_lo[row, j], out_hi[row, j] = -math.inf, math.inf
                continue
            low = e_lo[j] / (e_lo[j] + (total_hi - e_hi[j]) * (1.0 + 2.0**-40))
            high = e_hi[j] / (e_hi[j] + max(total_lo - e_lo[j], 0.0) * (1.0 - 2.0**-40))
            down_end, up_end = outward_step(
                (low * (1.0 - kappa) - absolute) / factor,
                min(high, 1.0) * (1.0 + kappa) * factor + absolute * factor,
                fa,
                fast32,
            )
            # rounding is monotone and 0 lies on every grid: clipping after it is the same
            out_lo[row, j], out_hi[row, j] = max(down_end, 0.0), up_end


@functools.cache
def _softmax_rows(safe: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        c: tuple[float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _softmax_rows_loop(lo, hi, c, safe, fa, fast32, out_lo, out_hi)

    return kernel


def softmax_bounds(
    lo: Array,
    hi: Array,
    axis: int,
    kappa: float,
    absolute: float,
    factor: float,
    safe: bool,
    fmt: Format,
) -> tuple[Array, Array]:
    """The softmax enclosure of ``torch_rules._softmax`` along ``axis``, one compiled pass per
    row: e = exp(x - top) at both ends (top the row's largest upper end), the exact range
    [e_lo / (e_lo + S_hi - e_hi), e_hi / (e_hi + S_lo - e_lo)], then
    [(low (1 - kappa) - absolute) / factor, high (1 + kappa) factor + absolute factor] stepped
    outward, clipped below at 0 and rounded onto ``fmt``; the whole line in rows that may be NaN
    (an upper end +inf, or every lower end -inf), and 0 in rows of -inf when ``safe``."""
    moved_lo, moved_hi = np.moveaxis(lo, axis, -1), np.moveaxis(hi, axis, -1)
    shape = moved_lo.shape
    n = shape[-1] if shape else 1
    rows_lo = np.ascontiguousarray(moved_lo, dtype=np.float64).reshape(-1, n)
    rows_hi = rows_lo if hi is lo else np.ascontiguousarray(moved_hi, dtype=np.float64)
    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        _softmax_rows(safe, fmt.name == "float32")(
            rows_lo,
            rows_hi.reshape(-1, n),
            (kappa, absolute, factor),
            format_args(fmt),
            out_lo.reshape(-1, n),
            out_hi.reshape(-1, n),
        )
    if axis % max(lo.ndim, 1) == lo.ndim - 1 or lo.ndim == 0:
        return out_lo, out_hi
    return np.moveaxis(out_lo, -1, axis), np.moveaxis(out_hi, -1, axis)


@numba.njit(cache=True, inline="always")
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
    block = _block(lo.size, a_period, b_period)
    a_step, b_step = int(a_period > 1), int(b_period > 1)
    for start in range(0, lo.size, block):
        a0, b0 = start % a_period, start % b_period
        for j in range(block):
            # unsigned indices: numba then skips its negative-index wraparound
            i, ja, jb = np.uint64(start + j), np.uint64(a0 + j * a_step), np.uint64(b0 + j * b_step)
            x_lo, x_hi = a_lo[ja], a_hi[ja]
            y_lo, y_hi = b_lo[jb], b_hi[jb]
            # all four end products, also for a point (whose ends are equal: the same hull)
            p1, p2, p3, p4 = x_lo * y_lo, x_lo * y_hi, x_hi * y_lo, x_hi * y_hi
            low = min(min(p1, p2), min(p3, p4))
            high = max(max(p1, p2), max(p3, p4))
            undefined = p1 != p1 or p2 != p2 or p3 != p3 or p4 != p4
            zero_times_infinity = (
                x_lo <= 0 <= x_hi and (math.isinf(y_lo) or math.isinf(y_hi))
            ) or (y_lo <= 0 <= y_hi and (math.isinf(x_lo) or math.isinf(x_hi)))
            if undefined or zero_times_infinity:
                lo[i], hi[i] = -math.inf, math.inf
                continue
            if step:
                lo[i], hi[i] = outward_step(low, high, fa, fast32)
            else:
                lo[i], hi[i] = outward(low, high, fa, fast32)


@functools.cache
def _mul_bounds(step: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
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


@numba.njit(cache=True, inline="always")
def _moments_rows_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    c: tuple[float, float, float, float, float, float, float, float, float],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    mean_lo: np.ndarray,
    mean_hi: np.ndarray,
    var_lo: np.ndarray,
    var_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    count, g, above, below, underflow, widening, one_growth, divisor, limit = c
    rows, n = lo.shape
    for row in range(rows):
        s_lo = 0.0
        s_hi = 0.0
        s_abs = 0.0
        s_sq = 0.0
        for j in range(n):
            a, b = lo[row, j], hi[row, j]
            m = max(abs(a), abs(b))
            s_lo += a
            s_hi += b
            s_abs += m
            s_sq += m * m
        magnitude = next_up(s_abs * above)
        energy = next_up(next_up(s_sq * above) + underflow)
        spread = 0.0 if magnitude == 0 else next_up(magnitude * g)
        m_lo = next_down(next_down(s_lo - spread) / count)
        m_hi = next_up(next_up(s_hi + spread) / count)
        overflow = (energy != 0 and not next_up(4.0 * energy * one_growth) < limit) or (
            magnitude != 0 and not next_up(magnitude * one_growth) < limit
        )
        if overflow or not (math.isfinite(m_lo) and math.isfinite(m_hi)):
            mean_lo[row], mean_hi[row] = -math.inf, math.inf
            var_lo[row], var_hi[row] = -math.inf, math.inf
            continue
        q_lo = 0.0
        q_hi = 0.0
        for j in range(n):
            # rounded to nearest: the signs are exact, the magnitudes within 2**-53 relatively
            d_lo = lo[row, j] - m_hi
            d_hi = hi[row, j] - m_lo
            large = max(abs(d_lo), abs(d_hi))
            small = 0.0 if d_lo < 0.0 < d_hi else min(abs(d_lo), abs(d_hi))
            q_lo += small * small
            q_hi += large * large
        allowance = next_up(energy * widening)
        v_lo = max(next_down(next_down(next_down(q_lo * below) - underflow) - allowance), 0.0)
        v_hi = next_up(next_up(next_up(q_hi * above) + underflow) + allowance)
        if divisor > 0:
            v_lo, v_hi = next_down(v_lo / divisor), next_up(v_hi / divisor)
        else:
            v_lo, v_hi = -math.inf, math.inf
        mean_lo[row], mean_hi[row] = outward(m_lo, m_hi, fa, fast32)
        var_lo[row], var_hi[row] = outward(v_lo, v_hi, fa, fast32)


@functools.cache
def _moments_rows(fast32: bool) -> Callable[..., None]:
    """The compiled kernel for this switch (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        c: tuple[float, float, float, float, float, float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        mean_lo: np.ndarray,
        mean_hi: np.ndarray,
        var_lo: np.ndarray,
        var_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _moments_rows_loop(lo, hi, c, fa, fast32, mean_lo, mean_hi, var_lo, var_hi)

    return kernel


def moments_rows(
    lo: Array, hi: Array, correction: float, fmt: Format
) -> tuple[Array, Array, Array, Array]:
    """(mean lo, mean hi, variance lo, variance hi) of each row of [lo, hi] (2-d, C order) as
    computed in ``fmt`` by any of the algorithms PyTorch uses (two-pass, Welford), dividing
    the sum of squared deviations by n - ``correction``; one compiled kernel, two passes per row.

    float64 sums of n non-negative terms, each term rounded to nearest (or exact), err by at
    most (n + 1) 2**-53 relatively plus 2**-1075 per term for underflow: the factors
    1 -+ (n + 8) 2**-52 and n 2**-1074 cover them, and the 2**-53 relative error of each
    deviation x - mean (rounded to nearest, sign exact) besides. With S = sum max(|lo|, |hi|)
    and E = sum max(|lo|, |hi|)^2 so bounded above:

    * mean: the exact row sum's enclosure widened by (gamma^F_{n-1} + 2 gamma^{64}_{n+1}) S
      (the sum's rounding in ``fmt`` and its evaluation in float64), divided by n;
    * variance: sum (x - mean)^2 over the box (each deviation interval's smallest and largest
      square), widened by 2 gamma^F_{2n+2} E (Chan, Golub and LeVeque 1983: the textbook
      algorithm's rounding bound, which dominates Welford's and two-pass's), clipped below at
      0, divided by n - correction (the whole line when that is not positive);
    * both are the whole line in rows where 4 E (as (x - mean)^2 <= 4 max x^2) or S, times
      1 + 2 gamma^F_{2n+2}, may reach ``fmt``'s largest finite number (a rounded partial sum
      may overflow, then give NaN), or where the mean is not finite;
    * every end is stepped outward, then rounded outward onto ``fmt``."""
    rows, n = lo.shape
    u = fmt.unit_roundoff
    # 1 +- (n + 8) 2**-52 are exact in float64 for any n < 2**50
    above, below = 1.0 + (n + 8) * 2.0**-52, 1.0 - (n + 8) * 2.0**-52
    widening = 2 * gamma(2 * n + 2, u)
    constants = (
        float(n),
        math.nextafter(gamma(n - 1, u) + 2 * gamma(n + 1, 2.0**-53), math.inf),
        above,
        below,
        n * 2.0**-1074,
        widening,
        math.nextafter(1.0 + widening, math.inf),
        max(n - correction, 0.0),
        fmt.max_finite,
    )
    ends = [np.empty(rows) for _ in range(4)]
    if rows:
        rows_lo = np.ascontiguousarray(lo, dtype=np.float64)
        _moments_rows(fmt.name == "float32")(
            rows_lo,
            rows_lo if hi is lo else np.ascontiguousarray(hi, dtype=np.float64),
            constants,
            format_args(fmt),
            *ends,
        )
    return ends[0], ends[1], ends[2], ends[3]


@numba.njit(cache=True, inline="always")
def _interval_product(
    a_lo: float, a_hi: float, b_lo: float, b_hi: float
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """(lo, hi, whole line) of [a_lo, a_hi] [b_lo, b_hi] in float64, stepped outward (as
    :func:`mul_bounds` with ``step``)."""
    p1, p2, p3, p4 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    undefined = p1 != p1 or p2 != p2 or p3 != p3 or p4 != p4
    zero_times_infinity = (a_lo <= 0 <= a_hi and (math.isinf(b_lo) or math.isinf(b_hi))) or (
        b_lo <= 0 <= b_hi and (math.isinf(a_lo) or math.isinf(a_hi))
    )
    low = next_down(min(min(p1, p2), min(p3, p4)))
    high = next_up(max(max(p1, p2), max(p3, p4)))
    return low, high, undefined or zero_times_infinity


@numba.njit(cache=True, inline="always")
def _interval_sum(
    a_lo: float, a_hi: float, b_lo: float, b_hi: float
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """(lo, hi, whole line) of [a_lo, a_hi] + [b_lo, b_hi] in float64 (as :func:`add_bounds`)."""
    low, high = _sum_lower(a_lo, b_lo), _sum_upper(a_hi, b_hi)
    opposite = (a_hi == math.inf and b_lo == -math.inf) or (a_lo == -math.inf and b_hi == math.inf)
    return low, high, opposite or low != low or high != high


@numba.njit(cache=True, inline="always")
def _underflow(tiny_scaled: float, factor: float) -> float:  # pragma: no cover - compiled
    """max(tiny factor, 2**-1022) from tiny 2**1000 (exact scalings by powers of two: no
    subnormal operand or result, whose arithmetic costs microcode assists)."""
    return max(tiny_scaled * factor, 2.0**-22) * 2.0**-1000


@numba.njit(cache=True, inline="always")
def _normalise_rows_loop(
    x_lo: np.ndarray,
    x_hi: np.ndarray,
    mean_lo: np.ndarray,
    mean_hi: np.ndarray,
    rstd_lo: np.ndarray,
    rstd_hi: np.ndarray,
    w_lo: np.ndarray,
    w_hi: np.ndarray,
    b_lo: np.ndarray,
    b_hi: np.ndarray,
    c: tuple[float, float, float, float],
    has_weight: bool,
    has_bias: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    u, tiny_scaled, k_scaled, k_bias = c
    rows, n = x_lo.shape
    for row in range(rows):
        m_lo, m_hi, s_lo, s_hi = mean_lo[row], mean_hi[row], rstd_lo[row], rstd_hi[row]
        m_mag = max(abs(m_lo), abs(m_hi))
        s_mag = max(abs(s_lo), abs(s_hi))
        if abs(m_lo) < math.inf and abs(m_hi) < math.inf and 0 < s_lo <= s_hi < math.inf:
            # rounded to nearest, branch-free: the error is covered by the larger allowance;
            # the row takes the exact path below when anything is not finite
            finite = True
            for j in range(n):
                a_lo, a_hi = x_lo[row, j], x_hi[row, j]
                d_lo, d_hi = a_lo - m_hi, a_hi - m_lo
                low = min(d_lo * s_lo, d_lo * s_hi)
                high = max(d_hi * s_lo, d_hi * s_hi)
                w_mag = 1.0
                if has_weight:
                    wl, wh = w_lo[j], w_hi[j]
                    p1, p2, p3, p4 = low * wl, low * wh, high * wl, high * wh
                    low = min(min(p1, p2), min(p3, p4))
                    high = max(max(p1, p2), max(p3, p4))
                    w_mag = max(abs(wl), abs(wh))
                a_mag = max(abs(a_lo), abs(a_hi))
                allowance = k_scaled * (a_mag + m_mag) * s_hi * w_mag
                if has_bias:
                    low, high = low + b_lo[j], high + b_hi[j]
                    allowance = allowance + k_bias * max(abs(b_lo[j]), abs(b_hi[j]))
                absolute = _underflow(tiny_scaled, 1.0 + a_mag + m_mag + w_mag)
                allowance = next_up((allowance + absolute) * (1.0 + 2.0**-40))
                finite &= allowance < math.inf and abs(low) < math.inf and abs(high) < math.inf
                out_lo[row, j], out_hi[row, j] = low - allowance, high + allowance
            if finite:
                for j in range(n):
                    out_lo[row, j], out_hi[row, j] = outward_step(
                        out_lo[row, j], out_hi[row, j], fa, fast32
                    )
                continue
        for j in range(n):
            a_lo, a_hi = x_lo[row, j], x_hi[row, j]
            low, high, whole = _interval_sum(a_lo, a_hi, -m_hi, -m_lo)
            low, high, undefined = _interval_product(low, high, s_lo, s_hi)
            whole = whole or undefined
            w_mag = 1.0
            if has_weight:
                low, high, undefined = _interval_product(low, high, w_lo[j], w_hi[j])
                whole = whole or undefined
                w_mag = max(abs(w_lo[j]), abs(w_hi[j]))
            a_mag = max(abs(a_lo), abs(a_hi))
            allowance = 6.0 * u * (a_mag + m_mag) * s_mag * w_mag
            if has_bias:
                low, high, undefined = _interval_sum(low, high, b_lo[j], b_hi[j])
                whole = whole or undefined
                allowance = allowance + 2.0 * u * max(abs(b_lo[j]), abs(b_hi[j]))
            absolute = _underflow(tiny_scaled, 1.0 + a_mag + m_mag + w_mag)
            allowance = next_up((allowance + absolute) * (1.0 + 2.0**-40))
            if whole:
                out_lo[row, j], out_hi[row, j] = -math.inf, math.inf
            else:
                out_lo[row, j], out_hi[row, j] = outward_step(
                    low - allowance, high + allowance, fa, fast32
                )


@functools.cache
def _normalise_rows(has_weight: bool, has_bias: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @numba.njit(cache=True, error_model="numpy")
    def kernel(
        x_lo: np.ndarray,
        x_hi: np.ndarray,
        mean_lo: np.ndarray,
        mean_hi: np.ndarray,
        rstd_lo: np.ndarray,
        rstd_hi: np.ndarray,
        w_lo: np.ndarray,
        w_hi: np.ndarray,
        b_lo: np.ndarray,
        b_hi: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _normalise_rows_loop(
            x_lo,
            x_hi,
            mean_lo,
            mean_hi,
            rstd_lo,
            rstd_hi,
            w_lo,
            w_hi,
            b_lo,
            b_hi,
            c,
            has_weight,
            has_bias,
            fa,
            fast32,
            out_lo,
            out_hi,
        )

    return kernel


def normalise_rows(
    x: tuple[Array, Array],
    n: int,
    mean: tuple[Array, Array],
    rstd: tuple[Array, Array],
    weight: tuple[Array, Array] | None,
    bias: tuple[Array, Array] | None,
    unit_roundoff: float,
    tiny: float,
    fmt: Format,
) -> tuple[Array, Array]:
    """``torch_rules._affine_normalise`` for rows: x (ends as a pair) seen as rows of ``n``
    elements in C order, mean and rstd one interval per row, weight and bias one per column: in
    float64 interval arithmetic ((x - mean) rstd) w + b, each step as :func:`add_bounds` /
    :func:`mul_bounds`, widened by next_up((6 u (|x| + |mean|) |rstd| |w| + 2 u |b|
    + tiny (1 + |x| + |mean| + |w|)) (1 + 2**-40)), stepped outward and rounded onto ``fmt``;
    the whole line once any step may be NaN. The last term is underflow: an underflowing
    product errs by half a subnormal absolutely, and ATen's evaluation orders multiply such an
    error by |w|, |x| or |mean| afterwards (tiny is a few subnormals of the compute format; the
    term is evaluated scaled by 2**1000 and taken at least 2**-1022, which keeps the arithmetic
    normal).

    Where the row's mean and rstd are finite, rstd positive, and every quantity of an element
    finite, the element takes a faster path: the same expression with each float64 operation
    rounded to nearest (no step), the four roundings (at most 2**-53 (|x| + |mean|) |rstd| |w|
    each, and 2**-53 |b| for the bias' sum) covered by an allowance grown to
    (6 u + 5 2**-53) (|x| + |mean|) |rstd| |w| + (2 u + 2**-52) |b|; its products' underflow,
    2**-1075 (1 + |w|), is far inside the tiny term."""
    shape = x[0].shape

    def as_flat(v: Array) -> np.ndarray:
        return np.ascontiguousarray(v, dtype=np.float64).reshape(-1)

    empty = np.zeros(0)
    w_lo, w_hi = (as_flat(weight[0]), as_flat(weight[1])) if weight is not None else (empty, empty)
    b_lo, b_hi = (as_flat(bias[0]), as_flat(bias[1])) if bias is not None else (empty, empty)
    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        _normalise_rows(w_lo.size > 0, b_lo.size > 0, fmt.name == "float32")(
            as_flat(x[0]).reshape(-1, n),
            as_flat(x[1]).reshape(-1, n),
            as_flat(mean[0]),
            as_flat(mean[1]),
            as_flat(rstd[0]),
            as_flat(rstd[1]),
            w_lo,
            w_hi,
            b_lo,
            b_hi,
            (
                unit_roundoff,
                tiny * 2.0**1000,
                6 * unit_roundoff + 5 * 2.0**-53,
                2 * unit_roundoff + 2.0**-52,
            ),
            format_args(fmt),
            out_lo.reshape(-1, n),
            out_hi.reshape(-1, n),
        )
    return out_lo, out_hi
