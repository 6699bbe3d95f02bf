"""Casts, correctly rounded arithmetic and library functions (RENDER III-B).

* **Casts and copies**: the source enclosure rounded outward onto the result format; on the CPU,
  which converts to nearest, the hull of the enclosure and its nearest roundings.
* **Correctly rounded arithmetic** (add, sub, mul, div, sqrt, dropout's scaling): the exact range,
  rounded outward onto the result format (:mod:`pytest_fpcheck.interval.elementwise`); add, sub
  and mul on the CPU, which round to nearest, by the hull of the range and its nearest
  roundings (:meth:`pytest_fpcheck.interval.core.Interval.to_nearest`).
* **Library functions** (exp, log, tanh, erf, sigmoid, rsqrt, ...): the exact range of a monotone
  function, widened by its documented ULP error in the compute format (``ULP_ERRORS``), then
  rounded; ``pow`` by repeated outward products for integer exponents.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .... import formats as F
from ....adapters.torch import dtype_format
from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.kernels import power_bounds
from ....interval.registry import register_rule
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import (
    Array,
    erf64,
    raise_unsupported,
    rule,
    same_values,
    sigmoid64,
)

__all__: list[str] = []


def _converted(ctx: RuleContext, source: Any) -> Interval:
    """``source``'s enclosure converted to the result format: a conversion on the CPU rounds to
    nearest even (float64 to float16/bfloat16 through float32, c10's conversions), the hull of
    the enclosure and its nearest roundings (:meth:`Interval.to_nearest`); elsewhere (another
    device at either end, or an integer source, whose float64 copy may itself be rounded)
    rounded outward."""
    enclosure = ctx.interval(source)
    floating_on_cpu = (
        isinstance(source, torch.Tensor)
        and source.is_floating_point()
        and source.device.type == "cpu"
    )
    if ctx.nearest and floating_on_cpu:
        return enclosure.to_nearest(ctx.fmt)
    return enclosure.to_format(ctx.fmt)


@rule("aten._to_copy", "aten.to")
def _to_copy(ctx: RuleContext) -> Interval | None:
    if dtype_format(ctx.outputs[0].dtype) is None:
        return None
    return _converted(ctx, ctx.args[0])


@rule("aten.copy")
def _copy(ctx: RuleContext) -> Interval:
    return _converted(ctx, ctx.args[1])


def _nearest(ctx: RuleContext, *operands: Any) -> bool:
    """Whether the result is enclosed as rounded to nearest (:attr:`RuleContext.nearest`). Not
    with a 0-d tensor operand that tracking did not write: it may be a Python number that
    PyTorch handed to the dispatch mode already converted to the result's format (bfloat16
    or float16) while the exact program has the number itself, which that point does not
    enclose (``tests/tracking/test_scalar_products.py``); outward rounding covers the gap there."""
    return ctx.nearest and not any(
        isinstance(x, torch.Tensor) and x.dim() == 0 and ctx.interval(x).is_point for x in operands
    )


def _scaled(ctx: RuleContext, x: Any, alpha: Any) -> Interval:
    """alpha * x as add and sub use it: ATen's float16/bfloat16 CPU kernel rounds the product
    to the tensor's format before the sum (``torch.add(a, b, alpha=3)`` in bfloat16 gave
    RN(a + RN(3 b)), a ULP off RN(a + 3 b)), other paths round it to the compute format or not
    at all; the tensor's format is the coarser grid, so rounding outward onto it (alpha too)
    encloses every one of them."""
    operand = ctx.operand(x)
    if alpha is None or alpha == 1:
        return operand
    return ew.mul(operand, ctx.operand(alpha), ctx.fmt, operand_bits=64)


@rule("aten.add", "aten.sub", "aten.rsub")
def _add(ctx: RuleContext) -> Interval:
    a, b = ctx.arg(0, "self"), ctx.arg(1, "other")
    if ctx.call.functional == "aten.rsub":
        a, b = b, a
    right = _scaled(ctx, b, ctx.kwargs.get("alpha", ctx.args[2] if len(ctx.args) > 2 else None))
    left = ctx.operand(a)
    nearest = _nearest(ctx, a, b)
    if ctx.call.functional == "aten.add":
        return ew.add(left, right, ctx.fmt, nearest=nearest)
    return ew.sub(left, right, ctx.fmt, nearest=nearest)


@rule("aten.mul")
def _mul(ctx: RuleContext) -> Interval:
    """A Python number times a float16 or bfloat16 tensor on the CPU: ATen's ``mul_kernel``
    takes the number in the compute format (``original_scalar_value<opmath_t>``, float32), not
    rounded to the tensor's format first (measured bit for bit on contiguous, strided, 0-d and
    broadcast tensors and in place, ``tests/tracking/test_scalar_products.py``), so it is
    rounded outward onto float32 rather than onto the tensor's format (a bfloat16 ULP of the
    scale factor, 2**-8 relatively, in every attention score); elsewhere (other devices, and
    the in-place ``mul_.Scalar``, which ATen runs as ``mul_out(self, number, self)`` with the
    number first, so that the kernel converts it to the tensor's format before the product:
    measured bit for bit, ``tests/tracking/test_wrapped_numbers.py``) onto the tensor's
    format, which encloses either conversion. A tensor times itself (:func:`._common.same_values`)
    is a square: |x| times |x|, which the kernel's rounding maps to the same numbers, never
    negative."""
    a, b = ctx.arg(0, "self"), ctx.arg(1, "other")
    if same_values(a, b):
        # a square: |x| |x| rounds to the same numbers as x x, and is never negative
        size = ew.absolute(ctx.operand(a))
        return ew.mul(
            size,
            size,
            ctx.fmt,
            operand_bits=ctx.operand_bits(a),
            nearest=_nearest(ctx, a),
        )
    in_float32 = ctx.device.type == "cpu" and ctx.call.name != "aten.mul_.Scalar"
    if in_float32 and (_is_number(a) or _is_number(b)):
        bits = max(ctx.operand_bits(a, b), ctx.compute.precision)
        return ew.mul(
            ctx.operand(a, ctx.compute),
            ctx.operand(b, ctx.compute),
            ctx.fmt,
            operand_bits=bits,
            nearest=_nearest(ctx, a, b),
        )
    return ew.mul(
        ctx.operand(a),
        ctx.operand(b),
        ctx.fmt,
        operand_bits=ctx.operand_bits(a, b),
        nearest=_nearest(ctx, a, b),
    )


def _is_number(x: Any) -> bool:
    """A Python number (not a tensor): what a wrapped scalar argument arrives as."""
    return isinstance(x, (bool, int, float))


@rule("aten.native_dropout")
def _native_dropout(ctx: RuleContext) -> tuple[Interval, None]:
    """ATen's fused dropout: when training (``train`` True or None), x * mask * scale with the
    drawn mask (its boolean output, exact) and scale = 1 / (1 - p) held in the compute format,
    one rounding; otherwise a copy of x. (The decomposition of ``F.dropout`` reaches the
    tracker as bernoulli, mul and div instead.)"""
    x = ctx.arg(0, "input")
    p, train = float(ctx.arg(1, "p")), ctx.arg(2, "train", None)
    a = ctx.operand(x)
    if train is False:
        return a, None
    kept = ctx.values(ctx.outputs[1]) != 0
    masked = Interval(np.where(kept, a.lo, 0.0), np.where(kept, a.hi, 0.0))
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return (
        ew.mul(masked, ctx.operand(scale, ctx.compute), ctx.fmt, operand_bits=ctx.operand_bits(x)),
        None,
    )


@rule("aten.div")
def _div(ctx: RuleContext) -> Interval:
    quotient = ew.div(
        ctx.operand(ctx.arg(0, "self")), ctx.operand(ctx.arg(1, "other")), ctx.compute
    )
    mode = ctx.kwargs.get("rounding_mode")
    if mode is not None:
        integral = np.trunc if mode == "trunc" else np.floor
        if ctx.fmt is not ctx.compute:
            # float16 and bfloat16 kernels round the quotient to the tensor's format before
            # truncating it (bfloat16's 1 / 0.10009765625 is 10, not 9), and the floor's
            # (a - fmod(a, b)) / b rounds twice there: the quotient rounded outward onto the
            # format, then widened by two of its units (the two roundings) and 1 (the floor's
            # correction step)
            quotient = quotient.to_format(ctx.fmt)
            if mode != "trunc":
                unit = F.ulp(np.maximum(np.abs(quotient.lo), np.abs(quotient.hi)), ctx.fmt)
                quotient = Interval(
                    down(quotient.lo - 2 * unit - 1), up(quotient.hi + 2 * unit + 1)
                )
        quotient = Interval(integral(quotient.lo), integral(quotient.hi))
        # an infinite quotient's floor or trunc is NaN in ATen's kernels (they take
        # fmod(a, b) of an infinite a): the whole line where the quotient may be infinite
        infinite = np.isinf(quotient.lo) | np.isinf(quotient.hi)
        if np.any(infinite):
            quotient = Interval(
                np.where(infinite, -np.inf, quotient.lo), np.where(infinite, np.inf, quotient.hi)
            )
    elif ctx.fmt.name == ctx.compute.name:  # the quotient's ends are on the format's grid
        return quotient
    return quotient.to_format(ctx.fmt)


@rule("aten.reciprocal")
def _reciprocal(ctx: RuleContext) -> Interval:
    return ew.div(Interval.point(np.asarray(1.0)), ctx.operand(ctx.args[0]), ctx.fmt)


@rule("aten.neg")
def _neg(ctx: RuleContext) -> Interval:
    return ew.negate(ctx.interval(ctx.args[0]))


@rule("aten.abs")
def _abs(ctx: RuleContext) -> Interval:
    return ew.absolute(ctx.interval(ctx.args[0]))


@rule("aten.sqrt")
def _sqrt(ctx: RuleContext) -> Interval:
    return ew.sqrt(ctx.operand(ctx.args[0]), ctx.fmt)


#: Functions whose scalar CPU kernel (ATen uses it for the elements a vector loop leaves over)
#: computes in the tensor's own format when it is narrower than the compute format: the extra
#: relative error, in unit round-offs of that format. rsqrt's is 1 / std::sqrt(x) in c10::Half
#: arithmetic, which rounds the square root to float16 (found by the soundness tests); the
#: scalar kernels of sigmoid, gelu and silu compute in float (``opmath_t``).
_NARROW_INTERMEDIATES = {"rsqrt": 2.0}


def _narrow_units(ctx: RuleContext) -> float:
    """The tensor format's unit round-off when it is narrower than the compute format, else 0."""
    return ctx.fmt.unit_roundoff if ctx.fmt.precision < ctx.compute.precision else 0.0


