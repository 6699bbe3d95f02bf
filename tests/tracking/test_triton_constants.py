"""Python floats in a Triton kernel (a scalar argument, a literal, ``tl.full``) reach it through
the interpreter builder's ``get_fp32``/``get_fp16``, rounded onto the format of the operation
that uses them. Their exact value is the double the program wrote, as a float64 reference
computes with it: the enclosure holds both (``tracking/triton/hooks.py``, ``_constant``).
Before, the rounded constant was taken as exact, and correct kernels were judged bugs (found
by a hunt: ``x * a + b`` with a = 1.1, 191 of 1000 elements "outside")."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import mpmath
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _scale_shift(x_ptr, out_ptr, n, a, b, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * a + b, mask=mask)


@triton.jit
def _literals(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tenth = tl.full((BLOCK,), 0.1, tl.float32)
    y = tl.where(x >= 0, x, 0.01 * x) * 0.3333333333333333 + tenth.to(x.dtype)
    tl.store(out_ptr + offsets, y, mask=mask)


def _input(dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(300, generator=torch.Generator().manual_seed(1)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])  # (bfloat16: docs/triton.md)
def test_a_scalar_argument_is_the_double_it_was_given(dtype: torch.dtype) -> None:
    x = _input(dtype)
    out = torch.empty_like(x)
    with fp.track(strict=True):
        _scale_shift[(2,)](x, out, 300, 1.1, 0.3, BLOCK=256)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    for i in range(300):  # the exact x * 1.1 + 0.3, with the doubles 1.1 and 0.3
        exact = mpmath.mpf(float(x[i])) * mpmath.mpf(1.1) + mpmath.mpf(0.3)
        assert mpmath.mpf(bounds.lo[i]) <= exact <= mpmath.mpf(bounds.hi[i]), i
    reference = x.double() * 1.1 + 0.3
    assert fp.classify(out, reference).kind == "roundoff"
    with fp.track(strict=True):  # a planted bug: the shift off by 1%
        _scale_shift[(2,)](x, out, 300, 1.1, 0.303, BLOCK=256)
    assert fp.classify(out, reference).kind == "bug"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_literals_and_full_constants_are_the_doubles_written(dtype: torch.dtype) -> None:
    x = _input(dtype)
    out = torch.empty_like(x)
    with fp.track(strict=True):
        _literals[(2,)](x, out, 300, BLOCK=256)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    wide = x.double()
    reference = torch.where(wide >= 0, wide, 0.01 * wide) * (1 / 3) + 0.1
    assert fp.classify(out, reference).kind == "roundoff"
    planted = torch.where(wide >= 0, wide, 0.02 * wide) * (1 / 3) + 0.1
    assert fp.classify(out, planted).kind == "bug"


def test_an_exact_constant_stays_a_point() -> None:
    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty_like(x)
    with fp.track(strict=True):
        _scale_shift[(1,)](x, out, 8, 0.5, 2.0, BLOCK=8)
    assert fp.bounds_of(out) is None or bool((fp.bounds_of(out).radius == 0).all())
