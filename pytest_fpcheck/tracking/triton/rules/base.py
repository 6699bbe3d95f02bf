"""What the Triton rule families share: :class:`KernelOp` (one builder call as a rule sees it),
the :data:`RULES` table and its decorator (:func:`rule`, one per operation), outward rounding onto
a format that may lack infinities (:func:`round_into`), and :func:`set_result`, which attaches a
result's enclosure, the whole line where a NaN-propagating operation's operand may be NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import UnsupportedOperation
from ....formats import FORMATS, Format
from ....interval.core import Interval
from .. import handles as h

__all__ = [
    "F32",
    "F64",
    "FP8_IMPRECISE_ACCUMULATOR_BITS",
    "NAN_PROPAGATING",
    "RULES",
    "KernelOp",
    "Rule",
    "floating",
    "round_into",
    "rule",
    "set_result",
]

F64 = FORMATS["float64"]
F32 = FORMATS["float32"]

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


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(function: Rule) -> Rule:
        for name in names:
            RULES[name] = function
        return function

    return register


def floating(*handles: Any) -> bool:
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


def set_result(op: KernelOp, interval: Interval) -> None:
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
