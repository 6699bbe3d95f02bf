"""``tl.atomic_max``/``tl.atomic_min`` on floats and integer writes into floating memory (found
by a hunt). Triton implements a float atomic max as integer atomics on the value's bits
through an integer pointer: tracking refused a computed value ("a bit cast of a rounded
floating value") and did not see the integer writes, so a tensor tracked before the launch
kept its old enclosure beside its new values (bounds that excluded them inside the block, a
false StaleBoundsError after it)."""

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
def _segment_extreme(x_ptr, index_ptr, out_ptr, n, MAX: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0) * 1.1
    segment = tl.load(index_ptr + offsets, mask=mask, other=0)
    if MAX:
        tl.atomic_max(out_ptr + segment, x, mask=mask)
    else:
        tl.atomic_min(out_ptr + segment, x, mask=mask)


@triton.jit
def _store_bits(bits_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    target = out_ptr.to(tl.pointer_type(tl.int32))
    tl.store(target + offsets, tl.load(bits_ptr + offsets))


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, generator=generator)
    return x, torch.randint(0, 4, (40,), generator=generator, dtype=torch.int32)


@pytest.mark.parametrize("is_max", [True, False])
def test_a_segment_extreme_of_computed_values_encloses_the_exact_one(is_max: bool) -> None:
    x, segment = _inputs()
    start = -100.0 if is_max else 100.0
    with fp.track(strict=True):
        out = torch.full((4,), start / 2) * 2.0  # tracked before the launch
        _segment_extreme[(1,)](x, segment, out, 40, MAX=is_max, BLOCK=64)
        after = out + 1.0  # read inside the block
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    assert fp.bounds_of(after).contains(after).all()
    pick = max if is_max else min
    for s in range(4):
        members = [mpmath.mpf(float(x[i])) * mpmath.mpf(1.1) for i in range(40) if segment[i] == s]
        exact = pick([mpmath.mpf(start), *members])
        assert mpmath.mpf(bounds.lo[s]) <= exact <= mpmath.mpf(bounds.hi[s])
    wide = x.double() * 1.1
    reference = torch.full((4,), start, dtype=torch.float64)
    reduce = "amax" if is_max else "amin"
    reference = reference.scatter_reduce(0, segment.long(), wide, reduce)
    assert fp.classify(out, reference).kind == "roundoff"


def test_integer_bits_stored_into_floating_memory_are_its_exact_values() -> None:
    bits = torch.tensor([1.5, -2.25, 3.0, 0.125]).view(torch.int32)
    with fp.track(strict=True):
        out = torch.full((4,), 7.0) / 3.0  # an enclosure of width > 0
        _store_bits[(1,)](bits, out, BLOCK=4)
        after = out * 2.0
    assert out.tolist() == [1.5, -2.25, 3.0, 0.125]
    bounds = fp.bounds_of(out)  # not stale: the launch's writes were seen
    assert bounds.lo.tolist() == bounds.hi.tolist() == out.tolist()
    assert fp.bounds_of(after) is None or fp.bounds_of(after).contains(after).all()
