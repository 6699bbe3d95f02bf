"""The rule of softmax's backward kernel, ``_softmax_backward_data`` (rules/softmax.py), proven
against mpmath: the kernel's value and the exact value y (g - sum(g y)) lie in the enclosure,
for exact operands on float32's and float64's grids (subnormals, values near overflow, rows
whose sum cancels g), over the last dimension and an inner one, and for tracked operands whose
enclosures are intervals (the exact value at corners and the centre of the operands' box);
float16 and bfloat16 take the decomposition, as before; and a planted error is outside."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from .programs import assert_encloses, grid_values  # noqa: E402

aten = torch.ops.aten
DTYPES = {"float32": torch.float32, "float64": torch.float64}
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def exact_softmax_backward(g: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """y (g - sum(g y)) over ``axis``, in mpmath (300 bits; the float64 inputs are exact)."""
    with mpmath.workprec(300):
        gm = np.vectorize(mpmath.mpf, otypes=[object])(g)
        ym = np.vectorize(mpmath.mpf, otypes=[object])(y)
        total = np.sum(gm * ym, axis=axis, keepdims=True)
        return ym * (gm - total)


@st.composite
def softmax_cases(draw: st.DrawFn) -> tuple[str, int, np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    # 1 to 5 columns: the kernels' scalar tails; 70: their vectorised loops and tails
    shape = (draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 3, 5, 70])))
    axis = draw(st.sampled_from([0, 1]))
    g = draw(grid_values("float32", shape))
    if draw(st.booleans()):  # a softmax's output, as backward passes it
        x = draw(grid_values("float32", shape))
        x = np.where(np.abs(x) > 1e4, 1.0, x)
        y = torch.softmax(torch.tensor(x), axis).to(DTYPES[dtype]).double().numpy()
    else:  # any operand the kernel takes
        y = draw(grid_values("float32", shape))
    if draw(st.booleans()):  # cancellation: g_j against sum(g y)
        g = np.where(np.abs(g) > 1e30, 1.0, g)
    return dtype, axis, g, y


@SETTINGS
@given(softmax_cases())
def test_softmax_backward_for_exact_operands(case) -> None:
    dtype, axis, g, y = case
    gt, yt = torch.tensor(g).to(DTYPES[dtype]), torch.tensor(y).to(DTYPES[dtype])
    with fp.track(strict=True):
        out = aten._softmax_backward_data(gt, yt, axis, DTYPES[dtype])
    bounds = fp.bounds_of(out)
    assert bounds is not None
    exact = exact_softmax_backward(gt.double().numpy(), yt.double().numpy(), axis)
    assert_encloses(bounds, out, exact, case)


@SETTINGS
@given(
    st.sampled_from(sorted(DTYPES)),
    st.lists(st.floats(-3, 3, width=32), min_size=2, max_size=6),
    st.sampled_from([0.0, 1.0, 300.0]),
    st.sampled_from([0.0, 2.0**-10, 0.25]),
    st.randoms(use_true_random=False),
)
def test_softmax_backward_for_tracked_operands(dtype, xs, g_spread, y_spread, rng) -> None:
    """g and y are enclosures of some width (v + (z - z), z tracked): the exact value at the
    box's corners (randomly chosen ones, and the two ends of each element) and at its centre
    lies in the result."""
    torch_dtype = DTYPES[dtype]
    with fp.track(strict=True):
        zg = torch.full((len(xs),), g_spread, dtype=torch_dtype) * 1.1
        zy = torch.full((len(xs),), y_spread, dtype=torch_dtype) * 1.3
        g = torch.tensor(xs, dtype=torch_dtype) + (zg - zg)
        y = torch.softmax(torch.tensor(xs[::-1], dtype=torch_dtype), 0) + (zy - zy)
        out = aten._softmax_backward_data(g, y, 0, torch_dtype)
    gb, yb, bounds = fp.bounds_of(g), fp.bounds_of(y), fp.bounds_of(out)
    assert gb is not None
    assert yb is not None
    assert bounds is not None
    assert bounds.contains(out).all()
    n = len(xs)
    choices = [rng.choices([0, 1], k=2 * n) for _ in range(8)] + [[0] * 2 * n, [1] * 2 * n]
    points = [
        (
            np.where(np.array(c[:n]) == 1, gb.hi, gb.lo),
            np.where(np.array(c[n:]) == 1, yb.hi, yb.lo),
        )
        for c in choices
    ]
    points.append((0.5 * gb.lo + 0.5 * gb.hi, 0.5 * yb.lo + 0.5 * yb.hi))
    for gv, yv in points:
        assert_encloses(bounds, out, exact_softmax_backward(gv, yv, 0), (dtype, gv, yv))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_a_sum_that_loses_its_small_terms_is_enclosed(dtype: str, axis: int) -> None:
    """sum(g y) over rows whose two large terms cancel and whose many small ones a float32
    (or float64) sum in the kernel's lanes partly loses: the kernel's sum errs by several
    units, which the sum's allowance (gamma_{n-1} of the terms' magnitudes) holds and a bound
    of the exact sum alone would not; every element's kernel value and exact value inside."""
    big = 2.0**24 if dtype == "float32" else 2.0**53
    row = np.ones(70)
    row[3], row[40] = big, -big
    g = np.stack([row, np.roll(row, 5), -row])
    y = np.ones_like(g)
    if axis == 0:
        g, y = g.T.copy(), y.T.copy()
    gt, yt = torch.tensor(g).to(DTYPES[dtype]), torch.tensor(y).to(DTYPES[dtype])
    with fp.track(strict=True):
        out = aten._softmax_backward_data(gt, yt, axis, DTYPES[dtype])
    plain = aten._softmax_backward_data(gt, yt, axis, DTYPES[dtype])
    exact = exact_softmax_backward(g, y, axis)
    assert not np.array_equal(plain.double().numpy(), exact.astype(float))  # the sum lost some
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert_encloses(bounds, out, exact, (dtype, axis))


