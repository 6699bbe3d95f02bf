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
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..formats import Format
from .core import Interval, gamma
from .rounding import down, up

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["matmul", "reduce_sum"]

_U64 = 2.0**-53


def _finish(mid: Array, rad: Array, fmt: Format) -> Interval:
    with np.errstate(invalid="ignore", over="ignore"):
        rad = np.where(np.isnan(rad), np.inf, rad)
        bad_mid = ~np.isfinite(mid)
        lo = np.where(bad_mid, -np.inf, down(mid - rad))
        hi = np.where(bad_mid, np.inf, up(mid + rad))
    return Interval(lo, hi).to_format(fmt)


def reduce_sum(
    a: Interval,
    axes: tuple[int, ...],
    keepdims: bool,
    fmt: Format,
    factor: Callable[[int], float],
) -> Interval:
    """Sum over ``axes``; ``factor(n)`` is the relative error factor of an n-term sum."""
    n = int(np.prod([a.shape[axis] for axis in axes])) if axes else 1
    g = factor(n) + 2 * gamma(n + 1, _U64)
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.sum(a.magnitude(), axis=axes, keepdims=keepdims)
        spread = np.where(magnitude == 0, 0.0, up(up(magnitude * (1 + 2 * gamma(n, _U64))) * g))
        if a.is_point:
            centre = np.sum(a.lo, axis=axes, keepdims=keepdims)
            return _finish(centre, spread, fmt)
        lo_sum = np.sum(a.lo, axis=axes, keepdims=keepdims)
        hi_sum = np.sum(a.hi, axis=axes, keepdims=keepdims)
        lo = np.where(np.isnan(lo_sum), -np.inf, down(lo_sum - spread))
        hi = np.where(np.isnan(hi_sum), np.inf, up(hi_sum + spread))
    return Interval(lo, hi).to_format(fmt)


def matmul(
    a: Interval,
    b: Interval,
    fmt: Format,
    *,
    factor: float,
    accumulate: Format,
    product: Callable[[Array, Array], Array] = np.matmul,
    k: int,
) -> Interval:
    """The enclosure of ``product(A, B)`` (``np.matmul`` by default; any bilinear map with
    non-negative coefficients works, e.g. a convolution), where each output sums ``k`` products
    with relative rounding factor ``factor``, then rounds to ``fmt``."""
    g = factor + 2 * gamma(k + 2, _U64)
    if math.isinf(g):
        shape = product(a.lo, b.lo).shape
        return Interval(np.full(shape, -np.inf), np.full(shape, np.inf))
    eta = k * accumulate.smallest_subnormal
    grow = 1 + 2 * gamma(k + 2, _U64)
    with np.errstate(invalid="ignore", over="ignore"):
        m_a, r_a = a.mid_rad()
        m_b, r_b = b.mid_rad()
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
        rad = up(rad * grow + eta)
    return _finish(mid, rad, fmt)
