"""The run report's model: every test of a run and every result it made, as JSON (API section 8).

A :class:`RunReport` holds the run's tests (:meth:`RunReport.add_test`: outcome, duration, and
for a failure its traceback and captured output) and, for each kind of
:mod:`~pytest_fpcheck.report.kinds`, a list of entries ``{"test": test id, **record}``. Records are the JSON-serialisable dicts the producers
make (``Verdict.to_dict()``, ``DualDeltaResult.to_dict()``, ...; the fields of each kind are in
``docs/report-schema.md``); ``add_*`` checks that a record has the fields its kind needs, so a
malformed one fails where it is made, not when the report is drawn.

Across pytest-xdist workers each worker sends :meth:`RunReport.part` to the controller, which
merges it (:meth:`RunReport.merge`). Written documents list each kind's entries sorted by test id
(stably: a test's own entries keep their order), so a parallel run writes the same entries as a
serial one. Tests are reported by pytest's own hook on the process that writes the report, so
they are not part of a worker's part.

A passed test whose round-off check raised (a bug verdict the test caught, ``pytest.raises``
around the check) has the outcome ``expected-bug``; its verdict, the status ``expected-bug``.
``docs/report-schema.json`` is the document's JSON schema.
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
from .kinds import KINDS, OUTCOMES, TESTS, Kind, kind_named

__all__ = ["SCHEMA", "SCHEMA_NAME", "SCHEMA_VERSION", "RunReport", "read_document"]

SCHEMA_NAME = "pytest-fpcheck-report"
SCHEMA_VERSION = 3
SCHEMA = {"name": SCHEMA_NAME, "version": SCHEMA_VERSION}
_KEYS = ", ".join(kind.key for kind in KINDS)
_OUTCOMES = ", ".join(OUTCOMES)


def _empty() -> dict[str, list[dict[str, Any]]]:
    return {kind.key: [] for kind in KINDS}


@dataclass
class RunReport:
    """The entries of a run, by kind (module docstring); ``workers`` counts the xdist workers
    whose parts were merged in (0 for a serial run)."""

    entries: dict[str, list[dict[str, Any]]] = field(default_factory=_empty)
    workers: int = 0
    tests: list[dict[str, Any]] = field(default_factory=list)

    def add_test(self, test_id: str, record: Mapping[str, Any]) -> None:
        """One test of the run: ``outcome`` (one of :data:`~.kinds.OUTCOMES`; ``expected-bug``
        is derived when the document is made, pass ``passed``), ``duration`` in seconds, and
        as far as known ``when`` (the failing phase), ``reason`` (of a skip or an xfail),
        ``traceback``, ``output`` (captured sections: ``[{"name", "text"}]``), ``location``
        (``{"path", "line"}``, the path relative to the rootdir)."""
        if not isinstance(test_id, str) or not test_id:
            raise InvalidArgument("test_id", test_id, "a pytest node id (a non-empty str)")
        _check_record(TESTS, record)
        if record["outcome"] not in OUTCOMES:
            raise InvalidArgument("record['outcome']", record["outcome"], f"one of {_OUTCOMES}")
        self.tests.append({"test": test_id, **record})

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
        most severe first (a caught bug verdict counts as ``expected-bug``)."""
        counts: dict[str, dict[str, int]] = {}
        for kind in KINDS:
            by_status: dict[str, int] = {}
            for entry in sorted(self.entries[kind.key], key=kind.rank):
                status = kind.status(entry)
                by_status[status] = by_status.get(status, 0) + 1
            counts[kind.key] = by_status
        return counts

    def findings(self) -> dict[str, dict[str, dict[str, int]]]:
        """For each test with results: for each kind, how many entries have each status."""
        found: dict[str, dict[str, dict[str, int]]] = {}
        for kind in KINDS:
            for entry in sorted(self.entries[kind.key], key=kind.rank):
                by_status = found.setdefault(entry["test"], {}).setdefault(kind.key, {})
                status = kind.status(entry)
                by_status[status] = by_status.get(status, 0) + 1
        return found

    def test_records(self) -> list[dict[str, Any]]:
        """The tests, sorted by id, each with its ``findings`` and the outcome ``expected-bug``
        for a passed test that caught a bug verdict."""
        found = self.findings()
        records = []
        for test in sorted(self.tests, key=lambda record: record["test"]):
            record = dict(test)
            findings = found.get(record["test"], {})
            if findings:
                record["findings"] = findings
            if record["outcome"] == "passed" and "expected-bug" in findings.get("verdicts", {}):
                record["outcome"] = "expected-bug"
            records.append(record)
        return records

    def to_dict(
        self,
        *,
        environment: Mapping[str, Any],
        settings: Mapping[str, Any],
        run: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The whole document (schema in ``docs/report-schema.md``), entries sorted by test;
        ``run`` adds to the run's fields (``rootdir``, ``duration``, ``exitstatus``)."""
        import platform

        tests = self.test_records()
        totals = {outcome: 0 for outcome in OUTCOMES}
        for test in tests:
            totals[test["outcome"]] += 1
        document: dict[str, Any] = {
            "schema": dict(SCHEMA),
            "run": {
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "workers": self.workers,
                **(run or {}),
            },
            "totals": {"tests": len(tests), **totals},
            "counts": self.counts(),
            "tests": tests,
        }
        for kind in KINDS:
            document[kind.key] = sorted(self.entries[kind.key], key=lambda entry: entry["test"])
        document["environment"] = dict(environment)
        document["settings"] = dict(settings)
        return document

    def to_json(
        self,
        *,
        environment: Mapping[str, Any],
        settings: Mapping[str, Any],
        run: Mapping[str, Any] | None = None,
    ) -> str:
        """:meth:`to_dict` as JSON text; infinities and NaN as the strings "inf", "-inf", "nan"."""
        document = self.to_dict(environment=environment, settings=settings, run=run)
        return json.dumps(_finite(document), indent=2, allow_nan=False, default=_plain)

    def write(
        self,
        path: Path,
        *,
        environment: Mapping[str, Any],
        settings: Mapping[str, Any],
        run: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the report to ``path``: a self-contained HTML page when it ends in ``.html``
        (its links to source lines are relative to the page's folder), JSON otherwise."""
        if path.suffix == ".html":
            from .html import render

            document = self.to_dict(environment=environment, settings=settings, run=run)
            plain = json.loads(json.dumps(_finite(document), allow_nan=False, default=_plain))
            path.write_text(render(plain, folder=path.parent), encoding="utf-8")
        else:
            text = self.to_json(environment=environment, settings=settings, run=run)
            path.write_text(text + "\n", encoding="utf-8")


def read_document(path: Path | str) -> dict[str, Any]:
    """The document of a written report: the JSON file itself, or what an HTML page embeds."""
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".html":
        from .html import embedded

        document: dict[str, Any] = embedded(text)
        return document
    loaded: dict[str, Any] = json.loads(text)
    return loaded


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
