"""Gradient scaling (``torch.amp.GradScaler``, ``rules/gradient_scaling.py``) against mpmath:
the unscaled gradients' enclosures hold the kernel's values and the exact products of their
inputs (float32, float64, bfloat16 and float16; subnormal, overflowing, infinite and whole-line
gradients; exact and inexact factors, a tracked one among them); ``found_inf`` is 1, 0 or either
exactly as the gradients' enclosures allow; the scale's update holds the branch the run took
and the exact product, through backoff, growth and an overflowing growth; a scaled float16
training loop runs under strict tracking, computes what the untracked loop computes and keeps
bounded parameters (before these rules it was refused, and without strict its parameters were
the whole line)."""

from __future__ import annotations

import contextlib
import math

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

from .programs import assert_encloses

torch = pytest.importorskip("torch")
aten = torch.ops.aten

mpmath.mp.dps = 60
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def gradient(dtype: torch.dtype) -> torch.Tensor:
    """Ordinary, subnormal, near-overflow and zero values, an infinity and a NaN."""
    info = torch.finfo(dtype)
    generator = torch.Generator().manual_seed(3)
    values = torch.randn(64, generator=generator, dtype=torch.float64)
    values[:8] *= info.smallest_normal / 8  # subnormal
    values[8:16] = info.max * (0.5 + torch.rand(8, generator=generator, dtype=torch.float64) / 2)
    values[16:20] = 0.0
    values[20], values[21] = math.inf, math.nan
    return values.to(dtype)


def tracked(values: torch.Tensor) -> torch.Tensor:
    """``values`` times 1.1 under tracking: an enclosure that is an interval."""
    return values * 1.1


def exactly(t: torch.Tensor, value: float) -> bool:
    """Whether ``t`` holds ``value`` and its enclosure is that point (or it was never
    tracked)."""
    bounds = fp.bounds_of(t)
    point = bounds is None or float(bounds.lo) == float(bounds.hi) == value
    return float(t) == value and point


def exact_products(before: torch.Tensor, factor: mpmath.mpf) -> np.ndarray:
    return np.array([mpmath.mpf(float(v)) * factor for v in before.double()], dtype=object)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inv_scale", [2.0**-16, 1 / 3, 1.0, 3.0, 1e-30, 2.0**100])
def test_unscaled_gradients_hold_the_kernels_value_and_the_exact_product(
    dtype: torch.dtype, inv_scale: float
) -> None:
    base = gradient(dtype)
    with fp.track(strict=True):
        grads = [tracked(base), base.clone()]
        before = [g.clone() for g in grads]
        found = torch.zeros(())
        factor = torch.tensor(inv_scale, dtype=torch.float32)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, factor)
    exact_factor = mpmath.mpf(float(factor))
    for grad, old in zip(grads, before, strict=True):
        bounds = fp.bounds_of(grad)
        assert bounds is not None
        # an infinite input's exact product is that infinity; a NaN's enclosure the whole line
        assert_encloses(bounds, grad, exact_products(old, exact_factor), (dtype, inv_scale))
    assert exactly(found, 1.0)  # the infinity and the NaN were found, certainly


def test_a_tracked_factor_holds_the_exact_reciprocal_of_the_scale() -> None:
    """GradScaler's own factor: ``scale.double().reciprocal().float()`` under tracking."""
    base = gradient(torch.float32)
    scale = 3.0 * 2.0**14
    with fp.track(strict=True):
        grads = [tracked(base)]
        before = grads[0].clone()
        factor = torch.full((), scale, dtype=torch.float32).double().reciprocal().float()
        torch._amp_foreach_non_finite_check_and_unscale_(grads, torch.zeros(()), factor)
    bounds = fp.bounds_of(grads[0])
    assert bounds is not None
    assert_encloses(bounds, grads[0], exact_products(before, 1 / mpmath.mpf(scale)), scale)


def test_found_inf_is_one_zero_or_either_as_the_enclosures_allow() -> None:
    with fp.track(strict=True):
        one = torch.tensor([1.0])
        finite = [one * 1.1]
        certain = [one * 1.1, torch.tensor([math.inf, 2.0])]
        nan = [torch.tensor([math.nan])]
        # 1 / (0.1f - 0.1): the run divides by 0 (inf), the enclosure is the whole line
        possible = [1.0 / (one * 0.1 - 0.1)]
        flags = {}
        for name, grads in (
            ("finite", finite),
            ("certain", certain),
            ("nan", nan),
            ("possible", possible),
        ):
            flags[name] = torch.zeros(())
            torch._amp_foreach_non_finite_check_and_unscale_(grads, flags[name], torch.tensor(0.5))
    assert [float(flags[k]) for k in ("finite", "certain", "nan", "possible")] == [0, 1, 1, 1]
    assert exactly(flags["finite"], 0.0)
    assert exactly(flags["certain"], 1.0)
    assert exactly(flags["nan"], 1.0)
    possible_bounds = fp.bounds_of(flags["possible"])
    assert possible_bounds is not None
    assert (float(possible_bounds.lo), float(possible_bounds.hi)) == (0.0, 1.0)


