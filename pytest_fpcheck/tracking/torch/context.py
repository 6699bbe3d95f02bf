"""What an interval rule sees of one PyTorch operation.

Operands are enclosed as follows (RENDER section III-A, step 1): a tensor that tracking wrote
has its recorded enclosure; any other tensor is an exact input, a point. A Python number is
exact too, but PyTorch converts it to the operation's compute type before using it, so
:meth:`RuleContext.operand` rounds it (and any operand finer than the result format) outward onto
the result format, which encloses every such conversion.

Under ``track(mode="a_posteriori")`` (``observed``) the tracker takes the hull of each rule's
enclosure and the value the run computed (:mod:`.mode`), so a rule need only enclose the exact
result and its float64 evaluations: the context then gives float64 as the result and compute
format and no nearest rounding, and the rules' roundings of the operation's own format drop out.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from ...adapters.torch import dtype_format
from ...errors import InvalidArgument
from ...formats import FORMATS, Format
from ...interval.core import Interval
from ..core.interpose import OpCall
from ..core.policy import SumBound, compute_format
from ..core.store import STORE, float64_values

__all__ = ["RuleContext"]

_F64 = FORMATS["float64"]


class RuleContext:
    """One operation, its operands' enclosures and the precision it computes in."""

    def __init__(
        self,
        call: OpCall,
        out: Any,
        sums: SumBound,
        snapshot: dict[int, Interval] | None = None,
        *,
        observed: bool = False,
    ) -> None:
        self.call = call
        #: the tracker joins the computed result to the rule's enclosure (module docstring):
        #: checks of a kernel's model against its computed value do not apply
        self.observed = observed
        self._snapshot = snapshot or {}
        self.out = out
        self.sums = sums
        self.notes: list[str] = []
        first = next((t for t in self.outputs if dtype_format(t.dtype) is not None), None)
        self.fmt: Format = (
            dtype_format(first.dtype) if first is not None and not observed else _F64  # type: ignore[assignment]
        )
        self.compute: Format = compute_format(self.fmt)
        self.device = first.device if first is not None else torch.device("cpu")

    @property
    def nearest(self) -> bool:
        """Whether the operation's result is rounded to nearest: PyTorch's CPU kernels round a
        float result to nearest even, a float16 or bfloat16 one after computing it in float32
        (c10's conversions and the vectorised ones); other devices' epilogues are not known.
        Rules whose last step is correctly rounded arithmetic then enclose the result with
        :meth:`pytest_fpcheck.interval.core.Interval.to_nearest`. Not needed when the computed
        value is joined to the enclosure (``observed``)."""
        return self.device.type == "cpu" and not self.observed

    @property
    def args(self) -> tuple[Any, ...]:
        return self.call.args

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.call.kwargs

    @property
    def outputs(self) -> list[torch.Tensor]:
        """The tensors the operation produced, in order (``out`` of a single result first)."""
        out = self.out
        if isinstance(out, torch.Tensor):
            return [out]
        if isinstance(out, (tuple, list)):
            return [t for t in out if isinstance(t, torch.Tensor)]
        return []

    def arg(self, index: int, name: str, default: Any = None) -> Any:
        """Argument ``index`` (positional) or ``name`` (keyword), else ``default``."""
        if index < len(self.args):
            return self.args[index]
        return self.kwargs.get(name, default)

    def values(self, x: Any) -> np.ndarray:
        """The float64 values of a tensor or number (an in-place operation's operand as it was
        before the operation)."""
        if isinstance(x, torch.Tensor):
            if id(x) in self._snapshot and self._snapshot[id(x)].is_point:
                return self._snapshot[id(x)].lo
            return float64_values(x)
        return np.asarray(float(x))

    def overwritten(self, x: Any) -> bool:
        """Whether ``x`` is an operand of an in-place operation (or one with ``out=``), whose
        memory may now hold the result: its operand values are read through :meth:`values`
        and :meth:`interval`, never from the tensor."""
        return isinstance(x, torch.Tensor) and id(x) in self._snapshot

    def interval(self, x: Any) -> Interval:
        """The enclosure of a tensor or a number as it is (no conversion)."""
        if isinstance(x, torch.Tensor):
            if id(x) in self._snapshot:
                return self._snapshot[id(x)]
            recorded = STORE.read(x)
            return recorded if recorded is not None else Interval.point(float64_values(x))
        if isinstance(x, (bool, numbers.Real)):
            return Interval.point(np.asarray(float(x)))
        raise InvalidArgument("operand", x, "a tensor or a real number")

    def operand(self, x: Any, fmt: Format | None = None) -> Interval:
        """The enclosure of ``x`` as the operation uses it: rounded outward onto ``fmt`` (the
        result format by default) when ``x`` is a number or a tensor of a finer format."""
        target = fmt or self.fmt
        enclosure = self.interval(x)
        if isinstance(x, torch.Tensor):
            source = dtype_format(x.dtype)
            if (
                source is not None
                and source.precision <= target.precision
                and (source.emax <= target.emax)
            ):
                return enclosure
        return enclosure.to_format(target)

    def condition(self, mask: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """(value, decided) of a boolean tensor: where ``decided`` is False, the comparison
        that produced it could have gone either way."""
        enclosure = self.interval(mask)
        value = float64_values(mask) != 0
        return value, enclosure.lo == enclosure.hi

    def note(self, text: str) -> None:
        """Attach a remark to the bounds this operation produces (shown in verdicts)."""
        self.notes.append(f"{self.call.site}: {text}")

    def operand_bits(self, *xs: Any) -> int:
        """The most significant bits any of these operands' endpoints can have."""
        bits = self.fmt.precision
        for x in xs:
            if isinstance(x, torch.Tensor):
                source = dtype_format(x.dtype)
                bits = max(bits, source.precision if source is not None else 64)
        return bits
