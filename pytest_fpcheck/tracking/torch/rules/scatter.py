"""Accumulating scatters: ``scatter_add`` (max-pooling's backward reaches it), ``index_add``
and ``embedding_dense_backward`` (an embedding's gradient).

Element ``i`` of the result is ``self[i]`` plus the ``m_i`` source elements the index sends
there, added in the tensor's format in an order the kernel chooses. The bound holds for every
order (Higham, *Accuracy and Stability*, section 4.2): the exact sums of the lower and of the
upper ends (accumulated in float64, with their own gamma_m(2**-53) allowance), widened by
gamma_m(u) times the sum of the magnitudes plus m smallest subnormals, rounded outward onto the
result format (:func:`pytest_fpcheck.interval.kernels.accumulated_bounds`, one compiled pass).
An element no source element reaches is ``self[i]`` itself: its own enclosure, with no
allowance. Every partial sum of some order is at most the sum of the magnitudes times
1 + gamma_m(u): where that may pass the format's largest finite number, a partial sum may
overflow to an infinity that later terms cannot undo (3e38 + 3e38 - 3e38 in float32), and the
element is the whole line.

An embedding's gradient (ATen's ``embedding_dense_backward_cpu``) adds each row of the upstream
gradient into the row of its index, in a zero-filled tensor of the gradient's format (float16
and bfloat16: each addition computed in float32 and rounded to the format), skipping
``padding_idx``: the same bound, each weight row's m the count of its index. Scaling by the
inverse frequency (``scale_grad_by_freq``) is left to the decomposition.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ....adapters.torch import internal
from ....interval.core import Interval
from ....interval.kernels import accumulated_bounds, row_sums
from ..context import RuleContext
from ._common import as_tensor, raise_unsupported, rule

__all__: list[str] = []


@rule("aten.scatter_add")
def _scatter_add(ctx: RuleContext) -> Interval:
    target, dim, index, source = (
        ctx.arg(0, "self"),
        ctx.arg(1, "dim"),
        ctx.arg(2, "index"),
        ctx.arg(3, "src"),
    )
    return _added_into(ctx, target, source, lambda base, added: base.scatter_add(dim, index, added))


@rule("aten.index_add")
def _index_add(ctx: RuleContext) -> Interval:
    """``self.index_add(dim, index, source)``: the slices of ``source`` added into those of
    ``self`` the index names, in ATen's CPU kernel one addition at a time in the tensor's
    format; a scaling ``alpha`` other than 1 (one more rounding per term) is left to the
    decomposition."""
    target, dim, index, source = (
        ctx.arg(0, "self"),
        ctx.arg(1, "dim"),
        ctx.arg(2, "index"),
        ctx.arg(3, "source"),
    )
    if float(ctx.arg(4, "alpha", 1)) != 1:
        raise_unsupported(ctx, "index_add with alpha other than 1")
    return _added_into(ctx, target, source, lambda base, added: base.index_add(dim, index, added))


def _added_into(
    ctx: RuleContext,
    target: torch.Tensor,
    source: torch.Tensor,
    add: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Interval:
    """The enclosure of ``add(target, source)``, a scatter that adds each source element into
    one target element: the scatter run on float64 lower ends, upper ends, magnitudes and ones
    (the count of terms of each element), then :func:`.kernels.accumulated_bounds`."""
    a, b = ctx.operand(target), ctx.operand(source)
    with internal(), torch.no_grad():

        def scatter(into: np.ndarray, values: np.ndarray) -> np.ndarray:
            base = as_tensor(np.broadcast_to(into, tuple(target.shape)).copy())
            added = as_tensor(np.broadcast_to(values, tuple(source.shape)).copy())
            out: np.ndarray = add(base, added).numpy()
            return out

        lo = scatter(a.lo, b.lo)
        hi = lo if a.is_point and b.is_point else scatter(a.hi, b.hi)
        total = scatter(a.magnitude(), b.magnitude())
        count = scatter(np.zeros(()), np.ones(()))
    return Interval(*accumulated_bounds(lo, hi, total, count, ctx.fmt))


@rule("aten.embedding_dense_backward")
def _embedding_dense_backward(ctx: RuleContext) -> Interval:
    """Row k of the weight's gradient: the sum of the gradient's rows whose index is k
    (``padding_idx`` skipped), in any order (see the module docstring)."""
    grad, indices, num_weights, padding_idx, scale_grad_by_freq = ctx.args[:5]
    if scale_grad_by_freq:
        raise_unsupported(ctx, "scale_grad_by_freq")
    width = int(grad.shape[-1]) if grad.dim() else 1
    g = ctx.operand(grad).map(lambda v: np.broadcast_to(v, tuple(grad.shape)).reshape(-1, width))
    index = indices.detach().cpu().numpy().reshape(-1)
    lo, hi, total, count = row_sums(g.lo, g.hi, index, int(padding_idx), int(num_weights))
    return Interval(*accumulated_bounds(lo, hi, total, count, ctx.fmt))
