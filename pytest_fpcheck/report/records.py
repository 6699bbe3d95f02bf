"""Report records made from the objects the package's functions return (fields:
``docs/report-schema.md``).

Each function reads only the public attributes the API names (API sections 2 and 4 to 7), so it
needs neither the producing module nor its backend: ``tree_record`` reads a SummationTree's
``n``, ``fanout()``, ``depth()``, ``dtype`` and ``to_text()``. ``context`` keywords (what the
producer knew but the object does not carry, such as the implementation's name) are added to the
record and win over what the object says.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidArgument

__all__ = [
    "appearance_record",
    "isolation_record",
    "probe_record",
    "provenance_sites",
    "record_of",
    "site_record",
    "tree_record",
    "verdict_record",
]

_SITE_FIELDS = ("op", "module_path", "location", "source_line")
_PROBE_FIELDS = (
    "in_dtype",
    "out_dtype",
    "products_exact",
    "block_width",
    "extra_bits",
    "rounding",
    "subnormal_inputs",
    "subnormal_outputs",
)


def _to_dict(result: Any) -> dict[str, Any]:
    convert = getattr(result, "to_dict", None)
    if not callable(convert):
        raise InvalidArgument("result", result, "an object with a to_dict() method")
    record: dict[str, Any] = dict(convert())
    return record


def appearance_record(event: Any, **context: Any) -> dict[str, Any]:
    """A non-finite watch event (``Watch.events`` entry) as an ``appearances`` record."""
    record = {
        "kind": event.kind,
        "op": event.op,
        "dtype": event.dtype,
        "count": event.count,
        "calls": event.calls,
        "location": event.location,
        "module_path": event.module_path,
        "source_line": event.source_line,
        "summary": event.summary(),
    }
    return {**record, **context}


def gap_record(gap: Any, **context: Any) -> dict[str, Any]:
    """A tracking gap (:class:`~pytest_fpcheck.tracking.core.gaps.Gap`) as a ``gaps`` record."""
    return {**gap.to_dict(), **context}


def tree_record(tree: Any, **context: Any) -> dict[str, Any]:
    """A revealed SummationTree as a ``trees`` record (its text is ``to_text()``, at most 24
    lines; the DOT graph is left out: it grows with n)."""
    record = {
        "n": tree.n,
        "fanout": tree.fanout(),
        "depth": tree.depth(),
        "dtype": tree.dtype,
        "text": tree.to_text(),
    }
    return {**record, **context}


def site_record(site: Any) -> dict[str, Any]:
    """One operation site of an isolation: its ``to_dict()``, the mapping itself, or the
    attributes op, module_path, location and source_line it has, with its text."""
    if isinstance(site, Mapping):
        return dict(site)
    if callable(getattr(site, "to_dict", None)):
        return _to_dict(site)
    record = {name: getattr(site, name) for name in _SITE_FIELDS if hasattr(site, name)}
    record["text"] = str(site)
    return record


def isolation_record(isolation: Any, **context: Any) -> dict[str, Any]:
    """An Isolation as an ``isolations`` record: its sites, the number of configurations
    searched, and its report text."""
    searches = isolation.searches
    record = {
        "sites": [site_record(site) for site in isolation.sites],
        "searches": searches if isinstance(searches, int) else len(searches),
        "report": isolation.report(),
    }
    return {**record, **context}


def probe_record(features: Any, **context: Any) -> dict[str, Any]:
    """MatmulFeatures as a ``probes`` record: the features, the summary text, and the revealed
    order as text."""
    record: dict[str, Any] = {
        name: getattr(features, name) for name in _PROBE_FIELDS if hasattr(features, name)
    }
    order = getattr(features, "order", None)
    record["order"] = order.to_text() if order is not None else None
    record["summary"] = features.summary()
    return {**record, **context}


def _element(offender: Any) -> dict[str, Any]:
    """An Offender (position, actual, expected, lo, hi) as a record; a fallback verdict's
    enclosure ends are NaN (it has none): null here."""
    position, actual, expected, lo, hi = offender
    known = not (math.isnan(lo) and math.isnan(hi))
    return {
        "index": [int(i) for i in position],
        "actual": float(actual),
        "expected": float(expected),
        "lo": float(lo) if known else None,
        "hi": float(hi) if known else None,
    }


def _allclose_record(allclose: Any) -> dict[str, Any]:
    def index(value: Any) -> list[int] | None:
        return None if value is None else [int(i) for i in value]

    return {
        "rtol": allclose.rtol,
        "atol": allclose.atol,
        "mismatched": allclose.mismatched,
        "total": allclose.total,
        "greatest_absolute": allclose.greatest_absolute,
        "greatest_absolute_index": index(allclose.greatest_absolute_index),
        "greatest_relative": allclose.greatest_relative,
        "greatest_relative_index": index(allclose.greatest_relative_index),
    }


def verdict_record(verdict: Any, **context: Any) -> dict[str, Any]:
    """A Verdict as a ``verdicts`` record: its ``to_dict()``, and what the terminal message
    shows besides: the worst element (``worst``: index, actual, expected, enclosure), the first
    offenders, the allclose tolerances and mismatches, the non-finite mismatches."""
    record = _to_dict(verdict)
    worst = getattr(verdict, "worst", None)
    if worst is not None:
        record["worst"] = _element(worst)
    offenders = getattr(verdict, "offenders", ())
    if offenders:
        record["offenders"] = [_element(offender) for offender in offenders]
    allclose = getattr(verdict, "allclose", None)
    if allclose is not None:
        record["allclose"] = _allclose_record(allclose)
    if getattr(verdict, "nonfinite_mismatches", 0):
        record["nonfinite_mismatches"] = verdict.nonfinite_mismatches
    return {**record, **context}


def _result_record(result: Any, **context: Any) -> dict[str, Any]:
    """A result's ``to_dict()`` with the context: a dual-delta comparison, a module-by-module
    comparison."""
    return {**_to_dict(result), **context}


_SITE = re.compile(
    r"^(?P<op>\S+)(?: at (?P<file>[^\s:]+):(?P<line>\d+))?(?: in (?P<module>\S+))?"
    r" \(\+(?P<widening>[^)]+)\)$"
)


def provenance_sites(
    provenance: str, resolve: Callable[[str], str | None] = lambda name: None
) -> list[dict[str, Any]]:
    """A verdict's provenance text (``aten.mm at model.py:3 in MLP.0 (+0.0312); ...``) as one
    record per site: ``site`` (its text), ``op``, ``file`` and ``line``, ``module``,
    ``widening`` (the radius it added), and ``path``: the file relative to the rootdir, as
    ``resolve(file)`` finds it (None when it cannot). A site of another shape keeps only its
    ``site``; a text without any site ("no operation widened it ...") gives []."""
    sites: list[dict[str, Any]] = []
    for text in provenance.split("; "):
        found = _SITE.match(text)
        if found is None:
            sites.append({"site": text})
            continue
        site: dict[str, Any] = {"site": text[: text.rindex(" (+")], "op": found["op"]}
        if found["file"]:
            site.update(file=found["file"], line=int(found["line"]), path=resolve(found["file"]))
        if found["module"]:
            site["module"] = found["module"]
        try:
            site["widening"] = float(found["widening"])
        except ValueError:
            site["widening"] = found["widening"]
        sites.append(site)
    return sites if any("op" in site for site in sites) else []


_RECORDERS: dict[str, Callable[..., dict[str, Any]]] = {
    "verdicts": verdict_record,
    "modules": _result_record,
    "dual_deltas": _result_record,
    "appearances": appearance_record,
    "gaps": gap_record,
    "isolations": isolation_record,
    "probes": probe_record,
    "trees": tree_record,
}


def record_of(kind: str, result: Any, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record of ``result`` for ``kind``: a mapping is taken as the record itself; an
    object goes through its kind's function above."""
    recorder = _RECORDERS.get(kind)
    if recorder is None:
        raise InvalidArgument("kind", kind, f"one of {', '.join(_RECORDERS)}")
    if isinstance(result, Mapping):
        return {**result, **(context or {})}
    return recorder(result, **(context or {}))
