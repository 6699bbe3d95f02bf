"""The rules of a cross-entropy's backward kernels, ``_log_softmax_backward_data`` (rules/softmax.py)
and ``nll_loss_backward`` (rules/losses.py), proven against mpmath: the kernel's value and the
exact value lie in the enclosure, for exact operands on each format's grid (subnormals, values
near overflow, cancellation between g and exp(y) sum(g), zero and negative total weights, ignored
targets) and for tracked operands whose enclosures are intervals (the exact value at corners and
inside of the operands' box: it is linear in g and monotone in y)."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from .programs import assert_encloses, grid_values  # noqa: E402

aten = torch.ops.aten
DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def exact_log_softmax_backward(g: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """g - exp(y) sum(g) over ``axis``, in mpmath (300 bits; the float64 inputs are exact)."""
    with mpmath.workprec(300):
        gm = np.vectorize(mpmath.mpf, otypes=[object])(g)
        ym = np.vectorize(mpmath.mpf, otypes=[object])(y)
        total = np.sum(gm, axis=axis, keepdims=True)
        return gm - np.vectorize(mpmath.exp, otypes=[object])(ym) * total


@st.composite
def log_softmax_cases(draw: st.DrawFn) -> tuple[str, int, np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    grid = "float32" if dtype == "float64" else dtype
    # 1 to 5 columns: the kernels' scalar tails; 70: their vectorised loops and tails
    shape = (draw(st.sampled_from([1, 2, 3])), draw(st.sampled_from([1, 3, 5, 70])))
    axis = draw(st.sampled_from([0, 1]))
    g = draw(grid_values(grid, shape))
    if draw(st.booleans()):  # a log-softmax's output, as backward passes it
        x = draw(grid_values(grid, shape))
        x = np.where(np.abs(x) > 1e4, 1.0, x)
        y = torch.log_softmax(torch.tensor(x), axis).to(DTYPES[dtype]).double().numpy()
    else:  # any operand the kernel takes, exp(y) overflowing included
        y = np.minimum(draw(grid_values(grid, shape)), 100.0)
    if draw(st.booleans()):  # cancellation: g_j against exp(y_j) sum(g)
        g = np.where(np.abs(g) > 1e30, 1.0, g)
    return dtype, axis, g, y


@SETTINGS
@given(log_softmax_cases())
def test_log_softmax_backward_for_exact_operands(case) -> None:
    dtype, axis, g, y = case
    gt, yt = torch.tensor(g).to(DTYPES[dtype]), torch.tensor(y).to(DTYPES[dtype])
    with fp.track(strict=True):
        out = aten._log_softmax_backward_data(gt, yt, axis, DTYPES[dtype])
    bounds = fp.bounds_of(out)
    assert bounds is not None
    exact = exact_log_softmax_backward(gt.double().numpy(), yt.double().numpy(), axis)
    assert_encloses(bounds, out, exact, (dtype, axis, g, y))


@SETTINGS
@given(
    st.sampled_from(["float32", "bfloat16", "float16"]),
    st.lists(st.floats(-3, 3, width=32), min_size=2, max_size=6),
    st.sampled_from([0.0, 1.0, 300.0]),
    st.sampled_from([0.0, 0.5, 30.0]),
    st.randoms(use_true_random=False),
)
def test_log_softmax_backward_for_tracked_operands(dtype, xs, g_spread, y_spread, rng) -> None:
    """g and y are enclosures of some width (v + (z - z), z tracked): the exact value at the
    box's corners (randomly chosen ones, and the two ends of each element) and at its centre
    lies in the result."""
    torch_dtype = DTYPES[dtype]
    with fp.track(strict=True):
        zg = torch.full((len(xs),), g_spread, dtype=torch_dtype) * 1.1
        zy = torch.full((len(xs),), y_spread, dtype=torch_dtype) * 1.3
        g = torch.tensor(xs, dtype=torch_dtype) + (zg - zg)
        y = torch.log_softmax(torch.tensor(xs[::-1], dtype=torch_dtype), 0) + (zy - zy)
        out = aten._log_softmax_backward_data(g, y, 0, torch_dtype)
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
        exact = exact_log_softmax_backward(gv, yv, 0)
        assert_encloses(bounds, out, exact, (dtype, gv, yv))


@st.composite
def nll_cases(draw: st.DrawFn):
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    grid = "float32" if dtype == "float64" else dtype
    rows, classes = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    one_dimensional = draw(st.booleans())
    if one_dimensional:
        rows = 1
    reduction = draw(st.sampled_from([0, 1, 2]))
    target = draw(st.lists(st.integers(0, classes - 1), min_size=rows, max_size=rows))
    ignored = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
    target = [-100 if skip else t for t, skip in zip(target, ignored, strict=True)]
    weight = draw(st.none() | grid_values(grid, (1, classes)).map(lambda w: w.reshape(-1)))
    grad_size = rows if reduction == 0 and not one_dimensional else 1
    grad = draw(grid_values(grid, (1, grad_size))).reshape(-1)
    total = draw(grid_values(grid, (1, 1))).reshape(())  # zero and negative ones too
    return dtype, one_dimensional, reduction, np.array(target), weight, grad, total, classes


def exact_nll_backward(case) -> np.ndarray:
    """Zero, and -w[t] g (divided by the total weight for the mean) at each kept target."""
    _, _, reduction, target, weight, grad, _, classes = case
    out = np.full((len(target), classes), mpmath.mpf(0), dtype=object)
    for i, t in enumerate(target):
        if t == -100:
            continue
        w = mpmath.mpf(float(weight[t])) if weight is not None else mpmath.mpf(1)
        g = mpmath.mpf(float(grad[i if grad.size > 1 else 0]))
        if reduction == 1:
            total = mpmath.mpf(float(total_of(case)))
            value = -w * g / total if total != 0 else mpmath.inf
        else:
            value = -w * g
        out[i, t] = value
    return out


def total_of(case) -> float:
    return float(case[6])


@SETTINGS
@given(nll_cases())
def test_nll_loss_backward_for_exact_operands(case) -> None:
    dtype, one_dimensional, reduction, target, weight, grad, total, classes = case
    torch_dtype = DTYPES[dtype]
    x = torch.zeros(len(target), classes, dtype=torch_dtype)
    t = torch.tensor(target)
    g = torch.tensor(grad).to(torch_dtype)
    if reduction != 0 or one_dimensional:
        g = g.reshape(())
    w = torch.tensor(weight).to(torch_dtype) if weight is not None else None
    tw = torch.tensor(total).to(torch_dtype)
    if one_dimensional:
        x, t = x[0], t[0]
    with fp.track(strict=True):
        out = aten.nll_loss_backward(g, x, t, w, reduction, -100, tw)
    bounds = fp.bounds_of(out)
    exact = exact_nll_backward(case).reshape(tuple(x.shape))
    if bounds is None:  # nothing rounded (no weight, no mean): exact and untracked
        assert np.array_equal(out.double().numpy(), exact.astype(float))
        return
    assert_encloses(bounds, out, exact, case)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_nll_loss_backward_for_tracked_operands(dtype: torch.dtype) -> None:
    """The upstream gradient and the total weight as intervals: the exact value at each pair
    of their ends lies in the result."""
    torch.manual_seed(0)
    target = torch.tensor([2, -100, 0, 2])
    with fp.track(strict=True):
        x = torch.log_softmax(torch.randn(4, 3, dtype=dtype), -1)
        weight = torch.tensor([0.5, 2.0, 3.0]).to(dtype) * 1.1
        _, total = aten.nll_loss_forward(x, target, weight, 1, -100)
        g = torch.tensor(1.3, dtype=dtype) * 1.7
        out = aten.nll_loss_backward(g, x, target, weight, 1, -100, total)
    gb, wb, tb, bounds = (fp.bounds_of(v) for v in (g, weight, total, out))
    assert bounds is not None
    assert gb is not None
    assert wb is not None
    assert tb is not None
    assert bounds.contains(out).all()
    ends = (gb.lo, gb.hi), (wb.lo, wb.hi), (tb.lo, tb.hi)
    for gv, wv, tv in itertools.product(*ends):
        exact = np.full((4, 3), mpmath.mpf(0), dtype=object)
        for i, t in enumerate(target.tolist()):
            if t != -100:
                exact[i, t] = -mpmath.mpf(float(wv[t])) * mpmath.mpf(float(gv)) / float(tv)
        assert_encloses(bounds, out, exact, (gv, wv, tv))


def test_log_softmax_backward_charges_the_rounding_of_the_rows_sum() -> None:
    """A row whose sum cancels: 1, a, a, -1 in one lane of the vectorised reduction (columns 0,
    16, 32, 48 of 70) with a = 3 * 2**-26, so that 1 + a rounds back to 1 and the float32 sum
    is 0 where the exact one is 1.5 * 2**-24; where g is 0 the kernel's result is then 0, not
    -exp(y) * 1.5 * 2**-24. Bounds that took the sum as rounded once would exclude it."""
    g = torch.zeros(1, 70)
    g[0, [0, 16, 32, 48]] = torch.tensor([1.0, 3 * 2.0**-26, 3 * 2.0**-26, -1.0])
    y = torch.log_softmax(torch.linspace(-1, 1, 70).reshape(1, 70), -1)
    with fp.track(strict=True):
        out = aten._log_softmax_backward_data(g, y, -1, torch.float32)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    exact = exact_log_softmax_backward(g.double().numpy(), y.double().numpy(), -1)
    assert_encloses(bounds, out, exact, "cancelling row")
    assert out[0, 1].item() == 0.0  # the kernel's sum is 0 (else the case tests nothing)


def test_nll_loss_backward_charges_the_quotients_rounding() -> None:
    """w * -(g / W) in float32 with the quotient rounded first: for these three numbers
    (found by a search) the kernel's value lies outside the outward rounding of the exact
    -w g / W; bounds that skipped the quotient's rounding would exclude it."""
    g, total, w = (torch.tensor(v) for v in (1.1103437, 2.1982138, 1.8170406))
    x = torch.zeros(1, 2)
    target = torch.tensor([1])
    with fp.track(strict=True):
        out = aten.nll_loss_backward(g, x, target, torch.stack([w, w]), 1, -100, total)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    exact = np.array(
        [[mpmath.mpf(0), -mpmath.mpf(float(w)) * mpmath.mpf(float(g)) / float(total)]],
        dtype=object,
    )
    assert_encloses(bounds, out, exact, "quotient rounded first")
    # the case tests the rounding: the value is beyond exact's float32 neighbours
    value = mpmath.mpf(out[0, 1].item())
    step = mpmath.mpf(2) ** -24  # float32's spacing below 1 (the value is about -0.918)
    assert abs(value - exact[0, 1]) > step


