"""Losses that reach the tracker as their own kernels (``nll_loss_forward``): the picked terms'
weighted products, summed with gamma_k in the compute format. ``mse_loss`` runs as its kernel's
steps instead (:mod:`pytest_fpcheck.tracking.torch.substitutes`).
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
    if reduction == 0:
        return terms.to_format(ctx.fmt), Interval.point(np.asarray(0.0))
    axes = tuple(range(terms.lo.ndim))
    total = reduce_sum(terms, axes, False, c, sum_factor(ctx, c), accumulate=c)
    weight_total = reduce_sum(w, axes, False, c, sum_factor(ctx, c), accumulate=c)
    if reduction == 1:
        return ew.div(total, weight_total, ctx.fmt), weight_total.to_format(ctx.fmt)
    return total.to_format(ctx.fmt), weight_total.to_format(ctx.fmt)
