"""Where verdicts go for the run report: a per-thread list the pytest layer collects after each
test (the plugin reads and clears it; without the plugin it grows only while someone listens).
A collected list also keeps, by verdict, what the report plots of its elements, computed only
when someone collects."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .verdict import Verdict

__all__ = ["Collected", "collecting", "record_verdict"]


class Collected(list["Verdict"]):
    """The verdicts collected, in order; ``elements`` maps ``id(verdict)`` to its plot data."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: dict[int, Any] = {}


class _Sink(threading.local):
    def __init__(self) -> None:
        self.lists: list[Collected] = []


_SINK = _Sink()


def record_verdict(verdict: Verdict, elements: Callable[[], Any] | None = None) -> None:
    """Hand a verdict to every active collector on this thread; ``elements()``, called once
    and only when someone collects, gives the plot data of its elements (None: no plot)."""
    if not _SINK.lists:
        return
    data = elements() if elements is not None else None
    for collected in _SINK.lists:
        collected.append(verdict)
        if data is not None:
            collected.elements[id(verdict)] = data


@contextmanager
def collecting() -> Iterator[Collected]:
    """Collect the verdicts made on this thread inside the block."""
    collected = Collected()
    _SINK.lists.append(collected)
    try:
        yield collected
    finally:
        # by identity: another collector's list may be equal (e.g. both empty)
        _SINK.lists[:] = [other for other in _SINK.lists if other is not collected]
