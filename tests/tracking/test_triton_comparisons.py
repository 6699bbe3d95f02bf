"""A floating comparison in a Triton kernel that rounding may flip (found by a hunt):

* as a number (``(x > 0).to(tl.float32)``, a ReLU's backward mask, a count) it is 0 or 1 on
  an undecided lane: the enclosure is [0, 1] there. Before, it was the interpreter's outcome,
  a point that excluded the exact result;
* as an integer (``.to(tl.int32)``, its sum, an index) it depends on rounding (tainted): it may
  not become an address or a float again. Before, the undecided lanes were dropped by the cast
  and the reduction, and the integer became an address;
* combined with a mask by ``&`` or ``|`` it is a boolean, not floating bits (the interpreter
  types a comparison's handle with its operand's floating type). Before, ``(x > 0) & m`` was
  refused as "a bit operation on floating values"."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from fractions import Fraction

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _indicator(a_ptr, b_ptr, c_ptr, y_ptr, count_ptr, n, COUNT: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    c = tl.load(c_ptr + offsets, mask=mask, other=0.0)
    positive = a * b - c > 0
    tl.store(y_ptr + offsets, positive.to(tl.float32), mask=mask)
    if COUNT:
        tl.store(count_ptr, tl.sum(positive.to(tl.int32), axis=0).to(tl.float32))


@triton.jit
def _lookup(a_ptr, b_ptr, c_ptr, table_ptr, y_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offsets)
    b = tl.load(b_ptr + offsets)
    c = tl.load(c_ptr + offsets)
    index = (a * b - c > 0).to(tl.int32)
    tl.store(y_ptr + offsets, tl.load(table_ptr + index))


@triton.jit
def _masked_relu(x_ptr, y_ptr, n, FORM: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0) * 1.5
    keep = (x > 0) & mask if FORM == 0 else (x > 0) | (x < -2.0)
    tl.store(y_ptr + offsets, tl.where(keep, x, 0.0), mask=mask)


def _operands() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Lane 0: exactly a b - c = 2**-24 > 0, but float32 rounds a b to c (a tie to even), so
    the run computes 0 and the comparison is False; lane 1 is decided (0.5 > 0)."""
    a = torch.tensor([1 + 2**-12, 1.0])
    return a, a.clone(), torch.tensor([1 + 2**-11, 0.5])


def test_an_undecided_comparison_as_a_number_is_zero_or_one() -> None:
    a, b, c = _operands()
    y, count = torch.empty(2), torch.empty(1)
    with fp.track(strict=True):
        _indicator[(1,)](a, b, c, y, count, 2, COUNT=False, BLOCK=2)
    assert y.tolist() == [0.0, 1.0]  # the run's outcome; exactly, lane 0 is 1
    exact = [
        Fraction(float(a[i])) * Fraction(float(b[i])) - Fraction(float(c[i])) for i in range(2)
    ]
    assert exact[0] > 0
    bounds = fp.bounds_of(y)
    assert bounds.lo.tolist() == [0.0, 1.0]
    assert bounds.hi.tolist() == [1.0, 1.0]


def test_an_integer_made_from_it_may_not_become_a_float_or_an_address() -> None:
    a, b, c = _operands()
    y, count = torch.empty(2), torch.empty(1)
    with pytest.raises(fp.UnsupportedOperation, match="depends on rounding"), fp.track(strict=True):
        _indicator[(1,)](a, b, c, y, count, 2, COUNT=True, BLOCK=2)
    with fp.track() as tracker:  # without strict: a gap, the count unbounded
        _indicator[(1,)](a, b, c, y, count, 2, COUNT=True, BLOCK=2)
    assert tracker.gaps
    assert fp.bounds_of(count).radius.tolist() == [float("inf")]
    table, z = torch.tensor([10.0, 20.0]), torch.empty(2)
    with pytest.raises(fp.UnsupportedOperation), fp.track(strict=True):
        _lookup[(1,)](a, b, c, table, z, BLOCK=2)


@pytest.mark.parametrize("form", [0, 1])
def test_a_comparison_combined_with_a_mask_is_a_boolean(form: int) -> None:
    x = torch.tensor([-1.0, 2.0, -3.0, 0.5])
    y = torch.empty_like(x)
    with fp.track(strict=True):
        _masked_relu[(1,)](x, y, 4, FORM=form, BLOCK=4)
    bounds = fp.bounds_of(y)
    assert bounds.contains(y).all()
    expected = [0.0, 3.0, 0.0, 0.75] if form == 0 else [0.0, 3.0, -4.5, 0.75]
    assert y.tolist() == expected


@triton.jit
def _nan_to_zero(x_ptr, y_ptr, n, EQUAL: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=1.0) * 3.0 + 1.0
    y = tl.where(x == x, x, 0.0) if EQUAL else tl.where(x != x, 0.0, x)
    tl.store(y_ptr + offsets, y, mask=mask)


@pytest.mark.parametrize("equal", [False, True])
def test_the_nan_test_of_a_value_with_itself_is_decided(equal: bool) -> None:
    """``x != x`` compares one value with itself, not two independent ones in one interval:
    decided (False) for finite x whatever the rounding. Before, the lanes were undecided, the
    enclosure the hull of 0 and x, and the verdict "inconclusive" (found by a hunt). A NaN
    still passes: the whole line stays undecided."""
    x = torch.randn(100, generator=torch.Generator().manual_seed(0)) * 10
    y = torch.empty_like(x)
    with fp.track(strict=True):
        _nan_to_zero[(1,)](x, y, 100, EQUAL=equal, BLOCK=128)
    verdict = fp.classify(y, x.double() * 3 + 1)
    assert verdict.kind == "roundoff"
    assert verdict.resolution < 1e-6
    assert fp.classify(y, x.double() * 3 - 1).kind == "bug"
    x[7] = float("nan")
    with fp.track(strict=True):
        _nan_to_zero[(1,)](x, y, 100, EQUAL=equal, BLOCK=128)
    assert y[7] == 0
    bounds = fp.bounds_of(y)
    assert bounds.lo[7] <= 0 <= bounds.hi[7]
