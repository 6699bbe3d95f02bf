"""The side store: float64 ``lo``/``hi`` beside each tracked tensor's *storage*.

Bounds mirror memory, not tensor objects: each storage that tracking wrote gets two flat float64
buffers of the storage's length, and any tensor over that storage (a view, a transpose, a slice)
reads and writes its bounds through its own sizes, strides and offset. View operations therefore
need no rules, and an in-place write through one view is seen by every other.

Staleness: the record keeps the storage's version counter (``tensor._version``, shared by the
views of a storage) as of tracking's last write. A tensor whose version differs and whose values
left the enclosure was modified by something tracking did not see, and reading its bounds raises
:class:`StaleBoundsError` (a differing version alone is no proof: :func:`_holds`). An
in-place operation's own increment happens after the dispatch mode returns (autograd's
ADInplaceOrView layer applies it), so a record written by one expects exactly one increment.

Records are keyed by the storage's address (its ``StorageImpl``), and the store holds a weak
reference to each storage it keeps a record for, so the record is dropped once the storage is
freed; while that reference lives, the address cannot be reused by another storage (PyTorch keeps
a weakly referenced ``StorageImpl``'s memory until the last weak reference goes), so the address
names one storage. A lookup therefore needs no weak reference of its own, only the address. Reads
and writes are serialised by a lock; tracking itself is per thread (dispatch modes are
thread-local).
"""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from ...adapters.torch import dtype_format, float64_values, internal
from ...errors import StaleBoundsError
from ...formats import Format
from ...interval.bounds import Provenance, contains
from ...interval.core import Interval, is_whole_line
from ...interval.kernels import summary

__all__ = ["STORE", "BoundsStore", "Record", "float64_values", "version_of"]

#: records of freed storages are dropped every this many writes, or sooner, once the buffers
#: written since the last sweep reach _PURGE_BYTES (plus a kibibyte per record, so that a sweep
#: costs little beside the writes it follows): a dead record's buffers are released promptly,
#: and the next rule's fresh arrays reuse their memory instead of faulting in new pages
_PURGE_EVERY = 256
_PURGE_BYTES = 8 << 20


@dataclass
class Record:
    """Bounds of one storage: flat buffers (one shared buffer while everything is exact; the
    read-only ends of :meth:`~pytest_fpcheck.interval.core.Interval.whole`, shared by every
    record of as many elements, while everything is the whole line: copied before a partial
    write)."""

    lo: np.ndarray
    hi: np.ndarray
    version: int
    format: Format | None
    provenance: Provenance = field(default_factory=Provenance)
    mode: str = "rigorous"
    notes: tuple[str, ...] = ()
    #: some element's enclosure is the whole line (its value may be NaN)
    unbounded: bool = False
    #: the largest radius (hi - lo) / 2 over the storage (+inf where unbounded)
    max_radius: float = 0.0
    #: written by an in-place operation, whose version bump PyTorch applies after the Python
    #: dispatch layer returns: the next read accepts exactly one increment
    pending: bool = False
    #: the store's epoch in which every element was last written or checked against the
    #: tensor's values (:meth:`BoundsStore.record_of`)
    epoch: int = -1


def version_of(t: torch.Tensor) -> int:
    """The tensor's version counter; 0 for an inference tensor (made under
    ``torch.inference_mode()``), which keeps none: its record cannot see a change made outside
    tracking (in-place operations on it under tracking rewrite the record as usual)."""
    return 0 if t.is_inference() else t._version


def _nan_ends_to_whole_line(record: Record) -> None:
    """A NaN end is no enclosure: where a rule put one (an exact NaN selected, concatenated or
    stored beside tracked values: ``where``, ``cat``, ``index_put_``), the element's enclosure
    becomes the whole line, which says "may be NaN". Checked only in records whose summary
    found an unbounded width (a NaN width is one) and in points (``fill_(nan)`` on a tracked
    tensor), whose summary reads no width."""
    undefined = np.isnan(record.lo) | np.isnan(record.hi)
    if undefined.any():
        record.lo = np.where(undefined, -math.inf, record.lo)
        record.hi = np.where(undefined, math.inf, record.hi)
        record.unbounded = True


