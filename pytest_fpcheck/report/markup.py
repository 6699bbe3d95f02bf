"""The report page's small HTML builders, shared by the page and every entry's details.

What a record field is called on the page (:data:`LABELS`) and how its value reads
(:func:`value_html`: mappings as tables, long lists cut, multi-line text preformatted, a plot as
its embedded PNG), a record's fields as a two-column table (:func:`fields_table`), a status in
its colour, a sentence, a warning box, and where the page's links go (:class:`Links`: a source
line relative to the page's folder, a test's details).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from .kinds import number

__all__ = [
    "LABELS",
    "LIST_LIMIT",
    "Links",
    "exact_html",
    "fields_table",
    "image_html",
    "index_html",
    "label_of",
    "number_html",
    "other_fields",
    "paragraph",
    "status_class",
    "status_html",
    "value_html",
    "warning_html",
]

#: lists longer than this are cut in the details (a dual-delta's per-trial errors, say)
LIST_LIMIT = 16

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


def label_of(key: str) -> str:
    """What field ``key`` is called on the page: its :data:`LABELS` entry, or the key spaced."""
    return LABELS.get(key, key.replace("_", " "))


def status_class(status: str) -> str:
    """The CSS class suffix of a status (``s-<this>``): anything but letters, digits, ``-`` and
    ``_`` as ``-``."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in status)


def status_html(status: str) -> str:
    """A status in its colour."""
    return f'<span class="status s-{status_class(status)}">{escape(status)}</span>'


def exact_html(value: Any) -> str:
    """A value in full: a float as its shortest round-trip text (``65.125``, ``1e-05``)."""
    if value is None:
        return "-"
    return escape(repr(value) if isinstance(value, float) else str(value))


def number_html(value: Any) -> str:
    """A float to four significant digits, an int in full, ``-`` for none (escaped)."""
    return escape(number(value, ".4g"))


def index_html(value: Any) -> str:
    """An element's index: ``[i, j]`` for a tuple (``-`` for none)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(i) for i in value) + "]"
    return "-" if value is None else escape(str(value))


def image_html(path: Any) -> str:
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
    head = "".join(f"<th>{escape(label_of(str(c)))}</th>" for c in columns)
    label = "<th></th>" if any(name for name, _ in rows) else ""
    body = []
    for name, row in rows:
        cells = "".join(f"<td>{value_html(row.get(c), key=c)}</td>" for c in columns)
        first = f"<th>{escape(name)}</th>" if label else ""
        body.append(f"<tr>{first}{cells}</tr>")
    return f"<table><tr>{label}{head}</tr>{''.join(body)}</table>"


def value_html(value: Any, *, key: str = "") -> str:
    """A record value as HTML: mappings of mappings and lists of mappings as tables, other
    mappings as two-column tables, long lists cut, multi-line text preformatted."""
    if key == "plot":
        return image_html(value)
    if isinstance(value, Mapping):
        if value and all(isinstance(v, Mapping) for v in value.values()):
            return _table_of_mappings([(str(k), v) for k, v in value.items()])
        return fields_table(value)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Mapping) for v in value):
            return _table_of_mappings([("", v) for v in value])
        shown = ", ".join(value_html(v) for v in value[:LIST_LIMIT])
        more = f", ... ({len(value)} values)" if len(value) > LIST_LIMIT else ""
        return f"[{shown}{more}]"
    if isinstance(value, str) and "\n" in value:
        return f"<pre>{escape(value)}</pre>"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return number_html(value)


def fields_table(
    record: Mapping[str, Any], skip: Sequence[str] = (), *, labels: bool = True
) -> str:
    """A two-column table of ``record``'s fields, under their labels (``labels``) or keys."""
    name = label_of if labels else str
    rows = "".join(
        f"<tr><th>{escape(name(str(key)))}</th><td>{value_html(value, key=str(key))}</td></tr>"
        for key, value in record.items()
        if key not in skip
    )
    return f"<table>{rows}</table>" if rows else ""


def other_fields(record: Mapping[str, Any], shown: Sequence[str]) -> str:
    """The fields of ``record`` not in ``shown``, under "Other fields" (nothing when none is
    left): what a details block lists after the parts written for its kind."""
    table = fields_table(record, shown)
    return f"<h4>Other fields</h4>{table}" if table else ""


class Links:
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


def paragraph(text: str) -> str:
    """A sentence of a details block (``text`` is HTML already)."""
    return f'<p class="said">{text}</p>'


def warning_html(text: str) -> str:
    """A warning box (an entry that reads better than it is or decides nothing); nothing for
    no warning."""
    return f'<div class="warning">&#9888; {escape(text)}</div>' if text else ""
