"""The row kernels of the normalisation rules: ``kernels.moments_rows`` (mean and variance of
layer, group and batch norm, var, std) and ``kernels.normalise_rows`` ((x - mean) rstd w + b),
against mpmath's exact values and torch's computed ones, on subnormal, near-overflow and
cancelling rows; ``normalise_rows``' fast path (rounding to nearest, a larger allowance) against
its exact path."""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fpcheck.formats import FORMATS
from pytest_fpcheck.interval.kernels import moments_rows, normalise_rows

F32 = FORMATS["float32"]
U32 = F32.unit_roundoff
TINY = 8 * F32.smallest_subnormal

#: float32 values of every kind a row may hold: ordinary, subnormal, huge, and a large common
#: offset with small differences (cancellation in the deviations)
_VALUES = st.one_of(
    st.floats(-1000.0, 1000.0, width=32),
    st.floats(-(2.0**-126), 2.0**-126, width=32),
    st.sampled_from([3.0e38, -3.0e38, 1.7e38, 2.0**-149, -(2.0**-149), 0.0, -0.0]),
    st.integers(-8, 8).map(lambda k: float(np.float32(1e6 + k * 0.0625))),
)


@st.composite
def _rows(draw: st.DrawFn, boxes: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = draw(st.integers(1, 3))
    n = draw(st.integers(1, 24))
    lo = np.array(draw(st.lists(_VALUES, min_size=rows * n, max_size=rows * n)))
    lo = lo.reshape(rows, n)
    if not boxes:
        return lo, lo
    widths = np.array(
        draw(
            st.lists(
                st.sampled_from([0.0, 2.0**-20, 1e-3, 1.0]), min_size=lo.size, max_size=lo.size
            )
        )
    ).reshape(lo.shape)
    return lo, lo + widths * np.abs(lo) + widths * 2.0**-140


def _exact_moments(row: list[float], correction: float) -> tuple[mpmath.mpf, mpmath.mpf]:
    n = len(row)
    mean = mpmath.fsum(mpmath.mpf(v) for v in row) / n
    squares = mpmath.fsum((mpmath.mpf(v) - mean) ** 2 for v in row)
    return mean, squares / (n - correction) if n > correction else mpmath.inf


def _inside(lo: float, value: mpmath.mpf, hi: float) -> bool:
    return (lo == -math.inf and hi == math.inf) or lo <= value <= hi


def _corners(lo: np.ndarray, hi: np.ndarray, seed: int) -> list[np.ndarray]:
    """Points of the box: both corners and a random mix of ends and midpoints."""
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, 3, lo.shape)
    with np.errstate(invalid="ignore"):  # -inf + inf: such an element keeps its lower end
        middle = np.where(np.isfinite(lo) & np.isfinite(hi), lo / 2 + hi / 2, lo)
    mixed = np.where(pick == 0, lo, np.where(pick == 1, hi, middle))
    return [lo, hi, mixed]


@settings(max_examples=150, deadline=None)
@given(rows=_rows(boxes=True), correction=st.sampled_from([0.0, 1.0]), seed=st.integers(0, 99))
def test_moments_contain_exact_and_torch_values(
    rows: tuple[np.ndarray, np.ndarray], correction: float, seed: int
) -> None:
    lo, hi = rows
    mean_lo, mean_hi, var_lo, var_hi = moments_rows(lo, hi, correction, F32)
    with mpmath.workprec(400):
        for point in _corners(lo, hi, seed):
            for r, row in enumerate(point.tolist()):
                mean, variance = _exact_moments(row, correction)
                assert _inside(mean_lo[r], mean, mean_hi[r]), (row, mean, mean_lo[r], mean_hi[r])
                assert _inside(var_lo[r], variance, var_hi[r]), (row, variance, var_lo[r])
    # torch's own float32 results, for the rows of float32 values
    values = torch.from_numpy(lo.astype(np.float32))
    with warnings.catch_warnings():  # n <= correction: torch warns, and gives inf or NaN
        warnings.simplefilter("ignore", UserWarning)
        t_var, t_mean = torch.var_mean(values, dim=-1, correction=correction)
    for r in range(lo.shape[0]):
        if np.isfinite(t_mean[r].item()):
            assert _inside(mean_lo[r], mpmath.mpf(t_mean[r].item()), mean_hi[r])
        if np.isfinite(t_var[r].item()):
            assert _inside(var_lo[r], mpmath.mpf(t_var[r].item()), var_hi[r])
        else:
            assert var_lo[r] == -math.inf or var_hi[r] == math.inf


