"""The run report through the plugin, end to end: every test's outcome (expected-bug inside
pytest.raises, xfail, error, skip), what is collected and printed with and without --fpcheck,
-v, the terminal's line naming the report, the schema of every report written, the findings of
a test's own watch, pytest-html's page, and the same report from two xdist workers as from one
process."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_fpcheck.report import read_document

pytest_plugins = ["pytester"]

REPORT_SCHEMA = json.loads((Path(__file__).parents[1] / "docs/report-schema.json").read_text())


def checked(path: Path) -> dict[str, Any]:
    """The document of a report the run wrote, checked against docs/report-schema.json."""
    document = read_document(path)
    jsonschema.validate(document, REPORT_SCHEMA)
    return document


SUITE = """
import numpy as np
import pytest
import pytest_fpcheck as fp
from pytest_fpcheck.diagnostics.order import SummationTree
from pytest_fpcheck.assertions.sink import publish


@pytest.mark.parametrize("scale", [1.0, 2.0, 3.0, 4.0])
def test_close(scale):
    x = np.full(8, scale, dtype=np.float32)
    expected = x.astype(np.float64) * (1 + 1e-8)  # within float32's tolerance, not equal
    fp.assert_roundoff_close(x, expected)
    fp.assert_roundoff_close(x[:2], expected[:2])


def test_bug():
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(np.ones(4, np.float32), np.full(4, 1.5))


@pytest.mark.parametrize("n", [4, 8])
def test_trees(n):
    publish("trees", SummationTree.from_nested(tuple(range(n))), impl="fused", algorithm="fprev")
    publish("probes", {"in_dtype": "float16", "block_width": n, "extra_bits": 3,
                       "rounding": "toward-zero"})


def exact(x):
    return np.float32(np.sum(x.astype(np.float64)))


def half(x):
    return np.float32(np.sum(x.astype(np.float16), dtype=np.float16))


@pytest.mark.dual_delta(custom=half, reference=exact, n=30,
                        inputs=lambda rng: (rng.standard_normal(64).astype(np.float32),),
                        oracle=lambda x: np.sum(x.astype(np.float64)))
def test_half_sum(dual_delta_result):
    pass
"""


def _entries(path: Path) -> dict[str, Any]:
    """The report's entries, each dual-delta figure checked to exist and then left out (the
    two runs write their figures into different folders), and the tests less their durations
    and tracebacks."""
    document = checked(path)
    for entry in document["dual_deltas"]:
        assert Path(entry.pop("plot")).is_file()
    for test in document["tests"]:  # -v changes a traceback, and workers' durations differ
        assert test.pop("duration") >= 0
        if test["outcome"] == "failed":
            assert "DualDeltaFailure" in test.pop("traceback")
    keys = ("totals", "counts", "tests", "verdicts", "dual_deltas", "probes", "trees")
    return {key: document[key] for key in keys}


def test_two_xdist_workers_give_the_serial_report(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytest.importorskip("matplotlib")
    pytester.makepyfile(test_suite=SUITE)
    serial = pytester.runpytest_subprocess(
        "--fpcheck", "--fpcheck-report=serial.json", "-p", "no:xdist", "-v"
    )
    parallel = pytester.runpytest_subprocess(
        "--fpcheck", "--fpcheck-report=parallel.json", "-n", "2"
    )
    serial.assert_outcomes(passed=7, failed=1)
    parallel.assert_outcomes(passed=7, failed=1)
    expected = _entries(pytester.path / "serial.json")
    assert _entries(pytester.path / "parallel.json") == expected
    assert expected["counts"] == {
        "verdicts": {"close": 8, "expected-bug": 1},
        "modules": {},
        "appearances": {},
        "gaps": {},
        "dual_deltas": {"custom_less_accurate": 1},
        "isolations": {},
        "probes": {"toward-zero": 2},
        "trees": {"float32": 2},
    }
    assert json.loads((pytester.path / "parallel.json").read_text())["run"]["workers"] == 2
    parallel.stdout.fnmatch_lines(  # the controller prints the merged tables
        [
            "*= fpcheck: round-off verdicts =*",
            "verdict              outside dtype            radius  test",
            "close                  0 / 8 float32               -  test_suite.py::test_close[[]1.0[]]",
            "expected-bug           4 / 4 float32               -  test_suite.py::test_bug",
            "9 verdicts: 8 close, 1 expected-bug",
            "*= fpcheck: dual-delta comparisons =*",
            "custom_less_accurate  equivalent*test_suite.py::test_half_sum",
            "*= fpcheck: matrix-multiply features =*",
            "*= fpcheck: revealed summation orders =*",
            "     n fanout depth dtype          test",
            "     4      4     1 float32        test_suite.py::test_trees[[]4[]]",
            "2 trees: 2 float32",
            "fpcheck: run report written to parallel.json",
        ]
    )
    serial.stdout.fnmatch_lines(  # -v: wider tables
        [
            "verdict              outside dtype            radius          shape worst ULP allclose  test",
            "expected-bug           4 / 4 float32               -              4         - failed    test_suite.py::test_bug",
            "     n fanout depth dtype         impl                 algorithm  test",
            "     4      4     1 float32       fused                fprev      test_suite.py::test_trees[[]4[]]",
        ]
    )


def test_without_fpcheck_nothing_is_collected_nor_printed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck-report=run.json", "-k", "not half_sum"
    )
    result.assert_outcomes(passed=7)
    assert "fpcheck: " not in "\n".join(line for line in result.stdout.lines if "===" in line)
    document = checked(pytester.path / "run.json")
    assert all(by_status == {} for by_status in document["counts"].values())
    assert document["totals"]["passed"] == 7  # the tests are there all the same
    result.stdout.fnmatch_lines(["fpcheck: run report written to run.json"])


OUTCOMES = """
import numpy as np
import pytest
import pytest_fpcheck as fp


