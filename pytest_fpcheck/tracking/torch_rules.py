"""Interval rules for ATen operations (RENDER section III-B, issue 3 "interval rules").

Groups, each with the rule it implements:

* **Exact rearrangements and order-preserving selections** (index, gather, scatter, cat, stack,
  embedding, pad, flip, sort, amax, relu, ...): the operation is non-decreasing in each floating
  argument, so it is run on the lower ends and on the upper ends (in float64, Python dispatch
  disabled). Views need no rule at all: bounds live beside storages (see ``store``).
* **Correctly rounded arithmetic** (add, sub, mul, div, sqrt, casts): the exact range, rounded
  outward onto the result format (:mod:`pytest_fpcheck.interval.elementwise`).
* **Library functions** (exp, log, tanh, erf, sigmoid, ...): the exact range of a monotone
  function, widened by its documented ULP error in the compute format
  (``ULP_ERRORS``), then rounded.
* **Composite element-wise functions** (gelu, silu, elu, softplus, leaky_relu): PyTorch's own
  formula, step by step in the compute format.
* **Reductions and products** (sum, mean, var, norm, cumsum, logsumexp, mm, addmm, bmm,
  convolution): exact range plus gamma_k times the sum of magnitudes, in the accumulation format
  of :mod:`~pytest_fpcheck.tracking.policy` (:mod:`pytest_fpcheck.interval.linalg`).
* **Normalisations and softmax**: the exact range by monotonicity where the function is monotone
  in each input (softmax, log_softmax), else by interval evaluation of the formula; plus an
  allowance for the rounding of every evaluation order PyTorch uses.

Factories and random fills produce exact inputs (points).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..adapters.torch import dtype_format, internal
from ..formats import FORMATS, Format
from ..interval import elementwise as ew
from ..interval.core import Interval, gamma
from ..interval.kernels import (
    float32_magnitudes,
    gelu_erf_bounds,
    moments_rows,
    normalise_rows,
    softmax_bounds,
)
from ..interval.linalg import matmul, may_overflow, reduce_sum
from ..interval.registry import register_rule
from ..interval.rounding import down, up
from .context import RuleContext
from .policy import dot_factor, matmul_precision

__all__: list[str] = []

_F64 = FORMATS["float64"]
Array = np.ndarray


def _rule(*names: str) -> Callable[[Callable[[RuleContext], Any]], Callable[[RuleContext], Any]]:
    def register(function: Callable[[RuleContext], Any]) -> Callable[[RuleContext], Any]:
        for name in names:
            register_rule(name, function)
        return function

    return register


def _torch(array: Array) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))


def _dims(dim: Any, ndim: int) -> tuple[int, ...]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return tuple(sorted(d % max(ndim, 1) for d in dim))


# --------------------------------------------------------------------------------------------
# Points: factories, random fills, uninitialised memory.


def _point_outputs(ctx: RuleContext) -> tuple[Interval, ...]:
    return tuple(Interval.point(ctx.values(t)) for t in ctx.outputs)


for _name in (
    "aten.bernoulli",
    "aten.uniform",
    "aten.normal",
    "aten.random",
    "aten.exponential",
    "aten.empty_like",
    "aten.zeros_like",
    "aten.ones_like",
    "aten.full_like",
    "aten.rand_like",
    "aten.randn_like",
    "aten.zero",
    "aten.fill",
):
    register_rule(_name, _point_outputs)


# --------------------------------------------------------------------------------------------
# Order-preserving operations: run the op on the lower ends and on the upper ends.


def _swap_floats(value: Any, pick: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return pick(value) if dtype_format(value.dtype) is not None else value
    if isinstance(value, (list, tuple)):
        return type(value)(_swap_floats(v, pick) for v in value)
    return value


def _monotone(ctx: RuleContext) -> Any:
    """Run the op on float64 lower ends, then on upper ends; booleans must be decided."""
    for value in _flat(ctx.args) + _flat(list(ctx.kwargs.values())):
        if isinstance(value, torch.Tensor) and value.dtype == torch.bool:
            _, decided = ctx.condition(value)
            if not decided.all():
                ctx.note(
                    "a boolean argument depends on an undecided comparison; the bounds "
                    "follow the observed outcome"
                )
    ends: dict[int, Interval] = {}

    def end(index: int) -> Callable[[torch.Tensor], torch.Tensor]:
        def pick(t: torch.Tensor) -> torch.Tensor:
            key = id(t)
            if key not in ends:
                ends[key] = ctx.interval(t)
            interval = ends[key]
            return _torch(interval.lo if index == 0 else interval.hi)

        return pick

    kwargs = {k: v for k, v in ctx.kwargs.items() if k != "out"}
    with internal(), torch.no_grad():
        low = ctx.call.func(*_swap_floats(ctx.args, end(0)), **_swap_floats(kwargs, end(0)))
        all_points = all(i.is_point for i in ends.values())
        high = (
            low
            if all_points
            else ctx.call.func(*_swap_floats(ctx.args, end(1)), **_swap_floats(kwargs, end(1)))
        )
    lows = low if isinstance(low, (tuple, list)) else (low,)
    highs = high if isinstance(high, (tuple, list)) else (high,)
    result: list[Interval | None] = []
    for lo_t, hi_t in zip(lows, highs, strict=True):
        if not isinstance(lo_t, torch.Tensor) or dtype_format(lo_t.dtype) is None:
            result.append(None)
            continue
        lo_a = lo_t.to(torch.float64).numpy()
        result.append(
            Interval.point(lo_a) if all_points else Interval(lo_a, hi_t.to(torch.float64).numpy())
        )
    return tuple(result)


def _flat(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out.extend(_flat(v) if isinstance(v, (list, tuple)) else [v])
    return out


for _name in (
    "aten.clone",
    "aten.contiguous",
    "aten.cat",
    "aten.stack",
    "aten.index",
    "aten.index_select",
    "aten.gather",
    "aten.take",
    "aten.take_along_dim",
    "aten.embedding",
    "aten.repeat",
    "aten.tile",
    "aten.flip",
    "aten.roll",
    "aten.tril",
    "aten.triu",
    "aten.constant_pad_nd",
    "aten.reflection_pad1d",
    "aten.reflection_pad2d",
    "aten.replication_pad1d",
    "aten.replication_pad2d",
    "aten.scatter",
    "aten.slice_scatter",
    "aten.select_scatter",
    "aten.diagonal_scatter",
    "aten.index_put",
    "aten.masked_scatter",
    "aten.expand_copy",
    "aten.permute_copy",
    "aten.unfold_copy",
    "aten.diag_embed",
    "aten.sort",
    "aten.topk",
    "aten.amax",
    "aten.amin",
    "aten.max",
    "aten.min",
    "aten.maximum",
    "aten.minimum",
    "aten.fmax",
    "aten.fmin",
    "aten.cummax",
    "aten.cummin",
    "aten.relu",
    "aten.hardtanh",
    "aten.clamp",
    "aten.clamp_min",
    "aten.clamp_max",
    "aten.floor",
    "aten.ceil",
    "aten.trunc",
    "aten.round",
    "aten.sign",
    "aten.sgn",
    "aten.alias_copy",
    "aten.lift_fresh_copy",
    "aten.max_pool2d_with_indices",
    "aten.max_pool1d",
    "aten.max_pool2d",
    "aten.adaptive_max_pool2d",
):
    register_rule(_name, _monotone)


@_rule("aten.nan_to_num")
def _nan_to_num(ctx: RuleContext) -> Interval:
    """Monotone on the extended reals (-inf and +inf map to neginf and posinf); an element that
    may be NaN (the whole line) also takes the ``nan`` replacement, so its hull is kept."""
    lows_highs: Interval | None = _monotone(ctx)[0]
    assert lows_highs is not None
    a = ctx.interval(ctx.args[0])
    maybe_nan = np.isneginf(a.lo) & np.isposinf(a.hi)
    if not maybe_nan.any():
        return lows_highs
    replacement = float(ctx.arg(1, "nan", 0.0) or 0.0)
    return Interval(
        np.where(maybe_nan, np.minimum(lows_highs.lo, replacement), lows_highs.lo),
        np.where(maybe_nan, np.maximum(lows_highs.hi, replacement), lows_highs.hi),
    ).to_format(ctx.fmt)


@_rule("aten.where")
def _where(ctx: RuleContext) -> Interval:
    condition, decided = ctx.condition(ctx.arg(0, "condition"))
    a, b = ctx.operand(ctx.arg(1, "self")), ctx.operand(ctx.arg(2, "other"))
    return ew.where(condition, decided, a, b)


@_rule("aten.masked_fill")
def _masked_fill(ctx: RuleContext) -> Interval:
    condition, decided = ctx.condition(ctx.arg(1, "mask"))
    return ew.where(condition, decided, ctx.operand(ctx.arg(2, "value")), ctx.interval(ctx.args[0]))


def _compare(ctx: RuleContext) -> Interval:
    """A comparison's result is exact where the intervals decide it, [0, 1] where not."""
    a, b = ctx.interval(ctx.args[0]), ctx.interval(ctx.args[1])
    op = ctx.call.functional.split(".")[-1]
    with np.errstate(invalid="ignore"):
        if op in ("gt", "lt"):
            x, y = (a, b) if op == "gt" else (b, a)
            sure, never = x.lo > y.hi, x.hi <= y.lo
        elif op in ("ge", "le"):
            x, y = (a, b) if op == "ge" else (b, a)
            sure, never = x.lo >= y.hi, x.hi < y.lo
        else:
            point = (a.lo == a.hi) & (b.lo == b.hi) & (a.lo == b.lo)
            apart = (a.hi < b.lo) | (b.hi < a.lo)
            sure, never = (point, apart) if op == "eq" else (apart, point)
    value = ctx.values(ctx.outputs[0])
    decided = sure | never
    if decided.all():
        return Interval.point(value)
    return Interval(np.where(decided, value, 0.0), np.where(decided, value, 1.0))


