"""The accurate wide formulas of stochastic/accurate.py, against mpmath and in stochastic runs."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.stochastic.accurate import ACCURATE  # noqa: E402

GELU = ACCURATE[torch.ops.aten.gelu.default]
GELU_BACKWARD = ACCURATE[torch.ops.aten.gelu_backward.default]
LOG_SOFTMAX = ACCURATE[torch.ops.aten._log_softmax.default]

POINTS = [-40.0, -12.0, -8.0, -6.0, -4.75, -2.0, -0.5, -1e-30, 0.0, 1e-30, 0.7, 3.0, 9.0, 1e20]

mpmath.mp.prec = 200


def _u(x: mpmath.mpf) -> mpmath.mpf:
    return mpmath.sqrt(2 / mpmath.pi) * (x + mpmath.mpf(0.044715) * x**3)


def _exact(name: str, x: float) -> float:
    v = mpmath.mpf(x)
    if name == "gelu":
        return float(v / 2 * mpmath.erfc(-v / mpmath.sqrt(2)))
    # (1 + tanh u) / 2 = 1 / (1 + exp(-2 u)): 1 + tanh(u) cancels even at 200 bits for x = -12
    half = 1 / (1 + mpmath.exp(-2 * _u(v)))
    if name == "gelu_tanh":
        return float(v * half)
    if name == "gelu_backward":
        return float(mpmath.erfc(-v / mpmath.sqrt(2)) / 2 + v * mpmath.npdf(v))
    slope = mpmath.sqrt(2 / mpmath.pi) * (1 + 3 * mpmath.mpf(0.044715) * v**2)
    return float(half + 2 * v * half * (1 - half) * slope)


def _ours(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "gelu":
        return GELU(x)
    if name == "gelu_tanh":
        return GELU(x, approximate="tanh")
    one = torch.ones_like(x)
    approximate = "tanh" if name == "gelu_tanh_backward" else "none"
    return GELU_BACKWARD(one, x, approximate=approximate)


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "gelu_backward", "gelu_tanh_backward"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_formulas_are_accurate_where_the_kernels_cancel(name: str, dtype: torch.dtype) -> None:
    x = torch.tensor(POINTS, dtype=dtype)
    got = _ours(name, x).double().numpy()
    eps = torch.finfo(dtype).eps
    tiny = torch.finfo(dtype).smallest_normal
    for value, result in zip(POINTS, got, strict=True):
        want = _exact(name, value)
        if abs(want) < tiny:  # below the format's normal range: an absolute error
            assert abs(result - want) <= tiny, (name, value, result, want)
        else:
            assert abs(result - want) <= 256 * eps * abs(want), (name, value, result, want)


def test_the_kernels_cancel_where_the_formulas_do_not() -> None:
    """Why the formulas exist: ATen's float32 GELU loses these values."""
    x = torch.tensor([-6.0])
    assert float(torch.nn.functional.gelu(x, approximate="tanh")) == 0.0
    assert float(GELU(x, approximate="tanh")) == pytest.approx(_exact("gelu_tanh", -6.0), 1e-5)
    x = torch.tensor([-8.0])
    ours, theirs = float(GELU(x)), float(torch.nn.functional.gelu(x))
    assert ours == pytest.approx(_exact("gelu", -8.0), rel=1e-5)
    assert theirs != pytest.approx(_exact("gelu", -8.0), rel=1e-2, abs=0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_non_finite_operands_give_non_finite_results(dtype: torch.dtype) -> None:
    """As the kernels' (which give NaN or an infinity there, by kernel): a stochastic run then
    gives the element the whole line either way."""
    x = torch.tensor([-math.inf, math.inf, math.nan], dtype=dtype)
    one = torch.ones_like(x)
    for approximate in ("none", "tanh"):
        assert not GELU(x, approximate=approximate).isfinite().any()
        assert not torch.nn.functional.gelu(x, approximate=approximate).isfinite().any()
    assert GELU_BACKWARD(one, x)[2].isnan()


def test_log_softmax_keeps_the_largest_elements_log_probability() -> None:
    x = torch.tensor([[30.0, 0.0, -1.0, 30.0 - 40.0], [1.0, 1.0, 0.0, -math.inf]])
    got = LOG_SOFTMAX(x, 1, False).double().numpy()
    for row, values in zip(got, x.tolist(), strict=True):
        mp = [mpmath.mpf(v) for v in values]
        total = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in mp))
        for result, v in zip(row, mp, strict=True):
            want = float(v - total)
            assert result == pytest.approx(want, rel=1e-6, abs=0.0) or (
                math.isinf(want) and result == want
            )
    # the plain kernel's largest log-probability is 0 there
    assert float(torch.log_softmax(x, 1)[0, 0]) == 0.0
    assert float(got[0, 0]) < 0.0
    # other dimensions, a scalar, an empty tensor: as ATen gives them
    y = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0))
    for dim in (0, 1, -1):
        torch.testing.assert_close(LOG_SOFTMAX(y, dim, False), torch.log_softmax(y, dim))
    assert float(LOG_SOFTMAX(torch.tensor(2.5), 0, False)) == 0.0
    assert LOG_SOFTMAX(torch.empty(0, 3), 1, False).shape == (0, 3)


@pytest.mark.parametrize(
    ("dtype", "fn", "x"),
    [
        # float16 GELU of -4.75: float32's 1 + erf lost 4% (3.5 units of float16's subnormals)
        ("float16", torch.nn.functional.gelu, [-4.75390625, 0.5, -0.25, 2.0]),
        # bfloat16 tanh GELU of -6: float32's 1 + tanh gave 0, the exact -8.4e-11
        ("bfloat16", lambda t: torch.nn.functional.gelu(t, approximate="tanh"), [-6.0, 1.0, -1.5]),
        # a confident row's largest log-probability: exact -2e-9, the kernel's 0
        ("bfloat16", lambda t: torch.log_softmax(t, -1), [20.0, 0.0, -1.0, 0.5]),
    ],
)
@pytest.mark.parametrize("batched", [True, False])
def test_stochastic_runs_hold_the_exact_value(
    dtype: str, fn: object, x: list[float], batched: bool
) -> None:
    import concurrent.futures

    t = torch.tensor(x, dtype=getattr(torch, dtype))
    executor = None if batched else concurrent.futures.ThreadPoolExecutor(2)
    bounds = fp.stochastic_bounds(fn, t, samples=16, seed=3, executor=executor)
    exact = fn(t.double())  # float64's kernels are exact enough at these points
    reference = np.array([float(v) for v in exact])
    if dtype == "bfloat16" and len(x) == 3:
        reference[0] = _exact("gelu_tanh", -6.0)  # float64's 1 + tanh loses it too
    assert bounds.contains(reference).all(), (bounds.lo, bounds.hi, reference)
    wrong = reference * 1.1  # a planted 10% error is caught
    assert not bounds.contains(wrong).all()
