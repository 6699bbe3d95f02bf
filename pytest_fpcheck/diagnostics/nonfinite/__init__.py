"""Where NaN, Inf, subnormal values and divisions by zero appear (GPU-FPX, Li et al., sections
1-4): ``fp.watch_nonfinite()`` and what it records.

* :mod:`.watch`: the :class:`Watch` dispatch mode and its rules (what is an appearance, what was
  only carried along), for ATen operations and for the operations of Triton kernels it is shown
  through the tracking core's subscription interface;
* :mod:`.events`: the :class:`Event` records and the report's text.
"""

from __future__ import annotations

from .events import KINDS, Event
from .watch import Watch, watch_nonfinite

__all__ = ["KINDS", "Event", "Watch", "watch_nonfinite"]