for _name in ("aten.gt", "aten.lt", "aten.ge", "aten.le", "aten.eq", "aten.ne"):
    register_rule(_name, _compare)


def _observed(ctx: RuleContext) -> tuple[None, ...]:
    """Integer and boolean results of floating operations (predicates, indices, counts) are
    taken as observed: RENDER's dynamic rule follows the executed path (section III-B-4). Only
    comparisons carry their decidedness on, for where/masked_fill and max/min."""
    return tuple(None for _ in ctx.outputs)


for _name in (
    "aten.isnan",
    "aten.isinf",
    "aten.isfinite",
    "aten.isposinf",
    "aten.isneginf",
    "aten.signbit",
    "aten.isclose",
    "aten.argmax",
    "aten.argmin",
    "aten.argsort",
    "aten.nonzero",
    "aten.count_nonzero",
    "aten.any",
    "aten.all",
    "aten.equal",
    "aten.searchsorted",
    "aten.bucketize",
):
    register_rule(_name, _observed)


@_rule("aten.logical_not", "aten.bitwise_not")
def _logical_not(ctx: RuleContext) -> Interval:
    a = ctx.interval(ctx.args[0])
    return Interval.point(1 - a.lo) if a.is_point else Interval(1 - a.hi, 1 - a.lo)


@_rule("aten.logical_and", "aten.logical_or", "aten.bitwise_and", "aten.bitwise_or")
def _logical(ctx: RuleContext) -> Interval:
    a, b = ctx.interval(ctx.args[0]), ctx.interval(ctx.args[1])
    combine = np.minimum if ctx.call.functional.endswith("and") else np.maximum
    return Interval(combine(a.lo, b.lo), combine(a.hi, b.hi))


# --------------------------------------------------------------------------------------------
# Casts and copies.


@_rule("aten._to_copy", "aten.to")
def _to_copy(ctx: RuleContext) -> Interval | None:
    if dtype_format(ctx.outputs[0].dtype) is None:
        return None
    return ctx.interval(ctx.args[0]).to_format(ctx.fmt)


@_rule("aten.copy")
def _copy(ctx: RuleContext) -> Interval:
    return ctx.interval(ctx.args[1]).to_format(ctx.fmt)


# --------------------------------------------------------------------------------------------
# Arithmetic.


def _scaled(ctx: RuleContext, x: Any, alpha: Any) -> Interval:
    operand = ctx.operand(x)
    if alpha is None or alpha == 1:
        return operand
    return ew.mul(operand, ctx.operand(alpha, ctx.compute), ctx.compute, operand_bits=64)


@_rule("aten.add", "aten.sub", "aten.rsub")
def _add(ctx: RuleContext) -> Interval:
    a, b = ctx.arg(0, "self"), ctx.arg(1, "other")
    if ctx.call.functional == "aten.rsub":
        a, b = b, a
    right = _scaled(ctx, b, ctx.kwargs.get("alpha", ctx.args[2] if len(ctx.args) > 2 else None))
    left = ctx.operand(a)
    if ctx.call.functional == "aten.add":
        return ew.add(left, right, ctx.fmt)
    return ew.sub(left, right, ctx.fmt)


@_rule("aten.mul")
def _mul(ctx: RuleContext) -> Interval:
    a, b = ctx.arg(0, "self"), ctx.arg(1, "other")
    return ew.mul(ctx.operand(a), ctx.operand(b), ctx.fmt, operand_bits=ctx.operand_bits(a, b))


@_rule("aten.native_dropout")
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


@_rule("aten.div")
def _div(ctx: RuleContext) -> Interval:
    quotient = ew.div(
        ctx.operand(ctx.arg(0, "self")), ctx.operand(ctx.arg(1, "other")), ctx.compute
    )
    mode = ctx.kwargs.get("rounding_mode")
    if mode is not None:
        integral = np.trunc if mode == "trunc" else np.floor
        quotient = Interval(integral(quotient.lo), integral(quotient.hi))
    return quotient.to_format(ctx.fmt)


@_rule("aten.reciprocal")
def _reciprocal(ctx: RuleContext) -> Interval:
    return ew.div(Interval.point(np.asarray(1.0)), ctx.operand(ctx.args[0]), ctx.fmt)


@_rule("aten.neg")
def _neg(ctx: RuleContext) -> Interval:
    return ew.negate(ctx.interval(ctx.args[0]))


