"""Average pooling with padding, ceil_mode and divisors, ``cdist`` for every p and its backward,
and the backward of transposed convolutions, bounded through their decompositions
(tracking/torch/decompose.py): the exact value (exact rationals for pooling, mpmath at 60 digits
for cdist, a float64 evaluation for the transposed convolution: its error is far below the
enclosures' radii) and the kernel's value lie in the enclosure, with subnormal, near-overflow
and cancelling inputs; tracking never changes the values."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
F = torch.nn.functional

mpmath.mp.dps = 60
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def hard_values(dtype: torch.dtype, *shape: int, seed: int) -> torch.Tensor:
    """Normal values with subnormal ones, values near the format's largest, and neighbours
    that cancel."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=generator, dtype=torch.float64)
    info = torch.finfo(dtype)
    flat = x.view(-1)
    flat[::7] *= info.smallest_normal / 8
    flat[3::11] = info.max / 4 * torch.sign(flat[3::11])
    flat[5::13] = -flat[4::13][: len(flat[5::13])]
    return x.to(dtype)


def exact_avg_pool(
    x: np.ndarray, k: int, s: int, p: int, ceil_mode: bool, count_include_pad: bool
) -> np.ndarray:
    """avg_pool2d in exact rationals, from PyTorch's documented geometry."""
    n, c, h, w = x.shape
    sizes = []
    for length in (h, w):
        out = (length + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= length + p:
            out -= 1
        sizes.append(out)
    result = np.empty((n, c, *sizes), dtype=object)
    for index in np.ndindex(n, c, *sizes):
        b, ch, oh, ow = index
        h0, w0 = oh * s - p, ow * s - p
        h1, w1 = min(h0 + k, h + p), min(w0 + k, w + p)
        padded = (h1 - h0) * (w1 - w0)
        h0c, w0c, h1c, w1c = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
        total = sum(
            (Fraction(float(x[b, ch, i, j])) for i in range(h0c, h1c) for j in range(w0c, w1c)),
            Fraction(0),
        )
        inside = (h1c - h0c) * (w1c - w0c)
        result[index] = total / (padded if count_include_pad else inside)
    return result


def assert_exact_inside(bounds: fp.Bounds, exact: np.ndarray) -> None:
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    for i, value in enumerate(exact.reshape(-1)):
        if np.isneginf(lo[i]) and np.isposinf(hi[i]):
            continue
        assert Fraction(lo[i]) <= value <= Fraction(hi[i]), (i, lo[i], float(value), hi[i])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("k", "s", "p", "ceil_mode", "count_include_pad"),
    [
        (3, 2, 1, False, True),
        (3, 2, 1, True, False),
        (2, 2, 1, True, True),
        (3, 1, 1, False, False),
    ],
)
def test_avg_pool_with_padding_encloses_the_exact_mean(
    dtype: torch.dtype, k: int, s: int, p: int, ceil_mode: bool, count_include_pad: bool
) -> None:
    x = hard_values(dtype, 1, 2, 7, 8, seed=k + s + p)
    plain = F.avg_pool2d(x, k, s, p, ceil_mode, count_include_pad)
    with fp.track(strict=True):
        out = F.avg_pool2d(x, k, s, p, ceil_mode, count_include_pad)
    assert torch.equal(out, plain)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    exact = exact_avg_pool(x.double().numpy(), k, s, p, ceil_mode, count_include_pad)
    assert_exact_inside(bounds, exact)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("divisor", [None, 5])
def test_avg_pool_backward_with_padding_encloses_the_exact_gradient(
    dtype: torch.dtype, divisor: int | None
) -> None:
    """Each input's gradient: the sum of grad / divisor over the windows holding it (float16
    and bfloat16 kernels round each share and each addition to their format, in the kernel's
    order, which the decomposition follows)."""
    x = hard_values(dtype, 1, 2, 7, 8, seed=3).requires_grad_()
    args = (3, 2, 1, True, False, divisor)
    grad = hard_values(dtype, *F.avg_pool2d(x, *args).shape, seed=4).clamp(-1e3, 1e3)
    (plain,) = torch.autograd.grad(F.avg_pool2d(x, *args), x, grad)
    with fp.track(strict=True):
        (tracked,) = torch.autograd.grad(F.avg_pool2d(x, *args), x, grad)
    assert torch.equal(tracked, plain)
    bounds = fp.bounds_of(tracked)
    assert bounds.contains(tracked).all()
    # the exact gradient, from the exact pooling of each unit input (linear in x)
    exact = np.full(x.shape, Fraction(0), dtype=object)
    g = grad.double().numpy()
    for index in np.ndindex(*x.shape):
        unit = np.zeros(x.shape)
        unit[index] = 1.0
        pooled = exact_avg_pool(unit, 3, 2, 1, True, False)
        if divisor is not None:  # the override replaces each window's divisor
            pooled = np.vectorize(
                lambda v: Fraction(1, divisor) if v != 0 else Fraction(0), otypes=[object]
            )(pooled)
        exact[index] = sum(
            (
                Fraction(float(gv)) * pv
                for gv, pv in zip(g.reshape(-1), pooled.reshape(-1), strict=True)
            ),
            Fraction(0),
        )
    assert_exact_inside(bounds, exact)


def exact_cdist(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[0]), dtype=object)
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            d = [
                abs(mpmath.mpf(float(x)) - mpmath.mpf(float(y)))
                for x, y in zip(a[i], b[j], strict=True)
            ]
            if p == 0:
                out[i, j] = mpmath.mpf(sum(1 for v in d if v != 0))
            elif p == math.inf:
                out[i, j] = max(d)
            else:
                out[i, j] = mpmath.fsum(v ** mpmath.mpf(p) for v in d) ** (1 / mpmath.mpf(p))
    return out


