"""A verdict's details on the report page, part by part.

How a verdict's details read is chosen by its kind: :data:`VERDICT_PARTS` maps a verdict kind to
the parts it shows, in order (a sentence saying what was found, a warning, the enclosure's
median radius, the worst element, the first offenders, the plot, what plain allclose said, the
provenance, the notes); a kind not named there shows :data:`DEFAULT_PARTS`. A part is a function
of the record and the page's :class:`~pytest_fpcheck.report.markup.Links` that returns HTML, or
nothing when the record has nothing for it. Any field no part shows is listed at the end under
its label, so a new field or a new kind is shown before anyone writes a part for it. The
verdicts are the Type-I (round-off) / Type-II (bug) classification of the RENDER paper.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from .kinds import shape_text, verdict_warning
from .markup import (
    Links,
    exact_html,
    index_html,
    number_html,
    other_fields,
    paragraph,
    status_html,
    warning_html,
)
from .scatter import scatter_svg

__all__ = ["DEFAULT_PARTS", "VERDICT_PARTS", "Part", "verdict_details"]

#: a part of a verdict's details: HTML from the record and the page's links ("" for nothing)
Part = Callable[[Mapping[str, Any], Links], str]


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} elements ({100 * part / whole:.3g}%)" if whole else f"{part}"


def _headline(entry: Mapping[str, Any], links: Links) -> str:
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
    return paragraph(text)


def _warning(entry: Mapping[str, Any], links: Links) -> str:
    return warning_html(verdict_warning(entry))


def _tightness(entry: Mapping[str, Any], links: Links) -> str:
    radius = entry.get("tightness_ulps")
    if radius is None:
        return ""
    return paragraph(
        f"Median radius of the enclosure: {number_html(radius)} ULP of "
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
        enclosure = "none recorded" if lo is None else f"[{exact_html(lo)}, {exact_html(hi)}]"
        actual, expected = row.get("actual"), row.get("expected")
        difference = (
            abs(actual - expected)
            if isinstance(actual, float) and isinstance(expected, float)
            else None
        )
        cells = [
            index_html(row.get("index")),
            exact_html(actual),
            exact_html(expected),
            enclosure,
            number_html(difference),
        ]
        if excess is not None:
            cells += [number_html(excess.get(k)) for k in ("absolute", "radii", "ulps")]
        body.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return f"<table>{head}</tr>{''.join(body)}</table>"


def _worst(entry: Mapping[str, Any], links: Links) -> str:
    worst = entry.get("worst")
    if not isinstance(worst, Mapping):
        return ""
    excess = entry.get("worst_excess")
    return "<h4>Worst element</h4>" + _element_table(
        [worst], excess if isinstance(excess, Mapping) else None
    )


def _offenders(entry: Mapping[str, Any], links: Links) -> str:
    offenders = entry.get("offenders")
    if not offenders:
        return ""
    more = int(entry.get("outside", 0)) - len(offenders)
    tail = f'<p class="note">and {more} more outside</p>' if more > 0 else ""
    return f"<h4>First offenders</h4>{_element_table(offenders, None)}{tail}"


def _plot(entry: Mapping[str, Any], links: Links) -> str:
    points = entry.get("points")
    if not points:
        return ""
    svg = scatter_svg(points, entry.get("total"))
    return f"<h4>Error against bound, per element</h4>{svg}" if svg else ""


def _allclose(entry: Mapping[str, Any], links: Links) -> str:
    close = entry.get("allclose")
    if not isinstance(close, Mapping):
        return ""
    mismatched, total = close.get("mismatched", 0), close.get("total", 0)
    outcome = "passed" if not mismatched else f"failed at {_share(int(mismatched), int(total))}"
    text = (
        f"Plain allclose with rtol={exact_html(close.get('rtol'))}, "
        f"atol={exact_html(close.get('atol'))}: "
        f"{status_html('passed' if not mismatched else 'failed')} ({outcome}); greatest absolute "
        f"difference {number_html(close.get('greatest_absolute'))} at "
        f"{index_html(close.get('greatest_absolute_index'))}, greatest relative "
        f"{number_html(close.get('greatest_relative'))} at "
        f"{index_html(close.get('greatest_relative_index'))}."
    )
    return f"<h4>allclose</h4>{paragraph(text)}"


def _provenance(entry: Mapping[str, Any], links: Links) -> str:
    sites = entry.get("provenance_sites")
    if not sites:
        text = entry.get("provenance")
        return f"<h4>Provenance</h4>{paragraph(escape(str(text)))}" if text else ""
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
            f'<td class="num">{number_html(site.get("widening"))}</td></tr>'
        )
    return (
        "<h4>Provenance: the operations that widened the enclosure most</h4><table><tr>"
        "<th>operation</th><th>source</th><th>module</th><th>radius it added</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _notes(entry: Mapping[str, Any], links: Links) -> str:
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

_BOUNDED_PARTS: tuple[Part, ...] = (
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
VERDICT_PARTS: dict[str, tuple[Part, ...]] = {
    "bug": _BOUNDED_PARTS,
    "roundoff": _BOUNDED_PARTS,
    "close": (_headline, _worst, _offenders, _allclose, _notes),
    "exact": (_headline, _tightness, _allclose, _provenance, _notes),
}
DEFAULT_PARTS = _BOUNDED_PARTS


def verdict_details(entry: Mapping[str, Any], links: Links) -> str:
    """A verdict's details: the parts its kind shows, then its other fields."""
    parts = VERDICT_PARTS.get(str(entry["kind"]), DEFAULT_PARTS)
    return "".join(part(entry, links) for part in parts) + other_fields(entry, (*_SHOWN, "test"))