@_rule("aten.abs")
def _abs(ctx: RuleContext) -> Interval:
    return ew.absolute(ctx.interval(ctx.args[0]))


@_rule("aten.sqrt")
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


def _library(name: str, function: Callable[[Array], Array], *, increasing: bool = True) -> None:
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

    register_rule(f"aten.{name}", rule)


def _erf(x: Array) -> Array:
    """erf in float64 (PyTorch's SLEEF kernel, at most 1 ULP; the rules allow 8)."""
    with internal():
        result: Array = torch.special.erf(_torch(x)).numpy()
    return result


def _sigmoid(x: Array) -> Array:
    """The logistic function in float64 (PyTorch's kernel; the rules allow 8 ULPs)."""
    with internal():
        result: Array = torch.sigmoid(_torch(x)).numpy()
    return result


ew.ULP_ERRORS.setdefault("sigmoid", 4.0)  # exp (2) + add and reciprocal (1/2 each), rounded up
_library("exp", np.exp)
_library("exp2", np.exp2)
_library("expm1", np.expm1)
_library("log", np.log)
_library("log2", np.log2)
_library("log1p", np.log1p)
_library("tanh", np.tanh)
_library("erf", _erf)
_library("sigmoid", _sigmoid)
_library("rsqrt", lambda x: 1.0 / np.sqrt(x), increasing=False)


def _c(ctx: RuleContext, value: float) -> Interval:
    """A constant as the compute format holds it."""
    return Interval.point(np.asarray(float(value))).to_format(ctx.compute)


def _power_chain(x: Array, p: int, fmt: Format) -> Interval:
    """[x^p rounded down, x^p rounded up] through p - 1 multiplications in ``fmt``."""
    point = Interval.point(x)
    result = point
    for _ in range(p - 1):
        result = ew.mul(result, point, fmt, operand_bits=64)
    return result


@_rule("aten.pow")
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
    if p == 0:
        return Interval.point(np.ones(a.shape))
    if p.is_integer() and 0 < p <= 64:
        n = int(p)
        ends = ew.absolute(a) if n % 2 == 0 else a
        low = _power_chain(ends.lo, n, ctx.compute)
        high = low if ends.is_point else _power_chain(ends.hi, n, ctx.compute)
        return Interval(low.lo, high.hi).to_format(ctx.fmt)
    if p == 0.5:
        return ew.sqrt(a, ctx.fmt)
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


def raise_unsupported(ctx: RuleContext, what: str) -> None:
    from ..errors import UnsupportedOperation

    raise UnsupportedOperation(ctx.call.name, where=ctx.call.site, how=f"{what} has no rule yet")


# --------------------------------------------------------------------------------------------
# Composite element-wise functions: PyTorch's formula, each step rounded in the compute format.


def _where_positive(a: Interval, positive: Interval, negative: Interval) -> Interval:
    """x > 0 ? positive : negative, the hull where the sign of x is undecided."""
    condition = a.lo > 0
    decided = (a.lo > 0) | (a.hi <= 0)
    return ew.where(condition, decided, positive, negative)


def _unimodal(
    ctx: RuleContext,
    function: Callable[[Array], Array],
    minimum: tuple[float, float],
    allowance: Callable[[Array, Array], Array],
) -> Interval:
    """A function with one minimum (at ``minimum[0]``, of value ``minimum[1]``, rounded down)
    and increasing away from it on both sides: its exact range over [lo, hi] is the hull of
    the end values, and of the minimum when the interval contains its abscissa. The float64
    evaluation carries 2**-48 (|f| + |x| + 1) of slack; ``allowance(magnitude_x, magnitude_f)``
    is the error bound of ATen's evaluation in the compute format. Then rounded onto the
    result format."""
    a = ctx.operand(ctx.args[0], ctx.compute)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        f_lo = function(a.lo)
        f_hi = f_lo if a.is_point else function(a.hi)
        low = np.minimum(f_lo, f_hi)
        if not a.is_point:
            # the abscissa is known to about 1e-16; a margin keeps the test on the safe side
            near = (a.lo <= minimum[0] + 1e-9) & (minimum[0] - 1e-9 <= a.hi)
            low = np.where(near, np.minimum(low, minimum[1]), low)
        high = np.maximum(f_lo, f_hi)
        x_mag = a.magnitude()
        f_mag = np.maximum(np.abs(low), np.abs(high))
        spread = allowance(x_mag, f_mag) + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
        spread = np.where(np.isnan(spread), np.inf, spread)
        result = Interval(down(low - spread), up(high + spread))
    return ew.everything_where_nan(result).to_format(ctx.fmt)


_GELU_TANH_BETA, _GELU_TANH_KAPPA = math.sqrt(2 / math.pi), 0.044715
_GELU_ERF_MINIMUM = (-0.7517915246935645, -0.16997120747990367)


def _gelu_tanh(x: Array) -> Array:
    result: Array = 0.5 * x * (1.0 + np.tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x**3)))
    return result


def _silu(x: Array) -> Array:
    result: Array = x * _sigmoid(x)
    return result


@_rule("aten.gelu")
def _gelu(ctx: RuleContext) -> Interval:
    """ATen's GeluKernel in the compute format (u its unit round-off):

    * none: x * 0.5 * (1 + erf(x * M_SQRT1_2)): the product x M_SQRT1_2 moves erf by at most
      0.8 |x| u, erf errs by 2 ULPs plus its absolute allowance (12 u in all), 1 + erf by 2 u,
      the two products by u |x|: in all at most |x| u (9 + 0.5 |x|);
    * tanh: 0.5 * x * (1 + tanh(beta (x + kappa x^3))): the inner argument errs by at most
      2 beta u (|x| + 4.01 kappa |x|^3), which tanh damps by sech^2 of the smallest |argument|
      it can have; tanh errs by 4 u, 1 + tanh by 2 u, the products by 2 u |x|.

    Both functions have one minimum (at -0.75179 and -0.75246)."""
    c = ctx.compute
    u, floor = c.unit_roundoff, 4 * c.smallest_normal
    if ctx.kwargs.get("approximate", "none") == "tanh":

        def allowance(x: Array, f: Array) -> Array:
            inner_error = 2 * _GELU_TANH_BETA * u * (x + 4.01 * _GELU_TANH_KAPPA * x**3)
            a = ctx.operand(ctx.args[0], c)
            nearest = np.where(
                (a.lo <= 0) & (a.hi >= 0), 0.0, np.minimum(np.abs(a.lo), np.abs(a.hi))
            )
            smallest_argument = np.maximum(
                _GELU_TANH_BETA * (nearest + _GELU_TANH_KAPPA * nearest**3) - inner_error, 0.0
            )
            damped = inner_error / np.cosh(np.minimum(smallest_argument, 300.0)) ** 2
            result: Array = 0.5 * x * (np.minimum(damped, 2.0) + 6.01 * u) + 2.01 * u * x + floor
            return result

        return _unimodal(ctx, _gelu_tanh, (-0.7524614220710163, -0.17004075057125406), allowance)
    # the same rule as _unimodal with the allowance x u (9 + x / 2) + floor, in one pass
    a = ctx.operand(ctx.args[0], c)
    lo, hi = gelu_erf_bounds(a.lo, a.hi, a.is_point, _GELU_ERF_MINIMUM, ctx.fmt, c, _erf)
    return Interval(lo, hi)


