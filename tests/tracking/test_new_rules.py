"""The rules issue 19 added, each proven on dense grids against mpmath (60 digits): the exact
value and the value PyTorch computed lie in the enclosure, in float32, bfloat16 and float16.
Trigonometric functions near their extrema and poles and at huge arguments; the optimizer
updates (lerp on both sides of its branch, addcmul, addcdiv, in place)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

mpmath.mp.dps = 60
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def exact_inside(bounds: fp.Bounds, exact: np.ndarray) -> np.ndarray:
    """Whether each exact value (mpmath numbers) lies in the enclosure (the whole line admits
    anything)."""
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    flat = exact.reshape(-1)
    inside = np.empty(flat.size, dtype=bool)
    for i, value in enumerate(flat):
        if np.isneginf(lo[i]) and np.isposinf(hi[i]):
            inside[i] = True
        elif value is None:
            inside[i] = False
        else:
            inside[i] = mpmath.mpf(lo[i]) <= value <= mpmath.mpf(hi[i])
    return inside.reshape(exact.shape)


def prove(
    run: Callable[..., torch.Tensor], exact: Callable[..., object], *inputs: torch.Tensor
) -> fp.Bounds:
    """Run under strict tracking; the computed value and mpmath's lie in the enclosure."""
    with fp.track(strict=True):
        out = run(*inputs)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all(), "computed value outside its enclosure"
    columns = [t.double().numpy().reshape(-1) for t in inputs]
    values = np.empty(columns[0].size, dtype=object)
    for i in range(values.size):
        args = [mpmath.mpf(float(c[i])) for c in columns]
        try:
            values[i] = exact(*args)
        except (ValueError, ZeroDivisionError):
            values[i] = None
    values = values.reshape(out.shape)
    defined = np.vectorize(lambda v: v is not None and mpmath.isfinite(v), otypes=[bool])(values)
    inside = exact_inside(bounds, values)
    bad = defined & ~inside
    assert not bad.any(), (
        np.flatnonzero(bad)[:5],
        [t.reshape(-1)[bad.reshape(-1)][:5] for t in inputs],
    )
    return bounds


def grid(dtype: torch.dtype, low: float, high: float, n: int = 512) -> torch.Tensor:
    return torch.linspace(low, high, n, dtype=torch.float64).to(dtype)


def near_multiples(dtype: torch.dtype, step: float, count: int = 40) -> torch.Tensor:
    """Values of ``dtype`` next to k * step (the extrema and poles of trigonometric functions)."""
    centres = torch.tensor([k * step for k in range(-count, count)], dtype=torch.float64)
    centre = centres.to(dtype)
    below = torch.nextafter(centre, torch.tensor(-math.inf, dtype=dtype))
    above = torch.nextafter(centre, torch.tensor(math.inf, dtype=dtype))
    return torch.cat([below, centre, above])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("name", "run", "exact"),
    [
        ("sin", torch.sin, mpmath.sin),
        ("cos", torch.cos, mpmath.cos),
        ("tan", torch.tan, mpmath.tan),
    ],
)
def test_trigonometric_functions_near_extrema_poles_and_far_out(
    dtype: torch.dtype, name: str, run: Callable[..., torch.Tensor], exact: Callable[..., object]
) -> None:
    x = torch.cat(
        [
            grid(dtype, -20, 20),
            near_multiples(dtype, math.pi / 2),
            torch.tensor([1e-30, -3e-8, 1e4, -3e4, 6e4], dtype=torch.float64).to(dtype),
        ]
    )
    bounds = prove(run, exact, x)
    if name != "tan":
        assert (bounds.lo >= -1).all()
        assert (bounds.hi <= 1).all()
        small = np.abs(x.double().numpy()) < 4
        assert bounds.radius[small].max() <= 8 * torch.finfo(dtype).eps


