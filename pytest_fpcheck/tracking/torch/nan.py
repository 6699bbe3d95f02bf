"""Where a possible NaN goes: the output elements that may depend on an input element whose
enclosure is the whole line, found from the operation's dependence structure, without running
anything (issue 17: tracking never executes an operation twice, nor moves the random stream).

An enclosure that is the whole line ``[-inf, +inf]`` also stands for NaN (its value may be NaN:
an operation without a rule, an overflow, a division by an interval holding 0). A rule bounds
real values and may map such an operand to something narrower (``relu`` to ``[0, inf]``, a
maximum to a half line), but NaN propagates through most operations: so every output element
that could depend on such an operand element is made the whole line too. Sound first: the
dependence structure is over-approximated, never under.

* **Rearrangements and selections** (clone, cat, gather, index, embedding, pads, scatters,
  where, masked_fill, copies): the rule moves each operand's enclosure to where its value goes,
  whole lines included, so nothing is added (an element the operation only moves cannot turn
  NaN elsewhere).
* **Gradient scaling** (``_amp_foreach_non_finite_check_and_unscale``, ``_amp_update_scale``):
  their rules bound a possibly-NaN operand themselves (an unscaled whole line is the whole
  line; ``found_inf`` is 0 or 1, never NaN, and a NaN scale's products are the whole line), so
  nothing is added: one unbounded gradient element no longer makes every gradient and the
  scale the whole line.
* **Element-wise operations** (PyTorch's ``pointwise`` tag, casts): the same positions, through
  broadcasting.
* **Reductions and operations along a dimension** (sums, means, extrema, variance, softmax,
  cumulative sums, sorts, layer norm over its normalised dimensions): the whole reduced rows.
* **Matrix products** (mm, bmm, addmm, baddbmm, mv, addmv): row ``i`` of the first factor
  reaches row ``i`` of the result, column ``j`` of the second factor column ``j``; a bias by
  broadcasting.
* **Anything else**: the whole output.

Any element whose computed ends are NaN (``inf - inf`` inside a rule) becomes the whole line as
well.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...adapters.torch import dtype_format
from ...errors import StaleBoundsError
from ...interval.core import Interval, is_whole_line
from ..core.store import STORE
from .context import RuleContext

__all__ = ["propagate", "unbounded_mask", "whole_line_outputs"]

#: the rule itself moves whole lines to where their values go (module docstring)
_MOVEMENT = frozenset(
    f"aten.{name}"
    for name in (
        "clone",
        "contiguous",
        "cat",
        "stack",
        "index",
        "index_select",
        "gather",
        "take",
        "take_along_dim",
        "embedding",
        "repeat",
        "tile",
        "flip",
        "roll",
        "tril",
        "triu",
        "constant_pad_nd",
        "reflection_pad1d",
        "reflection_pad2d",
        "replication_pad1d",
        "replication_pad2d",
        "slice_scatter",
        "select_scatter",
        "diagonal_scatter",
        "masked_scatter",
        "expand_copy",
        "permute_copy",
        "unfold_copy",
        "diag_embed",
        "alias_copy",
        "lift_fresh_copy",
        "where",
        "masked_fill",
    )
)
#: the rules bound possibly-NaN operands themselves (module docstring)
_SELF_PROPAGATING = frozenset(
    ("aten._amp_foreach_non_finite_check_and_unscale", "aten._amp_update_scale")
)
#: element-wise without PyTorch's pointwise tag: casts and copies (a copy's destination is
#: overwritten: only the source reaches it, by broadcasting)
_ELEMENTWISE = frozenset(("aten._to_copy", "aten.to", "aten.copy"))
#: operations along ``dim`` (all dimensions when it is absent or None)
_ALONG_DIM = frozenset(
    f"aten.{name}"
    for name in (
        "sum",
        "nansum",
        "mean",
        "nanmean",
        "prod",
        "amax",
        "amin",
        "max",
        "min",
        "aminmax",
        "argmax",
        "argmin",
        "any",
        "all",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "logsumexp",
        "norm",
        "linalg_vector_norm",
        "_softmax",
        "_log_softmax",
        "softmax",
        "log_softmax",
        "cumsum",
        "cumprod",
        "cummax",
        "cummin",
        "logcumsumexp",
        "sort",
        "topk",
        "median",
        "nanmedian",
        "kthvalue",
        "mode",
    )
)
_MATMULS = frozenset(("aten.mm", "aten.bmm", "aten.addmm", "aten.baddbmm", "aten.mv", "aten.addmv"))
#: of the matrix products: which tensor arguments are (bias, left factor, right factor)
_MATMUL_OPERANDS = {
    "aten.mm": (None, 0, 1),
    "aten.bmm": (None, 0, 1),
    "aten.mv": (None, 0, 1),
    "aten.addmm": (0, 1, 2),
    "aten.baddbmm": (0, 1, 2),
    "aten.addmv": (0, 1, 2),
}


def unbounded_mask(interval: Interval) -> np.ndarray:
    """Where the enclosure is the whole line (the value may be NaN)."""
    if interval.is_point:
        return np.zeros(np.shape(interval.lo), dtype=bool)
    if is_whole_line(interval.lo, interval.hi):  # everywhere, without reading the ends
        return np.broadcast_to(np.True_, np.shape(interval.lo))
    # two comparisons: NumPy's isneginf and isposinf take two passes each (isinf and signbit)
    mask: np.ndarray = (interval.lo == -np.inf) & (interval.hi == np.inf)
    return mask


def _may_be_unbounded(ctx: RuleContext, t: torch.Tensor) -> bool:
    """Whether ``t``'s enclosure may hold the whole line somewhere, without reading it: not a
    tensor tracking never wrote (an exact input, whose enclosure would be built from its values
    only to find none), nor one whose storage's record says no element is unbounded (the
    record's summary). An in-place operation reads its operands' enclosures from before it
    (the context's snapshot): those are always read."""
    if ctx.call.func._schema.is_mutable:
        return True
    if not STORE.has_record(t):
        return False
    try:
        record = STORE.record_of(t)
    except StaleBoundsError:
        return True  # let the enclosure's own reading decide, as it always did
    return record is not None and record.unbounded


def _masks(ctx: RuleContext, inputs: list[torch.Tensor]) -> dict[int, np.ndarray]:
    """Each operand's possibly-NaN elements, by ``id``, for the operands that have some."""
    masks: dict[int, np.ndarray] = {}
    for t in inputs:
        if id(t) not in masks and dtype_format(t.dtype) is not None and _may_be_unbounded(ctx, t):
            mask = unbounded_mask(ctx.interval(t))
            if mask.any():
                masks[id(t)] = np.broadcast_to(mask, tuple(t.shape))
    return masks


def whole_line_outputs(
    ctx: RuleContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor]
) -> tuple[Interval, ...] | None:
    """The whole line for every output, when every element of every output may depend on a
    possibly-NaN operand element (what :func:`propagate` would make of any rule's result),
    else None: a tracker may then skip the rule's arithmetic (in a backward pass after an
    unbounded loss, every operation's). Floating outputs only; None when there is nothing to
    propagate."""
    if not outputs or any(dtype_format(t.dtype) is None for t in outputs):
        return None
    masks = _masks(ctx, inputs)
    if not masks:
        return None
    whole = []
    for output in outputs:
        shape = tuple(output.shape)
        if not np.broadcast_to(_dependent(ctx, masks, shape), shape).all():
            return None
        whole.append(Interval.whole(shape))
    return tuple(whole)


