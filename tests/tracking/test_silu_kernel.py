"""SiLU's enclosure in one compiled pass (``interval/kernels/composite.py``,
``unimodal_bounds``, the rule ``aten.silu``): bit for bit the NumPy evaluation the rule made
before through ``rules.composite._unimodal`` (kept here as the reference: the hull of the end
values and of the minimum at -1.27846, the allowance 6.5 u |f| + 2**(emin + 12), the float64
slack, stepped outward, NaN as the whole line, then rounded onto the format), on enclosures of
every kind (points, intervals around the minimum, zero, subnormal, huge, infinite and NaN ends),
rounded to nearest and outward, onto float32, bfloat16, float16 and float64. The rule's
enclosures of computed values are checked by the soundness programs (``silu``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pytest_fpcheck as fp
from pytest_fpcheck.formats import FORMATS, Format
from pytest_fpcheck.interval import elementwise as ew
from pytest_fpcheck.interval.core import Interval
from pytest_fpcheck.interval.kernels import unimodal_bounds
from pytest_fpcheck.interval.rounding import down, up
from pytest_fpcheck.tracking.torch.rules import composite


def _reference(a: Interval, c: Format) -> Interval:
    """SiLU's enclosure onto float64 as ``_unimodal`` evaluated it in NumPy."""
    u, floor = c.unit_roundoff, math.ldexp(1.0, c.emin + 12)
    minimum = composite._SILU_MINIMUM
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        f_lo = composite._silu(a.lo)
        f_hi = f_lo if a.is_point else composite._silu(a.hi)
        low = np.minimum(f_lo, f_hi)
        if not a.is_point:
            near = (a.lo <= minimum[0] + 1e-9) & (minimum[0] - 1e-9 <= a.hi)
            low = np.where(near, np.minimum(low, minimum[1]), low)
        high = np.maximum(f_lo, f_hi)
        x_mag = a.magnitude()
        f_mag = np.maximum(np.abs(low), np.abs(high))
        spread = 6.5 * u * f_mag + floor + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
        spread = np.where(np.isnan(spread), np.inf, spread)
        result = Interval(down(low - spread), up(high + spread))
    return ew.everything_where_nan(result)


def _enclosures() -> list[Interval]:
    rng = np.random.default_rng(23)
    centre = rng.standard_normal(3000) * 10.0 ** rng.integers(-3, 3, 3000)
    special = np.array([0.0, -0.0, 5e-324, -1e-310, -1.2784645, -1.3, 88.0, -88.0, 1e300])
    special = np.concatenate([special, [-1e300, np.inf, -np.inf, np.nan, 3.4e38, -745.0, 710.0]])
    centre[: special.size] = special
    width = np.abs(rng.standard_normal(3000)) * rng.choice([0.0, 1e-9, 1e-3, 0.5, 30.0], 3000)
    with np.errstate(invalid="ignore"):
        upper = centre + width
    upper[special.size : 2 * special.size] = np.nan  # a NaN upper end
    lower = np.where(np.isnan(upper), centre, np.fmin(centre, upper))
    return [
        Interval(lower, np.where(np.isnan(upper), upper, np.fmax(centre, upper))),
        Interval.point(centre),
    ]


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float16", "float64"])
def test_the_pass_gives_the_bits_of_the_numpy_evaluation(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled pass (its NumPy twin, which answers while it compiles, is checked against
    it in ``tests/test_fallbacks.py``)."""
    monkeypatch.setenv("FPCHECK_JIT", "eager")
    fmt = FORMATS[name]
    compute = FORMATS["float64" if name == "float64" else "float32"]
    allowance = (6.5 * compute.unit_roundoff, math.ldexp(1.0, compute.emin + 12))
    for a in _enclosures():
        expected = _reference(a, compute)
        for target, reference in ((FORMATS["float64"], expected), (fmt, expected.to_format(fmt))):
            lo, hi = unimodal_bounds(
                a.lo, a.hi, a.is_point, composite._silu, composite._SILU_MINIMUM, allowance, target
            )
            assert np.array_equal(lo.view(np.int64), np.asarray(reference.lo).view(np.int64))
            assert np.array_equal(hi.view(np.int64), np.asarray(reference.hi).view(np.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_encloses_what_torch_computes_over_the_enclosure(dtype: torch.dtype) -> None:
    """The rule's enclosure holds PyTorch's SiLU at points drawn from the input's enclosure,
    its ends and the minimum's abscissa included."""
    rng = np.random.default_rng(24)
    centre = torch.from_numpy(rng.standard_normal(4000) * 3).to(dtype)
    lo = centre.double() - torch.from_numpy(np.abs(rng.standard_normal(4000)) * 0.3)
    hi = centre.double() + torch.from_numpy(np.abs(rng.standard_normal(4000)) * 0.3)
    lo, hi = lo.to(dtype).double(), hi.to(dtype).double()
    with fp.track(assume={centre: fp.hull(lo, hi)}):
        y = torch.nn.functional.silu(centre)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    inside = (lo <= -1.2784645) & (hi >= -1.2784645)
    points = [lo, hi, torch.where(inside, torch.tensor(-1.2784645, dtype=torch.float64), lo)]
    points += [lo + (hi - lo) * torch.from_numpy(rng.uniform(0, 1, 4000)) for _ in range(4)]
    for point in points:
        computed = torch.nn.functional.silu(point.to(dtype)).double().numpy()
        assert ((bounds.lo <= computed) & (computed <= bounds.hi)).all()
