"""The README as a newcomer reads it: its first two ``bash`` blocks are the two commands that
``.ci/run`` tries in fresh venvs, and its first screen shows a picture of the HTML report that is
not older than the report layout it shows (tests/readme/picture.py)."""

from __future__ import annotations

import re

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
