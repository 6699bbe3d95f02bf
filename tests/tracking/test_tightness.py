"""Tightness of matmul bounds (issue 3): for point inputs the radius equals RENDER's
Algorithm 1 up to O(u^2) and the outward-rounding terms; for interval inputs the midpoint-radius
product stays within Rump's factor 1.5 of the exact interval product."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")


def render_algorithm_1(
    a: np.ndarray, b: np.ndarray, eps_mul: float, eps_add: float
) -> tuple[np.ndarray, np.ndarray]:
    """RENDER's Algorithm 1 (element by element, point inputs)."""
    m = a.shape[1]
    lo = np.empty((a.shape[0], b.shape[1]))
    hi = np.empty_like(lo)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            products = a[i] * b[:, j]
            low = np.where(products >= 0, products * (1 - eps_mul), products * (1 + eps_mul))
            high = np.where(products >= 0, products * (1 + eps_mul), products * (1 - eps_mul))
            lo[i, j] = low.sum() - np.abs(low).sum() * (m - 1) * eps_add
            hi[i, j] = high.sum() + np.abs(high).sum() * (m - 1) * eps_add
    return lo, hi


def test_point_input_matmul_radius_equals_render_algorithm_1() -> None:
    """float32: the bound's own float64 evaluation terms are 2**-29 of it. (For a float64
    program they are of the bound's order: that is the price of computing it in float64.)"""
    torch.manual_seed(0)
    a, b = torch.randn(6, 200), torch.randn(200, 5)
    with fp.track():
        c = a @ b
    bounds = fp.bounds_of(c)
    u = 2.0**-24
    lo, hi = render_algorithm_1(a.double().numpy(), b.double().numpy(), u, u)
    # RENDER's enclosure before rounding to float32; ours is rounded outward onto float32
    render_radius = (hi - lo) / 2
    ulp = fp.formats.ulp(c.double().numpy(), "float32")
    assert (bounds.radius >= render_radius * (1 - 1e-6)).all()
    assert (bounds.radius <= render_radius * (1 + 1e-3) + ulp).all()


def test_interval_input_matmul_is_within_rumps_factor_of_the_exact_interval_product() -> None:
    rng = np.random.default_rng(0)
    mid_a, mid_b = rng.standard_normal((5, 40)), rng.standard_normal((40, 4))
    rad_a, rad_b = (
        np.abs(rng.standard_normal((5, 40))) * 0.1,
        np.abs(rng.standard_normal((40, 4))) * 0.1,
    )
    a = torch.tensor(mid_a)
    b = torch.tensor(mid_b)
    seed_a = fp.Bounds(mid_a - rad_a, mid_a + rad_a, mid_a, torch.float64, fp.format_of("float64"))
    seed_b = fp.Bounds(mid_b - rad_b, mid_b + rad_b, mid_b, torch.float64, fp.format_of("float64"))
    with fp.track(assume={a: seed_a, b: seed_b}):
        c = a @ b
    ours = fp.bounds_of(c).radius
    # the exact interval product: sum over k of the hull of the four endpoint products
    products = np.stack(
        [
            np.einsum("ik,kj->ikj", x, y)
            for x in (mid_a - rad_a, mid_a + rad_a)
            for y in (mid_b - rad_b, mid_b + rad_b)
        ]
    )
    exact = (products.max(axis=0) - products.min(axis=0)).sum(axis=1) / 2
    ratio = ours / exact
    assert (ratio >= 1 - 1e-9).all()
    assert (ratio <= 1.5).all(), ratio.max()