def propagate(
    ctx: RuleContext, inputs: list[torch.Tensor], outputs: list[torch.Tensor], result: Any
) -> Any:
    """The rule's ``result`` with every output element that may depend on a possibly-NaN input
    element (or whose ends came out NaN) made the whole line (module docstring). Work is
    skipped where nothing can be NaN: operands whose records hold no unbounded element are not
    read (:func:`_may_be_unbounded`), and an output every element of which depends on a
    possibly-NaN element becomes the whole line without looking at the rule's ends."""
    masks = _masks(ctx, inputs)
    intervals = list(result) if isinstance(result, (tuple, list)) else [result]
    for position, (output, interval) in enumerate(zip(outputs, intervals, strict=False)):
        if interval is None or dtype_format(output.dtype) is None:
            continue
        shape = tuple(output.shape)
        dependent = np.broadcast_to(_dependent(ctx, masks, shape), shape) if masks else None
        if dependent is not None and dependent.all():
            intervals[position] = Interval.whole(shape)
            continue
        lo, hi = np.broadcast_to(interval.lo, shape), np.broadcast_to(interval.hi, shape)
        widen = np.isnan(lo) | np.isnan(hi)
        if dependent is not None:
            widen = widen | dependent
        if widen.any():
            intervals[position] = Interval(
                np.where(widen, -np.inf, lo), np.where(widen, np.inf, hi)
            )
    return tuple(intervals)


