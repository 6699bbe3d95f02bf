"""The run report: what a ``pytest --fpcheck`` run found, as a terminal table and as JSON.

The model is a list of entries, each with the test id and a JSON-serialisable record (a verdict's
``to_dict()``). The JSON document carries a schema name and version (``pytest-fpcheck-report``,
version 1), the numeric environment and the run settings; non-finite numbers are written as the
strings "inf", "-inf" and "nan".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA", "RunReport"]

SCHEMA = {"name": "pytest-fpcheck-report", "version": 1}
_ORDER = {"bug": 0, "close": 1, "roundoff": 2, "exact": 3}


@dataclass
class RunReport:
    """Verdicts made during a run, with the test that made each."""

    verdicts: list[dict[str, Any]] = field(default_factory=list)
    dual_deltas: list[dict[str, Any]] = field(default_factory=list)
    appearances: list[dict[str, Any]] = field(default_factory=list)

    def add_appearance(self, test_id: str, summary: str, kind: str, source_line: str) -> None:
        self.appearances.append(
            {"test": test_id, "kind": kind, "summary": summary, "source": source_line}
        )

    def appearance_lines(self, *, width: int = 100) -> list[str]:
        """One line per appearance (and its source line), grouped by test."""
        lines: list[str] = []
        for entry in self.appearances:
            lines.append(f"{entry['test']}: {entry['summary']}"[:width])
            if entry["source"]:
                lines.append(f"    {entry['source']}"[:width])
        return lines

    def add_verdict(self, test_id: str, record: dict[str, Any]) -> None:
        self.verdicts.append({"test": test_id, **record})

    def add_dual_delta(self, test_id: str, record: dict[str, Any]) -> None:
        self.dual_deltas.append({"test": test_id, **record})

    def dual_delta_lines(self, *, width: int = 100) -> list[str]:
        """One line per dual-delta comparison: accuracy and stability verdicts, the mean error
        ratio, and the test."""
        if not self.dual_deltas:
            return []
        lines = [f"{'accuracy':<21} {'stability':<19} {'n':>6}  test"]
        for d in sorted(
            self.dual_deltas, key=lambda d: (d.get("accuracy") != "custom_less_accurate", d["test"])
        ):
            head = f"{d.get('accuracy', '?'):<21} {d.get('stability', '?'):<19} {d.get('n', '?')!s:>6}  "
            room = max(width - len(head), 10)
            test = d["test"] if len(d["test"]) <= room else "..." + d["test"][-(room - 3) :]
            lines.append(head + test)
        return lines

    def summary_lines(self, *, width: int = 100) -> list[str]:
        """One line per verdict, bugs first, fitting ``width`` columns."""
        if not self.verdicts:
            return []
        rows = sorted(self.verdicts, key=lambda v: (_ORDER.get(v["kind"], 9), v["test"]))
        header = f"{'verdict':<9} {'outside':>15} {'dtype':<14} {'radius':>8}  test"
        lines = [header]
        for v in rows:
            outside = f"{v['outside']} / {v['total']}"
            radius = "-" if v.get("tightness_ulps") is None else f"{v['tightness_ulps']:.3g}"
            head = f"{v['kind']:<9} {outside:>15} {v['dtype']:<14} {radius:>8}  "
            room = max(width - len(head), 10)
            test = v["test"] if len(v["test"]) <= room else "..." + v["test"][-(room - 3) :]
            lines.append(head + test)
        lines.append(
            "radius: median radius of the round-off enclosure, in ULPs of the result's format"
        )
        return lines

    def to_json(self, *, environment: dict[str, Any], settings: dict[str, Any]) -> str:
        counts: dict[str, int] = {}
        for v in self.verdicts:
            counts[v["kind"]] = counts.get(v["kind"], 0) + 1
        document = {
            "schema": SCHEMA,
            "environment": environment,
            "settings": settings,
            "counts": counts,
            "verdicts": self.verdicts,
            "dual_delta": self.dual_deltas,
            "nonfinite": self.appearances,
        }
        return json.dumps(_finite(document), indent=2, allow_nan=False, default=str)

    def write(self, path: Path, *, environment: dict[str, Any], settings: dict[str, Any]) -> None:
        path.write_text(self.to_json(environment=environment, settings=settings) + "\n")


def _finite(value: Any) -> Any:
    """JSON has no infinities or NaN: they are written as the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
