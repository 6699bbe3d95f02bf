"""The README's picture of the HTML report: ``docs/img/report.png`` and, beside it, the
fingerprint of the layout it shows (``docs/img/report.png.layout``, see tests/readme/picture.py;
tests/readme/test_readme.py fails when the report's layout has changed since the picture was
taken).

Runs the pytest half of README command 1 (the examples under ``--fpcheck``), writing the report
to a temporary folder, and refuses to take a picture of a run that did not pass; or, with
``--report PATH``, takes the picture of a report already written. The picture is the page's
first screen in headless Chromium (``--screenshot``, 1280x900 CSS pixels, no scroll bar).

Run: ``python benchmarks/report_picture.py [--report fpcheck-report.html]`` (needs Chromium:
``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "readme"))

from picture import PICTURE, record_fingerprint  # noqa: E402

WINDOW = "1280,900"


def examples_report(folder: Path) -> Path:
    """README command 1's pytest run, its report written in ``folder``."""
    report = folder / "fpcheck-report.html"
    command = [sys.executable, "-m", "pytest", "examples", "--fpcheck",
               f"--fpcheck-report={report}", "-p", "no:cacheprovider", "-q"]  # fmt: skip
    print("+", " ".join(command))
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr)
    if run.returncode != 0:
        raise SystemExit("the examples did not pass: no picture of a failing run")
    return report


def screenshot(report: Path, picture: Path) -> None:
    chromium = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if chromium is None:
        raise SystemExit("needs Chromium on PATH (Debian: apt-get install chromium)")
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--no-first-run", "--hide-scrollbars", f"--window-size={WINDOW}",
               f"--screenshot={picture}", report.resolve().as_uri()]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, help="a report already written (.html)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        report = args.report or examples_report(Path(folder))
        screenshot(report, PICTURE)
    record_fingerprint()
    print(f"{PICTURE.relative_to(ROOT)}: {PICTURE.stat().st_size} bytes, layout recorded")


if __name__ == "__main__":
    main()