def _library(
    name: str,
    function: Callable[[Array], Array],
    *,
    increasing: bool = True,
    register: bool = True,
) -> Callable[[RuleContext], Interval]:
    """The rule of a monotone library function (registered as ``aten.<name>`` unless
    ``register`` is False)."""

    def rule(ctx: RuleContext) -> Interval:
        return ew.library_function(
            function,
            ctx.operand(ctx.args[0]),
            ctx.fmt,
            ctx.compute,
            ew.ULP_ERRORS[name],
            increasing=increasing,
            absolute=ew.ABSOLUTE_ERRORS.get(name, (0.0, 0.0)),
            relative=_NARROW_INTERMEDIATES.get(name, 0.0) * _narrow_units(ctx),
        )

    if register:
        register_rule(f"aten.{name}", rule)
    return rule


ew.ULP_ERRORS.setdefault("sigmoid", 4.0)  # exp (2) + add and reciprocal (1/2 each), rounded up
_library("exp", np.exp)
_library("exp2", np.exp2)
_library("expm1", np.expm1)
_library("log", np.log)
_library("log2", np.log2)
_library("log1p", np.log1p)
_library("tanh", np.tanh)
_library("erf", erf64)
_library("sigmoid", sigmoid64)
_library("log10", np.log10)
_library("asinh", np.arcsinh)
_sinh_library = _library("sinh", np.sinh, register=False)


