"""A sum keeps the sign its terms share (``interval/linalg.py``, ``reduce_sum``): terms all at
least 0 give a computed sum at least 0 in any order (each rounded addition of two such numbers
is at least 0), so the error allowance must not take the lower end below 0; an RMSNorm's mean of
squares whose enclosure reached below 0 made ``rsqrt(mean + eps)`` unbounded at Llama's width
256 (``docs/performance.md``). Checked against the exact sums (mpmath) and what PyTorch
computes at points of the enclosures, ends included; mixed signs and NaN keep the allowance."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")


def _box(seed: int, shape: tuple[int, ...], width: float) -> tuple[torch.Tensor, fp.Bounds]:
    """A float32 tensor and an enclosure around it, about ``width`` wide, holding 0 in each
    element's interval."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.standard_normal(shape) * 1e-3).float()
    lo = x.double().clamp(max=0) - torch.from_numpy(rng.uniform(0, width, shape))
    hi = x.double().clamp(min=0) + torch.from_numpy(rng.uniform(0, width, shape))
    return x, fp.hull(lo.float().double(), hi.float().double())


def _points(bounds: fp.Bounds, seed: int) -> list[torch.Tensor]:
    """Points of the enclosure as float32 tensors: its two corners, zero where the enclosure
    holds it, and random points."""
    rng = np.random.default_rng(seed)
    lo, hi = torch.from_numpy(bounds.lo), torch.from_numpy(bounds.hi)
    zero = torch.where((lo <= 0) & (hi >= 0), torch.zeros_like(lo), lo)
    drawn = [lo + (hi - lo) * torch.from_numpy(rng.uniform(0, 1, lo.shape)) for _ in range(6)]
    return [p.float() for p in (lo, hi, zero, *drawn)]


def _exact_sum_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact range of the last axis' sum, in mpmath at 50 digits, rounded outward."""
    mpmath.mp.dps = 50

    def rounded(row: np.ndarray, toward: float) -> float:
        exact = mpmath.fsum(mpmath.mpf(float(v)) for v in row)
        nearest = float(exact)
        if mpmath.mpf(nearest) == exact:
            return nearest
        return float(np.nextafter(nearest, toward))

    least = np.array([rounded(row, -np.inf) for row in lo])
    most = np.array([rounded(row, np.inf) for row in hi])
    return least, most


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_a_sum_of_squares_stays_at_least_zero(reduce: str) -> None:
    """Squares of enclosures holding 0, summed and averaged over 256 terms: the lower ends are
    0 (not the allowance's negative value), the enclosure holds the exact range and PyTorch's
    sums at points of the operand's enclosure, and an RMSNorm's reciprocal square root of it
    plus eps is bounded."""
    x, bounds = _box(0, (16, 256), 1e-2)
    with fp.track(assume={x: bounds}):
        squares = x * x
        total = squares.sum(-1) if reduce == "sum" else squares.mean(-1)
        scale = torch.rsqrt(total + 1e-6)
    squared = fp.bounds_of(squares)
    summed = fp.bounds_of(total)
    assert squared is not None
    assert summed is not None
    assert (squared.lo >= 0).all()
    assert (summed.lo == 0).all()  # the allowance alone reaches below 0
    least, most = _exact_sum_range(squared.lo, squared.hi)
    if reduce == "mean":
        least, most = least / 256, most / 256
    assert (summed.lo <= least).all()
    assert (most <= summed.hi).all()
    for point in _points(bounds, 1):
        computed = (point * point).sum(-1) if reduce == "sum" else (point * point).mean(-1)
        assert summed.contains(computed).all()
    scaled = fp.bounds_of(scale)
    assert scaled is not None
    assert np.isfinite(scaled.hi).all()
    assert scaled.hi.max() <= 1e3 * (1 + 1e-6)


def test_a_sum_of_nonpositive_terms_stays_at_most_zero() -> None:
    x, bounds = _box(2, (8, 128), 1e-2)
    with fp.track(assume={x: bounds}):
        total = (-(x * x)).sum(-1)
    summed = fp.bounds_of(total)
    assert summed is not None
    assert (summed.hi == 0).all()
    for point in _points(bounds, 3):
        assert summed.contains((-(point * point)).sum(-1)).all()


def test_mixed_signs_and_nan_keep_the_allowance() -> None:
    """Terms of both signs (an enclosure reaching below 0) or a NaN end: no end is moved to 0,
    and the enclosure still holds the computed sums."""
    x, bounds = _box(4, (8, 128), 1e-2)
    with fp.track(assume={x: bounds}):
        total = (x * x - 1e-9).sum(-1)  # lower ends of the terms below 0
    summed = fp.bounds_of(total)
    assert summed is not None
    assert (summed.lo < 0).all()
    for point in _points(bounds, 5):
        assert summed.contains((point * point - 1e-9).sum(-1)).all()
    y = torch.tensor([[1.0, float("nan"), 2.0], [1.0, 2.0, 3.0]])
    with fp.track():
        total = (y * y).sum(-1)
    summed = fp.bounds_of(total)
    assert summed is not None
    assert np.isneginf(summed.lo[0])
    assert np.isposinf(summed.hi[0])
    assert summed.lo[1] > 0
