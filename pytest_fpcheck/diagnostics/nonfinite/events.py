"""The records of the non-finite watch and their text (GPU-FPX, sections 3.1 and 3.2).

An :class:`Event` is one (operation site, kind, dtype): GPU-FPX reports once per instruction and
counts; here a site is the ATen operation packet at a user source line inside an ``nn.Module``
path. :func:`report_text` lays out per-format totals the way GPU-FPX's detector ends its run
(section 3.1), then the appearances with their source lines, first appearance first, the way its
analyzer's ``APPEAR`` lines point at ``main1.cu:120`` (section 3.2).
"""

from __future__ import annotations

import linecache
from collections.abc import Iterable
from dataclasses import dataclass, field

from ...tracking.core.interpose import describe_location

__all__ = ["KINDS", "KIND_TITLES", "Event", "EventKey", "flow_text", "report_text"]

#: the kinds a watch can look for, in report order
KINDS = ("nan", "inf", "subnormal", "div0")

#: the line title of each kind in GPU-FPX's report
KIND_TITLES = {
    "nan": "Total NaN found",
    "inf": "Total INF found",
    "subnormal": "Total underflow (subnormal)",
    "div0": "Total Division by 0",
}

_KIND_NAMES = {"nan": "NaN", "inf": "INF", "subnormal": "subnormal", "div0": "division by 0"}

#: GPU-FPX's format names; these four sections are always printed, others when they occur
_FORMAT_NAMES = {"float16": "FP16", "bfloat16": "BF16", "float32": "FP32", "float64": "FP64"}

#: (op packet, module path, source, dtype name, kind)
EventKey = tuple[str, str, "tuple[str, int] | None", str, str]


@dataclass
class Event:
    """What a watch saw at one (operation site, kind, dtype), summed over the calls there.

    ``appeared`` is true when in at least one call every floating input was finite (for
    ``subnormal``: and not subnormal) while the output held values of this kind; ``div0`` events
    always appear where the division is. ``origins`` are the keys of the appearance events whose
    values reached this site's inputs.
    """

    op: str
    module_path: str
    source: tuple[str, int] | None
    dtype: str
    kind: str
    order: int
    count: int = 0
    calls: int = 0
    appeared: bool = False
    origins: set[EventKey] = field(default_factory=set)

    @property
    def key(self) -> EventKey:
        return (self.op, self.module_path, self.source, self.dtype, self.kind)

    @property
    def format_name(self) -> str:
        """GPU-FPX's name of the output format (``FP32``), or the dtype's name in capitals."""
        return _FORMAT_NAMES.get(self.dtype, self.dtype.upper())

    @property
    def location(self) -> str:
        """``model.py:12 in MLP.layers.0``, as far as known."""
        return describe_location(self.source, self.module_path) or "unknown location"

    @property
    def source_line(self) -> str:
        """The stripped text of the user's source line, or '' when it cannot be read."""
        if self.source is None:
            return ""
        return linecache.getline(self.source[0], self.source[1]).strip()

    def summary(self) -> str:
        """One line: ``NaN appeared in aten.div at model.py:12 [FP32]: 3 values in 1 call``."""
        verb = "appeared" if self.appeared else "propagated"
        noun = "value" if self.count == 1 else "values"
        calls = "call" if self.calls == 1 else "calls"
        return (
            f"{_KIND_NAMES[self.kind]} {verb} in {self.op} at {self.location} "
            f"[{self.format_name}]: {self.count} {noun} in {self.calls} {calls}"
        )


def _with_source(event: Event, prefix: str) -> list[str]:
    lines = [f"{prefix}{event.summary()}"]
    text = event.source_line
    if text and event.source is not None:
        lines.append(f"{' ' * len(prefix)}{event.source[1]} | {text}")
    return lines


def report_text(events: Iterable[Event], kinds: tuple[str, ...], operations: int) -> str:
    """GPU-FPX's report: per format, the number of sites where each kind was found (appeared or
    propagated), then the number of operations watched and of exceptional values, then every
    appearance in the order first seen, each with its source line."""
    events = sorted(events, key=lambda e: e.order)
    formats = list(_FORMAT_NAMES.values())
    formats += sorted({e.format_name for e in events} - set(formats))
    lines = ["----- fpcheck non-finite watch report -----"]
    for name in formats:
        lines.append(f"--- {name} Operations ---")
        for kind in KINDS:
            found = sum(1 for e in events if e.format_name == name and e.kind == kind)
            text = str(found) if kind in kinds else "not watched"
            lines.append(f"{KIND_TITLES[kind]}: {text}")
    lines.append("--- Other Stats ---")
    lines.append(f"Operations: {operations}")
    lines.append(f"The total number of exceptions are: {sum(e.count for e in events)}")
    appearances = [e for e in events if e.appeared]
    lines.append(f"--- Appearances ({len(appearances)}, first seen first) ---")
    for number, event in enumerate(appearances, 1):
        lines.extend(_with_source(event, f"{number}. "))
    return "\n".join(lines)


def flow_text(chain: list[Event]) -> str:
    """The flow of one appearance: the event, then each later site its values reached."""
    lines = [f"Flow of {chain[0].summary()}"]
    for event in chain[1:]:
        lines.extend(_with_source(event, "  -> "))
    if len(chain) == 1:
        lines.append("  (its values reached no later operation's output)")
    return "\n".join(lines)
