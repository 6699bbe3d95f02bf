"""The fused CPU Adam and AdamW steps (``rules/fused_optimizer.py``) against mpmath (60 digits):
the exact update of the inputs and the value the kernel computed lie in the enclosures of the
updated parameters, first and second moments and amsgrad's maximum, in float32, bfloat16 and
float16, with subnormal and near-overflow gradients and parameters that cancel against their
update; the tracked optimizer computes exactly what the untracked one does."""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
aten = torch.ops.aten

mpmath.mp.dps = 60
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
HYPER = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def inputs(dtype: torch.dtype, n: int = 96) -> dict[str, torch.Tensor]:
    """Parameters, gradients and states mixing ordinary values, subnormal and near-overflow
    gradients, parameters that cancel against their first update (p = lr sign(g)), and zero
    parameters and states beside subnormal gradients (where eps dominates the denominator)."""
    generator = torch.Generator().manual_seed(7)
    info = torch.finfo(dtype)
    grad = torch.randn(n, generator=generator, dtype=torch.float64)
    grad[: n // 6] *= info.smallest_normal / 4  # subnormal
    grad[n // 6 : n // 3] *= math.sqrt(info.max) * 4  # g * g overflows the format
    param = torch.randn(n, generator=generator, dtype=torch.float64)
    param[n // 3 : n // 2] = HYPER["lr"] * torch.sign(grad[n // 3 : n // 2])  # cancellation
    exp_avg = torch.randn(n, generator=generator, dtype=torch.float64) * 0.1
    exp_avg_sq = torch.rand(n, generator=generator, dtype=torch.float64) * 0.1
    # fresh states; where the gradient is subnormal and the parameter zero, eps decides
    param[: n // 12] = 0.0
    exp_avg[n // 3 : n // 2] = exp_avg[: n // 12] = 0.0
    exp_avg_sq[n // 3 : n // 2] = exp_avg_sq[: n // 12] = 0.0
    max_sq = torch.rand(n, generator=generator, dtype=torch.float64) * 0.1
    return {
        k: v.to(dtype)
        for k, v in {
            "param": param,
            "grad": grad,
            "exp_avg": exp_avg,
            "exp_avg_sq": exp_avg_sq,
            "max_exp_avg_sq": max_sq,
        }.items()
    }


def exact_step(
    values: dict[str, torch.Tensor],
    step: float,
    *,
    adamw: bool,
    weight_decay: float,
    amsgrad: bool,
    maximize: bool,
    lr: float,
    scale: float | None,
) -> dict[str, list[mpmath.mpf]]:
    """The Adam / AdamW update in exact arithmetic (torch.optim's definition)."""
    mp = {k: [mpmath.mpf(float(x)) for x in v.double()] for k, v in values.items()}
    beta1, beta2 = mpmath.mpf(HYPER["beta1"]), mpmath.mpf(HYPER["beta2"])
    lr_, eps, decay = mpmath.mpf(lr), mpmath.mpf(HYPER["eps"]), mpmath.mpf(weight_decay)
    step_size = lr_ / (1 - beta1**step)
    bc2_sqrt = mpmath.sqrt(1 - beta2**step)
    out: dict[str, list[mpmath.mpf]] = {k: [] for k in mp}
    for i in range(len(mp["param"])):
        p, g = mp["param"][i], mp["grad"][i]
        if scale is not None:
            g = g / mpmath.mpf(scale)
        out["grad"].append(g)
        if maximize:
            g = -g
        if adamw:
            p = p * (1 - lr_ * decay)
        else:
            g = g + p * decay
        m = mp["exp_avg"][i] + (1 - beta1) * (g - mp["exp_avg"][i])
        v = mp["exp_avg_sq"][i] * beta2 + (1 - beta2) * g * g
        vmax = max(mp["max_exp_avg_sq"][i], v)
        denom = mpmath.sqrt(vmax if amsgrad else v) / bc2_sqrt + eps
        out["param"].append(p - step_size * m / denom)
        out["exp_avg"].append(m)
        out["exp_avg_sq"].append(v)
        out["max_exp_avg_sq"].append(vmax)
    return out


def assert_inside(tensor: torch.Tensor, exact: list[mpmath.mpf], what: str) -> fp.Bounds:
    bounds = fp.bounds_of(tensor)
    assert bounds is not None, f"{what} has no bounds"
    assert bounds.contains(tensor).all(), f"{what}: the computed value is outside"
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    outside = [
        i
        for i, value in enumerate(exact)
        if not (np.isneginf(lo[i]) and np.isposinf(hi[i]))
        and not mpmath.mpf(lo[i]) <= value <= mpmath.mpf(hi[i])
    ]
    assert not outside, (what, outside[:5], [exact[i] for i in outside[:3]])
    return bounds


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("adamw", "weight_decay", "amsgrad", "maximize"),
    [
        (False, 0.0, False, False),
        (False, 0.1, True, False),
        (True, 0.01, False, False),
        (True, 0.1, True, True),
    ],
)
def test_fused_step_encloses_the_exact_update_and_the_kernel(
    dtype: torch.dtype, adamw: bool, weight_decay: float, amsgrad: bool, maximize: bool
) -> None:
    values = inputs(dtype)
    step = 3.0
    op = aten._fused_adamw if adamw else aten._fused_adam
    options = {
        **HYPER,
        "weight_decay": weight_decay,
        "amsgrad": amsgrad,
        "maximize": maximize,
    }
    state = (
        [values["param"]],
        [values["grad"]],
        [values["exp_avg"]],
        [values["exp_avg_sq"]],
        [values["max_exp_avg_sq"]] if amsgrad else [],
        [torch.tensor(step)],
    )
    plain = op(*state, **options)
    with fp.track(strict=True):
        out = op(*state, **options)
    for a, b in zip(plain, out, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    exact = exact_step(
        values,
        step,
        adamw=adamw,
        weight_decay=weight_decay,
        amsgrad=amsgrad,
        maximize=maximize,
        lr=HYPER["lr"],
        scale=None,
    )
    bounds = assert_inside(out[0][0], exact["param"], "param")
    assert_inside(out[2][0], exact["exp_avg"], "exp_avg")
    assert_inside(out[3][0], exact["exp_avg_sq"], "exp_avg_sq")
    if amsgrad:
        assert_inside(out[4][0], exact["max_exp_avg_sq"], "max_exp_avg_sq")
    # ordinary elements (past the subnormal and overflowing gradients) get finite bounds a
    # few units wide
    ordinary = slice(len(exact["param"]) // 3, None)
    assert np.isfinite(bounds.radius[ordinary]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_lr_and_grad_scale(dtype: torch.dtype) -> None:
    values = inputs(dtype, n=48)
    grads = [values["grad"].clone()]
    state = ([values["param"]], grads, [values["exp_avg"]], [values["exp_avg_sq"]], [])
    lr, scale = torch.tensor(HYPER["lr"]), torch.tensor(4.0)
    options = {k: v for k, v in HYPER.items() if k != "lr"}
    options.update(weight_decay=0.01, amsgrad=False, maximize=False)
    with fp.track(strict=True):
        out = aten._fused_adamw(*state, [torch.tensor(1.0)], lr=lr, grad_scale=scale, **options)
    exact = exact_step(
        values,
        1.0,
        adamw=True,
        weight_decay=0.01,
        amsgrad=False,
        maximize=False,
        lr=float(lr),
        scale=4.0,
    )
    assert_inside(out[0][0], exact["param"], "param")
    assert_inside(out[1][0], exact["grad"], "the unscaled gradient")
    assert_inside(out[2][0], exact["exp_avg"], "exp_avg")


def test_found_inf_skips_the_step_and_keeps_the_bounds() -> None:
    values = inputs(torch.float32, n=16)
    with fp.track(strict=True):
        wide = values["param"] * 3  # tracked, with bounds of its own
        out = aten._fused_adam(
            [wide],
            [values["grad"]],
            [values["exp_avg"]],
            [values["exp_avg_sq"]],
            [],
            [torch.tensor(1.0)],
            **HYPER,
            weight_decay=0.0,
            amsgrad=False,
            maximize=False,
            found_inf=torch.tensor(1.0),
        )
    assert torch.equal(out[0][0], wide)
    before, after = fp.bounds_of(wide), fp.bounds_of(out[0][0])
    assert np.array_equal(before.lo, after.lo)
    assert np.array_equal(before.hi, after.hi)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("optimizer", [torch.optim.Adam, torch.optim.AdamW])
def test_fused_optimizers_step_as_without_tracking(
    dtype: torch.dtype, optimizer: type[torch.optim.Optimizer]
) -> None:
    """``fused=True`` reaches ``_fused_adam(w)_`` in place and ``_foreach_add_`` for the step
    counters: two steps, the values bit for bit those of an untracked twin, every one
    enclosed."""
    torch.manual_seed(0)
    tracked = torch.nn.Parameter(torch.randn(37, dtype=dtype))
    twin = torch.nn.Parameter(tracked.detach().clone())
    steps = [optimizer([p], lr=1e-2, fused=True, amsgrad=True) for p in (tracked, twin)]
    for _ in range(2):
        grad = torch.randn(37, dtype=dtype)
        tracked.grad, twin.grad = grad.clone(), grad.clone()
        steps[1].step()
        with fp.track(strict=True):
            steps[0].step()
        assert torch.equal(tracked, twin)
        bounds = fp.bounds_of(tracked)
        assert bounds.contains(tracked.detach()).all()
        assert np.isfinite(bounds.radius).all()
        for key, value in steps[0].state[tracked].items():
            assert torch.equal(value, steps[1].state[twin][key]), key
            if key != "step":
                assert fp.bounds_of(value).contains(value).all(), key


def test_beta1_of_zero_keeps_no_first_moment() -> None:
    """betas=(0, 0.999) is valid: the first moment is the gradient itself, 0 ** t exactly."""
    values = inputs(torch.float32, n=24)
    options = {**HYPER, "beta1": 0.0, "weight_decay": 0.0, "amsgrad": False, "maximize": False}
    state = (
        [values["param"]],
        [values["grad"]],
        [values["exp_avg"]],
        [values["exp_avg_sq"]],
        [],
        [torch.tensor(2.0)],
    )
    with fp.track(strict=True):
        out = aten._fused_adam(*state, **options)
    assert torch.equal(out[2][0], values["grad"])
    assert fp.bounds_of(out[0][0]).contains(out[0][0]).all()


def test_a_beta_outside_its_range_is_refused_naming_it() -> None:
    values = inputs(torch.float32, n=4)
    options = {**HYPER, "beta1": 1.5, "weight_decay": 0.0, "amsgrad": False, "maximize": False}
    state = (
        [values["param"]],
        [values["grad"]],
        [values["exp_avg"]],
        [values["exp_avg_sq"]],
        [],
        [torch.tensor(1.0)],
    )
    message = "beta=1.5 (type float) is not valid: expected a number in [0, 1)."
    with pytest.raises(fp.InvalidArgument, match=re.escape(message)), fp.track(strict=True):
        aten._fused_adam(*state, **options)
