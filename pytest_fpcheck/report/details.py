"""Each report entry's details block on the page, by kind.

A verdict shows the parts its verdict kind names (:mod:`.verdict_parts`); a module-by-module
comparison, its calls in execution order, indented by depth, the first bug's row highlighted; a
test, its outcome, where it is defined, its fpcheck findings (links to their details), its
traceback and captured output; every other kind, its fields under their labels, the ones its
:class:`~pytest_fpcheck.report.kinds.Kind` names first and its long texts preformatted last.
:func:`details` wraps the block of any entry in its ``<details>`` element, with a link back to
its test.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from .kinds import KINDS, TESTS, Kind, verdict_warning
from .markup import (
    Links,
    fields_table,
    label_of,
    number_html,
    other_fields,
    paragraph,
    status_html,
    warning_html,
)
from .verdict_parts import Part, verdict_details

__all__ = ["details"]


# -- a module-by-module comparison's details -------------------------------------------------------


def _modules_details(entry: Mapping[str, Any], links: Links) -> str:
    """A sentence, then one row per module call in execution order (indented by depth), the
    first bug's row highlighted, then the comparison's other fields."""
    calls = entry["calls"]
    first = entry.get("first_bug")
    counts = entry.get("counts") or {}
    counted = ", ".join(f"{n} {escape(str(k))}" for k, n in counts.items() if n)
    said = (
        f"{len(calls)} module calls judged against {escape(str(entry.get('reference', '?')))}"
        f"{': ' + counted if counted else ''}."
    )
    if first:
        said += (
            f" The first bug (the earliest with no bug nested in it): <b>{escape(str(first))}</b>."
        )
    out = [paragraph(said), warning_html(verdict_warning(entry))]
    head = "".join(
        f"<th>{h}</th>"
        for h in ("call", "module", "class", "verdict", "outside", "resolution", "widest operation")
    )
    rows = []
    for call in calls:
        name = str(call.get("name", call.get("path", "?")))
        style = ' class="first-bug"' if first and name == first else ""
        depth = int(call.get("depth") or 0)
        problem = call.get("unjudged") or "; ".join(call.get("problems") or ())
        cells = [
            number_html(call.get("index")),
            f'<span style="padding-left:{depth}em">{escape(name)}</span>',
            escape(str(call.get("module_class", ""))),
            status_html(str(call.get("kind", "?"))),
            f"{call.get('outside', '-')} / {call.get('total', '-')}",
            number_html(call.get("resolution")),
            escape(str(call.get("widest") or problem or "")),
        ]
        rows.append(f"<tr{style}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append(f'<table class="calls"><tr>{head}</tr>{"".join(rows)}</table>')
    out.append(other_fields(entry, ("kind", "calls", "first_bug", "counts", "reference", "test")))
    return "".join(out)


# -- a test's details ------------------------------------------------------------------------------


def _test_details(entry: Mapping[str, Any], links: Links) -> str:
    out = []
    location = entry.get("location")
    said = f"{status_html(str(entry['outcome']))} in {number_html(entry.get('duration'))} s"
    if entry.get("when") and entry["when"] != "call":
        said += f", in its {escape(str(entry['when']))}"
    if isinstance(location, Mapping) and location.get("path"):
        shown = f"{location['path']}:{location.get('line') or ''}".rstrip(":")
        said += f", defined at {links.source(location['path'], location.get('line'), shown)}"
    out.append(paragraph(said + "."))
    if entry["outcome"] == "expected-bug":
        out.append(
            paragraph(
                "It passed: the round-off check that raised sat inside <code>pytest.raises</code>."
            )
        )
    if entry.get("reason"):
        out.append(paragraph(f"Reason: {escape(str(entry['reason']))}"))
    found = links.entries.get(str(entry["test"]), [])
    if found:
        items = "".join(
            f'<li><a href="#{anchor}">{escape(title)}</a>: {status_html(status)}</li>'
            for anchor, title, status in found
        )
        out.append(f"<h4>fpcheck findings</h4><ul>{items}</ul>")
    if entry.get("traceback"):
        out.append(f"<h4>Traceback</h4><pre>{escape(str(entry['traceback']))}</pre>")
    for section in entry.get("output") or ():
        out.append(
            f"<h4>{escape(str(section['name']))}</h4><pre>{escape(str(section['text']))}</pre>"
        )
    return "".join(out)


# -- every other kind: its fields, under their labels ----------------------------------------------


def _record_details(kind: Kind) -> Part:
    def details(entry: Mapping[str, Any], links: Links) -> str:
        texts = "".join(
            f"<h4>{escape(label_of(name))}</h4><pre>{escape(str(entry[name]))}</pre>"
            for name in kind.texts
            if entry.get(name)
        )
        skip = ("test", *kind.texts, *kind.hidden)
        ordered = {name: entry[name] for name in kind.first if name in entry}
        ordered.update((name, value) for name, value in entry.items() if name not in ordered)
        return fields_table(ordered, skip) + texts

    return details


_DETAILS: dict[str, Part] = {kind.key: _record_details(kind) for kind in KINDS}
_DETAILS["verdicts"] = verdict_details
_DETAILS["modules"] = _modules_details
_DETAILS["tests"] = _test_details


def details(kind: Kind, anchor: str, entry: Mapping[str, Any], links: Links) -> str:
    """The ``<details>`` block of one entry of ``kind``, with the id ``anchor``."""
    status = kind.status(entry)
    back = "" if kind is TESTS else f'<p class="note">test: {links.test(str(entry["test"]))}</p>'
    return (
        f'<details class="entry" id="{anchor}"><summary>{status_html(status)} '
        f"{escape(str(entry['test']))}</summary>{back}{_DETAILS[kind.key](entry, links)}</details>"
    )
