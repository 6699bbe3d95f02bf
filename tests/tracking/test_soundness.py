"""Soundness, the acceptance test of the bounds engine: for random programs over float16,
bfloat16 and float32 (subnormals, values near overflow, cancellation, ties), the exact value
(mpmath, 60 digits) and the value PyTorch computed both lie in the recorded enclosure. Zero
violations is the only pass. The long campaign is benchmarks/soundness_campaign.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import pytest_fpcheck as fp
from pytest_fpcheck.interval.bounds import contains

torch = pytest.importorskip("torch")

from .programs import Undefined, exact_to_float, programs, run_exact, run_torch  # noqa: E402


def check_program(program, mode: str = "rigorous", device: str = "cpu") -> None:
    """The computed and the exact value lie in the enclosure; a posteriori, the program's value
    with every step in float64 too (``track(mode="a_posteriori")``'s promise). ``device``:
    where the program runs (the CUDA campaign of ``benchmarks/soundness_campaign.py``)."""
    with fp.track(mode=mode, strict=True):  # an operation without a rule must fail here
        out = run_torch(program, device=device)
    value = out.detach().double().cpu().numpy()
    bounds = fp.bounds_of(out)
    # no record: tracking saw only exact steps (neg, abs, ...), the value is its own enclosure
    lo, hi = (value, value) if bounds is None else (bounds.lo, bounds.hi)
    assert contains(lo, hi, value).all(), (program, value, lo, hi)
    if mode == "a_posteriori":
        wide = run_torch(program, float64=True, device=device).cpu().numpy()
        held = contains(lo, hi, wide)
        assert held.all(), (program, wide[~held], lo[~held], hi[~held])
    try:
        exact = run_exact(program)
    except Undefined:
        return
    down, up = exact_to_float(exact)
    with np.errstate(invalid="ignore"):
        inside = (lo <= down) & (up <= hi)
    bad = ~(inside | np.isneginf(lo) & np.isposinf(hi))
    assert not bad.any(), (program, down[bad], lo[bad], hi[bad], value[bad])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_exact_and_computed_values_lie_in_the_bounds(program) -> None:
    check_program(program)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_a_posteriori_bounds_hold_the_exact_computed_and_float64_values(program) -> None:
    check_program(program, "a_posteriori")
