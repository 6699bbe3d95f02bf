"""One instrumented Triton launch and the thread's state: :class:`Launch` is what the hooks know of
the launch in progress on this thread (its kernel, the memory it bounds under ``fp.track()``, the
watch it reports to under ``fp.watch_nonfinite()``, and how much each site widened the bounds),
:func:`current_launch` finds it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import UnsupportedOperation
from ...interval.bounds import Provenance
from ..core.interpose import describe_location, user_frame
from ..core.observe import OperationRounder, OperationWatcher
from . import handles as h
from .memory import LaunchMemory
from .rules import NAN_PROPAGATING

__all__ = ["STATE", "WATCHED", "Launch", "current_launch"]

#: per thread: ``launch`` (the launch in progress) and ``last_load`` (the enclosure of the last
#: masked load, which a descriptor load reads back)
STATE = threading.local()


#: Operations the non-finite watch examines (they compute; data movement only carries values).
WATCHED = (NAN_PROPAGATING - {"and"}) | {"dot"}
_DIVISIONS = frozenset({"fdiv", "precise_divf", "approx_divf"})


@dataclass
class Launch:
    """One instrumented kernel launch: bounded (``memory``, under ``fp.track()``), watched
    (``watch``, under ``fp.watch_nonfinite()``), or both; or randomly rounded (``rounder``, in a
    stochastic-arithmetic run)."""

    kernel: str
    memory: LaunchMemory | None
    mode: str
    watch: OperationWatcher | None = None
    rounder: OperationRounder | None = None
    widenings: dict[str, float] = field(default_factory=dict)
    #: a value in bfloat16 or a float8 format went through the launch (the formats whose
    #: arithmetic and conversions triton 3.9's interpreter gets wrong)
    reduced: bool = False

    def note_formats(self, *values: Any) -> None:
        """Set :attr:`reduced` if one of these handles holds bfloat16 or float8 values."""
        if self.reduced:
            return
        for value in values:
            dtype = getattr(value, "dtype", None)
            if dtype is not None and hasattr(value, "attr"):
                name = getattr(h.element_type(dtype), "name", "")
                if name == "bf16" or name.startswith("fp8"):
                    self.reduced = True
                    return

    @property
    def bounded(self) -> LaunchMemory:
        """The memory of a bounded launch (memory rules run only for those)."""
        assert self.memory is not None
        return self.memory

    def observe(self, name: str, args: tuple[Any, ...], result: Any) -> None:
        """Show a computing operation's values to the non-finite watch."""
        if self.watch is None or name not in WATCHED or not h.is_floating(result):
            return
        try:
            fmt = h.format_of_type(result.dtype)
        except UnsupportedOperation:
            return  # a float8 variant without a format: nothing to classify it by
        operands = [a for a in args if hasattr(a, "attr") and h.is_floating(a)]
        inputs = [h.decode(np.asarray(a.data), h.format_of_type(a.dtype)) for a in operands]
        divisions = 0
        if name in _DIVISIONS and len(inputs) == 2:
            dividend, divisor = np.broadcast_arrays(*inputs)
            divisions = int(((divisor == 0) & np.isfinite(dividend)).sum())
        elif name == "rsqrt" and inputs:
            divisions = int((inputs[0] == 0).sum())
        self.watch.kernel_operation(
            f"{self.kernel}.{name}",
            user_frame(),
            fmt.name,
            fmt.smallest_normal,
            inputs,
            h.decode(np.asarray(result.data), fmt),
            divisions,
        )

    def site(self) -> str:
        location = describe_location(user_frame(), "")
        return f"{self.kernel} {location}".strip()

    def widened(self, site: str, amount: float) -> None:
        if amount > self.widenings.get(site, 0.0):
            self.widenings[site] = amount

    def provenance(self) -> Provenance:
        result = Provenance()
        for site, amount in self.widenings.items():
            result = result.merge(site=site, widening=amount)
        return result


def current_launch() -> Launch | None:
    launch: Launch | None = getattr(STATE, "launch", None)
    return launch