@_rule("aten.silu")
def _silu_rule(ctx: RuleContext) -> Interval:
    """ATen: x / (1 + exp(-x)): exp errs by 4 u relatively, 1 + exp by 5 u, the quotient by 6.1 u
    (6.5 u taken); where exp(-x) overflows the result is 0 instead of |x| e^x <= 2^(emin + 12).
    One minimum, at -1.27846."""
    c = ctx.compute
    u = c.unit_roundoff
    floor = math.ldexp(1.0, c.emin + 12)
    return _unimodal(
        ctx, _silu, (-1.278464542761074, -0.27846454276107386), lambda x, f: 6.5 * u * f + floor
    )


@_rule("aten.elu")
def _elu(ctx: RuleContext) -> Interval:
    """x > 0 ? scale * x : alpha * scale * expm1(x * input_scale)."""
    c = ctx.compute
    alpha, scale, input_scale = (
        float(ctx.arg(i, n, 1.0)) for i, n in ((1, "alpha"), (2, "scale"), (3, "input_scale"))
    )
    x = ctx.operand(ctx.args[0], c)
    positive = ew.mul(x, _c(ctx, scale), c, operand_bits=64) if scale != 1 else x
    inner = ew.mul(x, _c(ctx, input_scale), c, operand_bits=64) if input_scale != 1 else x
    em1 = ew.library_function(np.expm1, inner, c, c, ew.ULP_ERRORS["expm1"])
    negative = ew.mul(em1, _c(ctx, alpha * scale), c, operand_bits=64)
    return _where_positive(x, positive, negative).to_format(ctx.fmt)


@_rule("aten.leaky_relu")
def _leaky_relu(ctx: RuleContext) -> Interval:
    """x > 0 ? x : x * negative_slope."""
    x = ctx.operand(ctx.args[0], ctx.compute)
    slope = float(ctx.arg(1, "negative_slope", 0.01))
    negative = ew.mul(x, _c(ctx, slope), ctx.compute, operand_bits=64)
    return _where_positive(x, x, negative).to_format(ctx.fmt)


@_rule("aten.softplus")
def _softplus(ctx: RuleContext) -> Interval:
    """(x * beta) > threshold ? x : log1p(exp(x * beta)) / beta."""
    c = ctx.compute
    beta, threshold = float(ctx.arg(1, "beta", 1.0)), float(ctx.arg(2, "threshold", 20.0))
    x = ctx.operand(ctx.args[0], c)
    bx = ew.mul(x, _c(ctx, beta), c, operand_bits=64) if beta != 1 else x
    soft = ew.library_function(np.exp, bx, c, c, ew.ULP_ERRORS["exp"])
    soft = ew.library_function(np.log1p, soft, c, c, ew.ULP_ERRORS["log1p"])
    if beta != 1:
        soft = ew.div(soft, _c(ctx, beta), c)
    linear_side = bx.lo > threshold
    decided = linear_side | (bx.hi <= threshold)
    return ew.where(linear_side, decided, x, soft).to_format(ctx.fmt)


# --------------------------------------------------------------------------------------------
# Reductions.


def _sum_factor(ctx: RuleContext, accumulate: Format) -> Callable[[int], float]:
    u = accumulate.unit_roundoff
    return lambda n: ctx.sums.factor(n, u)


def _reduce_args(ctx: RuleContext, x: torch.Tensor) -> tuple[tuple[int, ...], bool]:
    dim = ctx.arg(1, "dim")
    keepdim = bool(ctx.arg(2, "keepdim", False))
    return _dims(dim, x.dim()), keepdim


@_rule("aten.sum")
def _sum(ctx: RuleContext) -> Interval:
    x = ctx.args[0]
    axes, keepdim = _reduce_args(ctx, x)
    source = dtype_format(x.dtype) or _F64
    accumulate = ctx.compute if ctx.compute.precision >= source.precision else source
    return reduce_sum(
        ctx.interval(x), axes, keepdim, ctx.fmt, _sum_factor(ctx, accumulate), accumulate=accumulate
    )


@_rule("aten.mean")
def _mean(ctx: RuleContext) -> Interval:
    """sum / n, the sum accumulated in the compute format and possibly stored in the result's
    format first (ATen's CPU mean divides a result-typed sum): the wider of the two bounds."""
    x = ctx.args[0]
    axes, keepdim = _reduce_args(ctx, x)
    c = ctx.compute
    total = reduce_sum(ctx.interval(x), axes, keepdim, ctx.fmt, _sum_factor(ctx, c), accumulate=c)
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    return ew.div(total, Interval.point(np.asarray(float(n))), ctx.fmt)


@_rule("aten.prod")
def _prod(ctx: RuleContext) -> Interval:
    """The exact range by sequential interval products (outward in float64), widened by
    gamma_{n-1} times the largest magnitude (any order), with the unit round-off of the
    narrower of the compute and tensor formats."""
    x = ctx.args[0]
    dim = ctx.arg(1, "dim")
    keepdim = bool(ctx.arg(2, "keepdim", False))
    axes = _dims(dim, x.dim())
    a = ctx.interval(x)
    lo = np.moveaxis(a.lo, axes, tuple(range(len(axes)))).reshape(
        -1, *[s for i, s in enumerate(a.shape) if i not in axes]
    )
    hi = np.moveaxis(a.hi, axes, tuple(range(len(axes)))).reshape(lo.shape)
    n = lo.shape[0]
    acc = Interval.point(np.ones(lo.shape[1:]))
    for i in range(n):
        acc = ew.mul(acc, Interval(lo[i], hi[i]), _F64)
    # ATen's CPU prod of float16/bfloat16 rounds its running product to the tensor's format:
    # the larger unit round-off is the sound one
    g = gamma(n - 1, max(ctx.compute.unit_roundoff, ctx.fmt.unit_roundoff))
    # plus one subnormal unit per product for underflow, which is absolute, not relative
    underflow = n * max(ctx.compute.smallest_subnormal, ctx.fmt.smallest_subnormal)
    result = acc.widen(up(acc.magnitude() * g + underflow) if n > 1 else 0.0)
    if keepdim:
        result = result.map(lambda v: np.expand_dims(v, axes))
    return result.to_format(ctx.fmt)


def _moments(
    ctx: RuleContext, a: Interval, axes: tuple[int, ...], correction: float
) -> tuple[Interval, Interval]:
    """(mean, variance) enclosures over ``axes`` (keepdims) in the compute format, for any of
    the algorithms PyTorch uses (two-pass, Welford): :func:`.kernels.moments_rows` on the
    elements laid out as rows."""
    kept = [i for i in range(len(a.shape)) if i not in axes]
    n = int(np.prod([a.shape[i] for i in axes]))
    rows = int(np.prod([a.shape[i] for i in kept]))

    def as_rows(v: Array) -> Array:
        return v.transpose(kept + list(axes)).reshape(rows, n)

    lo = as_rows(a.lo)
    hi = lo if a.is_point else as_rows(a.hi)
    mean_lo, mean_hi, var_lo, var_hi = moments_rows(lo, hi, correction, ctx.compute)
    shape = tuple(1 if i in axes else s for i, s in enumerate(a.shape))
    return (
        Interval(mean_lo.reshape(shape), mean_hi.reshape(shape)),
        Interval(var_lo.reshape(shape), var_hi.reshape(shape)),
    )


