"""CI runs the browser tests or fails: tests/test_report_browser.py skips where Chromium is
missing, and under ``FPCHECK_REQUIRE_BROWSER=1`` (which ``.ci/run`` sets) every one of its tests
errors instead. Both runs here hide Chromium by giving the run a PATH without it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BROWSER_TESTS = ROOT / "tests" / "test_report_browser.py"
MISSING = "needs Chromium and its driver on PATH (Debian: apt-get install chromium chromium-driver)"


def _run_without_chromium(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if key != "FPCHECK_REQUIRE_BROWSER"
    }
    environment.update(PATH=str(tmp_path), **env)  # an empty folder: no chromium, no chromedriver
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(BROWSER_TESTS), "-p", "no:cacheprovider",
         "-p", "no:xdist", "--noconftest", "-rs"],
        cwd=ROOT, env=environment, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_browser_tests_skip_where_chromium_is_missing(tmp_path: Path) -> None:
    run = _run_without_chromium(tmp_path)
    assert run.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, run.stdout + run.stderr
    assert re.search(
        rf"^SKIPPED \[1\] tests/test_report_browser.py:\d+: {re.escape(MISSING)}$", run.stdout, re.M
    )
    assert "1 skipped" in run.stdout


def test_under_ci_a_missing_chromium_fails_every_browser_test(tmp_path: Path) -> None:
    run = _run_without_chromium(tmp_path, FPCHECK_REQUIRE_BROWSER="1")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    failure = f"{MISSING} (FPCHECK_REQUIRE_BROWSER=1: the browser tests must run here)"
    module = ast.parse(BROWSER_TESTS.read_text())
    tests = sum(isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                for node in module.body)  # fmt: skip
    assert run.stdout.count(failure) == tests, run.stdout
    assert f"{tests} errors" in run.stdout