def _update(
    scale: torch.Tensor,
    found: torch.Tensor,
    tracker: int,
    growth: float,
    backoff: float,
    interval: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    growth_tracker = torch.tensor(tracker, dtype=torch.int32)
    returned = torch._amp_update_scale_(scale, growth_tracker, found, growth, backoff, interval)
    assert returned is scale
    return scale, growth_tracker


def _plain_update(
    scale: float, found: float, tracker: int, growth: float, backoff: float, interval: int
) -> float:
    s = torch.tensor(scale, dtype=torch.float32)
    _update(s, torch.tensor(found), tracker, growth, backoff, interval)
    return float(s)


@pytest.mark.parametrize(
    ("scale", "found", "tracker", "growth", "backoff", "interval"),
    [
        (65536.0, 0.0, 0, 2.0, 0.5, 2000),  # no growth yet: kept
        (65536.0, 0.0, 1999, 2.0, 0.5, 2000),  # grows
        (65536.0, 1.0, 1999, 2.0, 0.5, 2000),  # backs off
        (3.0e38, 0.0, 0, 2.0, 0.5, 1),  # growth overflows float32: kept
        (1.7e38, 0.0, 0, 1.5, 0.5, 1),  # growth rounds to float32's largest number
        (12345.678, 0.0, 4, 1.7, 0.3, 5),  # inexact growth
        (12345.678, 1.0, 4, 1.7, 0.3, 5),  # inexact backoff
        (1e-45, 1.0, 0, 2.0, 0.3, 5),  # backoff to zero from the smallest subnormal
    ],
)
def test_the_scales_update_holds_the_kernels_value_and_the_exact_product(
    scale: float, found: float, tracker: int, growth: float, backoff: float, interval: int
) -> None:
    with fp.track(strict=True):
        # a tracked scale (an interval): the kernel's branch applies to each of its values
        s = torch.tensor(scale, dtype=torch.float32) * 1.0001
        start = float(s)
        _, new_tracker = _update(s, torch.tensor(found), tracker, growth, backoff, interval)
    bounds = fp.bounds_of(s)
    assert bounds is not None
    assert float(s) == _plain_update(start, found, tracker, growth, backoff, interval)
    assert bounds.contains(s).all()
    exact = mpmath.mpf(start) * mpmath.mpf(backoff if found else growth)
    grows = not found and tracker + 1 == interval
    overflow = grows and abs(exact) >= mpmath.mpf(2) ** 128
    if overflow:  # the grown scale would be infinite: the kernel keeps the scale
        assert float(s) == start
    elif found or grows:
        assert mpmath.mpf(float(bounds.lo)) <= exact <= mpmath.mpf(float(bounds.hi))
    assert int(new_tracker) == (0 if found or grows else tracker + 1)


def test_the_scales_update_follows_the_branch_the_run_took() -> None:
    """found_inf's enclosure is [0, 1] (a gradient may overflow); the run found the infinity
    and backed off, and the scale's enclosure is that branch's, as the optimizer's step
    skipped on the run's found_inf is: the hull of both branches would be [512, 2048]."""
    with fp.track(strict=True):
        found = torch.zeros(())
        possible = [1.0 / (torch.tensor([1.0]) * 0.1 - 0.1)]  # the whole line (see above)
        torch._amp_foreach_non_finite_check_and_unscale_(possible, found, torch.tensor(0.5))
        scale = torch.tensor(1024.0)
        _update(scale, found, 0, 2.0, 0.5, 1)
    found_bounds = fp.bounds_of(found)
    assert found_bounds is not None
    assert (float(found_bounds.lo), float(found_bounds.hi)) == (0.0, 1.0)
    assert exactly(scale, 512.0)


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 32)
        self.second = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def _train(
    track: bool, optimizer_class: type, steps: int = 4
) -> tuple[list[torch.Tensor], list[float], list[object]]:
    """``steps`` steps of a scaled float16 training loop: the parameters, the scale after each
    step and (tracked) the parameters' bounds."""
    torch.manual_seed(0)
    net = _Net()
    optimizer = optimizer_class(net.parameters(), lr=1e-2)
    # a scale of 2**18 overflows float16's gradients, 2**17 does not: with a growth interval of
    # 1 the steps alternate, skipped and backed off, taken and grown
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**18, growth_interval=1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    scales = []
    with fp.track(strict=True) if track else contextlib.nullcontext():
        for _ in range(steps):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            scales.append(scaler.get_scale())
        bounds = [fp.bounds_of(p) for p in net.parameters()] if track else []
    return [p.detach().clone() for p in net.parameters()], scales, bounds


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.AdamW])
def test_a_scaled_float16_training_loop_runs_under_strict_tracking_as_it_does_plainly(
    optimizer_class: type,
) -> None:
    plain_params, plain_scales, _ = _train(False, optimizer_class)
    params, scales, bounds = _train(True, optimizer_class)
    assert scales == plain_scales == [2.0**17, 2.0**18] * 2  # skipped, taken, skipped, taken
    for plain, value, bound in zip(plain_params, params, bounds, strict=True):
        assert torch.equal(plain, value)
        assert isinstance(bound, fp.Bounds)
        assert bound.contains(value).all()
        if optimizer_class is torch.optim.SGD:
            # (Adam divides by the root of a second moment whose enclosure may reach 0: its
            # steps' enclosures grow by the gradients' over eps, honestly, but not usefully)
            assert np.isfinite(bound.lo).all()
            assert np.isfinite(bound.hi).all()
