"""A Python number times a float16 or bfloat16 tensor on the CPU (issue 20, part 3): ATen takes
the number in float32, so the rule rounds it onto float32, not onto the tensor's format. Pinned:
torch's values are those of float32 arithmetic with the number in float32, bit for bit; the
enclosure holds them and the exact product (``fractions``: the number as the double it is), and
on a point input it is at most the two grid points around the result."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

REDUCED = [torch.bfloat16, torch.float16]
NUMBERS = [32**-0.5, 0.1, 1 / 3, -2.718281828459045, 3.3e4, 1e-30, 1e-50, 1e39, 7, True]
LAYOUTS = {
    "contiguous": lambda dtype: (3 * torch.randn(200)).to(dtype),
    "strided": lambda dtype: (3 * torch.randn(20, 10)).to(dtype).t(),
    "0-d": lambda dtype: (3 * torch.randn(())).to(dtype),
    "broadcast": lambda dtype: (3 * torch.randn(7, 1)).to(dtype).expand(7, 9),
    "extremes": lambda dtype: torch.tensor(
        [0.0, -0.0, 6e-8, 1e-38, 6e4, 3e38, float("inf"), float("nan")]
    ).to(dtype),
}
PRODUCTS = {
    "x * s": lambda x, s: x * s,
    "s * x": lambda x, s: s * x,
    "mul_": lambda x, s: x.clone().mul_(s),
}


@pytest.fixture(autouse=True)
def seed() -> None:
    torch.manual_seed(0)


def _exact(x: torch.Tensor, s: float) -> tuple[np.ndarray, np.ndarray]:
    """x * s exactly, as float64 [down, up] (NaN where x is; infinities as they are)."""
    values = x.double().numpy().ravel()
    down, up = np.empty(values.shape), np.empty(values.shape)
    for i, v in enumerate(values):
        if not np.isfinite(v) or not np.isfinite(float(s)):
            down[i] = up[i] = v * float(s)
            continue
        exact = Fraction(float(v)) * Fraction(float(s))
        nearest = float(exact)
        down[i] = np.nextafter(nearest, -np.inf) if Fraction(nearest) > exact else nearest
        up[i] = np.nextafter(nearest, np.inf) if Fraction(nearest) < exact else nearest
    return down.reshape(x.shape), up.reshape(x.shape)


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("product", list(PRODUCTS))
def test_the_number_is_taken_in_float32_and_enclosed(
    dtype: torch.dtype, layout: str, product: str
) -> None:
    x = LAYOUTS[layout](dtype)
    for s in NUMBERS:
        with np.errstate(over="ignore"):
            in_float32 = (x.float() * torch.tensor(float(s), dtype=torch.float32)).to(dtype)
        y = PRODUCTS[product](x, s)
        assert torch.equal(y.isnan(), in_float32.isnan())
        assert torch.equal(y.nan_to_num(), in_float32.nan_to_num()), (s, layout)
        with fp.track():
            tracked = PRODUCTS[product](x, s)
            bounds = fp.bounds_of(tracked)
        assert torch.equal(tracked.nan_to_num(), y.nan_to_num())
        assert bounds.contains(tracked).all(), s
        down, up = _exact(x, s)
        finite = ~np.isnan(down)
        assert ((bounds.lo <= down) & (up <= bounds.hi))[finite].all(), s


@pytest.mark.parametrize("dtype", REDUCED)
def test_a_point_input_times_a_number_is_at_most_two_grid_points_wide(dtype: torch.dtype) -> None:
    """Rounded onto the tensor's format, the number alone would make the product's range a
    relative 2**-8 (bfloat16) or 2**-11 (float16) wide before its own rounding."""
    x = (3 * torch.randn(1000)).to(dtype)
    with fp.track():
        y = x * 32**-0.5
        bounds = fp.bounds_of(y)
    spacing = fp.formats.ulp(y.double().numpy(), str(dtype).removeprefix("torch."))
    assert (bounds.hi - bounds.lo <= spacing).all()