def _correction(ctx: RuleContext) -> float:
    correction = ctx.kwargs.get("correction")
    if correction is None:
        unbiased = ctx.kwargs.get(
            "unbiased", ctx.args[2] if len(ctx.args) > 2 and isinstance(ctx.args[2], bool) else True
        )
        return 1.0 if unbiased else 0.0
    return float(correction)


@_rule("aten.var", "aten.std")
def _var(ctx: RuleContext) -> Interval:
    x = ctx.args[0]
    axes = _dims(ctx.arg(1, "dim"), x.dim())
    keepdim = bool(ctx.kwargs.get("keepdim", False))
    _, variance = _moments(ctx, ctx.interval(x), axes, _correction(ctx))
    if ctx.call.functional == "aten.std":
        variance = ew.sqrt(variance, ctx.compute)
    if not keepdim:
        variance = variance.map(lambda v: np.squeeze(v, axis=axes))
    return variance.to_format(ctx.fmt)


@_rule("aten.linalg_vector_norm", "aten.norm")
def _vector_norm(ctx: RuleContext) -> Interval:
    """ord 2: sqrt(sum x^2); ord 1: sum |x|; ord +-inf: max / min |x| (exact); other ord p:
    (sum |x|^p)^(1/p) with std::pow's error."""
    x = ctx.args[0]
    order = float(ctx.arg(1, "ord", 2))
    axes = _dims(ctx.arg(2, "dim"), x.dim())
    keepdim = bool(ctx.arg(3, "keepdim", False))
    c = ctx.compute
    magnitude = ew.absolute(ctx.operand(x, c))
    if math.isinf(order):
        pick = np.max if order > 0 else np.min
        return Interval(
            pick(magnitude.lo, axis=axes, keepdims=keepdim),
            pick(magnitude.hi, axis=axes, keepdims=keepdim),
        ).to_format(ctx.fmt)
    factor = _sum_factor(ctx, c)
    if order == 1:
        return reduce_sum(magnitude, axes, keepdim, ctx.fmt, factor, accumulate=c)
    if order == 2:
        squares = ew.mul(magnitude, magnitude, c, operand_bits=64)
        return ew.sqrt(reduce_sum(squares, axes, keepdim, c, factor, accumulate=c), ctx.fmt)
    powered = ew.library_function(
        lambda v: np.power(v, order), magnitude, c, c, ew.ULP_ERRORS["pow"], increasing=order > 0
    )
    total = reduce_sum(powered, axes, keepdim, c, factor, accumulate=c)
    return ew.library_function(
        lambda v: np.power(v, 1 / order),
        total,
        ctx.fmt,
        c,
        ew.ULP_ERRORS["pow"],
        increasing=order > 0,
    )


@_rule("aten.logsumexp")
def _logsumexp(ctx: RuleContext) -> Interval:
    """m + log(sum(exp(x - m))), m the maximum. ATen composes it from tensor operations, so every
    intermediate (x - m, exp, the sum, log) is rounded to the tensor's own format."""
    x = ctx.args[0]
    axes = _dims(ctx.arg(1, "dim"), x.dim())
    keepdim = bool(ctx.arg(2, "keepdim", False))
    c, f = ctx.compute, ctx.fmt
    a = ctx.operand(x, f)
    shift = Interval(np.max(a.lo, axis=axes, keepdims=True), np.max(a.hi, axis=axes, keepdims=True))
    shift = Interval(
        np.where(np.isinf(shift.lo), 0.0, shift.lo), np.where(np.isinf(shift.hi), 0.0, shift.hi)
    )
    e = ew.library_function(np.exp, ew.sub(a, shift, f), f, c, ew.ULP_ERRORS["exp"])
    total = reduce_sum(e, axes, True, f, _sum_factor(ctx, c), accumulate=c)
    result = ew.add(ew.library_function(np.log, total, f, c, ew.ULP_ERRORS["log"]), shift, f)
    if not keepdim:
        result = result.map(lambda v: np.squeeze(v, axis=axes))
    return result


@_rule("aten.cumsum")
def _cumsum(ctx: RuleContext) -> Interval:
    """Position i sums i + 1 terms: exact range of the prefix sums, widened by gamma_i times the
    prefix sum of magnitudes, in the accumulation format."""
    x = ctx.args[0]
    axis = int(ctx.arg(1, "dim")) % max(x.dim(), 1)
    c = ctx.compute
    a = ctx.interval(x)
    n = a.shape[axis] if a.shape else 1
    factors = np.array(
        [ctx.sums.factor(i + 1, c.unit_roundoff) + 2 * gamma(i + 2, 2.0**-53) for i in range(n)]
    )
    shape = [1] * len(a.shape)
    if shape:
        shape[axis] = n
    factors = factors.reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        prefix_magnitude = np.cumsum(a.magnitude(), axis=axis) * (1 + 2**-40)
        spread = up(prefix_magnitude * factors)
        lo = down(np.cumsum(a.lo, axis=axis) - spread)
        hi = up(np.cumsum(a.hi, axis=axis) + spread)
        overflow = (
            may_overflow(prefix_magnitude, factors, c.max_finite) | np.isnan(lo) | np.isnan(hi)
        )
    return Interval(np.where(overflow, -np.inf, lo), np.where(overflow, np.inf, hi)).to_format(
        ctx.fmt
    )


# --------------------------------------------------------------------------------------------
# Softmax and log-softmax.


def _row_may_be_nan(a: Interval, axis: int) -> Array:
    """Softmax of a row is NaN when some element may be +inf (inf - inf) or every element may
    be -inf (0 / 0)."""
    result: Array = np.any(np.isposinf(a.hi), axis=axis, keepdims=True) | np.all(
        np.isneginf(a.lo), axis=axis, keepdims=True
    )
    return result


def _softmax_units(ctx: RuleContext) -> tuple[float, float]:
    """(u, kappa) for softmax-like kernels: u the unit round-off of their intermediates (ATen's
    reduced-precision CPU kernels may keep the running sum and its logarithm in the tensor's own
    format, so the larger of the compute and tensor formats'), kappa the relative error of one
    exp (its ULP error in the compute format, plus a rounding to the tensor format)."""
    c = ctx.compute
    u = max(c.unit_roundoff, ctx.fmt.unit_roundoff)
    return u, ew.ULP_ERRORS["exp"] * c.eps + (ctx.fmt.unit_roundoff if ctx.fmt is not c else 0.0)


