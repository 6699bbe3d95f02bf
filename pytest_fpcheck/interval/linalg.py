"""Sums and matrix products of intervals (RENDER Algorithm 1, in midpoint-radius form).

RENDER's Algorithm 1 loops over output elements. Here the same bound costs a few float64 BLAS
calls (Rump, "Fast and parallel interval arithmetic", BIT 39(3), 1999, section 2): with
A = [mA - rA, mA + rA] and B likewise, and a relative rounding factor g for the accumulation
(gamma_k, or a revealed order's factor),

    |fl(A B) - mA mB| <= |mA| rB + rA |mB| + rA rB + g (|mA| + rA)(|mB| + rB) + k eta

which is evaluated as ``|mA| ((1+g) rB + g |mB|) + rA ((1+g)(|mB| + rB))`` (two products), one
product when either side is a point, and ``g |mA| |mB|`` for two points. ``eta`` is the
accumulation format's smallest subnormal, one per product (underflow of a product is not
relative). The float64 evaluation itself is covered: g is increased by 2 gamma^{64}_{k+2} (the
error of computing mA mB), the radius is scaled by 1 + 2 gamma^{64}_{k+8} (its own evaluation),
and every endpoint is stepped outward.

Speed (issue 3's time budget): for accumulation formats no finer than float32 the radius
products run in float32 BLAS on operands rounded upward (at least float32's smallest normal),
their result scaled by 1 / (1 - gamma^{32}_{k+2}) plus (2k + 4) 2**-126 for underflow (even
flushed): an upper bound of the float64 radius, 1 + O(k 2**-24) wider, at half a float64
product's cost. Where one operand is a point held exactly in float32 and the other's radii
dominate, the midpoint product runs in float32 too, its error joined to the radius
(:func:`_float32_midpoint`). Operand preparation and the epilogue (addend, overflow test, outward rounding
onto the result format) are single compiled passes (:mod:`.kernels`).

Sums are the same with B a column of ones: the exact sum of the endpoint sums, widened by
g * sum(max(|lo|, |hi|)); the three sums, and the least and most ends that keep a sum of
same-signed terms on its side of 0, in one compiled pass (:func:`.kernels.sum_ends`).

These bounds assume no partial sum overflows the accumulation format. Every exact partial sum
is at most S = sum |a||b| (or sum max(|lo|, |hi|)) in magnitude, and every rounded one at most
S (1 + g); rad >= g S, so wherever S (1 + g) may reach the accumulator's largest finite number
an overflow to +-inf, and then NaN, is possible: such elements get the whole line
[-inf, +inf].
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..formats import FORMATS, Format
from .core import Interval, gamma
from .kernels import matmul_epilogue, radius_share, split_float32, split_operand, sum_ends
from .rounding import down, up

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["matmul", "may_overflow", "reduce_sum"]

_U64 = 2.0**-53
_U32 = 2.0**-24
_F64_FORMAT = FORMATS["float64"]
_F32_FORMAT = FORMATS["float32"]


def _round_up(value: float) -> float:
    return math.nextafter(value, math.inf)


def _finish(mid: Array, rad: Array, fmt: Format) -> Interval:
    with np.errstate(invalid="ignore", over="ignore"):
        rad = np.where(np.isnan(rad), np.inf, rad)
        bad_mid = ~np.isfinite(mid)
        lo = np.where(bad_mid, -np.inf, down(mid - rad))
        hi = np.where(bad_mid, np.inf, up(mid + rad))
    return Interval(lo, hi).to_format(fmt)


def may_overflow(magnitude: Array, factor: Array | float, limit: float) -> NDArray[np.bool_]:
    """Where a sum whose terms' magnitudes add up to ``magnitude`` (S) may overflow: its rounded
    partial sums are at most S (1 + ``factor``) in magnitude, and where that may reach ``limit``
    (the accumulator's largest finite number) an infinity, then NaN, is possible. Never where S
    is 0 (an infinite factor leaves a sum of zeros exact)."""
    with np.errstate(invalid="ignore", over="ignore"):
        result: NDArray[np.bool_] = (magnitude != 0) & ~(
            up(magnitude * (1 + np.asarray(factor))) < limit
        )
    return result


def _overflow_to_everything(interval: Interval, may_overflow: NDArray[np.bool_]) -> Interval:
    if not may_overflow.any():
        return interval
    return Interval(
        np.where(may_overflow, -np.inf, interval.lo), np.where(may_overflow, np.inf, interval.hi)
    )


def reduce_sum(
    a: Interval,
    axes: tuple[int, ...],
    keepdims: bool,
    fmt: Format,
    factor: Callable[[int], float],
    *,
    accumulate: Format | None = None,
) -> Interval:
    """Sum over ``axes``; ``factor(n)`` is the relative error factor of an n-term sum carried
    out in ``accumulate`` (whose overflow is checked; None: no finite-range check). A sum
    whose terms are all at least 0 is at least 0, computed in any order (rounding is monotone
    and keeps 0), and one of terms all at most 0 at most 0: the error allowance never takes an
    end across 0 there (:func:`_keep_signs`)."""
    n = int(np.prod([a.shape[axis] for axis in axes])) if axes else 1
    g = factor(n) + 2 * gamma(n + 1, _U64)
    with np.errstate(invalid="ignore", over="ignore"):
        lo_sum, hi_sum, size, least, most = sum_ends(a.lo, a.hi, axes, keepdims)
        magnitude = up(size * (1 + 2 * gamma(n, _U64)))
        spread = np.where(magnitude == 0, 0.0, up(magnitude * g))
        if a.is_point:
            result = _finish(lo_sum, spread, _F64_FORMAT)
        else:
            lo = np.where(np.isnan(lo_sum), -np.inf, down(lo_sum - spread))
            hi = np.where(np.isnan(hi_sum), np.inf, up(hi_sum + spread))
            result = Interval(lo, hi)
        result = _keep_signs(result, least, most)
    if accumulate is not None:
        result = _overflow_to_everything(result, may_overflow(magnitude, g, accumulate.max_finite))
    return result.to_format(fmt)


def _keep_signs(result: Interval, least: Array, most: Array) -> Interval:
    """``result`` (a sum) with its lower ends raised to 0 where every term's lower end is at
    least 0 (``least``, the least of them, NaN where one is), its upper ends lowered to 0 where
    every upper end is at most 0 (``most``; a NaN compares false: left as it is)."""
    lo = np.where((least >= 0) & (result.lo < 0), 0.0, result.lo)
    hi = np.where((most <= 0) & (result.hi > 0), 0.0, result.hi)
    return Interval(lo, hi)


def _addend_terms(addend: Interval, g: float, shape: tuple[int, ...]) -> tuple[Array, Array]:
    """(midpoint, g |mC| + (1 + g) rC) of an addend, laid out as a trailing block of ``shape``
    (broadcast and copied when it is not one)."""
    with np.errstate(invalid="ignore", over="ignore"):
        if addend.is_point:
            m_c = addend.lo
            r_c = g * np.abs(m_c)
        else:
            m_c, rad_c = addend.mid_rad()
            r_c = g * np.abs(m_c) + (1 + g) * rad_c
    dims = list(m_c.shape)
    while dims and dims[0] == 1:
        dims.pop(0)
    if len(dims) <= len(shape) and tuple(dims) == shape[len(shape) - len(dims) :]:
        return m_c, r_c
    return np.broadcast_to(m_c, shape).copy(), np.broadcast_to(r_c, shape).copy()


#: the float32 midpoint product is taken where the interval operand's radii, summed, are at
#: least this many times the error it adds (its share of the radius then at most 1/32)
_DOMINANCE = 32.0


def _float32_midpoint(
    x: Interval, other: np.ndarray | None, magnitudes: np.ndarray | None, g: float, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """(float32 midpoint, radius operand, ``other``, underflow allowance) of the interval
    operand ``x`` of a product whose other operand is a point held exactly in float32
    (``other``, with no subnormal number, and its ``magnitudes``), when the midpoint product
    may run in float32 BLAS at half a float64 product's cost; None where it would loosen the
    bound.

    With mA rounded to the nearest float32 a (|a - mA| <= 2**-24 |mA| for |mA| >= 2**-100,
    within float32's normal range) and the k-term float32 product of a by the point operand
    B erring by at most gamma^{32}_k |a| |B| plus 2**-126 per operation for underflow, even
    flushed (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1,
    any order, with or without fused multiply-adds), the computed midpoint differs from mA B by
    at most e |mA| |B| + (2k + 4) 2**-126, e = gamma^{32}_k (1 + 2**-24) + 2**-24: e joins the
    coefficient g of |mA| in the radius operand, the absolute term the allowance. Taken only
    where the operand's radii, summed, are at least :data:`_DOMINANCE` times e times its
    midpoints' magnitudes, summed (estimated on a sample, :func:`.kernels.radius_share`;
    else the float64 product keeps the bound tight: radii of round-off size), and no midpoint
    is non-zero below 2**-100 (checked on every element). A midpoint
    beyond float32's range becomes infinite and its outputs the whole line (sound)."""
    if other is None or magnitudes is None:
        return None
    e = _round_up(gamma(k, _U32) * (1 + _U32) + _U32)
    if not radius_share(x.lo, x.hi) * (1 + g) >= _DOMINANCE * e:
        return None
    split = split_float32(x.lo, x.hi, (1 + g, _round_up(g + e)))
    if split is None:
        return None
    return split[0], split[1], other, _round_up((2 * k + 4) * _F32_FORMAT.smallest_normal)


#: an operand's float32 midpoint and its one or two radius operands (:func:`split_float32`)
_Split = tuple[np.ndarray, np.ndarray, np.ndarray | None]


def _float32_midpoints(
    a: Interval, b: Interval, g: float, k: int
) -> tuple[_Split, _Split, float] | None:
    """((a's float32 midpoint, |mA|, rA), (b's float32 midpoint, its two radius operands),
    underflow allowance) of a product of two interval operands whose midpoint product may run
    in float32 BLAS, at half a float64 product's cost; None where it would loosen the bound.

    With mA and mB rounded to the nearest float32 a and b (each within 2**-24 of its value
    relatively, both at least 2**-100 in magnitude where not 0: float32's normal range), the
    k-term float32 product a b errs from mA mB by at most e |mA| |mB| plus (2k + 4) 2**-126 for
    underflow, even flushed: its own rounding gamma^{32}_k |a| |b| <= gamma^{32}_k (1 + 2**-24)^2
    |mA| |mB| (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1,
    any order, with or without fused multiply-adds), and the operands' roundings
    |a b - mA mB| <= (2 2**-24 + 2**-48) |mA| |mB| termwise. e joins the coefficient g of |mB|
    in the radius operand that |mA| multiplies, the absolute term the allowance. Taken only
    where the operands' radii, summed against their midpoints' magnitudes
    (:func:`.kernels.radius_share`, estimated on a sample) and added, are at least
    :data:`_DOMINANCE` times e (the float32 midpoint's error then at most 1/32 of the radius);
    else the float64 product keeps the bound tight. A midpoint beyond float32's range becomes
    infinite and its outputs the whole line (sound)."""
    u = _U32
    e = _round_up(_round_up(gamma(k, u) * (1 + u) ** 2) + 2 * u + u * u)
    share = radius_share(a.lo, a.hi) + radius_share(b.lo, b.hi)
    if not share * (1 + g) >= _DOMINANCE * e:
        return None
    first = split_float32(a.lo, a.hi, (0.0, 1.0), (1.0, 0.0))
    if first is None:
        return None
    one_g = 1 + g
    second = split_float32(b.lo, b.hi, (one_g, _round_up(g + e)), (one_g, one_g))
    if second is None:
        return None
    return first, second, _round_up((2 * k + 4) * _F32_FORMAT.smallest_normal)


def matmul(
    a: Interval,
    b: Interval,
    fmt: Format,
    *,
    factor: float,
    accumulate: Format,
    product: Callable[[Array, Array], Array] = np.matmul,
    k: int,
    addend: Interval | None = None,
    magnitudes: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
    values: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
    nearest: bool = False,
) -> Interval:
    """The enclosure of ``addend + product(A, B)`` (``np.matmul`` by default; any bilinear map
    with non-negative coefficients works, e.g. a convolution), where each output sums ``k``
    products (and the addend, if any) with relative rounding factor ``factor``, then rounds to
    ``fmt``. The addend C = [mC - rC, mC + rC] adds mC to the midpoint and rC (1 + g) + g |mC|
    to the radius.

    For an accumulation format no finer than float32 and ``np.matmul``, the radius products
    (non-negative operands) run in float32 on operands rounded upward, and their result is
    scaled by 1 / (1 - gamma^{32}_{k+2}) plus an underflow allowance: an upper bound of the
    float64 radius at half a float64 product's cost. The midpoint product is float64 but
    where ``values`` allows float32, or where both operands are intervals whose radii dominate
    (:func:`_float32_midpoints`). ``magnitudes`` may give, for a point operand, a float32 array at least as large as its
    absolute value and at least float32's smallest normal (e.g. computed by the backend from a
    float32 or bfloat16 tensor): it then stands for that operand in the radius product.
    ``values`` may give, for a point operand, its values as a float32 array (exactly, with no
    subnormal number, which a float32 product may flush): where the other operand is an
    interval whose radii dominate, the midpoint product then runs in float32 too
    (:func:`_float32_midpoint`). ``nearest``: the run rounds the accumulated result (which the
    bound encloses) to nearest onto ``fmt`` (:meth:`.core.Interval.to_nearest`); else it is
    rounded outward."""
    g = factor + 2 * gamma(k + 2, _U64)
    if k == 0:
        zeros = np.zeros(product(a.lo, b.lo).shape)
        return Interval.point(zeros)
    if math.isinf(g):
        shape = product(a.lo, b.lo).shape
        return Interval(np.full(shape, -np.inf), np.full(shape, np.inf))
    narrow = product is np.matmul and accumulate.precision <= _F32_FORMAT.precision
    # the radius' float64 evaluation (operands, products, addend, scaling): a few roundings
    scale = 1 + 2 * gamma(k + 8, _U64)
    eta = max(k * accumulate.smallest_subnormal, _F64_FORMAT.smallest_normal)
    if narrow:
        # a k-term float32 sum of non-negative products (two of them added) errs by at most
        # gamma_{k+1} relatively, plus underflow: 2**-126 per operation even when flushed
        scale = _round_up(scale / math.nextafter(1 - gamma(k + 2, _U32), 0.0))
        eta = _round_up(eta + (2 * k + 4) * _F32_FORMAT.smallest_normal)
    one_g = 1 + g

    def point_magnitude(x: Interval, given: np.ndarray | None) -> tuple[Array, np.ndarray]:
        if narrow and given is not None:
            return x.lo, given
        mid, magnitude, _ = split_operand(x.lo, x.lo, True, (0.0, 1.0), None, narrow)
        return mid, magnitude

    with np.errstate(invalid="ignore", over="ignore"):
        multiplier = 1.0
        if a.is_point and b.is_point:
            m_a, abs_a = point_magnitude(a, magnitudes[0])
            m_b, abs_b = point_magnitude(b, magnitudes[1])
            rad = product(abs_a, abs_b)
            multiplier = g
        elif b.is_point:
            split = _float32_midpoint(a, values[1], magnitudes[1], g, k) if narrow else None
            if split is not None:
                m_a, w_a, m_b, extra = split
                eta = _round_up(eta + extra)
            else:
                m_a, w_a, _ = split_operand(a.lo, a.hi, False, (one_g, g), None, narrow)
                m_b = b.lo
            abs_b = point_magnitude(b, magnitudes[1])[1]
            rad = product(w_a, abs_b)
        elif a.is_point:
            split = _float32_midpoint(b, values[0], magnitudes[0], g, k) if narrow else None
            if split is not None:
                m_b, w_b, m_a, extra = split
                eta = _round_up(eta + extra)
            else:
                m_b, w_b, _ = split_operand(b.lo, b.hi, False, (one_g, g), None, narrow)
                m_a = a.lo
            abs_a = point_magnitude(a, magnitudes[0])[1]
            rad = product(abs_a, w_b)
        else:
            both = _float32_midpoints(a, b, g, k) if narrow else None
            if both is not None:
                (m_a, abs_a, r_a), (m_b, w_b, v_b), extra = both
                eta = _round_up(eta + extra)
            else:
                m_a, abs_a, r_a = split_operand(a.lo, a.hi, False, (0.0, 1.0), (1.0, 0.0), narrow)
                m_b, w_b, v_b = split_operand(b.lo, b.hi, False, (one_g, g), (one_g, one_g), narrow)
            assert r_a is not None
            assert v_b is not None
            rad = product(abs_a, w_b)
            rad += product(r_a, v_b)
        mid = product(m_a, m_b)
    terms = None if addend is None else _addend_terms(addend, g, mid.shape)
    # r < limit implies S (1 + g) < the accumulator's largest finite number, S = r / g the sum
    # of magnitudes: every rounded partial sum, at most S (1 + g), is then finite
    limit = math.nextafter(accumulate.max_finite * (1 - 2**-40) * g / (1 + g) * (1 - 2**-50), 0.0)
    lo, hi, summary = matmul_epilogue(
        mid, rad, terms, multiplier, scale, eta, limit, fmt, nearest=nearest
    )
    return Interval(lo, hi, summary=summary)
