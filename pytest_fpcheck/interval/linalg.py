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
error of computing mA mB and of the radius products), and every endpoint is stepped outward.

Sums are the same with B a column of ones: the exact sum of the endpoint sums, widened by
g * sum(max(|lo|, |hi|)).

These bounds assume no partial sum overflows the accumulation format. Every partial sum is at
most S = sum |a||b| (or sum max(|lo|, |hi|)), and rad >= g S, so wherever rad / g (or S) reaches
the accumulator's largest finite number an overflow to +-inf, and then NaN, is possible: such
elements get the whole line [-inf, +inf].
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..formats import FORMATS, Format
from .core import Interval, gamma
from .rounding import down, up

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["matmul", "reduce_sum"]

_U64 = 2.0**-53
_F64_FORMAT = FORMATS["float64"]


def _finish(mid: Array, rad: Array, fmt: Format) -> Interval:
    with np.errstate(invalid="ignore", over="ignore"):
        rad = np.where(np.isnan(rad), np.inf, rad)
        bad_mid = ~np.isfinite(mid)
        lo = np.where(bad_mid, -np.inf, down(mid - rad))
        hi = np.where(bad_mid, np.inf, up(mid + rad))
    return Interval(lo, hi).to_format(fmt)


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
    out in ``accumulate`` (whose overflow is checked; None: no finite-range check)."""
    n = int(np.prod([a.shape[axis] for axis in axes])) if axes else 1
    g = factor(n) + 2 * gamma(n + 1, _U64)
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = up(
            np.sum(a.magnitude(), axis=axes, keepdims=keepdims) * (1 + 2 * gamma(n, _U64))
        )
        spread = np.where(magnitude == 0, 0.0, up(magnitude * g))
        if a.is_point:
            centre = np.sum(a.lo, axis=axes, keepdims=keepdims)
            result = _finish(centre, spread, _F64_FORMAT)
        else:
            lo_sum = np.sum(a.lo, axis=axes, keepdims=keepdims)
            hi_sum = np.sum(a.hi, axis=axes, keepdims=keepdims)
            lo = np.where(np.isnan(lo_sum), -np.inf, down(lo_sum - spread))
            hi = np.where(np.isnan(hi_sum), np.inf, up(hi_sum + spread))
            result = Interval(lo, hi)
    if accumulate is not None:
        result = _overflow_to_everything(result, ~(magnitude < accumulate.max_finite))
    return result.to_format(fmt)


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
) -> Interval:
    """The enclosure of ``addend + product(A, B)`` (``np.matmul`` by default; any bilinear map
    with non-negative coefficients works, e.g. a convolution), where each output sums ``k``
    products (and the addend, if any) with relative rounding factor ``factor``, then rounds to
    ``fmt``. The addend C = [mC - rC, mC + rC] adds mC to the midpoint and rC (1 + g) + g |mC|
    to the radius."""
    g = factor + 2 * gamma(k + 2, _U64)
    if k == 0:
        zeros = np.zeros(product(a.lo, b.lo).shape)
        return Interval.point(zeros)
    if math.isinf(g):
        shape = product(a.lo, b.lo).shape
        return Interval(np.full(shape, -np.inf), np.full(shape, np.inf))
    eta = k * accumulate.smallest_subnormal
    grow = 1 + 2 * gamma(k + 2, _U64)
    with np.errstate(invalid="ignore", over="ignore"):
        m_a, r_a = a.mid_rad() if not a.is_point else (a.lo, a.lo)
        m_b, r_b = b.mid_rad() if not b.is_point else (b.lo, b.lo)
        mid = product(m_a, m_b)
        abs_a, abs_b = np.abs(m_a), np.abs(m_b)
        if a.is_point and b.is_point:
            rad = product(abs_a, abs_b) * g
        elif b.is_point:
            rad = product((1 + g) * r_a + g * abs_a, abs_b)
        elif a.is_point:
            rad = product(abs_a, (1 + g) * r_b + g * abs_b)
        else:
            rad = product(abs_a, (1 + g) * r_b + g * abs_b) + product(r_a, (1 + g) * (abs_b + r_b))
        if addend is not None:
            if addend.is_point:
                mid = mid + addend.lo
                rad = rad + g * np.abs(addend.lo)
            else:
                m_c, r_c = addend.mid_rad()
                mid = mid + m_c
                rad = rad + (g * np.abs(m_c) + (1 + g) * r_c)
        rad = up(rad * grow + eta)
        may_overflow = ~(rad / g < accumulate.max_finite * (1 - 2**-40))
    return _overflow_to_everything(_finish(mid, rad, _F64_FORMAT), may_overflow).to_format(fmt)
