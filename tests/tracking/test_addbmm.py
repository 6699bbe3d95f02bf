"""addbmm accumulates batch by batch into its result, rounding it to the result format after each
batch: its bound must compound over the batches (a per-batch bound summed once did not, and
excluded the values torch computes)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

import pytest_fpcheck as fp


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize(
    ("batches", "k", "alpha", "beta"), [(600, 1, 1.0, 1.0), (40, 7, 0.5, 1.5), (3, 4, 1.0, 0.0)]
)
def test_addbmm_encloses_the_computed_and_the_exact_value(
    dtype: torch.dtype, batches: int, k: int, alpha: float, beta: float
) -> None:
    generator = torch.Generator().manual_seed(batches + k)
    x = (torch.rand(batches, 2, k, generator=generator) + 1).to(dtype)
    y = (torch.rand(batches, k, 3, generator=generator) + 1).to(dtype)
    c = torch.randn(2, 3, generator=generator).to(dtype)
    with fp.track():
        out = torch.addbmm(c, x, y, alpha=alpha, beta=beta)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out.double().numpy()).all()
    xs, ys, cs = x.double().numpy(), y.double().numpy(), c.double().numpy()
    mpmath.mp.prec = 200
    for i in range(2):
        for j in range(3):
            terms = [
                mpmath.mpf(xs[b, i, t]) * mpmath.mpf(ys[b, t, j])
                for b in range(batches)
                for t in range(k)
            ]
            exact = mpmath.mpf(beta) * mpmath.mpf(cs[i, j]) + mpmath.mpf(alpha) * mpmath.fsum(terms)
            assert mpmath.mpf(bounds.lo[i, j]) <= exact <= mpmath.mpf(bounds.hi[i, j])


def test_a_float32_addbmm_over_many_batches_stays_tight() -> None:
    """The compounding factor grows with the batch count plus k (gamma_{k+1} + gamma_{b+2} in
    float32, plus the outward rounding of each end onto float32), not with batches times k."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(50, 4, 8, generator=generator) + 1
    y = torch.rand(50, 8, 4, generator=generator) + 1
    with fp.track():
        out = torch.addbmm(torch.zeros(4, 4), x, y)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    relative = (bounds.hi - bounds.lo) / np.abs(out.double().numpy())
    assert relative.max() < 2 * ((8 + 1) + (50 + 2) + 2) * 2.0**-24 * 1.01
    assert relative.max() < 2 * 50 * 8 * 2.0**-24 / 5
