"""Softmax and log-softmax: the exact range by monotonicity (each output increases in its own
input and decreases in the others; RENDER III-C-2 states it as an approximation, here it is
rigorous), plus an allowance for the rounding of ATen's kernel (shifted exponentials, their sum,
the quotient or logarithm).

Softmax of a float16 or bfloat16 tensor over its last dimension on the CPU computes in float32
from end to end: ATen's ``_vec_softmax_lastdim`` for a type whose ``opmath_type`` differs from it
(PyTorch 2.3 and later; the input is made contiguous first, and a softmax over the last dimension
always takes this kernel) converts the row into a float32 buffer, takes the maximum, the shifted
exponentials and their sum there, multiplies by the float32 reciprocal of the sum and rounds once
into the tensor's format. The rule's allowance is then float32's (:func:`_softmax_units`), and
the final rounding is the outward rounding of the enclosure onto the tensor's format (rounding to
nearest is monotone, so it maps a value inside [lo, hi] into [round_down(lo), round_up(hi)]).
Every other case keeps the wider model (the larger of the two formats' unit round-off, and a
rounding of each exponential into the tensor's format): the CPU kernel over an inner dimension
stores the exponentials of its scalar tail in the tensor's format before dividing (measured:
bfloat16 results a unit in the last place outside the float32 model,
``tests/tracking/test_softmax_bounds.py``), other devices' kernels are not read here, and
log-softmax's reduced-precision kernels may hold the sum in the tensor's own format.

Log-softmax's backward kernel (``_log_softmax_backward_data``, what a cross-entropy's
``loss.backward()`` runs) computes ``g - exp(y) * sum(g)`` over the dimension, in the compute
format from end to end: ATen's CPU kernels (``_vec_host_softmax_backward_lastdim`` over the last
dimension, ``_vec_log_softmax_backward`` over an inner one) convert float16 and bfloat16 rows to
float32, sum g there in some order, take each exp (a vectorised one or ``std::exp``), the
product and the difference (or one fused multiply-add) in float32 and round once into the
tensor's format. Each step's enclosure is rounded outward in the compute format (it holds a
fused result too: the exact ``g - e s`` lies between the differences of the product's ends),
the last one outward onto the tensor's.
"""

from __future__ import annotations

import math

import numpy as np

from ....interval import elementwise as ew
from ....interval.core import Interval, gamma
from ....interval.kernels import (
    log_softmax_backward_bounds,
    log_softmax_bounds,
    softmax_bounds,
)
from ....interval.linalg import reduce_sum
from ..context import RuleContext
from ._common import raise_unsupported, rule

__all__: list[str] = []


def _softmax_units(ctx: RuleContext, last: bool) -> tuple[float, float]:
    """(u, kappa) for softmax's kernel: over the ``last`` dimension on the CPU, u the compute
    format's unit round-off and kappa the relative error of one exp (its ULP error in the
    compute format), the rounding of the result into the tensor's format being the enclosure's
    outward rounding (see the module docstring); otherwise :func:`_wide_units`."""
    c = ctx.compute
    if last and ctx.device.type == "cpu":
        return c.unit_roundoff, ew.ULP_ERRORS["exp"] * c.eps
    return _wide_units(ctx)


def _wide_units(ctx: RuleContext) -> tuple[float, float]:
    """(u, kappa) for kernels that may round intermediates into the tensor's format: u the unit
    round-off of their intermediates (ATen's reduced-precision CPU kernels may keep the running
    sum and its logarithm, or the exponentials, in the tensor's own format, so the larger of the
    compute and tensor formats'), kappa the relative error of one exp (its ULP error in the
    compute format, plus a rounding to the tensor format)."""
    c = ctx.compute
    u = max(c.unit_roundoff, ctx.fmt.unit_roundoff)
    return u, ew.ULP_ERRORS["exp"] * c.eps + (ctx.fmt.unit_roundoff if ctx.fmt is not c else 0.0)


#: a factor that stands for "no bound" and stays finite (a probability times it is finite)
_HUGE = 2.0**1000


