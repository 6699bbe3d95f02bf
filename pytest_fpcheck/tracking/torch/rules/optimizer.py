"""The element-wise updates optimizers run: lerp (Adam's first moment), addcmul (its second
moment), addcdiv (the step), in place or not, as ``torch.optim``'s default (foreach) and
single-tensor implementations reach the tracker.

Each is bounded so that neither the order of its products nor a fused multiply-add matters:

* **lerp** (``self + w (end - self)`` for ``|w| < 0.5``, else ``end - (end - self)(1 - w)``,
  ATen's two formulas, in the compute format): each formula is evaluated as interval arithmetic
  rounded outward onto the compute format after every step, which encloses the kernel's value
  whether or not it fuses the product into the sum (a fused result is the rounding of an exact
  value the unfused enclosure already holds); the bound is the hull of both formulas, so the
  branch taken does not matter either.
* **addcmul / addcdiv** (``self + value * t1 * t2``, ``self + value * t1 / t2``): the exact
  product or quotient of the three operands is enclosed in float64, widened by two roundings in
  the compute format in any order (gamma_2(u) relative; Higham, *Accuracy and Stability*,
  lemma 3.1), plus the underflow of each rounding in absolute terms: one smallest subnormal for
  the last, and the first's scaled by the operation after it (|t2| or 1 / |t2| for
  ``(value t1) op t2``, |value| for ``value (t1 op t2)``: found by the soundness campaign, a
  subnormal product divided by a subnormal divisor), then added to ``self`` with outward
  rounding onto the compute format and rounded to the result format. Where either
  intermediate (``value t1``, or ``t1 op t2``) may overflow the compute format, the element is
  the whole line: an intermediate's overflow does not depend on the whole's, and the order
  differs between devices (CUDA multiplies ``t1 op t2`` first).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....formats import Format
from ....interval import elementwise as ew
from ....interval.core import Interval, gamma
from ....interval.rounding import up
from ..context import RuleContext
from ._common import F64, rule

__all__: list[str] = []


def _rounded_twice(exact: Interval, compute: Format, underflow: Any = 2.0) -> Interval:
    """An enclosure of any result of two roundings onto ``compute`` of a value in ``exact``
    (relative gamma_2(u), plus ``underflow`` smallest subnormals absolutely, rounded outward:
    two when both roundings act on the result, more where an intermediate's underflow is
    scaled by a later factor)."""
    radius = gamma(2, compute.unit_roundoff) * exact.magnitude() + up(
        underflow * compute.smallest_subnormal
    )
    widened = exact.widen(np.where(np.isinf(radius), 0.0, radius))
    return ew.everything_where_nan(widened).to_format(compute)


@rule("aten.lerp")
def _lerp(ctx: RuleContext) -> Interval:
    start, end, weight = ctx.arg(0, "self"), ctx.arg(1, "end"), ctx.arg(2, "weight")
    fmt = ctx.compute
    a, b, w = ctx.operand(start, fmt), ctx.operand(end, fmt), ctx.operand(weight, fmt)
    diff = ew.sub(b, a, fmt)
    low_weight = ew.add(a, ew.mul(w, diff, fmt, operand_bits=64), fmt)
    one = Interval.point(np.asarray(1.0))
    complement = ew.sub(one, w, fmt)
    high_weight = ew.sub(b, ew.mul(diff, complement, fmt, operand_bits=64), fmt)
    return low_weight.hull(high_weight).to_format(ctx.fmt)


def _product(ctx: RuleContext, divide: bool) -> Interval:
    target, first, second = ctx.arg(0, "self"), ctx.arg(1, "tensor1"), ctx.arg(2, "tensor2")
    value: Any = ctx.arg(3, "value", 1)
    fmt = ctx.compute
    t1, t2 = ctx.operand(first, fmt), ctx.operand(second, fmt)
    v = ctx.operand(value, fmt)
    scaled = ew.mul(v, t1, F64, operand_bits=64)
    exact = ew.div(scaled, t2, F64) if divide else ew.mul(scaled, t2, F64, operand_bits=64)
    # the first rounding's underflow (at most one smallest subnormal) is scaled by the second
    # operation: by |t2| or 1 / |t2| for (v t1) op t2, by |v| for v (t1 op t2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if divide:
            low = np.where((t2.lo <= 0) & (t2.hi >= 0), 0.0, np.minimum(abs(t2.lo), abs(t2.hi)))
            later = up(1.0 / low)
        else:
            later = t2.magnitude()
        underflow = up(2.0 + v.magnitude() + later)
    rounded = _rounded_twice(exact, fmt, underflow)
    # either intermediate, value t1 or t1 op t2, may overflow where the whole does not: CUDA
    # computes value (t1 op t2), the CPU (value t1) op t2 (an H100 returned inf for
    # 0.3 * (1.35 * 3.4e38); found by the CUDA soundness campaign, docs/gpu.md)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pair = ew.div(t1, t2, F64) if divide else ew.mul(t1, t2, F64, operand_bits=64)
        overflow = (pair.magnitude() > fmt.max_finite) | (scaled.magnitude() > fmt.max_finite)
    if overflow.any():
        rounded = Interval(
            np.where(overflow, -np.inf, rounded.lo), np.where(overflow, np.inf, rounded.hi)
        )
    # an infinite factor times one that underflows to zero is NaN: the whole line
    infinite = np.isinf(t1.lo) | np.isinf(t1.hi) | np.isinf(t2.lo) | np.isinf(t2.hi)
    if infinite.any():
        rounded = Interval(
            np.where(infinite, -np.inf, rounded.lo), np.where(infinite, np.inf, rounded.hi)
        )
    return ew.add(ctx.operand(target, fmt), rounded, fmt).to_format(ctx.fmt)


@rule("aten.addcmul")
def _addcmul(ctx: RuleContext) -> Interval:
    return _product(ctx, divide=False)


@rule("aten.addcdiv")
def _addcdiv(ctx: RuleContext) -> Interval:
    return _product(ctx, divide=True)
