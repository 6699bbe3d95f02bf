"""What a module comparison returns: one :class:`ModuleCall` per module call of the reference
run, in execution order, gathered in a :class:`ModuleComparison`.

A call's kind combines the verdicts of the tensors it was judged on (its floating outputs and,
when modules are isolated, the floating inputs it handed to the modules it called):

* ``"bug"`` when one of them is Type-II, or when its calls to other modules do not match the
  reference's (a call the reference never made, a shape that differs): no round-off explains it;
* ``"inconclusive"`` when none is a bug and one could not separate round-off from a bug, or
  when the call could not be judged at all (an operation without an interval rule);
* ``"exact"`` when every one is exact, ``"close"`` when one had no bounds (rtol/atol only);
* ``"roundoff"`` otherwise.

The call's resolution is the worst (largest) resolution among its verdicts, and its widest
operation the first provenance entry of that verdict: the weakest link of the call.

:attr:`ModuleComparison.first_bug` is the earliest Type-II call none of whose nested calls is
Type-II: the innermost, earliest place a bug shows (RENDER section III-C: the first layer that
differs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import messages

if TYPE_CHECKING:
    from ..verdict import Verdict

__all__ = ["CALL_KINDS", "ModuleCall", "ModuleComparison", "combine"]

#: the kinds of a module call, from the worst
CALL_KINDS = ("bug", "inconclusive", "close", "roundoff", "exact")


def combine(kinds: list[str]) -> str:
    """The kind of a call judged on tensors of these kinds (module docstring)."""
    if not kinds:
        return "exact"
    return min(kinds, key=CALL_KINDS.index)


@dataclass(frozen=True)
class ModuleCall:
    """One module call, judged. ``verdicts`` pairs each judged tensor's label (``output``,
    ``output[0]``, ``input of blocks.0.mlp: args[0]``) with its verdict; ``problems`` says
    what did not match the reference structurally (each one makes the call a bug);
    ``unjudged`` why the call could not be judged (it is then inconclusive)."""

    index: int
    path: str
    module_class: str
    occurrence: int
    parent: int | None
    depth: int
    leaf: bool
    verdicts: tuple[tuple[str, Verdict], ...]
    problems: tuple[str, ...] = ()
    unjudged: str = ""

    @property
    def kind(self) -> str:
        kinds = [verdict.kind for _, verdict in self.verdicts]
        return combine(
            kinds + ["bug"] * bool(self.problems) + ["inconclusive"] * bool(self.unjudged)
        )

    @property
    def name(self) -> str:
        """The path (``<root>`` for the model itself) and, for a module called more than once,
        which call: ``blocks.0.attn#2``."""
        path = self.path or "<root>"
        return f"{path}#{self.occurrence + 1}" if self.occurrence else path

    @property
    def outside(self) -> int:
        return sum(verdict.outside for _, verdict in self.verdicts)

    @property
    def total(self) -> int:
        return sum(verdict.total for _, verdict in self.verdicts)

    def _weakest(self) -> tuple[str, Verdict] | None:
        resolved = [(label, v) for label, v in self.verdicts if v.resolution is not None]
        if not resolved:
            return None
        return max(resolved, key=lambda pair: float(pair[1].resolution or 0.0))

    @property
    def resolution(self) -> float | None:
        """The worst median resolution among the call's verdicts (None without bounds)."""
        weakest = self._weakest()
        return None if weakest is None else weakest[1].resolution

    @property
    def widest(self) -> str:
        """The operation that widened the least-resolved verdict's enclosure most."""
        weakest = self._weakest()
        if weakest is None or not weakest[1].widest:
            return "-"
        return weakest[1].widest

    @property
    def failing(self) -> tuple[str, Verdict] | None:
        """The first judged tensor whose verdict is the call's kind, when that is a failure."""
        for label, verdict in self.verdicts:
            if verdict.kind == self.kind and verdict.kind in ("bug", "inconclusive"):
                return label, verdict
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record of the call (for the run report)."""
        return {
            "index": self.index,
            "path": self.path,
            "name": self.name,
            "module_class": self.module_class,
            "occurrence": self.occurrence,
            "parent": self.parent,
            "depth": self.depth,
            "leaf": self.leaf,
            "kind": self.kind,
            "outside": self.outside,
            "total": self.total,
            "resolution": self.resolution,
            "widest": self.widest,
            "problems": list(self.problems),
            "unjudged": self.unjudged or None,
            "verdicts": [{"label": label, **verdict.to_dict()} for label, verdict in self.verdicts],
        }


@dataclass(frozen=True)
class ModuleComparison:
    """The module calls of a comparison in execution order (module docstring).

    ``reference`` describes what the calls were judged against; ``isolate`` and
    ``leaves_only`` are the comparison's options; ``max_resolution`` the threshold its
    verdicts used."""

    calls: tuple[ModuleCall, ...]
    reference: str
    isolate: bool
    leaves_only: bool
    max_resolution: float

    @property
    def kind(self) -> str:
        """The worst kind among the calls."""
        return combine([call.kind for call in self.calls])

    @property
    def passed(self) -> bool:
        """No call is a bug and none is inconclusive."""
        return self.kind not in ("bug", "inconclusive")

    @property
    def bugs(self) -> tuple[ModuleCall, ...]:
        return tuple(call for call in self.calls if call.kind == "bug")

    @property
    def inconclusive(self) -> tuple[ModuleCall, ...]:
        return tuple(call for call in self.calls if call.kind == "inconclusive")

    @property
    def first_bug(self) -> ModuleCall | None:
        """The earliest Type-II call with no Type-II call nested in it, or None."""
        bugs = self.bugs
        inner_parents: set[int] = set()
        by_index = {call.index: call for call in self.calls}
        for call in bugs:
            parent = call.parent
            while parent is not None:
                inner_parents.add(parent)
                above = by_index.get(parent)
                parent = above.parent if above is not None else None
        innermost = [call for call in bugs if call.index not in inner_parents]
        return innermost[0] if innermost else None

    def counts(self) -> dict[str, int]:
        """How many calls of each kind (every kind listed, zeros included)."""
        return {kind: sum(call.kind == kind for call in self.calls) for kind in CALL_KINDS}

    def report(self) -> str:
        """The comparison as text, in the layout of every failure message
        (:mod:`~pytest_fpcheck.assertions.messages`)."""
        kind = self.kind
        focus = self.first_bug if kind == "bug" else next(iter(self.inconclusive), None)
        lines = [messages.headline("modules", [kind], self._headline(focus))]
        counts = ", ".join(f"{n} {k}" for k, n in self.counts().items() if n)
        how = (
            "each on the reference's inputs, the modules it calls answered by the reference"
            if self.isolate
            else "each on the reference's inputs, with the modules it calls"
        )
        scope = "leaf module calls" if self.leaves_only else "module calls"
        lines.append(
            f"{len(self.calls)} {scope} judged against {self.reference} ({how}): {counts or 'none'}"
        )
        lines += messages.table_lines(
            ("call", "module", "class", "verdict", "outside", "resolution", "widest operation"),
            (_row(call) for call in self.calls),
            right=(0,),
        )
        if focus is not None:
            lines += _details(focus)
        return messages.message(lines)

    def _headline(self, focus: ModuleCall | None) -> str:
        if focus is None:
            return {
                "exact": "every module call equals the reference's",
                "close": "every module call is within rtol/atol (some had no bounds)",
            }.get(self.kind, "every module call is within the round-off of its own computation")
        where = f"{focus.name} ({focus.module_class})"
        if focus.kind == "bug":
            return f"Type-II (bug) in {where}: the difference is more than round-off can explain"
        return (
            f"inconclusive from {where} on: {len(self.inconclusive)} module calls have "
            "enclosures too wide to tell round-off from a bug, and no call is a bug"
        )

    def judged(self) -> Iterator[tuple[ModuleCall, str, Verdict]]:
        """Every judged tensor of every call: ``(call, label, verdict)``, in order (the run
        report shows each as a verdict naming its module)."""
        for call in self.calls:
            for label, verdict in call.verdicts:
                yield call, label, verdict

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record of the comparison (for the run report)."""
        first = self.first_bug
        return {
            "kind": self.kind,
            "reference": self.reference,
            "isolate": self.isolate,
            "leaves_only": self.leaves_only,
            "max_resolution": self.max_resolution,
            "counts": self.counts(),
            "first_bug": first.name if first is not None else None,
            "calls": [call.to_dict() for call in self.calls],
        }


def _row(call: ModuleCall) -> tuple[str, ...]:
    resolution = call.resolution
    return (
        str(call.index),
        "  " * call.depth + call.name,
        call.module_class,
        call.kind,
        f"{call.outside} / {call.total}",
        "-" if resolution is None else f"{resolution:.3g}",
        call.widest,
    )


def _details(call: ModuleCall) -> list[str]:
    """The first failing call: its structural problems, then its failing verdict, indented."""
    lines = [f"{'first bug' if call.kind == 'bug' else 'first inconclusive'}: {call.name}"]
    lines += [f"  problem: {problem}" for problem in call.problems]
    if call.unjudged:
        lines.append(f"  {call.unjudged}")
    failing = call.failing
    if failing is not None:
        label, verdict = failing
        lines.append(f"  {label}:")
        lines += ["    " + line for line in verdict.report().splitlines()]
    return lines