def _storage_length(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes() // t.element_size()


def _view(buffer: np.ndarray, t: torch.Tensor) -> np.ndarray:
    """``buffer`` (flat and contiguous) seen through ``t``'s sizes, strides (in elements) and
    storage offset: a writeable view, checked to lie inside the buffer."""
    itemsize = buffer.itemsize
    return np.ndarray(
        tuple(t.shape),
        buffer.dtype,
        buffer,
        t.storage_offset() * itemsize,
        tuple(s * itemsize for s in t.stride()),
    )


def _covers_storage(t: torch.Tensor, length: int) -> bool:
    """Whether ``t`` holds each element of its storage exactly once (a contiguous tensor, or
    a permutation of one: a transposed result, say)."""
    if t.storage_offset() != 0 or t.numel() != length:
        return False
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride(), strict=True), key=lambda p: p[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _references_to_owner(array: np.ndarray) -> int:
    """How many references the array whose memory ``array`` views has (CPython's count,
    including this function's own)."""
    owner = array.base
    return sys.getrefcount(owner)


#: what :func:`_references_to_owner` says of a view that alone refers to its owner (measured,
#: so that it holds whatever the interpreter counts for the function's own references)
_SOLE_VIEW = _references_to_owner(np.empty(1)[:])


def _buffer(array: np.ndarray, shape: tuple[int, ...], owned: bool) -> np.ndarray:
    """A flat float64 buffer holding ``array`` broadcast to ``shape``: ``array``'s memory itself
    when the caller handed it over and it is contiguous memory of that shape that nothing else
    can reach (an array that owns it, or the one view of an array nothing else refers to, as a
    kernel's reshaped output is), else a copy (a rule's arrays may be views of another record's
    buffers, whose owner those buffers also refer to)."""
    if (
        owned
        and type(array) is np.ndarray
        and array.flags.c_contiguous
        and array.flags.writeable
        and array.dtype == np.float64
        and array.shape == shape
    ):
        if array.flags.owndata:
            return array.reshape(-1)
        owner = array.base
        if (
            type(owner) is np.ndarray
            and owner.flags.owndata
            and owner.nbytes == array.nbytes  # contiguous and as large: all of the owner
            and _references_to_owner(array) == _SOLE_VIEW + 1  # + 1: ``owner`` here
        ):
            return array.reshape(-1)
    return np.array(np.broadcast_to(array, shape), dtype=np.float64, order="C").reshape(-1)


def _storage_values(t: torch.Tensor) -> np.ndarray:
    """The whole storage under ``t`` as float64 (its current, exact values)."""
    with internal(), torch.no_grad():
        flat = torch.empty(0, dtype=t.dtype, device=t.device)
        flat.set_(t.untyped_storage(), 0, (_storage_length(t),), (1,))
    return float64_values(flat, copy=True)


def _holds(record: Record, t: torch.Tensor) -> bool:
    """Whether every current value of ``t`` lies in ``record``'s enclosure.

    The rule for a version that differs from the record's: a version counter is the tensor's,
    not always the storage's. A view that ``unsafe_split``/``unsafe_chunk`` made (ATen's LSTM
    and GRU cells make them) has a counter of its own, which does not move when tracking writes
    the storage through its base, and some kernels bump an output's counter after returning it,
    so a differing version is no proof of a write tracking did not see. The enclosure is kept
    exactly when it still holds ``t``'s values: that is sound whoever wrote them (a change
    outside tracking that kept every value inside leaves an enclosure of what the program now
    holds); a value outside it is a write tracking did not see, and the bounds are stale."""
    values = float64_values(t)
    return bool(contains(_view(record.lo, t), _view(record.hi, t), values).all())


class BoundsStore:
    """Map from storages (by address, module docstring) to their :class:`Record`."""

    def __init__(self) -> None:
        self._records: dict[int, Record] = {}
        #: a weak reference to each storage that has a record: it keeps the address unique and
        #: tells when the storage is freed
        self._refs: dict[int, StorageWeakRef] = {}
        self._lock = threading.Lock()
        self._writes = 0
        self._fresh_bytes = 0
        #: advanced as a tracked block opens and closes (:meth:`new_epoch`)
        self.epoch = 0

    def new_epoch(self) -> None:
        """Begin an epoch (a tracked block opens or closes): each record is checked against
        its tensor's values at its first read in the new epoch."""
        self.epoch += 1

    def record_of(self, t: torch.Tensor) -> Record | None:
        """The record of ``t``'s storage, or None if tracking never wrote it.

        Raises StaleBoundsError when the storage changed since tracking last wrote it and its
        enclosure no longer holds ``t``'s values (:func:`_holds`)."""
        key = t.untyped_storage()._cdata
        with self._lock:
            record = self._records.get(key)
        if record is None:
            return None
        version = version_of(t)
        if record.pending and version == record.version + 1:
            record.version, record.pending = version, False
        if version != record.version and not _holds(record, t):
            raise StaleBoundsError(
                f"a tensor of shape {tuple(t.shape)} and dtype {t.dtype} was modified in place "
                f"after its bounds were recorded (version {record.version} -> {version}), "
                "outside tracking; its bounds no longer hold. Recompute it inside fp.track(), "
                "or make the in-place change inside the tracked region."
            )
        if record.epoch != self.epoch:
            # a write through ``.data`` or ``.numpy()`` moves no version counter: the first
            # read after a tracked block opened or closed checks the values themselves
            if not _holds(record, t):
                raise StaleBoundsError(
                    f"a tensor of shape {tuple(t.shape)} and dtype {t.dtype} holds values "
                    "outside the bounds recorded for it: it was modified outside tracking "
                    "without a version change (through .data, .numpy() or other shared "
                    "memory), and its bounds no longer hold. Recompute it inside fp.track(), "
                    "or modify it inside the tracked region. (If nothing wrote it, the bounds "
                    "themselves were wrong: please report it, with the operation that made it.)"
                )
            if _covers_storage(t, record.lo.size):  # every element checked (no broadcast)
                record.epoch = self.epoch
        return record

    def forget(self, t: torch.Tensor) -> None:
        """Drop the record of ``t``'s storage (its values become an exact input again)."""
        key = t.untyped_storage()._cdata
        with self._lock:
            self._records.pop(key, None)
            self._refs.pop(key, None)

    def has_record(self, t: torch.Tensor) -> bool:
        """Whether tracking ever wrote ``t``'s storage (stale or not)."""
        key = t.untyped_storage()._cdata
        with self._lock:
            return key in self._records

    def read(self, t: torch.Tensor) -> Interval | None:
        """The enclosure of ``t``'s elements, or None if tracking never wrote its storage."""
        record = self.record_of(t)
        if record is None:
            return None
        if t.is_contiguous() and t.storage_offset() == 0 and t.numel() == record.lo.size:
            shape = tuple(t.shape)  # the whole storage, in order: a reshape is the view
            if record.hi is record.lo:
                return Interval.point(record.lo.reshape(shape))
            return Interval(record.lo.reshape(shape), record.hi.reshape(shape))
        lo = _view(record.lo, t)
        if record.hi is record.lo:
            return Interval.point(lo)
        return Interval(lo, _view(record.hi, t))

    def write(
        self,
        t: torch.Tensor,
        interval: Interval,
        *,
        provenance: Provenance,
        mode: str,
        notes: tuple[str, ...] = (),
        in_place: bool = False,
        owned: bool = False,
        summarised: tuple[float, bool] | None = None,
    ) -> Record:
        """Record ``interval`` as the enclosure of ``t``'s elements (just written by an op;
        ``in_place`` when the op mutated ``t``, whose version bump is still to come) and return
        the record. ``owned``: the caller hands over the interval's arrays (nothing else refers
        to them), so a contiguous float64 array that owns its memory becomes the buffer itself
        instead of a copy. ``summarised``: the :func:`summary` of ``interval`` where the
        caller made it already (a posteriori tracking's join does, in its pass); it is the
        record's when the record holds ``interval`` alone."""
        storage = t.untyped_storage()
        key = storage._cdata
        version = version_of(t)
        shape = tuple(t.shape)
        length = storage.nbytes() // t.element_size()
        whole = t.is_contiguous() and t.storage_offset() == 0 and t.numel() == length
        fmt = dtype_format(t.dtype)
        with self._lock:
            record = self._records.get(key)
        covers = False
        whole_line = (
            whole
            and interval.lo.shape == shape
            and interval.hi.shape == shape
            and is_whole_line(interval.lo, interval.hi)
        )
        if whole_line:  # the shared read-only ends (Interval.whole): no copy, no summary pass
            flat_lo, flat_hi = interval.lo.reshape(-1), interval.hi.reshape(-1)
            record = Record(flat_lo, flat_hi, version, fmt, provenance, mode, notes)
        elif whole:
            flat_lo = _buffer(interval.lo, shape, owned)
            flat_hi = flat_lo if interval.is_point else _buffer(interval.hi, shape, owned)
            record = Record(flat_lo, flat_hi, version, fmt, provenance, mode, notes)
        elif covers := _covers_storage(t, length):
            # every element is written: fresh buffers in the storage's order, nothing kept
            flat_lo = np.empty(length)
            _view(flat_lo, t)[...] = interval.lo
            flat_hi = flat_lo
            if not interval.is_point:
                flat_hi = np.empty(length)
                _view(flat_hi, t)[...] = interval.hi
            record = Record(flat_lo, flat_hi, version, fmt, provenance, mode, notes)
        else:
            lo = np.broadcast_to(interval.lo, shape)
            hi = lo if interval.is_point else np.broadcast_to(interval.hi, shape)
            if record is None:  # the other elements: the storage's values, read now
                values = _storage_values(t)
                record = Record(values, values, version, fmt, provenance, mode, notes)
                record.epoch = self.epoch
            self._write_strided(record, t, lo, hi, interval.is_point)
        record.version = version
        record.pending = in_place
        if whole_line or whole or covers:  # every element written in this epoch
            record.epoch = self.epoch
        if whole_line:
            record.max_radius, record.unbounded = math.inf, True
        elif summarised is not None and (whole or covers):  # the record holds interval alone
            record.max_radius, record.unbounded = summarised
        else:
            record.max_radius, record.unbounded = summary(record.lo, record.hi)
        if not whole_line and (record.max_radius == math.inf or record.lo is record.hi):
            _nan_ends_to_whole_line(record)
        record.provenance = provenance
        record.mode = mode
        record.notes = notes
        with self._lock:
            self._records[key] = record
            if key not in self._refs:
                self._refs[key] = StorageWeakRef(storage)
            self._writes += 1
            self._fresh_bytes += record.lo.nbytes + (
                0 if record.hi is record.lo else record.hi.nbytes
            )
            if self._writes % _PURGE_EVERY == 0 or self._fresh_bytes >= _PURGE_BYTES + 1024 * len(
                self._records
            ):
                self._fresh_bytes = 0
                self._drop_freed()
        return record

    @staticmethod
    def _write_strided(
        record: Record, t: torch.Tensor, lo: np.ndarray, hi: np.ndarray, point: bool
    ) -> None:
        if not record.lo.flags.writeable:  # the shared ends of the whole line: copied first
            record.lo, record.hi = record.lo.copy(), record.hi.copy()
        if record.hi is record.lo and not point:
            record.hi = record.lo.copy()
        _view(record.lo, t)[...] = lo
        if record.hi is not record.lo:
            _view(record.hi, t)[...] = hi

    def sweep(self) -> int:
        """Drop the records of freed storages now (their buffers go back to the allocator) and
        return how many were dropped. Writes sweep on their own; the pytest plugin also sweeps
        after each tracked test, so one test's dead bounds never outlive it."""
        with self._lock:
            self._fresh_bytes = 0
            return self._drop_freed()

    def _drop_freed(self) -> int:
        """Drop the records of freed storages (the caller holds the lock); how many."""
        dead = [key for key, ref in self._refs.items() if ref.expired()]
        for key in dead:
            del self._records[key], self._refs[key]
        return len(dead)

    def __len__(self) -> int:
        with self._lock:
            return sum(not ref.expired() for ref in self._refs.values())


#: The process-wide store. Tracking is per thread; records are per storage.
STORE = BoundsStore()