@pytest.mark.parametrize("dtype", DTYPES)
def test_monotone_library_functions(dtype: torch.dtype) -> None:
    prove(torch.atan, mpmath.atan, torch.cat([grid(dtype, -50, 50), grid(dtype, -1e-3, 1e-3)]))
    inner = grid(dtype, -0.999, 0.999)
    prove(torch.atanh, mpmath.atanh, inner)
    prove(torch.erfinv, mpmath.erfinv, inner)
    p = grid(dtype, 0.001, 0.999)
    prove(torch.logit, lambda v: mpmath.log(v / (1 - v)), p)
    eps = 0.0625
    clamped = lambda v: min(max(v, mpmath.mpf(eps)), 1 - mpmath.mpf(eps))  # noqa: E731
    prove(lambda v: torch.logit(v, eps), lambda v: mpmath.log(clamped(v) / (1 - clamped(v))), p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("base", [2.0, 10000.0, 0.5, 1.5])
def test_pow_of_a_scalar_base(dtype: torch.dtype, base: float) -> None:
    """``base ** x``: rotary embeddings' inverse frequencies (10000 ** (-2i / d))."""
    x = torch.cat([grid(dtype, -1, 1), grid(dtype, -8, 8)])
    prove(lambda v: base**v, lambda v: mpmath.mpf(base) ** v, x)


def test_pow_of_a_negative_scalar_base_is_refused_naming_it() -> None:
    message = (
        re.escape("no interval rule for operation 'aten.pow.Scalar' at aten.pow at ")
        + r"test_new_rules\.py:\d+: "
        + re.escape("pow of the scalar base -2.0 (a positive finite base has one) has no rule yet.")
    )
    with fp.track(strict=True), pytest.raises(fp.UnsupportedOperation, match=message):
        (-2.0) ** torch.ones(3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight", [0.1, 0.3, 0.5, 0.75, 0.999])
def test_lerp_either_branch_scalar_and_tensor_weights(dtype: torch.dtype, weight: float) -> None:
    torch.manual_seed(0)
    a, b = (torch.randn(400) * 3).to(dtype), (torch.randn(400) * 3).to(dtype)
    w = torch.full((400,), weight).to(dtype)
    exact_w = mpmath.mpf(weight)
    prove(lambda a, b: a.clone().lerp_(b, weight), lambda a, b: a + exact_w * (b - a), a, b)
    prove(torch.lerp, lambda a, b, w: a + w * (b - a), a, b, w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_addcmul_and_addcdiv_in_place(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    a, b, c = ((torch.randn(400) * s).to(dtype) for s in (1.0, 2.0, 1e-3))
    c = c + torch.sign(c).to(dtype) * 1e-4
    value = mpmath.mpf(0.3)
    prove(
        lambda a, b, c: a.clone().addcmul_(b, c, value=0.3),
        lambda a, b, c: a + value * b * c,
        a,
        b,
        c,
    )
    prove(
        lambda a, b, c: a.clone().addcdiv_(b, c, value=-0.3),
        lambda a, b, c: a - value * b / c,
        a,
        b,
        c,
    )
    prove(lambda a, b, c: torch.addcmul(a, b, b), lambda a, b, c: a + b * b, a, b, c)


def test_an_infinite_argument_of_sin_cos_tan_may_give_nan_the_whole_line() -> None:
    x = torch.tensor([-math.inf, 1.0, math.inf, math.nan])
    with fp.track(strict=True):
        results = [torch.sin(x), torch.cos(x), torch.tan(x)]
    for out in results:
        bounds = fp.bounds_of(out)
        assert bounds.contains(out).all()
        assert np.isneginf(bounds.lo[[0, 2, 3]]).all()
        assert np.isposinf(bounds.hi[[0, 2, 3]]).all()
        assert np.isfinite(bounds.radius[1])


def test_addcdiv_with_a_subnormal_product_and_divisor() -> None:
    """Found by the soundness campaign: value * t1 underflows, and dividing by a subnormal t2
    scales that underflow up to a relative 1e-3 of the result."""
    a = torch.tensor([-2.23482490e00, 2.76055797e-43])
    b = torch.tensor([2.23482490e00, 1.59888155e-42])
    value = mpmath.mpf(0.5)
    prove(lambda a, b: a.clone().addcdiv_(a, b, value=-0.5), lambda a, b: a - value * a / b, a, b)
    prove(
        lambda a, b: a.clone().addcmul_(a, b, value=1e-3),
        lambda a, b: a + mpmath.mpf(1e-3) * a * b,
        a,
        b * 1e40,
    )


def test_an_infinite_factor_of_addcmul_may_give_nan() -> None:
    """0 * inf once 1e-3 * 2.8e-43 underflows: NaN, inside the whole line."""
    a, b = torch.tensor([2.76055797e-43, 1.0]), torch.tensor([math.inf, 2.0])
    with fp.track(strict=True):
        out = a.clone().addcmul_(a, b, value=1e-3)
    assert torch.isnan(out[0])
    assert fp.bounds_of(out).contains(out).all()
