"""Composite element-wise functions (gelu, silu, elu, leaky_relu, softplus): PyTorch's own
formula, each step rounded in the compute format, or the exact range of a unimodal function
widened by an allowance for ATen's evaluation (RENDER III-B).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.kernels import (
    gelu_erf_bounds,
    unimodal_bounds,
)
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import (
    F64,
    Array,
    constant,
    erf64,
    rule,
    sigmoid64,
)

__all__: list[str] = []


def _where_positive(a: Interval, positive: Interval, negative: Interval) -> Interval:
    """x > 0 ? positive : negative, the hull where the sign of x is undecided."""
    condition = a.lo > 0
    decided = (a.lo > 0) | (a.hi <= 0)
    return ew.where(condition, decided, positive, negative)


def _unimodal(
    ctx: RuleContext,
    function: Callable[[Array], Array],
    minimum: tuple[float, float],
    allowance: Callable[[Array, Array], Array],
) -> Interval:
    """A function with one minimum (at ``minimum[0]``, of value ``minimum[1]``, rounded down)
    and increasing away from it on both sides: its exact range over [lo, hi] is the hull of
    the end values, and of the minimum when the interval contains its abscissa. The float64
    evaluation carries 2**-48 (|f| + |x| + 1) of slack; ``allowance(magnitude_x, magnitude_f)``
    is the error bound of ATen's evaluation in the compute format. Then rounded onto the
    result format."""
    a = ctx.operand(ctx.args[0], ctx.compute)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        f_lo = function(a.lo)
        f_hi = f_lo if a.is_point else function(a.hi)
        low = np.minimum(f_lo, f_hi)
        if not a.is_point:
            # the abscissa is known to about 1e-16; a margin keeps the test on the safe side
            near = (a.lo <= minimum[0] + 1e-9) & (minimum[0] - 1e-9 <= a.hi)
            low = np.where(near, np.minimum(low, minimum[1]), low)
        high = np.maximum(f_lo, f_hi)
        x_mag = a.magnitude()
        f_mag = np.maximum(np.abs(low), np.abs(high))
        spread = allowance(x_mag, f_mag) + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
        spread = np.where(np.isnan(spread), np.inf, spread)
        result = Interval(down(low - spread), up(high + spread))
    result = ew.everything_where_nan(result)
    # the allowance bounds the compute format's result, which a CPU kernel rounds to nearest
    return result.to_nearest(ctx.fmt) if ctx.nearest else result.to_format(ctx.fmt)


_GELU_TANH_BETA, _GELU_TANH_KAPPA = math.sqrt(2 / math.pi), 0.044715
_GELU_ERF_MINIMUM = (-0.7517915246935645, -0.16997120747990367)


def _gelu_tanh(x: Array) -> Array:
    result: Array = 0.5 * x * (1.0 + np.tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x**3)))
    return result


def _silu(x: Array) -> Array:
    result: Array = x * sigmoid64(x)
    return result


@rule("aten.gelu")
def _gelu(ctx: RuleContext) -> Interval:
    """ATen's GeluKernel in the compute format (u its unit round-off):

    * none: x * 0.5 * (1 + erf(x * M_SQRT1_2)): the product x M_SQRT1_2 moves erf by at most
      0.8 |x| u, erf errs by 2 ULPs plus its absolute allowance (12 u in all), 1 + erf by 2 u,
      the two products by u |x|: in all at most |x| u (9 + 0.5 |x|);
    * tanh: 0.5 * x * (1 + tanh(beta (x + kappa x^3))): the inner argument errs by at most
      2 beta u (|x| + 4.01 kappa |x|^3), which tanh damps by sech^2 of the smallest |argument|
      it can have; tanh errs by 4 u, 1 + tanh by 2 u, the products by 2 u |x|.

    Both functions have one minimum (at -0.75179 and -0.75246)."""
    c = ctx.compute
    u, floor = c.unit_roundoff, 4 * c.smallest_normal
    if ctx.kwargs.get("approximate", "none") == "tanh":

        def allowance(x: Array, f: Array) -> Array:
            inner_error = 2 * _GELU_TANH_BETA * u * (x + 4.01 * _GELU_TANH_KAPPA * x**3)
            a = ctx.operand(ctx.args[0], c)
            nearest = np.where(
                (a.lo <= 0) & (a.hi >= 0), 0.0, np.minimum(np.abs(a.lo), np.abs(a.hi))
            )
            smallest_argument = np.maximum(
                _GELU_TANH_BETA * (nearest + _GELU_TANH_KAPPA * nearest**3) - inner_error, 0.0
            )
            damped = inner_error / np.cosh(np.minimum(smallest_argument, 300.0)) ** 2
            result: Array = 0.5 * x * (np.minimum(damped, 2.0) + 6.01 * u) + 2.01 * u * x + floor
            return result

        return _unimodal(ctx, _gelu_tanh, (-0.7524614220710163, -0.17004075057125406), allowance)
    # the same rule as _unimodal with the allowance x u (9 + x / 2) + floor, in one pass
    a = ctx.operand(ctx.args[0], c)
    target = F64 if ctx.nearest else ctx.fmt
    lo, hi = gelu_erf_bounds(a.lo, a.hi, a.is_point, _GELU_ERF_MINIMUM, target, c, erf64)
    return Interval(lo, hi).to_nearest(ctx.fmt) if ctx.nearest else Interval(lo, hi)


_SILU_MINIMUM = (-1.278464542761074, -0.27846454276107386)


@rule("aten.silu")
def _silu_rule(ctx: RuleContext) -> Interval:
    """ATen: x / (1 + exp(-x)): exp errs by 4 u relatively, 1 + exp by 5 u, the quotient by 6.1 u
    (6.5 u taken); where exp(-x) overflows the result is 0 instead of |x| e^x <= 2^(emin + 12).
    One minimum, at -1.27846: :func:`_unimodal`'s rule with the allowance 6.5 u |f| + that
    floor, in one compiled pass (:func:`~pytest_fpcheck.interval.kernels.unimodal_bounds`)."""
    c = ctx.compute
    a = ctx.operand(ctx.args[0], c)
    allowance = (6.5 * c.unit_roundoff, math.ldexp(1.0, c.emin + 12))
    target = F64 if ctx.nearest else ctx.fmt
    lo, hi = unimodal_bounds(a.lo, a.hi, a.is_point, _silu, _SILU_MINIMUM, allowance, target)
    return Interval(lo, hi).to_nearest(ctx.fmt) if ctx.nearest else Interval(lo, hi)


@rule("aten.elu")
def _elu(ctx: RuleContext) -> Interval:
    """x > 0 ? scale * x : alpha * scale * expm1(x * input_scale)."""
    c = ctx.compute
    alpha, scale, input_scale = (
        float(ctx.arg(i, n, 1.0)) for i, n in ((1, "alpha"), (2, "scale"), (3, "input_scale"))
    )
    x = ctx.operand(ctx.args[0], c)
    positive = ew.mul(x, constant(ctx, scale), c, operand_bits=64) if scale != 1 else x
    inner = ew.mul(x, constant(ctx, input_scale), c, operand_bits=64) if input_scale != 1 else x
    em1 = ew.library_function(np.expm1, inner, c, c, ew.ULP_ERRORS["expm1"])
    negative = ew.mul(em1, constant(ctx, alpha * scale), c, operand_bits=64)
    return _where_positive(x, positive, negative).to_format(ctx.fmt)


@rule("aten.leaky_relu")
def _leaky_relu(ctx: RuleContext) -> Interval:
    """x > 0 ? x : x * negative_slope."""
    x = ctx.operand(ctx.args[0], ctx.compute)
    slope = float(ctx.arg(1, "negative_slope", 0.01))
    negative = ew.mul(x, constant(ctx, slope), ctx.compute, operand_bits=64)
    return _where_positive(x, x, negative).to_format(ctx.fmt)


@rule("aten.softplus")
def _softplus(ctx: RuleContext) -> Interval:
    """(x * beta) > threshold ? x : log1p(exp(x * beta)) / beta."""
    c = ctx.compute
    beta, threshold = float(ctx.arg(1, "beta", 1.0)), float(ctx.arg(2, "threshold", 20.0))
    x = ctx.operand(ctx.args[0], c)
    bx = ew.mul(x, constant(ctx, beta), c, operand_bits=64) if beta != 1 else x
    soft = ew.library_function(np.exp, bx, c, c, ew.ULP_ERRORS["exp"])
    soft = ew.library_function(np.log1p, soft, c, c, ew.ULP_ERRORS["log1p"])
    if beta != 1:
        soft = ew.div(soft, constant(ctx, beta), c)
    linear_side = bx.lo > threshold
    decided = linear_side | (bx.hi <= threshold)
    return ew.where(linear_side, decided, x, soft).to_format(ctx.fmt)