def _quotient_factor(spread: float, gamma_n: float, u: float) -> float:
    """F with p (1 - u)^2 / ((1 + spread)(1 + gamma_n)) >= p / F and
    p (1 + u)^2 / ((1 - spread)(1 - gamma_n)) <= p F: the larger of the two ratios, each exact
    rather than to first order (1 / (1 - x) exceeds 1 + x by x^2 / (1 - x)), times 1 + 2**-40
    for their float64 evaluation; :data:`_HUGE` where (1 - spread)(1 - gamma_n) is not
    positive."""
    shrink = (1 - spread) * (1 - gamma_n)
    if not shrink > 0:
        return _HUGE
    factor = max((1 + spread) * (1 + gamma_n) / (1 - u) ** 2, (1 + u) ** 2 / shrink)
    return min(factor * (1 + 2**-40), _HUGE)


@rule("aten._softmax", "aten._safe_softmax", "aten.softmax")
def _softmax(ctx: RuleContext) -> Interval:
    """softmax_i = e_i / S, e_j = exp(x_j - m), m the row's maximum (ATen's kernel).

    Exact range: softmax_i increases in x_i and decreases in the others, so
    [e_lo_i / (e_lo_i + sum_{j != i} e_hi_j), e_hi_i / (e_hi_i + sum_{j != i} e_lo_j)]
    (RENDER III-C-2 states this as an approximation; here it is rigorous).

    Rounding: with d = x - m <= 0, the computed exponential is e (1 + kappa) plus at most
    e^d (e^{-d u} - 1) <= 0.37 u (+ one subnormal): an absolute error a = 0.4 u + tiny that
    stays finite for any d, -inf included (exp(-inf) = 0 exactly); where u |d| is small the
    kernel also takes it relatively, e (1 + kappa) e^{+-u |d|} + tiny, and keeps the tighter
    end (both hold), which matters for probabilities far below u. S >= 1 (the maximum's term
    is 1), so the computed sum lies in [S (1 - s)(1 - gamma_n), S (1 + s)(1 + gamma_n)],
    s = kappa + n a; the quotient (CUDA) or the product with the rounded reciprocal (CPU) adds
    at most two roundings, factors within [(1 - u)^2, (1 + u)^2], so the result before its
    rounding into the tensor's format lies within
    [(p_lo (1 - kappa) - a) / F, (p_hi (1 + kappa) + a) F] for F of :func:`_quotient_factor`,
    and that rounding, monotone, within the enclosure rounded outward onto the format. u, kappa
    and a come from :func:`_softmax_units`."""
    x = ctx.args[0]
    axis = int(ctx.arg(1, "dim")) % max(x.dim(), 1)
    c = ctx.compute
    a = ctx.operand(x, c)
    n = a.shape[axis] if a.shape else 1
    u, kappa = _softmax_units(ctx, axis == max(x.dim(), 1) - 1)
    absolute = 0.4 * u + (ew.ULP_ERRORS["exp"] + 1) * c.smallest_subnormal
    factor = _quotient_factor(kappa + n * absolute, ctx.sums.factor(n, u), u)
    # one compiled pass per row (the exponentials in float64, widened by their evaluation error)
    lo, hi = softmax_bounds(
        a.lo,
        a.hi,
        axis,
        kappa,
        absolute,
        factor,
        ctx.call.functional == "aten._safe_softmax",
        ctx.fmt,
        u,
        (ew.ULP_ERRORS["exp"] + 1) * c.smallest_subnormal,
    )
    return Interval(lo, hi)


@rule("aten._log_softmax", "aten.log_softmax")
def _log_softmax(ctx: RuleContext) -> Interval:
    """(x_i - m) - log(S): exact range by monotonicity, then the rounding: the difference
    x_i - m errs by u |x_i - m| (evaluated at each end: the computed value is monotone in x_i;
    m lies between the row's largest lower end and its largest upper end), log S by the larger
    of log((1 + s)(1 + gamma_n)) and -log((1 - s)(1 - gamma_n)) (see _softmax) plus log's ULP
    error, the final subtraction by u |result|. One compiled pass per row
    (:func:`~pytest_fpcheck.interval.kernels.log_softmax_bounds`)."""
    x = ctx.args[0]
    axis = int(ctx.arg(1, "dim")) % max(x.dim(), 1)
    c = ctx.compute
    a = ctx.operand(x, c)
    n = a.shape[axis] if a.shape else 1
    u, kappa = _wide_units(ctx)
    absolute = 0.4 * u + (ew.ULP_ERRORS["exp"] + 1) * c.smallest_subnormal
    # |log| of the sum's relative error, the larger side: 1 - x below, 1 + x above
    spread, gamma_n = kappa + n * absolute, ctx.sums.factor(n, u)
    shrink = (1 - spread) * (1 - gamma_n)
    log_f = (
        max(math.log((1 + spread) * (1 + gamma_n)), -math.log(shrink)) * (1 + 2**-40)
        if shrink > 0
        else math.inf
    )
    lo, hi = log_softmax_bounds(
        a.lo,
        a.hi,
        axis,
        u,
        log_f,
        ew.ULP_ERRORS["log"] * c.eps + 2 * u,
        ew.ULP_ERRORS["log"] * c.smallest_subnormal,
        ctx.fmt,
    )
    return Interval(lo, hi)


