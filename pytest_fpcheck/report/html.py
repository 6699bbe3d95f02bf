"""The run report as one self-contained HTML page (API section 8).

Everything is in the file: the style, the script, the data, and each dual-delta figure (the four
panels of the Dual-Delta paper's section 4.2) as a base64 PNG; the page fetches nothing. It
holds a run header (time, Python, platform, xdist workers, counts), the numeric environment and
settings, then one section per kind of :mod:`~pytest_fpcheck.report.kinds`: a table with a text
filter (every word must occur in the row) and a status filter, and below it one ``<details>``
block per entry with all of its record. Each row's test id links to its block; following a link
opens the block.

The page must stay quick with ten thousand verdicts, where laying out every row or parsing every
details block takes seconds. So the rows are data (one JSON element) that the script lists,
:data:`PAGE_ROWS` at a time, and filters as arrays; a kind with more than
:data:`INLINE_DETAILS` entries keeps its details blocks as HTML text in that data, and the script
inserts a block when a link asks for it. Rows of rank 0 (bugs, worse implementations,
appearances) come first and carry a red mark.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from .kinds import KINDS, Kind, number

__all__ = ["render"]

#: lists longer than this are cut in the details (a dual-delta's per-trial errors, say)
LIST_LIMIT = 16
#: rows a table lists at first, and how many more each "list more" adds
PAGE_ROWS = 500
#: up to this many entries, a kind's details blocks are in the page; beyond, the script makes
#: each block when a link asks for it
INLINE_DETAILS = 200

_STYLE = """
:root { --fg: #1d2125; --muted: #5c6670; --line: #d8dde2; --head: #f3f5f7;
  --bug: #b3261e; --warn: #9a6700; --ok: #1a7f37; font-family: system-ui, sans-serif; }
body { color: var(--fg); margin: 0 auto; max-width: 1400px; padding: 1rem 1.5rem 4rem;
  font-size: 14px; line-height: 1.4; }
h1 { font-size: 1.5rem; margin: 0.2rem 0; }
h2 { font-size: 1.15rem; margin: 2rem 0 0.5rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: 1.2rem 0 0.4rem; }
.meta { color: var(--muted); margin: 0 0 0.6rem; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 0.4rem 1.2rem; }
table { border-collapse: collapse; margin: 0.3rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: 2px 8px; text-align: left;
  vertical-align: top; }
.rows td { white-space: nowrap; }
.rows td.test { white-space: normal; overflow-wrap: anywhere; min-width: 16rem; }
.rows tr.first td.test { border-left: 3px solid var(--bug); }
th { background: var(--head); position: sticky; top: 0; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr[hidden] { display: none; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
pre { background: var(--head); padding: 0.5rem; overflow-x: auto; margin: 0.3rem 0; }
.env { display: flex; flex-wrap: wrap; gap: 0 2rem; }
.filters { display: flex; gap: 0.6rem; align-items: center; margin: 0.4rem 0; }
.filters input { width: 22rem; }
.shown { color: var(--muted); }
.status { font-weight: 600; }
.s-bug, .s-custom_less_accurate, .s-nan, .s-inf, .s-div0, .s-not-isolated { color: var(--bug); }
.s-close, .s-custom_less_stable { color: var(--warn); }
.s-roundoff, .s-exact, .s-equivalent, .s-custom_more_accurate { color: var(--ok); }
details.entry { border: 1px solid var(--line); border-radius: 4px; margin: 0.3rem 0;
  padding: 0.2rem 0.6rem; content-visibility: auto; contain-intrinsic-size: auto 1.8rem; }
details.entry[open] { background: #fbfcfd; }
details.entry:target { outline: 2px solid #0969da; }
details.entry summary { cursor: pointer; }
.plot { max-width: 100%; height: auto; display: block; margin: 0.4rem 0; }
.note { color: var(--muted); font-size: 12.5px; }
"""

_SCRIPT = """
(function () {
  var DATA = JSON.parse(document.getElementById('fpcheck-data').textContent);
  var PAGE = %(page)d;
  var tables = {};
  function drawRow(key, row) {
    var tr = document.createElement('tr'), kind = DATA[key];
    tr.dataset.s = row[0];
    if (row[1]) tr.className = 'first';
    var td = tr.insertCell(), a = document.createElement('a');
    td.className = 'test';
    a.href = '#' + key + '-' + row[2];
    a.textContent = row[3];
    td.appendChild(a);
    for (var c = 4; c < row.length; c++) {
      td = tr.insertCell();
      td.textContent = row[c];
      if (kind.right[c - 4]) td.className = 'num';
      else if (row[c] === row[0]) td.className = 'status s-' + row[0].replace(/[^\\w-]/g, '-');
    }
    return tr;
  }
  function draw(key) {
    var t = tables[key], fragment = document.createDocumentFragment();
    var end = Math.min(t.matches.length, t.limit);
    for (var i = 0; i < end; i++) fragment.appendChild(drawRow(key, t.matches[i].row));
    t.body.replaceChildren(fragment);
    var total = t.rows.length, found = t.matches.length;
    t.shown.textContent = found + ' of ' + total + ' shown' +
      (found > end ? ' (the first ' + end + ' listed)' : '');
    t.more.hidden = found <= end;
  }
  function apply(key) {
    var t = tables[key];
    var words = t.bar.querySelector('.q').value.toLowerCase().split(/\\s+/).filter(Boolean);
    var status = t.bar.querySelector('.s').value;
    t.matches = t.rows.filter(function (item) {
      if (status && item.row[0] !== status) return false;
      for (var w = 0; w < words.length; w++) if (item.text.indexOf(words[w]) < 0) return false;
      return true;
    });
    t.limit = PAGE;
    draw(key);
  }
  Object.keys(DATA).forEach(function (key) {
    var bar = document.querySelector('.filters[data-table="table-' + key + '"]');
    var rows = DATA[key].rows.map(function (row) {
      return {row: row, text: row.slice(3).join(' ').toLowerCase()};
    });
    var t = tables[key] = {bar: bar, rows: rows, matches: rows, limit: PAGE,
      body: document.getElementById('table-' + key).tBodies[0],
      shown: bar.querySelector('.shown'), more: document.getElementById('more-' + key)};
    bar.addEventListener('input', function () { apply(key); });
    bar.addEventListener('change', function () { apply(key); });
    t.more.addEventListener('click', function () { t.limit += PAGE; draw(key); });
    draw(key);
  });
  function open(id) {
    var target = document.getElementById(id);
    var key = id.slice(0, id.lastIndexOf('-')), kind = DATA[key];
    if (!target && kind && kind.details && kind.details[id]) {
      document.getElementById('details-' + key).insertAdjacentHTML('afterbegin', kind.details[id]);
      target = document.getElementById(id);
    }
    if (target && target.tagName === 'DETAILS') { target.open = true; target.scrollIntoView(); }
  }
  document.addEventListener('click', function (event) {
    var link = event.target.closest && event.target.closest('a[href^="#"]');
    if (link) open(decodeURIComponent(link.getAttribute('href').slice(1)));
  });
  window.addEventListener('hashchange', function () {
    open(decodeURIComponent(location.hash.slice(1)));
  });
  if (location.hash) open(decodeURIComponent(location.hash.slice(1)));
})();
"""


def _number_html(value: Any) -> str:
    return escape(number(value, ".4g"))


def _image(path: Any) -> str:
    """A PNG file as an embedded image, or why there is none."""
    if not path:
        return '<span class="note">no figure (matplotlib is not installed)</span>'
    file = Path(str(path))
    if not file.is_file():
        return f'<span class="note">figure {escape(str(path))} is missing</span>'
    data = base64.b64encode(file.read_bytes()).decode("ascii")
    return f'<img class="plot" alt="figure {escape(file.name)}" src="data:image/png;base64,{data}">'


def _table_of_mappings(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    columns: list[str] = []
    for _, row in rows:
        columns.extend(key for key in row if key not in columns)
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    label = "<th></th>" if any(name for name, _ in rows) else ""
    body = []
    for name, row in rows:
        cells = "".join(f"<td>{_value(row.get(c), key=c)}</td>" for c in columns)
        first = f"<th>{escape(name)}</th>" if label else ""
        body.append(f"<tr>{first}{cells}</tr>")
    return f"<table><tr>{label}{head}</tr>{''.join(body)}</table>"


def _value(value: Any, *, key: str = "") -> str:
    """A record value as HTML: mappings of mappings and lists of mappings as tables, other
    mappings as two-column tables, long lists cut, multi-line text preformatted."""
    if key == "plot":
        return _image(value)
    if isinstance(value, Mapping):
        if value and all(isinstance(v, Mapping) for v in value.values()):
            return _table_of_mappings([(str(k), v) for k, v in value.items()])
        return _fields(value)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Mapping) for v in value):
            return _table_of_mappings([("", v) for v in value])
        shown = ", ".join(_value(v) for v in value[:LIST_LIMIT])
        more = f", ... ({len(value)} values)" if len(value) > LIST_LIMIT else ""
        return f"[{shown}{more}]"
    if isinstance(value, str) and "\n" in value:
        return f"<pre>{escape(value)}</pre>"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return _number_html(value)


def _fields(record: Mapping[str, Any], skip: Sequence[str] = ()) -> str:
    rows = "".join(
        f"<tr><th>{escape(str(key))}</th><td>{_value(value, key=str(key))}</td></tr>"
        for key, value in record.items()
        if key not in skip
    )
    return f"<table>{rows}</table>"


def _header(document: Mapping[str, Any]) -> list[str]:
    run = document.get("run", {})
    workers = run.get("workers", 0)
    where = f"{workers} xdist workers" if workers else "one process"
    schema = document.get("schema", {})
    out = [
        "<header><h1>pytest-fpcheck run report</h1>",
        f'<p class="meta">{escape(str(run.get("created", "")))} &middot; Python '
        f"{escape(str(run.get('python', '')))} &middot; {escape(str(run.get('platform', '')))}"
        f" &middot; {where} &middot; schema {escape(str(schema.get('name', '')))} version "
        f"{escape(str(schema.get('version', '')))}</p>",
        "<nav><ul>",
    ]
    counts = document.get("counts", {})
    for kind in KINDS:
        entries = document.get(kind.key, [])
        by_status = counts.get(kind.key, {})
        detail = ", ".join(
            f'<span class="status s-{_css(status)}">{count} {escape(status)}</span>'
            for status, count in by_status.items()
        )
        out.append(
            f'<li><a href="#{kind.key}">{escape(kind.title)}</a>: {len(entries)}'
            f"{' (' + detail + ')' if detail else ''}</li>"
        )
    out.append('<li><a href="#environment">numeric environment</a></li></ul></nav></header>')
    return out


def _environment(document: Mapping[str, Any]) -> list[str]:
    environment = document.get("environment", {})
    out = ['<section id="environment"><h2>Numeric environment</h2><div class="env">']
    groups = [(str(name), values) for name, values in environment.items()]
    groups.append(("settings", document.get("settings", {})))
    for name, values in groups:
        body = _fields(values) if isinstance(values, Mapping) else _value(values)
        out.append(f"<div><h3>{escape(name)}</h3>{body}</div>")
    out.append("</div></section>")
    return out


def _css(status: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in status)


def _section(kind: Kind, entries: Sequence[Mapping[str, Any]]) -> tuple[list[str], Any]:
    """The section's HTML and its data for the script (None when it has no entries)."""
    key = kind.key
    out = [f'<section id="{key}"><h2>{escape(kind.title[:1].upper() + kind.title[1:])}</h2>']
    if not entries:
        out.append('<p class="note">none in this run</p></section>')
        return out, None
    statuses = sorted({kind.status(entry) for entry in entries})
    options = "".join(f'<option value="{escape(s)}">{escape(s)}</option>' for s in statuses)
    out.append(
        f'<div class="filters" data-table="table-{key}">'
        f'<input class="q" type="search" placeholder="filter: words that must all occur">'
        f'<select class="s"><option value="">every status</option>{options}</select>'
        f'<span class="shown"></span></div>'
    )
    head = "".join(f"<th>{escape(c.header)}</th>" for c in kind.columns)
    out.append(
        f'<table class="rows" id="table-{key}"><thead><tr><th>test</th>{head}</tr></thead>'
        f'<tbody></tbody></table><button id="more-{key}" hidden>list more</button>'
    )
    if kind.note:
        out.append(f'<p class="note">{escape(kind.note)}</p>')
    order = sorted(range(len(entries)), key=lambda i: (kind.rank(entries[i]), entries[i]["test"]))
    rows = [
        [
            kind.status(entries[i]),
            kind.rank(entries[i]) == 0,
            i,
            str(entries[i]["test"]),
            *(c.value(entries[i]) for c in kind.columns),
        ]
        for i in order
    ]
    data: dict[str, Any] = {"right": [c.right for c in kind.columns], "rows": rows}
    out.append(f'<h3>Details</h3><div id="details-{key}">')
    if len(entries) <= INLINE_DETAILS:
        out.extend(_details(kind, f"{key}-{i}", entries[i]) for i in order)
    else:  # made when a link asks for them: thousands of blocks would slow the page down
        data["details"] = {f"{key}-{i}": _details(kind, f"{key}-{i}", entries[i]) for i in order}
    out.append("</div></section>")
    return out, data


def _details(kind: Kind, anchor: str, entry: Mapping[str, Any]) -> str:
    status = kind.status(entry)
    texts = "".join(
        f"<h4>{escape(name)}</h4><pre>{escape(str(entry[name]))}</pre>"
        for name in kind.texts
        if entry.get(name)
    )
    skip = ("test", *kind.texts, *kind.hidden)
    ordered = {name: entry[name] for name in kind.first if name in entry}
    ordered.update((name, value) for name, value in entry.items() if name not in ordered)
    return (
        f'<details class="entry" id="{anchor}"><summary><span class="status s-{_css(status)}">'
        f"{escape(status)}</span> {escape(str(entry['test']))}</summary>"
        f"{_fields(ordered, skip)}{texts}</details>"
    )


def _script_json(value: Any) -> str:
    """JSON that can sit inside a <script> element: no "<" (so no "</script>") in it."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def render(document: Mapping[str, Any]) -> str:
    """The page for a report document (``RunReport.to_dict()``)."""
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>pytest-fpcheck run report</title>",
        f"<style>{_STYLE}</style></head><body>",
    ]
    parts += _header(document)
    parts += ["<main>"]
    parts += _environment(document)
    data = {}
    for kind in KINDS:
        html, section_data = _section(kind, document.get(kind.key, []))
        parts += html
        if section_data is not None:
            data[kind.key] = section_data
    parts += [
        "</main>",
        f'<script type="application/json" id="fpcheck-data">{_script_json(data)}</script>',
        f"<script>{_SCRIPT % {'page': PAGE_ROWS}}</script></body></html>\n",
    ]
    return "\n".join(parts)