def _shifted_exponentials(a: Interval, axis: int) -> tuple[Array, Array, Array, Array]:
    """(e_lo, e_hi, sum of e_hi, sum of e_lo) of exp(x - top), top the row's largest upper end,
    in float64 with their evaluation error allowed for (the difference's rounding, |d| 2**-53,
    and exp's own)."""
    top = np.max(a.hi, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        d_lo, d_hi = a.lo - top, a.hi - top
        e_lo = np.exp(d_lo) * (1 - (np.abs(np.where(np.isfinite(d_lo), d_lo, 0.0)) + 8) * 2.0**-51)
        e_hi = np.exp(d_hi) * (1 + (np.abs(np.where(np.isfinite(d_hi), d_hi, 0.0)) + 8) * 2.0**-51)
        total_hi = np.sum(e_hi, axis=axis, keepdims=True) * (1 + 2**-40)
        total_lo = np.sum(e_lo, axis=axis, keepdims=True) * (1 - 2**-40)
    return e_lo, e_hi, total_hi, total_lo


@_rule("aten._softmax", "aten._safe_softmax", "aten.softmax")
def _softmax(ctx: RuleContext) -> Interval:
    """softmax_i = e_i / S, e_j = exp(x_j - m), m the row's maximum (ATen's kernel).

    Exact range: softmax_i increases in x_i and decreases in the others, so
    [e_lo_i / (e_lo_i + sum_{j != i} e_hi_j), e_hi_i / (e_hi_i + sum_{j != i} e_lo_j)]
    (RENDER III-C-2 states this as an approximation; here it is rigorous).

    Rounding: with d = x - m <= 0, the computed exponential is e (1 + kappa) plus at most
    e^d (e^{-d u} - 1) <= 0.37 u (+ one subnormal): an absolute error a = 0.4 u + tiny that
    stays finite for any d, -inf included (exp(-inf) = 0 exactly). S >= 1 (the maximum's term
    is 1), so the computed sum is within S F^{+-1}, F = (1 + kappa + n a)(1 + gamma_n), and the
    result within [(p_lo (1 - kappa) - a) / (F (1 + u)), (p_hi (1 + kappa) + a) F (1 + u)]."""
    x = ctx.args[0]
    axis = int(ctx.arg(1, "dim")) % max(x.dim(), 1)
    c = ctx.compute
    a = ctx.operand(x, c)
    n = a.shape[axis] if a.shape else 1
    u, kappa = _softmax_units(ctx)
    absolute = 0.4 * u + (ew.ULP_ERRORS["exp"] + 1) * c.smallest_subnormal
    factor = (1 + kappa + n * absolute) * (1 + ctx.sums.factor(n, u)) * (1 + u) * (1 + 2**-40)
    # one compiled pass per row (the exponentials in float64 as _shifted_exponentials does)
    lo, hi = softmax_bounds(
        a.lo,
        a.hi,
        axis,
        kappa,
        absolute,
        factor,
        ctx.call.functional == "aten._safe_softmax",
        ctx.fmt,
    )
    return Interval(lo, hi)


@_rule("aten._log_softmax", "aten.log_softmax")
def _log_softmax(ctx: RuleContext) -> Interval:
    """(x_i - m) - log(S): exact range by monotonicity, then the rounding: the difference
    x_i - m errs by u |x_i - m| (evaluated at each end: the computed value is monotone in x_i),
    log S by log F (see _softmax) plus log's ULP error, the final subtraction by u |result|."""
    x = ctx.args[0]
    axis = int(ctx.arg(1, "dim")) % max(x.dim(), 1)
    c = ctx.compute
    a = ctx.operand(x, c)
    e_lo, e_hi, total_hi, total_lo = _shifted_exponentials(a, axis)
    top = np.max(a.hi, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    # m lies between the row's largest lower end and top
    lowest_max = np.max(a.lo, axis=axis, keepdims=True)
    shift_gap = np.where(np.isfinite(lowest_max), top - lowest_max, 0.0)
    n = a.shape[axis] if a.shape else 1
    u, kappa = _softmax_units(ctx)
    absolute = 0.4 * u + (ew.ULP_ERRORS["exp"] + 1) * c.smallest_subnormal
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        low = (a.lo - top) - np.log(e_lo + (total_hi - e_hi))
        high = (a.hi - top) - np.log(e_hi + np.maximum(total_lo - e_lo, 0.0))
        log_f = np.log((1 + kappa + n * absolute) * (1 + ctx.sums.factor(n, u))) * (1 + 2**-40)
        log_s = np.maximum(np.abs(np.log(total_hi)), np.abs(np.log(np.maximum(total_lo, 1e-300))))
        common = (
            log_f
            + (ew.ULP_ERRORS["log"] * c.eps + 2 * u) * log_s
            + ew.ULP_ERRORS["log"] * c.smallest_subnormal
        )
        low_allowance = (
            u * (np.abs(a.lo - top) + shift_gap)
            + common
            + u * np.abs(low)
            + 2**-48 * (np.abs(low) + log_s)
        )
        high_allowance = (
            u * (np.abs(a.hi - top) + shift_gap)
            + common
            + u * np.abs(high)
            + 2**-48 * (np.abs(high) + log_s)
        )
        lo = down(low - low_allowance)
        hi = up(high + high_allowance)
        nan = np.isnan(lo) | np.isnan(hi) | _row_may_be_nan(a, axis)
    return Interval(np.where(nan, -np.inf, lo), np.where(nan, np.inf, hi)).to_format(ctx.fmt)


# --------------------------------------------------------------------------------------------
# Normalisations: (x - mean) * rstd * weight + bias.


def _affine_normalise(
    ctx: RuleContext,
    a: Interval,
    mean: Interval,
    rstd: Interval,
    weight: Interval | None,
    bias: Interval | None,
) -> Interval:
    """The exact range of (x - mean) * rstd * w + b over the boxes, in float64, plus an
    allowance of 6 u (|x| + |mean|) |rstd w| + 2 u |b| that covers both evaluation orders ATen
    uses: ((x - mean) * rstd) * w + b, and x * (rstd w) + (b - mean rstd w); and
    tiny (1 + |x| + |mean| + |w|), tiny = 8 subnormals of the compute format, for underflow: an
    underflowing product errs by half a subnormal, which either order may then multiply by
    |w|, |x| or |mean|."""
    c = ctx.compute
    centred = ew.sub(a, mean, _F64)
    scaled = ew.mul(centred, rstd, _F64)
    if weight is not None:
        scaled = ew.mul(scaled, weight, _F64)
    if bias is not None:
        scaled = ew.add(scaled, bias, _F64)
    w_mag = weight.magnitude() if weight is not None else 1.0
    x_mag, mean_mag = a.magnitude(), mean.magnitude()
    allowance = 6 * c.unit_roundoff * (x_mag + mean_mag) * rstd.magnitude() * w_mag
    if bias is not None:
        allowance = allowance + 2 * c.unit_roundoff * bias.magnitude()
    absolute = 8 * c.smallest_subnormal * (1 + x_mag + mean_mag + w_mag)
    allowance = up((allowance + absolute) * (1 + 2**-40))
    return scaled.widen(allowance).to_format(ctx.fmt)


def _optional(ctx: RuleContext, x: Any) -> Interval | None:
    return None if x is None else ctx.operand(x, ctx.compute)


@_rule("aten.native_layer_norm")
def _layer_norm(ctx: RuleContext) -> tuple[Interval, Interval, Interval]:
    x, shape, weight, bias, eps = (
        ctx.arg(i, n) for i, n in enumerate(("input", "normalized_shape", "weight", "bias", "eps"))
    )
    axes = tuple(range(x.dim() - len(shape), x.dim()))
    a = ctx.operand(x, ctx.compute)
    mean, variance = _moments(ctx, a, axes, 0.0)
    rstd = _rstd(ctx, variance, float(eps))
    w, b = _optional(ctx, weight), _optional(ctx, bias)
    # _affine_normalise, one compiled pass over rows of the normalised elements
    c = ctx.compute
    lo, hi = normalise_rows(
        (a.lo, a.hi),
        int(np.prod(shape)) if len(shape) else 1,
        (mean.lo, mean.hi),
        (rstd.lo, rstd.hi),
        (w.lo, w.hi) if w is not None else None,
        (b.lo, b.hi) if b is not None else None,
        c.unit_roundoff,
        8 * c.smallest_subnormal,
        ctx.fmt,
    )
    return Interval(lo, hi), mean, rstd


def _rstd(ctx: RuleContext, variance: Interval, eps: float) -> Interval:
    """1 / sqrt(var + eps) in the compute format (rsqrt, or 1 / sqrt: both within rsqrt's
    allowance)."""
    c = ctx.compute
    shifted = ew.add(variance, _c(ctx, eps), c)
    return ew.library_function(
        lambda v: 1.0 / np.sqrt(v), shifted, c, c, ew.ULP_ERRORS["rsqrt"], increasing=False
    )


@_rule("aten.native_group_norm")
def _group_norm(ctx: RuleContext) -> tuple[Interval, Interval, Interval]:
    x, weight, bias, n, channels, _, groups, eps = (
        ctx.arg(i, name)
        for i, name in enumerate(("input", "weight", "bias", "N", "C", "HxW", "group", "eps"))
    )
    a = ctx.operand(x, ctx.compute)
    grouped = a.map(lambda v: v.reshape(n, groups, -1))
    mean, variance = _moments(ctx, grouped, (2,), 0.0)
    rstd = _rstd(ctx, variance, float(eps))
    per_channel = channels // groups

    def expand(v: Array) -> Array:
        return np.repeat(v, per_channel, axis=1).reshape(n, channels, 1)

    flat = a.map(lambda v: v.reshape(n, channels, -1))
    w = _optional(ctx, weight)
    b = _optional(ctx, bias)
    out = _affine_normalise(
        ctx,
        flat,
        mean.map(expand),
        rstd.map(expand),
        w.map(lambda v: v.reshape(1, channels, 1)) if w is not None else None,
        b.map(lambda v: v.reshape(1, channels, 1)) if b is not None else None,
    )
    shape = tuple(x.shape)
    return (
        out.map(lambda v: v.reshape(shape)),
        mean.map(lambda v: v.reshape(n, groups)).to_format(ctx.fmt),
        rstd.map(lambda v: v.reshape(n, groups)).to_format(ctx.fmt),
    )


@_rule("aten.native_batch_norm", "aten._native_batch_norm_legit_no_training")
def _batch_norm(ctx: RuleContext) -> Any:
    """Evaluation mode: (x - running_mean) / sqrt(running_var + eps) * w + b, per channel."""
    x, weight, bias, running_mean, running_var = (
        ctx.arg(i, n)
        for i, n in enumerate(("input", "weight", "bias", "running_mean", "running_var"))
    )
    no_training = ctx.call.functional == "aten._native_batch_norm_legit_no_training"
    training = False if no_training else bool(ctx.arg(5, "training"))
    eps = float(ctx.arg(6 if no_training else 7, "eps"))
    if training:
        raise_unsupported(ctx, "batch_norm in training mode")
    shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)

    def per_channel(t: Any) -> Interval | None:
        enclosure = _optional(ctx, t)
        return None if enclosure is None else enclosure.map(lambda v: v.reshape(shape))

    mean, variance = per_channel(running_mean), per_channel(running_var)
    assert mean is not None
    assert variance is not None
    rstd = _rstd(ctx, variance, eps)
    out = _affine_normalise(
        ctx, ctx.operand(x, ctx.compute), mean, rstd, per_channel(weight), per_channel(bias)
    )
    return (out, *(None for _ in ctx.outputs[1:]))


# --------------------------------------------------------------------------------------------
# Matrix products and convolutions.


def _modelled(ctx: RuleContext, k: int, has_c: bool) -> tuple[float, float] | None:
    """(relative factor, absolute term) of a matmul under ``track(matmul_model=...)``'s model
    for its input format, or None without one."""
    bound = ctx.sums.matmul_bound(ctx.fmt, k, has_c=has_c)
    if bound is None:
        return None
    ctx.note(f"matmul bounded by the fused-summation model given for {ctx.fmt.name} inputs")
    return float(bound.relative), float(bound.absolute + bound.inputs * (1 + 2 * k))


def _matmul_setup(ctx: RuleContext, k: int, extra_terms: int = 0) -> tuple[float, Format]:
    precision = matmul_precision(ctx.fmt, ctx.device)
    acc = precision.accumulate
    u = acc.eps if precision.faithful else acc.unit_roundoff
    source_bits = ctx.fmt.precision if precision.inputs is None else precision.inputs.precision
    exact_products = 2 * source_bits <= acc.precision
    factor = ctx.sums.dot_factor(k + extra_terms, u, products_exact=exact_products)
    if ctx.device.type == "cuda" and source_bits <= 11:
        # tensor cores (float16, bfloat16, TF32 inputs): fused multi-term adders that align to
        # the block's largest exponent and truncate (FTTN), of unknown width
        fused = dot_factor(
            k + extra_terms,
            inputs="fused",
            accumulator_bits=acc.precision,
            products_exact=exact_products,
        )
        factor = max(factor, fused)
    if precision.inputs is not None:
        e = precision.inputs.eps
        factor = up(np.asarray((1 + factor) * (1 + 2 * e + e * e) - 1)).item()
        ctx.note(f"inputs rounded to {precision.inputs.name} before the products")
    return float(factor), acc


_NARROW_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _magnitude32(x: Any, enclosure: Interval) -> Array | None:
    """max(|x|, 2**-126) as a float32 array, from a point tensor of a format float32 holds
    exactly (one vectorised pass instead of a float64 one): the operand of a radius product
    (:func:`pytest_fpcheck.interval.linalg.matmul`'s ``magnitudes``); None otherwise."""
    if not (
        enclosure.is_point
        and isinstance(x, torch.Tensor)
        and x.dtype in _NARROW_DTYPES
        and x.device.type == "cpu"
    ):
        return None
    with internal(), torch.no_grad():
        if x.dtype == torch.float32:
            return float32_magnitudes(x.detach().numpy())
        magnitude = x.detach().abs().to(torch.float32).clamp_min_(2.0**-126)
    result: Array = magnitude.numpy()
    return result


def _product(
    ctx: RuleContext,
    a: Interval,
    b: Interval,
    k: int,
    addend: Interval | None = None,
    product: Callable[[Array, Array], Array] = np.matmul,
    magnitudes: tuple[Array | None, Array | None] = (None, None),
) -> Interval:
    factor, acc = _matmul_setup(ctx, k, 1 if addend is not None else 0)
    if addend is None:
        return matmul(
            a,
            b,
            ctx.fmt,
            factor=factor,
            accumulate=acc,
            product=product,
            k=k,
            magnitudes=magnitudes,
        )
    # addend + A B: one more term in the same accumulation; evaluate A B unrounded, then add
    # the addend with the same factor applied to its magnitude.
    inner = matmul(a, b, _F64, factor=factor, accumulate=acc, product=product, k=k + 1)
    spread = up(addend.magnitude() * factor * (1 + 2**-40))
    return ew.add(inner, addend, _F64).widen(spread).to_format(ctx.fmt)


def _scale(ctx: RuleContext, a: Interval, factor: Any) -> Interval:
    if factor is None or float(factor) == 1.0:
        return a
    return ew.mul(a, Interval.point(np.asarray(float(factor))), _F64)


@_rule("aten.mm", "aten.bmm", "aten.matmul", "aten.mv", "aten.dot", "aten.vdot")
def _mm(ctx: RuleContext) -> Interval:
    a, b = ctx.args[0], ctx.args[1]
    k = a.shape[-1]
    left, right = ctx.operand(a), ctx.operand(b)
    model = _modelled(ctx, k, has_c=False)
    if model is not None:
        return _model_product(ctx, left, right, k, model)
    magnitudes = (_magnitude32(a, left), _magnitude32(b, right))
    return _product(ctx, left, right, k, magnitudes=magnitudes)


def _model_product(
    ctx: RuleContext, a: Interval, b: Interval, k: int, model: tuple[float, float]
) -> Interval:
    """The midpoint-radius product with the model's relative factor, widened by its absolute
    term (subnormal spacing of each node, flushed inputs); the inputs' own radii propagate as
    in the generic bound."""
    factor, absolute = model
    accumulate = matmul_precision(ctx.fmt, ctx.device).accumulate
    product = matmul(a, b, _F64, factor=factor, accumulate=accumulate, k=k)
    return product.widen(up(np.asarray(absolute)).item()).to_format(ctx.fmt)


@_rule("aten.addmm", "aten.baddbmm", "aten.addmv", "aten.addbmm")
def _addmm(ctx: RuleContext) -> Interval:
    """beta * input + alpha * (m1 @ m2): the scalings are exact-range products, and the k
    products plus the addend are one accumulation (two more terms cover either place where
    BLAS may apply alpha and beta)."""
    addend, m1, m2 = ctx.args[0], ctx.args[1], ctx.args[2]
    beta, alpha = ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)
    k = m1.shape[-1]
    left = _scale(ctx, ctx.operand(m1), alpha)
    shifted = _scale(ctx, ctx.operand(addend), beta)
    extra = 0 if (float(alpha) == 1 and float(beta) == 1) else 2
    factor, acc = _matmul_setup(ctx, k, 1 + extra)
    if ctx.call.functional != "aten.addbmm":
        right = ctx.operand(m2)
        magnitudes = (
            _magnitude32(m1, left) if float(alpha) == 1 else None,
            _magnitude32(m2, right),
        )
        return matmul(
            left,
            right,
            ctx.fmt,
            factor=factor,
            accumulate=acc,
            k=k + 1 + extra,
            addend=shifted,
            magnitudes=magnitudes,
        )
    return _addbmm(ctx, left, ctx.operand(m2), shifted, extra)


