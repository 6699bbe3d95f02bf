"""The README's picture of the HTML report, and the fingerprint of the layout it shows; shared by
its test (tests/readme/test_readme.py) and the script that takes it (benchmarks/report_picture.py).

The picture (``docs/img/report.png``) is a headless-Chromium screenshot of the first screen of
the report that README command 1 writes. Beside it, ``docs/img/report.png.layout`` records the
layout it was taken with: the SHA-256 of the page the report's renderer makes for one fixed
small run (a passed and a failed test, a bug and a round-off verdict, the settings). Whatever
changes how a page looks -- its style, its script, the header, the tables, the order of the
sections -- changes the fingerprint; a rewrite of the renderer that keeps every page byte for
byte does not. A fingerprint that is not the recorded one means the picture is older than the
layout it shows.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PICTURE = ROOT / "docs" / "img" / "report.png"
FINGERPRINT = PICTURE.with_name(PICTURE.name + ".layout")
#: what regenerates the picture and its fingerprint
COMMAND = "python benchmarks/report_picture.py"


def layout_fingerprint() -> str:
    """The SHA-256 of the page rendered for the fixed run (module docstring)."""
    from pytest_fpcheck.report import RunReport
    from pytest_fpcheck.report.html import render

    report = RunReport()
    report.add_test("t.py::test_ok", {"outcome": "passed", "duration": 0.5})
    report.add_test("t.py::test_bug", {"outcome": "failed", "duration": 1.5, "when": "call"})
    report.add_verdict(
        "t.py::test_ok", {"kind": "roundoff", "outside": 0, "total": 4, "dtype": "float16"}
    )
    report.add_verdict(
        "t.py::test_bug", {"kind": "bug", "outside": 3, "total": 4, "dtype": "float32"}
    )
    document = report.to_dict(
        environment={"versions": {"numpy": "2.0.0"}},
        settings={"enabled": True, "nonfinite": "warn", "seed": 0},
    )
    document["run"].update(created="2026-01-01T00:00:00+00:00", python="3.11.0", platform="any")
    page = render(json.loads(json.dumps(document)), folder=ROOT)
    return hashlib.sha256(page.encode("utf-8")).hexdigest()


def recorded_fingerprint() -> str | None:
    """The fingerprint recorded beside the picture (its first word), or None."""
    if not FINGERPRINT.is_file():
        return None
    words = FINGERPRINT.read_text(encoding="utf-8").split()
    return words[0] if words else None


def record_fingerprint() -> None:
    FINGERPRINT.write_text(
        f"{layout_fingerprint()}  the report layout docs/img/report.png shows "
        f"(tests/readme/picture.py; regenerate both with {COMMAND})\n",
        encoding="utf-8",
    )
