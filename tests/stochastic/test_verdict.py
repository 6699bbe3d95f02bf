"""Verdicts from stochastic bounds: "estimated, not proven", with the confidence and the seed, in
the one message layout (pinned whole), in the run report's record; a computed value outside the
interval is a note, not an internal error."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.assertions.record import collecting  # noqa: E402
from pytest_fpcheck.errors import RoundoffMismatch  # noqa: E402


def _program(x: torch.Tensor) -> torch.Tensor:
    return (x.to(torch.bfloat16) * 3).exp()


X = torch.linspace(-1, 1, 6)
REFERENCE = (X.double() * 3).exp()


def test_a_roundoff_verdict_says_estimated_not_proven() -> None:
    bounds = fp.stochastic_bounds(_program, X, seed=7)
    with collecting() as verdicts:
        verdict = fp.assert_roundoff_close(_program(X), REFERENCE, bounds=bounds)
    assert verdict.kind == "roundoff"
    assert verdict.report() == ROUNDOFF_MESSAGE
    record = verdicts[0].to_dict()
    assert record["estimate"] == {
        "method": "stochastic arithmetic",
        "samples": 16,
        "confidence": 0.999,
        "seed": 7,
    }


def test_a_bug_verdict_says_estimated_not_proven() -> None:
    bounds = fp.stochastic_bounds(_program, X, seed=7)
    with pytest.raises(RoundoffMismatch) as raised:
        fp.assert_roundoff_close(_program(X), REFERENCE * 1.05, bounds=bounds)
    assert str(raised.value) == BUG_MESSAGE


def test_actual_outside_the_interval_is_a_note_not_an_internal_error() -> None:
    bounds = fp.stochastic_bounds(_program, X, seed=7)
    elsewhere = _program(X) + 1
    verdict = fp.classify(elsewhere, REFERENCE, bounds=bounds)
    assert verdict.notes[-1] == (
        "the computed actual lies outside its stochastic interval at 6 / 6 elements: a single "
        "run may (rarely, at the stated confidence), or actual was not computed by the function "
        "the bounds were estimated for"
    )
    assert np.all(bounds.contains(REFERENCE.numpy()))


def test_proven_bounds_record_no_estimate() -> None:
    with fp.track():
        out = _program(X)
    assert fp.classify(out, REFERENCE).to_dict()["estimate"] is None


ROUNDOFF_MESSAGE = (
    "fpcheck verdict 'roundoff': Type-I (round-off), estimated, not proven (stochastic arithmetic, 16 runs, confidence 0.999, seed 7): the difference is within the round-off that the computation of actual can produce."
    + "\n"
    "0 / 6 (0%) expected elements outside the round-off enclosure of actual" + "\n"
    "enclosure: median radius 3.9 ULP (bfloat16)" + "\n"
    "resolution: 0.0267 relative (the median element flags a deviation of that size); 100% of the elements would reject a factor of 2"
    + "\n"
    "note: stochastic arithmetic, estimated, not proven: 16 randomly rounded runs (seed=7), interval at confidence 0.999 over all elements (Student's t quantile 4.97, 15 degrees of freedom); median 2.41 significant digits"
    + "\n"
    "plain allclose (rtol=0.016, atol=1e-05): would have passed"
)
BUG_MESSAGE = (
    "fpcheck verdict 'bug': Type-II (bug), estimated, not proven (stochastic arithmetic, 16 runs, confidence 0.999, seed 7): the difference is more than round-off can explain."
    + "\n"
    "6 / 6 (100%) expected elements outside the round-off enclosure of actual" + "\n"
    "worst at index (5,): actual=20.125, expected=21.089813769347053, enclosure=[19.654157520004404, 20.517717479995596]"
    + "\n"
    "  outside by 0.572096 = 1.325 radii = 4.577 ULP (bfloat16)" + "\n"
    "first offenders:" + "\n"
    "  (0,): actual=0.0498046875, expected=0.052276421786257146, enclosure=[0.04910251098189128, 0.05044582886185872]"
    + "\n"
    "  (1,): actual=0.1640625, expected=0.1735638202184136, enclosure=[0.15810944845955832, 0.17257902810294168]"
    + "\n"
    "  (2,): actual=0.546875, expected=0.5762522385071134, enclosure=[0.5349055760653907, 0.5632389551846093]"
    + "\n"
    "  (3,): actual=1.828125, expected=1.913224671987787, enclosure=[1.7886783943188194, 1.8538997306811806]"
    + "\n"
    "  (4,): actual=6.0625, expected=6.352130291973341, enclosure=[5.808492398535183, 6.300882601464817]"
    + "\n"
    "enclosure: median radius 3.9 ULP (bfloat16)" + "\n"
    "resolution: 0.0267 relative (the median element flags a deviation of that size); 100% of the elements would reject a factor of 2"
    + "\n"
    "note: stochastic arithmetic, estimated, not proven: 16 randomly rounded runs (seed=7), interval at confidence 0.999 over all elements (Student's t quantile 4.97, 15 degrees of freedom); median 2.41 significant digits"
    + "\n"
    "plain allclose (rtol=0.016, atol=1e-05): would have failed, 6 / 6 (100%) mismatched; greatest absolute difference 0.964814 at (5,), greatest relative difference 0.0547425 at (1,)"
)