def test_passes():
    fp.assert_roundoff_close(np.ones(3, np.float32), np.ones(3))


def test_expects_a_bug():
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(np.ones(4, np.float32), np.full(4, 1.5))


def test_fails():
    print("printed before failing")
    fp.assert_roundoff_close(np.ones(4, np.float32), np.full(4, 1.5))


def test_catches_one_bug_and_fails_on_another():
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(np.ones(2, np.float32), np.full(2, 1.5))
    fp.assert_roundoff_close(np.ones(2, np.float32), np.full(2, 2.5))


@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")


def test_errors(broken):
    pass


@pytest.mark.skip(reason="not on this machine")
def test_skipped():
    pass


@pytest.mark.xfail(reason="a known float16 overflow")
def test_xfails():
    fp.assert_roundoff_close(np.ones(2, np.float32), np.full(2, 1.5))


@pytest.mark.xfail(reason="fixed since")
def test_xpasses():
    pass
"""


@pytest.mark.parametrize("suffix", [".json", ".html"])
def test_every_test_has_its_outcome_and_a_failure_its_traceback_and_output(
    pytester: pytest.Pytester, suffix: str
) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck", f"--fpcheck-report=run{suffix}"
    )
    result.assert_outcomes(passed=2, failed=2, errors=1, skipped=1, xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines([f"fpcheck: run report written to run{suffix}"])
    document = checked(pytester.path / f"run{suffix}")
    assert document["totals"] == {
        "tests": 8,
        "failed": 2,
        "error": 1,
        "xpassed": 1,
        "expected-bug": 1,
        "passed": 1,
        "xfailed": 1,
        "skipped": 1,
    }
    tests = {test["test"].split("::")[1]: test for test in document["tests"]}
    assert {name: test["outcome"] for name, test in tests.items()} == {
        "test_passes": "passed",
        "test_expects_a_bug": "expected-bug",
        "test_fails": "failed",
        "test_catches_one_bug_and_fails_on_another": "failed",
        "test_errors": "error",
        "test_skipped": "skipped",
        "test_xfails": "xfailed",
        "test_xpasses": "xpassed",
    }
    failed = tests["test_fails"]
    assert failed["when"] == "call"
    assert "RoundoffMismatch" in failed["traceback"]
    assert failed["output"] == [
        {"name": "Captured stdout call", "text": "printed before failing\n"}
    ]
    assert failed["location"] == {"path": "test_outcomes.py", "line": 15}
    assert "the fixture broke" in tests["test_errors"]["traceback"]
    assert tests["test_errors"]["when"] == "setup"
    assert tests["test_skipped"]["reason"] == "not on this machine"
    assert tests["test_xfails"]["reason"] == "a known float16 overflow"
    assert "traceback" not in tests["test_passes"]
    # a bug the test caught is expected; the one that failed it is not
    verdicts = [
        (v["test"].split("::")[1], v["outside"], v.get("caught", False))
        for v in document["verdicts"]
    ]
    assert sorted(verdicts) == [
        ("test_catches_one_bug_and_fails_on_another", 2, False),
        ("test_catches_one_bug_and_fails_on_another", 2, True),
        ("test_expects_a_bug", 4, True),
        ("test_fails", 4, False),
        ("test_passes", 0, False),
        ("test_xfails", 2, False),
    ]
    assert tests["test_catches_one_bug_and_fails_on_another"]["findings"] == {
        "verdicts": {"bug": 1, "expected-bug": 1}
    }


TEARDOWN = """
import pytest


@pytest.fixture
def leaves_a_mess():
    yield
    raise RuntimeError("teardown broke")


def test_passes_then_its_teardown_fails(leaves_a_mess):
    print("the body ran")
