"""Triton kernels (interpreted) inside stochastic_bounds are rounded at random operation by
operation: reproducibly from the seed, unbiased around the exact result, with tl.dot and tl.sum
carrying their accumulation's term; a tracker around the run neither sees nor bounds its
launches. The calibration slice: the softmax, matmul and layer norm kernels of
tests/stochastic/kernels.py give no false Type-II verdict and an estimated spread within a
factor of 2 of the actual error's (benchmarks/bench_stochastic.py runs 200 seeds)."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.stochastic.accumulation import KAPPA  # noqa: E402
from pytest_fpcheck.stochastic.run import sample, stochastic_bounds  # noqa: E402

from .calibration import verdict_trial  # noqa: E402
from .kernels import KERNELS  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="Triton kernels run on the CPU interpreted"
)


@triton.jit
def affine_exp(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask)
    tl.store(out_ptr + i, tl.exp(x) * 1.1 + 0.3, mask=mask)


def launch(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    affine_exp[(1,)](x, out, x.numel(), BLOCK=64)
    return out


@triton.jit
def row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def sum_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0], dtype=x.dtype)
    row_sum[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def test_a_kernels_operations_are_rounded_at_random_around_the_exact_result() -> None:
    x = torch.randn(50, generator=torch.Generator().manual_seed(0))
    before = launch(x)
    bounds = stochastic_bounds(launch, x, samples=16, seed=1)
    exact = np.exp(x.double().numpy()) * 1.1 + 0.3
    # a value whose three roundings all lie near grid points may not move in 16 runs
    assert np.mean(bounds.estimate.std > 0) >= 0.9
    assert np.all(bounds.contains(exact))
    # one float32 rounding of each of three operations: a spread of a fraction of an ULP
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert 0.1 < float(np.median(bounds.estimate.std / ulp)) < 1.5
    # a plain launch afterwards runs as it did before
    assert torch.equal(before, launch(x))


def test_the_kernels_roundings_follow_the_seed() -> None:
    x = torch.randn(50, generator=torch.Generator().manual_seed(0))
    first = sample(launch, (x,), {}, 5, 3)
    again = sample(launch, (x,), {}, 5, 3)
    other = sample(launch, (x,), {}, 5, 4)
    assert np.array_equal(first.values[0], again.values[0])
    assert not np.array_equal(first.values[0], other.values[0])
    assert first.ops == again.ops >= 3


def test_a_kernel_sum_carries_its_accumulation_term() -> None:
    # a float32 row sum of 4096 terms: one rounding of the result alone would give a spread of
    # g / sqrt(6) on average (g the sum's ULP); the pairwise accumulation's is the model's
    x = torch.randn(4, 4096, generator=torch.Generator().manual_seed(2))
    bounds = stochastic_bounds(sum_rows, x, samples=32, seed=3)
    terms = x.double().numpy()
    exact = terms.sum(axis=1)
    assert np.all(bounds.contains(exact))
    g = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    u = 2.0**-24
    model = np.sqrt(KAPPA * u * u * (2 * exact**2 + 10 * np.square(terms).sum(axis=1)) + g**2 / 6)
    assert np.all(bounds.estimate.std > 1.5 * g / np.sqrt(6))
    ratio = bounds.estimate.std / model
    assert np.all((ratio > 0.5) & (ratio < 2)), ratio


def test_a_tracker_around_the_run_does_not_see_its_launches() -> None:
    x = torch.randn(50, generator=torch.Generator().manual_seed(0))
    with fp.track():
        bounds = stochastic_bounds(launch, x, samples=4, seed=1)
        out = launch(x)
    assert np.mean(bounds.estimate.std > 0) >= 0.5
    # the launch after the run is bounded by the tracker again
    assert fp.bounds_of(out).mode == "rigorous"


@pytest.mark.parametrize("name", list(KERNELS))
def test_correct_kernels_pass_with_a_calibrated_spread(name: str) -> None:
    run, reference, draw, dtype = KERNELS[name]
    ratios = []
    for seed in range(2):
        x = draw(1000 + seed)
        kind, estimated, actual = verdict_trial(run, reference, x, dtype, seed)
        assert kind == "roundoff"
        ratios.append(estimated / actual)
    assert 0.5 <= float(np.median(ratios)) <= 2.0, ratios


@triton.jit
def _add(a, b):  # type: ignore[no-untyped-def]
    return a + b


@triton.jit
def prefix(  # type: ignore[no-untyped-def]
    x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, KIND: tl.constexpr, REVERSE: tl.constexpr
):
    """Row prefix sums (KIND 0: ``tl.cumsum``; 1: ``tl.associative_scan`` with a combine of the
    user's; 2: ``tl.cumprod``) times ``scale``."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    if KIND == 0:
        y = tl.cumsum(x, 0, reverse=REVERSE)
    elif KIND == 1:
        y = tl.associative_scan(x, 0, _add, reverse=REVERSE)
    else:
        y = tl.cumprod(x, 0, reverse=REVERSE)
    if scale != 1.0:
        y = y * scale
    tl.store(y_ptr + row * n + cols, y, mask=cols < n)


def scan_rows(
    x: torch.Tensor, kind: int = 0, reverse: bool = False, scale: float = 1.0
) -> torch.Tensor:
    out = torch.empty_like(x)
    prefix[(x.shape[0],)](x, out, x.shape[1], scale, BLOCK=x.shape[1], KIND=kind, REVERSE=reverse)
    return out


def _exact_scan(x: torch.Tensor, kind: int, reverse: bool) -> np.ndarray:
    terms = x.double().numpy()
    if reverse:
        terms = terms[:, ::-1]
    exact = np.cumprod(terms, axis=1) if kind == 2 else np.cumsum(terms, axis=1)
    return exact[:, ::-1] if reverse else exact


@pytest.mark.parametrize(("kind", "reverse"), [(0, False), (0, True), (1, False), (2, False)])
def test_each_addition_of_a_scan_is_rounded_at_random(kind: int, reverse: bool) -> None:
    # every prefix after the first is a rounding (the first, or last in reverse, is a term):
    # the samples differ, they centre on the exact prefixes, and their spread grows along the
    # scan as the errors of the additions accumulate
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(4, 128, generator=generator, dtype=torch.float64)
    x = (1 + x / 64 if kind == 2 else x).float()
    bounds = stochastic_bounds(scan_rows, x, kind, reverse, samples=16, seed=5)
    exact = _exact_scan(x, kind, reverse)
    std = bounds.estimate.std[:, ::-1] if reverse else bounds.estimate.std
    assert np.all(std[:, 0] == 0)
    assert np.mean(std[:, 1:] > 0) >= 0.95
    assert np.all(bounds.contains(exact))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    ulps = (std / (ulp[:, ::-1] if reverse else ulp))[:, 1:]
    assert float(np.median(ulps[:, -32:])) > 2 * float(np.median(ulps[:, :8]))


def test_a_scan_of_exact_additions_stays_exact() -> None:
    # a count (prefix sums of 0 and 1) never rounds: its samples are all the exact count
    x = (torch.rand(2, 128, generator=torch.Generator().manual_seed(6)) < 0.5).float()
    bounds = stochastic_bounds(scan_rows, x, samples=8, seed=7)
    assert np.all(bounds.estimate.std == 0)
    assert np.array_equal(bounds.estimate.mean, np.cumsum(x.double().numpy(), axis=1))


def test_a_scans_roundings_follow_the_seed() -> None:
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(8))
    first = sample(scan_rows, (x,), {}, 5, 3)
    again = sample(scan_rows, (x,), {}, 5, 3)
    other = sample(scan_rows, (x,), {}, 6, 3)
    assert np.array_equal(first.values[0], again.values[0])
    assert not np.array_equal(first.values[0], other.values[0])


