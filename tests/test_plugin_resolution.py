"""The plugin and honest verdicts (issue 20): the ``fpcheck_max_resolution`` option (ini, flag,
marker), inconclusive verdicts counted and shown under ``--fpcheck``, module comparisons in the
run report naming their modules."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

WIDE = """
import numpy as np
import pytest_fpcheck as fp

def wide():
    actual = np.array([1.0, 2.0])
    bounds = fp.Bounds(np.array([0.8, 1.6]), np.array([1.2, 2.4]), actual, np.float64,
                       fp.format_of("float64"))
    return actual, bounds

def test_wide_enclosure():
    actual, bounds = wide()  # resolution 0.2: worse than the default threshold, 0.1
    fp.assert_roundoff_close(actual, actual * 1.01, bounds=bounds)
"""


def test_an_inconclusive_verdict_fails_and_is_counted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_wide=WIDE)
    report = pytester.path / "out.json"
    result = pytester.runpytest_subprocess("--fpcheck", f"--fpcheck-report={report}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *pytest_fpcheck.errors.InconclusiveVerdict: fpcheck verdict 'inconclusive': *",
            "E *why inconclusive: the enclosure's resolution 0.2 is worse than max_resolution=0.1*",
            "*= fpcheck: round-off verdicts =*",
            "inconclusive*0 / 2*float64*test_wide.py::test_wide_enclosure",
            "1 verdict: 1 inconclusive",
        ]
    )
    document = json.loads(report.read_text())
    (verdict,) = document["verdicts"]
    assert (verdict["kind"], verdict["resolution"], verdict["max_resolution"]) == (
        "inconclusive",
        pytest.approx(0.2),
        0.1,
    )
    assert document["counts"]["verdicts"] == {"inconclusive": 1}


@pytest.mark.parametrize(
    ("args", "ini", "marker"),
    [
        (["--fpcheck-max-resolution=0.3"], "", ""),
        ([], "[pytest]\nfpcheck_max_resolution = 0.3\n", ""),
        ([], "", "@pytest.mark.fpcheck(max_resolution=0.3)\n"),
    ],
)
def test_the_threshold_is_set_by_flag_ini_or_marker(
    pytester: pytest.Pytester, args: list[str], ini: str, marker: str
) -> None:
    source = WIDE.replace(
        "def test_wide_enclosure", "import pytest\n" + marker + "def test_wide_enclosure"
    )
    pytester.makepyfile(test_wide=source)
    if ini:
        pytester.makefile(".ini", pytest=ini)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)


def test_a_bad_threshold_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_wide=WIDE)
    result = pytester.runpytest_subprocess("--fpcheck-max-resolution=0.7")
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-fpcheck: --fpcheck-max-resolution / fpcheck_max_resolution=0.7 (type "
            "float) is not valid: expected a relative deviation strictly between 0 and 0.5 *"
        ]
    )


MODULES = """
import pytest
import torch
import pytest_fpcheck as fp

def models():
    torch.manual_seed(0)
    custom = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).half()
    reference = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).double()
    reference.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    return custom, reference

def test_module_bug():
    custom, reference = models()
    custom[1].approximate = "tanh"  # a different GELU than the reference's
    fp.assert_modules_roundoff_close(custom, reference, torch.randn(4, 8).half())

def test_modules_pass():
    custom, reference = models()
    fp.assert_modules_roundoff_close(custom, reference, torch.randn(4, 8).half())
"""


def test_module_comparisons_name_their_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_modules=MODULES)
    report = pytester.path / "out.json"
    result = pytester.runpytest_subprocess("--fpcheck", f"--fpcheck-report={report}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E *pytest_fpcheck.errors.RoundoffMismatch: fpcheck modules 'bug': Type-II (bug) in 1 (GELU)*"
        ]
    )
    document = json.loads(report.read_text())
    bugs = [v for v in document["verdicts"] if v["kind"] == "bug"]
    assert {(v["test"], v["module"], v["module_class"], v["label"]) for v in bugs} == {
        ("test_modules.py::test_module_bug", "1", "GELU", "output")
    }
    passing = [v for v in document["verdicts"] if v["test"].endswith("test_modules_pass")]
    assert {v["module"] for v in passing} == {"<root>", "0", "1"}
