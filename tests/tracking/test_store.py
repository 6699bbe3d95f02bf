"""The side store drops the records of freed storages promptly (their buffers are then reused
instead of paging in fresh memory), and never the records of live ones; results laid out as a
permutation of their storage (a transposed tensor's) are recorded element for element; a NaN end
is recorded as the whole line."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.tracking.core.store import _PURGE_BYTES, STORE

torch = pytest.importorskip("torch")


def test_records_of_freed_storages_are_swept_after_enough_bytes_are_written() -> None:
    with fp.track():
        kept = torch.rand(64) / 3
        dead = torch.rand(1 << 16, dtype=torch.float64) / 3
        record = STORE.record_of(dead)
        assert record is not None
        del dead
        gc.collect()
        # far fewer writes than the count-based sweep needs, but more bytes than the byte one
        for _ in range(4):
            torch.rand(_PURGE_BYTES // 16 + 1024, dtype=torch.float64) / 3
    assert all(other is not record for other in STORE._records.values())
    assert fp.bounds_of(kept) is not None  # a live record stays


def test_a_sweep_drops_every_freed_storage_and_nothing_else() -> None:
    with fp.track():
        kept = torch.rand(8) / 3
        # five storages alive at once (one freed at once may be reused at the same address by
        # the next, whose record then replaces its record: a sweep would find fewer)
        dead = [torch.rand(32) / 3 for _ in range(5)]
        assert len({t.untyped_storage().data_ptr() for t in dead}) == 5
    STORE.sweep()  # whatever earlier tests left
    del dead
    gc.collect()
    assert STORE.sweep() >= 5
    assert all(not ref.expired() for ref in STORE._refs.values())
    assert fp.bounds_of(kept) is not None
    assert STORE.sweep() == 0


def test_results_laid_out_as_a_permutation_of_their_storage() -> None:
    """An element-wise result of a transposed view is a permuted, dense tensor: its record is
    written in storage order, reads back element for element, and follows later partial
    in-place writes."""
    x = torch.randn(6, 4)
    with fp.track():
        tracked = x * 1.5 + 0.25  # bounds of its own
        permuted = tracked.t() * 3.0  # strides (1, 4): a permutation of its storage
        assert not permuted.is_contiguous()
        reference = tracked.t().contiguous() * 3.0
        bounds, expected = fp.bounds_of(permuted), fp.bounds_of(reference)
        assert (bounds.lo == expected.lo).all()
        assert (bounds.hi == expected.hi).all()
        assert bounds.contains(permuted).all()
        permuted[1:3] += 1.0  # a partial in-place update of the permuted storage
        bounds = fp.bounds_of(permuted)
        assert bounds.contains(permuted).all()
        assert (bounds.lo[0] == expected.lo[0]).all()
        assert (bounds.lo[1:3] > expected.lo[1:3]).all()


def test_a_summary_the_caller_made_is_the_records_only_where_it_holds_that_interval() -> None:
    """``summarised`` (a posteriori tracking's join summarises in its pass) describes the
    interval written: it is the record's summary when the record holds that interval alone,
    and is recomputed when the write fills part of a record that holds other elements."""
    from pytest_fpcheck.interval.bounds import Provenance
    from pytest_fpcheck.interval.core import Interval

    whole = torch.zeros(4, dtype=torch.float64)
    record = STORE.write(
        whole,
        Interval(np.full(4, -1.0), np.full(4, 1.0)),
        provenance=Provenance(),
        mode="a_posteriori",
        summarised=(1.0, False),
    )
    assert (record.max_radius, record.unbounded) == (1.0, False)
    # a point written into half of it: the other half keeps its radius of 1
    part = whole[:2]
    record = STORE.write(
        part,
        Interval.point(np.zeros(2)),
        provenance=Provenance(),
        mode="a_posteriori",
        summarised=(0.0, False),
    )
    assert (record.max_radius, record.unbounded) == (1.0, False)
    STORE.forget(whole)


@pytest.mark.parametrize(
    "select",
    [
        lambda x, t, y: torch.where(y > 2.5, t, x),
        lambda x, t, y: torch.cat([x, t]),
        lambda x, t, y: torch.stack([x, t]),
        lambda x, t, y: torch.maximum(x, t),
        lambda x, t, y: t.clone().index_put_((torch.tensor([0]),), x[:1]),
        lambda x, t, y: t.clone().fill_(float("nan")),
    ],
    ids=["where", "cat", "stack", "maximum", "index_put_", "fill_"],
)
def test_an_exact_nan_beside_tracked_values_is_the_whole_line(select) -> None:
    """An exact NaN selected, concatenated or stored beside tracked values: its element's
    enclosure is the whole line ("may be NaN"), not [NaN, NaN], which holds nothing (the
    program's own NaN lay outside its bounds; found by a review), and later operations keep
    it so."""
    x, y = torch.tensor([float("nan"), 1.0]), torch.tensor([2.0, 3.0])
    with fp.track(strict=True):
        t = y * 1.1
        out = select(x, t, y)
        doubled = out * 2
    for value in (out, doubled):
        bounds = fp.bounds_of(value)
        assert bounds is not None
        nan = torch.isnan(value).numpy()
        assert nan.any()
        assert np.isneginf(bounds.lo[nan]).all()
        assert np.isposinf(bounds.hi[nan]).all()
        assert bounds.contains(value).all()
        assert not np.isnan(bounds.lo).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_summary_a_kernel_took_is_the_records_own(dtype: torch.dtype) -> None:
    """Sums, products and matrix products hand the record the summary their kernels took
    while writing the ends (``Interval.summary``): each equals the summary of the record's
    ends read afresh, for intervals, points, an infinite operand (the whole line somewhere)
    and a broadcast operand; and the site's widening is that radius."""
    from pytest_fpcheck.interval.kernels import summary

    torch.manual_seed(3)
    x = torch.randn(64, 32, dtype=dtype)
    w = torch.randn(32, 16, dtype=dtype)
    with fp.track():
        a = x * 1.1
        b = a + x
        c = a * a
        d = b - torch.randn(32, dtype=dtype)
        e = a @ w
        f = torch.addmm(torch.randn(16, dtype=dtype), a, w)
        infinite = a * torch.tensor(float("inf"), dtype=dtype)
        g = infinite - infinite  # NaN: the whole line
        h = (a @ w) * 0.5
    for t in (a, b, c, d, e, f, g, h):
        record = STORE.record_of(t)
        assert record is not None
        assert (record.max_radius, record.unbounded) == summary(record.lo, record.hi)
    assert STORE.record_of(g).unbounded
