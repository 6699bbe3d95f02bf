"""Normalisations in a stochastic run (pytest_fpcheck/stochastic/normalisation.py): the kernel's
formula with each step rounded at random, so that the samples carry the rounding of the
statistics where an output cancels."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck import formats as F

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.stochastic.memo import Memo  # noqa: E402
from pytest_fpcheck.stochastic.run import sample, sample_batch  # noqa: E402

from .models import NORMALISATIONS, layer_norm  # noqa: E402


@pytest.mark.parametrize("name", NORMALISATIONS)
def test_the_plain_run_lies_in_its_interval_and_the_spread_is_the_kernels(name: str) -> None:
    """Float32, inputs of mean 3 (so that outputs near 0 cancel). Before, the samples computed
    the normalisation in float64 and rounded its output once: the plain run lay outside its
    interval at 23% of a layer norm's elements, and the estimated standard deviation was 0.27
    of the actual error's (0.60 for rows of mean 0). With the affine map as two randomly
    rounded operations (not the kernel's fused multiply-add) the batch norm's seed 7 was a
    false "bug": its 16 samples agreed on one point of the terms' coarse grid, a spread of
    zero."""
    module, draw = NORMALISATIONS[name](3.0)
    ratios = []
    for seed in range(10):
        x = draw(seed, 3.0)
        with torch.no_grad():
            out = module(x)
            reference = copy.deepcopy(module).double()(x.double())
        bounds = fp.stochastic_bounds(module, x, samples=16, seed=seed)
        plain = out.double().numpy()
        assert ((plain >= bounds.lo) & (plain <= bounds.hi)).all(), seed
        assert fp.classify(out, reference, bounds=bounds).kind == "roundoff", seed
        error = (out.double() - reference).numpy()
        estimated = math.sqrt(float(np.mean(np.square(bounds.estimate.std))))
        ratios.append(estimated / math.sqrt(float(np.mean(np.square(error)))))
    # stochastic rounding's variance is twice round-to-nearest's: about 1.4 is the model's own
    # (2.2 for the batch norm, whose shared shift takes a Gaussian term too)
    assert 1.0 <= float(np.median(ratios)) <= 2.5, ratios


def test_a_planted_scaling_of_16_unit_roundoffs_is_caught() -> None:
    module, draw = layer_norm(3.0)
    u = F.format_of("float32").unit_roundoff
    for seed in range(3):
        x = draw(seed, 3.0)

        def buggy(t: torch.Tensor) -> torch.Tensor:
            return module(t) * (1 + 16 * u)

        with torch.no_grad():
            out = buggy(x)
            reference = copy.deepcopy(module).double()(x.double())
        bounds = fp.stochastic_bounds(buggy, x, samples=16, seed=seed)
        assert fp.classify(out, reference, bounds=bounds).kind == "bug", seed


def _kernels(x: torch.Tensor, weight: Any, bias: Any) -> tuple[Any, ...]:
    """Every result of the three kernels, statistics included."""
    aten = torch.ops.aten
    layer = aten.native_layer_norm(x, [x.shape[-1]], weight, bias, 1e-5)
    group = aten.native_group_norm(x, weight, bias, x.shape[0], x.shape[1], 1, 2, 1e-5)
    zeros = torch.zeros(x.shape[1], dtype=x.dtype if weight is None else weight.dtype)
    batch = aten.native_batch_norm(x, weight, bias, zeros, zeros + 1, False, 0.1, 1e-5)
    legit = aten._native_batch_norm_legit_no_training(x, weight, bias, zeros, zeros + 1, 0.1, 1e-5)
    return (*layer, *group, *batch, *legit)


@pytest.mark.parametrize(
    ("dtype", "parameters"),
    [
        (torch.float32, torch.float32),
        (torch.bfloat16, torch.bfloat16),
        (torch.bfloat16, torch.float32),  # mixed: float32 statistics
        (torch.float16, torch.float16),
        (torch.float16, None),
        (torch.float64, torch.float64),
    ],
)
def test_results_have_the_kernels_dtypes_shapes_and_values(
    dtype: torch.dtype, parameters: torch.dtype | None
) -> None:
    generator = torch.Generator().manual_seed(6)
    x = (3 + torch.randn(4, 6, generator=generator)).to(dtype)
    weight = bias = None
    if parameters is not None:
        weight = torch.rand(6, generator=generator).to(parameters) + 0.5
        bias = torch.rand(6, generator=generator).to(parameters)
    plain = _kernels(x, weight, bias)
    drawn = sample(_kernels, (x, weight, bias), {}, 3, 0, 16)
    assert drawn.dtypes == tuple(str(t.dtype).removeprefix("torch.") for t in plain)
    for got, expected in zip(drawn.values, plain, strict=True):
        assert got.shape == tuple(expected.shape)
        # a few units of the result's format from the plain run (cancellation included)
        tolerance = 16 * F.format_of(str(expected.dtype).removeprefix("torch.")).unit_roundoff
        assert np.allclose(got, expected.double().numpy(), rtol=tolerance, atol=8 * tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_batch_gives_the_samples_run_alone_bit_for_bit(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(7)
    x = (3 + torch.randn(4, 6, generator=generator)).to(dtype)
    weight = (torch.rand(6, generator=generator) + 0.5).to(dtype)
    bias = torch.rand(6, generator=generator).to(dtype)
    args = (x, weight, bias)
    batch = sample_batch(_kernels, args, {}, 11, 8, Memo())
    alone = [sample(_kernels, args, {}, 11, index, 8, Memo()) for index in range(8)]
    for b, a in zip(batch, alone, strict=True):
        assert b.ops == a.ops
        for got, expected in zip(b.values, a.values, strict=True):
            assert np.array_equal(got, expected)
    assert np.std([b.values[0] for b in batch], axis=0).max() > 0