def _exp_overflow(ctx: RuleContext) -> float:
    """Where |x| passes this, a hyperbolic function's exp(|x|) may overflow the compute format
    (bfloat16's ``sinh(89)`` is inf, its exact value 2.2e38 finite): one below the logarithm of
    its largest number, for whatever scaling the library applies."""
    return math.log(ctx.compute.max_finite) - 1.0


@rule("aten.sinh")
def _sinh(ctx: RuleContext) -> Interval:
    """The library function's enclosure, an end beyond :func:`_exp_overflow` infinite."""
    a, result = ctx.operand(ctx.args[0]), _sinh_library(ctx)
    limit = _exp_overflow(ctx)
    return Interval(
        np.where(a.lo < -limit, -np.inf, result.lo), np.where(a.hi > limit, np.inf, result.hi)
    )


@rule("aten.cosh")
def _cosh(ctx: RuleContext) -> Interval:
    """cosh is even and increases in |x|: the library function's enclosure over |x|'s, the
    upper end infinite beyond :func:`_exp_overflow`."""
    size = ew.absolute(ctx.operand(ctx.args[0]))
    result = ew.library_function(np.cosh, size, ctx.fmt, ctx.compute, ew.ULP_ERRORS["cosh"])
    return Interval(result.lo, np.where(size.hi > _exp_overflow(ctx), np.inf, result.hi))


_rsqrt_library = _library("rsqrt", lambda x: 1.0 / np.sqrt(x), increasing=False, register=False)


@rule("aten.rsqrt")
def _rsqrt(ctx: RuleContext) -> Interval:
    """The library function's enclosure, with -inf where the operand may be zero (1 / sqrt(-0.0)
    is -inf: :func:`_negative_zero`)."""
    return _negative_zero(ctx.operand(ctx.args[0]), _rsqrt_library(ctx))