def test_log_softmax_backward_where_float32s_exponential_overflows() -> None:
    """exp(89) is finite in float64 and infinite in float32: the kernel's -inf lies in the
    enclosure (the exponential's enclosure rounded onto float32 overflows as the kernel does;
    kept in float64 it did not, found by a review)."""
    g = torch.tensor([[0.25, 0.25]])
    y = torch.tensor([[89.0, 0.0]])
    with fp.track(strict=True):
        z = torch.tensor(0.25) * 1.1
        out = aten._log_softmax_backward_data(g + (z - z), y, 1, torch.float32)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert out[0, 0].item() == -float("inf")
    assert bounds.contains(out).all()


def test_log_softmax_backward_with_a_revealed_order_of_fewer_terms() -> None:
    """A summation order revealed for sums of 64 terms does not describe the kernel's sum of a
    128-term column with 64 non-zero terms: the row's factor is the smaller of the tracker's
    for 128 terms and gamma_63 (the tree's for 64 excluded the kernel's 0, found by a
    review). The column: 1 and 63 terms that each round away, exp(y) = 1."""
    m, n = 64, 128

    def pairwise(lo: int, hi: int) -> object:
        return lo if hi - lo == 1 else (pairwise(lo, (lo + hi) // 2), pairwise((lo + hi) // 2, hi))

    tree = fp.SummationTree.from_nested(pairwise(0, m))
    g = torch.zeros(n, 1)
    g[0] = 1.0
    g[1:m] = 2.0**-24 * (1 - 2.0**-20)
    y = torch.zeros(n, 1)
    with fp.track(strict=True, order=tree):
        out = aten._log_softmax_backward_data(g, y, 0, torch.float32)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert out[0, 0].item() == 0.0  # 1 - fl(sum), the sum rounded back to 1
    assert bounds.contains(out).all()


def test_nll_loss_backward_of_a_nan_gradient_and_a_weight_of_two_dimensions() -> None:
    """An exact NaN upstream gradient gives the whole line where it lands (a NaN point is no
    enclosure); a weight of shape (1, C) is read as the kernel reads it, one flat row (the
    rule indexed its first axis and failed). Both found by a review."""
    with fp.track(strict=True):
        out = aten.nll_loss_backward(
            torch.tensor(float("nan")),
            torch.zeros(1, 2),
            torch.tensor([0]),
            None,
            2,
            -100,
            torch.tensor(1.0),
        )
        weighted = aten.nll_loss_backward(
            torch.tensor(3.0),
            torch.zeros(2, 3),
            torch.tensor([0, 1]),
            torch.ones(1, 3) * 0.7,
            1,
            -100,
            torch.tensor(7.0),
        )
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert np.isneginf(bounds.lo[0, 0])
    assert np.isposinf(bounds.hi[0, 0])
    assert bounds.contains(out)[0, 1]
    weighted_bounds = fp.bounds_of(weighted)
    assert weighted_bounds is not None
    assert weighted_bounds.contains(weighted).all()


def test_cross_entropy_of_one_sample_without_reduction() -> None:
    """A 1-d input's loss without reduction is 0-d: the forward rule's one term is shaped so
    (the store refused a 1-element enclosure for it, found by a review), and the backward
    pass is bounded."""
    x = torch.randn(5, requires_grad=True)
    with fp.track(strict=True):
        loss = torch.nn.functional.cross_entropy(x * 1.0, torch.tensor(2), reduction="none")
        loss.backward()
    assert loss.shape == ()
    loss_bounds, grad_bounds = fp.bounds_of(loss), fp.bounds_of(x.grad)
    assert loss_bounds is not None
    assert grad_bounds is not None
    assert loss_bounds.contains(loss).all()
    assert grad_bounds.contains(x.grad).all()


def test_the_log_softmax_gradient_is_tight_on_a_language_models_logits() -> None:
    """The kernel over 64 rows of 1024 classes in float32 with exact operands (a
    cross-entropy's: the log-probabilities, and -1/64 at each row's label): the median
    enclosure is 13.6 float32 unit round-offs wide, the model's allowance (exp's 2 ULPs, 8 u
    wide, and the outward steps of the product and the difference). The row's sum, one
    non-zero term, is exact: charged gamma_1023 like any sum of 1024 terms, the median was
    2,059 u. (Through ``loss.backward()`` the forward log-softmax's own enclosure, gamma_1024
    wide, dominates.)"""
    torch.manual_seed(0)
    y = torch.log_softmax(torch.randn(64, 1024), -1)
    g = torch.zeros(64, 1024)
    g[torch.arange(64), torch.randint(0, 1024, (64,))] = -1 / 64
    with fp.track(strict=True):
        out = aten._log_softmax_backward_data(g, y, -1, torch.float32)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out).all()
    width = (bounds.hi - bounds.lo) / (np.abs(out.double().numpy()) * 2.0**-24)
    assert np.median(width) <= 16, np.median(width)


def test_the_backward_kernels_have_rules_of_their_own() -> None:
    """Neither goes through its decomposition any more (they were a third of a language
    model's tracked backward pass at width 128: docs/performance.md)."""
    from pytest_fpcheck.interval.registry import lookup

    for name in ("aten._log_softmax_backward_data", "aten.nll_loss_backward"):
        assert lookup(f"{name}.default", name) is not None, name


@pytest.mark.parametrize(
    ("compute", "result", "shape", "axis"),
    [
        ("float32", "float32", (6, 40), 1),
        ("float32", "bfloat16", (6, 40), 1),
        ("float32", "float16", (5, 3, 7), 1),
        ("float64", "float64", (40, 6), 0),
        ("float32", "float32", (), 0),
        ("float32", "float32", (64, 257), 1),
        ("float64", "float32", (33, 70), 0),
    ],
)
def test_the_fused_pass_gives_the_bits_of_the_three_operations(compute, result, shape, axis):
    """The rule's one pass (``kernels.log_softmax_backward_bounds``) against the interval
    operations it fuses, ``library_function(exp)``, ``mul`` and ``sub`` onto the compute format
    and the rounding onto the result's: the same ends, on operands with NaN, infinities, zeros,
    subnormals, exponentials that overflow or underflow the compute format or float64 (NumPy's
    exp is taken from -701 up where the compute format's allowance swamps what lies below),
    whole-line sums."""
    from pytest_fpcheck import formats as F
    from pytest_fpcheck.interval import elementwise as ew
    from pytest_fpcheck.interval.core import Interval
    from pytest_fpcheck.interval.kernels import log_softmax_backward_bounds

    rng = np.random.default_rng(5)
    c, fmt = F.format_of(compute), F.format_of(result)
    size = int(np.prod(shape))
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, 1e-40, -700.0, 89.0, 710.0])
    # exponentials far below the compute format's, subnormal in float64 or zero
    special = np.concatenate([special, [-120.0, -705.0, -712.0, -745.5, -746.0, -760.0, -5e4]])
    ends = []
    for scale in (1.0, 30.0):
        values = rng.standard_normal(size) * scale
        # at positions of their own in each operand: an element special in one step and
        # usual in the others
        where = rng.choice(size, min(size, 3 * special.size), replace=False)
        values[where] = np.resize(special, where.size)
        width = np.abs(rng.standard_normal(size)) * rng.choice([0.0, 1e-6, 2.0], size)
        ends.append((values.reshape(shape), (values + width).reshape(shape)))
    g, y = (Interval(*ends[0]), Interval(*ends[1]))
    kept = tuple(1 if i == axis else k for i, k in enumerate(shape))
    t_lo = rng.standard_normal(kept) if shape else rng.standard_normal(())
    t_hi = t_lo + np.abs(rng.standard_normal(np.shape(t_lo)))
    if shape:
        t_lo.reshape(-1)[0], t_hi.reshape(-1)[0] = -np.inf, np.inf  # a whole-line sum
    total = Interval(t_lo, t_hi)
    expected = ew.sub(
        g, ew.mul(ew.library_function(np.exp, y, c, c, ew.ULP_ERRORS["exp"]), total, c), c
    )
    expected = expected if fmt is c else expected.to_format(fmt)
    lo, hi = log_softmax_backward_bounds(
        (g.lo, g.hi),
        (y.lo, y.hi),
        (total.lo, total.hi),
        axis,
        ew.library_allowance(c, ew.ULP_ERRORS["exp"]),
        c,
        fmt,
    )
    assert lo.shape == hi.shape == expected.lo.shape
    for ours, theirs in ((lo, expected.lo), (hi, expected.hi)):
        theirs = np.asarray(theirs, dtype=np.float64)
        assert np.array_equal(ours.view(np.int64), theirs.view(np.int64))
