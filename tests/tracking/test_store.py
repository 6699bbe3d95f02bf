"""The side store drops the records of freed storages promptly (their buffers are then reused
instead of paging in fresh memory), and never the records of live ones."""

from __future__ import annotations

import gc

import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.tracking.store import _PURGE_BYTES, STORE

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
