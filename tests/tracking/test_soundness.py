"""Soundness, the acceptance test of the bounds engine: for random programs over float16,
bfloat16 and float32 (subnormals, values near overflow, cancellation, ties), the exact value
(mpmath, 60 digits) and the value PyTorch computed both lie in the recorded enclosure. Zero
violations is the only pass. The long campaign is benchmarks/soundness_campaign.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from .programs import Undefined, exact_to_float, programs, run_exact, run_torch  # noqa: E402


def check_program(program) -> None:
    with fp.track(strict=True):  # an operation without a rule must fail here, not be a gap
        out = run_torch(program)
    bounds = fp.bounds_of(out)
    assert bounds is not None, program
    value = out.detach().double().numpy()
    assert bounds.contains(value).all(), (program, value, bounds.lo, bounds.hi)
    try:
        exact = run_exact(program)
    except Undefined:
        return
    down, up = exact_to_float(exact)
    with np.errstate(invalid="ignore"):
        inside = (bounds.lo <= down) & (up <= bounds.hi)
    unbounded = np.isneginf(bounds.lo) & np.isposinf(bounds.hi)
    bad = ~(inside | unbounded)
    assert not bad.any(), (program, down[bad], bounds.lo[bad], bounds.hi[bad], value[bad])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_exact_and_computed_values_lie_in_the_bounds(program) -> None:
    check_program(program)
