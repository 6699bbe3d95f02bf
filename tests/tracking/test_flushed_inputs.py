"""Products whose CPU kernel flushes subnormal inputs to zero (DAZ: oneDNN's bfloat16 kernels on
a CPU with AVX-512 bfloat16 instructions). The enclosure must hold the value such a kernel
computes as well as the exact one. A kernel that flushes is emulated on any CPU by registering
it as ATen's CPU kernel for the test (the flushed exact product, rounded once); the real
kernels are checked too, whichever way this CPU computes them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
F = torch.nn.functional

from .cpu_kernels import replaced_cpu_kernels  # noqa: E402

SUBNORMAL = {torch.bfloat16: 1e-39, torch.float16: 3e-6}
LARGE = {torch.bfloat16: 1e30, torch.float16: 1e3}


def _flushed(t: torch.Tensor) -> np.ndarray:
    values = t.detach().double().numpy()
    return np.where(np.abs(values) < torch.finfo(t.dtype).tiny, 0.0, values)


def _flushing_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``mm`` and ``bmm`` of a kernel that flushes subnormal inputs to zero."""
    return torch.from_numpy(np.matmul(_flushed(a), _flushed(b))).to(a.dtype)


def _flushing_addmm(
    c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    product = beta * _flushed(c) + alpha * (_flushed(a) @ _flushed(b))
    return torch.from_numpy(product).to(a.dtype)


def _flushing_addmm_(
    c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    return c.copy_(_flushing_addmm(c, a, b, beta=beta, alpha=alpha))


@pytest.fixture
def flushing_kernels() -> Iterator[None]:
    """ATen's CPU ``mm``, ``bmm``, ``addmm`` and ``addmm_`` replaced by kernels that flush
    subnormal inputs to zero, for the test."""
    with replaced_cpu_kernels(
        mm=_flushing_matmul, bmm=_flushing_matmul, addmm=_flushing_addmm, addmm_=_flushing_addmm_
    ):
        yield


def _operands(dtype: torch.dtype, *shape: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A whose first half of rows is subnormal (the rest moderate), B large: the outputs of
    those rows are all a flushing kernel loses."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(*shape, generator=generator, dtype=torch.float64)
    rows = torch.arange(shape[-2]).reshape(-1, 1) < shape[-2] // 2
    a = torch.where(rows, a.sign() * SUBNORMAL[dtype] * (1 + a.abs()) / 2, a * 1e-3)
    b = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=generator, dtype=torch.float64)
    return a.to(dtype), (b * LARGE[dtype]).to(dtype)


def _exact(op: Callable[..., torch.Tensor], *args: torch.Tensor) -> torch.Tensor:
    return op(*(a.double() for a in args))


#: (operation, whether its usual enclosure must miss what a flushing kernel computes): a
#: product scaled by alpha encloses its operands with float32's smallest normal as their least
#: magnitude, wide enough here for what flushing loses
FLUSHING_CASES = {
    "mm": (torch.mm, True),
    "bmm": (torch.bmm, True),
    "addmm": (lambda a, b: torch.addmm(a[:1, :8], a, b), True),  # a subnormal addend row
    "addmm-scaled": (lambda a, b: torch.addmm(a[:1, :8], a, b, beta=0.5, alpha=2.0), False),
    # in place: the subnormal addend is overwritten by the result, so the scan for subnormal
    # operands must read its values from before the operation
    "addmm_": (lambda a, b: a[:, :8].clone().addmm_(a, b), True),
    # ... and where only the addend is subnormal, the scan must find it there (float16; a
    # bfloat16 subnormal lies within the product's underflow allowance, which covers it)
    "addmm_-addend": (lambda a, b: a[:, :8].clone().addmm_(a[:, 8:] * 0, b[8:] * 0), False),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", sorted(FLUSHING_CASES))
def test_a_kernel_that_flushes_subnormal_inputs_is_enclosed(
    case: str, dtype: torch.dtype, flushing_kernels: None
) -> None:
    op, must_widen = FLUSHING_CASES[case]
    shape = (2, 8, 16) if case == "bmm" else (8, 16)
    a, b = _operands(dtype, *shape)
    with fp.track(strict=True):
        out = op(a, b)
    bounds = fp.bounds_of(out)
    # the kernel flushed: its value differs from the exact one by more than a rounding
    exact = _exact(op, a, b)
    assert not torch.allclose(out.double(), exact, rtol=2 * torch.finfo(dtype).eps, atol=0)
    assert bounds.contains(out).all()
    assert bounds.contains(exact).all()
    widened = any("flushed subnormal inputs" in note for note in bounds.notes)
    assert widened or not must_widen


def test_without_subnormal_inputs_nothing_is_widened(flushing_kernels: None) -> None:
    """What the widening could have hidden: with no subnormal operand, the enclosure is the
    usual one, and a result off by a relative 1e-2 (a bug) lies outside it."""
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(8, 16, generator=generator).to(torch.bfloat16)
    b = torch.randn(16, 8, generator=generator).to(torch.bfloat16)
    with fp.track(strict=True):
        out = a @ b
    bounds = fp.bounds_of(out)
    assert not any("flushed" in note for note in bounds.notes)
    assert not bounds.contains(out.double() * 1.01).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_this_cpus_kernels_with_subnormal_inputs_are_enclosed(dtype: torch.dtype) -> None:
    """The real kernels (on an AVX-512 bfloat16 CPU the 64-wide ones flush), products and
    convolutions with a bias: the computed and the exact values lie in the enclosures."""
    a, b = _operands(dtype, 64, 64)
    bias = torch.full((64,), SUBNORMAL[dtype], dtype=dtype)
    x = a.reshape(1, 16, 16, 16)
    w = (
        (b[:, : 16 * 9] if b.shape[1] >= 144 else b)
        .reshape(-1)[: 16 * 16 * 9]
        .reshape(16, 16, 3, 3)
    )
    cases: list[tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]] = [
        (torch.mm, (a, b)),
        (torch.bmm, (a[None], b[None])),
        (F.linear, (a, b.T.contiguous(), bias)),
        (lambda x, w, c: F.conv2d(x, w, c, padding=1), (x, w, bias[:16])),
        (lambda x, w: F.conv_transpose2d(x, w), (x, w)),
    ]
    for op, args in cases:
        with fp.track(strict=True):
            out = op(*args)
        bounds = fp.bounds_of(out)
        assert bounds.contains(out).all()
        assert bounds.contains(_exact(op, *args)).all()
    # a mixture of experts' grouped product: both groups of rows times the same weights
    offsets = torch.tensor([32, 64], dtype=torch.int32)
    with fp.track(strict=True):
        out = torch._grouped_mm(a, torch.stack([b, b]), offs=offsets)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    assert bounds.contains(a.double() @ b.double()).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_the_scan_on_bits_finds_a_subnormal_exactly_where_the_values_hold_one(
    dtype: torch.dtype, layout: str
) -> None:
    """The one-pass scan on the bits (what the product rules ask of every 16-bit CPU operand)
    agrees with the test on the values for every bit pattern of the format, alone among
    normal numbers and zeros, in any layout; and its NumPy twin agrees with it."""
    from pytest_fpcheck.adapters.torch import dtype_format
    from pytest_fpcheck.interval.kernels import any_subnormal
    from pytest_fpcheck.interval.kernels.linalg import _any_subnormal
    from pytest_fpcheck.tracking.torch.rules.linalg import _has_subnormal

    fmt = dtype_format(dtype)
    patterns = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    tiny = torch.finfo(dtype).tiny
    background = torch.tensor([0.0, -0.0, 1.0, -2.5, tiny], dtype=dtype).repeat(40)[:192]
    for start in range(0, patterns.numel(), 7):  # one pattern at a time, in company
        pattern = patterns[start : start + 1]
        expected = bool(((pattern.abs() < tiny) & (pattern != 0)).any())
        x = background.clone()
        x[97] = pattern[0]
        x = x.reshape(12, 16)
        if layout == "transposed":
            x = x.t()
        if layout == "sliced":
            x = torch.cat([x, torch.full((12, 4), tiny / 4, dtype=dtype)], 1)[:, :16]
        assert _has_subnormal(x, fmt) is expected, (layout, float(pattern[0]))
    bits = patterns.view(torch.int16).numpy().view(np.uint16)
    exponent = 0x7F80 if dtype == torch.bfloat16 else 0x7C00
    normal = bits[~((patterns.abs() < tiny) & (patterns != 0)).numpy()]
    assert any_subnormal(bits, fmt)
    assert not any_subnormal(normal, fmt)
    for scan in (_any_subnormal.dispatcher, _any_subnormal.fallback):  # compiled, and the twin
        assert scan(bits, exponent, 0x7FFF)
        assert not scan(normal, exponent, 0x7FFF)
