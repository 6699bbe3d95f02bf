"""The erf form's GELU derivative in one compiled pass (``interval/kernels/composite.py``,
``gelu_erf_derivative_bounds``): bit for bit the NumPy evaluation the rule ``aten.gelu_backward``
made before (kept here as the reference: the derivative's end values, the hull with its extrema,
the kernel's error bound in the compute format, the NaN cases), on enclosures of every kind
(points, intervals around the extrema at -+sqrt 2, zero, subnormal, huge, infinite and NaN
ends) for float32 and float64 compute formats. The rule's enclosures of computed gradients are
checked in ``test_gelu_backward.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_fpcheck.formats import FORMATS, Format
from pytest_fpcheck.interval import elementwise as ew
from pytest_fpcheck.interval.core import Interval, gamma
from pytest_fpcheck.interval.rounding import down, up
from pytest_fpcheck.tracking.torch.rules import backward

pytest.importorskip("torch")


def _reference(x: Interval, c: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower ends, upper ends, where NaN is possible) as the rule evaluated them in NumPy."""
    inv = 1.0 / math.sqrt(2.0 * math.pi)

    def derivative(v: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return 0.5 * (1.0 + backward.erf64(v * math.sqrt(0.5))) + v * (
                np.exp(-0.5 * (v * v)) * inv
            )

    slack = 2.0**-44
    f_lo = derivative(x.lo)
    f_hi = f_lo if x.is_point else derivative(x.hi)
    with np.errstate(invalid="ignore"):
        low = np.minimum(f_lo - slack, f_hi - slack)
        high = np.maximum(f_lo + slack, f_hi + slack)
    if not x.is_point:
        (x_min, f_min), (x_max, f_max) = backward._EXTREMA["none"]
        holds = (x.lo <= x_min + 1e-6) & (x_min - 1e-6 <= x.hi)
        low = np.where(holds, np.minimum(low, f_min), low)
        holds = (x.lo <= x_max + 1e-6) & (x_max - 1e-6 <= x.hi)
        high = np.where(holds, np.maximum(high, f_max), high)
    low, high = down(low), up(high)
    magnitude = x.magnitude()
    largest = np.maximum(np.abs(low), np.abs(high))
    u, s, eps = c.unit_roundoff, c.smallest_subnormal, 2 * c.unit_roundoff
    k_erf, k_exp = ew.ULP_ERRORS["erf"], ew.ULP_ERRORS["exp"]
    a_eps, a_tiny = ew.ABSOLUTE_ERRORS.get("erf", (0.0, 0.0))
    erf_error = k_erf * u + a_eps * eps + a_tiny * c.smallest_normal
    cdf = 0.5 * (erf_error + 0.49 * gamma(3, u) + s + u * (2.0 + erf_error))
    _, h1, _, h3 = backward._PEAKS
    g4 = gamma(4, u)
    with np.errstate(all="ignore"):
        x_exp = (u / 2) * h3 + s * h1 + k_exp * (2 * u * h1 + s * magnitude)
        x_pdf = (1 + u) * (inv * (1 + g4) * x_exp + inv * g4 * h1 + magnitude * s / 2)
        x_pdf = x_pdf + u * inv * h1 + s / 2
        error = cdf + x_pdf + u * (largest + cdf + x_pdf)
        error = up(error * (1 + 2.0**-20))
        lo, hi = down(low - error), up(high + error)
        nan = ~np.isfinite(magnitude) | ~(np.maximum(-lo, hi) < c.max_finite) | np.isnan(error)
    return lo, hi, nan


def _ends(rng: np.random.Generator, compute: str) -> tuple[np.ndarray, np.ndarray]:
    root = math.sqrt(2.0)
    special = np.array(
        [
            0.0,
            -0.0,
            root,
            -root,
            root - 1e-7,
            -root + 2e-6,
            1e-45,
            -1e-310,
            40.0,
            -40.0,
            1e20,
            -1e38,
            1e200,
            np.inf,
            -np.inf,
            np.nan,
            3.0,
            -8.0,
        ]
    )
    lo = np.concatenate([rng.standard_normal(600) * 2.0 ** rng.integers(-12, 5, 600), special])
    width = np.abs(rng.standard_normal(lo.size)) * 2.0 ** rng.integers(-30, 3, lo.size)
    width[rng.random(lo.size) < 0.25] = 0.0
    hi = lo + width
    hi[-len(special) :: 4] = np.inf
    hi[-2] = np.nan
    if compute == "float32":
        with np.errstate(over="ignore", invalid="ignore"):
            lo = lo.astype(np.float32).astype(np.float64)
            hi = hi.astype(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return lo, np.where(hi < lo, lo, hi)


@pytest.mark.parametrize("compute", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(3))
def test_one_pass_gives_the_numpy_evaluations_bits(compute: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = FORMATS[compute]
    lo, hi = _ends(rng, compute)
    for x in (Interval(lo, hi), Interval.point(lo), Interval(lo.reshape(2, -1), hi.reshape(2, -1))):
        expected_lo, expected_hi, nan = _reference(x, c)
        result = backward._gelu_erf_derivative(x, c)
        whole = np.isneginf(result.lo) & np.isposinf(result.hi)
        assert (whole[nan]).all()
        assert np.array_equal(result.lo[~nan], expected_lo[~nan])
        assert np.array_equal(result.hi[~nan], expected_hi[~nan])
        assert nan.any()
        assert (~nan).sum() > 500
