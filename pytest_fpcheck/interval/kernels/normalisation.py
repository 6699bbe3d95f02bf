"""Kernels of the normalisation rules (:mod:`pytest_fpcheck.tracking.torch.rules.normalisation`):
mean and variance of rows for any of PyTorch's algorithms (:func:`moments_rows`) and the affine
normalisation of rows (:func:`normalise_rows`), each one compiled pass.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...formats import Format
from ..core import gamma
from ..jit import jit
from ..rounding import (
    next_down,
    next_up,
)
from .base import (
    format_args,
    hull4,
    outward,
    outward_step,
    sum_lower,
    sum_upper,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["moments_rows", "normalise_rows"]


@jit(cache=True, forceinline=True)
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

    @jit(cache=True, error_model="numpy")
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


@jit(cache=True, forceinline=True)
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
    low, high = hull4(p1, p2, p3, p4)
    return next_down(low), next_up(high), undefined or zero_times_infinity


@jit(cache=True, forceinline=True)
def _interval_sum(
    a_lo: float, a_hi: float, b_lo: float, b_hi: float
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """(lo, hi, whole line) of [a_lo, a_hi] + [b_lo, b_hi] in float64 (as :func:`add_bounds`)."""
    low, high = sum_lower(a_lo, b_lo), sum_upper(a_hi, b_hi)
    opposite = (a_hi == math.inf and b_lo == -math.inf) or (a_lo == -math.inf and b_hi == math.inf)
    return low, high, opposite or low != low or high != high


@jit(cache=True, forceinline=True)
def _underflow(tiny_scaled: float, factor: float) -> float:  # pragma: no cover - compiled
    """max(tiny factor, 2**-1022) from tiny 2**1000 (exact scalings by powers of two: no
    subnormal operand or result, whose arithmetic costs microcode assists)."""
    return max(tiny_scaled * factor, 2.0**-22) * 2.0**-1000


@jit(cache=True, forceinline=True)
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
                    low, high = hull4(p1, p2, p3, p4)
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

    @jit(cache=True, error_model="numpy")
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
    """``rules.normalisation._affine_normalise`` for rows: x (ends as a pair) seen as rows of ``n``
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