def test_attention_weights_gradient_is_a_rule_as_tight_as_the_decomposition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An attention's weights' gradient (rows of 128, float32): bounded by the rule, whose
    enclosure is within 1.01 times the width of the decomposition's it replaced at every
    element (the same steps, without their intermediate tensors); a kernel whose result is off
    by 2**-12 relatively in one row is outside."""
    from pytest_fpcheck.errors import UnsupportedOperation
    from pytest_fpcheck.interval import registry

    torch.manual_seed(0)
    scores = torch.randn(2, 4, 128, 128)
    upstream = torch.randn(2, 4, 128, 128) * 1e-2

    def run() -> tuple[torch.Tensor, fp.Bounds]:
        with fp.track(strict=True):
            y = torch.softmax(scores * 1.0, -1)
            out = aten._softmax_backward_data(upstream * 1.0, y, -1, torch.float32)
        bounds = fp.bounds_of(out)
        assert bounds is not None
        assert bounds.contains(out).all()
        return out, bounds

    out, rule = run()

    def refuse(ctx):  # type: ignore[no-untyped-def]
        raise UnsupportedOperation(ctx.call.name, how="forced onto the decomposition")

    monkeypatch.setitem(registry._RULES, "aten._softmax_backward_data", refuse)
    again, decomposed = run()
    assert torch.equal(out, again)
    assert not np.array_equal(rule.lo, decomposed.lo)  # the decomposition's own steps
    assert ((rule.hi - rule.lo) <= (decomposed.hi - decomposed.lo) * 1.01).all()
    planted = out.clone()
    planted[0, 0, 0, :] *= 1 + 2.0**-12
    assert not rule.contains(planted).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_formats_take_the_decomposition(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    g = torch.randn(3, 17).to(dtype)
    y = torch.softmax(torch.randn(3, 17), -1).to(dtype)
    with fp.track(strict=True):
        out = aten._softmax_backward_data(g * 1, y * 1, -1, dtype)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out).all()
    exact = exact_softmax_backward(g.double().numpy(), y.double().numpy(), 1)
    assert_encloses(bounds, out, exact, dtype)
