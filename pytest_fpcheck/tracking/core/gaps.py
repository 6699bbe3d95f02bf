"""Gaps: what a non-strict tracker could not bound, counted and handed to whoever listens.

The tracker's first promise (issue 17, ``docs/plugin.md``) is coverage.py's: it observes and
never changes what a test does. Where it cannot bound an operation (no interval rule and no
decomposition, or its own code failed), the operation's result still is what PyTorch computed,
but its floating elements get the whole line as their enclosure (so any verdict on them, or on
anything computed from them, is "inconclusive", never "roundoff") and the operation is a *gap*:
counted per operation and reason, with the first user source line that met it and, for an
internal failure, the traceback. Nothing is silent: each tracker keeps its gaps
(``Tracker.gaps``) and, on leaving its block, hands them to every collector open on the thread
(:func:`collecting`: the pytest plugin adds them to the run report and the terminal summary).
Under ``strict=True`` (``--fpcheck-strict``) the tracker raises instead, as it did before.

A test that ``pytest --fpcheck`` runs without tracking (``--fpcheck-track=auto`` found no way for
it to ask for a verdict) runs inside :func:`untracked`, so that a verdict asked there all the
same says why no bounds exist (:func:`why_untracked`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "COMPILED_REGION",
    "INTERNAL_FAILURE",
    "NO_RULE",
    "Gap",
    "collecting",
    "hand_over",
    "merge",
    "untracked",
    "why_untracked",
]

#: an operation with a floating operand and neither an interval rule nor a decomposition
NO_RULE = "no rule"
#: the tracker's own code raised while bounding an operation (a bug of this package)
INTERNAL_FAILURE = "internal failure"
#: a graph compiled by ``torch.compile`` ran without the tracker (:mod:`.compiled`)
COMPILED_REGION = "torch.compile region"


@dataclass
class Gap:
    """One operation tracking could not bound: ``op`` (the overload, ``aten.pow.Scalar``, or
    the compiled function, ``torch.compile(forward)``), ``reason`` (:data:`NO_RULE`,
    :data:`INTERNAL_FAILURE` or :data:`COMPILED_REGION`), how many times (``count``), the
    first call's ``site`` (``aten.pow at model.py:12 in Rotary``) and user ``source`` line
    (``(file, line)`` or None), the ``message`` (the error tracking raised or would raise) and,
    for an internal failure, its ``traceback``."""

    op: str
    reason: str
    count: int
    site: str
    source: tuple[str, int] | None
    message: str
    traceback: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.op, self.reason)

    def note(self) -> str:
        """The note that the bounds of what the operation produced carry (shown in verdicts)."""
        what = {
            NO_RULE: "has no interval rule",
            COMPILED_REGION: "ran as compiled code, which tracking does not see",
        }.get(self.reason, "could not be bounded")
        return (
            f"{self.site}: {self.op} {what}; its floating results have no bounds (the whole "
            "line), so a verdict on them or on what is computed from them is inconclusive"
        )

    def to_dict(self) -> dict[str, object]:
        """The gap's record in the run report."""
        record: dict[str, object] = {
            "op": self.op,
            "reason": self.reason,
            "count": self.count,
            "site": self.site,
            "message": self.message,
        }
        if self.source is not None:
            record["file"], record["line"] = self.source[0], self.source[1]
        if self.traceback:
            record["traceback"] = self.traceback
        return record


def merge(into: dict[tuple[str, str], Gap], gaps: Iterable[Gap]) -> None:
    """Add ``gaps`` to ``into`` (keyed by operation and reason): counts add up, the first
    call's site, source line and traceback stay."""
    for gap in gaps:
        known = into.get(gap.key)
        if known is None:
            into[gap.key] = Gap(**vars(gap))
        else:
            known.count += gap.count


class _Collectors(threading.local):
    def __init__(self) -> None:
        self.lists: list[list[Gap]] = []
        self.untracked: list[str] = []


_COLLECTORS = _Collectors()


def hand_over(gaps: Iterable[Gap]) -> None:
    """Give a tracker's gaps to every collector open on this thread (none: nothing happens)."""
    found = list(gaps)
    for collected in _COLLECTORS.lists:
        collected.extend(found)


@contextmanager
def collecting() -> Iterator[list[Gap]]:
    """Collect the gaps of the trackers that leave their block on this thread inside this one."""
    collected: list[Gap] = []
    _COLLECTORS.lists.append(collected)
    try:
        yield collected
    finally:
        _COLLECTORS.lists[:] = [other for other in _COLLECTORS.lists if other is not collected]


@contextmanager
def untracked(reason: str) -> Iterator[None]:
    """Run the block knowing that no tracker watches it, and why (``reason``)."""
    _COLLECTORS.untracked.append(reason)
    try:
        yield
    finally:
        _COLLECTORS.untracked.pop()


def why_untracked() -> str | None:
    """Why the code running on this thread is not tracked, when :func:`untracked` says so."""
    return _COLLECTORS.untracked[-1] if _COLLECTORS.untracked else None
