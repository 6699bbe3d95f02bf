"""What a hunt through realistic training code found (each test fails on the code before its
fix): clamp limits the format does not hold (``clip_grad_value_`` in bfloat16), ``out=``
overloads of selections (Adam with amsgrad), and operations with both a kernel and a composite
registration (``silu_backward``), which tracking computed through the composite, and
evaluation under ``torch.inference_mode()``, ``clip_grad_norm_``'s foreach norm, and ``pow`` by a
number the format does not hold."""

from __future__ import annotations

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
F = torch.nn.functional

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "clamp",
    [
        lambda x: x.clamp(-0.01, 0.01),
        lambda x: x.clamp_min(0.01),
        lambda x: x.clamp_max(-0.01),
        lambda x: F.hardtanh(x, -0.01, 0.01),
        lambda x: x.clone().clamp_(-0.01, 0.01),
    ],
    ids=["clamp", "clamp_min", "clamp_max", "hardtanh", "clamp_"],
)
def test_clamp_limits_the_format_does_not_hold(dtype: torch.dtype, clamp) -> None:
    """The kernel rounds 0.01 to the tensor's format (or computes in float32 and rounds the
    result): the enclosure, computed with 0.01 itself, is rounded outward onto the format."""
    x = torch.tensor([-1.0, 1.0, 0.003, 0.0099, -0.0099], dtype=dtype)
    with fp.track(strict=True):
        y = clamp(x * 1)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains(y).all(), (y, bounds.lo, bounds.hi)


def test_a_clamp_limit_of_an_integer_float32_does_not_hold() -> None:
    """2**24 + 1 is an integer float32 rounds (to 2**24): the kernel clamps 2**25 to 2**24."""
    x = torch.tensor([2.0**25, 1.0])
    with fp.track(strict=True):
        y = (x * 1).clamp_max(2**24 + 1)
    assert y[0].item() == 2.0**24
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains(y).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_clip_grad_value_in_a_narrow_format(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 8).to(dtype)
    x = torch.randn(4, 8, dtype=dtype)
    with fp.track(strict=True):
        layer(x).square().sum().backward()
        torch.nn.utils.clip_grad_value_(layer.parameters(), 0.01)
    for p in layer.parameters():
        bounds = fp.bounds_of(p.grad)
        assert bounds is not None
        assert bounds.contains(p.grad).all()


def test_selections_with_out_arguments() -> None:
    """``torch.maximum(a, b, out=c)`` and ``torch.cat(..., out=)`` (Adam's amsgrad keeps its
    maximum so): the ends are computed by the functional overload."""
    a, b = torch.randn(5), torch.randn(5)
    out, joined = torch.empty(5), torch.empty(10)
    with fp.track(strict=True):
        torch.maximum(a * 1.1, b * 1.3, out=out)
        torch.cat([a * 1.1, b], out=joined)
    for value in (out, joined):
        bounds = fp.bounds_of(value)
        assert bounds is not None
        assert bounds.contains(value).all()


def test_adam_with_amsgrad_under_strict_tracking() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.01, amsgrad=True, foreach=False)
    with fp.track(strict=True):
        layer(torch.randn(2, 4)).sum().backward()
        optimizer.step()
    bounds = fp.bounds_of(layer.weight)
    assert bounds is not None
    assert bounds.contains(layer.weight).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", [F.silu, F.mish])
def test_tracking_computes_what_the_plain_run_computes(dtype: torch.dtype, activation) -> None:
    """``silu_backward`` and ``mish_backward`` have a CPU kernel and a composite registration:
    the tracked run runs the kernel, as the plain run does, bit for bit (it ran the composite,
    whose gradients differ in the last bit: Llama's training step changed under tracking)."""
    grads = []
    for tracked in (False, True):
        torch.manual_seed(0)
        x = torch.randn(256, dtype=dtype, requires_grad=True)
        if tracked:
            with fp.track(strict=True):
                activation(x).backward(torch.ones_like(x))
        else:
            activation(x).backward(torch.ones_like(x))
        grads.append(x.grad.clone())
    assert torch.equal(grads[0], grads[1])
    bounds = fp.bounds_of(x.grad)
    assert bounds is not None
    assert bounds.contains(x.grad).all()


@pytest.mark.parametrize("strict", [False, True])
def test_evaluation_under_inference_mode(strict: bool) -> None:
    """Inference tensors keep no version counter: reading it raised (strict), or made every
    operation a gap (not strict)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 2)
    with torch.inference_mode(), fp.track(strict=strict) as tracked:
        y = torch.relu(layer(torch.randn(3, 4))) * 1.5
    assert not tracked.gaps
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains(y).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_grad_norm_with_its_default_foreach_path(dtype: torch.dtype) -> None:
    """``clip_grad_norm_`` calls ``_foreach_norm`` (it had no rule): the tracked run clips as
    the plain one does, bit for bit, with bounds on the clipped gradients."""
    results = []
    for tracked in (False, True):
        torch.manual_seed(0)
        layer = torch.nn.Linear(8, 8).to(dtype)
        x = torch.randn(4, 8, dtype=dtype)
        if tracked:
            with fp.track(strict=True):
                layer(x).square().sum().backward()
                norm = torch.nn.utils.clip_grad_norm_(layer.parameters(), 0.5)
            bounds = fp.bounds_of(layer.weight.grad)
            assert bounds is not None
            assert bounds.contains(layer.weight.grad).all()
        else:
            layer(x).square().sum().backward()
            norm = torch.nn.utils.clip_grad_norm_(layer.parameters(), 0.5)
        results.append((norm.clone(), layer.weight.grad.clone()))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exponent", [1.01, 0.3, -1.7, 2.5])
def test_pow_by_a_number_the_format_does_not_hold(dtype: torch.dtype, exponent: float) -> None:
    """bfloat16's and float16's pow round the exponent to the tensor's format (1.01 becomes
    1.0078125 in bfloat16): the enclosure is the hull of the powers by each candidate
    exponent, which holds the kernel's values; and the exact power by the number itself."""
    x = torch.tensor([0.003, 0.5, 1.7, 30.0], dtype=dtype)
    with fp.track(strict=True):
        y = (x * 1).pow(exponent)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains(y).all(), (y, bounds.lo, bounds.hi)
    exact = x.double() ** exponent
    assert bounds.contains(exact).all()


@pytest.mark.parametrize("foreach", [False, True])
def test_adam_with_amsgrad_and_its_foreach_default(foreach: bool) -> None:
    """The foreach amsgrad keeps its maximum with ``_foreach_maximum_`` (it had no rule): the
    tracked step updates as the plain one does, bit for bit."""
    weights = []
    for tracked in (False, True):
        torch.manual_seed(0)
        layer = torch.nn.Linear(4, 3)
        optimizer = torch.optim.Adam(layer.parameters(), lr=0.01, amsgrad=True, foreach=foreach)
        x = torch.randn(2, 4)
        for _ in range(2):
            optimizer.zero_grad()
            if tracked:
                with fp.track(strict=True):
                    layer(x).sum().backward()
                    optimizer.step()
            else:
                layer(x).sum().backward()
                optimizer.step()
        weights.append(layer.weight.detach().clone())
    assert torch.equal(weights[0], weights[1])
    with fp.track(strict=True):
        out = torch._foreach_maximum([torch.randn(3) * 1.1], [torch.randn(3)])
        torch._foreach_minimum_(out, 0.25)
    bounds = fp.bounds_of(out[0])
    assert bounds is not None
    assert bounds.contains(out[0]).all()
