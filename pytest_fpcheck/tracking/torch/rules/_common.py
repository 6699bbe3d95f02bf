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
from ....interval.core import Interval
from ....interval.registry import register_rule
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
    "raise_unsupported",
    "rule",
    "sigmoid64",
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


def raise_unsupported(ctx: RuleContext, what: str) -> NoReturn:
    """Refuse a variant of an operation that has a rule (``what`` says which)."""
    raise UnsupportedOperation(ctx.call.name, where=ctx.call.site, how=f"{what} has no rule yet")
