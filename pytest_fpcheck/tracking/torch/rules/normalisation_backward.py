"""Layer norm's backward kernel (``aten.native_layer_norm_backward``, what ``loss.backward()``
runs for ``nn.LayerNorm`` and ``F.layer_norm``), bounded directly instead of through its
decomposition (:mod:`..decompose`: a dozen tracked element-wise operations and sums, each
recorded; issue 19's speed item).

ATen's CPU kernel (``layer_norm_kernel.cpp``, ``layer_norm_backward_frame``; float16 and
bfloat16 in float32, their opmath), per row of n elements with a = rstd, g = dy w:

* the input's gradient: db = sum g and ds = sum g x (vectorised sums, any order),
  b = (db mean - ds) a a a scale and c = -b mean - db a scale with scale = 1 / n held in the
  compute format, then dx = a dy w + b x + c, rounded once to the tensor's format;
* the weight's gradient sum over the rows of dy (a x + b') with b' = -a mean, and the bias's
  sum of dy, accumulated in buffers per thread and summed (float32 and float64: sums in some
  order).

The rule (:func:`_layer_norm_backward`) encloses the exact value of these functions of the
operands' enclosures and every value the kernel can compute from operands inside them: the
input's gradient by :func:`~pytest_fpcheck.interval.kernels.layer_norm_backward.layer_norm_input_grad`
(every step an interval operation whose enclosure is rounded outward onto the compute format:
it holds the exact step and its rounding to nearest, fused or not; the two sums in any order by
gamma_{n-1} of the compute format with their products' roundings, Higham section 3.1 and 4.2);
the weight's and bias's gradients as the float64 sum of the exact terms' enclosures,
dy a (x - mean) and dy, widened by each term's rounding (gamma_3 (|a x| + |a mean|) |dy| and
underflow) and by gamma_{m-1} of the magnitudes for the sum over m rows in any order. Any step
that may not be finite makes its row (or column) the whole line: the kernel may then compute
an infinity or NaN.

Refused (the decomposition then bounds them, checked against the kernel's value): other devices
than the CPU (their kernels form the gradient differently), and the weight's and bias's
gradients of float16 and bfloat16 tensors outside ``mode="a_posteriori"`` (the kernel rounds
its per-thread buffers to the tensor's format after every row, which the decomposition
follows row by row).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ....adapters.torch import dtype_format
from ....formats import Format
from ....interval.core import Interval, gamma
from ....interval.kernels import format_args
from ....interval.kernels.layer_norm_backward import (
    layer_norm_input_grad,
    layer_norm_param_grads,
)
from ....interval.linalg import may_overflow
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import raise_unsupported, rule

__all__: list[str] = []

_F64_U = 2.0**-53
_REDUCED = (torch.float16, torch.bfloat16)


def _grown(factor: float, *others: float) -> float:
    """(1 + factor) (1 + others...) - 1, rounded up with a margin."""
    total = 1.0 + factor
    for other in others:
        total *= 1.0 + other
    return math.nextafter((total - 1.0) * (1 + 2.0**-50), math.inf)


def _rows(enclosure: Interval, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Both ends broadcast to ``shape`` (m x n rows, or m per-row values)."""
    return (
        np.broadcast_to(enclosure.lo, enclosure.shape).reshape(shape),
        np.broadcast_to(enclosure.hi, enclosure.shape).reshape(shape),
    )


def _summed(
    ctx: RuleContext, sums: np.ndarray, rows: int, c: Format, fmt: Format | None
) -> Interval:
    """The enclosure of a column sum over ``rows`` terms from the kernel's totals (sum lo,
    sum hi, sum |T|, sum of the terms' rounding allowances e, count of terms that may not be
    finite): [sum lo, sum hi] widened by e + gamma_{rows-1} (|T| + e) (the sum in any order, its
    terms the kernel's rounded ones) + the float64 sums' own rounding, then rounded outward
    onto the compute format and the result's format; the whole line where a term or an end
    may not be finite."""
    u = c.unit_roundoff
    g64 = gamma(rows + 2, _F64_U)
    factor = ctx.sums.factor(rows, u)
    lo, hi, magnitude, allowance, bad = sums
    with np.errstate(all="ignore"):
        spread = up(
            (allowance + factor * (magnitude + allowance) + g64 * magnitude) * (1 + 4 * g64)
        )
        result = Interval(down(lo - spread), up(hi + spread)).to_format(c)
        if fmt is not None and fmt.name != c.name:
            result = result.to_format(fmt)
        whole = (
            (bad > 0) | ~(np.abs(result.lo) <= c.max_finite) | ~(np.abs(result.hi) <= c.max_finite)
        )
        # a running buffer may overflow even where the total is finite (cancellation)
        whole |= may_overflow(magnitude + allowance, factor, c.max_finite)
    if whole.any():
        result = Interval(np.where(whole, -np.inf, result.lo), np.where(whole, np.inf, result.hi))
    return result


