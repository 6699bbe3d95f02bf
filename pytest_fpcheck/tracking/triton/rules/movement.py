"""Exact data movement and integer arithmetic in Triton kernels: reshape, broadcast, transpose,
cat, join, split, splat and gather rearrange ``lo`` and ``hi`` the same way; integer and pointer
operations carry no intervals, only whether they depend on rounding (:mod:`..handles`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ....interval import elementwise as ew
from ....interval.core import Interval
from .. import handles as h
from .base import (
    RULES,
    KernelOp,
    rule,
    set_result,
)

__all__ = ["EXACT_INTEGER_OPS"]


def _move(op: KernelOp, transform: Callable[..., Any], values: list[Any] | None = None) -> None:
    """Apply the exact rearrangement ``transform`` (on the arrays of the value arguments, in
    order, or of ``values``) to ``lo``, ``hi`` and the undecided lanes."""
    if values is None:
        values = [a for a in op.args if hasattr(a, "data") and hasattr(a, "attr")]
    results = op.result if isinstance(op.result, tuple) else (op.result,)
    taint = any(h.tainted(v) for v in values)
    for r in results:
        h.set_taint(r, taint)
    if any(h.is_floating(v) for v in values):
        intervals = [op.interval(v) for v in values]
        if all(i.is_point for i in intervals):
            return
        lo = transform(*[i.lo for i in intervals])
        hi = transform(*[i.hi for i in intervals])
        if isinstance(lo, tuple):
            for r, l_, h_ in zip(results, lo, hi, strict=True):
                h.set_interval(r, Interval(l_, h_))
        else:
            h.set_interval(results[0], Interval(lo, hi))
        return
    masks = [h.undecided(v) for v in values]
    if any(m is not None for m in masks):
        full = [
            np.zeros(np.shape(v.data), bool) if m is None else m
            for v, m in zip(values, masks, strict=True)
        ]
        moved = transform(*full)
        for r, m in zip(results, moved if isinstance(moved, tuple) else (moved,), strict=True):
            h.set_undecided(r, m)


def _data_rule(name: str, transform: Callable[[KernelOp], Callable[..., Any]]) -> None:
    RULES[name] = lambda op: _move(op, transform(op))


_data_rule("reshape", lambda op: lambda x: np.reshape(x, op.args[1]))
_data_rule("trans", lambda op: lambda x: np.transpose(x, op.args[1]))
_data_rule("expand_dims", lambda op: lambda x: np.expand_dims(x, op.args[1]))
_data_rule("broadcast", lambda op: lambda x: np.broadcast_to(x, op.args[1]))
_data_rule("cat", lambda op: lambda a, b: np.concatenate([a, b]))
_data_rule("join", lambda op: lambda a, b: np.stack([a, b], axis=-1))
_data_rule("split", lambda op: lambda x: (x[..., 0], x[..., 1]))
_data_rule(
    "splat",
    lambda op: lambda x: np.full(op.args[0].shape, np.reshape(x, -1)[0], dtype=np.asarray(x).dtype),
)
_data_rule("unsplat", lambda op: lambda x: np.reshape(x, -1)[:1])


@rule("gather")
def _gather(op: KernelOp) -> None:
    source, indices, axis = op.args
    if h.tainted(indices):
        raise op.fail("tl.gather with indices that depend on rounding")
    index = np.asarray(indices.data)
    _move(op, lambda x: np.take_along_axis(x, index, axis=axis), [source])


#: Builder methods on integers, pointers and masks: no intervals; a result is rounding-dependent
#: (tainted) when an argument is, and a mask combines its operands' undecided lanes.
EXACT_INTEGER_OPS = (
    "mul", "sdiv", "udiv", "srem", "urem", "add", "sub", "shl", "lshr", "ashr", "minsi",
    "minui", "maxsi", "maxui", "icmpSLE", "icmpSLT", "icmpSGE", "icmpSGT", "icmpULE",
    "icmpULT", "icmpUGE", "icmpUGT", "icmpEQ", "icmpNE", "and", "xor", "or", "idiv",
    "umulhi", "iabs", "int_cast", "addptr", "make_range", "get_program_id",
    "get_num_programs", "histogram",
)  # fmt: skip


def _integer(op: KernelOp) -> None:
    values = [a for a in op.args if hasattr(a, "data") and hasattr(a, "attr")]
    if h.is_floating(op.result):
        raise op.fail(
            f"builder operation {op.name!r} on floating values",
            how="bit operations on floating values have no interval rule; run this kernel "
            "outside fp.track()",
        )
    masks = [h.undecided(v) for v in values]
    flippable = any(m is not None for m in masks)
    # a number made from a comparison rounding may flip (its cast to int32, an index) has
    # other possible values no undecided mask describes: it depends on rounding
    boolean = np.asarray(op.result.data).dtype == np.bool_
    h.set_taint(op.result, any(h.tainted(v) for v in values) or (flippable and not boolean))
    if flippable:
        shape = np.shape(op.result.data)
        combined = np.zeros(shape, bool)
        for m in masks:
            if m is not None:
                combined = combined | np.broadcast_to(m, shape)
        h.set_undecided(op.result, combined)


def _fabs_float8(op: KernelOp) -> None:
    """``tl.abs`` of float8 is ``and`` with 0x7F on the bits."""
    a, b = op.args
    if h.is_floating(a):
        if not np.all(np.asarray(b.data) == 0x7F):
            raise op.fail("a bit operation on floating values other than float8 abs")
        set_result(op, ew.absolute(op.interval(a)))
        return
    _integer(op)


for _name in EXACT_INTEGER_OPS:
    RULES[_name] = _integer
RULES["and"] = _fabs_float8