def _dependent(ctx: RuleContext, masks: dict[int, np.ndarray], shape: tuple[int, ...]) -> Any:
    """A boolean array broadcastable to ``shape``: the output elements that may depend on a
    possibly-NaN input element."""
    name = ctx.call.functional
    if name in _MOVEMENT or name in _SELF_PROPAGATING:
        return np.zeros(shape, dtype=bool)
    whole = np.ones(shape, dtype=bool)
    try:
        if torch.Tag.pointwise in ctx.call.func.tags or name in _ELEMENTWISE:
            return _elementwise(ctx, masks, shape)
        if name in _ALONG_DIM:
            return _along_dim(ctx, masks, shape)
        if name == "aten.native_layer_norm":
            return _layer_norm(ctx, masks, shape)
        if name in _MATMULS:
            return _matmul(ctx, masks, shape)
    except ValueError:  # shapes that do not broadcast as assumed: the whole output
        return whole
    return whole


def _tensor_args(ctx: RuleContext) -> list[Any]:
    """The operation's arguments in schema order (positional, then keyword by name)."""
    schema = ctx.call.func._schema.arguments
    values = list(ctx.args)
    for argument in schema[len(values) :]:
        values.append(ctx.kwargs.get(argument.name))
    return values


def _elementwise(ctx: RuleContext, masks: dict[int, np.ndarray], shape: tuple[int, ...]) -> Any:
    found = np.zeros(shape, dtype=bool)
    skip = id(ctx.args[0]) if ctx.call.functional == "aten.copy" else None  # overwritten
    for value in _tensor_args(ctx):
        if isinstance(value, torch.Tensor) and id(value) in masks and id(value) != skip:
            found = found | np.broadcast_to(masks[id(value)], shape)
    return found


def _argument(ctx: RuleContext, name: str) -> tuple[bool, Any]:
    """(present in the schema, value) of the argument ``name``."""
    for index, argument in enumerate(ctx.call.func._schema.arguments):
        if argument.name == name:
            if index < len(ctx.args):
                return True, ctx.args[index]
            if name in ctx.kwargs:
                return True, ctx.kwargs[name]
            default = argument.default_value if argument.has_default_value() else None
            return True, default
    return False, None


def _along_dim(ctx: RuleContext, masks: dict[int, np.ndarray], shape: tuple[int, ...]) -> Any:
    source = ctx.args[0] if ctx.args else None
    if not isinstance(source, torch.Tensor) or set(masks) - {id(source)} or source.dim() == 0:
        return np.ones(shape, dtype=bool)  # another tensor operand may be NaN
    mask = masks[id(source)]
    ndim = mask.ndim
    _, dim = _argument(ctx, "dim")
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        axes = tuple(range(ndim))
    else:
        axes = tuple(sorted({d % ndim for d in ([dim] if isinstance(dim, int) else dim)}))
    reduced: np.ndarray = np.asarray(mask.any(axis=axes, keepdims=True))
    if len(shape) == ndim:
        return np.broadcast_to(reduced, shape)
    if len(shape) == ndim - len(axes):
        return np.broadcast_to(np.squeeze(reduced, axis=axes), shape)
    return np.ones(shape, dtype=bool)


def _layer_norm(ctx: RuleContext, masks: dict[int, np.ndarray], shape: tuple[int, ...]) -> Any:
    source = ctx.args[0]
    if set(masks) - {id(source)}:
        return np.ones(shape, dtype=bool)  # a NaN weight or bias
    mask = masks[id(source)]
    normalised = len(ctx.args[1])
    axes = tuple(range(mask.ndim - normalised, mask.ndim))
    return np.broadcast_to(mask.any(axis=axes, keepdims=True), shape)


def _matmul(ctx: RuleContext, masks: dict[int, np.ndarray], shape: tuple[int, ...]) -> Any:
    bias, left, right = _MATMUL_OPERANDS[ctx.call.functional]
    args = _tensor_args(ctx)

    def mask(index: int | None) -> np.ndarray | None:
        value = args[index] if index is not None else None
        if isinstance(value, torch.Tensor) and id(value) in masks:
            return masks[id(value)]
        return None

    found = np.zeros(shape, dtype=bool)
    a, b, c = mask(left), mask(right), mask(bias)
    if a is not None:  # rows of the left factor: [..., n, k] -> [..., n, 1] ([n] for mv)
        found = found | np.broadcast_to(a.any(axis=-1, keepdims=len(shape) > 1), shape)
    if b is not None:
        if b.ndim == 1:  # mv's vector reaches every element
            found = found | np.broadcast_to(b.any(), shape)
        else:  # columns of the right factor: [..., k, m] -> [..., 1, m]
            found = found | np.broadcast_to(b.any(axis=-2, keepdims=True), shape)
    if c is not None:  # the bias, broadcast
        found = found | np.broadcast_to(c, shape)
    return found
