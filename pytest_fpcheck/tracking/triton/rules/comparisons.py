"""Comparisons and selection in Triton kernels: comparisons give exact booleans where the
intervals decide them (undecided lanes are marked, see :mod:`..handles`); ``where`` takes the
hull of both branches on the other lanes (RENDER's conditional rule, III-B-4).
"""

from __future__ import annotations

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

__all__ = []

_COMPARISONS = {
    "LT": (np.less, "lt"),
    "GT": (np.greater, "gt"),
    "LE": (np.less_equal, "le"),
    "GE": (np.greater_equal, "ge"),
    "EQ": (np.equal, "eq"),
    "NE": (np.not_equal, "ne"),
}


def _decided(kind: str, a: Interval, b: Interval) -> np.ndarray:
    """Lanes where the comparison has one outcome for every pair of values in the intervals."""
    with np.errstate(invalid="ignore"):
        if kind in ("lt", "ge"):
            decided = (a.hi < b.lo) | (a.lo >= b.hi)
        elif kind in ("gt", "le"):
            decided = (a.lo > b.hi) | (a.hi <= b.lo)
        else:  # eq, ne
            both_points = (a.lo == a.hi) & (b.lo == b.hi)
            decided = (a.hi < b.lo) | (a.lo > b.hi) | both_points
        may_be_nan = (np.isneginf(a.lo) & np.isposinf(a.hi)) | (
            np.isneginf(b.lo) & np.isposinf(b.hi)
        )
    result: np.ndarray = decided & ~may_be_nan
    return result


def _compare(op: KernelOp) -> None:
    """The lanes the intervals leave undecided, and the outcome on the others, taken from the
    intervals (a representative pair), not from the interpreter's data: the interpreter compares
    bfloat16 bit patterns, and its bfloat16 values themselves may be wrong."""
    a, b = op.args
    x, y = op.interval(a), op.interval(b)
    function, kind = _COMPARISONS[op.name[-2:]]
    with np.errstate(invalid="ignore"):
        outcome = function(x.lo, y.lo)
        if op.name.startswith("fcmpU"):
            outcome = outcome | np.isnan(x.lo) | np.isnan(y.lo)
    h.set_outcome(op.result, np.asarray(outcome, bool))
    if x.is_point and y.is_point:
        return
    if a is b:
        # a value compared with itself (``x != x``, the NaN test): one value, not two
        # independent ones in the same interval; decided unless it may be NaN
        h.set_undecided(op.result, np.isneginf(x.lo) & np.isposinf(x.hi))
        return
    h.set_undecided(op.result, ~_decided(kind, x, y))


for _order in ("O", "U"):
    for _suffix in _COMPARISONS:
        RULES[f"fcmp{_order}{_suffix}"] = _compare


@rule("select")
def _select(op: KernelOp) -> None:
    condition, a, b = op.args
    if h.tainted(condition):
        raise op.fail("tl.where on a condition that depends on rounding")
    open_lanes = h.undecided(condition)
    if not h.is_floating(op.result):
        if open_lanes is not None:
            choices_differ = np.broadcast_to(a.data != b.data, open_lanes.shape) & open_lanes
            h.set_taint(op.result, bool(choices_differ.any()) or h.tainted(a) or h.tainted(b))
        else:
            h.set_taint(op.result, h.tainted(a) or h.tainted(b))
        return
    decided = np.ones(np.shape(condition.data), bool) if open_lanes is None else ~open_lanes
    taken = ew.where(h.outcome(condition), decided, op.interval(a), op.interval(b))
    set_result(op, taken)
