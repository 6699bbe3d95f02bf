"""The run report as one self-contained HTML page (API section 8).

Everything is in the file: the style, the script, the data, each dual-delta figure (the four
panels of the Dual-Delta paper's section 4.2) as a base64 PNG and each verdict's plot as SVG; the
page fetches nothing. Top to bottom: the run's totals (tests by outcome, results by status),
then one section per kind that has entries, the run's tests first, then the numeric environment
and the settings. Each section is a table that sorts by any column (a click on its header) with
a text filter (every word must occur in the row) and a status filter; a row's test id links to
its details, which say what the record holds in words and numbers: a verdict's worst element,
first offenders, allclose tolerances, provenance (with links to the source lines) and notes,
under human labels (:data:`LABELS`), and a plot of its elements where one helps; a
module-by-module comparison's calls in execution order, the first bug's row highlighted.

How a verdict's details read is chosen by its kind (:data:`VERDICT_PARTS`: a kind names the
parts it shows, in order); a kind without an entry there shows the default parts, and any
record field no part shows is listed at the end under its label, so a new field or a new
kind is shown before anyone writes a part for it. An entry that reads better than it is or
decides nothing (:attr:`Kind.warning`: a loose round-off enclosure, an inconclusive verdict)
carries a warning mark in its row and a warning box in its details.

The page must stay small and quick with ten thousand verdicts. The document (the JSON report,
``docs/report-schema.json``) and the view (each table's rows and each entry's details, as HTML
text) are embedded gzip-compressed and base64-encoded (``<script type="application/gzip">``);
the script inflates them with the browser's ``DecompressionStream``, lists :data:`PAGE_ROWS`
rows at a time, filters and sorts them as arrays, and inserts a details block when a link asks
for it (every block at once for a kind of at most :data:`INLINE_DETAILS` entries).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from .kinds import KINDS, OUTCOMES, TESTS, Kind, number, shape_text, verdict_warning

__all__ = [
    "LABELS",
    "VERDICT_PARTS",
    "embedded",
    "findings_fragment",
    "findings_summary",
    "page_data",
    "render",
    "scatter_svg",
]

#: lists longer than this are cut in the details (a dual-delta's per-trial errors, say)
LIST_LIMIT = 16
#: rows a table lists at first, and how many more each "list more" adds
PAGE_ROWS = 500
#: up to this many entries, a kind's details blocks are all placed below its table at load
INLINE_DETAILS = 200

#: what a record field is called on the page (a field not named here: its key, spaced)
LABELS: dict[str, str] = {
    "kind": "verdict",
    "outside": "elements outside",
    "total": "elements compared",
    "dtype": "format",
    "shape": "shape",
    "two_sided": "both sides bounded",
    "fallback": "no bounds (rtol/atol decided)",
    "worst_index": "worst element",
    "worst_excess": "worst excess",
    "tightness_ulps": "median radius (ULP)",
    "provenance": "provenance",
    "notes": "notes",
    "allclose_passed": "plain allclose passed",
    "nonfinite_mismatches": "NaN/Inf positions differing",
    "caught": "caught by the test (pytest.raises)",
    "resolution": "resolution (smallest relative deviation it would flag)",
    "factor2_fraction": "share of elements whose enclosure rejects a factor 2",
    "unbounded": "elements with an unbounded enclosure",
    "max_resolution": "resolution threshold (max_resolution)",
    "inconclusive_reason": "why inconclusive",
    "widest": "widest operation",
    "module": "module call",
    "module_class": "module class",
    "call": "call number",
    "label": "tensor",
    "first_bug": "first bug",
    "outcome": "outcome",
    "duration": "duration (s)",
    "reason": "reason",
    "when": "failing phase",
    "accuracy": "accuracy",
    "stability": "stability",
    "mean_ratio": "mean error ratio (custom / reference)",
    "accuracy_test": "test that decided accuracy",
    "n": "trials",
    "summary": "summary",
    "count": "values",
    "calls": "calls",
    "module_path": "module",
    "source_line": "source line",
    "searches": "configurations searched",
    "enhance": "enhanced to",
    "in_dtype": "input format",
    "out_dtype": "output format",
    "products_exact": "exact products",
    "block_width": "terms fused per addition",
    "extra_bits": "extra alignment bits",
    "subnormal_inputs": "subnormal inputs kept",
    "subnormal_outputs": "subnormal outputs kept",
    "fanout": "largest fan-out",
    "depth": "depth",
}

_STYLE = """
:root { --fg: #1d2125; --muted: #5c6670; --line: #d8dde2; --head: #f3f5f7;
  --bug: #b3261e; --warn: #9a6700; --ok: #1a7f37; --info: #0a58ca;
  font-family: system-ui, sans-serif; }