def _addbmm(
    ctx: RuleContext, left: Interval, right: Interval, shifted: Interval, extra: int
) -> Interval:
    """beta C + alpha sum_b A_b B_b. ATen accumulates batch by batch into the result, which it
    rounds to the result format after each batch (on CPU, one addmm per batch), so a term's
    error compounds over the batches: the bound is one product over the batches' concatenated
    inner dimension, each term passing the k-term accumulation (the accumulator's factor) and
    then up to b + 2 (+ the alpha/beta scalings) roundings in the result format."""
    batches, rows, k = left.shape
    columns = right.shape[-1]
    wide = left.map(lambda v: np.moveaxis(v, 0, 1).reshape(rows, batches * k))
    tall = right.map(lambda v: v.reshape(batches * k, columns))
    inner, acc = _matmul_setup(ctx, k, 1)
    outer = gamma(batches + 2 + extra, ctx.fmt.unit_roundoff)
    factor = float(up(np.asarray((1 + inner) * (1 + outer) - 1)) * (1 + 2**-50))
    # the running result lives in the result format: its overflow threshold may be the lower
    accumulate = ctx.fmt if ctx.fmt.max_finite < acc.max_finite else acc
    return matmul(
        wide,
        tall,
        ctx.fmt,
        factor=factor,
        accumulate=accumulate,
        k=batches * k + batches + 1 + extra,
        addend=shifted,
    )


