"""The whole line at every element (``Interval.whole``): one pair of read-only ends shared by
every such enclosure of as many elements, recognised without reading them, and copied before any
partial write, so that no record ever changes another's bounds."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.interval.bounds import Provenance
from pytest_fpcheck.interval.core import Interval, is_whole_line

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.core.store import STORE  # noqa: E402
from pytest_fpcheck.tracking.torch.nan import unbounded_mask  # noqa: E402


def test_whole_line_ends_are_shared_read_only_and_recognised() -> None:
    a, b = Interval.whole((3, 4)), Interval.whole((12,))
    assert np.all(np.isneginf(a.lo))
    assert np.all(np.isposinf(a.hi))
    assert np.shares_memory(a.lo, b.lo)  # one pair per length
    assert not a.lo.flags.writeable
    assert not a.hi.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a.lo[0, 0] = 0.0
    assert is_whole_line(a.lo, a.hi)
    assert is_whole_line(a.lo[1:], a.hi[1:])
    assert not is_whole_line(a.hi, a.lo)  # ends swapped
    filled = (np.full((3, 4), -np.inf), np.full((3, 4), np.inf))
    assert not is_whole_line(*filled)  # equal values, not the shared ends: read as usual
    assert unbounded_mask(a).all()
    assert unbounded_mask(Interval(*filled)).all()
    assert not unbounded_mask(Interval(np.zeros(3), np.ones(3))).any()


def unbounded_gradient() -> tuple[torch.Tensor, torch.Tensor]:
    """A gradient whose enclosure is the whole line everywhere (a loss of 1 / (x - x)), and a
    bounded tensor of the same size."""
    x = torch.arange(12.0).reshape(3, 4).requires_grad_()
    (x * (1.0 / (x - x).sum())).sum().backward()
    assert x.grad is not None
    return x.grad, torch.arange(12.0).reshape(3, 4) * 0.5


def test_the_store_keeps_the_shared_ends_and_copies_them_before_a_partial_write() -> None:
    with fp.track():
        grad, other = unbounded_gradient()
        record = STORE.record_of(grad)
        assert record is not None
        assert is_whole_line(record.lo, record.hi)  # no arrays of its own
        assert record.unbounded
        assert record.max_radius == np.inf
        with torch.no_grad():
            grad[0] = other[0]  # a partial write: the record gets ends of its own first
        written = fp.bounds_of(grad)
        fresh = Interval.whole((3, 4))
    assert written is not None
    assert np.array_equal(written.lo[0], other[0].double().numpy())  # the written row is exact
    assert np.all(np.isneginf(written.lo[1:]))
    assert np.all(np.isposinf(written.hi[1:]))
    # the shared ends are untouched: every whole-line enclosure is still the whole line
    assert np.all(np.isneginf(fresh.lo))
    assert np.all(np.isposinf(fresh.hi))


def test_a_whole_line_of_another_shape_is_broadcast_not_kept() -> None:
    """Only ends of the tensor's own shape become the record's buffers: a broadcast whole line
    (a rule's result of shape (4,) for a (3, 4) tensor) is laid out as the tensor's storage,
    like any enclosure; a part of longer shared ends, of the tensor's shape, is the whole line
    too."""
    t = torch.zeros(3, 4)
    longer = Interval.whole((13,))
    for interval in (
        Interval.whole((4,)),
        Interval(longer.lo[1:].reshape(3, 4), longer.hi[1:].reshape(3, 4)),
    ):
        record = STORE.write(t, interval, provenance=Provenance(), mode="rigorous")
        assert record.lo.size == t.numel()
        assert record.hi.size == t.numel()
        bounds = fp.bounds_of(t)
        assert bounds is not None
        assert np.all(np.isneginf(bounds.lo))
        assert np.all(np.isposinf(bounds.hi))
        STORE.forget(t)
