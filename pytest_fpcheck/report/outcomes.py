"""Each test's outcome for the run report (issue 23): passed, failed, error, skipped, xfailed or
xpassed, gathered over its phases (setup, call, teardown), with its duration, location and, for a
failure, its traceback and captured output (each cut to its last 20,000 characters)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .model import RunReport

__all__ = ["TestOutcomes"]

_TEXT_LIMIT = 20_000


def _tail(text: str) -> str:
    return text if len(text) <= _TEXT_LIMIT else "[...]\n" + text[-_TEXT_LIMIT:]


class TestOutcomes:
    """--fpcheck-report: gathers each test's outcome over its phases (setup, call, teardown) on
    the process that writes the report (under xdist the controller receives every phase).
    Registered by ``pytest_configure`` then only."""

    def __init__(
        self,
        config: pytest.Config,
        under_way: pytest.StashKey[dict[str, dict[str, Any]]],
        report: Callable[[], RunReport],
    ) -> None:
        self.config = config
        self.under_way = under_way  # where the tests whose phases are under way are kept
        self.report = report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        under_way = self.config.stash.setdefault(self.under_way, {})
        path, line, _ = report.location
        record = under_way.setdefault(
            report.nodeid,
            {"outcome": "passed", "duration": 0.0, "location": {"path": path, "line": _line(line)}},
        )
        record["duration"] += report.duration
        _phase_outcome(record, report)
        if report.when == "teardown":
            self.report().add_test(report.nodeid, under_way.pop(report.nodeid))


def _line(line: int | None) -> int | None:
    """pytest's 0-based line as a 1-based one."""
    return None if line is None else line + 1


def _phase_outcome(record: dict[str, Any], report: pytest.TestReport) -> None:
    """The outcome of a test so far, after one more phase's report."""
    xfail = getattr(report, "wasxfail", None)
    if report.failed:
        failed = "failed" if report.when == "call" else "error"
        record["outcome"] = failed if record["outcome"] != "failed" else "failed"
        record.setdefault("when", report.when)
        earlier = record.get("traceback", "")
        record["traceback"] = _tail(earlier + ("\n\n" if earlier else "") + report.longreprtext)
        record["output"] = [
            {"name": name, "text": _tail(text)} for name, text in report.sections if text
        ]
    elif report.skipped:
        record["outcome"] = "xfailed" if xfail is not None else "skipped"
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(xfail or "")
        record["reason"] = str(xfail) if xfail else reason.removeprefix("Skipped: ")
    elif report.when == "call" and xfail is not None:
        record["outcome"] = "xpassed"
        record["reason"] = str(xfail)
