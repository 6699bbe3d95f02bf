"""Element-wise arithmetic of Triton kernels: correctly rounded operations (``+``, ``-``, ``*``,
``div_rn``, ``sqrt_rn``, fma, min/max, abs, floor/ceil) by the interval arithmetic of
:mod:`pytest_fpcheck.interval.elementwise`, exactly as a PyTorch operation is bounded; the
approximate forms (``x / y``, ``exp``, ``log``, ``sin``, ``rsqrt``, ...) widened by the
allowances of :mod:`..errors_model`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ....formats import Format
from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.rounding import down, up
from ..errors_model import APPROX_DIV_RANGE, SIN_COS_RANGE, TRITON_ERRORS
from .base import (
    F32,
    F64,
    KernelOp,
    rule,
    set_result,
)

__all__ = []


def _operand_bits(op: KernelOp, *handles: Any) -> int:
    return max(op.fmt(x).precision for x in handles)


@rule("fadd")
def _add(op: KernelOp) -> None:
    a, b = op.args
    set_result(op, ew.add(op.interval(a), op.interval(b), op.fmt(op.result)))


@rule("fsub")
def _sub(op: KernelOp) -> None:
    a, b = op.args
    set_result(op, ew.sub(op.interval(a), op.interval(b), op.fmt(op.result)))


@rule("fmul")
def _mul(op: KernelOp) -> None:
    a, b = op.args
    bits = _operand_bits(op, a, b)
    set_result(op, ew.mul(op.interval(a), op.interval(b), op.fmt(op.result), operand_bits=bits))


@rule("precise_divf")
def _div_rn(op: KernelOp) -> None:
    a, b = op.args
    set_result(op, ew.div(op.interval(a), op.interval(b), op.fmt(op.result)))


def _widen_relative(interval: Interval, fmt: Format, ulps: float, absolute: float) -> Interval:
    """[lo, hi] widened by ``ulps`` ULPs of ``fmt`` relative, ``absolute``, and the smallest
    normal number (flushed subnormal results)."""
    if interval.is_point and ulps == 0 and absolute == 0:
        return interval
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.maximum(np.abs(interval.lo), np.abs(interval.hi))
        allowance = up(ulps * fmt.eps * magnitude + absolute + fmt.smallest_normal)
        allowance = np.where(np.isinf(magnitude), 0.0, allowance)
        return ew.everything_where_nan(
            Interval(down(interval.lo - allowance), up(interval.hi + allowance))
        )


@rule("fdiv", "approx_divf")
def _div_approx(op: KernelOp) -> None:
    a, b = op.args
    fmt = op.fmt(op.result)
    divisor = op.interval(b)
    quotient = ew.div(op.interval(a), divisor, F64)
    ulps, absolute = TRITON_ERRORS["div" if op.name == "fdiv" else "approx_div"]
    result = _widen_relative(quotient, _evaluating(fmt), ulps, absolute)
    if op.name == "approx_divf":
        low, high = APPROX_DIV_RANGE
        magnitude = np.maximum(np.abs(divisor.lo), np.abs(divisor.hi))
        outside = (magnitude > high) | (np.minimum(np.abs(divisor.lo), np.abs(divisor.hi)) < low)
        if outside.any():
            result = Interval(
                np.where(outside, np.minimum(result.lo, 0.0), result.lo),
                np.where(outside, np.maximum(result.hi, 0.0), result.hi),
            )
    set_result(op, result)


@rule("fneg")
def _neg(op: KernelOp) -> None:
    set_result(op, ew.negate(op.interval(op.args[0])))


@rule("frem")
def _frem(op: KernelOp) -> None:
    """fmod(x, y): exact. Where x's interval stays between two multiples of a point y, fmod is
    monotone there; elsewhere |r| < max|y| with the sign of x (and |r| <= |x|)."""
    x, y = op.interval(op.args[0]), op.interval(op.args[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        y_mag = np.maximum(np.abs(y.lo), np.abs(y.hi))
        x_mag = np.maximum(np.abs(x.lo), np.abs(x.hi))
        bound = np.minimum(y_mag, x_mag)
        lo = np.where(x.lo >= 0, 0.0, -bound)
        hi = np.where(x.hi <= 0, 0.0, bound)
        if y.is_point:
            same_cell = np.trunc(x.lo / y.lo) == np.trunc(x.hi / y.lo)
            same_sign = (x.lo >= 0) | (x.hi <= 0)
            monotone = same_cell & same_sign & np.isfinite(x.lo) & np.isfinite(x.hi)
            lo = np.where(monotone, np.fmod(x.lo, y.lo), lo)
            hi = np.where(monotone, np.fmod(x.hi, y.lo), hi)
        undefined = (y.lo <= 0) & (y.hi >= 0) | np.isinf(x.lo) | np.isinf(x.hi)
    set_result(op, ew._everything_where_nan(lo, hi, undefined))


@rule("minimumf", "minnumf")
def _minimum(op: KernelOp) -> None:
    a, b = op.args
    set_result(op, ew.minimum(op.interval(a), op.interval(b)))


@rule("maximumf", "maxnumf")
def _maximum(op: KernelOp) -> None:
    a, b = op.args
    set_result(op, ew.maximum(op.interval(a), op.interval(b)))


@rule("clampf")
def _clamp(op: KernelOp) -> None:
    x, low, high = op.args[:3]
    set_result(op, ew.clamp(op.interval(x), op.interval(low), op.interval(high)))


@rule("fma")
def _fma(op: KernelOp) -> None:
    """One rounding of the exact x * y + z."""
    x, y, z = op.args
    bits = _operand_bits(op, x, y)
    product = ew.mul(op.interval(x), op.interval(y), F64, operand_bits=bits)
    set_result(op, ew.add(product, op.interval(z), op.fmt(op.result)))


@rule("fabs")
def _abs(op: KernelOp) -> None:
    set_result(op, ew.absolute(op.interval(op.args[0])))


@rule("floor", "ceil")
def _floor_ceil(op: KernelOp) -> None:
    x = op.interval(op.args[0])
    function = np.floor if op.name == "floor" else np.ceil
    set_result(op, x.map(function) if x.is_point else Interval(function(x.lo), function(x.hi)))


def _evaluating(fmt: Format) -> Format:
    """The format an approximate operation on ``fmt`` values is evaluated in (float32 for the
    narrower ones, whose math functions take float32 arguments)."""
    return F32 if fmt.precision < F32.precision else fmt


def _approximate(op: KernelOp, function: Callable[[Any], Any], name: str) -> None:
    """A monotone approximate function with its :data:`TRITON_ERRORS` allowance."""
    compute = _evaluating(op.fmt(op.result))
    ulps, absolute = TRITON_ERRORS[name]
    result = ew.library_function(function, op.interval(op.args[0]), F64, compute, ulps)
    set_result(op, _widen_relative(result, compute, 0.0, absolute))


@rule("exp")
def _exp(op: KernelOp) -> None:
    """ex2.approx(x * log2 e): besides ex2's own error, the rounded argument moves the result
    by a relative expm1(|x| 2u (1 + 2u)), element by element (nothing for x = -inf)."""
    x = op.interval(op.args[0])
    fmt = op.fmt(op.result)
    compute = _evaluating(fmt)
    ulps, absolute = TRITON_ERRORS["exp"]
    base = ew.library_function(np.exp, x, F64, compute, ulps)
    u = compute.unit_roundoff
    with np.errstate(invalid="ignore", over="ignore"):
        argument = up(np.maximum(np.abs(x.lo), np.abs(x.hi)) * (2 * u * (1 + 2 * u)))
        relative = np.where(argument < 700, up(np.expm1(np.minimum(argument, 700.0))), np.inf)
        relative = np.where(np.isneginf(x.hi), 0.0, relative)  # exp(-inf) = 0 exactly
        magnitude = np.maximum(np.abs(base.lo), np.abs(base.hi))
        extra = np.where(magnitude == 0, 0.0, up(relative * magnitude))
        extra = np.where(np.isnan(extra), np.inf, extra)
        widened = Interval(down(base.lo - extra), up(base.hi + extra))
    set_result(op, _widen_relative(widened, compute, 0.0, absolute))


@rule("exp2")
def _exp2(op: KernelOp) -> None:
    _approximate(op, np.exp2, "exp2")


@rule("log")
def _log(op: KernelOp) -> None:
    _approximate(op, np.log, "log")


@rule("log2")
def _log2(op: KernelOp) -> None:
    _approximate(op, np.log2, "log2")


@rule("erf")
def _erf(op: KernelOp) -> None:
    from scipy.special import erf

    _approximate(op, erf, "erf")


@rule("sqrt")
def _sqrt_approx(op: KernelOp) -> None:
    root = ew.sqrt(op.interval(op.args[0]), F64)
    fmt = op.fmt(op.result)
    ulps, absolute = TRITON_ERRORS["sqrt"]
    set_result(op, _widen_relative(root, _evaluating(fmt), ulps, absolute))


@rule("precise_sqrt")
def _sqrt_rn(op: KernelOp) -> None:
    set_result(op, ew.sqrt(op.interval(op.args[0]), op.fmt(op.result)))


@rule("rsqrt")
def _rsqrt(op: KernelOp) -> None:
    x = op.interval(op.args[0])
    root = ew.sqrt(x, F64)
    one = Interval.point(np.ones(()))
    reciprocal = ew.div(one, root, F64)
    fmt = op.fmt(op.result)
    ulps, absolute = TRITON_ERRORS["rsqrt"]
    set_result(op, _widen_relative(reciprocal, _evaluating(fmt), ulps, absolute))


@rule("sin", "cos")
def _sin_cos(op: KernelOp) -> None:
    """sin/cos over [lo, hi]: the endpoint values, and +-1 where the interval contains a
    maximum or minimum; [-1, 1] past the documented argument range."""
    x = op.interval(op.args[0])
    function = np.sin if op.name == "sin" else np.cos
    phase = 0.5 if op.name == "sin" else 0.0  # extrema at (k + phase) pi
    with np.errstate(invalid="ignore"):
        f_lo, f_hi = function(x.lo), function(x.hi)
        lo, hi = np.minimum(f_lo, f_hi), np.maximum(f_lo, f_hi)
        # k with (k + phase) pi in [lo, hi]; a margin of one float64 ULP of the argument
        first = np.ceil(down(x.lo / math.pi - phase) - 1e-15)
        last = np.floor(up(x.hi / math.pi - phase) + 1e-15)
        has_extremum = first <= last
        # an even k is a maximum for sin (phase 1/2) and for cos (phase 0)
        has_max = has_extremum & ((last - first >= 1) | (np.mod(first, 2) == 0))
        has_min = has_extremum & ((last - first >= 1) | (np.mod(first, 2) == 1))
        hi = np.where(has_max, 1.0, hi)
        lo = np.where(has_min, -1.0, lo)
        wild = ~(np.maximum(np.abs(x.lo), np.abs(x.hi)) <= SIN_COS_RANGE)
    fmt = op.fmt(op.result)
    ulps, absolute = TRITON_ERRORS[op.name]
    slack = float(2.0**-49)
    result = _widen_relative(Interval(lo, hi), _evaluating(fmt), ulps, absolute + slack)
    result = Interval(
        np.where(wild, -1.0 - absolute, result.lo), np.where(wild, 1.0 + absolute, result.hi)
    )
    nan = np.isinf(x.lo) | np.isinf(x.hi)
    set_result(op, ew._everything_where_nan(result.lo, result.hi, nan))
