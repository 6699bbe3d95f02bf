"""Gradient scaling for mixed-precision training (``torch.amp.GradScaler``): the functional forms
of its two kernels, ``aten._amp_foreach_non_finite_check_and_unscale`` and
``aten._amp_update_scale``, each modelled on ATen's CPU kernel
(``aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp``). The in-place operations the scaler
calls run as these functional forms and copies back (:mod:`..substitutes`): the same kernel on
copies of the same tensors, the same values.

**Unscaling** (``GradScaler.unscale_``, ``step``): each gradient element ``v`` becomes
``v * inv_scale`` (a float32 tensor), multiplied in the element's opmath format (float32 for
float16, bfloat16 and float32 gradients, float64 for float64 ones: the float32 factor is exact
in either) and rounded to nearest into the gradient's format (once for float32 and float64,
twice for float16 and bfloat16: :meth:`~pytest_fpcheck.interval.core.Interval.to_nearest`
encloses both); a factor equal to 1 returns ``v`` itself, which the product gives too. The
kernel sets ``found_inf`` to 1 where an element is infinite or NaN, and never back to 0: its
enclosure is 1 where some gradient's enclosure holds only infinities (a point NaN included),
the hull of its old enclosure and 1 where some enclosure reaches an infinity (the whole line
among them: "may be NaN"), and the old enclosure otherwise.

**The scale's update** (``GradScaler.update``): with ``found_inf`` non-zero the scale becomes
``float(double(scale) * backoff)`` and the growth tracker 0; otherwise the tracker counts one
more successful step, and where that count reaches ``growth_interval`` the scale becomes
``float(double(scale) * growth)`` unless that is infinite or NaN (then it is kept). The
branch is the one the run took, decided by ``found_inf``'s value and the growth tracker's (an
integer) before the operation: tracking follows a program's control flow as it ran, and the
scaler itself reads ``found_inf`` into Python to skip or take the optimizer's step. Taking the
hull over the branches ``found_inf``'s enclosure allows would be no truer and useless: one
gradient element whose enclosure reaches an overflow makes that enclosure [0, 1], the scale's
[scale / 2, 2 scale], and every later step's gradients, scaled by one end and unscaled by the
other, four times as wide. Each product is the double product rounded to nearest into float32
(twice, enclosed as above), an overflowing growth's branch holding the kept scale and the
product's finite part.

Other devices' kernels are not read here: the rules refuse them.
"""

from __future__ import annotations

import math

import numpy as np

from ....adapters.torch import dtype_format
from ....formats import FORMATS
from ....interval import elementwise as ew
from ....interval.core import Interval
from ..context import RuleContext
from ._common import F64, raise_unsupported, rule

__all__: list[str] = []

_F32 = FORMATS["float32"]
_ONE = Interval.point(np.asarray(1.0))


def _require_cpu(ctx: RuleContext, what: str) -> None:
    devices = {t.device.type for t in ctx.outputs}
    if devices - {"cpu"}:
        raise_unsupported(ctx, f"{what} on {', '.join(sorted(devices))}")


def _scalar(enclosure: Interval) -> Interval:
    """A one-element enclosure as a 0-d one."""
    return Interval(np.asarray(enclosure.lo).reshape(()), np.asarray(enclosure.hi).reshape(()))


def _non_finite(enclosure: Interval) -> tuple[bool, bool]:
    """(may, must): whether some element of a gradient with this enclosure may be infinite or
    NaN, and whether some element certainly is (its enclosure holds infinities or NaN only)."""
    lo, hi = np.asarray(enclosure.lo), np.asarray(enclosure.hi)
    nan = np.isnan(lo) | np.isnan(hi)
    infinite = np.isinf(lo) | np.isinf(hi)
    certain = nan | (np.isinf(lo) & (lo == hi))
    return bool(np.any(nan | infinite)), bool(np.any(certain))


@rule("aten._amp_foreach_non_finite_check_and_unscale")
def _unscale(ctx: RuleContext) -> list[Interval | None]:
    """The gradients times ``inv_scale``, and ``found_inf`` (module docstring)."""
    _require_cpu(ctx, "gradient unscaling")
    grads, found_inf, inv_scale = ctx.args[0], ctx.args[1], ctx.args[2]
    factor = _scalar(ctx.interval(inv_scale))
    found = _scalar(ctx.interval(found_inf))
    may, must = False, False
    results: list[Interval | None] = []
    for grad in grads:
        fmt = dtype_format(grad.dtype)
        if fmt is None:
            results.append(None)
            continue
        enclosure = ctx.interval(grad)
        grad_may, grad_must = _non_finite(enclosure)
        may, must = may or grad_may, must or grad_must
        opmath = F64 if fmt.name == "float64" else _F32
        # operands of at most 24 bits (53 for float64): the float64 product is exact there
        bits = 53 if opmath is F64 else 24
        results.append(ew.mul(enclosure, factor, fmt, operand_bits=bits, nearest=ctx.nearest))
    if must:
        found = _ONE
    elif may:
        found = found.hull(_ONE)
    return [*results, found]


def _product(ctx: RuleContext, scale: Interval, factor: float) -> Interval:
    """``float(double(scale) * factor)``: the double product rounded to nearest into float32.
    The scale's ends have at most 26 significant bits (a float32 tensor's recorded ends), so
    the float64 product is exact where the factor has at most 26 too (2.0 and 0.5, the
    defaults): no step outward there."""
    factor = float(factor)
    bits = abs(factor.as_integer_ratio()[0]).bit_length() if math.isfinite(factor) else 53
    point = Interval.point(np.asarray(factor))
    return ew.mul(scale, point, _F32, operand_bits=max(bits, 26), nearest=ctx.nearest)


def _grown(ctx: RuleContext, scale: Interval, growth: float) -> Interval:
    """The growth branch: the product where it is finite, the kept scale where it is not (the
    hull of the product's finite part and the scale where the product may overflow)."""
    grown = _product(ctx, scale, growth)
    lo, hi = float(grown.lo), float(grown.hi)
    if np.isfinite(lo) and np.isfinite(hi):
        return grown
    top = _F32.max_finite
    if lo > top or hi < -top or lo != lo or hi != hi:  # never finite (or NaN): kept
        return scale
    finite = Interval(np.asarray(max(lo, -top)), np.asarray(min(hi, top)))
    return finite.hull(scale)


@rule("aten._amp_update_scale")
def _update_scale(ctx: RuleContext) -> list[Interval | None]:
    """The scale after one update, along the branch the run took (module docstring); the
    growth tracker is an integer."""
    _require_cpu(ctx, "the gradient scale's update")
    scale_arg, tracker, found_inf = ctx.args[0], ctx.args[1], ctx.args[2]
    growth, backoff, interval = float(ctx.args[3]), float(ctx.args[4]), int(ctx.args[5])
    scale = _scalar(ctx.interval(scale_arg))
    if float(ctx.values(found_inf)) != 0.0:  # found (NaN too: the kernel tests it as true)
        return [_product(ctx, scale, backoff), None]
    if int(ctx.values(tracker)) + 1 == interval:
        return [_grown(ctx, scale, growth), None]
    return [scale, None]