def test_the_scan_model_follows_the_addition_level_emulation() -> None:
    # the accumulated Gaussian errors plus the result's own rounding against one stochastic
    # rounding per addition (multiplication), per prefix (benchmarks/bench_stochastic.py
    # --section scan measures more lengths and formats)
    from pytest_fpcheck import formats as F

    from .calibration import emulate_scan, model_scan

    rng = np.random.default_rng(9)
    for name, kind, terms in (
        ("float32", "cumsum", rng.standard_normal((4, 128))),
        ("float16", "cumsum", rng.random((4, 128))),
        ("float32", "cumprod", 1 + rng.standard_normal((4, 128)) / 100),
    ):
        fmt = F.format_of(name)
        terms = F.round_to(terms, fmt)
        emulated = emulate_scan(terms, fmt, kind, 100, rng).std(0, ddof=1)[:, 1:]
        modelled = model_scan(terms, fmt, kind, 100, 10).std(0, ddof=1)[:, 1:]
        ratio = float(np.median(modelled / emulated))
        assert 0.8 < ratio < 1.25, (name, kind, ratio)


def test_a_correct_scan_kernel_passes_and_a_planted_64u_bug_is_caught() -> None:
    # the calibration kernel (16 rows of 128 per program), 12 seeds: no false Type-II verdict
    run, reference, draw, dtype = KERNELS["cumsum, 16x128, float32"]
    for seed in range(12):
        kind, estimated, actual = verdict_trial(run, reference, draw(2000 + seed), dtype, seed)
        assert kind == "roundoff", seed
        assert 0.5 <= estimated / actual <= 2.5
    # the prefix sums scaled by 1 + 64u (u = 2**-24): the bounds of the buggy kernel's samples
    # leave out the correct result
    x = torch.randn(4, 128, generator=torch.Generator().manual_seed(11))
    reference = torch.cumsum(x.double(), dim=1)
    scale = 1 + 64 * 2.0**-24
    bounds = stochastic_bounds(scan_rows, x, 0, False, scale, samples=16, seed=12)
    verdict = fp.classify(scan_rows(x, scale=scale), reference, bounds=bounds)
    assert verdict.kind == "bug"
    assert verdict.outside > verdict.total // 4
    correct = stochastic_bounds(scan_rows, x, samples=16, seed=12)
    assert fp.classify(scan_rows(x), reference, bounds=correct).kind == "roundoff"


@triton.jit
def _scaled_exp(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.exp(tl.load(x_ptr + offsets, mask=mask) * s), mask=mask)


def _run_scaled_exp(x: torch.Tensor, s: float) -> torch.Tensor:
    out = torch.empty_like(x)
    _scaled_exp[(4,)](x, out, x.numel(), s, BLOCK=256)
    return out


def test_a_python_float_argument_is_rounded_at_random() -> None:
    """Triton rounds ``s`` onto float32 once for every element; the samples round it at random
    (before, every sample used float32(1/3), and the estimate was a bug at 7 of 8 seeds against
    exp(x / 3), found by a hunt); a planted wrong scale is still a bug."""
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 4
    reference = torch.exp(x.double() / 3)
    actual = _run_scaled_exp(x, 1 / 3)
    for seed in range(4):
        bounds = stochastic_bounds(_run_scaled_exp, x, 1 / 3, seed=seed)
        assert fp.classify(actual, reference, bounds=bounds).kind == "roundoff", seed
    planted = stochastic_bounds(_run_scaled_exp, x, 1 / 3 * (1 + 2**-20), seed=0)
    wrong = _run_scaled_exp(x, 1 / 3 * (1 + 2**-20))
    assert fp.classify(wrong, reference, bounds=planted).kind == "bug"
