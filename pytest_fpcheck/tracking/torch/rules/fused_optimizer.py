"""The fused CPU Adam and AdamW steps (``torch.optim.Adam(..., fused=True)``,
``AdamW(..., fused=True)``): ``aten._fused_adam`` and ``aten._fused_adamw``, each modelled on
ATen's CPU kernel (``aten/src/ATen/native/cpu/FusedAdamKernel.cpp``, ``adam_math``).

The in-place operations the optimizers call (``_fused_adam_``, ``_fused_adamw_``) return
nothing; the tracker runs them as their functional variants, whose results it bounds here, and
copies those into the parameters and their state (:mod:`..substitutes`): the same kernel, the
same values.

What the kernel computes, per parameter tensor, with ``t`` its step counter (a float tensor
the optimizer has already incremented):

1. In double: ``bc1 = 1 - beta1**t``, ``step_size = lr / bc1``, ``bc2_sqrt = sqrt(1 - beta2**t)``,
   ``1 - beta1``, ``1 - beta2`` and (AdamW) ``1 - lr * weight_decay``; each is then converted
   to the *opmath* format (float32 for float32, bfloat16 and float16 tensors; float64 for
   float64 ones). The rule encloses each double computation with interval arithmetic in
   float64 (``pow`` allowed 4 ULPs, a contracted ``1 - lr * wd`` covered by the outward
   rounding) and rounds both ends outward onto opmath: that holds the kernel's constant
   (rounding to nearest is monotone) and the exact one, so the enclosure of the step holds
   both the kernel's value and the exact Adam update of its inputs.
2. In opmath, on the loaded values (bfloat16 and float16 ones widened exactly to float32):
   ``g = grad / grad_scale`` (stored back into ``grad`` when a scale is given); ``g = -g`` when
   maximising; Adam ``g += param * wd``, AdamW ``param *= (1 - lr wd)``; ``m = lerp(m, g, 1 - beta1)``
   (``m + w (g - m)`` for ``|w| < 0.5``, else ``g - (g - m)(1 - w)``); ``v = v beta2 +
   ((1 - beta2) g) g``; with amsgrad ``vmax = max(vmax, v)``; ``denom = sqrt(v or vmax) /
   bc2_sqrt + eps``; ``param = param - (step_size m) / denom``. The stored ``m``, ``v``,
   ``vmax`` and ``param`` are the opmath values rounded to the tensor's format; the update uses
   the opmath ``m`` and ``v``, not their rounded copies.
3. ``found_inf == 1`` skips the whole step.

Other devices' kernels order their arithmetic differently and are refused.

Each step is interval arithmetic with every intermediate rounded outward onto opmath, which
encloses the kernel's value whether or not the compiler fuses a product into the following sum
(the vectorised lerp is an explicit fused multiply-add; a fused result is the rounding of an
exact value the unfused enclosure already holds); the lerp is the formula its constant weight
selects (both paths test ``|w| < 0.5``, :func:`._common.lerp`). The
square ``((1 - beta2) g) g`` is taken as ``((1 - beta2) |g|) |g|``, which rounds to the same
numbers and keeps the enclosure of a gradient straddling zero non-negative. The results are
rounded outward onto the tensors' formats (RENDER section III-B-1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....adapters.torch import dtype_format
from ....errors import InvalidArgument
from ....formats import FORMATS, Format
from ....interval import elementwise as ew
from ....interval.core import Interval
from ..context import RuleContext
from ._common import F64, lerp, raise_unsupported, rule

__all__: list[str] = []

_F32 = FORMATS["float32"]
_ONE = Interval.point(np.asarray(1.0))
#: the error allowed to the C library's ``pow`` of doubles, in float64 ULPs
_POW_ULPS = 4


def _point(value: float) -> Interval:
    return Interval.point(np.asarray(float(value)))


def _pow(base: float, exponent: Interval) -> Interval:
    """``base ** exponent`` for 0 <= base < 1 and an exponent >= 1 (a step count) as libm
    computes it in double (decreasing in the exponent), widened by :data:`_POW_ULPS` ULPs each
    way; exactly 0 for base 0."""
    if not 0.0 <= base < 1.0:
        raise InvalidArgument("beta", base, "a number in [0, 1)")
    if base == 0.0:
        return Interval.point(np.asarray(0.0))
    lo, hi = base ** float(exponent.hi), base ** float(exponent.lo)
    for _ in range(_POW_ULPS):
        lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
    return Interval(np.asarray(max(lo, 0.0)), np.asarray(hi))


def _to_opmath(constant: Interval, opmath: Format) -> Interval:
    """A double constant converted to ``opmath`` (``opmath_t(x)``, rounding to nearest): both
    ends rounded outward, which holds the converted constant and the exact one alike."""
    return constant.to_format(opmath)


def _scalar(ctx: RuleContext, value: Any) -> Interval:
    """A Python number or a one-element tensor (``lr`` as a tensor, ``grad_scale``) as a 0-d
    enclosure of its exact value."""
    enclosure = ctx.interval(value)
    return Interval(np.asarray(enclosure.lo).reshape(()), np.asarray(enclosure.hi).reshape(()))


class _Constants:
    """The kernel's per-step constants in opmath (module docstring, step 1)."""

    def __init__(
        self, ctx: RuleContext, step: Interval, opmath: Format, lr: Interval, adamw: bool
    ) -> None:
        beta1, beta2 = float(ctx.kwargs["beta1"]), float(ctx.kwargs["beta2"])
        decay = float(ctx.kwargs["weight_decay"])
        bc1 = ew.sub(_ONE, _pow(beta1, step), F64)
        bc2 = ew.sub(_ONE, _pow(beta2, step), F64)
        self.step_size = _to_opmath(ew.div(lr, bc1, F64), opmath)
        self.bc2_sqrt = _to_opmath(ew.sqrt(bc2, F64), opmath)
        self.lerp_weight = _to_opmath(ew.sub(_ONE, _point(beta1), F64), opmath)
        self.square_weight = _to_opmath(ew.sub(_ONE, _point(beta2), F64), opmath)
        self.beta2 = _to_opmath(_point(beta2), opmath)
        self.eps = _to_opmath(_point(float(ctx.kwargs["eps"])), opmath)
        self.decay = _to_opmath(_point(decay), opmath) if decay != 0.0 else None
        self.shrink = None
        if adamw and decay != 0.0:
            product = ew.mul(lr, _point(decay), F64)
            self.shrink = _to_opmath(ew.sub(_ONE, product, F64), opmath)


