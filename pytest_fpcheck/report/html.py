"""The run report as one self-contained HTML page (API section 8).

Everything is in the file: the style and the script (package data, ``static/report.css`` and
``static/report.js``, read when a page is rendered), the data, each dual-delta figure (the four
panels of the Dual-Delta paper's section 4.2) as a base64 PNG and each verdict's plot as SVG;
the page fetches nothing. Top to bottom: the run's totals (tests by outcome, results by status),
then one section per kind that has entries, the run's tests first, then the numeric environment
and the settings. Each section is a table that sorts by any column (a click on its header) with
a text filter (every word must occur in the row) and a status filter; a row's test id links to
its details (:mod:`.details`, a verdict's part by part in :mod:`.verdict_parts`), which say what
the record holds in words and numbers under human labels (:data:`~.markup.LABELS`). An entry
that reads better than it is or decides nothing (:attr:`Kind.warning`: a loose round-off
enclosure, an inconclusive verdict) carries a warning mark in its row and a warning box in its
details.

The page must stay small and quick with ten thousand verdicts. The document (the JSON report,
``docs/report-schema.json``) and the view (each table's rows and each entry's details, as HTML
text) are embedded gzip-compressed and base64-encoded (``<script type="application/gzip">``);
the script inflates them with the browser's ``DecompressionStream``, lists :data:`PAGE_ROWS`
rows at a time, filters and sorts them as arrays, and inserts a details block when a link asks
for it (every block at once for a kind of at most :data:`INLINE_DETAILS` entries).

pytest-html's page gets each test's findings too: :func:`findings_summary` for its ``fpcheck``
column, :func:`findings_fragment` for the test's extra.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from ..errors import InvalidArgument
from .details import details
from .kinds import KINDS, OUTCOMES, TESTS, Kind
from .markup import (
    Links,
    exact_html,
    fields_table,
    index_html,
    number_html,
    status_class,
    value_html,
)

__all__ = [
    "INLINE_DETAILS",
    "PAGE_ROWS",
    "embedded",
    "findings_fragment",
    "findings_summary",
    "page_data",
    "render",
]

#: rows a table lists at first, and how many more each "list more" adds
PAGE_ROWS = 500
#: up to this many entries, a kind's details blocks are all placed below its table at load
INLINE_DETAILS = 200


def _static(name: str) -> str:
    """A file of the package data folder ``static/`` (the page's style or script), read from
    the installed package (a wheel, a zip, a source tree alike)."""
    return resources.files(__package__ or "").joinpath("static").joinpath(name).read_text("utf-8")


# -- the page --------------------------------------------------------------------------------------


def _totals(document: Mapping[str, Any]) -> list[str]:
    totals = document.get("totals", {})
    parts = [f"<span><b>{totals.get('tests', 0)} tests</b></span>"]
    parts += [
        f'<span class="status s-{outcome}">{totals[outcome]} {outcome}</span>'
        for outcome in OUTCOMES
        if totals.get(outcome)
    ]
    counts = document.get("counts", {})
    for kind in KINDS:
        by_status = counts.get(kind.key, {})
        if by_status:
            detail = ", ".join(
                f'<span class="status s-{status_class(s)}">{n} {escape(s)}</span>'
                for s, n in by_status.items()
            )
            entries = sum(by_status.values())
            parts.append(
                f'<span><a href="#{kind.key}">{entries} {escape(kind.title)}</a>: {detail}</span>'
            )
    return [f'<div class="totals">{"".join(parts)}</div>']


def _header(document: Mapping[str, Any], sections: Sequence[Kind]) -> list[str]:
    run = document.get("run", {})
    workers = run.get("workers", 0)
    where = f"{workers} xdist workers" if workers else "one process"
    duration = run.get("duration")
    took = f" &middot; {number_html(duration)} s" if duration is not None else ""
    schema = document.get("schema", {})
    links = "".join(f'<li><a href="#{kind.key}">{escape(kind.title)}</a></li>' for kind in sections)
    return [
        "<header><h1>pytest-fpcheck run report</h1>",
        f'<p class="meta">{escape(str(run.get("created", "")))}{took} &middot; Python '
        f"{escape(str(run.get('python', '')))} &middot; {escape(str(run.get('platform', '')))}"
        f" &middot; {where} &middot; schema {escape(str(schema.get('name', '')))} version "
        f"{escape(str(schema.get('version', '')))}</p>",
        *_totals(document),
        f'<nav><ul>{links}<li><a href="#environment">numeric environment</a></li></ul></nav>',
        "</header>",
    ]


def _environment(document: Mapping[str, Any]) -> list[str]:
    environment = document.get("environment", {})
    out = ['<section id="environment"><h2>Numeric environment</h2><div class="env">']
    groups = [(str(name), values) for name, values in environment.items()]
    groups.append(("settings", document.get("settings", {})))
    for name, values in groups:
        body = (
            fields_table(values, labels=False)
            if isinstance(values, Mapping)
            else value_html(values)
        )
        out.append(f"<div><h3>{escape(name)}</h3>{body or '<p class=note>none</p>'}</div>")
    out.append("</div></section>")
    return out


def _section(kind: Kind, entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The section's HTML: its filters, its (empty) table, the room for its details."""
    key = kind.key
    statuses = sorted({kind.status(entry) for entry in entries})
    options = "".join(f'<option value="{escape(s)}">{escape(s)}</option>' for s in statuses)
    head = "".join(f"<th>{escape(c.header)}</th>" for c in kind.columns)
    title = kind.title[:1].upper() + kind.title[1:]
    out = [
        f'<section id="{key}"><h2>{escape(title)}</h2>',
        f'<div class="filters" data-table="table-{key}">'
        f'<input class="q" type="search" placeholder="filter: words that must all occur">'
        f'<select class="s"><option value="">every status</option>{options}</select>'
        f'<span class="shown"></span></div>',
        f'<table class="rows" id="table-{key}"><thead><tr><th>test</th>{head}</tr></thead>'
        f'<tbody></tbody></table><button id="more-{key}" hidden>list more</button>',
    ]
    if kind.note:
        out.append(f'<p class="note">{escape(kind.note)}</p>')
    out.append(f'<h3>Details</h3><div id="details-{key}"></div></section>')
    return out


def _anchors(document: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, list[Any]]]:
    tests = {str(entry["test"]): f"tests-{i}" for i, entry in enumerate(document.get("tests", []))}
    entries: dict[str, list[tuple[str, str, str]]] = {}
    for kind in KINDS:
        for i, entry in enumerate(document.get(kind.key, [])):
            found = (f"{kind.key}-{i}", kind.noun.replace("_", "-"), kind.status(entry))
            entries.setdefault(str(entry["test"]), []).append(found)
    return tests, entries


