"""What a second hunt through realistic training code found (each test fails on the code before
its fix): complex tensors whose rules read a real tensor's bounds as their own (values outside
their enclosures) or whose results had no bounds at all; a nested tensor that crashed tracking;
squares (``x * x``, Adam's ``addcmul(v, g, g)``) and products of magnitudes whose enclosures
held negative numbers, and a square root of zero stepped below zero, which left every
parameter a zero gradient touched the whole line after one Adam step; the lerp of Adam's first
moment taken as the hull of both of ATen's formulas where the weight decides which one runs."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def straddling(dtype: torch.dtype) -> torch.Tensor:
    """Tracked zeros whose enclosures straddle zero (1.1 x - 1.1 x: the two roundings of 1.1 x
    are independent to interval arithmetic), beside tracked non-zero values."""
    x = torch.tensor([1e-3, -2.5, 3.0, -7e-5], dtype=dtype)
    return torch.cat([x * 1.1 - x * 1.1, x * 1.1])


def test_a_complex_view_of_tracked_values_is_never_read_as_real() -> None:
    """|3 + 4i| = 5 was enclosed in [3, 3] (the real parts' bounds): now the whole line, a gap;
    under strict, refused."""
    x = torch.tensor([3.0, 4.0, 1.0, 2.0])
    with fp.track() as tracking:
        z = torch.view_as_complex((x * 1.0).reshape(2, 2))
        size = z.abs()
        norm = torch.linalg.vector_norm(z)
    for result in (size, norm):
        bounds = fp.bounds_of(result)
        assert bounds is not None
        assert bounds.contains(result).all()
        assert np.isneginf(bounds.lo).all()
        assert np.isposinf(bounds.hi).all()
    assert any("complex" in gap.message for gap in tracking.gaps.values())
    with pytest.raises(fp.UnsupportedOperation, match="complex tensors"), fp.track(strict=True):
        torch.view_as_complex((x * 1.0).reshape(2, 2)).abs()


@pytest.mark.parametrize("shape", [(4, 2), (2, 4, 2)])
def test_the_real_view_of_a_complex_result_is_the_whole_line(shape: tuple[int, ...]) -> None:
    """A rotary embedding through complex numbers (torchtitan's, Meta's Llama's): its result
    had no bounds (read as exact) and, for a 1-d input, ``bounds_of`` raised."""
    x = torch.randn(*shape)
    angles = torch.polar(torch.ones(shape[:-1]), torch.rand(shape[:-1]))
    with fp.track():
        rotated = torch.view_as_real(torch.view_as_complex(x * 1.1) * angles).flatten()
        after = rotated * 2.0
    for result in (rotated, after):
        bounds = fp.bounds_of(result)
        assert bounds is not None
        assert np.isneginf(bounds.lo).all()
        assert np.isposinf(bounds.hi).all()


def test_a_real_view_of_a_complex_view_keeps_the_real_bounds() -> None:
    """A view through complex and back is a view: the bounds are the real tensor's own."""
    x = torch.randn(3, 2)
    with fp.track(strict=True):
        y = x * 1.1
        back = torch.view_as_real(torch.view_as_complex(y))
    bounds = fp.bounds_of(back)
    assert bounds is not None
    assert np.isfinite(bounds.lo).all()
    assert bounds.contains(back).all()


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_a_nested_tensor_fast_path_does_not_crash_tracking() -> None:
    """An encoder in evaluation with a padding mask runs its nested-tensor fast path: a gap,
    never an exception into the program."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        plain = encoder(x, src_key_padding_mask=mask)
        with fp.track():
            tracked = encoder(x, src_key_padding_mask=mask)
    assert torch.equal(plain, tracked)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_square_is_never_negative(dtype: torch.dtype) -> None:
    """``x * x`` and ``addcmul(v, x, x)`` for an x whose enclosure straddles zero: the lower end
    was lo * hi < 0; now 0 or more, and the computed and exact squares are inside."""
    with fp.track(strict=True):
        x = straddling(dtype)
        square = x * x
        moment = torch.zeros_like(x).addcmul_(x, x, value=0.001)
    for result, scale in ((square, 1), (moment, 0.001)):
        bounds = fp.bounds_of(result)
        assert bounds is not None
        assert (bounds.lo >= 0).all(), bounds.lo
        assert bounds.contains(result).all()
        for value, lo, hi in zip(x.double().tolist(), bounds.lo, bounds.hi, strict=True):
            exact = mpmath.mpf(scale) * mpmath.mpf(value) ** 2
            if dtype is not torch.float64 or scale == 1:
                assert mpmath.mpf(float(lo)) <= exact <= mpmath.mpf(float(hi))


def test_a_product_of_magnitudes_and_a_square_root_of_zero_stay_at_or_above_zero() -> None:
    """A float64 product of two non-negative enclosures was stepped below zero where it is
    zero, and so were the square root of 0 and a zero quotient (NaN roots after them)."""
    with fp.track(strict=True):
        a = torch.tensor([0.0, 1e-200, 2.0], dtype=torch.float64) * 1.0
        b = torch.tensor([0.0, 1e-200, 3.0], dtype=torch.float64).abs() * 1.5
        product = a.abs() * b
        root = torch.sqrt(torch.zeros(3, dtype=torch.float64) * 1.0)
        quotient = torch.tensor([0.0, 1e-300, 1.0], dtype=torch.float64) * 1.0 / 1e10
        negative = -(torch.tensor([0.0, 1e-300, 1.0]) * 1.0) / 3.0
    negative_bounds = fp.bounds_of(negative)
    assert negative_bounds is not None
    assert (negative_bounds.hi <= 0).all(), negative_bounds.hi
    for result in (product, root, quotient):
        bounds = fp.bounds_of(result)
        assert bounds is not None
        assert (bounds.lo >= 0).all(), bounds.lo
        assert bounds.contains(result).all()


OPTIMIZERS = {
    "Adam": lambda p: torch.optim.Adam(p, lr=0.1, foreach=False),
    "Adam-foreach": lambda p: torch.optim.Adam(p, lr=0.1, foreach=True),
    "AdamW-fused": lambda p: torch.optim.AdamW(p, lr=0.1, fused=True),
    "RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.1),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
    "NAdam": lambda p: torch.optim.NAdam(p, lr=0.1, foreach=False),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_zero_gradient_leaves_a_bounded_parameter(name: str) -> None:
    """A dead unit's parameter (gradient exactly 0) was the whole line after one step: the
    second moment 0 + 0 * 0 held negative numbers, its root NaN."""
    param = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = OPTIMIZERS[name]([param])
    with fp.track(strict=True):
        loss = (param * torch.tensor([1.0, 0.0])).sum() * 0.5
        loss.backward()
        optimizer.step()
    bounds = fp.bounds_of(param)
    assert bounds is not None
    assert bounds.contains(param).all()
    assert np.isfinite(bounds.lo).all()
    assert np.isfinite(bounds.hi).all()
    assert bounds.hi[1] - bounds.lo[1] <= 1e-6  # the untouched parameter stays where it was


@pytest.mark.parametrize("foreach", [False, True])
def test_adams_first_moment_takes_the_formula_its_weight_selects(foreach: bool) -> None:
    """``lerp(m, g, 0.1)`` runs ``m + 0.1 (g - m)``; the hull with ``g - 0.9 (g - m)`` made a
    first moment of a gradient straddling zero ten times as wide as 0.1 g."""
    param = torch.nn.Parameter(torch.zeros(8))
    optimizer = torch.optim.Adam([param], lr=0.1, foreach=foreach)
    with fp.track(strict=True):
        gradient = straddling(torch.float32)
        loss = (param * gradient).sum()
        loss.backward()
        optimizer.step()
        moment = optimizer.state[param]["exp_avg"]
    g, m = fp.bounds_of(param.grad), fp.bounds_of(moment)
    assert g is not None
    assert m is not None
    assert m.contains(moment).all()
    width_g, width_m = g.hi - g.lo, m.hi - m.lo
    zeros = slice(0, 4)  # where g straddles zero; elsewhere m's own rounding adds its ULPs
    assert (width_m[zeros] <= 0.1 * width_g[zeros] * (1 + 1e-5) + 1e-30).all(), (width_m, width_g)


def test_a_double_backward_through_sigmoid_under_strict_tracking() -> None:
    """``sigmoid_backward`` (a gradient penalty through SiLU or sigmoid): its rule shares the
    products' two-rounding helper with addcmul, whose signature changed with this fix."""
    x = torch.randn(6, requires_grad=True)
    with fp.track(strict=True):
        y = torch.sigmoid(x * 1.1)
        (gradient,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        gradient.pow(2).sum().backward()
    bounds = fp.bounds_of(x.grad)
    assert bounds is not None
    assert bounds.contains(x.grad).all()


def every_finite(dtype: torch.dtype) -> torch.Tensor:
    """Every finite number of a 16-bit format (float32: bfloat16's, converted)."""
    view = torch.float16 if dtype is torch.float16 else torch.bfloat16
    values = torch.arange(0, 2**16, dtype=torch.int32).to(torch.int16).view(view).to(dtype)
    return values[torch.isfinite(values)]


def assert_holds_computed(result: torch.Tensor) -> None:
    """Each computed value lies in its enclosure (a NaN only where it is the whole line)."""
    bounds = fp.bounds_of(result)
    assert bounds is not None
    value = result.detach().double().numpy()
    whole = np.isneginf(bounds.lo) & np.isposinf(bounds.hi)
    inside = (bounds.lo <= value) & (value <= bounds.hi)
    bad = ~(inside | (np.isnan(value) & whole))
    assert not bad.any(), (value[bad][:5], bounds.lo[bad][:5], bounds.hi[bad][:5])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("exponent", [-2.0, -1.0, -3.0, -0.5])
def test_negative_powers_of_every_number_hold_the_kernels_value(
    dtype: torch.dtype, exponent: float
) -> None:
    """bfloat16's ``pow(x, -2)`` is 1 / (x x) with the square rounded to bfloat16 first (722
    of its numbers lay outside a one-rounding model); ``pow(-0.0, -0.5)`` is rsqrt's -inf."""
    with fp.track(strict=True):
        result = (every_finite(dtype) * 1).pow(exponent)
    assert_holds_computed(result)


def test_negative_even_powers_of_negative_bases_are_bounded() -> None:
    """(-3)**-2 is 1/9: it was the whole line (a real power of a negative base)."""
    with fp.track(strict=True):
        result = torch.tensor([-3.0, 3.0]).mul(1).pow(-2)
    bounds = fp.bounds_of(result)
    assert bounds is not None
    assert np.isfinite(bounds.lo).all()
    assert np.isfinite(bounds.hi).all()
    assert (bounds.lo <= 1 / 9).all()
    assert (bounds.hi >= 1 / 9).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rsqrt_of_negative_zero(dtype: torch.dtype) -> None:
    with fp.track(strict=True):
        result = torch.tensor([-0.0, 0.0, 4.0], dtype=dtype).mul(1).rsqrt()
    assert result[0] == -np.inf
    assert_holds_computed(result)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_nan_to_num_with_a_replacement_inside_the_range(dtype: torch.dtype) -> None:
    """The enclosure [max, inf] of an overflowing square maps to {max, 1e4}: it was inverted
    (lo = max > hi = 1e4), the computed 1e4 outside."""
    big = 1000.0 if dtype is torch.float16 else 1e30
    with fp.track(strict=True):
        square = torch.tensor([big, 2.0, -big], dtype=dtype) * torch.tensor(
            [big, 2.0, big], dtype=dtype
        )
        result = torch.nan_to_num(square, posinf=1e4, neginf=-7.0)
        whole = torch.nan_to_num(1.0 / (torch.tensor([1.0], dtype=dtype) * 0.1 - 0.1), nan=5.0)
    assert_holds_computed(result)
    bounds = fp.bounds_of(result)
    assert bounds is not None
    assert (bounds.lo <= bounds.hi).all()
    assert_holds_computed(whole)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_an_integral_division_of_an_infinity(mode: str) -> None:
    """``inf // 0.3`` is NaN (ATen takes fmod of the infinity): its enclosure was [max, inf]."""
    with fp.track(strict=True):
        result = torch.div(torch.tensor([1.0, 1e39, -1e39]) * 1.0, 0.3, rounding_mode=mode)
    assert_holds_computed(result)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_batch_norm_on_inputs_without_gradient(dtype: torch.dtype) -> None:
    """The first layer of a tabular network: ``native_batch_norm_backward`` with the output
    mask [False, True, True] returns (None, grad_weight, grad_bias) while its decomposition
    returns all three; paired by order of their tensors, the weight's gradient was checked
    against the input's and the operation refused."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1)).to(dtype)
    x = torch.randn(16, 4).to(dtype)
    with fp.track(strict=True):
        model(x).float().square().mean().backward()
    for parameter in model[0].parameters():
        bounds = fp.bounds_of(parameter.grad)
        assert bounds is not None
        assert bounds.contains(parameter.grad).all()
        assert np.isfinite(bounds.lo).all()
        assert np.isfinite(bounds.hi).all()


def test_a_write_through_data_outside_tracking_is_not_read_as_tracked() -> None:
    """``p.data.mul_(10)`` moves no version counter: the old bounds were returned, and a later
    tracked step computed with them (values outside their enclosures)."""
    x = torch.tensor([1.0, 2.0])
    with fp.track():
        p = x * 1.1
    p.data.mul_(10)
    with pytest.raises(fp.StaleBoundsError, match=r"\.data"):
        fp.bounds_of(p)
    with fp.track():
        q = p + 1
    assert_holds_computed(q)


def test_a_manual_update_through_data_between_tracked_steps() -> None:
    """Step 1 tracked, step 2 an untracked ``p.data.add_`` (the classic manual update), step 3
    tracked: its loss and gradients lay outside their enclosures."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with fp.track():  # the parameters get enclosures
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    with torch.no_grad():
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.5)
            p.grad = None
    with fp.track(strict=True):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
    assert_holds_computed(loss)
    for p in model.parameters():
        assert_holds_computed(p.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_median_and_kthvalue_are_order_statistics_of_the_ends(dtype: torch.dtype) -> None:
    """Refused under strict tracking before: an order statistic is monotone in each element,
    so it lies between the statistic of the lower ends and that of the upper ends."""
    x = torch.randn(7, 10, generator=torch.Generator().manual_seed(8)).to(dtype)
    with fp.track(strict=True):
        y = x * 1.1
        median, _ = y.median(dim=1)
        kth, _ = y.kthvalue(3, dim=0)
    exact = [[mpmath.mpf(float(v)) * mpmath.mpf("1.1") for v in row] for row in x.tolist()]
    exact_median = [sorted(row)[(len(row) - 1) // 2] for row in exact]
    exact_kth = [sorted(column)[2] for column in zip(*exact, strict=True)]
    for result, values in ((median, exact_median), (kth, exact_kth)):
        assert_holds_computed(result)
        bounds = fp.bounds_of(result)
        assert bounds is not None
        for value, lo, hi in zip(values, bounds.lo, bounds.hi, strict=True):
            assert mpmath.mpf(float(lo)) <= value <= mpmath.mpf(float(hi))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shrink", ["softshrink", "hardshrink"])
def test_the_gradient_of_a_shrinkage(dtype: torch.dtype, shrink: str) -> None:
    """``softshrink_backward`` and ``hardshrink_backward`` were refused under strict tracking:
    a selection, undecided (the hull of 0 and the gradient) where x's enclosure meets the
    band's edge."""
    function = getattr(torch.nn.functional, shrink)
    x = (torch.randn(200, generator=torch.Generator().manual_seed(9)) * 0.5).to(dtype)
    x[:5] = torch.tensor([0.3, -0.3, 0.29, 0.31, 0.0]).to(dtype)
    x.requires_grad_(True)
    with fp.track(strict=True):
        function(x * 1.1, 0.33).mul(torch.linspace(-1, 1, 200).to(dtype)).sum().backward()
    plain = x.detach().clone().requires_grad_(True)
    function(plain * 1.1, 0.33).mul(torch.linspace(-1, 1, 200).to(dtype)).sum().backward()
    assert torch.equal(x.grad, plain.grad)
    assert_holds_computed(x.grad)


def test_nan_inputs_of_sqrt_and_nan_to_num_are_the_whole_line() -> None:
    """Found by the review of these fixes: the root's new clamp at zero turned a NaN lower
    end into 0, and ``nan_to_num`` of a NaN end gave an inverted enclosure."""
    x = torch.tensor([float("nan"), 4.0])
    with fp.track(strict=True):
        root = x.sqrt()
        replaced = torch.nan_to_num(x)
        assert_holds_computed(root)
        assert_holds_computed(replaced)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_replacement_rounded_through_float32(dtype: torch.dtype) -> None:
    """``static_cast<Half>(double)`` rounds through float32: 1 + 2**-11 + 2**-40 becomes 1."""
    posinf = 1 + 2**-11 + 2**-40
    x = torch.tensor([1.0, float("inf"), float("-inf"), 2.0], dtype=dtype)
    with fp.track(strict=True):
        result = torch.nan_to_num(x * 1, posinf=posinf, neginf=-posinf)
        assert_holds_computed(result)


def test_a_lazily_negated_view_is_never_read_as_its_storage() -> None:
    """``z.conj().imag`` carries the negation bit: its values are the storage's negated, and
    its products were enclosed with the storage's sign."""
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    with fp.track():
        imaginary = torch.view_as_complex((y * 1.1).reshape(2, 2)).conj().imag
        product = imaginary * 1.0
        assert_holds_computed(product)
    assert fp.bounds_of(imaginary) is None


def test_a_broadcast_read_does_not_mark_a_stale_record_checked() -> None:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    with fp.track():
        y = x * 1.1
    y.numpy()[3] = 1000.0  # no version moves
    fp.bounds_of(y[:1].expand(4))  # four elements, one of the storage's
    with pytest.raises(fp.StaleBoundsError):
        fp.bounds_of(y)


@pytest.mark.parametrize(
    ("dtype", "a", "b", "mode"),
    [
        (torch.bfloat16, 1.0, 0.10009765625, "trunc"),
        (torch.float16, 65504.0, 21840.0, "trunc"),
        (torch.bfloat16, 98.0, -0.30078125, "floor"),
    ],
)
def test_an_integral_division_in_a_narrow_format(
    dtype: torch.dtype, a: float, b: float, mode: str
) -> None:
    """The kernel rounds the quotient to the format before truncating (bfloat16's 1 / 0.1001 is
    10, the enclosure held 9), and its floor rounds twice there (-328 for -325.8)."""
    with fp.track(strict=True):
        result = torch.div(
            torch.tensor([a], dtype=dtype) * 1,
            torch.tensor([b], dtype=dtype) * 1,
            rounding_mode=mode,
        )
        assert_holds_computed(result)


def test_pow_minus_a_half_of_a_small_bfloat16_tensor() -> None:
    """A one-element tensor takes the kernel's scalar path, 1 / sqrt(x) with the root rounded
    to bfloat16: rsqrt's allowance, which pow's model lacked (0.462890625 outside)."""
    x = torch.tensor([4.625], dtype=torch.bfloat16)
    with fp.track(strict=True):
        result = (x * 1) ** -0.5
        assert_holds_computed(result)