@rule("aten.pow")
def _pow(ctx: RuleContext) -> Interval:
    """Integer exponents: PyTorch multiplies (x*x, x*x*x, repeated squaring), so the result
    lies between the endpoint powers computed with p - 1 outward-rounded products (x^p is
    monotone in x for odd p, in |x| for even p). Other exponents: std::pow, a library function
    of non-negative bases."""
    base, exponent = ctx.arg(0, "self"), ctx.arg(1, "exponent")
    if isinstance(exponent, torch.Tensor) or not isinstance(base, torch.Tensor):
        raise_unsupported(ctx, "pow with a tensor exponent or a scalar base")
    a = ctx.operand(base)
    p = float(exponent)
    # the kernel may round a number exponent to the tensor's format (bfloat16's pow(1.01)
    # takes 1.0078125) or to the compute format: x**q is monotone in q, so the hull of the
    # results for each candidate q holds the kernel's
    exponents = sorted({p, *(float(F.round_to(np.asarray(p), f)) for f in (ctx.fmt, ctx.compute))})
    if len(exponents) > 1:
        if not all(math.isfinite(q) for q in exponents):  # an exponent the format overflows
            return Interval.whole(a.shape)
        hull = _real_power(ctx, a, exponents[0])
        for q in exponents[1:]:
            hull = hull.hull(_real_power(ctx, a, q))
        return hull
    if p == 0:
        return Interval.point(np.ones(a.shape))
    if p.is_integer() and 0 < p <= 64:
        n = int(p)
        result = Interval(*power_bounds(a.lo, a.hi, n, ctx.compute, magnitude=n % 2 == 0))
        # the chain's ends lie on the compute format's grid: only a narrower format rounds
        return result if ctx.fmt.name == ctx.compute.name else result.to_format(ctx.fmt)
    if p == 0.5:
        return ew.sqrt(a, ctx.fmt)
    if p < 0 and p.is_integer():
        return _negative_integer_power(ctx, a, int(p))
    result = _real_power(ctx, a, p)
    if p == -0.5:  # float32, float64 and bfloat16 run rsqrt (its scalar path's allowance too)
        return _negative_zero(a, result).hull(_rsqrt(ctx))
    return result


def _negative_zero(a: Interval, result: Interval) -> Interval:
    """``rsqrt`` (and ``pow(x, -0.5)``, which ATen runs as rsqrt) of -0.0 is 1 / -0.0 = -inf:
    where the operand's enclosure holds zero, the lower end is -inf (an enclosure does not
    tell -0.0 from +0.0)."""
    zero = (a.lo <= 0) & (a.hi >= 0)
    if not np.any(zero):
        return result
    return Interval(np.where(zero, -np.inf, result.lo), np.broadcast_to(result.hi, a.shape))


_ONE = Interval.point(np.asarray(1.0))


def _negative_integer_power(ctx: RuleContext, a: Interval, p: int) -> Interval:
    """x**p for an integer p < 0. ATen computes ``1 / x`` (p = -1, float32, float64, bfloat16)
    and ``1 / (x * x)`` with each step rounded to the tensor's format (p = -2: bfloat16's
    square rounded to bfloat16 before its reciprocal, up to 1.5 ULPs from the exact power),
    else std::pow (float16 always); the enclosure is the hull of the library function's and
    those steps' (each rounded outward onto the format), so any of them holds. The power of
    |x|, then the sign: an even power is that of |x| (so a negative base is no longer the
    whole line); an odd one takes x's sign, and where x's enclosure holds zero (1 / -0.0 is
    -inf, 1 / +0.0 is +inf) the whole line."""
    size = ew.absolute(a)
    result = _real_power(ctx, size, float(p))
    if p == -2:
        square = ew.mul(size, size, ctx.fmt, operand_bits=ctx.operand_bits(ctx.args[0]))
        # a square that may underflow to +0 has the reciprocal +inf, never a negative number
        zero = square.lo <= 0
        reciprocal = ew.div(
            _ONE, Interval(np.where(zero, square.hi, square.lo), square.hi), ctx.fmt
        )
        result = result.hull(Interval(reciprocal.lo, np.where(zero, np.inf, reciprocal.hi)))
    if p % 2 == 0:
        return result
    if p == -1:
        result = result.hull(ew.div(_ONE, size, ctx.fmt))
    lo = np.where(a.lo > 0, result.lo, np.where(a.hi < 0, -result.hi, -np.inf))
    hi = np.where(a.lo > 0, result.hi, np.where(a.hi < 0, -result.lo, np.inf))
    return Interval(lo, hi)


def _real_power(ctx: RuleContext, a: Interval, p: float) -> Interval:
    """std::pow(x, p) of non-negative bases, a library function (a negative base: NaN, the
    whole line)."""
    with np.errstate(invalid="ignore"):
        positive = Interval(np.where(a.lo < 0, np.nan, a.lo), np.where(a.hi < 0, np.nan, a.hi))
    return ew.library_function(
        lambda x: np.power(x, p),
        positive,
        ctx.fmt,
        ctx.compute,
        ew.ULP_ERRORS["pow"],
        increasing=p > 0,
    )
