"""Where results go for the run report: a per-thread list the pytest layer collects during each
test, as :mod:`pytest_fpcheck.assertions.record` does for verdicts. It sits low (with the
assertions), so that the diagnostics and dual-delta testing above it can publish without
knowing the pytest layer or the report (``tests/test_layers.py``).

A producer (``fp.reveal_order``, ``fp.isolate``, ``fp.probe_matmul``, ``fp.dual_delta``) calls
:func:`publish` with its result object once it has one; the plugin turns each published result
into a record (:func:`pytest_fpcheck.report.records.record_of`) after the test. Publishing stores
a reference and nothing more, and costs one loop over an empty list when no one collects.
:data:`KEYS` are the report's kinds (``pytest_fpcheck.report.kinds``; a test keeps the two
lists equal).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from ..errors import InvalidArgument

__all__ = ["KEYS", "Published", "collecting", "publish"]

#: the kinds of result a run report holds
KEYS = (
    "verdicts",
    "modules",
    "appearances",
    "gaps",
    "dual_deltas",
    "isolations",
    "probes",
    "trees",
)


class Published(NamedTuple):
    """One published result: its kind (a report key), the object, and context for its record
    (e.g. ``impl=`` and ``algorithm=`` of a revealed tree)."""

    kind: str
    result: Any
    context: dict[str, Any]


class _Sink(threading.local):
    def __init__(self) -> None:
        self.lists: list[list[Published]] = []


_SINK = _Sink()


def publish(kind: str, result: Any, **context: Any) -> None:
    """Hand ``result`` of ``kind`` ("verdicts", "dual_deltas", "appearances", "isolations",
    "probes" or "trees") to every active collector on this thread."""
    if kind not in KEYS:
        raise InvalidArgument("kind", kind, f"one of {', '.join(KEYS)}")
    for collected in _SINK.lists:
        collected.append(Published(kind, result, context))


@contextmanager
def collecting() -> Iterator[list[Published]]:
    """Collect what is published on this thread inside the block."""
    collected: list[Published] = []
    _SINK.lists.append(collected)
    try:
        yield collected
    finally:
        # by identity: another collector's list may be equal (e.g. both empty)
        _SINK.lists[:] = [other for other in _SINK.lists if other is not collected]
