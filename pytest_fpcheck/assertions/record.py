"""Where verdicts go for the run report: a per-thread list the pytest layer collects after each
test (the plugin reads and clears it; without the plugin it grows only while someone listens).
A module-by-module comparison goes there too, as one entry.
A collector may ask for more than the verdict: ``collecting(describe)`` calls
``describe(verdict, *arrays)`` with the arrays compared, when the verdict is made, and keeps what
it returns by verdict (the run report's plot points; the pytest layer passes the function, so
this module knows nothing of the report)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .modules.result import ModuleComparison
    from .verdict import Verdict

__all__ = ["Collected", "collecting", "record_verdict"]


class Collected(list["Verdict | ModuleComparison"]):
    """The verdicts collected, in order; ``elements`` maps ``id(verdict)`` to what
    ``describe`` said of its arrays (when it said anything)."""

    def __init__(self, describe: Callable[..., Any] | None = None) -> None:
        super().__init__()
        self.describe = describe
        self.elements: dict[int, Any] = {}


class _Sink(threading.local):
    def __init__(self) -> None:
        self.lists: list[Collected] = []


_SINK = _Sink()


def record_verdict(verdict: Verdict | ModuleComparison, *arrays: Any) -> None:
    """Hand a verdict to every active collector on this thread, with the arrays it compared
    (``actual, expected, bounds, expected_bounds``) for a collector's ``describe``."""
    for collected in _SINK.lists:
        collected.append(verdict)
        if collected.describe is not None and arrays:
            data = collected.describe(verdict, *arrays)
            if data is not None:
                collected.elements[id(verdict)] = data


@contextmanager
def collecting(describe: Callable[..., Any] | None = None) -> Iterator[Collected]:
    """Collect the verdicts made on this thread inside the block (see the module docstring for
    ``describe``)."""
    collected = Collected(describe)
    _SINK.lists.append(collected)
    try:
        yield collected
    finally:
        # by identity: another collector's list may be equal (e.g. both empty)
        _SINK.lists[:] = [other for other in _SINK.lists if other is not collected]
