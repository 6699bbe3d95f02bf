"""The README as a newcomer reads it: its first two ``bash`` blocks are the two commands that
``.ci/run`` tries in fresh venvs, and its first screen shows a picture of the HTML report that is
not older than the report layout it shows (tests/readme/picture.py), and its tour prints what the
README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .picture import COMMAND, PICTURE, ROOT, layout_fingerprint, recorded_fingerprint

README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = 50  # lines


def test_the_first_two_bash_blocks_are_the_two_commands() -> None:
    blocks = re.findall(r"^```bash\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)
    assert blocks[:2] == [
        'pip install -c constraints.txt -e ".[all]" && python -m pytest examples --fpcheck '
        "--fpcheck-report=fpcheck-report.html\n",
        'pip install -c constraints.txt -e ".[all,test,lint,docs]" && python -m pytest\n',
    ]


def test_the_first_screen_shows_the_report_and_how_to_open_it() -> None:
    first_screen = "\n".join(README.splitlines()[:FIRST_SCREEN])
    assert "](docs/img/report.png)" in first_screen
    assert 'python -m webbrowser "file://$PWD/fpcheck-report.html"' in first_screen
    assert PICTURE.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_picture_is_not_older_than_the_report_layout() -> None:
    assert recorded_fingerprint() == layout_fingerprint(), (
        f"the HTML report's layout changed since {PICTURE.name} was taken: run {COMMAND}"
    )


def test_the_tour_prints_what_the_readme_shows(tmp_path: Path) -> None:
    # the first python block run as tour.py (its provenance names that file), then each
    # ">>> expression" of the text block after it, printed as the REPL shows it
    code = re.search(r"^```python\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)
    assert code is not None
    transcript = re.search(
        r"^```text\n(>>> .*?)^```$", README[code.end() :], flags=re.MULTILINE | re.DOTALL
    )
    assert transcript is not None
    lines = transcript.group(1).splitlines()
    expressions = [line[4:] for line in lines if line.startswith(">>> ")]
    shown = [
        expression if expression.startswith("print(") else f"print(repr({expression}))"
        for expression in expressions
    ]
    (tmp_path / "tour.py").write_text(code.group(1) + "\n".join(shown) + "\n")
    run = subprocess.run(
        [sys.executable, "tour.py"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert run.stdout.splitlines() == [line for line in lines if not line.startswith(">>> ")]
