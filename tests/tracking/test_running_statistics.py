"""A training batch norm's running statistics (``native_batch_norm`` updates them in place
although its schema declares no write: ``adapters.torch.undeclared_writes``). Before, tracking
trusted the schema: they kept no bounds and were read as exact inputs by the next step (an
evaluation pass, the next batch's update), or kept stale ones. Now the rule encloses their
update (``rules/_batch_norm_training.py``), against mpmath here in every format, and what no
rule bounds (the decomposition of a channels-last input) is a gap."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

from .test_batch_norm_training import assert_inside, channels_of_every_kind

torch = pytest.importorskip("torch")
F = torch.nn.functional

mpmath.mp.dps = 60


def exact_update(
    x: np.ndarray, running_mean: np.ndarray, running_var: np.ndarray, momentum: float
) -> tuple[list[mpmath.mpf], list[mpmath.mpf]]:
    """The running mean and (unbiased) variance after one exact update."""
    channels = x.shape[1]
    rows = np.moveaxis(x, 1, 0).reshape(channels, -1)
    m = mpmath.mpf(momentum)
    means, variances = [], []
    for c in range(channels):
        values = [mpmath.mpf(float(v)) for v in rows[c]]
        n = len(values)
        mean = mpmath.fsum(values) / n
        var = mpmath.fsum((v - mean) ** 2 for v in values) / (n - 1)
        means.append(m * mean + (1 - m) * mpmath.mpf(float(running_mean[c])))
        variances.append(m * var + (1 - m) * mpmath.mpf(float(running_var[c])))
    return means, variances


def _ulps(lo: np.ndarray, hi: np.ndarray, dtype: torch.dtype) -> float:
    """The widest enclosure in units in the last place of its larger end."""
    spacing = torch.finfo(dtype).eps * np.maximum(np.abs(lo), np.abs(hi))
    spacing = np.maximum(spacing, torch.finfo(dtype).smallest_normal)
    return float(np.max((hi - lo) / spacing))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("momentum", [0.1, 0.3, 1.0])
def test_the_update_encloses_the_exact_and_the_kernels_statistics(
    dtype: torch.dtype, momentum: float
) -> None:
    """Ordinary, cancelling, subnormal and overflowing channels, from running statistics that
    are not the defaults."""
    x = channels_of_every_kind(dtype)
    start_mean = torch.tensor([0.5, 999.0, -1e-3, 2.0], dtype=dtype)
    start_var = torch.tensor([2.0, 1e-6, 0.25, 3.0], dtype=dtype)
    mean, var = start_mean.clone(), start_var.clone()
    with fp.track(strict=True):
        _, saved_mean, _ = torch.ops.aten.native_batch_norm(
            x, None, None, mean, var, True, momentum, 1e-5
        )
    plain_mean, plain_var = start_mean.clone(), start_var.clone()
    torch.ops.aten.native_batch_norm(x, None, None, plain_mean, plain_var, True, momentum, 1e-5)
    assert torch.equal(mean, plain_mean)
    assert torch.equal(var, plain_var)
    exact_mean, exact_var = exact_update(
        x.double().numpy(), start_mean.double().numpy(), start_var.double().numpy(), momentum
    )
    for tensor, exact, what in ((mean, exact_mean, "mean"), (var, exact_var, "var")):
        bounds = fp.bounds_of(tensor)
        assert bounds is not None, what
        assert bounds.contains(tensor).all(), what
        assert_inside(bounds, exact, what)
    # the ordinary channel is tight: the batch mean's width scaled by the momentum, plus a
    # few roundings of the statistics' format
    batch, running = fp.bounds_of(saved_mean), fp.bounds_of(mean)
    ulp = torch.finfo(dtype).eps * abs(float(mean[0]))
    assert running.hi[0] - running.lo[0] <= momentum * (batch.hi[0] - batch.lo[0]) + 4 * ulp
    assert _ulps(fp.bounds_of(var).lo[:1], fp.bounds_of(var).hi[:1], dtype) <= 256


def test_an_evaluation_pass_after_training_judges_the_running_statistics() -> None:
    """Train on two batches, then evaluate: against a float64 copy of the same module, the
    correct module is round-off and one whose momentum is wrong is a bug."""
    generator = torch.Generator().manual_seed(4)
    batches = [torch.randn(16, 3, 4, 4, generator=generator) * 2 + 1 for _ in range(2)]
    probe = torch.randn(4, 3, 4, 4, generator=generator)

    def run(norm: torch.nn.BatchNorm2d, dtype: torch.dtype) -> torch.Tensor:
        norm.train()
        for batch in batches:
            norm(batch.to(dtype))
        norm.eval()
        return norm(probe.to(dtype))

    reference = run(torch.nn.BatchNorm2d(3).double(), torch.float64)
    for momentum, expected in ((0.1, "roundoff"), (0.12, "bug")):
        with fp.track(strict=True):
            out = run(torch.nn.BatchNorm2d(3, momentum=momentum), torch.float32)
        verdict = fp.classify(out, reference)
        assert verdict.kind == expected, (momentum, verdict)


def test_a_cumulative_average_momentum_is_enclosed() -> None:
    """``momentum=None``: the module passes 1 / num_batches_tracked as the momentum."""
    norm = torch.nn.BatchNorm1d(5, momentum=None).train()
    batches = [torch.randn(8, 5, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    with fp.track(strict=True):
        for batch in batches:
            norm(batch)
    stacked = torch.cat(batches).double().numpy()
    for c in range(5):
        exact = (
            mpmath.fsum(
                mpmath.fsum(mpmath.mpf(float(v)) for v in b[:, c].double().numpy()) / 8
                for b in batches
            )
            / 3
        )
        bounds = fp.bounds_of(norm.running_mean)
        assert mpmath.mpf(bounds.lo[c]) <= exact <= mpmath.mpf(bounds.hi[c])
    assert stacked.shape == (24, 5)


@pytest.mark.parametrize("shape", [(16, 3), (4, 3, 5, 5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_1d_and_channels_last_inputs_take_the_rule(
    shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    """ATen's channels-last kernel (per-thread partial sums in the input's format) also takes a
    (N, C) input, BatchNorm1d's usual one: the rule models it (before, its model missed the
    kernel's mean by an ulp, and every such call went to the decomposition)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(6)).to(dtype) * 3 + 2
    if x.dim() == 4:
        x = x.to(memory_format=torch.channels_last)
    mean, var = torch.zeros(3, dtype=dtype), torch.ones(3, dtype=dtype)
    with fp.track(strict=True):
        out = F.batch_norm(x, mean, var, training=True)
    assert fp.bounds_of(out).contains(out).all()
    exact_mean, exact_var = exact_update(x.double().numpy(), np.zeros(3), np.ones(3), 0.1)
    for tensor, exact in ((mean, exact_mean), (var, exact_var)):
        bounds = fp.bounds_of(tensor)
        assert_inside(bounds, exact, "statistic")
        assert _ulps(bounds.lo, bounds.hi, dtype) <= 256