def page_data(document: Mapping[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """The view the script draws: for each kind with entries (tests first), ``right`` and
    ``wide`` (how each column aligns), ``rows`` (status, mark: 0 for rank 0, 2 for a warning,
    1 otherwise; index of the entry; test id; cells), sorted by rank then test id,
    ``warnings`` (by entry index) and ``details`` (a block of HTML by anchor)."""
    tests, entries = _anchors(document)
    links = Links(document.get("run", {}).get("rootdir"), folder, tests, entries)
    data: dict[str, Any] = {}
    for kind in (TESTS, *KINDS):
        records = document.get(kind.key, [])
        if not records:
            continue
        order = sorted(
            range(len(records)), key=lambda i: (kind.rank(records[i]), records[i]["test"])
        )
        warnings = {}
        rows = []
        for i in order:
            entry = records[i]
            warning = kind.warning(entry) if kind.warning is not None else ""
            if warning:
                warnings[i] = warning
            mark = 0 if kind.rank(entry) == 0 else (2 if warning else 1)
            cells = [c.value(entry) for c in kind.columns]
            rows.append([kind.status(entry), mark, i, str(entry["test"]), *cells])
        data[kind.key] = {
            "right": [c.right for c in kind.columns],
            "wide": [c.width == 0 for c in kind.columns],
            "rows": rows,
            "warnings": warnings,
            "details": {
                f"{kind.key}-{i}": details(kind, f"{kind.key}-{i}", records[i], links)
                for i in order
            },
        }
    return data


def _packed(value: Any) -> str:
    """JSON, gzip-compressed (the same bytes for the same value: no time stamp), base64."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode(
        "ascii"
    )


def _unpack(text: str) -> Any:
    """The value :func:`_packed` embedded."""
    return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))


def embedded(page: str, element: str = "fpcheck-report") -> Any:
    """What a page embeds: the report document (``element="fpcheck-report"``) or the view
    the script draws (``"fpcheck-view"``)."""
    start = page.find(f'id="{element}"')
    if start < 0:
        raise InvalidArgument("element", element, "the id of a data element of the page")
    start = page.index(">", start) + 1
    return _unpack(page[start : page.index("<", start)])


def render(document: Mapping[str, Any], folder: Path | None = None) -> str:
    """The page for a report document (``RunReport.to_dict()`` with JSON values only: no
    NaN or infinity); ``folder``: where the page will be, for its links to source files."""
    sections = [kind for kind in (TESTS, *KINDS) if document.get(kind.key)]
    script = Template(_static("report.js")).substitute(
        PAGE_ROWS=PAGE_ROWS, INLINE_DETAILS=INLINE_DETAILS
    )
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>pytest-fpcheck run report</title>",
        f"<style>\n{_static('report.css')}</style></head><body>",
    ]
    parts += _header(document, sections)
    parts += ["<main>"]
    if not sections:
        parts.append('<p class="note">Nothing was collected in this run.</p>')
    for kind in sections:
        parts += _section(kind, document[kind.key])
    parts += _environment(document)
    parts += [
        "</main>",
        '<script type="application/gzip" id="fpcheck-report" data-encoding="base64">'
        f"{_packed(document)}</script>",
        '<script type="application/gzip" id="fpcheck-view" data-encoding="base64">'
        f"{_packed(page_data(document, folder))}</script>",
        f"<script>\n{script}</script>",
        "</body></html>\n",
    ]
    return "\n".join(parts)


# -- pytest-html -----------------------------------------------------------------------------------


def findings_summary(found: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """``2 verdicts: 1 bug, 1 roundoff; 1 appearance: 1 nan``: a test's findings in one line
    (pytest-html's ``fpcheck`` column)."""
    parts = []
    for kind in KINDS:
        statuses = Counter(kind.status(record) for key, record in found if key == kind.key)
        if statuses:
            total = sum(statuses.values())
            noun = kind.noun.replace("_", "-") + ("" if total == 1 else "s")
            by_status = ", ".join(f"{count} {status}" for status, count in statuses.items())
            parts.append(f"{total} {noun}: {by_status}")
    return "; ".join(parts)


def findings_fragment(found: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A test's findings as an HTML fragment for pytest-html's extras: per kind, a table of
    its entries' columns (a verdict's worst element and a loose enclosure's warning below
    it)."""
    out = ['<div class="fpcheck"><b>fpcheck</b>']
    for kind in KINDS:
        records = [record for key, record in found if key == kind.key]
        if not records:
            continue
        head = "".join(f"<th>{escape(c.header)}</th>" for c in kind.columns)
        rows = []
        for record in records:
            cells = "".join(f"<td>{escape(c.value(record))}</td>" for c in kind.columns)
            rows.append(f"<tr>{cells}</tr>")
            below = []
            if kind.key == "verdicts" and isinstance(record.get("worst"), Mapping):
                worst = record["worst"]
                enclosure = (
                    "" if worst.get("lo") is None
                    else f", enclosure=[{exact_html(worst['lo'])}, {exact_html(worst['hi'])}]"
                )  # fmt: skip
                below.append(
                    f"worst at {index_html(worst.get('index'))}: "
                    f"actual={exact_html(worst.get('actual'))}, "
                    f"expected={exact_html(worst.get('expected'))}{enclosure}"
                )
            warning = kind.warning(record) if kind.warning is not None else ""
            if warning:
                below.append(f"&#9888; {escape(warning)}")
            if below:
                rows.append(f'<tr><td colspan="{len(kind.columns)}">{"<br>".join(below)}</td></tr>')
        out.append(f"<p>{escape(kind.title)}</p><table><tr>{head}</tr>{''.join(rows)}</table>")
    out.append("</div>")
    return "".join(out)
