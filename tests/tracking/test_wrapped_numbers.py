"""A Python number with a float16 or bfloat16 tensor on the CPU, through the overload that
ATen's own loops call (``t.mul_(scalar)`` with a ``Scalar``: ``aten.mul_.Scalar``, what the
foreach kernels' CPU path runs for each tensor).

``mul_.Scalar`` takes the number rounded to the tensor's format before the product, where
``x * s``, ``x.mul_(s)`` (``mul_.Tensor``) and ``mul.Scalar`` take it in float32 (pinned here,
bit for bit). Tracking once ran ``_foreach_mul_(tensors, s)`` as a loop over ``mul_.Tensor``
(the overload packet's choice for a number) and so computed another product than the untracked
run; the loop now calls the overload ATen calls, and the rule for ``mul_.Scalar`` rounds the
number outward onto the tensor's format. Checked: the values of an untracked run, bit for bit,
and bounds holding both those values and the exact product (``fractions``: the number as the
double it is), over subnormal, overflowing, cancelling and signed-zero inputs.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

REDUCED = [torch.bfloat16, torch.float16]
NUMBERS = [1.7, 0.1, 1 / 3, -2.718281828459045, 3.3e4, 7e4, 1e-30, 1e-50, 1e39, -1e-7, 7, True]
SHAPES = {"0-d": (), "n-d": (40,)}


@pytest.fixture(autouse=True)
def seed() -> None:
    torch.manual_seed(0)


def _inputs(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """Random values of three magnitudes; for n-d tensors also zeros, subnormals, the largest
    finite values and infinities."""
    if not shape:
        return (3 * torch.randn(())).to(dtype)
    special = torch.tensor([0.0, -0.0, 6e-8, 1e-40, 6e4, 3e38, float("inf"), -float("inf")])
    values = torch.cat([3 * torch.randn(16), 1e-3 * torch.randn(8), 1e3 * torch.randn(8), special])
    return values.to(dtype)


def _in_the_tensors_format(x: torch.Tensor, s: float) -> torch.Tensor:
    """x * s with s first converted to x's format, the product in float32, rounded to x's."""
    with np.errstate(over="ignore"):
        return (x.float() * torch.tensor(float(s)).to(x.dtype).float()).to(x.dtype)


def _in_float32(x: torch.Tensor, s: float) -> torch.Tensor:
    with np.errstate(over="ignore"):
        return (x.float() * torch.tensor(float(s), dtype=torch.float32)).to(x.dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(
        a.nan_to_num().view(torch.int16), b.nan_to_num().view(torch.int16)
    )


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
def test_mul_scalar_in_place_takes_the_number_in_the_tensors_format(
    dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    """What the rule models, pinned: only the in-place Scalar overload (and the foreach kernel,
    which calls it) rounds the number to the tensor's format first."""
    x = _inputs(dtype, shape)
    for s in NUMBERS:
        assert _same(torch.ops.aten.mul_.Scalar(x.clone(), s), _in_the_tensors_format(x, s)), s
        values = [x.clone()]
        torch._foreach_mul_(values, s)
        assert _same(values[0], _in_the_tensors_format(x, s)), s
        for product in (x * s, x.clone().mul_(s), torch.ops.aten.mul.Scalar(x, s)):
            assert _same(product, _in_float32(x, s)), s
    differs = [s for s in NUMBERS if not _same(_in_float32(x, s), _in_the_tensors_format(x, s))]
    assert differs  # the two conversions are told apart by these inputs


def _exact_ends(x: torch.Tensor, s: float) -> tuple[np.ndarray, np.ndarray]:
    """x * s exactly, as float64 [down, up] (NaN where it is undefined: inf * 0)."""
    values = x.double().numpy().ravel()
    down, up = np.empty(values.shape), np.empty(values.shape)
    for i, v in enumerate(values):
        if not np.isfinite(v):
            with np.errstate(invalid="ignore"):
                down[i] = up[i] = v * float(s)
            continue
        exact = Fraction(float(v)) * Fraction(float(s))
        nearest = float(exact) if abs(exact) < Fraction(np.finfo(np.float64).max) else np.inf
        down[i] = np.nextafter(nearest, -np.inf) if Fraction(nearest) > exact else nearest
        up[i] = np.nextafter(nearest, np.inf) if Fraction(nearest) < exact else nearest
    return down.reshape(x.shape), up.reshape(x.shape)


FOREACH = {
    "mul_.Scalar": lambda x, s: [torch.ops.aten.mul_.Scalar(x.clone(), s)],
    "_foreach_mul_": lambda x, s: _foreach_mul(x, s),
}


def _foreach_mul(x: torch.Tensor, s: float) -> list[torch.Tensor]:
    values = [x.clone(), x.flip(0).clone() if x.dim() else (-x).clone()]
    torch._foreach_mul_(values, s)
    return values


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
@pytest.mark.parametrize("program", list(FOREACH))
def test_tracked_products_are_the_plain_ones_and_enclosed(
    dtype: torch.dtype, shape: tuple[int, ...], program: str
) -> None:
    x = _inputs(dtype, shape)
    run = FOREACH[program]
    for s in NUMBERS:
        plain = run(x, s)
        with fp.track():
            tracked = run(x, s)
            bounds = [fp.bounds_of(t) for t in tracked]
        operands = [x, x.flip(0) if x.dim() else -x]
        for result, reference, b, operand in zip(tracked, plain, bounds, operands, strict=False):
            assert _same(result, reference), s
            assert b.contains(result).all(), s
            down, up = _exact_ends(operand, s)
            defined = ~np.isnan(down)
            assert ((b.lo <= down) & (up <= b.hi))[defined].all(), s


@pytest.mark.parametrize("dtype", REDUCED)
def test_a_point_times_a_number_in_place_spans_at_most_three_grid_points(
    dtype: torch.dtype,
) -> None:
    """The rule rounds the number outward onto the tensor's format (one of its ULPs wide, so
    up to two of the product's) and the product to nearest (the hull of the exact range and
    its nearest roundings): sharp, not merely sound."""
    x = (3 * torch.randn(256)).to(dtype)
    for s in (1.7, 0.1, 1 / 3):
        with fp.track():
            bounds = fp.bounds_of(torch.ops.aten.mul_.Scalar(x.clone(), s))
        exponent = np.frexp(np.maximum(abs(bounds.lo), abs(bounds.hi)))[1]
        ulp = torch.finfo(dtype).eps * np.exp2(exponent - 1.0)
        assert (bounds.hi - bounds.lo <= 2 * ulp).all(), s
