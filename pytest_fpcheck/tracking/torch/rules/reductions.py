"""Reductions (sum, mean, prod, var, std, norm, logsumexp, cumsum): the exact range plus
gamma_k times the sum of magnitudes, in the accumulation format of
:mod:`pytest_fpcheck.tracking.core.policy` (:mod:`pytest_fpcheck.interval.linalg`; RENDER
III-B, Higham's gamma_n). :func:`moments` (mean and variance for any of PyTorch's algorithms) is
shared with the normalisations.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ....adapters.torch import dtype_format
from ....interval import elementwise as ew
from ....interval.core import Interval, gamma
from ....interval.kernels import (
    moments_rows,
)
from ....interval.linalg import may_overflow, reduce_sum
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import (
    F64,
    Array,
    dims,
    rule,
    sum_factor,
)

__all__: list[str] = ["moments"]


def _reduce_args(ctx: RuleContext, x: torch.Tensor) -> tuple[tuple[int, ...], bool]:
    dim = ctx.arg(1, "dim")
    keepdim = bool(ctx.arg(2, "keepdim", False))
    return dims(dim, x.dim()), keepdim


@rule("aten.sum")
def _sum(ctx: RuleContext) -> Interval:
    x = ctx.args[0]
    axes, keepdim = _reduce_args(ctx, x)
    source = dtype_format(x.dtype) or F64
    accumulate = ctx.compute if ctx.compute.precision >= source.precision else source
    return reduce_sum(
        ctx.interval(x), axes, keepdim, ctx.fmt, sum_factor(ctx, accumulate), accumulate=accumulate
    )


@rule("aten.mean")
def _mean(ctx: RuleContext) -> Interval:
    """sum / n, the sum accumulated in the compute format and possibly stored in the result's
    format first (ATen's CPU mean divides a result-typed sum): the wider of the two bounds."""
    x = ctx.args[0]
    axes, keepdim = _reduce_args(ctx, x)
    c = ctx.compute
    total = reduce_sum(ctx.interval(x), axes, keepdim, ctx.fmt, sum_factor(ctx, c), accumulate=c)
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    return ew.div(total, Interval.point(np.asarray(float(n))), ctx.fmt)


@rule("aten.prod")
def _prod(ctx: RuleContext) -> Interval:
    """The exact range by sequential interval products (outward in float64), widened by
    gamma_{n-1} times the largest magnitude (any order), with the unit round-off of the
    narrower of the compute and tensor formats."""
    x = ctx.args[0]
    return _product_over(
        ctx, x, dims(ctx.arg(1, "dim"), x.dim()), bool(ctx.arg(2, "keepdim", False))
    )


@rule("prims.prod")
def _prims_prod(ctx: RuleContext) -> Interval:
    """``prims.prod(x, dims)``, which ``torch._refs`` decompositions call (``cumprod``'s, hence
    ``prod``'s backward): :func:`_prod` over ``dims``, never keeping them; an empty ``dims``
    reduces nothing (unlike ``aten.prod``'s ``dim=[]``), and None reduces every dimension."""
    x = ctx.args[0]
    given = ctx.arg(1, "dims")
    axes = (
        tuple(range(x.dim()))
        if given is None
        else tuple(sorted({d % max(x.dim(), 1) for d in given}))
    )
    return _product_over(ctx, x, axes, keepdim=False)


def _product_over(
    ctx: RuleContext, x: torch.Tensor, axes: tuple[int, ...], keepdim: bool
) -> Interval:
    a = ctx.interval(x)
    lo = np.moveaxis(a.lo, axes, tuple(range(len(axes)))).reshape(
        -1, *[s for i, s in enumerate(a.shape) if i not in axes]
    )
    hi = np.moveaxis(a.hi, axes, tuple(range(len(axes)))).reshape(lo.shape)
    n = lo.shape[0]
    acc = Interval.point(np.ones(lo.shape[1:]))
    # the largest magnitude any sub-product can have: prod max(1, |x_j|), rounded up
    largest = np.ones(lo.shape[1:])
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(n):
            acc = ew.mul(acc, Interval(lo[i], hi[i]), F64)
            largest = up(largest * np.maximum(1.0, np.maximum(np.abs(lo[i]), np.abs(hi[i]))))
    # ATen's CPU prod of float16/bfloat16 rounds its running product to the tensor's format:
    # the larger unit round-off, subnormal and the lower overflow threshold are the sound ones
    u = max(ctx.compute.unit_roundoff, ctx.fmt.unit_roundoff)
    g = gamma(n - 1, u)
    # an underflow's absolute error (at most one subnormal unit) is multiplied by the factors
    # after it, a sub-product of at most ``largest``, and by their roundings (< 1 + gamma_n)
    tiny = max(ctx.compute.smallest_subnormal, ctx.fmt.smallest_subnormal)
    with np.errstate(over="ignore", invalid="ignore"):
        underflow = up(largest * ((n - 1) * tiny * (1 + gamma(n, u))))
        result = acc.widen(up(acc.magnitude() * g + underflow) if n > 1 else 0.0)
    # a rounded sub-product reaching the running format's largest number may overflow (then
    # times 0, NaN) whatever the exact product is: anything is possible there
    limit = min(ctx.compute.max_finite, ctx.fmt.max_finite)
    overflow = may_overflow(largest, gamma(n, u), limit) if n > 1 else np.zeros(largest.shape, bool)
    if overflow.any():
        result = Interval(
            np.where(overflow, -np.inf, result.lo), np.where(overflow, np.inf, result.hi)
        )
    if keepdim:
        result = result.map(lambda v: np.expand_dims(v, axes))
    if n <= 1 and ctx.nearest:
        # no product is rounded: the one conversion to the result's format is to nearest
        return result.to_nearest(ctx.fmt)
    return result.to_format(ctx.fmt)


def moments(
    ctx: RuleContext, a: Interval, axes: tuple[int, ...], correction: float
) -> tuple[Interval, Interval]:
    """(mean, variance) enclosures over ``axes`` (keepdims) in the compute format, for any of
    the algorithms PyTorch uses (two-pass, Welford): :func:`.kernels.moments_rows` on the
    elements laid out as rows."""
    kept = [i for i in range(len(a.shape)) if i not in axes]
    n = int(np.prod([a.shape[i] for i in axes]))
    rows = int(np.prod([a.shape[i] for i in kept]))

    def as_rows(v: Array) -> Array:
        return v.transpose(kept + list(axes)).reshape(rows, n)

    lo = as_rows(a.lo)
    hi = lo if a.is_point else as_rows(a.hi)
    mean_lo, mean_hi, var_lo, var_hi = moments_rows(lo, hi, correction, ctx.compute)
    shape = tuple(1 if i in axes else s for i, s in enumerate(a.shape))
    return (
        Interval(mean_lo.reshape(shape), mean_hi.reshape(shape)),
        Interval(var_lo.reshape(shape), var_hi.reshape(shape)),
    )


def _correction(ctx: RuleContext) -> float:
    correction = ctx.kwargs.get("correction")
    if correction is None:
        unbiased = ctx.kwargs.get(
            "unbiased", ctx.args[2] if len(ctx.args) > 2 and isinstance(ctx.args[2], bool) else True
        )
        return 1.0 if unbiased else 0.0
    return float(correction)


@rule("aten.var", "aten.std")
def _var(ctx: RuleContext) -> Interval:
    x = ctx.args[0]
    axes = dims(ctx.arg(1, "dim"), x.dim())
    keepdim = bool(ctx.kwargs.get("keepdim", False))
    _, variance = moments(ctx, ctx.interval(x), axes, _correction(ctx))
    if ctx.call.functional == "aten.std":
        variance = ew.sqrt(variance, ctx.compute)
    if not keepdim:
        variance = variance.map(lambda v: np.squeeze(v, axis=axes))
    return variance.to_format(ctx.fmt)


@rule("aten.linalg_vector_norm", "aten.norm")
def _vector_norm(ctx: RuleContext) -> Interval:
    """ord 2: sqrt(sum x^2); ord 1: sum |x|; ord +-inf: max / min |x| (exact); other ord p:
    (sum |x|^p)^(1/p) with std::pow's error."""
    x = ctx.args[0]
    order = float(ctx.arg(1, "ord", 2))
    axes = dims(ctx.arg(2, "dim"), x.dim())
    keepdim = bool(ctx.arg(3, "keepdim", False))
    c = ctx.compute
    magnitude = ew.absolute(ctx.operand(x, c))
    if math.isinf(order):
        pick = np.max if order > 0 else np.min
        return Interval(
            pick(magnitude.lo, axis=axes, keepdims=keepdim),
            pick(magnitude.hi, axis=axes, keepdims=keepdim),
        ).to_format(ctx.fmt)
    factor = sum_factor(ctx, c)
    if order == 1:
        return reduce_sum(magnitude, axes, keepdim, ctx.fmt, factor, accumulate=c)
    if order == 2:
        squares = ew.mul(magnitude, magnitude, c, operand_bits=64)
        return ew.sqrt(reduce_sum(squares, axes, keepdim, c, factor, accumulate=c), ctx.fmt)
    powered = ew.library_function(
        lambda v: np.power(v, order), magnitude, c, c, ew.ULP_ERRORS["pow"], increasing=order > 0
    )
    total = reduce_sum(powered, axes, keepdim, c, factor, accumulate=c)
    return ew.library_function(
        lambda v: np.power(v, 1 / order),
        total,
        ctx.fmt,
        c,
        ew.ULP_ERRORS["pow"],
        increasing=order > 0,
    )


@rule("aten.logsumexp")
def _logsumexp(ctx: RuleContext) -> Interval:
    """m + log(sum(exp(x - m))), m the maximum. ATen composes it from tensor operations, so every
    intermediate (x - m, exp, the sum, log) is rounded to the tensor's own format."""
    x = ctx.args[0]
    axes = dims(ctx.arg(1, "dim"), x.dim())
    keepdim = bool(ctx.arg(2, "keepdim", False))
    c, f = ctx.compute, ctx.fmt
    a = ctx.operand(x, f)
    shift = Interval(np.max(a.lo, axis=axes, keepdims=True), np.max(a.hi, axis=axes, keepdims=True))
    shift = Interval(
        np.where(np.isinf(shift.lo), 0.0, shift.lo), np.where(np.isinf(shift.hi), 0.0, shift.hi)
    )
    e = ew.library_function(np.exp, ew.sub(a, shift, f), f, c, ew.ULP_ERRORS["exp"])
    total = reduce_sum(e, axes, True, f, sum_factor(ctx, c), accumulate=c)
    result = ew.add(ew.library_function(np.log, total, f, c, ew.ULP_ERRORS["log"]), shift, f)
    if not keepdim:
        result = result.map(lambda v: np.squeeze(v, axis=axes))
    return result


@rule("aten.cumsum")
def _cumsum(ctx: RuleContext) -> Interval:
    """Position i sums i + 1 terms: exact range of the prefix sums, widened by gamma_i times the
    prefix sum of magnitudes, in the accumulation format: float32 for float16 and bfloat16 on
    the CPU, the tensor's own format on CUDA (its scan kernels add in the tensor's type: an
    H100's float16 cumsum of [0.999, 63552, -64032] gives -480, float32's -479; found by the
    CUDA soundness campaign, docs/gpu.md)."""
    x = ctx.args[0]
    axis = int(ctx.arg(1, "dim")) % max(x.dim(), 1)
    c = ctx.compute if ctx.device.type == "cpu" else ctx.fmt
    a = ctx.interval(x)
    n = a.shape[axis] if a.shape else 1
    factors = np.array(
        [ctx.sums.factor(i + 1, c.unit_roundoff) + 2 * gamma(i + 2, 2.0**-53) for i in range(n)]
    )
    shape = [1] * len(a.shape)
    if shape:
        shape[axis] = n
    factors = factors.reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        prefix_magnitude = np.cumsum(a.magnitude(), axis=axis) * (1 + 2**-40)
        spread = up(prefix_magnitude * factors)
        lo = down(np.cumsum(a.lo, axis=axis) - spread)
        hi = up(np.cumsum(a.hi, axis=axis) + spread)
        overflow = (
            may_overflow(prefix_magnitude, factors, c.max_finite) | np.isnan(lo) | np.isnan(hi)
        )
    return Interval(np.where(overflow, -np.inf, lo), np.where(overflow, np.inf, hi)).to_format(
        ctx.fmt
    )
