"""The operations the foreign-suite run (einops under ``--fpcheck --fpcheck-track=always``,
issue 17) found without a rule: uninitialised memory from ``new_empty_strided`` and
``new_empty``; products (``aten.prod``, and ``prims.prod``, which ``cumprod``'s decomposition
and so ``prod``'s backward reach), proven against mpmath on rows that underflow, overflow and
change sign; the full-signature ``aten._convolution`` a traced TorchScript graph calls,
transposed, grouped and with output padding, against a float64 evaluation."""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
F = torch.nn.functional

mpmath.mp.dps = 80
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def seed() -> None:
    torch.manual_seed(0)


# --- uninitialised memory ---------------------------------------------------------------


@pytest.fixture
def nan_filled_empties():
    """Deterministic algorithms fill uninitialised floating memory with NaN: what an empty
    tensor holds is then known (and non-finite) without being a value the program computed."""
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.new_empty_strided((2, 3), (1, 2)),
        lambda x: x.new_empty((2, 3)),
    ],
    ids=["new_empty_strided", "new_empty"],
)
def test_uninitialised_memory_is_a_point(make, nan_filled_empties) -> None:
    x = torch.randn(3, 4)
    with fp.track(strict=True) as tracker:
        empty = make(x)
        filled = make(x).fill_(2.5)
        total = filled * x[:2, :3]
    assert not tracker.gaps
    assert torch.isnan(empty).all()
    assert fp.bounds_of(filled) is None  # a point: nothing recorded
    bounds = fp.bounds_of(total)
    assert np.isfinite(bounds.lo).all()
    assert np.isfinite(bounds.hi).all()
    assert bounds.contains(total).all()
    assert bounds.contains(2.5 * x[:2, :3].double()).all()


def test_new_empty_strided_is_no_nonfinite_appearance(nan_filled_empties) -> None:
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fp.watch_nonfinite() as watch:
            made = x.new_empty_strided((2, 2), (2, 1))
            kept = x * 2
    assert torch.isnan(made).all()
    assert torch.isfinite(kept).all()
    assert watch.appearances() == []


# --- products -------------------------------------------------------------------------------


def hard_rows(dtype: torch.dtype, rows: int = 96, length: int = 4) -> torch.Tensor:
    """Rows whose products underflow, overflow or neither: magnitudes spread over the whole
    exponent range of ``dtype`` (subnormals included), signs mixed, a few zeros and ones."""
    info = torch.finfo(dtype)
    subnormal_bits = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}[dtype]
    low, high = np.log2(info.smallest_normal) - subnormal_bits, np.log2(info.max)
    exponents = torch.rand(rows, length, dtype=torch.float64) * (high - low) + low
    mantissa = 1 + torch.rand(rows, length, dtype=torch.float64)
    signs = torch.where(torch.rand(rows, length) < 0.5, -1.0, 1.0).double()
    values = (signs * mantissa * 2.0**exponents).to(dtype)
    values[::11, 1] = 0
    values[::7, 2] = 1
    # rows of moderate numbers too, so that most enclosures are finite and tight
    values[1::3] = (torch.randn(rows, length)[1::3] * 3).to(dtype)
    return values