def test_moments_are_tight_on_ordinary_rows() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 512)).astype(np.float32).astype(np.float64)
    mean_lo, mean_hi, var_lo, var_hi = moments_rows(x, x, 0.0, F32)
    variance = x.var(axis=-1)
    # the widening is 2 gamma_{2n+2} E with E = n var + n mean^2: some 2n u in relative terms
    assert np.all((var_hi - var_lo) / variance < 4 * (2 * 512 + 2) * U32 * 1.5)
    assert np.all(var_lo > 0)
    assert np.all(mean_hi - mean_lo < 1e-3)


def test_moments_flag_overflow_and_empty_rows() -> None:
    big = np.array([[3.0e38, 3.0e38, -1.0]])
    assert moments_rows(big, big, 0.0, F32) == (
        np.array([-math.inf]),
        np.array([math.inf]),
        np.array([-math.inf]),
        np.array([math.inf]),
    )
    empty = np.zeros((2, 0))
    mean_lo, mean_hi, _, _ = moments_rows(empty, empty, 0.0, F32)
    assert np.all(mean_lo == -math.inf)
    assert np.all(mean_hi == math.inf)
    # n - correction <= 0: the variance is the whole line
    one = np.array([[2.0]])
    _, _, var_lo, var_hi = moments_rows(one, one, 1.0, F32)
    assert (var_lo[0], var_hi[0]) == (-math.inf, math.inf)


def _affine_exact(
    x: float, mean: float, rstd: float, w: float | None, b: float | None
) -> mpmath.mpf:
    value = (mpmath.mpf(x) - mpmath.mpf(mean)) * mpmath.mpf(rstd)
    if w is not None:
        value *= mpmath.mpf(w)
    if b is not None:
        value += mpmath.mpf(b)
    return value


@settings(max_examples=150, deadline=None)
@given(
    rows=_rows(boxes=True),
    has_weight=st.booleans(),
    has_bias=st.booleans(),
    exact_path=st.booleans(),
    seed=st.integers(0, 99),
)
def test_normalise_contains_the_exact_values_on_both_paths(
    rows: tuple[np.ndarray, np.ndarray],
    has_weight: bool,
    has_bias: bool,
    exact_path: bool,
    seed: int,
) -> None:
    lo, hi = rows
    if exact_path:  # an element that is the whole line sends its row down the exact path
        lo = np.concatenate([lo, np.full((lo.shape[0], 1), -math.inf)], axis=1)
        hi = np.concatenate([hi, np.full((hi.shape[0], 1), math.inf)], axis=1)
    rows_, n = lo.shape
    rng = np.random.default_rng(seed)
    mean_lo = rng.standard_normal(rows_) * 10.0 ** rng.integers(-3, 6, rows_)
    mean = (mean_lo, mean_lo + np.abs(mean_lo) * 2.0**-20)
    rstd_lo = rng.uniform(0.01, 100.0, rows_)
    rstd = (rstd_lo, rstd_lo * (1 + 2.0**-18))
    w_lo = rng.standard_normal(n)
    weight = (w_lo, w_lo + np.abs(w_lo) * 2.0**-22) if has_weight else None
    b_lo = rng.standard_normal(n) * 1e3
    bias = (b_lo, b_lo + 2.0**-10) if has_bias else None
    out_lo, out_hi = normalise_rows((lo, hi), n, mean, rstd, weight, bias, U32, TINY, F32)
    with mpmath.workprec(200):
        for point in _corners(lo, hi, seed):
            for r, c in np.ndindex(point.shape):
                if not np.isfinite(point[r, c]):
                    continue
                for end in (0, 1):
                    value = _affine_exact(
                        point[r, c],
                        mean[end][r],
                        rstd[1 - end][r],
                        weight[end][c] if weight else None,
                        bias[end][c] if bias else None,
                    )
                    assert _inside(out_lo[r, c], value, out_hi[r, c]), (r, c, value)