def _step(
    ctx: RuleContext,
    index: int,
    adamw: bool,
    lr: Interval,
    scale: Interval | None,
) -> tuple[Interval, Interval, Interval, Interval, Interval | None]:
    """(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq) of tensor ``index`` after the step, in
    the tensor's format (module docstring, step 2)."""
    param = ctx.args[0][index]
    fmt = dtype_format(param.dtype)
    if fmt is None:
        raise InvalidArgument("params", param.dtype, "floating tensors")
    opmath = F64 if fmt.name == "float64" else _F32
    amsgrad = bool(ctx.kwargs["amsgrad"])
    constants = _Constants(ctx, _scalar(ctx, ctx.args[5][index]), opmath, lr, adamw)
    p = ctx.interval(param)
    g = ctx.interval(ctx.args[1][index])
    stored_grad = g
    if scale is not None:
        g = ew.div(g, scale, opmath)
        stored_grad = g.to_format(fmt)
    if bool(ctx.kwargs["maximize"]):
        g = ew.negate(g)
    if constants.decay is not None and not adamw:
        g = ew.add(g, ew.mul(p, constants.decay, opmath), opmath)
    if constants.shrink is not None:
        p = ew.mul(p, constants.shrink, opmath)
    m = lerp(ctx.interval(ctx.args[2][index]), g, constants.lerp_weight, opmath)
    size = ew.absolute(g)
    square = ew.mul(ew.mul(constants.square_weight, size, opmath), size, opmath)
    v = ew.add(ew.mul(ctx.interval(ctx.args[3][index]), constants.beta2, opmath), square, opmath)
    vmax = ew.maximum(ctx.interval(ctx.args[4][index]), v) if amsgrad else None
    root = ew.sqrt(vmax if vmax is not None else v, opmath)
    denom = ew.add(ew.div(root, constants.bc2_sqrt, opmath), constants.eps, opmath)
    update = ew.div(ew.mul(constants.step_size, m, opmath), denom, opmath)
    p = ew.sub(p, update, opmath)
    return (
        p.to_format(fmt),
        stored_grad,
        m.to_format(fmt),
        v.to_format(fmt),
        None if vmax is None else vmax.to_format(fmt),
    )


def _fused(ctx: RuleContext, adamw: bool) -> list[Interval | None]:
    params = ctx.args[0]
    devices = {p.device.type for p in params}
    if devices - {"cpu"}:
        raise_unsupported(ctx, f"the fused Adam step on {', '.join(sorted(devices))}")
    lr = _scalar(ctx, ctx.kwargs["lr"])
    scale_argument = ctx.kwargs.get("grad_scale")
    scale = None if scale_argument is None else _scalar(ctx, scale_argument)
    found_inf = ctx.kwargs.get("found_inf")
    skipped = found_inf is not None and bool(np.any(ctx.values(found_inf) == 1.0))
    columns: list[list[Interval | None]] = [[], [], [], [], []]
    for index in range(len(params)):
        results: tuple[Interval | None, ...]
        if skipped:  # the kernel returns at once: everything as it was
            results = (
                *tuple(ctx.interval(ctx.args[k][index]) for k in range(4)),
                ctx.interval(ctx.args[4][index]) if ctx.args[4] else None,
            )
        else:
            results = _step(ctx, index, adamw, lr, scale)
        for column, result in zip(columns, results, strict=True):
            if result is not None:
                column.append(result)
    # in the order of the results: self_out, grads_out, exp_avgs_out, exp_avg_sqs_out,
    # max_exp_avg_sqs_out (the tracker flattens the lists)
    return [interval for column in columns for interval in column]


@rule("aten._fused_adam")
def _fused_adam(ctx: RuleContext) -> list[Interval | None]:
    return _fused(ctx, adamw=False)


@rule("aten._fused_adamw")
def _fused_adamw(ctx: RuleContext) -> list[Interval | None]:
    return _fused(ctx, adamw=True)
