"""Losses that reach the tracker as their own kernels (``nll_loss_forward``): the picked terms'
weighted products, summed with gamma_k in the compute format. ``mse_loss`` runs as its kernel's
steps instead (:mod:`pytest_fpcheck.tracking.torch.substitutes`).

``nll_loss_backward`` (what a cross-entropy's ``loss.backward()`` runs after the log-softmax) is
ATen's kernel read step by step (``LossNLL.cpp``, ``nll_loss_backward_out_frame``; the CUDA kernel
takes the same steps): the gradient is zero but at each kept sample's target t, where it is
``-w[t] * g[i]`` (no reduction, a 2-d input) or ``w[t] * -(g / W)`` (mean over the total weight W)
or ``w[t] * -g`` (sum), each operation in the tensor's format. A float16 or bfloat16 operation
computes in float32 and rounds once more: the enclosure of each step is rounded outward onto the
tensor's format, whose grid holds the float32 one (rounding to nearest is monotone and keeps a
grid number, so it stays between the rounded ends; RENDER section II-C's outward rounding).
"""

from __future__ import annotations

import numpy as np

from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.linalg import reduce_sum
from ..context import RuleContext
from ._common import (
    rule,
    sum_factor,
)

__all__: list[str] = []

_NONE, _MEAN = 0, 1


@rule("aten.nll_loss_forward")
def _nll_loss(ctx: RuleContext) -> tuple[Interval, Interval]:
    """-sum(w[t_i] * x[i, t_i]) / (sum w[t_i] for mean), ignored targets excluded."""
    x, target, weight, reduction, ignore_index = ctx.args[:5]
    a = ctx.operand(x, ctx.compute)
    t = target.detach().cpu().numpy()
    if a.lo.ndim == 1:
        a = a.map(lambda v: v.reshape(1, -1))
        t = t.reshape(1)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    rows = np.arange(a.lo.shape[0])
    picked = a.map(lambda v: v[rows, safe] if v.ndim == 2 else v[rows, safe, ...])
    w = (
        ctx.operand(weight, ctx.compute).map(lambda v: v[safe])
        if weight is not None
        else Interval.point(np.ones(safe.shape))
    )
    w = Interval(np.where(keep, w.lo, 0.0), np.where(keep, w.hi, 0.0))
    terms = ew.negate(ew.mul(picked, w, ctx.compute, operand_bits=64))
    c = ctx.compute
    if reduction == _NONE:  # one term per sample: a 0-d result for a 1-d input
        shaped = terms.map(lambda v: v.reshape(tuple(target.shape)))
        return shaped.to_format(ctx.fmt), Interval.point(np.asarray(0.0))
    axes = tuple(range(terms.lo.ndim))
    total = reduce_sum(terms, axes, False, c, sum_factor(ctx, c), accumulate=c)
    weight_total = reduce_sum(w, axes, False, c, sum_factor(ctx, c), accumulate=c)
    if reduction == _MEAN:
        return ew.div(total, weight_total, ctx.fmt), weight_total.to_format(ctx.fmt)
    return total.to_format(ctx.fmt), weight_total.to_format(ctx.fmt)


@rule("aten.nll_loss_backward")
def _nll_loss_backward(ctx: RuleContext) -> Interval:
    """Zero, and at each kept sample's target: -w[t] g[i] (no reduction, 2-d input), else
    w[t] (-(g / W)) for the mean or w[t] (-g) for the sum; each product and quotient rounded
    outward onto the tensor's format (see the module docstring)."""
    grad, x, target, weight, reduction, ignore_index, total_weight = ctx.args[:7]
    fmt = ctx.fmt
    g = ctx.operand(grad, fmt)
    t = target.detach().cpu().numpy().reshape(-1)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    # the kernel reads the weight's memory as one flat row of classes, whatever its shape
    w = ctx.operand(weight, fmt).map(lambda v: v.reshape(-1)[safe]) if weight is not None else None
    if reduction == _NONE and x.dim() == 2:
        scale = g.map(lambda v: v.reshape(-1))
    else:
        scale = g.map(lambda v: v.reshape(()))
        if reduction == _MEAN:
            scale = ew.div(scale, ctx.operand(total_weight, fmt), fmt)
    picked = ew.negate(scale)
    if w is not None:
        picked = ew.mul(w, picked, fmt)
    shape = (1, x.shape[0]) if x.dim() == 1 else tuple(x.shape)
    lo, hi = np.zeros(shape), np.zeros(shape)
    rows = np.arange(shape[0])[keep]
    lo[rows, safe[keep]] = np.broadcast_to(picked.lo, keep.shape)[keep]
    hi[rows, safe[keep]] = np.broadcast_to(picked.hi, keep.shape)[keep]
    return Interval(lo.reshape(x.shape), hi.reshape(x.shape))
