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


def _kernels(x: torch.Tensor, weight: Any, bias: Any, running: bool = True) -> tuple[Any, ...]:
    """Every result of the kernels, statistics included; ``running``: the training batch
    norms that update running statistics too (a batch of samples cannot: they write a value
    that differs between the samples into a tensor they share)."""
    aten = torch.ops.aten
    layer = aten.native_layer_norm(x, [x.shape[-1]], weight, bias, 1e-5)
    group = aten.native_group_norm(x, weight, bias, x.shape[0], x.shape[1], 1, 2, 1e-5)
    zeros = torch.zeros(x.shape[1], dtype=x.dtype if weight is None else weight.dtype)
    batch = aten.native_batch_norm(x, weight, bias, zeros, zeros + 1, False, 0.1, 1e-5)
    legit = aten._native_batch_norm_legit_no_training(x, weight, bias, zeros, zeros + 1, 0.1, 1e-5)
    no_stats = aten._native_batch_norm_legit.no_stats(x, weight, bias, True, 0.1, 1e-5)
    if not running:
        return (*layer, *group, *batch, *legit, *no_stats)
    mean, variance = zeros.clone(), zeros + 1
    training = aten.native_batch_norm(x, weight, bias, mean, variance, True, 0.1, 1e-5)
    channels_last = x.t().contiguous().t()  # channel stride 1, not contiguous: the other path
    legit_training = aten._native_batch_norm_legit(
        channels_last, weight, bias, mean, variance, True, 0.2, 1e-5
    )
    return (
        *layer,
        *group,
        *batch,
        *legit,
        *training,
        *legit_training,
        *no_stats,
        mean,  # the running statistics, updated twice
        variance,
    )


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
    args = (x, weight, bias, False)
    batch = sample_batch(_kernels, args, {}, 11, 8, Memo())
    alone = [sample(_kernels, args, {}, 11, index, 8, Memo()) for index in range(8)]
    for b, a in zip(batch, alone, strict=True):
        assert b.ops == a.ops
        for got, expected in zip(b.values, a.values, strict=True):
            assert np.array_equal(got, expected)
    assert np.std([b.values[0] for b in batch], axis=0).max() > 0


TRAINING = [name for name in NORMALISATIONS if "training" in name]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", TRAINING)
def test_a_half_precision_training_batch_norm_normalises_with_its_rounded_mean(
    name: str, dtype: torch.dtype
) -> None:
    """ATen normalises with the statistics it returns, in the module's format: the mean
    rounded onto bfloat16 is most of the error of outputs near 0. Before, the samples used the
    float32 mean: the plain run lay outside its interval at 13% of the elements (estimated
    spread 0.47 of the actual); taken alone, the rounding of that mean, the same in most
    samples, hid its error from their spread (4 to 7 false Type-II verdicts in 30 seeds)."""
    module, draw = NORMALISATIONS[name](3.0)
    model = copy.deepcopy(module).to(dtype)
    reference = copy.deepcopy(model).double()
    for seed in range(6):
        x = draw(seed, 3.0).to(dtype)
        with torch.no_grad():
            out, expected = model(x), reference(x.double())
        bounds = fp.stochastic_bounds(model, x, samples=16, seed=seed)
        plain = out.double().numpy()
        assert ((plain >= bounds.lo) & (plain <= bounds.hi)).all(), seed
        assert fp.classify(out, expected, bounds=bounds).kind != "bug", seed


def test_a_shared_rounding_shows_in_the_samples_spread() -> None:
    """A value every sample rounds alike, 1/64 of a float32 step above 1: converted alone, the
    16 stratified samples round it the same way at most seeds (a spread of zero); with
    ``shared_rounding``'s Gaussian term first, they spread at every seed."""
    from pytest_fpcheck.stochastic.shared import shared_rounding

    t = torch.full((1,), 1 + 2.0**-23 / 64, dtype=torch.float64)
    u = 2.0**-24

    def alone(v: torch.Tensor) -> torch.Tensor:
        return v.to(torch.float32)

    def shared(v: torch.Tensor) -> torch.Tensor:
        return shared_rounding(v, u).to(torch.float32)

    collapsed = [
        float(fp.stochastic_bounds(alone, t, seed=s).estimate.std[0]) == 0 for s in range(8)
    ]
    spread = [float(fp.stochastic_bounds(shared, t, seed=s).estimate.std[0]) > 0 for s in range(8)]
    assert sum(collapsed) >= 4, collapsed
    assert all(spread), spread


