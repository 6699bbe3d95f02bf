"""Comparisons, predicates and logical operations (RENDER III-B-4).

A comparison's result is exact where the operands' intervals decide it and [0, 1] where not, so
``where``/``masked_fill`` and ``max``/``min`` downstream carry the undecidedness on. Other
integer and boolean results of floating operations (``isnan``, ``argmax``, ``nonzero``, ...) are
taken as observed: RENDER's dynamic rule follows the executed path. Logical operations combine
0/1 intervals exactly.
"""

from __future__ import annotations

import numpy as np

from ....interval.core import Interval
from ....interval.registry import register_rule
from ..context import RuleContext
from ._common import (
    rule,
)

__all__: list[str] = []


def _compare(ctx: RuleContext) -> Interval:
    """A comparison's result is exact where the intervals decide it, [0, 1] where not."""
    a, b = ctx.interval(ctx.args[0]), ctx.interval(ctx.args[1])
    op = ctx.call.functional.split(".")[-1]
    with np.errstate(invalid="ignore"):
        if op in ("gt", "lt"):
            x, y = (a, b) if op == "gt" else (b, a)
            sure, never = x.lo > y.hi, x.hi <= y.lo
        elif op in ("ge", "le"):
            x, y = (a, b) if op == "ge" else (b, a)
            sure, never = x.lo >= y.hi, x.hi < y.lo
        else:
            point = (a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)
            apart = (a.hi < b.lo) | (b.hi < a.lo)
            sure, never = (point, apart) if op == "eq" else (apart, point)
    value = ctx.values(ctx.outputs[0])
    decided = sure | never
    if decided.all():
        return Interval.point(value)
    return Interval(np.where(decided, value, 0.0), np.where(decided, value, 1.0))


for _name in ("aten.gt", "aten.lt", "aten.ge", "aten.le", "aten.eq", "aten.ne"):
    register_rule(_name, _compare)


def _observed(ctx: RuleContext) -> tuple[None, ...]:
    """Integer and boolean results of floating operations (predicates, indices, counts) are
    taken as observed: RENDER's dynamic rule follows the executed path (section III-B-4). Only
    comparisons carry their decidedness on, for where/masked_fill and max/min."""
    return tuple(None for _ in ctx.outputs)


for _name in (
    "aten.isnan",
    "aten.isinf",
    "aten.isfinite",
    "aten.isposinf",
    "aten.isneginf",
    "aten.signbit",
    "aten.isclose",
    "aten.argmax",
    "aten.argmin",
    "aten.argsort",
    "aten.nonzero",
    "aten.count_nonzero",
    "aten.any",
    "aten.all",
    "aten.equal",
    "aten.searchsorted",
    "aten.bucketize",
):
    register_rule(_name, _observed)


@rule("aten.logical_not", "aten.bitwise_not")
def _logical_not(ctx: RuleContext) -> Interval:
    a = ctx.interval(ctx.args[0])
    return Interval.point(1 - a.lo) if a.is_point else Interval(1 - a.hi, 1 - a.lo)


@rule("aten.logical_and", "aten.logical_or", "aten.bitwise_and", "aten.bitwise_or")
def _logical(ctx: RuleContext) -> Interval:
    a, b = ctx.interval(ctx.args[0]), ctx.interval(ctx.args[1])
    combine = np.minimum if ctx.call.functional.endswith("and") else np.maximum
    return Interval(combine(a.lo, b.lo), combine(a.hi, b.hi))
