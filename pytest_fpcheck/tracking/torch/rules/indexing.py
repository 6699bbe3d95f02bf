"""Exact rearrangements, order-preserving selections and points (RENDER III-B).

* **Points**: factories, random fills and uninitialised memory produce exact inputs.
* **Order-preserving operations** (index, gather, scatter, cat, stack, embedding, pad, flip, sort,
  amax, relu, clamp, rounding to integers, ...): the operation is non-decreasing in each floating
  argument, so it is run on the lower ends and on the upper ends (in float64, Python dispatch
  disabled); a boolean argument from an undecided comparison is noted. Views need no rule at all:
  bounds live beside storages (:mod:`pytest_fpcheck.tracking.core.store`).
* **Selections** by a condition (where, masked_fill): the hull of both branches where the
  condition is undecided (:func:`pytest_fpcheck.interval.elementwise.where`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .... import formats as F
from ....adapters.torch import dtype_format, internal
from ....formats import Format
from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.registry import register_rule
from ...core.store import float64_values
from ..context import RuleContext
from ._common import (
    as_tensor,
    flat,
    rule,
)

__all__: list[str] = []


def _point_outputs(ctx: RuleContext) -> tuple[Interval, ...]:
    """Random draws, fills and fresh memory: exact, the values the operation wrote (not an
    in-place operand's values before it, which :meth:`RuleContext.values` gives)."""
    return tuple(Interval.point(float64_values(t)) for t in ctx.outputs)


for _name in (
    "aten.bernoulli",
    "aten.uniform",
    "aten.normal",
    "aten.random",
    "aten.exponential",
    "aten.empty_like",
    "aten.new_empty",
    "aten.new_empty_strided",
    "aten.zeros_like",
    "aten.ones_like",
    "aten.full_like",
    "aten.rand_like",
    "aten.randn_like",
    "aten.zero",
    "aten.fill",
):
    register_rule(_name, _point_outputs)


def _swap_floats(value: Any, pick: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``value`` with each floating tensor replaced by ``pick``'s host tensor, and the other
    tensors (indices, masks) moved to the host beside them."""
    if isinstance(value, torch.Tensor):
        return pick(value) if dtype_format(value.dtype) is not None else value.cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(_swap_floats(v, pick) for v in value)
    return value


def _monotone(ctx: RuleContext) -> Any:
    """Run the op on float64 lower ends, then on upper ends; booleans must be decided."""
    for value in flat(ctx.args) + flat(list(ctx.kwargs.values())):
        if isinstance(value, torch.Tensor) and value.dtype == torch.bool:
            _, decided = ctx.condition(value)
            if not decided.all():
                ctx.note(
                    "a boolean argument depends on an undecided comparison; the bounds "
                    "follow the observed outcome"
                )
    ends: dict[int, Interval] = {}

    def end(index: int) -> Callable[[torch.Tensor], torch.Tensor]:
        def pick(t: torch.Tensor) -> torch.Tensor:
            key = id(t)
            if key not in ends:
                ends[key] = ctx.interval(t)
            interval = ends[key]
            return as_tensor(interval.lo if index == 0 else interval.hi)

        return pick

    # an out= overload's output arguments are the result's memory: the ends are computed by
    # the functional overload the packet picks without them
    outs = {a.name for a in ctx.call.func._schema.arguments if a.is_out}
    kwargs = {k: v for k, v in ctx.kwargs.items() if k not in outs}
    func = ctx.call.func.overloadpacket if outs else ctx.call.func
    with internal(), torch.no_grad():
        low = func(*_swap_floats(ctx.args, end(0)), **_swap_floats(kwargs, end(0)))
        all_points = all(i.is_point for i in ends.values())
        high = (
            low
            if all_points
            else func(*_swap_floats(ctx.args, end(1)), **_swap_floats(kwargs, end(1)))
        )
    lows = low if isinstance(low, (tuple, list)) else (low,)
    highs = high if isinstance(high, (tuple, list)) else (high,)
    inexact = _inexact_scalars(ctx)
    result: list[Interval | None] = []
    for position, (lo_t, hi_t) in enumerate(zip(lows, highs, strict=True)):
        if not isinstance(lo_t, torch.Tensor) or dtype_format(lo_t.dtype) is None:
            result.append(None)
            continue
        lo_a = float64_values(lo_t)
        ends_of = Interval.point(lo_a) if all_points else Interval(lo_a, float64_values(hi_t))
        fmt = _output_format(ctx, position)
        if inexact and fmt is not None:
            # a number the format does not hold (clamp's 0.01) is rounded to it (or to the
            # compute format, then the result to it) by the kernel: the ends computed with
            # the number itself, rounded outward onto the format, hold that (monotone rounding)
            ends_of = ends_of.to_format(fmt)
        result.append(ends_of)
    return tuple(result)


def _inexact_scalars(ctx: RuleContext) -> bool:
    """Whether a Python number among the arguments is not exactly a number of the result's
    format (an integer too: float32 holds no 2**24 + 1)."""
    numbers = [
        v
        for v in flat(ctx.args) + flat(list(ctx.kwargs.values()))
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    if not numbers:
        return False
    values = np.array(numbers, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return bool((F.round_to(finite, ctx.fmt) != finite).any())


def _output_format(ctx: RuleContext, position: int) -> Format | None:
    outputs = ctx.outputs
    if position < len(outputs):
        return dtype_format(outputs[position].dtype)
    return ctx.fmt


for _name in (
    "aten.contiguous",
    "aten.stack",
    "aten.index",
    "aten.index_select",
    "aten.gather",
    "aten.take",
    "aten.take_along_dim",
    "aten.embedding",
    "aten.repeat",
    "aten.tile",
    "aten.flip",
    "aten.roll",
    "aten.tril",
    "aten.triu",
    "aten.constant_pad_nd",
    "aten.reflection_pad1d",
    "aten.reflection_pad2d",
    "aten.replication_pad1d",
    "aten.replication_pad2d",
    "aten.scatter",
    "aten.slice_scatter",
    "aten.select_scatter",
    "aten.diagonal_scatter",
    "aten.index_put",
    "aten.masked_scatter",
    "aten.expand_copy",
    "aten.permute_copy",
    "aten.unfold_copy",
    "aten.diag_embed",
    "aten.sort",
    "aten.topk",
    "aten.median",
    "aten.kthvalue",
    "aten.amax",
    "aten.amin",
    "aten.max",
    "aten.min",
    "aten.maximum",
    "aten.minimum",
    "aten.fmax",
    "aten.fmin",
    "aten.cummax",
    "aten.cummin",
    "aten.relu",
    "aten.hardtanh",
    "aten.clamp",
    "aten.clamp_min",
    "aten.clamp_max",
    "aten.floor",
    "aten.ceil",
    "aten.trunc",
    "aten.round",
    "aten.sign",
    "aten.sgn",
    "aten.alias_copy",
    "aten.lift_fresh_copy",
    "aten.max_pool2d_with_indices",
    "aten.max_pool1d",
    "aten.max_pool2d",
    "aten.adaptive_max_pool2d",
):
    register_rule(_name, _monotone)


@rule("aten.clone")
def _clone(ctx: RuleContext) -> Interval:
    """A copy: the operand's enclosure itself, in memory of its own in C order (a contiguous
    result's record takes it as it is, where an operation run on the ends gives memory a
    tensor owns, which the record copies again)."""
    a = ctx.interval(ctx.args[0])
    low = np.array(a.lo, dtype=np.float64, order="C")
    if a.is_point:
        return Interval.point(low)
    return Interval(low, np.array(a.hi, dtype=np.float64, order="C"))


@rule("aten.cat")
def _cat(ctx: RuleContext) -> Any:
    """Tensors of the result's type joined along ``dim``: their enclosures joined, in memory of
    their own (a contiguous result's record takes it as it is); skipped as ``torch.cat`` skips
    them, the empty tensors of shape (0,). Operands of other types (converted by the kernel)
    take the monotone rule."""
    tensors, out = list(ctx.arg(0, "tensors")), ctx.outputs[0]
    if not all(isinstance(t, torch.Tensor) and t.dtype == out.dtype for t in tensors):
        return _monotone(ctx)
    parts = [ctx.interval(t) for t in tensors if t.shape != (0,)]
    if not parts:  # every operand empty
        return _monotone(ctx)
    axis = int(ctx.arg(1, "dim", 0)) % out.dim()

    def joined(ends: list[np.ndarray]) -> np.ndarray:
        result = np.empty(tuple(out.shape))  # C order, whatever the operands' layout
        np.concatenate(ends, axis=axis, out=result)
        return result

    low = joined([p.lo for p in parts])
    if all(p.is_point for p in parts):
        return Interval.point(low)
    return Interval(low, joined([p.hi for p in parts]))


@rule("aten.slice_backward", "aten.select_backward")
def _placed(ctx: RuleContext) -> Interval:
    """A gradient placed into zeros of the input's shape (``slice_backward``: at
    ``[start:end:step]`` of ``dim``, which slices as Python's do; ``select_backward``: at
    ``index`` of ``dim``): its enclosure there, exact zeros elsewhere, in memory of its own."""
    g = ctx.interval(ctx.args[0])
    shape = tuple(int(k) for k in ctx.arg(1, "input_sizes"))
    dim = int(ctx.arg(2, "dim")) % len(shape)
    if ctx.call.functional == "aten.slice_backward":
        start, end, step = (ctx.arg(i, name) for i, name in ((3, "start"), (4, "end"), (5, "step")))
        place: Any = slice(int(start), int(end), int(step))
    else:
        place = int(ctx.arg(3, "index"))
    where = (slice(None),) * dim + (place,)

    def placed(end: np.ndarray) -> np.ndarray:
        result = np.zeros(shape)
        result[where] = end
        return result

    low = placed(g.lo)
    return Interval.point(low) if g.is_point else Interval(low, placed(g.hi))


@rule("aten.nan_to_num")
def _nan_to_num(ctx: RuleContext) -> Interval:
    """Finite values unchanged, +inf and -inf replaced by ``posinf`` and ``neginf`` (the
    format's largest finite numbers by default), NaN by ``nan`` (0 by default), each
    replacement converted to the tensor's format (rounded to nearest). Not monotone when a
    replacement lies inside the finite range (``posinf=1e4``: an enclosure [3.4e38, inf] maps
    to {3.4e38, 1e4}), so each element's enclosure is the hull of its finite part and the
    replacements its ends allow: ``posinf`` where it reaches +inf, ``neginf`` where -inf,
    ``nan`` where it is the whole line ("may be NaN")."""
    a = ctx.interval(ctx.args[0])
    fmt = ctx.fmt
    top = fmt.max_finite

    def replacement(index: int, name: str, default: float) -> tuple[float, float]:
        """The replacement as the kernel may hold it: rounded to the format directly or
        through float32 (``static_cast<Half>(double)`` rounds twice), both ends of the hull."""
        value = ctx.arg(index, name, None)
        number = np.asarray(default if value is None else float(value))
        direct = float(F.round_to(number, fmt))
        twice = float(F.round_to(F.round_to(number, "float32"), fmt))
        return min(direct, twice), max(direct, twice)

    (nan_lo, nan_hi), (posinf_lo, posinf_hi), (neginf_lo, neginf_hi) = (
        replacement(1, "nan", 0.0),
        replacement(2, "posinf", top),
        replacement(3, "neginf", -top),
    )
    lo, hi = np.broadcast_arrays(a.lo, a.hi)
    # a NaN end (an untracked NaN's point enclosure) may be NaN: the whole line first
    undefined = np.isnan(lo) | np.isnan(hi)
    lo, hi = np.where(undefined, -np.inf, lo), np.where(undefined, np.inf, hi)
    finite = (lo <= top) & (hi >= -top)  # some finite value in the enclosure
    low = np.where(finite, np.maximum(lo, -top), np.inf)
    high = np.where(finite, np.minimum(hi, top), -np.inf)
    reaches_up, reaches_down = np.isposinf(hi), np.isneginf(lo)
    low = np.where(reaches_up, np.minimum(low, posinf_lo), low)
    high = np.where(reaches_up, np.maximum(high, posinf_hi), high)
    low = np.where(reaches_down, np.minimum(low, neginf_lo), low)
    high = np.where(reaches_down, np.maximum(high, neginf_hi), high)
    maybe_nan = reaches_up & reaches_down
    low = np.where(maybe_nan, np.minimum(low, nan_lo), low)
    high = np.where(maybe_nan, np.maximum(high, nan_hi), high)
    return Interval(low, high)


@rule("aten.where")
def _where(ctx: RuleContext) -> Interval:
    condition, decided = ctx.condition(ctx.arg(0, "condition"))
    a, b = ctx.operand(ctx.arg(1, "self")), ctx.operand(ctx.arg(2, "other"))
    return ew.where(condition, decided, a, b)


@rule("aten.masked_fill")
def _masked_fill(ctx: RuleContext) -> Interval:
    condition, decided = ctx.condition(ctx.arg(1, "mask"))
    return ew.where(condition, decided, ctx.operand(ctx.arg(2, "value")), ctx.interval(ctx.args[0]))