def test_normalise_fast_path_is_as_tight_as_the_exact_path() -> None:
    """The same rows, with and without a whole-line element that sends them down the exact
    path: the fast path contains the exact path's enclosure and is barely wider."""
    rng = np.random.default_rng(2)
    rows, n = 32, 256
    lo = rng.standard_normal((rows, n))
    hi = lo + np.abs(lo) * 2.0**-20
    mean = (np.full(rows, -0.01), np.full(rows, 0.01))
    rstd = (np.full(rows, 0.9), np.full(rows, 0.9 * (1 + 2.0**-20)))
    w = rng.standard_normal(n + 1)
    weight = (w, w + 2.0**-30)
    b = rng.standard_normal(n + 1)
    bias = (b, b)
    fast = normalise_rows(
        (lo, hi),
        n,
        mean,
        rstd,
        (weight[0][:n], weight[1][:n]),
        (bias[0][:n], bias[1][:n]),
        U32,
        TINY,
        F32,
    )
    marked_lo = np.concatenate([lo, np.full((rows, 1), -math.inf)], axis=1)
    marked_hi = np.concatenate([hi, np.full((rows, 1), math.inf)], axis=1)
    exact = normalise_rows((marked_lo, marked_hi), n + 1, mean, rstd, weight, bias, U32, TINY, F32)
    exact_lo, exact_hi = exact[0][:, :n], exact[1][:, :n]
    assert np.all(fast[0] <= exact_lo)
    assert np.all(exact_hi <= fast[1])
    widths = exact_hi - exact_lo
    assert np.all(
        fast[1] - fast[0] <= widths * (1 + 2.0**-20) + 2 * np.spacing(np.float32(np.abs(fast[1])))
    )


@pytest.mark.parametrize("correction", [0.0, 1.0])
def test_moments_of_rows_laid_out_from_any_axes(correction: float) -> None:
    """var over a middle axis goes through the same kernel as a layer norm's trailing axes."""
    import pytest_fpcheck as fp

    x = torch.randn(4, 6, 5)
    with fp.track():
        v = x.var(1, keepdim=True, correction=correction)
    bounds = fp.bounds_of(v)
    assert bounds.lo.shape == (4, 1, 5)
    exact = x.double().var(1, keepdim=True, correction=correction).numpy()
    assert bounds.contains(exact).all()
    assert bounds.contains(v.double().numpy()).all()


@pytest.mark.parametrize("n", [7, 100, 4096])
def test_moments_contain_torch_on_long_cancelling_rows(n: int) -> None:
    """Rows of a large offset plus small noise: torch's float32 mean and variance carry their
    full rounding error, which the enclosure must cover."""
    rng = np.random.default_rng(n)
    values = (1e4 + rng.standard_normal((64, n)) * 10.0 ** rng.integers(-3, 2, (64, 1))).astype(
        np.float32
    )
    x = values.astype(np.float64)
    mean_lo, mean_hi, var_lo, var_hi = moments_rows(x, x, 1.0, F32)
    t_var, t_mean = torch.var_mean(torch.from_numpy(values), dim=-1, correction=1)
    t_var, t_mean = t_var.double().numpy(), t_mean.double().numpy()
    assert np.all((mean_lo <= t_mean) & (t_mean <= mean_hi))
    assert np.all((var_lo <= t_var) & (t_var <= var_hi))
    # layer norm's own moments (float32 cascade sums, not var's float64 Welford)
    import pytest_fpcheck as fp

    with fp.track():
        outputs = torch.native_layer_norm(torch.from_numpy(values), (n,), None, None, 1e-5)
    for output in outputs:
        assert fp.bounds_of(output).contains(output.double().numpy()).all()


@pytest.mark.parametrize("exact_path", [False, True])
def test_normalise_covers_products_that_underflow_before_a_large_weight(exact_path: bool) -> None:
    """float64: (x - mean) rstd is subnormal (its rounding errs by 2**-1075 absolutely, not
    relatively), and a weight of 1e300 carries that error to 1e-24, far above the relative
    allowance; the fast path once excluded the exact value here."""
    f64 = FORMATS["float64"]
    x = np.array([[3.0e-300, 7.77e-301, -5.5e-300, 1.234567e-299]])
    weight = np.array([9.87654321e299, 3.3e299, 1.11e300, 7.0e299])
    x_lo, x_hi, w = x, x, weight
    if exact_path:  # a whole-line element sends the row down the exact path
        x_lo = np.append(x, [[-math.inf]], axis=1)
        x_hi = np.append(x, [[math.inf]], axis=1)
        w = np.append(weight, 1.0)
    rstd = (np.array([1.2345e-10]), np.array([1.2345e-10]))
    mean = (np.zeros(1), np.zeros(1))
    n = x_lo.shape[1]
    lo, hi = normalise_rows(
        (x_lo, x_hi), n, mean, rstd, (w, w), None, 2.0**-53, 8 * 2.0**-1074, f64
    )
    with mpmath.workprec(300):
        for j in range(4):
            exact = mpmath.mpf(x[0, j]) * mpmath.mpf(rstd[0][0]) * mpmath.mpf(weight[j])
            assert lo[0, j] <= exact <= hi[0, j]
            assert hi[0, j] - lo[0, j] < 1e-12 * abs(exact)  # and still tight
