"""Crashes found by running code nobody here wrote under tracking (issue 19), each pinned at its
root: 0-d operands of order-preserving rules, memory a Triton kernel never writes, an
out-of-bounds Triton access."""

from __future__ import annotations

import os
import re

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")


def test_stacking_zero_dimensional_results_keeps_their_shape() -> None:
    """torch.stack of 0-d tracked tensors (a per-micro-batch loss average): the rule ran stack on
    1-d copies of the 0-d enclosures (np.ascontiguousarray returns at least one dimension)."""
    a, b = torch.tensor(1.5), torch.tensor(2.25)
    with fp.track(strict=True):
        stacked = torch.stack([a / 3, b / 3])
        mean = stacked.mean()
    assert fp.bounds_of(stacked).shape == (2,)
    bounds = fp.bounds_of(mean)
    assert bounds.shape == ()
    assert bounds.contains(mean).all()
    assert bounds.contains(np.array((1.5 / 3 + 2.25 / 3) / 2)).all()
    assert 0 < float(bounds.radius) < 1e-6


triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _first_half_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 3.0, mask=mask)


def test_memory_a_kernel_never_writes_keeps_what_it_held_nan_included() -> None:
    x = torch.tensor([0.1, 0.2, 0.3, 0.4])
    out = torch.full((8,), float("nan"))
    out[6] = 5.0
    with fp.track(strict=True):
        _first_half_kernel[(1,)](x, out, 4, BLOCK=8)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    exact = (x.double() * 3).numpy()
    assert ((bounds.lo[:4] <= exact) & (exact <= bounds.hi[:4])).all()
    assert bounds.radius[:4].max() > 0
    # never written: the NaNs it held may be NaN (the whole line), 5.0 stays exactly 5.0
    assert np.isneginf(bounds.lo[[4, 5, 7]]).all()
    assert np.isposinf(bounds.hi[[4, 5, 7]]).all()
    assert bounds.lo[6] == bounds.hi[6] == 5.0


@triton.jit
def _off_by_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets <= n  # one past the end
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=offsets < n)


@triton.jit
def _store_past_end_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    value = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(out_ptr + offsets + 2, value, mask=offsets < n)


def test_an_out_of_bounds_load_names_kernel_line_argument_offset_and_extent() -> None:
    x, out = torch.ones(6), torch.zeros(6)
    with fp.track(), pytest.raises(fp.OutOfBoundsAccess) as caught:
        _off_by_one_kernel[(1,)](x, out, 6, BLOCK=8)
    error = caught.value
    assert isinstance(error, fp.FPCheckError)
    assert (error.kernel, error.argument, error.offset, error.extent) == (
        "_off_by_one_kernel",
        "x_ptr",
        6,
        6,
    )
    line = _off_by_one_kernel.fn.__code__.co_firstlineno + 4
    assert str(error) == (
        "Triton kernel '_off_by_one_kernel' made an out-of-bounds load at _off_by_one_kernel "
        f"test_real_code.py:{line}: element offset 6 of pointer argument 'x_ptr', past the end "
        "of its tensor (6 elements, valid offsets 0 to 5); the kernel's mask or index "
        "arithmetic is wrong."
    )


def test_an_out_of_bounds_access_on_views_of_a_larger_buffer_is_named() -> None:
    """A slice of a buffer, a block of a fused projection: the kernel was given the view, and
    reaching past it (inside the buffer's memory) is the same bug. Before (a hunt), only the
    storage's end was checked: the off-by-one store wrote the buffer's next element silently
    and gave it bounds."""
    buffer, out_buffer = torch.ones(18), torch.zeros(18)
    x, out = buffer[:6], out_buffer[6:12]
    with fp.track(), pytest.raises(fp.OutOfBoundsAccess) as caught:
        _off_by_one_kernel[(1,)](x, out, 6, BLOCK=8)
    error = caught.value
    assert (error.argument, error.offset, error.extent) == ("x_ptr", 6, 6)
    with (
        fp.track(),
        pytest.raises(fp.OutOfBoundsAccess, match=re.escape("out-of-bounds store")) as caught,
    ):
        _store_past_end_kernel[(1,)](buffer[6:12], out, 6, BLOCK=8)
    assert (caught.value.argument, caught.value.offset, caught.value.extent) == ("out_ptr", 6, 6)
    assert out_buffer[12:].eq(0).all()  # refused before it wrote
    # two views of one buffer are each their own argument: in range of both, nothing raises
    with fp.track():
        _off_by_one_kernel[(1,)](buffer[:7], buffer[7:14], 6, BLOCK=8)
    assert torch.equal(buffer[7:13], 2 * torch.ones(6))


def test_an_out_of_bounds_store_is_refused_before_it_writes() -> None:
    x, out = torch.ones(6), torch.zeros(6)
    with (
        fp.track(),
        pytest.raises(fp.OutOfBoundsAccess, match=re.escape("out-of-bounds store")) as caught,
    ):
        _store_past_end_kernel[(1,)](x, out, 6, BLOCK=8)
    assert (caught.value.argument, caught.value.offset, caught.value.extent) == ("out_ptr", 6, 6)
