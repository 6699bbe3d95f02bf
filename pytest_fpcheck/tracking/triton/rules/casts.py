"""Casts in Triton kernels: between floating formats, outward onto the target format (any
rounding mode lies inside); integers to floats, rounded; floats to integers, exact where the
interval decides the result, rounding-dependent (tainted) where not; bit casts of floating values
refused.
"""

from __future__ import annotations

import numpy as np

from ....interval.core import Interval
from ....interval.rounding import down, up
from .. import handles as h
from .base import (
    KernelOp,
    rule,
    set_result,
)

__all__ = []


@rule("fp_ext", "fp_trunc", "fp_to_fp")
def _float_cast(op: KernelOp) -> None:
    set_result(op, op.interval(op.args[0]))


@rule("si_to_fp", "ui_to_fp")
def _int_to_float(op: KernelOp) -> None:
    source = op.args[0]
    if h.tainted(source):
        raise op.fail(
            "converting to floating point an integer that depends on rounding",
            how="its other possible values are not bounded; compute it from exact data",
        )
    values = np.asarray(source.data)
    as_float = values.astype(np.float64)
    open_lanes = h.undecided(source)
    if open_lanes is not None and values.dtype == np.bool_:
        # a comparison rounding may flip, as a number: 0 or 1 where it is undecided
        open_lanes = np.broadcast_to(open_lanes, values.shape)
        set_result(
            op, Interval(np.where(open_lanes, 0.0, as_float), np.where(open_lanes, 1.0, as_float))
        )
        return
    if open_lanes is not None:
        raise op.fail(
            "converting to floating point an integer made from a comparison rounding may flip",
            how="its other possible values are not bounded; compute it from exact data",
        )
    if np.abs(as_float).max(initial=0.0) <= 2.0**53:
        set_result(op, Interval.point(as_float))
    else:
        set_result(op, Interval(down(as_float), up(as_float)))


@rule("fp_to_si", "fp_to_ui")
def _float_to_int(op: KernelOp) -> None:
    x = op.interval(op.args[0])
    if x.is_point:
        return
    with np.errstate(invalid="ignore"):
        same = np.trunc(x.lo) == np.trunc(x.hi)
    h.set_taint(op.result, not bool(same.all()))


@rule("bitcast", "int_to_ptr", "ptr_to_int")
def _bitcast(op: KernelOp) -> None:
    source = op.args[0]
    if h.is_floating(source) and not op.interval(source).is_point:
        raise op.fail(
            "a bit cast of a rounded floating value",
            how="its bits have no interval rule; bit-manipulating kernels run outside fp.track()",
        )
    if h.is_floating(op.result) and h.tainted(source):
        raise op.fail("a bit cast to floating point of an integer that depends on rounding")
    if not h.is_floating(op.result):
        h.set_taint(op.result, h.tainted(source))
