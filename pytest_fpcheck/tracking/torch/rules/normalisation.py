"""Normalisations (layer norm, group norm, batch norm in evaluation mode):
(x - mean) * rstd * weight + bias, by interval evaluation of the formula in float64 plus an
allowance covering both evaluation orders ATen uses and underflow; mean and variance by
:func:`.reductions.moments`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....adapters.torch import dtype_format
from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.kernels import (
    normalise_rows,
)
from ....interval.rounding import up
from ..context import RuleContext
from ._batch_norm_training import batch_norm_training
from ._common import (
    F64,
    Array,
    constant,
    rule,
)
from .reductions import moments

__all__: list[str] = []


def _affine_normalise(
    ctx: RuleContext,
    a: Interval,
    mean: Interval,
    rstd: Interval,
    weight: Interval | None,
    bias: Interval | None,
) -> Interval:
    """The exact range of (x - mean) * rstd * w + b over the boxes, in float64, plus an
    allowance of 6 u (|x| + |mean|) |rstd w| + 2 u |b| that covers both evaluation orders ATen
    uses: ((x - mean) * rstd) * w + b, and x * (rstd w) + (b - mean rstd w); and
    tiny (1 + |x| + |mean| + |w|), tiny = 8 subnormals of the compute format, for underflow: an
    underflowing product errs by half a subnormal, which either order may then multiply by
    |w|, |x| or |mean|."""
    c = ctx.compute
    centred = ew.sub(a, mean, F64)
    scaled = ew.mul(centred, rstd, F64)
    if weight is not None:
        scaled = ew.mul(scaled, weight, F64)
    if bias is not None:
        scaled = ew.add(scaled, bias, F64)
    w_mag = weight.magnitude() if weight is not None else 1.0
    x_mag, mean_mag = a.magnitude(), mean.magnitude()
    allowance = 6 * c.unit_roundoff * (x_mag + mean_mag) * rstd.magnitude() * w_mag
    if bias is not None:
        allowance = allowance + 2 * c.unit_roundoff * bias.magnitude()
    absolute = 8 * c.smallest_subnormal * (1 + x_mag + mean_mag + w_mag)
    allowance = up((allowance + absolute) * (1 + 2**-40))
    return scaled.widen(allowance).to_format(ctx.fmt)


def _optional(ctx: RuleContext, x: Any) -> Interval | None:
    return None if x is None else ctx.operand(x, ctx.compute)


@rule("aten.native_layer_norm")
def _layer_norm(ctx: RuleContext) -> tuple[Interval, Interval, Interval]:
    x, shape, weight, bias, eps = (
        ctx.arg(i, n) for i, n in enumerate(("input", "normalized_shape", "weight", "bias", "eps"))
    )
    axes = tuple(range(x.dim() - len(shape), x.dim()))
    a = ctx.operand(x, ctx.compute)
    mean, variance = moments(ctx, a, axes, 0.0)
    rstd = _rstd(ctx, variance, float(eps))
    w, b = _optional(ctx, weight), _optional(ctx, bias)
    # _affine_normalise, one compiled pass over rows of the normalised elements
    c = ctx.compute
    lo, hi = normalise_rows(
        (a.lo, a.hi),
        int(np.prod(shape)) if len(shape) else 1,
        (mean.lo, mean.hi),
        (rstd.lo, rstd.hi),
        (w.lo, w.hi) if w is not None else None,
        (b.lo, b.hi) if b is not None else None,
        c.unit_roundoff,
        8 * c.smallest_subnormal,
        ctx.fmt,
    )
    return Interval(lo, hi), _as_output(ctx, mean, 1), _as_output(ctx, rstd, 2)


def _as_output(ctx: RuleContext, enclosure: Interval, position: int) -> Interval:
    """A statistic's enclosure in the compute format, as its output tensor holds it: rounded
    to that tensor's format (float16 and bfloat16 inputs give statistics of their own format,
    computed in float32 and rounded to nearest on the CPU)."""
    outputs = ctx.outputs
    fmt = dtype_format(outputs[position].dtype) if position < len(outputs) else None
    if ctx.observed or fmt is None or fmt.name == ctx.compute.name:
        return enclosure
    return enclosure.to_nearest(fmt) if ctx.nearest else enclosure.to_format(fmt)


def _rstd(ctx: RuleContext, variance: Interval, eps: float) -> Interval:
    """1 / sqrt(var + eps) in the compute format (rsqrt, or 1 / sqrt: both within rsqrt's
    allowance)."""
    c = ctx.compute
    shifted = ew.add(variance, constant(ctx, eps), c)
    return ew.library_function(
        lambda v: 1.0 / np.sqrt(v), shifted, c, c, ew.ULP_ERRORS["rsqrt"], increasing=False
    )


@rule("aten.native_group_norm")
def _group_norm(ctx: RuleContext) -> tuple[Interval, Interval, Interval]:
    x, weight, bias, n, channels, _, groups, eps = (
        ctx.arg(i, name)
        for i, name in enumerate(("input", "weight", "bias", "N", "C", "HxW", "group", "eps"))
    )
    a = ctx.operand(x, ctx.compute)
    grouped = a.map(lambda v: v.reshape(n, groups, -1))
    mean, variance = moments(ctx, grouped, (2,), 0.0)
    rstd = _rstd(ctx, variance, float(eps))
    per_channel = channels // groups

    def expand(v: Array) -> Array:
        return np.repeat(v, per_channel, axis=1).reshape(n, channels, 1)

    flat = a.map(lambda v: v.reshape(n, channels, -1))
    w = _optional(ctx, weight)
    b = _optional(ctx, bias)
    out = _affine_normalise(
        ctx,
        flat,
        mean.map(expand),
        rstd.map(expand),
        w.map(lambda v: v.reshape(1, channels, 1)) if w is not None else None,
        b.map(lambda v: v.reshape(1, channels, 1)) if b is not None else None,
    )
    shape = tuple(x.shape)
    return (
        out.map(lambda v: v.reshape(shape)),
        mean.map(lambda v: v.reshape(n, groups)).to_format(ctx.fmt),
        rstd.map(lambda v: v.reshape(n, groups)).to_format(ctx.fmt),
    )


@rule("aten.native_batch_norm", "aten._native_batch_norm_legit_no_training")
def _batch_norm(ctx: RuleContext) -> Any:
    """Evaluation mode: (x - running_mean) / sqrt(running_var + eps) * w + b, per channel."""
    x, weight, bias, running_mean, running_var = (
        ctx.arg(i, n)
        for i, n in enumerate(("input", "weight", "bias", "running_mean", "running_var"))
    )
    no_training = ctx.call.functional == "aten._native_batch_norm_legit_no_training"
    training = False if no_training else bool(ctx.arg(5, "training"))
    eps = float(ctx.arg(6 if no_training else 7, "eps"))
    if training:  # float32 and float64 as ATen's kernel computes them; others decomposed
        momentum = float(ctx.arg(6, "momentum"))
        return batch_norm_training(ctx, x, weight, bias, (running_mean, running_var), momentum, eps)
    shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)

    def per_channel(t: Any) -> Interval | None:
        enclosure = _optional(ctx, t)
        return None if enclosure is None else enclosure.map(lambda v: v.reshape(shape))

    mean, variance = per_channel(running_mean), per_channel(running_var)
    assert mean is not None
    assert variance is not None
    rstd = _rstd(ctx, variance, eps)
    out = _affine_normalise(
        ctx, ctx.operand(x, ctx.compute), mean, rstd, per_channel(weight), per_channel(bias)
    )
    return (out, *(None for _ in ctx.outputs[1:]))