@_rule("aten.convolution")
def _convolution(ctx: RuleContext) -> Interval:
    """A convolution is bilinear with non-negative coefficients: the matmul bound applies with
    the convolution itself as the product (float64, Python dispatch disabled) and k the number
    of terms each output sums."""
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = ctx.args[:9]
    k = (
        int(np.prod(w.shape[1:]))
        if not transposed
        else int(w.shape[0] // groups * np.prod(w.shape[2:]))
    )

    def product(inp: Array, weight: Array) -> Array:
        with internal(), torch.no_grad():
            out = torch.ops.aten.convolution.default(
                _torch(inp),
                _torch(weight),
                None,
                stride,
                padding,
                dilation,
                transposed,
                output_padding,
                groups,
            )
        result: Array = out.numpy()
        return result

    addend = None
    if bias is not None:
        addend = ctx.operand(bias).map(lambda v: v.reshape((1, -1) + (1,) * (x.dim() - 2)))
    return _product(ctx, ctx.operand(x), ctx.operand(w), k, addend, product)


# --------------------------------------------------------------------------------------------
# Losses.


@_rule("aten.nll_loss_forward")
def _nll_loss(ctx: RuleContext) -> tuple[Interval, Interval]:
    """-sum(w[t_i] * x[i, t_i]) / (sum w[t_i] for mean), ignored targets excluded."""
    x, target, weight, reduction, ignore_index = ctx.args[:5]
    a = ctx.operand(x, ctx.compute)
    t = target.detach().cpu().numpy()
    if a.lo.ndim == 1:
        a = a.map(lambda v: v.reshape(1, -1))
        t = t.reshape(1)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    rows = np.arange(a.lo.shape[0])
    picked = a.map(lambda v: v[rows, safe] if v.ndim == 2 else v[rows, safe, ...])
    w = (
        ctx.operand(weight, ctx.compute).map(lambda v: v[safe])
        if weight is not None
        else Interval.point(np.ones(safe.shape))
    )
    w = Interval(np.where(keep, w.lo, 0.0), np.where(keep, w.hi, 0.0))
    terms = ew.negate(ew.mul(picked, w, ctx.compute, operand_bits=64))
    c = ctx.compute
    if reduction == 0:
        return terms.to_format(ctx.fmt), Interval.point(np.asarray(0.0))
    axes = tuple(range(terms.lo.ndim))
    total = reduce_sum(terms, axes, False, c, _sum_factor(ctx, c), accumulate=c)
    weight_total = reduce_sum(w, axes, False, c, _sum_factor(ctx, c), accumulate=c)
    if reduction == 1:
        return ew.div(total, weight_total, ctx.fmt), weight_total.to_format(ctx.fmt)
    return total.to_format(ctx.fmt), weight_total.to_format(ctx.fmt)
