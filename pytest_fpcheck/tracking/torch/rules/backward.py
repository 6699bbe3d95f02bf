"""Element-wise backward kernels of activations (what ``loss.backward()`` runs for sigmoid,
tanh and ReLU). ATen's float16 kernels round some intermediates to float16 (measured:
``1 - y`` in ``sigmoid_backward``), its bfloat16 ones to float32: every step's enclosure is
rounded outward onto the tensor's own format, the coarser grid, which holds the step computed
in float32 too (every float16 or bfloat16 number is a float32 one).

* **sigmoid_backward** ``g (1 - y) y``: ``1 - y`` rounded outward onto that format,
  then the exact product of the three factors enclosed in float64 and widened by two roundings
  in any order onto it (gamma_2(u) relative; Higham, lemma 3.1), plus two smallest
  subnormals absolute, the first one's scaled by the largest factor.
* **tanh_backward** ``g (1 - y * y)``: each step rounded outward onto it (a
  fused ``1 - y * y`` rounds an exact value this already encloses).
* **threshold_backward** ``x <= threshold ? 0 : g``: a selection, exact; where the comparison is
  undecided by ``x``'s enclosure, the hull of both branches.

Other backward kernels (softmax, log-softmax, layer norm, losses, embedding, slicing, GELU)
are bounded through their decompositions (:mod:`..decompose`).
"""

from __future__ import annotations

import numpy as np

from ....interval import elementwise as ew
from ....interval.core import Interval
from ..context import RuleContext
from ._common import F64, rule
from .optimizer import _rounded_twice

__all__: list[str] = []

_ONE = Interval.point(np.asarray(1.0))


@rule("aten.sigmoid_backward")
def _sigmoid_backward(ctx: RuleContext) -> Interval:
    narrow = ctx.fmt
    g, y = ctx.operand(ctx.args[0], narrow), ctx.operand(ctx.args[1], narrow)
    complement = ew.sub(_ONE, y, narrow)
    exact = ew.mul(ew.mul(g, complement, F64, operand_bits=64), y, F64, operand_bits=64)
    # the first product's underflow is scaled by the third factor, whichever it is
    largest = np.maximum(np.maximum(g.magnitude(), complement.magnitude()), y.magnitude())
    return _rounded_twice(exact, narrow, 2.0 + largest)


@rule("aten.tanh_backward")
def _tanh_backward(ctx: RuleContext) -> Interval:
    compute = ctx.fmt
    g, y = ctx.operand(ctx.args[0], compute), ctx.operand(ctx.args[1], compute)
    square = ew.mul(y, y, compute, operand_bits=64)
    return ew.mul(g, ew.sub(_ONE, square, compute), compute, operand_bits=64).to_format(ctx.fmt)


@rule("aten.threshold_backward")
def _threshold_backward(ctx: RuleContext) -> Interval:
    grad, x, threshold = ctx.args[0], ctx.args[1], float(ctx.args[2])
    g, a = ctx.operand(grad), ctx.interval(x)
    value = ctx.values(x) <= threshold
    decided = (a.hi <= threshold) | (a.lo > threshold)
    zero = Interval.point(np.zeros(()))
    return ew.where(value, decided, zero, g)
