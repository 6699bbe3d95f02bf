"""Trigonometric and other library functions (RENDER III-B, library functions): sin, cos, tan,
atan, atanh, erfinv, logit and ``pow`` of a scalar base (``base ** tensor``).

* **sin, cos** are not monotone: the exact range over ``[lo, hi]`` is the hull of the endpoint
  values and of +-1 wherever the interval holds a maximum (pi/2 + 2k pi for sin) or minimum; a
  critical point is counted as held when it is within 1e-9 relative of the interval (erring
  towards the wider range), and an interval as wide as 2 pi gives [-1, 1]; an infinite
  argument gives NaN, the whole line. The library's error,
  ``ULP_ERRORS`` ULPs of the compute format relative to the largest magnitude of the range, plus
  the float64 evaluation's allowance, widens it (as
  :func:`pytest_fpcheck.interval.elementwise.library_function` does for monotone functions).
* **tan** is increasing between its poles; an interval holding a pole gives the whole line.
* **atan, atanh, erfinv** are increasing (outside their domains NaN, the whole line):
  monotone library functions.
* **logit** is ATen's ``log(x / (1 - x))`` after the optional clamp to ``[eps, 1 - eps]``:
  the clamp bounds, the subtraction and the division rounded outward onto the tensor's format
  (the vectorized bfloat16 and float16 kernels round there after each step; that coarser grid
  encloses a float32 evaluation too), then the logarithm.
* **pow.Scalar** ``b ** x`` is ``std::pow(b, x)`` with ``b`` converted to the result's type:
  increasing in x for b > 1, decreasing for 0 < b < 1, a library function of
  ``ULP_ERRORS["pow"]`` ULPs, hulled over the outward rounding of ``b`` (monotone in the base
  too); other bases have no rule.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ....adapters.torch import internal
from ....formats import Format
from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import Array, as_tensor, raise_unsupported, rule

__all__: list[str] = []

ew.ULP_ERRORS.setdefault("tan", 4.0)  # CUDA tanf 4 ULPs; SLEEF u10 and glibc 1
ew.ULP_ERRORS.setdefault("atan", 2.0)  # CUDA atanf 2 ULPs
ew.ULP_ERRORS.setdefault("atanh", 3.0)  # CUDA atanhf 3 ULPs
# ATen's calc_erfinv: a rational first guess polished by two Newton steps in the compute
# format; measured within 3 ULPs of mpmath on float32 (tests/tracking/test_new_rules.py)
ew.ULP_ERRORS.setdefault("erfinv", 8.0)
ew.ULP_ERRORS.setdefault("log", 2.0)

_TWO_PI = 2 * math.pi
_SLACK = 1e-9


def _holds(lo: Array, hi: Array, phase: float, period: float) -> Array:
    """Whether [lo, hi] (nearly) holds a point phase + k period, erring towards yes."""
    with np.errstate(invalid="ignore"):
        first = np.ceil((lo - phase) / period - _SLACK)
        last = np.floor((hi - phase) / period + _SLACK)
    held: Array = first <= last
    return held


def _periodic(
    ctx: RuleContext, function: np.ufunc, maximum_at: float, minimum_at: float
) -> Interval:
    a = ctx.operand(ctx.args[0], ctx.compute)
    compute: Format = ctx.compute
    with np.errstate(invalid="ignore", over="ignore"):
        f_lo, f_hi = function(a.lo), function(a.hi)
        low, high = np.minimum(f_lo, f_hi), np.maximum(f_lo, f_hi)
        wide = (a.hi - a.lo) >= _TWO_PI
        high = np.where(wide | _holds(a.lo, a.hi, maximum_at, _TWO_PI), 1.0, high)
        low = np.where(wide | _holds(a.lo, a.hi, minimum_at, _TWO_PI), -1.0, low)
        magnitude = np.maximum(np.abs(low), np.abs(high))
        ulps = ew.ULP_ERRORS[function.__name__]
        allowance = (2.0**-49 + ulps * compute.eps) * magnitude + ulps * compute.smallest_subnormal
        lo = np.maximum(down(low - allowance), -1.0)
        hi = np.minimum(up(high + allowance), 1.0)
    # an infinite (or NaN) argument gives NaN: the whole line
    nan = ~(np.isfinite(a.lo) & np.isfinite(a.hi))
    return Interval(np.where(nan, -np.inf, lo), np.where(nan, np.inf, hi)).to_format(ctx.fmt)


@rule("aten.sin")
def _sin(ctx: RuleContext) -> Interval:
    return _periodic(ctx, np.sin, math.pi / 2, -math.pi / 2)


@rule("aten.cos")
def _cos(ctx: RuleContext) -> Interval:
    return _periodic(ctx, np.cos, 0.0, math.pi)


def _monotone(ctx: RuleContext, name: str, function: object, x: Interval | None = None) -> Interval:
    operand = ctx.operand(ctx.args[0], ctx.compute) if x is None else x
    return ew.library_function(
        function,  # type: ignore[arg-type]
        operand,
        ctx.fmt,
        ctx.compute,
        ew.ULP_ERRORS[name],
    )


@rule("aten.tan")
def _tan(ctx: RuleContext) -> Interval:
    a = ctx.operand(ctx.args[0], ctx.compute)
    bounded = _monotone(ctx, "tan", np.tan, a)
    with np.errstate(invalid="ignore"):
        pole = _holds(a.lo, a.hi, math.pi / 2, math.pi) | ~((a.hi - a.lo) < math.pi)
    return Interval(np.where(pole, -np.inf, bounded.lo), np.where(pole, np.inf, bounded.hi))


@rule("aten.atan")
def _atan(ctx: RuleContext) -> Interval:
    return _monotone(ctx, "atan", np.arctan)


@rule("aten.atanh")
def _atanh(ctx: RuleContext) -> Interval:
    return _monotone(ctx, "atanh", np.arctanh)


def _erfinv64(x: Array) -> Array:
    with internal(), torch.no_grad():
        result: Array = torch.special.erfinv(as_tensor(np.asarray(x, dtype=np.float64))).numpy()
    return result


@rule("aten.erfinv")
def _erfinv(ctx: RuleContext) -> Interval:
    return _monotone(ctx, "erfinv", _erfinv64)


@rule("aten.logit")
def _logit(ctx: RuleContext) -> Interval:
    # ATen's vectorized bfloat16 and float16 kernels round x / (1 - x) to the tensor's format
    # after each step; rounding outward onto that (coarser) grid encloses float32 steps too
    narrow = ctx.fmt
    x = ctx.operand(ctx.args[0], narrow)
    eps = ctx.arg(1, "eps")
    if eps is not None:
        e = Interval.point(np.asarray(float(eps))).to_format(narrow)
        high = ew.sub(Interval.point(np.asarray(1.0)), e, narrow)
        x = ew.clamp(x, e, high)
    one = Interval.point(np.asarray(1.0))
    ratio = ew.div(x, ew.sub(one, x, narrow), narrow)
    return _monotone(ctx, "log", np.log, ratio)


@rule("aten.pow.Scalar")
def _pow_scalar(ctx: RuleContext) -> Interval:
    base, exponent = ctx.arg(0, "self"), ctx.arg(1, "exponent")
    b = float(base)
    if not b > 0 or math.isinf(b):
        raise_unsupported(ctx, f"pow of the scalar base {b!r} (a positive finite base has one)")
    x = ctx.operand(exponent, ctx.compute)
    if b == 1.0:
        return Interval.point(np.ones(x.shape))
    # PyTorch converts the base to the result's type (10000 is 9984 in bfloat16): b ** x is
    # monotone in the base too, so the hull over the base's outward rounding encloses it
    held = Interval.point(np.asarray(b)).to_format(ctx.fmt)
    results = [
        ew.library_function(
            functools.partial(np.power, base),
            x,
            ctx.fmt,
            ctx.compute,
            ew.ULP_ERRORS["pow"],
            increasing=base > 1,
        )
        for base in {float(held.lo), float(held.hi)}
    ]
    return results[0] if len(results) == 1 else results[0].hull(results[1])
