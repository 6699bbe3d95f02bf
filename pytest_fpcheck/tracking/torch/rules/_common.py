"""What the rule families share: the registration decorator (:func:`rule`, one per operation),
conversions between enclosure arrays and tensors, the float64 evaluations of erf and the
logistic function the rules bound around, and small argument helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import torch

from ....adapters.torch import internal
from ....errors import UnsupportedOperation
from ....formats import FORMATS, Format
from ....interval import elementwise as ew
from ....interval.core import Interval, gamma
from ....interval.registry import register_rule
from ....interval.rounding import up
from ..context import RuleContext

__all__ = [
    "F64",
    "Array",
    "Rule",
    "as_tensor",
    "constant",
    "dims",
    "erf64",
    "flat",
    "lerp",
    "raise_unsupported",
    "rounded_twice",
    "rule",
    "same_values",
    "sigmoid64",
    "sign_of",
    "sum_factor",
]

F64 = FORMATS["float64"]
Array = np.ndarray
Rule = Callable[[RuleContext], Any]


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the rule of each operation in ``names``."""

    def register(function: Rule) -> Rule:
        for name in names:
            register_rule(name, function)
        return function

    return register


def as_tensor(array: Array) -> torch.Tensor:
    """A tensor over a NumPy array (or a contiguous copy of it; a copy of read-only memory, the
    shared ends of the whole line, which a tensor must not write), of the array's shape (0-d
    stays 0-d: ``np.ascontiguousarray`` alone returns at least one dimension)."""
    contiguous = np.ascontiguousarray(array)
    if not contiguous.flags.writeable:
        contiguous = contiguous.copy()
    return torch.from_numpy(contiguous.reshape(np.shape(array)))


def dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """A reduction's ``dim`` argument as sorted non-negative axes (all of them for None or [])."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return tuple(sorted(d % max(ndim, 1) for d in dim))


def flat(values: Sequence[Any]) -> list[Any]:
    """The items of nested lists and tuples, in order."""
    out: list[Any] = []
    for v in values:
        out.extend(flat(v) if isinstance(v, (list, tuple)) else [v])
    return out


def erf64(x: Array) -> Array:
    """erf in float64 (PyTorch's SLEEF kernel, at most 1 ULP; the rules allow 8)."""
    with internal():
        result: Array = torch.special.erf(as_tensor(x)).numpy()
    return result


def sigmoid64(x: Array) -> Array:
    """The logistic function in float64 (PyTorch's kernel; the rules allow 8 ULPs)."""
    with internal():
        result: Array = torch.sigmoid(as_tensor(x)).numpy()
    return result


def constant(ctx: RuleContext, value: float) -> Interval:
    """A constant as the compute format holds it."""
    return Interval.point(np.asarray(float(value))).to_format(ctx.compute)


def sum_factor(ctx: RuleContext, accumulate: Format) -> Callable[[int], float]:
    """n -> the relative factor of an n-term sum accumulated in ``accumulate`` (the tracker's
    :class:`~pytest_fpcheck.tracking.core.policy.SumBound`)."""
    u = accumulate.unit_roundoff
    return lambda n: ctx.sums.factor(n, u)


def lerp(a: Interval, b: Interval, w: Interval, fmt: Format) -> Interval:
    """``lerp(a, b, w)`` as ATen computes it, each step rounded outward onto ``fmt``:
    ``a + w (b - a)`` where ``|w| < 0.5``, else ``b - (b - a)(1 - w)`` (``at::native::lerp``
    and its vectorised form, the fused Adam step's too: the branch is chosen by the weight the
    kernel holds, which ``w`` encloses). Where ``w``'s enclosure decides the test, that
    formula's enclosure; where it does not, the hull of both. Deciding it matters: with
    independent operands the second formula of Adam's ``lerp(m, g, 0.1)`` gave
    ``g - 0.9 g``, ten times as wide as ``0.1 g`` for a gradient straddling zero."""
    diff = ew.sub(b, a, fmt)
    small = ew.add(a, ew.mul(w, diff, fmt, operand_bits=64), fmt)
    one = Interval.point(np.asarray(1.0))
    large = ew.sub(b, ew.mul(diff, ew.sub(one, w, fmt), fmt, operand_bits=64), fmt)
    is_small = (w.lo > -0.5) & (w.hi < 0.5)
    is_large = (w.lo >= 0.5) | (w.hi <= -0.5)
    if np.all(is_small):
        return small
    if np.all(is_large):
        return large
    hull = small.hull(large)
    return Interval(
        np.where(is_small, small.lo, np.where(is_large, large.lo, hull.lo)),
        np.where(is_small, small.hi, np.where(is_large, large.hi, hull.hi)),
    )


def sign_of(x: Interval) -> Array:
    """1 where every value of ``x`` is >= 0, -1 where every one is <= 0, else 0."""
    sign: Array = np.where(x.lo >= 0, 1, np.where(x.hi <= 0, -1, 0))
    return sign


def rounded_twice(exact: Interval, compute: Format, underflow: Any, sign: Array) -> Interval:
    """An enclosure of any result of two roundings onto ``compute`` of a value in ``exact``
    (relative gamma_2(u), plus ``underflow`` smallest subnormals absolutely, rounded outward:
    two when both roundings act on the result, more where an intermediate's underflow is
    scaled by a later factor), on the side of zero ``sign`` says the exact values are on (1:
    none negative, -1: none positive, 0: either): each rounding keeps the sign of what it
    rounds, or gives zero."""
    radius = gamma(2, compute.unit_roundoff) * exact.magnitude() + up(
        underflow * compute.smallest_subnormal
    )
    widened = ew.everything_where_nan(exact.widen(np.where(np.isinf(radius), 0.0, radius)))
    # Adam's second moment, v + (1 - beta2) g g, must not dip below zero: its square root
    # would be NaN and the parameter the whole line
    lo = np.where(sign > 0, np.maximum(widened.lo, 0.0), widened.lo)
    hi = np.where(sign < 0, np.minimum(widened.hi, 0.0), widened.hi)
    return Interval(lo, hi).to_format(compute)


def same_values(a: Any, b: Any) -> bool:
    """Whether two operands are the same elements of one tensor (the same object, or views of
    one storage at the same offset with the same sizes and strides): a product of the two is
    then a square, ``x * x`` for one ``x``, never negative however wide x's enclosure is
    (interval arithmetic, taking the factors as independent, would give ``lo * hi < 0`` for an
    enclosure straddling zero)."""
    if a is b:
        return isinstance(a, torch.Tensor)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    return (
        a.dtype == b.dtype
        and a.device == b.device
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and a.storage_offset() == b.storage_offset()
        and a.shape == b.shape
        and a.stride() == b.stride()
    )


def raise_unsupported(ctx: RuleContext, what: str) -> NoReturn:
    """Refuse a variant of an operation that has a rule (``what`` says which)."""
    raise UnsupportedOperation(ctx.call.name, where=ctx.call.site, how=f"{what} has no rule yet")