body { color: var(--fg); margin: 0 auto; max-width: 1400px; padding: 1rem 1.5rem 4rem;
  font-size: 14px; line-height: 1.4; }
h1 { font-size: 1.5rem; margin: 0.2rem 0; }
h2 { font-size: 1.15rem; margin: 2rem 0 0.5rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: 1.2rem 0 0.4rem; }
h4 { font-size: 0.95rem; margin: 0.8rem 0 0.3rem; }
.meta { color: var(--muted); margin: 0 0 0.6rem; }
.totals { display: flex; flex-wrap: wrap; gap: 0.3rem 1.4rem; margin: 0.6rem 0;
  font-size: 1.05rem; }
nav ul { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 0.4rem 1.2rem; }
table { border-collapse: collapse; margin: 0.3rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: 2px 8px; text-align: left;
  vertical-align: top; }
.rows td { white-space: nowrap; }
.rows td.test { white-space: normal; overflow-wrap: anywhere; min-width: 16rem; }
.rows td.wide { white-space: normal; }
.rows tr.first td.test { border-left: 3px solid var(--bug); }
.rows tr.warned td.test { border-left: 3px solid var(--warn); }
.rows th { cursor: pointer; user-select: none; }
.rows th[aria-sort=ascending]::after { content: " \\25B2"; }
.rows th[aria-sort=descending]::after { content: " \\25BC"; }
th { background: var(--head); position: sticky; top: 0; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
pre { background: var(--head); padding: 0.5rem; overflow-x: auto; margin: 0.3rem 0;
  white-space: pre-wrap; overflow-wrap: anywhere; max-height: 32rem; overflow-y: auto; }
.env { display: flex; flex-wrap: wrap; gap: 0 2rem; }
.filters { display: flex; gap: 0.6rem; align-items: center; margin: 0.4rem 0; }
.filters input { width: 22rem; }
.shown { color: var(--muted); }
.status { font-weight: 600; }
.s-bug, .s-failed, .s-error, .s-xpassed, .s-custom_less_accurate, .s-nan, .s-inf, .s-div0,
.s-not-isolated { color: var(--bug); }
.s-close, .s-inconclusive, .s-custom_less_stable, .s-subnormal { color: var(--warn); }
.s-expected-bug, .s-xfailed, .s-skipped { color: var(--info); }
.s-roundoff, .s-exact, .s-passed, .s-equivalent, .s-custom_more_accurate { color: var(--ok); }
.mark { color: var(--warn); font-weight: 700; }
.warning { border-left: 4px solid var(--warn); background: #fff8e5; padding: 0.3rem 0.6rem;
  margin: 0.4rem 0; }
.said { margin: 0.3rem 0; }
details.entry { border: 1px solid var(--line); border-radius: 4px; margin: 0.3rem 0;
  padding: 0.2rem 0.6rem; content-visibility: auto; contain-intrinsic-size: auto 1.8rem; }
details.entry[open] { background: #fbfcfd; }
details.entry:target { outline: 2px solid #0969da; }
details.entry summary { cursor: pointer; }
.plot { max-width: 100%; height: auto; display: block; margin: 0.4rem 0; }
table.calls tr.first-bug td { background: #fde7e9; font-weight: 600; }
.note { color: var(--muted); font-size: 12.5px; }
"""

_SCRIPT = """
(function () {
  var PAGE = %(page)d, INLINE = %(inline)d, tables = {}, VIEW = null;
  function inflate(id) {
    var text = document.getElementById(id).textContent.trim();
    var bytes = Uint8Array.from(atob(text), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text().then(JSON.parse);
  }
  function drawRow(key, row) {
    var tr = document.createElement('tr'), kind = VIEW[key];
    tr.dataset.s = row[0];
    if (row[1] === 0) tr.className = 'first';
    else if (row[1] === 2) tr.className = 'warned';
    var td = tr.insertCell(), a = document.createElement('a');
    td.className = 'test';
    a.href = '#' + key + '-' + row[2];
    a.textContent = row[3];
    td.appendChild(a);
    for (var c = 4; c < row.length; c++) {
      td = tr.insertCell();
      td.textContent = row[c];
      if (kind.right[c - 4]) td.className = 'num';
      else if (c === 4) {
        td.className = 'status s-' + row[0].replace(/[^\\w-]/g, '-');
        if (row[1] === 2) {
          var mark = document.createElement('span');
          mark.className = 'mark';
          mark.title = kind.warnings[row[2]];
          mark.textContent = ' \\u26A0';
          td.appendChild(mark);
        }
      } else if (kind.wide[c - 4]) td.className = 'wide';
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
  function sortKey(value, numeric) {
    if (!numeric) return value.toLowerCase();
    var x = parseFloat(value);
    return isNaN(x) ? (value === 'inf' ? Infinity : -Infinity) : x;
  }
  function order(key) {
    var t = tables[key];
    if (t.column < 0) {
      t.matches.sort(function (p, q) { return p.at - q.at; });
      return;
    }
    var c = t.column, numeric = VIEW[key].right[c - 4], sign = t.descending ? -1 : 1;
    t.matches.sort(function (p, q) {
      var x = sortKey(p.row[c], numeric), y = sortKey(q.row[c], numeric);
      return x < y ? -sign : x > y ? sign : p.at - q.at;
    });
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
    order(key);
    t.limit = PAGE;
    draw(key);
  }
  function sortBy(key, th) {
    var t = tables[key], c = th.cellIndex === 0 ? 3 : th.cellIndex + 3;
    t.descending = t.column === c ? !t.descending : false;
    t.column = c;
    th.parentNode.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', t.descending ? 'descending' : 'ascending');
    order(key);
    draw(key);
  }
  function setUp(key) {
    var bar = document.querySelector('.filters[data-table="table-' + key + '"]');
    var rows = VIEW[key].rows.map(function (row, at) {
      return {row: row, at: at, text: row.slice(3).join(' ').toLowerCase()};
    });
    var table = document.getElementById('table-' + key);
    var t = tables[key] = {bar: bar, rows: rows, matches: rows.slice(), limit: PAGE,
      column: -1, descending: false, body: table.tBodies[0],
      shown: bar.querySelector('.shown'), more: document.getElementById('more-' + key)};
    bar.addEventListener('input', function () { apply(key); });
    bar.addEventListener('change', function () { apply(key); });
    table.tHead.addEventListener('click', function (event) {
      var th = event.target.closest('th');
      if (th) sortBy(key, th);
    });
    t.more.addEventListener('click', function () { t.limit += PAGE; draw(key); });
    draw(key);
    var details = VIEW[key].details, ids = Object.keys(details);
    if (ids.length <= INLINE) {
      var html = VIEW[key].rows.map(function (row) { return details[key + '-' + row[2]]; });
      document.getElementById('details-' + key).insertAdjacentHTML('beforeend', html.join(''));
    }
  }
  function open(id) {
    var target = document.getElementById(id);
    var key = id.slice(0, id.lastIndexOf('-')), kind = VIEW && VIEW[key];
    if (!target && kind && kind.details[id]) {
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
  inflate('fpcheck-view').then(function (view) {
    VIEW = view;
    Object.keys(VIEW).forEach(setUp);
    document.body.dataset.ready = 'yes';
    if (location.hash) open(decodeURIComponent(location.hash.slice(1)));
  });
})();
"""

# -- values ----------------------------------------------------------------------------------------


def _label(key: str) -> str:
    return LABELS.get(key, key.replace("_", " "))


def _css(status: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in status)


def _status(status: str) -> str:
    return f'<span class="status s-{_css(status)}">{escape(status)}</span>'


def _exact(value: Any) -> str:
    """A value in full: a float as its shortest round-trip text (``65.125``, ``1e-05``)."""
    if value is None:
        return "-"
    return escape(repr(value) if isinstance(value, float) else str(value))


def _number_html(value: Any) -> str:
    return escape(number(value, ".4g"))


def _index(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(i) for i in value) + "]"
    return "-" if value is None else escape(str(value))


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
    head = "".join(f"<th>{escape(_label(str(c)))}</th>" for c in columns)
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


def _fields(record: Mapping[str, Any], skip: Sequence[str] = (), *, labels: bool = True) -> str:
    """A two-column table of ``record``'s fields, under their labels (``labels``) or keys."""
    name = _label if labels else str
    rows = "".join(
        f"<tr><th>{escape(name(str(key)))}</th><td>{_value(value, key=str(key))}</td></tr>"
        for key, value in record.items()
        if key not in skip
    )
    return f"<table>{rows}</table>" if rows else ""


# -- the verdict's plot ----------------------------------------------------------------------------

_PLOT_WIDTH, _PLOT_HEIGHT, _LEFT, _BOTTOM, _TOP, _RIGHT = 300, 240, 46, 34, 10, 12


def scatter_svg(points: Sequence[Sequence[float]], total: int | None = None) -> str:
    """``|actual - expected|`` against the enclosure radius, per element, on log-log axes of
    one range (so the dashed diagonal is where the difference equals the radius); elements
    outside the enclosure as red crosses, the others as green dots; a zero on either axis sits
    on that axis' edge. ``points`` are ``[radius, difference, outside]``."""
    positive = [v for point in points for v in point[:2] if v > 0]
    if not positive:
        return ""
    low = math.floor(math.log10(min(positive)))
    high = max(math.ceil(math.log10(max(positive))), low + 1)
    inner_w = _PLOT_WIDTH - _LEFT - _RIGHT
    inner_h = _PLOT_HEIGHT - _TOP - _BOTTOM

    def x(value: float) -> float:
        exponent = math.log10(value) if value > 0 else low
        return _LEFT + (exponent - low) / (high - low) * inner_w

    def y(value: float) -> float:
        exponent = math.log10(value) if value > 0 else low
        return _TOP + inner_h - (exponent - low) / (high - low) * inner_h

    step = max(1, math.ceil((high - low) / 6))
    ticks = []
    for exponent in range(low, high + 1, step):
        px, py = x(10.0**exponent), y(10.0**exponent)
        ticks.append(
            f'<text x="{px:.0f}" y="{_PLOT_HEIGHT - _BOTTOM + 13}" text-anchor="middle">'
            f"1e{exponent}</text>"
            f'<text x="{_LEFT - 4}" y="{py + 4:.0f}" text-anchor="end">1e{exponent}</text>'
            f'<path d="M{_LEFT} {py:.0f}h{inner_w}M{px:.0f} {_TOP}v{inner_h}" stroke="#eef0f2"/>'
        )
    inside = "".join(
        f"M{x(r):.1f} {y(d):.1f}h0" for r, d, outside in points if not outside
    )  # round caps draw a dot
    crosses = "".join(
        f"M{x(r) - 3:.1f} {y(d) - 3:.1f}l6 6m0 -6l-6 6" for r, d, outside in points if outside
    )
    shown = f"{len(points)} of {total} elements" if total else f"{len(points)} elements"
    return (
        f'<svg class="plot" role="img" width="{_PLOT_WIDTH}" height="{_PLOT_HEIGHT}" '
        f'viewBox="0 0 {_PLOT_WIDTH} {_PLOT_HEIGHT}" font-size="10" '
        f'font-family="system-ui, sans-serif" fill="#5c6670">'
        f"<title>|actual - expected| against the enclosure radius, {shown}; "
        f"red crosses lie outside the enclosure</title>{''.join(ticks)}"
        f'<rect x="{_LEFT}" y="{_TOP}" width="{inner_w}" height="{inner_h}" fill="none" '
        f'stroke="#5c6670"/>'
        f'<path d="M{x(10.0**low):.0f} {y(10.0**low):.0f}L{x(10.0**high):.0f} '
        f'{y(10.0**high):.0f}" stroke="#5c6670" stroke-dasharray="4 3"/>'
        f'<path d="{inside}" stroke="#1a7f37" stroke-width="5" stroke-linecap="round" '
        f'stroke-opacity="0.6"/>'
        f'<path d="{crosses}" stroke="#b3261e" stroke-width="1.6"/>'
        f'<text x="{_LEFT + inner_w / 2:.0f}" y="{_PLOT_HEIGHT - 4}" text-anchor="middle">'
        f"enclosure radius</text>"
        f'<text transform="translate(11 {_TOP + inner_h / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">|actual - expected|</text></svg>'
    )


# -- a verdict's details, part by part -------------------------------------------------------------

_Part = Callable[[Mapping[str, Any], "_Links"], str]


class _Links:
    """Where the page's links go: source files (relative to the page's folder, from the
    rootdir-relative paths the records hold) and the details of a test and of its entries."""

    def __init__(
        self,
        rootdir: str | None,
        folder: Path | None,
        tests: Mapping[str, str],
        entries: Mapping[str, list[tuple[str, str, str]]],
    ) -> None:
        self.rootdir = rootdir
        self.folder = folder
        self.tests = tests  # test id -> anchor of its details
        self.entries = entries  # test id -> [(anchor, kind title, status)]

    def source(self, path: Any, line: Any, text: str) -> str:
        """``text`` linking to ``path`` (relative to the rootdir) at ``line``; plain text when
        the page cannot know where the file is."""
        if not path or self.rootdir is None or self.folder is None:
            return escape(text)
        target = os.path.relpath(Path(self.rootdir) / str(path), self.folder)
        anchor = f"#L{line}" if line else ""
        href = escape(Path(target).as_posix() + anchor)
        return f'<a href="{href}" title="{escape(str(path))}">{escape(text)}</a>'

    def test(self, test_id: str) -> str:
        anchor = self.tests.get(test_id)
        if anchor is None:
            return escape(test_id)
        return f'<a href="#{anchor}">{escape(test_id)}</a>'


def _said(text: str) -> str:
    return f'<p class="said">{text}</p>'


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} elements ({100 * part / whole:.3g}%)" if whole else f"{part}"


def _headline(entry: Mapping[str, Any], links: _Links) -> str:
    kind, dtype = str(entry["kind"]), escape(str(entry["dtype"]))
    outside, total = int(entry["outside"]), int(entry["total"])
    shape = shape_text(entry.get("shape"))
    compared = f"{total} elements ({shape}) of {dtype}"
    if kind == "bug" and entry.get("fallback"):
        text = (
            f"{_share(outside, total)} lie outside rtol/atol. No round-off bounds were recorded "
            f"(arrays computed outside tracking), so this is a tolerance failure, not a proof."
        )
    elif kind == "bug":
        where = (
            "the enclosures of actual and expected are disjoint"
            if entry.get("two_sided")
            else "the expected value lies outside the enclosure of actual"
        )
        text = f"A bug (Type-II): at {_share(outside, total)}, {where}."
    elif kind == "roundoff":
        text = (
            f"Round-off (Type-I): every expected value of the {compared} lies inside the enclosure."
        )
    elif kind == "close":
        text = (
            f"Within rtol/atol at all {compared}, but unproven: no round-off bounds were "
            f"recorded (arrays computed outside tracking)."
        )
    elif kind == "exact":
        text = f"Exact: actual equals expected at all {compared}."
    elif kind == "inconclusive":
        text = (
            f"Inconclusive: at the {compared}, the enclosure is too wide to separate round-off "
            f"from a bug."
        )
    else:
        text = f"{escape(kind)}: {outside} of {total} elements outside."
    if entry.get("caught"):
        text += " The test caught it (<code>pytest.raises</code>): an expected bug."
    return _said(text)


def _warning(entry: Mapping[str, Any], links: _Links) -> str:
    text = verdict_warning(entry)
    return f'<div class="warning">&#9888; {escape(text)}</div>' if text else ""


def _tightness(entry: Mapping[str, Any], links: _Links) -> str:
    radius = entry.get("tightness_ulps")
    if radius is None:
        return ""
    return _said(
        f"Median radius of the enclosure: {_number_html(radius)} ULP of "
        f"{escape(str(entry['dtype']))}."
    )


def _element_table(rows: Sequence[Mapping[str, Any]], excess: Mapping[str, Any] | None) -> str:
    head = "<tr><th>index</th><th>actual</th><th>expected</th><th>enclosure of actual</th>"
    head += "<th>|actual - expected|</th>"
    if excess is not None:
        head += "<th>outside by</th><th>in radii</th><th>in ULPs</th>"
    body = []
    for row in rows:
        lo, hi = row.get("lo"), row.get("hi")
        enclosure = "none recorded" if lo is None else f"[{_exact(lo)}, {_exact(hi)}]"
        actual, expected = row.get("actual"), row.get("expected")
        difference = (
            abs(actual - expected)
            if isinstance(actual, float) and isinstance(expected, float)
            else None
        )
        cells = [
            _index(row.get("index")),
            _exact(actual),
            _exact(expected),
            enclosure,
            _number_html(difference),
        ]
        if excess is not None:
            cells += [_number_html(excess.get(k)) for k in ("absolute", "radii", "ulps")]
        body.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return f"<table>{head}</tr>{''.join(body)}</table>"


def _worst(entry: Mapping[str, Any], links: _Links) -> str:
    worst = entry.get("worst")
    if not isinstance(worst, Mapping):
        return ""
    excess = entry.get("worst_excess")
    return "<h4>Worst element</h4>" + _element_table(
        [worst], excess if isinstance(excess, Mapping) else None
    )


def _offenders(entry: Mapping[str, Any], links: _Links) -> str:
    offenders = entry.get("offenders")
    if not offenders:
        return ""
    more = int(entry.get("outside", 0)) - len(offenders)
    tail = f'<p class="note">and {more} more outside</p>' if more > 0 else ""
    return f"<h4>First offenders</h4>{_element_table(offenders, None)}{tail}"


def _plot(entry: Mapping[str, Any], links: _Links) -> str:
    points = entry.get("points")
    if not points:
        return ""
    svg = scatter_svg(points, entry.get("total"))
    return f"<h4>Error against bound, per element</h4>{svg}" if svg else ""


def _allclose(entry: Mapping[str, Any], links: _Links) -> str:
    close = entry.get("allclose")
    if not isinstance(close, Mapping):
        return ""
    mismatched, total = close.get("mismatched", 0), close.get("total", 0)
    outcome = "passed" if not mismatched else f"failed at {_share(int(mismatched), int(total))}"
    text = (
        f"Plain allclose with rtol={_exact(close.get('rtol'))}, atol={_exact(close.get('atol'))}: "
        f"{_status('passed' if not mismatched else 'failed')} ({outcome}); greatest absolute "
        f"difference {_number_html(close.get('greatest_absolute'))} at "
        f"{_index(close.get('greatest_absolute_index'))}, greatest relative "
        f"{_number_html(close.get('greatest_relative'))} at "
        f"{_index(close.get('greatest_relative_index'))}."
    )
    return f"<h4>allclose</h4>{_said(text)}"


def _provenance(entry: Mapping[str, Any], links: _Links) -> str:
    sites = entry.get("provenance_sites")
    if not sites:
        text = entry.get("provenance")
        return f"<h4>Provenance</h4>{_said(escape(str(text)))}" if text else ""
    rows = []
    for site in sites:
        if "op" not in site:
            rows.append(f'<tr><td colspan="4">{escape(str(site["site"]))}</td></tr>')
            continue
        where = ""
        if site.get("file"):
            shown = f"{site.get('path') or site['file']}:{site['line']}"
            where = links.source(site.get("path"), site["line"], shown)
        rows.append(
            f"<tr><td><code>{escape(str(site['op']))}</code></td><td>{where}</td>"
            f"<td>{escape(str(site.get('module', '')))}</td>"
            f'<td class="num">{_number_html(site.get("widening"))}</td></tr>'
        )
    return (
        "<h4>Provenance: the operations that widened the enclosure most</h4><table><tr>"
        "<th>operation</th><th>source</th><th>module</th><th>radius it added</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _notes(entry: Mapping[str, Any], links: _Links) -> str:
    notes = entry.get("notes")
    if not notes:
        return ""
    counted = Counter(str(note) for note in notes)
    items = "".join(
        f"<li>{escape(note)}{f' <b>(&times;{count})</b>' if count > 1 else ''}</li>"
        for note, count in counted.items()
    )
    return f"<h4>Notes</h4><ul>{items}</ul>"


#: the fields the parts above show (the rest are listed under their labels)
_SHOWN = frozenset(
    {
        "kind", "outside", "total", "dtype", "shape", "two_sided", "fallback", "caught",
        "tightness_ulps", "worst", "worst_index", "worst_excess", "offenders", "points",
        "allclose", "allclose_passed", "provenance", "provenance_sites", "notes",
        "inconclusive_reason",
    }
)  # fmt: skip

_BOUNDED_PARTS: tuple[_Part, ...] = (
    _headline,
    _warning,
    _tightness,
    _worst,
    _offenders,
    _plot,
    _allclose,
    _provenance,
    _notes,
)
#: the parts of a verdict's details, by verdict kind, in order; a kind not named here (a kind
#: added later, such as "inconclusive") shows :data:`DEFAULT_PARTS`
VERDICT_PARTS: dict[str, tuple[_Part, ...]] = {
    "bug": _BOUNDED_PARTS,
    "roundoff": _BOUNDED_PARTS,
    "close": (_headline, _worst, _offenders, _allclose, _notes),
    "exact": (_headline, _tightness, _allclose, _provenance, _notes),
}
DEFAULT_PARTS = _BOUNDED_PARTS


def _verdict_details(entry: Mapping[str, Any], links: _Links) -> str:
    parts = VERDICT_PARTS.get(str(entry["kind"]), DEFAULT_PARTS)
    rest = {k: v for k, v in entry.items() if k not in _SHOWN and k != "test"}
    other = f"<h4>Other fields</h4>{_fields(rest)}" if rest else ""
    return "".join(part(entry, links) for part in parts) + other


# -- a module-by-module comparison's details -------------------------------------------------------


def _modules_details(entry: Mapping[str, Any], links: _Links) -> str:
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
    warning = verdict_warning(entry)
    out = [_said(said)]
    if warning:
        out.append(f'<div class="warning">&#9888; {escape(warning)}</div>')
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
            _number_html(call.get("index")),
            f'<span style="padding-left:{depth}em">{escape(name)}</span>',
            escape(str(call.get("module_class", ""))),
            _status(str(call.get("kind", "?"))),
            f"{call.get('outside', '-')} / {call.get('total', '-')}",
            _number_html(call.get("resolution")),
            escape(str(call.get("widest") or problem or "")),
        ]
        rows.append(f"<tr{style}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append(f'<table class="calls"><tr>{head}</tr>{"".join(rows)}</table>')
    shown = {"kind", "calls", "first_bug", "counts", "reference", "test"}
    rest = {k: v for k, v in entry.items() if k not in shown}
    if rest:
        out.append(f"<h4>Other fields</h4>{_fields(rest)}")
    return "".join(out)


# -- a test's details ------------------------------------------------------------------------------


def _test_details(entry: Mapping[str, Any], links: _Links) -> str:
    out = []
    location = entry.get("location")
    said = f"{_status(str(entry['outcome']))} in {_number_html(entry.get('duration'))} s"
    if entry.get("when") and entry["when"] != "call":
        said += f", in its {escape(str(entry['when']))}"
    if isinstance(location, Mapping) and location.get("path"):
        shown = f"{location['path']}:{location.get('line') or ''}".rstrip(":")
        said += f", defined at {links.source(location['path'], location.get('line'), shown)}"
    out.append(_said(said + "."))
    if entry["outcome"] == "expected-bug":
        out.append(
            _said(
                "It passed: the round-off check that raised sat inside <code>pytest.raises</code>."
            )
        )
    if entry.get("reason"):
        out.append(_said(f"Reason: {escape(str(entry['reason']))}"))
    found = links.entries.get(str(entry["test"]), [])
    if found:
        items = "".join(
            f'<li><a href="#{anchor}">{escape(title)}</a>: {_status(status)}</li>'
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


def _record_details(kind: Kind) -> Callable[[Mapping[str, Any], _Links], str]:
    def details(entry: Mapping[str, Any], links: _Links) -> str:
        texts = "".join(
            f"<h4>{escape(_label(name))}</h4><pre>{escape(str(entry[name]))}</pre>"
            for name in kind.texts
            if entry.get(name)
        )
        skip = ("test", *kind.texts, *kind.hidden)
        ordered = {name: entry[name] for name in kind.first if name in entry}
        ordered.update((name, value) for name, value in entry.items() if name not in ordered)
        return _fields(ordered, skip) + texts

    return details


_DETAILS: dict[str, Callable[[Mapping[str, Any], _Links], str]] = {
    kind.key: _record_details(kind) for kind in KINDS
}
_DETAILS["verdicts"] = _verdict_details
_DETAILS["modules"] = _modules_details
_DETAILS["tests"] = _test_details


def _details(kind: Kind, anchor: str, entry: Mapping[str, Any], links: _Links) -> str:
    status = kind.status(entry)
    back = "" if kind is TESTS else f'<p class="note">test: {links.test(str(entry["test"]))}</p>'
    return (
        f'<details class="entry" id="{anchor}"><summary>{_status(status)} '
        f"{escape(str(entry['test']))}</summary>{back}{_DETAILS[kind.key](entry, links)}</details>"
    )


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
                f'<span class="status s-{_css(s)}">{n} {escape(s)}</span>'
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
    took = f" &middot; {_number_html(duration)} s" if duration is not None else ""
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
        body = _fields(values, labels=False) if isinstance(values, Mapping) else _value(values)
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
    links = _Links(document.get("run", {}).get("rootdir"), folder, tests, entries)
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
                f"{kind.key}-{i}": _details(kind, f"{kind.key}-{i}", records[i], links)
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
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>pytest-fpcheck run report</title>",
        f"<style>{_STYLE}</style></head><body>",
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
        f"<script>{_SCRIPT % {'page': PAGE_ROWS, 'inline': INLINE_DETAILS}}</script>",
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
                    else f", enclosure=[{_exact(worst['lo'])}, {_exact(worst['hi'])}]"
                )  # fmt: skip
                below.append(
                    f"worst at {_index(worst.get('index'))}: actual={_exact(worst.get('actual'))}"
                    f", expected={_exact(worst.get('expected'))}{enclosure}"
                )
            warning = kind.warning(record) if kind.warning is not None else ""
            if warning:
                below.append(f"&#9888; {escape(warning)}")
            if below:
                rows.append(f'<tr><td colspan="{len(kind.columns)}">{"<br>".join(below)}</td></tr>')
        out.append(f"<p>{escape(kind.title)}</p><table><tr>{head}</tr>{''.join(rows)}</table>")
    out.append("</div>")
    return "".join(out)
