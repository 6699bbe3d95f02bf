"""tanh's gradient in one compiled pass (``interval/kernels/composite.py``,
``tanh_backward_bounds``): bit for bit the three interval operations the rule states (|y|
squared, 1 minus it, times g, each rounded outward onto the compute format), on elements of
every kind (points and intervals, ends spanning 0, beyond 1, infinite, NaN, zero, subnormal,
huge), broadcast operands, float32 and float64; the rule on a tracked tanh's backward holds the
computed gradient and the exact one (mpmath)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.formats import FORMATS
from pytest_fpcheck.interval import elementwise as ew
from pytest_fpcheck.interval.core import Interval
from pytest_fpcheck.interval.kernels import tanh_backward_bounds

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")

_ONE = Interval.point(np.asarray(1.0))


def _composed(g: Interval, y: Interval, compute: str) -> Interval:
    fmt = FORMATS[compute]
    size = ew.absolute(y)
    square = ew.mul(size, size, fmt, operand_bits=64)
    return ew.mul(g, ew.sub(_ONE, square, fmt), fmt, operand_bits=64).to_format(fmt)


def _ends(rng: np.random.Generator, n: int, compute: str) -> tuple[np.ndarray, np.ndarray]:
    """Interval ends of every kind, on ``compute``'s grid."""
    special = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            2.0**-149,
            -(2.0**-149),
            1e-42,
            3e38,
            -3e38,
            np.inf,
            -np.inf,
            np.nan,
            1e300,
            0.5,
            -0.75,
            1.5,
        ]
    )
    lo = np.concatenate([rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n), special])
    width = np.abs(rng.standard_normal(lo.size)) * 2.0 ** rng.integers(-40, 4, lo.size)
    width[rng.random(lo.size) < 0.3] = 0.0  # points
    hi = lo + width
    hi[-len(special) :: 3] = np.inf
    if compute == "float32":
        with np.errstate(over="ignore"):
            lo = np.nextafter(lo.astype(np.float32), np.float32(-np.inf)).astype(np.float64)
            hi = np.nextafter(hi.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    return lo, np.maximum(hi, lo)


@pytest.mark.parametrize("compute", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(3))
def test_one_pass_gives_the_three_operations_bits(compute: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y_lo, y_hi = _ends(rng, 400, compute)
    g_lo, g_hi = _ends(rng, 400, compute)
    rng.shuffle(g_lo)
    g_hi = np.maximum(g_hi, g_lo)
    for g, y in [
        (Interval(g_lo, g_hi), Interval(y_lo, y_hi)),
        (Interval.point(g_lo), Interval(y_lo, y_hi)),
        (Interval(g_lo, g_hi), Interval.point(y_lo)),
        (Interval(g_lo[:1], g_hi[:1]), Interval(y_lo, y_hi)),  # broadcast
    ]:
        expected = _composed(g, y, compute)
        with np.errstate(all="ignore"):
            lo, hi = tanh_backward_bounds(g.lo, g.hi, y.lo, y.hi, FORMATS[compute])
        assert np.array_equal(lo, expected.lo, equal_nan=True)
        assert np.array_equal(hi, expected.hi, equal_nan=True)


def test_other_compute_formats_are_refused() -> None:
    x = np.zeros(3)
    with pytest.raises(ValueError, match="compute='bfloat16'"):
        tanh_backward_bounds(x, x, x, x, FORMATS["bfloat16"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_tracked_tanh_backward_holds_the_computed_and_exact_gradients(dtype: torch.dtype) -> None:
    torch.manual_seed(3)
    x = (torch.randn(64, 16) * 3).to(dtype).requires_grad_()
    with fp.track():
        y = torch.tanh(x * 1.25)
        (y * torch.linspace(-2, 2, 16, dtype=dtype)).sum().backward()
        bounds = fp.bounds_of(x.grad)
    assert bounds is not None
    assert bounds.contains(x.grad.double().numpy()).all()
    mpmath.mp.dps = 40
    weights = torch.linspace(-2, 2, 16, dtype=dtype).double().numpy()
    scaled = (x.detach() * 1.25).double().numpy()  # the product the run rounded, exactly
    for i, j in [(0, 0), (5, 3), (17, 15), (63, 8)]:
        exact = float(1.25 * weights[j] * (1 - mpmath.tanh(mpmath.mpf(float(scaled[i, j]))) ** 2))
        assert bounds.lo[i, j] <= exact <= bounds.hi[i, j]
