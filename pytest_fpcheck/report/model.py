"""The run report's model: every entry of a run, with its test, as JSON (API section 8).

A :class:`RunReport` holds, for each kind of :mod:`~pytest_fpcheck.report.kinds`, a list of
entries ``{"test": test id, **record}``. Records are the JSON-serialisable dicts the producers
make (``Verdict.to_dict()``, ``DualDeltaResult.to_dict()``, ...; the fields of each kind are in
``docs/report-schema.md``); ``add_*`` checks that a record has the fields its kind needs, so a
malformed one fails where it is made, not when the report is drawn.

Across pytest-xdist workers each worker sends :meth:`RunReport.part` to the controller, which
merges it (:meth:`RunReport.merge`). Written documents list each kind's entries sorted by test id
(stably: a test's own entries keep their order), so a parallel run writes the same entries as a
serial one.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from .kinds import KINDS, Kind, kind_named

__all__ = ["SCHEMA", "SCHEMA_NAME", "SCHEMA_VERSION", "RunReport"]

SCHEMA_NAME = "pytest-fpcheck-report"
SCHEMA_VERSION = 2
SCHEMA = {"name": SCHEMA_NAME, "version": SCHEMA_VERSION}
_KEYS = ", ".join(kind.key for kind in KINDS)


def _empty() -> dict[str, list[dict[str, Any]]]:
    return {kind.key: [] for kind in KINDS}


@dataclass
class RunReport:
    """The entries of a run, by kind (module docstring); ``workers`` counts the xdist workers
    whose parts were merged in (0 for a serial run)."""

    entries: dict[str, list[dict[str, Any]]] = field(default_factory=_empty)
    workers: int = 0

    def add(self, kind: str, test_id: str, record: Mapping[str, Any]) -> None:
        """Add one entry of ``kind`` (a JSON key: "verdicts", "trees", ...) made by ``test_id``."""
        spec = kind_named(kind)
        if spec is None:
            raise InvalidArgument("kind", kind, f"one of {_KEYS}")
        if not isinstance(test_id, str) or not test_id:
            raise InvalidArgument("test_id", test_id, "a pytest node id (a non-empty str)")
        _check_record(spec, record)
        self.entries[spec.key].append({"test": test_id, **record})

    def add_verdict(self, test_id: str, record: Mapping[str, Any]) -> None:
        """A round-off verdict (``Verdict.to_dict()``)."""
        self.add("verdicts", test_id, record)

    def add_dual_delta(self, test_id: str, record: Mapping[str, Any]) -> None:
        """A dual-delta comparison (``DualDeltaResult.to_dict()``, with ``plot``: a PNG path)."""
        self.add("dual_deltas", test_id, record)

    def add_appearance(self, test_id: str, record: Mapping[str, Any]) -> None:
        """A NaN, Inf or division by zero that appeared (``records.appearance_record``)."""
        self.add("appearances", test_id, record)

    def add_isolation(self, test_id: str, record: Mapping[str, Any]) -> None:
        """The sites an isolation found (``records.isolation_record``)."""
        self.add("isolations", test_id, record)

    def add_probe(self, test_id: str, record: Mapping[str, Any]) -> None:
        """Probed matrix-multiply features (``records.probe_record``)."""
        self.add("probes", test_id, record)

    def add_tree(self, test_id: str, record: Mapping[str, Any]) -> None:
        """A revealed summation tree (``records.tree_record``)."""
        self.add("trees", test_id, record)

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.entries.values())

    def part(self) -> dict[str, list[dict[str, Any]]]:
        """What an xdist worker sends: the non-empty kinds' entries, as plain JSON values (what
        execnet can carry: NumPy scalars become Python numbers)."""
        present = {key: entries for key, entries in self.entries.items() if entries}
        plain: dict[str, list[dict[str, Any]]] = json.loads(json.dumps(present, default=_plain))
        return plain

    def merge(self, part: Mapping[str, Any]) -> None:
        """Add a worker's :meth:`part`, checking each entry as :meth:`add` does."""
        if not isinstance(part, Mapping):
            raise InvalidArgument("part", part, f"a dict of entry lists by kind ({_KEYS})")
        for key, entries in part.items():
            if kind_named(key) is None or not isinstance(entries, list):
                raise InvalidArgument("part", part, f"a dict of entry lists by kind ({_KEYS})")
            for entry in entries:
                if not isinstance(entry, Mapping) or "test" not in entry:
                    raise InvalidArgument(f"part[{key!r}]", entry, "entries with a 'test' field")
                record = {name: value for name, value in entry.items() if name != "test"}
                self.add(key, entry["test"], record)
        self.workers += 1

    def counts(self) -> dict[str, dict[str, int]]:
        """For each kind, how many entries have each status (e.g. ``{"bug": 1, "roundoff": 3}``),
        most severe first."""
        counts: dict[str, dict[str, int]] = {}
        for kind in KINDS:
            by_status: dict[str, int] = {}
            for entry in sorted(self.entries[kind.key], key=kind.rank):
                status = kind.status(entry)
                by_status[status] = by_status.get(status, 0) + 1
            counts[kind.key] = by_status
        return counts

    def to_dict(
        self, *, environment: Mapping[str, Any], settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The whole document (schema in ``docs/report-schema.md``), entries sorted by test."""
        import platform

        document: dict[str, Any] = {
            "schema": dict(SCHEMA),
            "run": {
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "workers": self.workers,
            },
            "environment": dict(environment),
            "settings": dict(settings),
            "counts": self.counts(),
        }
        for kind in KINDS:
            document[kind.key] = sorted(self.entries[kind.key], key=lambda entry: entry["test"])
        return document

    def to_json(self, *, environment: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
        """:meth:`to_dict` as JSON text; infinities and NaN as the strings "inf", "-inf", "nan"."""
        document = self.to_dict(environment=environment, settings=settings)
        return json.dumps(_finite(document), indent=2, allow_nan=False, default=_plain)

    def write(
        self, path: Path, *, environment: Mapping[str, Any], settings: Mapping[str, Any]
    ) -> None:
        """Write the report to ``path``: a self-contained HTML page when it ends in ``.html``,
        JSON otherwise."""
        if path.suffix == ".html":
            from .html import render

            document = self.to_dict(environment=environment, settings=settings)
            path.write_text(render(_finite(document)), encoding="utf-8")
        else:
            text = self.to_json(environment=environment, settings=settings)
            path.write_text(text + "\n", encoding="utf-8")


def _check_record(kind: Kind, record: Any) -> None:
    fields = ", ".join(kind.required)
    expected = f"a {kind.noun} record: a dict with the fields {fields} (docs/report-schema.md)"
    if not isinstance(record, Mapping):
        raise InvalidArgument("record", record, expected)
    missing = [name for name in kind.required if name not in record]
    if missing:
        raise InvalidArgument("record", record, f"{expected}; missing: {', '.join(missing)}")
    if "test" in record:
        raise InvalidArgument(
            "record", record, f"{expected}, without a 'test' field (the test id is passed apart)"
        )


def _plain(value: Any) -> Any:
    """What ``json`` cannot write by itself: NumPy scalars and arrays as Python values, anything
    else as its text."""
    convert = getattr(value, "tolist", None)
    if callable(convert):
        return convert()
    return str(value)


def _finite(value: Any) -> Any:
    """JSON has no infinities or NaN: they are written as the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
