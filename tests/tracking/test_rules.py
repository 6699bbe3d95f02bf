"""Rules the random programs do not reach, each checked on small inputs: the value PyTorch
computed and a float64 evaluation of the same function both lie in the enclosure. (A float64
result stands in for the exact one: its error is far below the enclosures' radii here.)"""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def check(fn, *inputs: torch.Tensor) -> fp.Bounds:
    with fp.track():
        out = fn(*inputs)
    out = out[0] if isinstance(out, tuple) else out
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out).all(), "computed value outside its enclosure"
    with torch.no_grad():
        reference = fn(*(t.double() if t.is_floating_point() else t for t in inputs))
    reference = reference[0] if isinstance(reference, tuple) else reference
    inside = bounds.contains(reference.double())
    assert inside.all(), (np.flatnonzero(~inside)[:5], bounds.lo.flat[:5], bounds.hi.flat[:5])
    return bounds


@pytest.fixture(autouse=True)
def seed() -> None:
    torch.manual_seed(0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_convolution_1d_2d_and_grouped(dtype: torch.dtype) -> None:
    x, w, b = (
        torch.randn(2, 4, 9).to(dtype),
        torch.randn(6, 2, 3).to(dtype),
        torch.randn(6).to(dtype),
    )
    check(lambda x, w, b: F.conv1d(x, w, b, padding=1, groups=2), x, w, b)
    x2, w2 = torch.randn(1, 3, 6, 6).to(dtype), torch.randn(5, 3, 3, 3).to(dtype)
    check(lambda x, w: F.conv2d(x, w, stride=2), x2, w2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalisations(dtype: torch.dtype) -> None:
    x = (torch.randn(2, 6, 5) * 3 + 1).to(dtype)
    w, b = torch.randn(6).to(dtype), torch.randn(6).to(dtype)
    check(lambda x, w, b: F.group_norm(x, 3, w, b), x, w, b)
    mean, var = torch.randn(6).to(dtype), (torch.rand(6) + 0.5).to(dtype)
    check(lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False), x, mean, var, w, b)
    check(lambda x, w: F.rms_norm(x, (5,), w[:5]), x, w)
    check(lambda x, w, b: F.layer_norm(x, (5,), w[:5], b[:5]), x, w, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions(dtype: torch.dtype) -> None:
    x = (torch.rand(3, 7) + 0.5).to(dtype)
    check(lambda x: x.prod(-1), x)
    check(lambda x: x.cumsum(-1), x)
    check(lambda x: x.std(0), x)
    check(lambda x: torch.linalg.vector_norm(x, ord=1, dim=1), x)
    check(lambda x: torch.linalg.vector_norm(x, ord=3, dim=1), x)
    check(lambda x: x.amax(1) - x.amin(1), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_losses_embedding_and_attention(dtype: torch.dtype) -> None:
    logits, target = torch.randn(5, 7).to(dtype), torch.tensor([0, 6, 3, -100, 2])
    check(lambda z, t: F.cross_entropy(z, t, ignore_index=-100), logits, target)
    check(lambda z, t: F.cross_entropy(z, t, reduction="none", ignore_index=-100), logits, target)
    table, index = torch.randn(10, 4).to(dtype), torch.tensor([[1, 9], [0, 0]])
    check(lambda w, i: F.embedding(i, w) * 3, table, index)
    q, k, v = (torch.randn(1, 2, 6, 4).to(dtype) for _ in range(3))
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    check(lambda a, b: torch.einsum("bhid,bhjd->bhij", a, b), q, k)


def test_dropout_scales_by_the_kept_probability() -> None:
    x = torch.randn(64)
    with fp.track():
        out = F.dropout(x, 0.25, training=True)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    kept = out != 0
    assert bounds.contains(np.where(kept, x.double().numpy() / 0.75, 0.0)).all()


@pytest.mark.parametrize("target", [torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16])
def test_casts_round_outward_including_saturating_float8(target: torch.dtype) -> None:
    x = torch.tensor([0.1, 1e-3, 3.3, -500.0, 1e5, float("inf")], dtype=torch.float32)
    with fp.track():
        y = x.to(target)
    bounds = fp.bounds_of(y)
    assert bounds.contains(y.double()).all()  # torch saturates float8_e4m3fn overflow to 448
    assert bounds.contains(x.double()).all()


def test_integer_powers_and_pow_of_positive_bases() -> None:
    x = torch.linspace(-3, 3, 13)
    check(lambda x: x.pow(4), x)
    check(lambda x: x.pow(3), x)
    check(lambda x: x.abs().pow(0.7), x)


def test_an_overflow_is_possible_once_rounded_partial_sums_may_reach_the_largest_number() -> None:
    """S (1 + gamma) decides, not S: a float16 sum of magnitude 65400 over 6 terms may round
    past 65504; a sum of zeros never overflows, even when gamma is infinite."""
    from pytest_fpcheck.formats import FORMATS
    from pytest_fpcheck.interval.core import gamma
    from pytest_fpcheck.interval.linalg import may_overflow

    half = FORMATS["float16"]
    g = gamma(5, half.unit_roundoff)
    magnitudes = np.array([65400.0, 60000.0, 0.0, np.inf])
    assert may_overflow(magnitudes, g, half.max_finite).tolist() == [True, False, False, True]
    assert not may_overflow(np.array([0.0]), np.inf, half.max_finite).any()
    assert may_overflow(np.array([1.0]), np.inf, half.max_finite).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"is_causal": True},
        {"mask": "additive"},
        {"mask": "blocking"},
        {"scale": 0.3},
        {"dropout_p": 0.5},
    ],
    ids=["plain", "causal", "additive-mask", "blocking-mask", "scale", "dropout"],
)
def test_fused_attention_log_sum_exp_output(dtype: torch.dtype, options: dict) -> None:
    """Tracking runs the fused CPU attention kernel itself: both its outputs are the kernel's,
    bit for bit (the log-sum-exp of the scores is untracked), and the kernel's own refusal of
    dropout reaches the program as in a plain run."""
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    q, k, v = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 9, 8), torch.randn(2, 3, 9, 8)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    options = dict(options)
    mask = options.pop("mask", None)
    if mask == "additive":
        options["attn_mask"] = torch.randn(2, 1, 6, 9).to(dtype)
    elif mask == "blocking":
        blocked = torch.rand(6, 9) > 0.7
        blocked[:, 0] = False  # no row entirely blocked
        options["attn_mask"] = torch.zeros(6, 9).masked_fill(blocked, float("-inf")).to(dtype)
    dropout_p = options.pop("dropout_p", 0.0)
    is_causal = options.pop("is_causal", False)
    if dropout_p:
        refusal = "Currently do not support dropout > 0"
        with pytest.raises(RuntimeError, match=refusal):
            op(q, k, v, dropout_p, is_causal, **options)
        with pytest.raises(RuntimeError, match=refusal), fp.track():
            op(q, k, v, dropout_p, is_causal, **options)
        return
    reference, reference_logsumexp = op(q, k, v, 0.0, is_causal, **options)
    with fp.track(strict=True):
        output, logsumexp = op(q, k, v, dropout_p, is_causal, **options)
    assert fp.bounds_of(output).contains(output).all()
    assert torch.equal(output, reference)
    assert torch.equal(logsumexp, reference_logsumexp)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("train", [True, None, False])