@rule("aten.native_layer_norm_backward")
def _layer_norm_backward(ctx: RuleContext) -> list[Interval]:
    """(dx, dw, db) of ``native_layer_norm_backward`` (module docstring), for the outputs the
    call produced."""
    grad, x, shape, mean, rstd, weight, bias, mask = (
        ctx.arg(i, name)
        for i, name in enumerate(
            (
                "grad_out",
                "input",
                "normalized_shape",
                "mean",
                "rstd",
                "weight",
                "bias",
                "output_mask",
            )
        )
    )
    if ctx.device.type != "cpu":
        raise_unsupported(ctx, "layer norm's backward on a device other than the CPU")
    n = math.prod(int(s) for s in shape)
    if n == 0 or x.numel() == 0:
        raise_unsupported(ctx, "layer norm's backward of an empty tensor")
    m = x.numel() // n
    c = ctx.compute
    wants_weight = bool(mask[1]) and weight is not None
    wants_bias = bool(mask[2]) and bias is not None
    if x.dtype in _REDUCED and (wants_weight or wants_bias) and not ctx.observed:
        raise_unsupported(ctx, "the weight's gradient of a float16 or bfloat16 layer norm")
    dy = _rows(ctx.operand(grad, c), (m, n))
    xs = _rows(ctx.operand(x, c), (m, n))
    mu = _rows(ctx.operand(mean, c), (m,))
    a = _rows(ctx.operand(rstd, c), (m,))
    u = c.unit_roundoff
    results: dict[int, Interval] = {}
    if bool(mask[0]):
        w = _rows(ctx.operand(weight, c), (n,)) if weight is not None else None
        w_abs = float(np.max(np.maximum(np.abs(w[0]), np.abs(w[1])))) if w is not None else 1.0
        g64 = gamma(n + 2, _F64_U)
        sum_factor = ctx.sums.factor(n, u)
        # the sums' factors: the kernel's sum in any order and its products' roundings, the
        # float64 sums' own, and the float64 products' (one for db's terms, two for ds's)
        k_db = _grown(_grown(sum_factor, u, g64), g64, _F64_U)
        k_ds = _grown(_grown(sum_factor, u, u, g64), g64, 2 * _F64_U)
        third = 1.0 / n
        scale = Interval(down(np.asarray(third)), up(np.asarray(third))).to_format(c)
        lo, hi = layer_norm_input_grad(
            dy,
            xs,
            mu,
            a,
            w,
            (float(scale.lo), float(scale.hi)),
            (k_ds, k_db, c.smallest_subnormal, w_abs),
            format_args(c),
            c.name == "float32",
        )
        dx = Interval(lo.reshape(x.shape), hi.reshape(x.shape))
        fmt = ctx.fmt
        if fmt.name != c.name:
            dx = dx.to_nearest(fmt) if ctx.nearest else dx.to_format(fmt)
        results[0] = dx
    if wants_weight or wants_bias:
        w_sums, b_sums = layer_norm_param_grads(
            dy, xs, mu, a, _grown(gamma(3, u)), 2 * c.smallest_subnormal, c.max_finite
        )
        for position, wanted, sums, like in (
            (1, wants_weight, w_sums, weight),
            (2, wants_bias, b_sums, bias),
        ):
            if wanted:
                target = None if ctx.observed else dtype_format(like.dtype)
                results[position] = _summed(ctx, sums, m, c, target).map(
                    lambda v, s=tuple(like.shape): v.reshape(s)
                )
    out = ctx.out if isinstance(ctx.out, (tuple, list)) else (ctx.out,)
    ordered: list[Interval] = []
    for position, tensor in enumerate(out):
        if not isinstance(tensor, torch.Tensor):
            continue
        if position not in results:
            raise_unsupported(ctx, f"layer norm's backward output {position} without its operand")
        ordered.append(results[position])
    return ordered
