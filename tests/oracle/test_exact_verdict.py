"""Verdicts against the exact result: ``expected=fp.exact_reference(...)`` judges a kernel
two-sided against an enclosure of the exact result, says so, and shows the note on a float64
reference that is wrong; its bad-argument path is pinned."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.errors import InvalidArgument, RoundoffMismatch

pytest.importorskip("flint")
torch = pytest.importorskip("torch")


def textbook(x: Any) -> Any:
    return torch.sqrt(x + 1) - torch.sqrt(x)


def rewritten(x: Any) -> Any:
    return 1 / (torch.sqrt(x + 1) + torch.sqrt(x))


X = torch.tensor([1e8, 1e10, 1e12, 1e14], dtype=torch.float32)


def test_a_correct_kernel_is_roundoff_against_the_exact_result() -> None:
    with fp.track():
        out = rewritten(X)
    exact = fp.exact_reference(textbook, X)
    verdict = fp.assert_roundoff_close(out, exact)
    assert verdict.kind == "roundoff"
    assert verdict.two_sided
    report = verdict.report()
    assert report.startswith(
        "fpcheck verdict 'roundoff': Type-I (round-off): the difference is within the "
        "round-off that the computation of actual can produce, judged against the exact result."
    )
    assert (
        "0 / 4 (0%) elements where the enclosures of actual and the exact result are disjoint"
        in report
    )
    assert "note: the float64 evaluation of textbook is off by more than 2**-26" in report
    assert fp.classify(out, exact).kind == "roundoff"


def test_a_wrong_kernel_is_a_bug_against_the_exact_result() -> None:
    with fp.track():
        out = rewritten(X) * 1.001  # a planted relative error of 1e-3
    exact = fp.exact_reference(textbook, X)
    with pytest.raises(RoundoffMismatch) as raised:
        fp.assert_roundoff_close(out, exact)
    report = str(raised.value)
    assert report.startswith(
        "fpcheck verdict 'bug': Type-II (bug): the difference is more than round-off can "
        "explain, judged against the exact result."
    )
    assert "elements where the enclosures of actual and the exact result are disjoint" in report


def test_expected_bounds_beside_expected_bounds_is_refused() -> None:
    exact = fp.exact_reference(textbook, X)
    message = (
        "expected_bounds=<pytest_fpcheck array of shape (4,) and dtype float64> (type Bounds) is "
        "not valid: expected None when expected is a Bounds (its own enclosure is used)."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fp.classify(np.zeros(4, dtype=np.float32), exact, expected_bounds=exact)