def test_native_dropout(dtype: torch.dtype, train: bool | None) -> None:
    """ATen's fused dropout (reached from inside decompositions, e.g. attention's math path):
    x * mask / (1 - p) when training, a copy otherwise."""
    x = torch.randn(200).to(dtype)
    with fp.track():
        y = x * 1.1  # tracked, with bounds of its own
        output, mask = torch.native_dropout(y, 0.3, train)
    bounds = fp.bounds_of(output)
    assert bounds.contains(output).all()
    expected = y.double() * mask / 0.7 if train is not False else y.double()
    assert bounds.contains(expected).all()
    assert np.all(bounds.radius[~mask.numpy()] == 0)
    if train is not False:
        assert (~mask).any()
        assert mask.any()


_IN_PLACE = {
    "add": (lambda x, y: x.add_(y, alpha=2), lambda x, y: x.add(y, alpha=2)),
    "iadd": (lambda x, y: x.__iadd__(y), lambda x, y: x + y),
    "scalar iadd": (lambda x, y: x.__iadd__(1.0), lambda x, y: x + 1.0),
    "sub": (lambda x, y: x.sub_(y), lambda x, y: x.sub(y)),
    "mul": (lambda x, y: x.mul_(y), lambda x, y: x.mul(y)),
    "div": (lambda x, y: x.div_(y + 5), lambda x, y: x.div(y + 5)),
    "clamp": (lambda x, y: x.clamp_(-0.5, 0.5), lambda x, y: x.clamp(-0.5, 0.5)),
    "exp": (lambda x, y: x.exp_(), lambda x, y: x.exp()),
    "lt": (lambda x, y: x.lt_(y), lambda x, y: x.lt(y).to(x.dtype)),
    "addmm": (lambda x, y: x.addmm_(y, y.t()[:, :4]), lambda x, y: x.addmm(y, y.t()[:, :4])),
    "addbmm": (
        lambda x, y: x.addbmm_(y.expand(3, 4, 4), y.expand(3, 4, 4)),
        lambda x, y: x.addbmm(y.expand(3, 4, 4), y.expand(3, 4, 4)),
    ),
}


