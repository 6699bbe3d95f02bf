"""Interval rules for the operations of Triton's interpreter builder (RENDER sections III-B, IV-A-2).

Each rule receives a :class:`KernelOp` (the builder method's name, its argument handles and the
handle the interpreter computed) and attaches the result's enclosure to that handle. Rules reuse
the element-wise interval arithmetic of :mod:`pytest_fpcheck.interval.elementwise`, so a Triton
``a + b`` is bounded exactly as a PyTorch one; the approximate forms (``x / y``, ``exp``,
``log``, ``sin``, ...) add the allowances of :mod:`.errors_model`.

Groups of operations:

* exact data movement (reshape, broadcast, transpose, cat, join, split, splat, gather): the same
  rearrangement of ``lo`` and ``hi``;
* integer and pointer arithmetic: no intervals; an integer computed from a rounding-dependent
  one is rounding-dependent too (see :mod:`.handles`);
* comparisons give exact booleans where the intervals decide them; ``where`` takes the hull of
  both branches on the other lanes (RENDER's conditional rule);
* casts round outward onto the target format (any rounding mode lies inside); conversions to
  integers are exact when the interval decides them;
* ``tl.dot``: the midpoint-radius matmul of :mod:`pytest_fpcheck.interval.linalg` with the
  accumulation model of :func:`dot_factor`.

A builder method without a rule that produces a floating value raises ``UnsupportedOperation``
naming it and the kernel's source line: nothing silently becomes exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import UnsupportedOperation
from ...formats import FORMATS, Format
from ...interval import elementwise as ew
from ...interval.core import Interval
from ...interval.linalg import matmul
from ...interval.rounding import down, up
from ..core.policy import dot_factor
from . import handles as h
from .errors_model import APPROX_DIV_RANGE, SIN_COS_RANGE, TRITON_ERRORS

__all__ = ["EXACT_INTEGER_OPS", "RULES", "KernelOp"]

_F64 = FORMATS["float64"]
_F32 = FORMATS["float32"]

#: Significand bits of the accumulator of float8 matrix instructions with imprecise
#: accumulation (Hopper's default for float8 dots in Triton; DeepSeek-V3 technical report,
#: section 3.3.2: "limited to retaining around 14 bits").
FP8_IMPRECISE_ACCUMULATOR_BITS = 14


@dataclass
class KernelOp:
    """One builder call: ``name`` without the ``create_`` prefix."""

    name: str
    args: tuple[Any, ...]
    result: Any
    where: Callable[[], str]

    def fail(self, what: str, how: str | None = None) -> UnsupportedOperation:
        return UnsupportedOperation(what, where=self.where(), how=how)

    def fmt(self, handle: Any) -> Format:
        return h.format_of_type(handle.dtype, where=self.where())

    def interval(self, handle: Any) -> Interval:
        return h.interval_of(handle, self.fmt(handle))


Rule = Callable[[KernelOp], None]
RULES: dict[str, Rule] = {}


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(function: Rule) -> Rule:
        for name in names:
            RULES[name] = function
        return function

    return register


def _floating(*handles: Any) -> bool:
    return any(h.is_floating(x) for x in handles)


# --- rounding onto a format ------------------------------------------------------------------


def round_into(interval: Interval, fmt: Format) -> Interval:
    """Outward rounding onto ``fmt``; beyond the range of a format without infinities the
    conversion may saturate or give NaN: the whole line there."""
    rounded = interval.to_format(fmt)
    if fmt.has_inf or (interval.is_point and np.all(np.abs(interval.lo) <= fmt.max_finite)):
        return rounded
    with np.errstate(invalid="ignore"):
        beyond = ~((interval.lo >= -fmt.max_finite) & (interval.hi <= fmt.max_finite))
    if not beyond.any():
        return rounded
    return Interval(np.where(beyond, -np.inf, rounded.lo), np.where(beyond, np.inf, rounded.hi))


#: Element-wise operations through which a NaN operand gives a NaN result.
NAN_PROPAGATING = frozenset(
    {
        *("fadd", "fsub", "fmul", "fdiv", "approx_divf", "precise_divf", "fneg", "frem"),
        *("minimumf", "minnumf", "maximumf", "maxnumf", "clampf", "fma", "fabs", "floor"),
        *("ceil", "exp", "exp2", "log", "log2", "erf", "sqrt", "precise_sqrt", "rsqrt", "sin"),
        *("cos", "fp_ext", "fp_trunc", "fp_to_fp", "and"),
    }
)


def _set(op: KernelOp, interval: Interval) -> None:
    """Attach ``interval`` rounded onto the result's format; for element-wise operations, the
    whole line wherever an operand may be NaN (its enclosure is the whole line)."""
    result = round_into(interval, op.fmt(op.result))
    if op.name in NAN_PROPAGATING:
        shape = np.shape(op.result.data)
        maybe_nan = np.zeros(shape, bool)
        for arg in op.args:
            lo = getattr(arg, "attr", {}).get("fpcheck.lo")
            if lo is not None:
                whole = np.isneginf(lo) & np.isposinf(arg.attr["fpcheck.hi"])
                maybe_nan = maybe_nan | np.broadcast_to(whole, shape)
        if maybe_nan.any():
            result = Interval(
                np.where(maybe_nan, -np.inf, np.broadcast_to(result.lo, shape)),
                np.where(maybe_nan, np.inf, np.broadcast_to(result.hi, shape)),
            )
    h.set_interval(op.result, result)


# --- element-wise arithmetic -----------------------------------------------------------------


def _operand_bits(op: KernelOp, *handles: Any) -> int:
    return max(op.fmt(x).precision for x in handles)


@_rule("fadd")
def _add(op: KernelOp) -> None:
    a, b = op.args
    _set(op, ew.add(op.interval(a), op.interval(b), op.fmt(op.result)))


@_rule("fsub")
def _sub(op: KernelOp) -> None:
    a, b = op.args
    _set(op, ew.sub(op.interval(a), op.interval(b), op.fmt(op.result)))


@_rule("fmul")
def _mul(op: KernelOp) -> None:
    a, b = op.args
    bits = _operand_bits(op, a, b)
    _set(op, ew.mul(op.interval(a), op.interval(b), op.fmt(op.result), operand_bits=bits))


@_rule("precise_divf")
def _div_rn(op: KernelOp) -> None:
    a, b = op.args
    _set(op, ew.div(op.interval(a), op.interval(b), op.fmt(op.result)))


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


@_rule("fdiv", "approx_divf")
def _div_approx(op: KernelOp) -> None:
    a, b = op.args
    fmt = op.fmt(op.result)
    divisor = op.interval(b)
    quotient = ew.div(op.interval(a), divisor, _F64)
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
    _set(op, result)


@_rule("fneg")
def _neg(op: KernelOp) -> None:
    _set(op, ew.negate(op.interval(op.args[0])))


@_rule("frem")
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
    _set(op, ew._everything_where_nan(lo, hi, undefined))


@_rule("minimumf", "minnumf")
def _minimum(op: KernelOp) -> None:
    a, b = op.args
    _set(op, ew.minimum(op.interval(a), op.interval(b)))


@_rule("maximumf", "maxnumf")
def _maximum(op: KernelOp) -> None:
    a, b = op.args
    _set(op, ew.maximum(op.interval(a), op.interval(b)))


@_rule("clampf")
def _clamp(op: KernelOp) -> None:
    x, low, high = op.args[:3]
    _set(op, ew.clamp(op.interval(x), op.interval(low), op.interval(high)))


@_rule("fma")
def _fma(op: KernelOp) -> None:
    """One rounding of the exact x * y + z."""
    x, y, z = op.args
    bits = _operand_bits(op, x, y)
    product = ew.mul(op.interval(x), op.interval(y), _F64, operand_bits=bits)
    _set(op, ew.add(product, op.interval(z), op.fmt(op.result)))


@_rule("fabs")
def _abs(op: KernelOp) -> None:
    _set(op, ew.absolute(op.interval(op.args[0])))


@_rule("floor", "ceil")
def _floor_ceil(op: KernelOp) -> None:
    x = op.interval(op.args[0])
    function = np.floor if op.name == "floor" else np.ceil
    _set(op, x.map(function) if x.is_point else Interval(function(x.lo), function(x.hi)))


def _evaluating(fmt: Format) -> Format:
    """The format an approximate operation on ``fmt`` values is evaluated in (float32 for the
    narrower ones, whose math functions take float32 arguments)."""
    return _F32 if fmt.precision < _F32.precision else fmt


def _approximate(op: KernelOp, function: Callable[[Any], Any], name: str) -> None:
    """A monotone approximate function with its :data:`TRITON_ERRORS` allowance."""
    compute = _evaluating(op.fmt(op.result))
    ulps, absolute = TRITON_ERRORS[name]
    result = ew.library_function(function, op.interval(op.args[0]), _F64, compute, ulps)
    _set(op, _widen_relative(result, compute, 0.0, absolute))


@_rule("exp")
def _exp(op: KernelOp) -> None:
    """ex2.approx(x * log2 e): besides ex2's own error, the rounded argument moves the result
    by a relative expm1(|x| 2u (1 + 2u)), element by element (nothing for x = -inf)."""
    x = op.interval(op.args[0])
    fmt = op.fmt(op.result)
    compute = _evaluating(fmt)
    ulps, absolute = TRITON_ERRORS["exp"]
    base = ew.library_function(np.exp, x, _F64, compute, ulps)
    u = compute.unit_roundoff
    with np.errstate(invalid="ignore", over="ignore"):
        argument = up(np.maximum(np.abs(x.lo), np.abs(x.hi)) * (2 * u * (1 + 2 * u)))
        relative = np.where(argument < 700, up(np.expm1(np.minimum(argument, 700.0))), np.inf)
        relative = np.where(np.isneginf(x.hi), 0.0, relative)  # exp(-inf) = 0 exactly
        magnitude = np.maximum(np.abs(base.lo), np.abs(base.hi))
        extra = np.where(magnitude == 0, 0.0, up(relative * magnitude))
        extra = np.where(np.isnan(extra), np.inf, extra)
        widened = Interval(down(base.lo - extra), up(base.hi + extra))
    _set(op, _widen_relative(widened, compute, 0.0, absolute))


@_rule("exp2")
def _exp2(op: KernelOp) -> None:
    _approximate(op, np.exp2, "exp2")


@_rule("log")
def _log(op: KernelOp) -> None:
    _approximate(op, np.log, "log")


@_rule("log2")
def _log2(op: KernelOp) -> None:
    _approximate(op, np.log2, "log2")


@_rule("erf")
def _erf(op: KernelOp) -> None:
    from scipy.special import erf

    _approximate(op, erf, "erf")


@_rule("sqrt")
def _sqrt_approx(op: KernelOp) -> None:
    root = ew.sqrt(op.interval(op.args[0]), _F64)
    fmt = op.fmt(op.result)
    ulps, absolute = TRITON_ERRORS["sqrt"]
    _set(op, _widen_relative(root, _evaluating(fmt), ulps, absolute))


@_rule("precise_sqrt")
def _sqrt_rn(op: KernelOp) -> None:
    _set(op, ew.sqrt(op.interval(op.args[0]), op.fmt(op.result)))


@_rule("rsqrt")
def _rsqrt(op: KernelOp) -> None:
    x = op.interval(op.args[0])
    root = ew.sqrt(x, _F64)
    one = Interval.point(np.ones(()))
    reciprocal = ew.div(one, root, _F64)
    fmt = op.fmt(op.result)
    ulps, absolute = TRITON_ERRORS["rsqrt"]
    _set(op, _widen_relative(reciprocal, _evaluating(fmt), ulps, absolute))


@_rule("sin", "cos")
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
    _set(op, ew._everything_where_nan(result.lo, result.hi, nan))


# --- comparisons and selection ---------------------------------------------------------------

_COMPARISONS = {
    "LT": (np.less, "lt"),
    "GT": (np.greater, "gt"),
    "LE": (np.less_equal, "le"),
    "GE": (np.greater_equal, "ge"),
    "EQ": (np.equal, "eq"),
    "NE": (np.not_equal, "ne"),
}


def _decided(kind: str, a: Interval, b: Interval) -> np.ndarray:
    """Lanes where the comparison has one outcome for every pair of values in the intervals."""
    with np.errstate(invalid="ignore"):
        if kind in ("lt", "ge"):
            decided = (a.hi < b.lo) | (a.lo >= b.hi)
        elif kind in ("gt", "le"):
            decided = (a.lo > b.hi) | (a.hi <= b.lo)
        else:  # eq, ne
            both_points = (a.lo == a.hi) & (b.lo == b.hi)
            decided = (a.hi < b.lo) | (a.lo > b.hi) | both_points
        may_be_nan = (np.isneginf(a.lo) & np.isposinf(a.hi)) | (
            np.isneginf(b.lo) & np.isposinf(b.hi)
        )
    result: np.ndarray = decided & ~may_be_nan
    return result


def _compare(op: KernelOp) -> None:
    """The lanes the intervals leave undecided, and the outcome on the others, taken from the
    intervals (a representative pair), not from the interpreter's data: the interpreter compares
    bfloat16 bit patterns, and its bfloat16 values themselves may be wrong."""
    a, b = op.args
    x, y = op.interval(a), op.interval(b)
    function, kind = _COMPARISONS[op.name[-2:]]
    with np.errstate(invalid="ignore"):
        outcome = function(x.lo, y.lo)
        if op.name.startswith("fcmpU"):
            outcome = outcome | np.isnan(x.lo) | np.isnan(y.lo)
    h.set_outcome(op.result, np.asarray(outcome, bool))
    if x.is_point and y.is_point:
        return
    h.set_undecided(op.result, ~_decided(kind, x, y))


for _order in ("O", "U"):
    for _suffix in _COMPARISONS:
        RULES[f"fcmp{_order}{_suffix}"] = _compare


@_rule("select")
def _select(op: KernelOp) -> None:
    condition, a, b = op.args
    if h.tainted(condition):
        raise op.fail("tl.where on a condition that depends on rounding")
    open_lanes = h.undecided(condition)
    if not h.is_floating(op.result):
        if open_lanes is not None:
            choices_differ = np.broadcast_to(a.data != b.data, open_lanes.shape) & open_lanes
            h.set_taint(op.result, bool(choices_differ.any()) or h.tainted(a) or h.tainted(b))
        else:
            h.set_taint(op.result, h.tainted(a) or h.tainted(b))
        return
    decided = np.ones(np.shape(condition.data), bool) if open_lanes is None else ~open_lanes
    taken = ew.where(h.outcome(condition), decided, op.interval(a), op.interval(b))
    _set(op, taken)


# --- casts ------------------------------------------------------------------------------------


@_rule("fp_ext", "fp_trunc", "fp_to_fp")
def _float_cast(op: KernelOp) -> None:
    _set(op, op.interval(op.args[0]))


@_rule("si_to_fp", "ui_to_fp")
def _int_to_float(op: KernelOp) -> None:
    source = op.args[0]
    if h.tainted(source):
        raise op.fail(
            "converting to floating point an integer that depends on rounding",
            how="its other possible values are not bounded; compute it from exact data",
        )
    values = np.asarray(source.data)
    as_float = values.astype(np.float64)
    if np.abs(as_float).max(initial=0.0) <= 2.0**53:
        _set(op, Interval.point(as_float))
    else:
        _set(op, Interval(down(as_float), up(as_float)))


@_rule("fp_to_si", "fp_to_ui")
def _float_to_int(op: KernelOp) -> None:
    x = op.interval(op.args[0])
    if x.is_point:
        return
    with np.errstate(invalid="ignore"):
        same = np.trunc(x.lo) == np.trunc(x.hi)
    h.set_taint(op.result, not bool(same.all()))


@_rule("bitcast", "int_to_ptr", "ptr_to_int")
def _bitcast(op: KernelOp) -> None:
    source = op.args[0]
    if h.is_floating(source) and not op.interval(source).is_point:
        raise op.fail(
            "a bit cast of a rounded floating value",
            how="its bits have no interval rule; bit-manipulating kernels run outside fp.track()",
        )
    if h.is_floating(op.result) and h.tainted(source):
        raise op.fail("a bit cast to floating point of an integer that depends on rounding")
    if not h.is_floating(op.result):
        h.set_taint(op.result, h.tainted(source))


# --- data movement ---------------------------------------------------------------------------


def _move(op: KernelOp, transform: Callable[..., Any], values: list[Any] | None = None) -> None:
    """Apply the exact rearrangement ``transform`` (on the arrays of the value arguments, in
    order, or of ``values``) to ``lo``, ``hi`` and the undecided lanes."""
    if values is None:
        values = [a for a in op.args if hasattr(a, "data") and hasattr(a, "attr")]
    results = op.result if isinstance(op.result, tuple) else (op.result,)
    taint = any(h.tainted(v) for v in values)
    for r in results:
        h.set_taint(r, taint)
    if any(h.is_floating(v) for v in values):
        intervals = [op.interval(v) for v in values]
        if all(i.is_point for i in intervals):
            return
        lo = transform(*[i.lo for i in intervals])
        hi = transform(*[i.hi for i in intervals])
        if isinstance(lo, tuple):
            for r, l_, h_ in zip(results, lo, hi, strict=True):
                h.set_interval(r, Interval(l_, h_))
        else:
            h.set_interval(results[0], Interval(lo, hi))
        return
    masks = [h.undecided(v) for v in values]
    if any(m is not None for m in masks):
        full = [
            np.zeros(np.shape(v.data), bool) if m is None else m
            for v, m in zip(values, masks, strict=True)
        ]
        moved = transform(*full)
        for r, m in zip(results, moved if isinstance(moved, tuple) else (moved,), strict=True):
            h.set_undecided(r, m)


def _data_rule(name: str, transform: Callable[[KernelOp], Callable[..., Any]]) -> None:
    RULES[name] = lambda op: _move(op, transform(op))


_data_rule("reshape", lambda op: lambda x: np.reshape(x, op.args[1]))
_data_rule("trans", lambda op: lambda x: np.transpose(x, op.args[1]))
_data_rule("expand_dims", lambda op: lambda x: np.expand_dims(x, op.args[1]))
_data_rule("broadcast", lambda op: lambda x: np.broadcast_to(x, op.args[1]))
_data_rule("cat", lambda op: lambda a, b: np.concatenate([a, b]))
_data_rule("join", lambda op: lambda a, b: np.stack([a, b], axis=-1))
_data_rule("split", lambda op: lambda x: (x[..., 0], x[..., 1]))
_data_rule(
    "splat",
    lambda op: lambda x: np.full(op.args[0].shape, np.reshape(x, -1)[0], dtype=np.asarray(x).dtype),
)
_data_rule("unsplat", lambda op: lambda x: np.reshape(x, -1)[:1])


@_rule("gather")
def _gather(op: KernelOp) -> None:
    source, indices, axis = op.args
    if h.tainted(indices):
        raise op.fail("tl.gather with indices that depend on rounding")
    index = np.asarray(indices.data)
    _move(op, lambda x: np.take_along_axis(x, index, axis=axis), [source])


#: Builder methods on integers, pointers and masks: no intervals; a result is rounding-dependent
#: (tainted) when an argument is, and a mask combines its operands' undecided lanes.
EXACT_INTEGER_OPS = (
    "mul", "sdiv", "udiv", "srem", "urem", "add", "sub", "shl", "lshr", "ashr", "minsi",
    "minui", "maxsi", "maxui", "icmpSLE", "icmpSLT", "icmpSGE", "icmpSGT", "icmpULE",
    "icmpULT", "icmpUGE", "icmpUGT", "icmpEQ", "icmpNE", "and", "xor", "or", "idiv",
    "umulhi", "iabs", "int_cast", "addptr", "make_range", "get_program_id",
    "get_num_programs", "histogram",
)  # fmt: skip


def _integer(op: KernelOp) -> None:
    values = [a for a in op.args if hasattr(a, "data") and hasattr(a, "attr")]
    if h.is_floating(op.result):
        raise op.fail(
            f"builder operation {op.name!r} on floating values",
            how="bit operations on floating values have no interval rule; run this kernel "
            "outside fp.track()",
        )
    h.set_taint(op.result, any(h.tainted(v) for v in values))
    masks = [h.undecided(v) for v in values]
    if any(m is not None for m in masks):
        shape = np.shape(op.result.data)
        combined = np.zeros(shape, bool)
        for m in masks:
            if m is not None:
                combined = combined | np.broadcast_to(m, shape)
        h.set_undecided(op.result, combined)


def _fabs_float8(op: KernelOp) -> None:
    """``tl.abs`` of float8 is ``and`` with 0x7F on the bits."""
    a, b = op.args
    if h.is_floating(a):
        if not np.all(np.asarray(b.data) == 0x7F):
            raise op.fail("a bit operation on floating values other than float8 abs")
        _set(op, ew.absolute(op.interval(a)))
        return
    _integer(op)


for _name in EXACT_INTEGER_OPS:
    RULES[_name] = _integer
RULES["and"] = _fabs_float8


# --- dot products -----------------------------------------------------------------------------


@_rule("dot")
def _dot(op: KernelOp) -> None:
    a, b, d, input_precision, max_num_imprecise_acc = op.args
    fa, fb, fd = op.fmt(a), op.fmt(b), op.fmt(d)
    left, right, acc = op.interval(a), op.interval(b), op.interval(d)
    precision = str(getattr(input_precision, "name", input_precision)).lower()
    k = int(np.shape(a.data)[-1])
    accumulator_bits = fd.precision
    if fa.precision == 24 and fb.precision == 24 and "tf32" in precision:
        tf32 = FORMATS["tfloat32"]
        if "x3" in precision:
            # three TF32 products per term, the dropped ones below 2**-20 relative
            inputs, products_exact = "fused", False
            accumulator_bits = min(accumulator_bits, 20)
            k = 3 * k
        else:
            left, right = left.to_format(tf32), right.to_format(tf32)
            inputs, products_exact = "fused", False
    elif max(fa.precision, fb.precision) <= 11 or fa.name == "bfloat16" or fb.name == "bfloat16":
        inputs, products_exact = "fused", accumulator_bits >= 2 * max(fa.precision, fb.precision)
        if fa.name.startswith("float8") or fb.name.startswith("float8"):
            accumulator_bits = min(accumulator_bits, FP8_IMPRECISE_ACCUMULATOR_BITS)
            products_exact = False
    else:
        inputs, products_exact = "ieee", False
    del max_num_imprecise_acc  # float8 accumulation is bounded at its imprecise width anyway
    factor = dot_factor(
        k, inputs=inputs, accumulator_bits=accumulator_bits, products_exact=products_exact
    )
    k_terms = int(np.shape(a.data)[-1])
    result = matmul(left, right, _F64, factor=factor, accumulate=fd, k=k_terms, addend=acc)
    _set(op, result)
