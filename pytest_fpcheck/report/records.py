"""Report records made from the objects the package's functions return (fields:
``docs/report-schema.md``).

Each function reads only the public attributes the API names (API sections 2 and 4 to 7), so it
needs neither the producing module nor its backend: ``tree_record`` reads a SummationTree's
``n``, ``fanout()``, ``depth()``, ``dtype`` and ``to_text()``. ``context`` keywords (what the
producer knew but the object does not carry, such as the implementation's name) are added to the
record and win over what the object says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidArgument

__all__ = [
    "appearance_record",
    "isolation_record",
    "probe_record",
    "record_of",
    "site_record",
    "tree_record",
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


def _verdict_record(verdict: Any, **context: Any) -> dict[str, Any]:
    return {**_to_dict(verdict), **context}


_RECORDERS: dict[str, Callable[..., dict[str, Any]]] = {
    "verdicts": _verdict_record,
    "dual_deltas": _verdict_record,
    "appearances": appearance_record,
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
