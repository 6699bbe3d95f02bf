"""Where verdicts go for the run report: a per-thread list the pytest layer collects after each
test (the plugin reads and clears it; without the plugin it grows only while someone listens)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .verdict import Verdict

__all__ = ["collecting", "record_verdict"]


class _Sink(threading.local):
    def __init__(self) -> None:
        self.lists: list[list[Verdict]] = []


_SINK = _Sink()


def record_verdict(verdict: Verdict) -> None:
    """Hand a verdict to every active collector on this thread."""
    for collected in _SINK.lists:
        collected.append(verdict)


@contextmanager
def collecting() -> Iterator[list[Verdict]]:
    """Collect the verdicts made on this thread inside the block."""
    collected: list[Verdict] = []
    _SINK.lists.append(collected)
    try:
        yield collected
    finally:
        # by identity: another collector's list may be equal (e.g. both empty)
        _SINK.lists[:] = [other for other in _SINK.lists if other is not collected]