@pytest.mark.parametrize("name", list(_IN_PLACE))
def test_in_place_variants_are_bounded_as_their_functional_ones(name: str) -> None:
    """A rule serves an operation and its in-place variant (``aten.add_``): both must get the
    same bounds (``x += y`` was once bounded as a subtraction)."""
    in_place, functional = _IN_PLACE[name]
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    with fp.track():
        a = x * 1.5 + 0.25  # tracked operands with bounds of their own
        b = y * 0.75 - 0.5
        expected = functional(a, b)
        result = in_place(a.clone(), b)
    bounds, reference = fp.bounds_of(result), fp.bounds_of(expected)
    assert bounds.contains(result).all()
    assert (bounds.lo == reference.lo).all()
    assert (bounds.hi == reference.hi).all()


def test_in_place_update_of_a_slice() -> None:
    x = torch.randn(6, 4)
    with fp.track():
        p = x * 1.5 + 0.25
        p[1:3] += 1.0
        p[:, 2] *= 3.0
    assert fp.bounds_of(p).contains(p).all()


@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss_keeps_the_kernels_values(dtype: torch.dtype, reduction: str) -> None:
    """``mse_loss`` runs as its kernel's steps under tracking: the same values bit for bit as
    the kernel itself, with bounds that hold them and the exact loss."""
    prediction, target = torch.randn(9, 70).to(dtype) * 3, torch.randn(9, 70).to(dtype)
    untracked = F.mse_loss(prediction, target, reduction=reduction)
    bounds = check(lambda p, t: F.mse_loss(p, t, reduction=reduction), prediction, target)
    with fp.track():
        tracked = F.mse_loss(prediction, target, reduction=reduction)
    assert torch.equal(tracked, untracked)
    assert bounds.shape == tuple(untracked.shape)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sign_is_exact_where_decided(dtype: torch.dtype) -> None:
    """sign is non-decreasing: its ends are the signs of the ends, exact where an interval
    keeps to one side of zero, [-1, 1] where it straddles zero."""
    x = torch.tensor([-2.0, 3.0, 0.5]).to(dtype)
    with fp.track():
        t = x * 1.1  # intervals around t, away from zero
        z = t - t  # computed as 0; its interval straddles zero (t - t over a box)
        signs, zero_signs = torch.sign(t), torch.sign(z)
    decided, undecided = fp.bounds_of(signs), fp.bounds_of(zero_signs)
    assert (decided.lo == [-1.0, 1.0, 1.0]).all()
    assert (decided.hi == decided.lo).all()
    assert (undecided.lo == -1.0).all()
    assert (undecided.hi == 1.0).all()
    assert undecided.contains(zero_signs).all()