def _layer_norm_gradients(module: Any, x: torch.Tensor, dy: torch.Tensor) -> tuple[Any, ...]:
    """The gradients of a layer norm's input, weight and bias for the output's gradient
    ``dy``, through ``loss.backward()``'s kernel (``native_layer_norm_backward``)."""
    module = copy.deepcopy(module)
    x = x.clone().requires_grad_(True)
    module(x).backward(dy)
    return x.grad, module.weight.grad, module.bias.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_layer_norms_gradients_lie_in_their_intervals(dtype: torch.dtype) -> None:
    """Rows of mean 3: ``b * x`` and ``c`` of the kernel's ``dx = a dy g + b x + c`` are large
    and cancel. Computed wider and rounded once, the plain gradient lay outside its interval
    at 111 of 40,960 elements over 20 seeds (float32)."""
    module, draw = layer_norm(3.0)
    model = copy.deepcopy(module).to(dtype)
    reference = copy.deepcopy(model).double()
    for seed in range(6):
        x = draw(seed, 3.0).to(dtype)
        dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
        plain = _layer_norm_gradients(model, x, dy)
        expected = _layer_norm_gradients(reference, x.double(), dy.double())
        bounds = fp.stochastic_bounds(_layer_norm_gradients, model, x, dy, seed=seed)
        for b, out, ref in zip(bounds, plain, expected, strict=True):
            values = out.double().numpy()
            assert ((values >= b.lo) & (values <= b.hi)).all(), seed
            assert fp.classify(out, ref, bounds=b).kind != "bug", seed


@pytest.mark.parametrize(
    ("dtype", "parameters", "mask"),
    [
        (torch.float32, torch.float32, [True, True, True]),
        (torch.float32, None, [True, False, False]),
        (torch.float32, torch.float32, [False, True, True]),
        (torch.float64, torch.float64, [True, False, True]),
    ],
)
def test_the_layer_norm_backward_kernels_results_are_its_own(
    dtype: torch.dtype, parameters: torch.dtype | None, mask: list[bool]
) -> None:
    """Dtypes, shapes and which results are undefined (the mask) as the kernel gives them, the
    values within a few units of the plain run's; a batch of samples (the kernel called
    directly, no autograd engine) bit for bit the samples run alone."""
    generator = torch.Generator().manual_seed(8)
    x = (3 + torch.randn(3, 4, 6, generator=generator)).to(dtype)
    dy = torch.randn(3, 4, 6, generator=generator).to(dtype)
    weight = bias = None
    if parameters is not None:
        weight = (0.5 + torch.rand(6, generator=generator)).to(parameters)
        bias = torch.rand(6, generator=generator).to(parameters)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [6], weight, bias, 1e-5)

    def backward(dy: Any, x: Any, mean: Any, rstd: Any, weight: Any, bias: Any) -> Any:
        results = torch.ops.aten.native_layer_norm_backward(
            dy, x, [6], mean, rstd, weight, bias, mask
        )
        return tuple(r for r in results if r is not None)

    args = (dy, x, mean, rstd, weight, bias)
    plain = backward(*args)
    alone = [sample(backward, args, {}, 3, index, 8, Memo()) for index in range(8)]
    assert alone[0].dtypes == tuple(str(t.dtype).removeprefix("torch.") for t in plain)
    for got, expected in zip(alone[0].values, plain, strict=True):
        assert got.shape == tuple(expected.shape)
        tolerance = 64 * F.format_of(str(expected.dtype).removeprefix("torch.")).unit_roundoff
        assert np.allclose(got, expected.double().numpy(), rtol=tolerance, atol=tolerance)
    for b, a in zip(sample_batch(backward, args, {}, 3, 8, Memo()), alone, strict=True):
        for got, expected in zip(b.values, a.values, strict=True):
            assert np.array_equal(got, expected)


def _group_norm_gradients(dy: Any, x: Any, mean: Any, rstd: Any, weight: Any) -> Any:
    """A group norm's gradients with the input's, then without it (a first layer's, whose
    input needs none): the same kernel and operand dtypes, one result fewer."""
    backward = torch.ops.aten.native_group_norm_backward
    every = backward(dy, x, mean, rstd, weight, 4, 8, 5, 2, [True, True, True])
    some = backward(dy, x, mean, rstd, weight, 4, 8, 5, 2, [False, True, True])
    assert some[0] is None
    return (*every, *some[1:])


def test_a_kernel_whose_mask_leaves_a_result_undefined_keeps_its_own_results() -> None:
    """The mode learns an operation's result dtypes once per operand types; the mask's
    booleans were not among them, so the second call took three dtypes for two results and
    crashed (an AssertionError inside the mode)."""
    generator = torch.Generator().manual_seed(9)
    x = 3 + torch.randn(4, 8, 5, generator=generator)
    dy = torch.randn(4, 8, 5, generator=generator)
    weight = 0.5 + torch.rand(8, generator=generator)
    _, mean, rstd = torch.ops.aten.native_group_norm(x, weight, None, 4, 8, 5, 2, 1e-5)
    args = (dy, x, mean, rstd, weight)
    bounds = fp.stochastic_bounds(_group_norm_gradients, *args, seed=1)
    plain = _group_norm_gradients(*args)
    assert len(bounds) == len(plain) == 5
    for b, out in zip(bounds, plain, strict=True):
        assert b.shape == tuple(out.shape)
        assert np.allclose(b.value, out.double().numpy(), rtol=1e-5, atol=1e-6)