"""


def test_a_failing_teardown_makes_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_teardown=TEARDOWN)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--fpcheck-report=run.json")
    result.assert_outcomes(passed=1, errors=1)
    [test] = checked(pytester.path / "run.json")["tests"]
    assert (test["outcome"], test["when"]) == ("error", "teardown")
    assert "teardown broke" in test["traceback"]
    assert {"name": "Captured stdout call", "text": "the body ran\n"} in test["output"]


TRACKED = """
import pytest
import torch
import pytest_fpcheck as fp
from pytest_fpcheck.diagnostics.nonfinite import watch_nonfinite


def test_tracked_bug():
    x = torch.linspace(-2, 2, 64, dtype=torch.float16)
    y = x * 3
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(y, (x.double() * 3).clamp(max=4.0))


def test_own_watch():
    x = torch.tensor([-4.0, 1.0])
    with watch_nonfinite() as watch:
        y = torch.sqrt(x)
    assert watch.appearances()[0].op == "aten.sqrt"
"""


def test_a_tracked_verdict_links_its_source_and_plots_its_elements(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(test_tracked=TRACKED)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck", "--fpcheck-report=run.html", "-k", "tracked_bug"
    )
    result.assert_outcomes(passed=1)
    [entry] = checked(pytester.path / "run.html")["verdicts"]
    assert entry["caught"] is True
    assert entry["provenance_sites"][0] == {
        "site": "aten.mul at test_tracked.py:9",
        "op": "aten.mul",
        "file": "test_tracked.py",
        "line": 9,
        "path": "test_tracked.py",
        "widening": entry["provenance_sites"][0]["widening"],
    }
    outside = [point for point in entry["points"] if point[2]]
    assert len(outside) == min(entry["outside"], 24)
    page = (pytester.path / "run.html").read_text()
    assert "<svg" not in page  # the plot is in the compressed view, drawn on demand
    from pytest_fpcheck.report.html import embedded

    block = embedded(page, "fpcheck-view")["verdicts"]["details"]["verdicts-0"]
    assert '<a href="test_tracked.py#L9" title="test_tracked.py">test_tracked.py:9</a>' in block
    assert block.count("<svg") == 1


def test_a_tests_own_watch_reaches_the_report(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(test_tracked=TRACKED)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck", "--fpcheck-report=run.json", "-k", "own_watch"
    )
    result.assert_outcomes(passed=1)
    [entry] = checked(pytester.path / "run.json")["appearances"]
    assert (entry["op"], entry["kind"], entry["watch"]) == ("aten.sqrt", "nan", "test")
    result.stdout.fnmatch_lines(["*= fpcheck: non-finite values that appeared =*"])


ISOLATED = """
import torch
import pytest_fpcheck as fp


def normalise(x):
    mean = x.mean(-1, keepdim=True)
    variance = (x * x).mean(-1, keepdim=True) - mean * mean  # cancels around 40
    return (x - mean) / torch.sqrt(variance + 1e-5)


def test_isolates():
    torch.manual_seed(0)
    x = torch.randn(16, 32) + 40.0
    isolation = fp.isolate(normalise, x.half(), reference=normalise(x.double()), tol=0.05)
    assert isolation.outcome == "isolated"
"""


def test_a_tests_own_isolation_reaches_the_report(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(test_isolated=ISOLATED)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck", "--fpcheck-report=run.json"
    )
    result.assert_outcomes(passed=1)
    [entry] = checked(pytester.path / "run.json")["isolations"]
    assert entry["test"] == "test_isolated.py::test_isolates"
    assert entry["enhance"] == "float64"
    assert entry["sites"]
    assert all("test_isolated.py:" in site["location"] for site in entry["sites"])
    result.stdout.fnmatch_lines(["*= fpcheck: isolated causes =*"])


@pytest.mark.parametrize("workers", [["-p", "no:xdist"], ["-n", "2"]], ids=["serial", "xdist"])
def test_pytest_html_shows_the_findings(pytester: pytest.Pytester, workers: list[str]) -> None:
    pytest.importorskip("pytest_html")
    if "-n" in workers:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_outcomes=OUTCOMES)
    result = pytester.runpytest_subprocess(
        *workers, "--fpcheck", "--html=page.html", "--self-contained-html",
        "-k", "passes or expects_a_bug or test_fails",
    )  # fmt: skip
    result.assert_outcomes(passed=2, failed=1, xpassed=1)
    # pytest-html keeps its rows as JSON in an attribute: unescape both
    page = html.unescape((pytester.path / "page.html").read_text()).replace('\\"', '"')
    assert '<th class="sortable" data-column-type="fpcheck">fpcheck</th>' in page
    assert '<td class="col-fpcheck">1 verdict: 1 expected-bug</td>' in page
    assert '<td class="col-fpcheck">1 verdict: 1 bug</td>' in page
    assert '<td class="col-fpcheck">1 verdict: 1 exact</td>' in page
    assert "worst at [0]: actual=1.0, expected=1.5" in page  # the extra with the details