def exact_products(values: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(values, axis, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    for index in np.ndindex(out.shape):
        product = mpmath.mpf(1)
        for v in moved[index]:
            product *= mpmath.mpf(float(v))
        out[index] = product
    return out


def assert_encloses(out: torch.Tensor, exact: np.ndarray) -> fp.Bounds:
    """The computed value and the exact one lie in the enclosure (the whole line admits
    anything, a NaN the computation may produce there included)."""
    bounds = fp.bounds_of(out)
    assert bounds is not None
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    computed = out.double().numpy().reshape(-1)
    for i, value in enumerate(exact.reshape(-1)):
        if np.isneginf(lo[i]) and np.isposinf(hi[i]):
            continue
        assert lo[i] <= computed[i] <= hi[i], ("computed", i, lo[i], computed[i], hi[i])
        assert mpmath.mpf(lo[i]) <= value <= mpmath.mpf(hi[i]), ("exact", i, lo[i], hi[i])
    return bounds


@pytest.mark.parametrize("dtype", DTYPES)
def test_prod_encloses_underflow_overflow_and_signs(dtype: torch.dtype) -> None:
    x = hard_rows(dtype)
    with fp.track(strict=True):
        rows, everything = x.prod(1), x[:8, :3].prod()
    values = x.double().numpy()
    bounds = assert_encloses(rows, exact_products(values, 1))
    assert_encloses(everything, exact_products(values[:8, :3].reshape(1, -1), 1).reshape(()))
    # the rows of moderate numbers keep tight enclosures
    moderate = bounds.hi[1::3] - bounds.lo[1::3]
    assert np.all(moderate <= 8 * np.abs(rows[1::3].double().numpy()) * torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prod_whose_running_product_underflows_or_overflows_holds_the_kernels_value(
    dtype: torch.dtype,
) -> None:
    info = torch.finfo(dtype)
    tiny, big = info.smallest_normal / 4, info.max / 4
    x = torch.tensor(
        [[tiny, tiny, 1 / (tiny * tiny) if dtype != torch.float16 else big], [big, big, 1 / big]],
        dtype=torch.float64,
    ).to(dtype)
    with fp.track(strict=True):
        out = x.prod(1)
    assert_encloses(out, exact_products(x.double().numpy(), 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_prims_prod_over_its_dims(dtype: torch.dtype) -> None:
    x = hard_rows(dtype, rows=24).reshape(4, 6, 4)
    values = x.double().numpy()
    with fp.track(strict=True):
        over_one = torch.ops.prims.prod(x, [1])
        over_two = torch.ops.prims.prod(x, [0, 2])
        over_none = torch.ops.prims.prod(x, [])
    assert_encloses(over_one, exact_products(values, 1))
    both = np.moveaxis(values, 1, 0).reshape(6, -1)
    assert_encloses(over_two, exact_products(both, 1))
    assert torch.equal(over_none, x)
    kept = fp.bounds_of(over_none)  # nothing is rounded: the values, give or take a grid step
    assert kept.contains(over_none).all()
    ordinary = np.abs(values) < torch.finfo(dtype).max / 2
    width = (kept.hi - kept.lo)[ordinary]
    step = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
    assert np.all(width <= np.abs(values[ordinary]) * torch.finfo(dtype).eps + step)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cumprod_and_the_backward_of_prod_have_no_gap(dtype: torch.dtype) -> None:
    x = (torch.rand(5, 6) + 0.5).to(dtype).requires_grad_()
    with fp.track(strict=True) as tracker:
        running = x.cumprod(1)
        x.prod(1).sum().backward()
    assert not tracker.gaps
    values = x.detach().double().numpy()
    running = running.detach()
    exact_running = np.empty(values.shape, dtype=object)
    exact_grad = np.empty(values.shape, dtype=object)
    for i, j in np.ndindex(values.shape):
        exact_running[i, j] = exact_products(values[i : i + 1, : j + 1], 1)[0]
        others = np.delete(values[i], j)
        exact_grad[i, j] = exact_products(others.reshape(1, -1), 1)[0]
    assert_encloses(running, exact_running)
    assert_encloses(x.grad, exact_grad)


# --- the full-signature convolution ----------------------------------------------------------


def float64_reference(fn, *inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return fn(*(t.double() for t in inputs))


def assert_holds(out: torch.Tensor, reference: torch.Tensor) -> None:
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert not np.isinf(bounds.hi - bounds.lo).any()
    assert bounds.contains(out).all(), "computed value outside its enclosure"
    inside = bounds.contains(reference)
    assert inside.all(), np.flatnonzero(~inside)[:5]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("transposed", "stride", "padding", "dilation", "output_padding", "groups"),
    [
        (False, (1, 1), (1, 1), (1, 1), (0, 0), 1),
        (False, (2, 1), (0, 1), (2, 1), (0, 0), 2),
        (True, (2, 2), (1, 0), (1, 1), (1, 1), 2),
        (True, (3, 2), (0, 1), (1, 2), (2, 0), 1),
    ],
)
def test_underscore_convolution_honours_its_arguments(
    dtype, transposed, stride, padding, dilation, output_padding, groups
) -> None:
    x = torch.randn(2, 4, 7, 6).to(dtype)
    w = torch.randn(4, 6 // groups, 3, 2) if transposed else torch.randn(6, 4 // groups, 3, 2)
    w, b = w.to(dtype), torch.randn(6).to(dtype)

    def conv(x, w, b):
        return torch.ops.aten._convolution.default(
            x, w, b, stride, padding, dilation, transposed, output_padding, groups,
            False, False, True, True,
        )  # fmt: skip

    with fp.track(strict=True):
        out = conv(x, w, b)
    if transposed:
        expected = F.conv_transpose2d
        reference = float64_reference(
            lambda x, w, b: expected(x, w, b, stride, padding, output_padding, groups, dilation),
            x, w, b,
        )  # fmt: skip
    else:
        reference = float64_reference(
            lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), x, w, b
        )
    assert out.shape == reference.shape
    assert_holds(out, reference)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace.*` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_traced_graphs_convolutions_are_bounded(dtype: torch.dtype) -> None:
    model = torch.nn.Sequential(
        torch.nn.Conv1d(4, 6, 3, padding=1, groups=2),
        torch.nn.Tanh(),
        torch.nn.ConvTranspose1d(6, 4, 3, stride=2, output_padding=1),
    ).to(dtype)
    x = torch.randn(2, 4, 9).to(dtype)
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
        with fp.track(strict=True) as tracker:
            out = traced(x)
    assert not tracker.gaps
    reference = float64_reference(model.double(), x)
    assert_holds(out, reference)