def test_an_input_of_another_layout_leaves_them_a_gap_and_strict_refuses() -> None:
    """The rule refuses an input neither contiguous nor channels-last; the decomposition
    bounds the output but not the running statistics."""
    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(2))
    value = x.transpose(2, 3)
    mean, var = torch.zeros(3), torch.ones(3)
    with fp.track() as tracker:
        out = F.batch_norm(value, mean, var, training=True)
    assert fp.bounds_of(out).contains(out).all()
    for statistic in (mean, var):
        bounds = fp.bounds_of(statistic)
        assert bounds is not None
        assert np.isinf(bounds.lo).all()
        assert np.isinf(bounds.hi).all()
    assert [gap.op for gap in tracker.gaps.values()] == ["aten.native_batch_norm.default"]
    with (
        pytest.raises(fp.UnsupportedOperation, match="running statistics"),
        fp.track(strict=True),
    ):
        F.batch_norm(value, torch.zeros(3), torch.ones(3), training=True)


def test_one_element_per_channel_gives_an_unknown_running_variance() -> None:
    """The unbiased variance of one element is 0 / 0 in the kernel (NaN)."""
    x = torch.randn(1, 2, 1, 1)
    mean, var = torch.zeros(2), torch.ones(2)
    with fp.track(strict=True):
        torch.ops.aten.native_batch_norm(x, None, None, mean, var, True, 0.1, 1e-5)
    assert torch.isnan(var).all()
    bounds = fp.bounds_of(var)
    assert np.isneginf(bounds.lo).all()
    assert np.isposinf(bounds.hi).all()
    assert fp.bounds_of(mean).contains(mean).all()


def test_a_stale_record_of_the_running_mean_is_replaced() -> None:
    """The running mean was itself computed in a tracked block (loaded from a scaled copy):
    its record must follow the update, not keep the value before it."""
    norm = torch.nn.BatchNorm1d(4).train()
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(5))
    with fp.track(strict=True):
        norm.running_mean.copy_(torch.full((4,), 0.3) * 3)
        norm(x)
        bounds = fp.bounds_of(norm.running_mean)
    assert bounds.contains(norm.running_mean).all()
    assert bounds.radius.max() < 1e-6
