"""Integer powers (``aten.pow`` with an exponent of 2 to 6), proven against mpmath: the kernel's
value and the exact power of every operand in the enclosure lie in it, for exact operands on
float32's and bfloat16's grids (subnormals, values whose powers underflow or come near
overflow, zeros of both signs, negatives) and for interval operands (the exact power at the
ends and inside). Onto float32 the usual elements take the exact powers widened once by the
products' roundings (``kernels.elementwise._power_usual``), the others the chains of interval
products; both are held to the same test. A planted error of one part in 2**20 is outside."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from .programs import assert_encloses, grid_values  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def exact_power(x: np.ndarray, n: int) -> np.ndarray:
    with mpmath.workprec(400):
        return np.vectorize(lambda v: mpmath.mpf(float(v)) ** n, otypes=[object])(x)


@SETTINGS
@given(
    st.sampled_from(sorted(DTYPES)),
    st.integers(2, 6),
    st.data(),
)
def test_powers_of_exact_operands(dtype: str, n: int, data: st.DataObject) -> None:
    x = data.draw(grid_values(dtype, (3, 7)))
    xt = torch.tensor(x).to(DTYPES[dtype])
    with fp.track(strict=True):
        out = torch.pow(xt, n)
    bounds = fp.bounds_of(out)
    exact = exact_power(xt.double().numpy(), n)
    if bounds is None:  # nothing rounded: exact and untracked
        assert np.array_equal(out.double().numpy(), exact.astype(float))
        return
    assert_encloses(bounds, out, exact, (dtype, n, x))


@SETTINGS
@given(
    st.sampled_from(sorted(DTYPES)),
    st.integers(2, 6),
    st.lists(st.floats(-40, 40, width=32), min_size=1, max_size=8),
    st.sampled_from([0.0, 2.0**-12, 0.5]),
)
def test_powers_of_interval_operands(dtype: str, n: int, xs: list[float], spread: float) -> None:
    """x + (z - z) with z tracked: the enclosure of the power holds the exact power at each
    end and at the centre of the operand's enclosure."""
    torch_dtype = DTYPES[dtype]
    with fp.track(strict=True):
        z = torch.full((len(xs),), spread, dtype=torch_dtype) * 1.1
        x = torch.tensor(xs, dtype=torch_dtype) + (z - z)
        out = torch.pow(x, n)
    xb, bounds = fp.bounds_of(x), fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out).all()
    points = (xb.lo, xb.hi, 0.5 * xb.lo + 0.5 * xb.hi) if xb is not None else (x.double().numpy(),)
    for point in points:
        assert_encloses(bounds, out, exact_power(point, n), (dtype, n, point))


def test_a_cube_and_a_square_are_tight_and_catch_a_planted_error() -> None:
    """GPT-2's GELU cubes its 0.5M pre-activations and Llama's RMSNorm squares its inputs:
    float32 powers of exact operands are enclosed within a few units of 2**-24 of their
    magnitude, so a kernel off by one part in 2**20 is outside."""
    torch.manual_seed(0)
    x = torch.randn(4096) * 3
    for n in (2, 3):
        with fp.track(strict=True):
            out = torch.pow(x, n)
        bounds = fp.bounds_of(out)
        assert bounds is not None
        value = out.double().numpy()
        assert ((bounds.hi - bounds.lo) <= 6 * 2.0**-24 * np.abs(value) + 2.0**-140).all()
        planted = (out.double() * (1 + 2.0**-20)).numpy()
        large = np.abs(value) > 1e-30
        assert not bounds.contains(planted)[large].any()
