"""The element-wise updates optimizers run: lerp (Adam's first moment), addcmul (its second
moment), addcdiv (the step), in place or not, as ``torch.optim``'s default (foreach) and
single-tensor implementations reach the tracker.

Each is bounded so that neither the order of its products nor a fused multiply-add matters:

* **lerp** (``self + w (end - self)`` for ``|w| < 0.5``, else ``end - (end - self)(1 - w)``,
  ATen's two formulas, in the compute format): each formula is evaluated as interval arithmetic
  rounded outward onto the compute format after every step, which encloses the kernel's value
  whether or not it fuses the product into the sum (a fused result is the rounding of an exact
  value the unfused enclosure already holds); the formula the weight's enclosure selects, the
  hull of both where it does not decide (:func:`._common.lerp`).
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
  differs between devices (CUDA multiplies ``t1 op t2`` first). Adam's second moment,
  ``addcmul(v, g, g)``, multiplies a gradient by itself (:func:`._common.same_values`): both
  factors are then taken as |g|, which the roundings map to the same numbers in either order,
  so the square is never negative (independent factors straddling zero gave ``g_lo g_hi < 0``,
  a negative second moment, its square root NaN and every parameter the step touched the
  whole line).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.rounding import up
from ..context import RuleContext
from ._common import F64, lerp, rounded_twice, rule, same_values, sign_of

__all__: list[str] = []


@rule("aten.lerp")
def _lerp(ctx: RuleContext) -> Interval:
    start, end, weight = ctx.arg(0, "self"), ctx.arg(1, "end"), ctx.arg(2, "weight")
    fmt = ctx.compute
    a, b, w = ctx.operand(start, fmt), ctx.operand(end, fmt), ctx.operand(weight, fmt)
    return lerp(a, b, w, fmt).to_format(ctx.fmt)


def _product(ctx: RuleContext, divide: bool) -> Interval:
    target, first, second = ctx.arg(0, "self"), ctx.arg(1, "tensor1"), ctx.arg(2, "tensor2")
    value: Any = ctx.arg(3, "value", 1)
    fmt = ctx.compute
    t1, t2 = ctx.operand(first, fmt), ctx.operand(second, fmt)
    if not divide and same_values(first, second):  # a square (module docstring)
        t1 = t2 = ew.absolute(t1)
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
    # the sign of the exact product or quotient, where the operands' signs decide it
    rounded = rounded_twice(exact, fmt, underflow, sign_of(v) * sign_of(t1) * sign_of(t2))
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
