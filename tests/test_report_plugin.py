"""The run report through the plugin, end to end: what is collected and printed with and without
--fpcheck, -v, the HTML page, and the same report from two xdist workers as from one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import numpy as np
import pytest
import pytest_fpcheck as fp
from pytest_fpcheck.diagnostics.order import SummationTree
from pytest_fpcheck.report.sink import publish


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
    two runs write their figures into different folders)."""
    document = json.loads(path.read_text())
    for entry in document["dual_deltas"]:
        assert Path(entry.pop("plot")).is_file()
    return {key: document[key] for key in ("counts", "verdicts", "dual_deltas", "probes", "trees")}


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
        "verdicts": {"bug": 1, "close": 8},
        "appearances": {},
        "dual_deltas": {"custom_less_accurate": 1},
        "isolations": {},
        "probes": {"toward-zero": 2},
        "trees": {"float32": 2},
    }
    assert json.loads((pytester.path / "parallel.json").read_text())["run"]["workers"] == 2
    parallel.stdout.fnmatch_lines(  # the controller prints the merged tables
        [
            "*= fpcheck: round-off verdicts =*",
            "verdict           outside dtype            radius  test",
            "bug                 4 / 4 float32               -  test_suite.py::test_bug",
            "9 verdicts: 1 bug, 8 close",
            "*= fpcheck: dual-delta comparisons =*",
            "custom_less_accurate  equivalent*test_suite.py::test_half_sum",
            "*= fpcheck: matrix-multiply features =*",
            "*= fpcheck: revealed summation orders =*",
            "     n fanout depth dtype          test",
            "     4      4     1 float32        test_suite.py::test_trees[[]4[]]",
            "2 trees: 2 float32",
        ]
    )
    serial.stdout.fnmatch_lines(  # -v: wider tables
        [
            "verdict           outside dtype            radius          shape worst ULP allclose  test",
            "bug                 4 / 4 float32               -              4         - failed    test_suite.py::test_bug",
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
    counts = json.loads((pytester.path / "run.json").read_text())["counts"]
    assert all(by_status == {} for by_status in counts.values())
