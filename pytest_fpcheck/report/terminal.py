"""The terminal summary of a run report: one compact table per kind (API section 8).

Kinds come in the order of :data:`~pytest_fpcheck.report.kinds.KINDS` (verdicts, then the
non-finite appearances, then the rest); within a table, rows of rank 0 (bugs, worse
implementations, appearances) come first, then by test id. A table fits ``width`` columns: cells
are cut to their column, the test id (last) is cut from the left, where ids differ least. Without
``wide`` a table lists every rank-0 row but at most :data:`ROW_LIMIT` rows in all; ``wide``
(``-v``) lists every row and adds the kind's wide columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .kinds import KINDS, Column, Kind

__all__ = ["ROW_LIMIT", "section_lines", "sections"]

ROW_LIMIT = 20


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: width - 3] + "..." if width > 3 else text[:width]


def _cell(text: str, column: Column) -> str:
    text = _cut(text, column.width)
    return text.rjust(column.width) if column.right else text.ljust(column.width)


def _test(test: str, room: int) -> str:
    return test if len(test) <= room else "..." + test[-(room - 3) :]


def _count_line(kind: Kind, entries: Sequence[Mapping[str, Any]]) -> str:
    """``3 verdicts: 1 bug, 2 roundoff``, statuses in the order of the (sorted) entries."""
    by_status: dict[str, int] = {}
    for entry in entries:
        status = kind.status(entry)
        by_status[status] = by_status.get(status, 0) + 1
    noun = kind.noun.replace("_", "-")
    parts = ", ".join(f"{count} {status}" for status, count in by_status.items())
    return f"{len(entries)} {noun}{'' if len(entries) == 1 else 's'}: {parts}"


def section_lines(
    kind: Kind, entries: Sequence[Mapping[str, Any]], *, width: int, wide: bool
) -> list[str]:
    """The table of one kind's entries (module docstring); [] when there are none."""
    if not entries:
        return []
    columns = [c for c in kind.columns if c.show == "always" or (wide and c.show == "wide")]
    rows = sorted(entries, key=lambda entry: (kind.rank(entry), entry["test"]))
    shown = rows
    if not wide and len(rows) > ROW_LIMIT:
        first = sum(1 for entry in rows if kind.rank(entry) == 0)
        shown = rows[: max(ROW_LIMIT, first)]
    lines = [" ".join(_cell(c.header, c) for c in columns) + "  test"]
    for entry in shown:
        head = " ".join(_cell(c.value(entry), c) for c in columns) + "  "
        lines.append(head + _test(str(entry["test"]), max(width - len(head), 10)))
        if kind.subline is not None:
            below = kind.subline(entry)
            if below:
                lines.append(_cut("    " + below, width))
    if len(shown) < len(rows):
        lines.append(f"... and {len(rows) - len(shown)} more (-v lists every one)")
    if kind.note:
        lines.append(_cut(kind.note, width))
    lines.append(_cut(_count_line(kind, rows), width))
    return lines


def sections(
    entries: Mapping[str, Sequence[Mapping[str, Any]]], *, width: int, wide: bool
) -> list[tuple[str, list[str]]]:
    """``(title, lines)`` of every kind that has entries, in report order."""
    found = []
    for kind in KINDS:
        lines = section_lines(kind, entries.get(kind.key, ()), width=width, wide=wide)
        if lines:
            found.append((kind.title, lines))
    return found