def exact_cdist_grad(a: np.ndarray, b: np.ndarray, g: np.ndarray, p: float) -> np.ndarray:
    """d/da of sum g * cdist(a, b, p) in mpmath (0 where the distance is 0)."""
    dist = exact_cdist(a, b, p)
    out = np.empty(a.shape, dtype=object)
    for i, k in np.ndindex(*a.shape):
        total = mpmath.mpf(0)
        for j in range(b.shape[0]):
            d = mpmath.mpf(float(a[i, k])) - mpmath.mpf(float(b[j, k]))
            if dist[i, j] == 0 or d == 0:
                continue
            sign = 1 if d > 0 else -1
            if p == math.inf:
                term = sign if abs(d) == dist[i, j] else 0
            else:
                term = sign * (abs(d) / dist[i, j]) ** (p - 1)
            total += mpmath.mpf(float(g[i, j])) * term
        out[i, k] = total
    return out


def assert_mp_inside(bounds: fp.Bounds, exact: np.ndarray) -> None:
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    for i, value in enumerate(exact.reshape(-1)):
        if np.isneginf(lo[i]) and np.isposinf(hi[i]):
            continue
        assert mpmath.mpf(lo[i]) <= value <= mpmath.mpf(hi[i]), (i, lo[i], value, hi[i])


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf])
def test_cdist_for_every_p_and_its_backward(p: float) -> None:
    """float32 (ATen's CPU cdist has no float16 or bfloat16 kernel)."""
    a = hard_values(torch.float32, 4, 3, seed=5)
    a[0] = a[1]  # a distance of 0
    a[2, 0] = 1e-40  # subnormal
    a = a.clamp(-1e18, 1e18).requires_grad_()  # p = 3 of 1e38 would overflow the sum
    b = hard_values(torch.float32, 5, 3, seed=6).clamp(-1e18, 1e18)
    b[0] = a[1].detach()
    grad = torch.randn(4, 5, generator=torch.Generator().manual_seed(7))
    plain = torch.cdist(a, b, p=p)
    (plain_grad,) = torch.autograd.grad(plain, a, grad)
    with fp.track(strict=True):
        out = torch.cdist(a, b, p=p)
        (tracked_grad,) = torch.autograd.grad(out, a, grad)
    assert torch.equal(out, plain)
    assert torch.equal(tracked_grad, plain_grad)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    assert_mp_inside(bounds, exact_cdist(a.detach().numpy(), b.numpy(), p))
    if p == 0:
        return  # the gradient is zero: exact
    bounds = fp.bounds_of(tracked_grad)
    assert bounds.contains(tracked_grad).all()
    assert_mp_inside(bounds, exact_cdist_grad(a.detach().numpy(), b.numpy(), grad.numpy(), p))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("cin", "cout", "k", "s", "p", "op", "groups", "d"),
    [
        (3, 4, 3, 2, 1, 1, 1, 1),
        (4, 6, 3, 1, 0, 0, 2, 1),
        (2, 2, (3, 2), (2, 1), (1, 0), (1, 0), 1, (2, 1)),
    ],
)
def test_transposed_convolution_backward(
    dtype: torch.dtype,
    cin: int,
    cout: int,
    k: object,
    s: object,
    p: object,
    op: object,
    groups: int,
    d: object,
) -> None:
    torch.manual_seed(0)
    layer = torch.nn.ConvTranspose2d(
        cin, cout, k, stride=s, padding=p, output_padding=op, groups=groups, dilation=d
    ).to(dtype)
    x = hard_values(dtype, 2, cin, 5, 6, seed=cin).clamp(-100, 100).requires_grad_()
    grad = torch.randn_like(layer(x))
    plain = torch.autograd.grad(layer(x), [x, layer.weight, layer.bias], grad)
    with fp.track(strict=True):
        tracked = torch.autograd.grad(layer(x), [x, layer.weight, layer.bias], grad)
    wide = torch.nn.ConvTranspose2d(
        cin, cout, k, stride=s, padding=p, output_padding=op, groups=groups, dilation=d
    ).double()
    wide.load_state_dict({name: v.double() for name, v in layer.state_dict().items()})
    xd = x.detach().double().requires_grad_()
    reference = torch.autograd.grad(wide(xd), [xd, wide.weight, wide.bias], grad.double())
    for value, before, exact in zip(tracked, plain, reference, strict=True):
        assert torch.equal(value, before)
        bounds = fp.bounds_of(value)
        assert bounds.contains(value).all()
        assert bounds.contains(exact).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss_backward_encloses_the_exact_gradient(dtype: torch.dtype, reduction: str) -> None:
    """2 (x - y) g / n exactly; ATen's kernel rounds 2 / n to the tensors' format first."""
    x = hard_values(dtype, 4, 7, seed=8).clamp(-1e3, 1e3).requires_grad_()
    y = hard_values(dtype, 4, 7, seed=9).clamp(-1e3, 1e3)
    y.view(-1)[:5] = x.detach().view(-1)[:5]  # exact cancellation
    plain = torch.autograd.grad(F.mse_loss(x, y, reduction=reduction), x)[0]
    with fp.track(strict=True):
        (tracked,) = torch.autograd.grad(F.mse_loss(x, y, reduction=reduction), x)
    assert torch.equal(tracked, plain)
    bounds = fp.bounds_of(tracked)
    assert bounds.contains(tracked).all()
    n = x.numel() if reduction == "mean" else 1
    exact = np.array(
        [
            Fraction(2) * (Fraction(float(a)) - Fraction(float(b))) / n
            for a, b in zip(x.detach().double().view(-1), y.double().view(-1), strict=True)
        ],
        dtype=object,
    )
    assert_exact_inside(bounds, exact)
