"""Kernels of layer norm's backward rule (``aten.native_layer_norm_backward``,
:mod:`pytest_fpcheck.tracking.torch.rules.normalisation_backward`): the input's gradient per row
(:func:`layer_norm_input_grad`) and the weight's and bias's gradients per column
(:func:`layer_norm_param_grads`), each one compiled pass over the rows.

Every step is an interval operation in float64 whose ends are stepped outward (the exact result
of the operation over its operands' enclosures lies inside), then, for the steps ATen's kernel
rounds, rounded outward onto the compute format: such an enclosure holds the exact value of the
step and its value rounded to nearest, fused with the next operation (FMA) or not, by induction
over the steps (RENDER section III-A, the rounding of each step enclosed as in
:func:`.base.outward_step`). Sums whose order is unknown are enclosed as a float64 sum of the
terms' enclosures, widened by a relative factor of the terms' magnitudes that the caller gives
(gamma_{n-1} of the compute format for n terms in any order, Higham section 4.2, with the
products' own roundings and the float64 evaluation) plus an absolute allowance for underflowing
products. An element whose any step may not be finite is the whole line (the kernel may have
computed an infinity, then NaN).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..jit import jit
from ..rounding import float32_directed, next_down, next_up, steps_out
from .base import bump, hull4, outward_step

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["layer_norm_input_grad", "layer_norm_param_grads"]


@jit(cache=True, forceinline=True)
def _mul(
    a_lo: float, a_hi: float, b_lo: float, b_hi: float
) -> tuple[float, float]:  # pragma: no cover - compiled
    """[a] [b] in float64 for finite ends, stepped outward (an overflowing product gives an
    infinite end, which the callers' finiteness tests catch)."""
    p1, p2, p3, p4 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    low, high = hull4(p1, p2, p3, p4)
    return next_down(low), next_up(high)


@jit(cache=True, forceinline=True)
def _corners(
    p_lo: float, p_hi: float, q_lo: float, q_hi: float
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The hull of the four end products of [p] [q] in float64 (no step: the caller's
    allowance covers their rounding)."""
    p1, p2, p3, p4 = p_lo * q_lo, p_lo * q_hi, p_hi * q_lo, p_hi * q_hi
    return hull4(p1, p2, p3, p4)


@jit(cache=True, forceinline=True)
def _finite(lo: float, hi: float, big: float) -> bool:  # pragma: no cover - compiled
    """Both ends finite and within ``big`` (False for NaN)."""
    return (abs(lo) <= big) & (abs(hi) <= big)


@jit(cache=True, forceinline=True)
def _mul_c(
    a_lo: float,
    a_hi: float,
    b_lo: float,
    b_hi: float,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """[a] [b] rounded outward onto the compute format (holds the exact product and its
    rounding)."""
    lo, hi = _mul(a_lo, a_hi, b_lo, b_hi)
    return outward_step(lo, hi, fa, fast32)


@jit(cache=True, forceinline=True)
def _add_c(
    a_lo: float,
    a_hi: float,
    b_lo: float,
    b_hi: float,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    return outward_step(a_lo + b_lo, a_hi + b_hi, fa, fast32)


@jit(cache=True, forceinline=True)
def _input_grad_loop(
    dy_lo: np.ndarray,
    dy_hi: np.ndarray,
    x_lo: np.ndarray,
    x_hi: np.ndarray,
    mean_lo: np.ndarray,
    mean_hi: np.ndarray,
    rstd_lo: np.ndarray,
    rstd_hi: np.ndarray,
    w_lo: np.ndarray,
    w_hi: np.ndarray,
    c: tuple[float, float, float, float, float, float, float],
    has_weight: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    k_ds, k_db, eta, _, scale_lo, scale_hi, w_abs = c
    big = fa[4]
    tiny_dx = 0.0
    rows, n = dy_lo.shape
    for row in range(rows):
        m_lo, m_hi, a_lo, a_hi = mean_lo[row], mean_hi[row], rstd_lo[row], rstd_hi[row]
        ok = _finite(m_lo, m_hi, big) & _finite(a_lo, a_hi, big)
        # first pass: db = sum dy w and ds = sum dy x w
        db_lo, db_hi, db_abs = 0.0, 0.0, 0.0
        ds_lo, ds_hi, ds_abs = 0.0, 0.0, 0.0
        x_abs = 0.0
        for j in range(n):
            g_lo, g_hi = dy_lo[row, j], dy_hi[row, j]
            xl, xh = x_lo[row, j], x_hi[row, j]
            # an infinite operand end: the kernel may compute inf * 0 or inf - inf
            ok &= _finite(g_lo, g_hi, big) & _finite(xl, xh, big)
            # the float64 products unstepped: their rounding is in the sums' factors
            if has_weight:
                ok &= _finite(w_lo[j], w_hi[j], big)
                g_lo, g_hi = _corners(g_lo, g_hi, w_lo[j], w_hi[j])
            p_lo, p_hi = _corners(g_lo, g_hi, xl, xh)
            db_lo += g_lo
            db_hi += g_hi
            db_abs += max(abs(g_lo), abs(g_hi))
            ds_lo += p_lo
            ds_hi += p_hi
            ds_abs += max(abs(p_lo), abs(p_hi))
            x_abs += max(abs(xl), abs(xh))
        # every product and partial sum the kernel forms is at most the terms' magnitudes
        # grown by the sum's factor: where that may reach the overflow threshold, an infinity
        # (then inf - inf) is possible even when the sums' enclosures are small (cancellation)
        ok &= (db_abs * (1.0 + k_db) < big) & (ds_abs * (1.0 + k_ds) < big)
        # the kernel's sums in any order and the float64 sums above (factors k_*); underflow:
        # half a subnormal per product, the first of dy x w's scaled by |w| or |x|
        spread_db = bump(db_abs * k_db + eta * n)
        spread_ds = bump(ds_abs * k_ds + eta * (n * (1.0 + w_abs) + x_abs))
        db_lo, db_hi = next_down(db_lo - spread_db), next_up(db_hi + spread_db)
        ds_lo, ds_hi = next_down(ds_lo - spread_ds), next_up(ds_hi + spread_ds)
        ok &= _finite(db_lo, db_hi, big) & _finite(ds_lo, ds_hi, big)
        # b = (db mean - ds) a a a scale; c = -b mean - db a scale, step by step
        t_lo, t_hi = _mul_c(db_lo, db_hi, m_lo, m_hi, fa, fast32)
        ok &= _finite(t_lo, t_hi, big)
        t_lo, t_hi = _add_c(t_lo, t_hi, -ds_hi, -ds_lo, fa, fast32)
        ok &= _finite(t_lo, t_hi, big)
        for _ in range(3):
            t_lo, t_hi = _mul_c(t_lo, t_hi, a_lo, a_hi, fa, fast32)
            ok &= _finite(t_lo, t_hi, big)
        b_lo, b_hi = _mul_c(t_lo, t_hi, scale_lo, scale_hi, fa, fast32)
        ok &= _finite(b_lo, b_hi, big)
        e_lo, e_hi = _mul_c(-b_hi, -b_lo, m_lo, m_hi, fa, fast32)
        ok &= _finite(e_lo, e_hi, big)
        f_lo, f_hi = _mul_c(db_lo, db_hi, a_lo, a_hi, fa, fast32)
        ok &= _finite(f_lo, f_hi, big)
        f_lo, f_hi = _mul_c(f_lo, f_hi, scale_lo, scale_hi, fa, fast32)
        ok &= _finite(f_lo, f_hi, big)
        c_lo, c_hi = _add_c(e_lo, e_hi, -f_hi, -f_lo, fa, fast32)
        ok &= _finite(c_lo, c_hi, big)
        # the underflow of dx's three products, each at most a subnormal spacing of float32,
        # the first grown by the factor that multiplies it next (|w| or |a|) and every one by
        # the later roundings (within 1 + 2**-20)
        tiny_dx = eta * (w_abs + max(abs(a_lo), abs(a_hi)) + 3.0) * (1.0 + 2.0**-20)
        if not ok:
            for j in range(n):
                out_lo[row, j], out_hi[row, j] = -math.inf, math.inf
            continue
        missed = n
        limits = (a_lo, a_hi, b_lo, b_hi, c_lo, c_hi, big, tiny_dx)
        if fast32:
            # second pass onto float32, the usual elements in one branch-free pass: the exact
            # range widened once by the kernel's five roundings (:func:`_input_grad_usual`)
            missed = 0
            for j in range(n):
                w_j = (w_lo[j], w_hi[j]) if has_weight else (1.0, 1.0)
                lower, upper, usual = _input_grad_usual(
                    dy_lo[row, j], dy_hi[row, j], x_lo[row, j], x_hi[row, j], w_j, limits
                )
                out_lo[row, j], out_hi[row, j] = lower, upper
                missed += not usual
        if not missed:
            continue
        # second pass: dx = a dy w + b x + c, step by step (the elements the first one missed)
        for j in range(n):
            if fast32:
                w_j = (w_lo[j], w_hi[j]) if has_weight else (1.0, 1.0)
                if _input_grad_usual(
                    dy_lo[row, j], dy_hi[row, j], x_lo[row, j], x_hi[row, j], w_j, limits
                )[2]:
                    continue  # written by the first pass
            v_lo, v_hi = _mul_c(a_lo, a_hi, dy_lo[row, j], dy_hi[row, j], fa, fast32)
            fine = _finite(v_lo, v_hi, big)
            if has_weight:
                v_lo, v_hi = _mul_c(v_lo, v_hi, w_lo[j], w_hi[j], fa, fast32)
                fine &= _finite(v_lo, v_hi, big)
            r_lo, r_hi = _mul_c(b_lo, b_hi, x_lo[row, j], x_hi[row, j], fa, fast32)
            fine &= _finite(r_lo, r_hi, big)
            v_lo, v_hi = _add_c(v_lo, v_hi, r_lo, r_hi, fa, fast32)
            fine &= _finite(v_lo, v_hi, big)
            v_lo, v_hi = _add_c(v_lo, v_hi, c_lo, c_hi, fa, fast32)
            fine &= _finite(v_lo, v_hi, big)
            out_lo[row, j] = v_lo if fine else -math.inf
            out_hi[row, j] = v_hi if fine else math.inf


#: gamma_k(2**-24) for k = 2, 3, 4, rounded up: the kernel's roundings of dx's three terms
_GAMMA32 = tuple(
    math.nextafter(k * 2.0**-24 / (1.0 - k * 2.0**-24), math.inf) * (1.0 + 2.0**-40)
    for k in (2, 3, 4)
)


@jit(cache=True, forceinline=True)
def _input_grad_usual(
    dy_lo: float,
    dy_hi: float,
    x_lo: float,
    x_hi: float,
    w: tuple[float, float],
    limits: tuple[float, float, float, float, float, float, float, float],
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """One element of dx = a dy w + b x + c onto float32 for the usual element, without a
    branch, and whether it is usual (every operand end finite, every intermediate the kernel
    may form below float32's overflow threshold ``big``). ``limits`` = (a, b and c's ends,
    ``big``, the products' underflow allowance).

    The kernel evaluates ((a dy) w + b x) + c in float32, each operation correctly rounded or
    a product fused into the next sum (``layer_norm_backward_frame``), or a dy w first: every
    value it can compute from operands in their enclosures lies within
    gamma_4 |A| + gamma_3 |B| + gamma_2 |C| + the underflow allowance of the exact
    A + B + C (A = a dy w, B = b x, C = c: A carries two product roundings and two sums',
    B one and two, C the last two in any association; Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., section 3.1), |A| ... at their largest over the operands'
    box. The exact range of A + B + C is the sum of the terms' float64 corner hulls (products
    of float32 numbers, never underflowing in float64), whose evaluation (three products,
    two sums) errs by at most 2**-50 of the terms' magnitudes; the allowance's own evaluation
    is rounded up by 1 + 2**-48, the ends stepped one float64 unit out and rounded outward
    onto float32."""
    a_lo, a_hi, b_lo, b_hi, c_lo, c_hi, big, tiny = limits
    g2, g3, g4 = _GAMMA32
    w_lo, w_hi = w
    p_lo, p_hi = _corners(a_lo, a_hi, dy_lo, dy_hi)
    q_lo, q_hi = _corners(dy_lo, dy_hi, w_lo, w_hi)
    big_lo, big_hi = _corners(p_lo, p_hi, w_lo, w_hi)
    r_lo, r_hi = _corners(b_lo, b_hi, x_lo, x_hi)
    m_a, m_b = max(abs(big_lo), abs(big_hi)), max(abs(r_lo), abs(r_hi))
    m_c = max(abs(c_lo), abs(c_hi))
    total = m_a + m_b + m_c
    allowance = (g4 * m_a + g3 * m_b + g2 * m_c + tiny + 2.0**-50 * total) * (1.0 + 2.0**-48)
    low, high, ordinary = steps_out(
        (big_lo + r_lo + c_lo) - allowance, (big_hi + r_hi + c_hi) + allowance
    )
    # what the kernel forms stays finite: a dy, dy w (either association), the terms, the sums
    reach = max(max(abs(p_lo), abs(p_hi)), max(abs(q_lo), abs(q_hi))) * (1.0 + g2)
    usual = (
        ordinary
        & (abs(dy_lo) < math.inf)
        & (abs(dy_hi) < math.inf)
        & (abs(x_lo) < math.inf)
        & (abs(x_hi) < math.inf)
        & (reach < big)
        & (total * (1.0 + g4) < big)
    )
    return float32_directed(low, False, False), float32_directed(high, True, False), usual


@functools.cache
def _input_grad(has_weight: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(cache=True, error_model="numpy")
    def kernel(
        dy_lo: np.ndarray,
        dy_hi: np.ndarray,
        x_lo: np.ndarray,
        x_hi: np.ndarray,
        mean_lo: np.ndarray,
        mean_hi: np.ndarray,
        rstd_lo: np.ndarray,
        rstd_hi: np.ndarray,
        w_lo: np.ndarray,
        w_hi: np.ndarray,
        c: tuple[float, float, float, float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _input_grad_loop(
            dy_lo,
            dy_hi,
            x_lo,
            x_hi,
            mean_lo,
            mean_hi,
            rstd_lo,
            rstd_hi,
            w_lo,
            w_hi,
            c,
            has_weight,
            fa,
            fast32,
            out_lo,
            out_hi,
        )

    return kernel


def layer_norm_input_grad(
    dy: tuple[Array, Array],
    x: tuple[Array, Array],
    mean: tuple[Array, Array],
    rstd: tuple[Array, Array],
    weight: tuple[Array, Array] | None,
    scale: tuple[float, float],
    constants: tuple[float, float, float, float],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[Array, Array]:
    """The enclosure of the input's gradient as ATen's CPU kernel forms it, per row of ``dy``
    and ``x`` (2-d, m x n: ends as pairs; ``mean``, ``rstd`` one interval per row, ``weight``
    one per column or None): with g = dy w, db = sum g, ds = sum g x, a = rstd and ``scale``
    the enclosure of 1 / n as the kernel holds it, b = (db mean - ds) a a a scale,
    c = -b mean - db a scale and dx = a dy w + b x + c.

    ``constants`` = (k_ds, k_db, eta, |w| max): db's enclosure is the float64 sum of the terms'
    corner hulls widened by k_db sum |g| + n eta, ds's by k_ds sum |g x| + eta (n (1 + |w| max)
    + sum |x|) (the kernel's sums in any order with their products' roundings, the float64
    sums' and products' own roundings; eta at least half a subnormal of the compute format,
    grown by the sum's factor, per underflowing product, the first of dy x w's scaled by the
    third factor); then every step of b, c and dx as the module docstring says, in the compute format ``fa``
    (``fast32``: float32, where dx's usual elements take :func:`_input_grad_usual` instead:
    the exact range widened once by the kernel's five roundings). A row whose scalars may not
    be finite is the whole line, and so is an element whose steps may not be."""
    m, n = dy[0].shape
    out_lo, out_hi = np.empty((m, n)), np.empty((m, n))
    if m and n:

        def c_order(v: Array) -> np.ndarray:
            return np.ascontiguousarray(v, dtype=np.float64)

        empty = np.zeros(0)
        w_lo, w_hi = (
            (c_order(weight[0]), c_order(weight[1])) if weight is not None else (empty,) * 2
        )
        _input_grad(weight is not None, fast32)(
            c_order(dy[0]),
            c_order(dy[1]),
            c_order(x[0]),
            c_order(x[1]),
            c_order(mean[0]),
            c_order(mean[1]),
            c_order(rstd[0]),
            c_order(rstd[1]),
            w_lo,
            w_hi,
            (constants[0], constants[1], constants[2], 0.0, scale[0], scale[1], constants[3]),
            fa,
            out_lo,
            out_hi,
        )
    return out_lo, out_hi


@jit(cache=True, error_model="numpy")
def _param_grads_kernel(
    dy_lo: np.ndarray,
    dy_hi: np.ndarray,
    x_lo: np.ndarray,
    x_hi: np.ndarray,
    mean_lo: np.ndarray,
    mean_hi: np.ndarray,
    rstd_lo: np.ndarray,
    rstd_hi: np.ndarray,
    c: tuple[float, float, float, float],
    w_sums: np.ndarray,
    b_sums: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Per column j, into ``w_sums[:, j]`` = (sum lo, sum hi, sum |T|, sum e, whole line) of
    the terms T = dy a (x - mean) of the weight's gradient and their rounding allowances e, and
    into ``b_sums[:, j]`` = (sum lo, sum hi, sum |dy|, 0, whole line) of the bias's."""
    k3, tiny, big, _ = c
    rows, n = dy_lo.shape
    for row in range(rows):
        m_lo, m_hi, a_lo, a_hi = mean_lo[row], mean_hi[row], rstd_lo[row], rstd_hi[row]
        m_mag = max(abs(m_lo), abs(m_hi))
        a_mag = max(abs(a_lo), abs(a_hi))
        row_ok = _finite(m_lo, m_hi, big) & _finite(a_lo, a_hi, big)
        for j in range(n):
            g_lo, g_hi = dy_lo[row, j], dy_hi[row, j]
            xl, xh = x_lo[row, j], x_hi[row, j]
            d_lo, d_hi = next_down(xl - m_hi), next_up(xh - m_lo)
            t_lo, t_hi = _mul(g_lo, g_hi, a_lo, a_hi)
            t_lo, t_hi = _mul(t_lo, t_hi, d_lo, d_hi)
            g_mag = max(abs(g_lo), abs(g_hi))
            x_mag = max(abs(xl), abs(xh))
            # dy (a x + b) with b = -a mean rounded, a x rounded, their sum, the product: three
            # roundings of terms at most |dy| (|a x| + |a mean|), and four underflows
            e = k3 * g_mag * (a_mag * x_mag + a_mag * m_mag) + tiny * (1.0 + g_mag)
            fine = row_ok & _finite(t_lo, t_hi, big) & _finite(g_lo, g_hi, big)
            fine &= _finite(xl, xh, big) & (abs(e) <= big)
            # a x and a mean may each overflow while they cancel, and so may the term
            fine &= a_mag * (x_mag + m_mag) * (1.0 + k3) <= big
            fine &= max(abs(t_lo), abs(t_hi)) + e <= big
            w_sums[0, j] += t_lo
            w_sums[1, j] += t_hi
            w_sums[2, j] += max(abs(t_lo), abs(t_hi))
            w_sums[3, j] += e
            w_sums[4, j] += 0.0 if fine else 1.0
            b_sums[0, j] += g_lo
            b_sums[1, j] += g_hi
            b_sums[2, j] += g_mag
            b_sums[4, j] += 0.0 if _finite(g_lo, g_hi, big) else 1.0


def layer_norm_param_grads(
    dy: tuple[Array, Array],
    x: tuple[Array, Array],
    mean: tuple[Array, Array],
    rstd: tuple[Array, Array],
    k3: float,
    tiny: float,
    big: float,
) -> tuple[Array, Array]:
    """Per column of the m x n ``dy`` and ``x``: the weight's gradient's terms
    T = dy rstd (x - mean) and the bias's dy, summed over the rows (module docstring), as
    arrays of shape (5, n): (sum of lower ends, sum of upper ends, sum of magnitudes, sum of
    rounding allowances k3 |dy| (|rstd x| + |rstd mean|) + tiny (1 + |dy|), count of terms
    that may not be finite). The caller turns them into enclosures."""
    n = dy[0].shape[1]
    w_sums, b_sums = np.zeros((5, n)), np.zeros((5, n))
    if dy[0].size:

        def c_order(v: Array) -> np.ndarray:
            return np.ascontiguousarray(v, dtype=np.float64)

        _param_grads_kernel(
            c_order(dy[0]),
            c_order(dy[1]),
            c_order(x[0]),
            c_order(x[1]),
            c_order(mean[0]),
            c_order(mean[1]),
            c_order(rstd[0]),
            c_order(rstd[1]),
            (k3, tiny, big, 0.0),
            w_sums,
            b_sums,
        )
    return w_sums, b_sums
