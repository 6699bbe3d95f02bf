"""Batch norm in training mode (``rules/_batch_norm_training.py``) against mpmath (60 digits):
the output, the saved mean and the saved inverse standard deviation enclose the exact values
and the kernel's, in float32, float64, bfloat16 and float16, on exact inputs with an offset
(cancellation), subnormal channels and channels whose sum of squares overflows, and on inputs
known to an enclosure (the mean-value form); the enclosure of a normalised tracked input stays
within the first-order bound."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
F = torch.nn.functional

mpmath.mp.dps = 60


def exact_batch_norm(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float
) -> tuple[np.ndarray, list[mpmath.mpf], list[mpmath.mpf]]:
    """(output, mean, invstd) per channel in exact arithmetic (biased variance)."""
    channels = x.shape[1]
    rows = np.moveaxis(x, 1, 0).reshape(channels, -1)
    out = np.empty(rows.shape, dtype=object)
    means, invstds = [], []
    for c in range(channels):
        values = [mpmath.mpf(float(v)) for v in rows[c]]
        mean = mpmath.fsum(values) / len(values)
        var = mpmath.fsum((v - mean) ** 2 for v in values) / len(values)
        invstd = 1 / mpmath.sqrt(var + mpmath.mpf(eps))
        means.append(mean)
        invstds.append(invstd)
        w, b = mpmath.mpf(float(weight[c])), mpmath.mpf(float(bias[c]))
        for j, v in enumerate(values):
            out[c, j] = (v - mean) * invstd * w + b
    shape = (channels, x.shape[0], *x.shape[2:])
    return np.moveaxis(out.reshape(shape), 0, 1), means, invstds


def assert_inside(bounds: fp.Bounds, exact: np.ndarray | list[mpmath.mpf], what: str) -> None:
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    flat = np.asarray(exact, dtype=object).reshape(-1)
    for i, value in enumerate(flat):
        if np.isneginf(lo[i]) and np.isposinf(hi[i]):
            continue
        assert mpmath.mpf(lo[i]) <= value <= mpmath.mpf(hi[i]), (what, i, lo[i], value, hi[i])


def channels_of_every_kind(dtype: torch.dtype) -> torch.Tensor:
    """Channel 0 ordinary, 1 offset by 1000 (the mean cancels most digits, or all of them:
    a variance of 0), 2 subnormal, 3 so large that the sum of squared deviations overflows the
    format it is stored in (invstd 0 in the kernel)."""
    generator = torch.Generator().manual_seed(0)
    info = torch.finfo(dtype)
    x = torch.randn(2, 4, 3, 3, generator=generator, dtype=torch.float64)
    x[:, 1] = 1000 + x[:, 1] * 1e-3
    x[:, 2] *= info.smallest_normal / 8
    x[:, 3] *= 150 if dtype == torch.float16 else 3e19
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_batch_norm_training_encloses_the_exact_statistics_and_output(dtype: torch.dtype) -> None:
    x = channels_of_every_kind(dtype)
    weight = torch.tensor([1.0, -2.0, 0.5, 1.5], dtype=dtype)
    bias = torch.tensor([0.0, 0.25, -1.0, 3.0], dtype=dtype)
    eps = 1e-5
    plain = torch.ops.aten.native_batch_norm(x, weight, bias, None, None, True, 0.1, eps)
    with fp.track(strict=True):
        out, mean, invstd = torch.ops.aten.native_batch_norm(
            x, weight, bias, None, None, True, 0.1, eps
        )
    for value, before in zip((out, mean, invstd), plain, strict=True):
        assert torch.equal(value, before)
    exact, means, invstds = exact_batch_norm(
        x.double().numpy(), weight.double().numpy(), bias.double().numpy(), eps
    )
    for value, truth, what in (
        (out, exact, "out"),
        (mean, means, "mean"),
        (invstd, invstds, "invstd"),
    ):
        bounds = fp.bounds_of(value)
        assert bounds.contains(value).all(), what
        assert_inside(bounds, truth, what)
    if dtype == torch.float32:
        assert invstd[3] == 0  # the kernel's sum of squares overflowed
    # the ordinary channel (values below 4) gets a finite enclosure of a few dozen units
    radius = fp.bounds_of(out).radius
    assert (radius[:, 0] < 256 * torch.finfo(dtype).eps).all()


def test_batch_norm_training_of_an_enclosed_input() -> None:
    """The input is known to an enclosure (a tracked product): the mean-value form; the exact
    normalisation of the exact input lies inside, and the output's width is within the
    first-order bound r_hi (R + mean R + |y| mean(R |y|)) of the input's width R."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 5, 5, generator=generator)
    weight, bias = torch.ones(3), torch.zeros(3)
    with fp.track(strict=True):
        scaled = x * 1.1  # exactly x * 1.1 lies in its enclosure
        out = F.batch_norm(scaled, None, None, weight, bias, training=True)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    exact_input = np.vectorize(lambda v: mpmath.mpf(float(v)) * mpmath.mpf(1.1), otypes=[object])(
        x.double().numpy()
    )
    exact, _, _ = exact_batch_norm(exact_input, weight.numpy(), bias.numpy(), 1e-5)
    assert_inside(bounds, exact, "out")
    width = fp.bounds_of(scaled).radius.max()
    sigma = scaled.detach().transpose(0, 1).reshape(3, -1).std(1, unbiased=False).min()
    y = out.detach().abs().max()
    assert bounds.radius.max() <= 1.1 * (2 + y * y) * width / sigma + 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_channels_last_takes_the_decomposition(dtype: torch.dtype) -> None:
    """A channels-last input's statistics accumulate partly in its own format: the rule refuses
    it, and the decomposition bounds it, as before."""
    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(2)).to(dtype)
    value = x.to(memory_format=torch.channels_last)
    plain = F.batch_norm(value, None, None, training=True)
    with fp.track() as tracker:
        out = F.batch_norm(value, None, None, training=True)
    assert torch.equal(out, plain)
    assert fp.bounds_of(out).contains(out).all()
    if dtype == torch.float32:
        assert tracker.gaps == {}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_training_of_any_input_in_a_wide_box(dtype: torch.dtype) -> None:
    """The input is known only to a box 1e-2 wide (``assume=``): the exact normalisation of
    every corner tried, the one that pushes the largest output furthest above all, lies in the
    enclosure (the mean-value form's bound is what holds there), and the enclosure is within
    twice that first-order bound."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 3, 3, generator=generator).to(dtype)
    other = (x.double() + 1e-2).to(dtype)
    box = fp.hull(x, other)
    with fp.track(strict=True, assume={x: box}):
        out = F.batch_norm(x, None, None, training=True)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    lo, hi = box.lo, box.hi
    y = out.double().numpy()
    corners = [lo, hi, np.where(generator_signs(x.shape, 4), lo, hi)]
    for c in range(x.shape[1]):  # push channel c's largest output up: dy_i/dx_j's signs
        i = np.unravel_index(np.argmax(np.abs(y[:, c])), y[:, c].shape)
        up_i = np.sign(y[:, c][i])
        corner = lo.copy()
        raise_j = (1 + y[:, c][i] * y[:, c]) * up_i < 0
        corner[:, c] = np.where(raise_j, hi[:, c], lo[:, c])
        corner[:, c][i] = hi[:, c][i] if up_i > 0 else lo[:, c][i]
        corners.append(corner)
    for corner in corners:
        exact, _, _ = exact_batch_norm(corner, np.ones(2), np.zeros(2), 1e-5)
        assert_inside(bounds, exact, "out")


def generator_signs(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(shape) < 0.5