@rule("aten._softmax_backward_data")
def _softmax_backward(ctx: RuleContext) -> Interval:
    """y (g - s), s = sum(g y) over the dimension, as ATen's CPU kernels for float32 and float64
    compute it (``_vec_host_softmax_backward_lastdim`` over the last dimension, the products
    and their sum by ``map2_reduce_all``; ``_vec_softmax_backward`` over an inner one, the
    products accumulated column by column): each product's enclosure (the exact one and its
    rounding, fused into the sum or not), their sum in any order (the tracker's factor for the
    row), the difference and the product rounded to nearest as the run rounds them (outward
    where it is not known to), composed by their rules (RENDER III-A). Float16 and bfloat16,
    whose kernels convert to float32 and may keep the sum in the tensor's format, and other
    devices take the decomposition, checked against the kernel's value."""
    grad, output = ctx.args[0], ctx.args[1]
    c = ctx.compute
    if c is not ctx.fmt or ctx.device.type != "cpu":
        raise_unsupported(ctx, f"softmax's gradient in {ctx.fmt.name} on {ctx.device.type}")
    axis = int(ctx.arg(2, "dim")) % max(grad.dim(), 1)
    g, y = ctx.operand(grad, c), ctx.operand(output, c)
    nearest = ctx.nearest
    terms = ew.mul(g, y, c, operand_bits=ctx.operand_bits(grad, output), nearest=nearest)
    if not g.shape:  # a 0-d tensor: its own one-element row
        total = terms
    else:
        u, n = c.unit_roundoff, g.shape[axis]
        factor = ctx.sums.factor(n, u)
        total = reduce_sum(terms, (axis,), True, c, lambda _: factor, accumulate=c)
    difference = ew.sub(g, total, c, nearest=nearest)
    return ew.mul(y, difference, c, operand_bits=c.precision, nearest=nearest)


@rule("aten._log_softmax_backward_data")
def _log_softmax_backward(ctx: RuleContext) -> Interval:
    """g - exp(y) * s, s = sum(g) over the dimension: the sum in the compute format in any order
    (the smaller of the tracker's factor for the row and gamma_{m-1}, m the most terms of a row
    that may be non-zero), exp(y) with its library error rounded outward onto the compute
    format (where it overflows), the product and the difference rounded outward there, the
    result outward onto the tensor's format (see the module docstring)."""
    grad, output = ctx.args[0], ctx.args[1]
    axis = int(ctx.arg(2, "dim")) % max(grad.dim(), 1)
    c = ctx.compute
    g, y = ctx.operand(grad, c), ctx.operand(output, c)
    if not g.shape:  # a 0-d tensor: its own one-element row
        total = g
    else:
        # adding an exact zero is exact: along any order only the m terms of a row that may be
        # non-zero round, gamma_{m-1} (a cross-entropy's g has one per row: its sum is exact);
        # the tracker's factor for the whole row (a revealed summation order's included) holds
        # too
        u, n = c.unit_roundoff, g.shape[axis]
        nonzero = (g.lo != 0) | (g.hi != 0)
        terms = max(int(np.broadcast_to(nonzero, g.shape).sum(axis=axis).max(initial=0)), 1)
        row_factor = min(ctx.sums.factor(n, u), gamma(terms - 1, u))
        total = reduce_sum(g, (axis,), True, c, lambda _: row_factor, accumulate=c)
    # exp(y), its product by the sum and the difference, each rounded outward onto the compute
    # format as ew.library_function, ew.mul and ew.sub round them, in one pass; the difference
    # is on the compute format's grid: rounded again only onto a coarser format
    lo, hi = log_softmax_backward_bounds(
        (g.lo, g.hi),
        (y.lo, y.hi),
        (total.lo, total.hi),
        axis,
        ew.library_allowance(c, ew.ULP_ERRORS["exp"]),
        c,
        ctx.fmt,
    )
    return Interval(lo, hi)
