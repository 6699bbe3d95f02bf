"""Bounds of the memory a Triton kernel reads and writes (RENDER section III-A, for kernels).

Triton addresses memory by raw pointers. A launch knows the storages of its tensor arguments
(:class:`Region`: base address, size, element type); each region keeps flat float64 ``lo``/``hi``
buffers, read lazily from the side store (:mod:`pytest_fpcheck.tracking.core.store`) or, for memory
tracking never wrote, the current values as exact points. Loads read them through the addresses
(masked-off lanes take ``other`` exactly), stores write the stored value's enclosure (the hull
where one store writes an address twice), and at the end of the launch every region the kernel
wrote is recorded in the side store, so that ``bounds_of`` and later PyTorch operations see it.

Atomic ``fadd`` (split-K reductions): the order of the updates is unknown, so the bound must hold
for any order. The updates of one address are collected (count m, the exact sum of the addends'
enclosures, the sum of their magnitudes T) and resolved once, as the enclosure of an m-term sum
in any order: ``c + sum v`` widened by gamma_m(u) (|c| + T) plus m smallest subnormals
(Higham, section 3.1). Atomic max/min are exact and order-free. The value an atomic returns (the
old value) depends on the schedule: its enclosure is the whole line, and reading an address that
atomics of the same launch are still updating raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...adapters.torch import dtype_format, internal
from ...errors import OutOfBoundsAccess, StaleBoundsError, UnsupportedOperation
from ...formats import Format
from ...interval.bounds import Provenance, contains
from ...interval.core import Interval, gamma
from ...interval.linalg import may_overflow
from ...interval.rounding import down, up
from ..core.store import STORE

__all__ = ["LaunchMemory", "Region"]

_U64 = 2.0**-53


@dataclass
class _Atomics:
    """Pending atomic additions into a region, per element."""

    count: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    magnitude: np.ndarray


@dataclass
class Region:
    """One storage a kernel may address: ``owner`` is a tensor argument over it."""

    owner: torch.Tensor
    base: int
    nbytes: int
    itemsize: int
    fmt: Format | None
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    provenance: Provenance = field(default_factory=Provenance)
    notes: list[str] = field(default_factory=list)
    written: bool = False
    atomics: _Atomics | None = None
    #: the pointer argument's name in the kernel's signature
    name: str = "argument"
    #: which elements the launch stored to (None before its first store): the others keep
    #: whatever they held, NaN included, and the interpreter is only judged on these
    stored: np.ndarray | None = None
    #: (first byte, end byte, name) of each tensor argument over the storage, from its storage
    #: offset to one past its last element: what the kernel was given of the storage
    extents: list[tuple[int, int, str]] = field(default_factory=list)
    #: the launch read the region (a load, or an atomic addition onto what it held): its
    #: provenance is that of what the launch wrote
    read: bool = False

    @property
    def length(self) -> int:
        return self.nbytes // self.itemsize

    def flat(self) -> torch.Tensor:
        """The whole storage as a 1-d tensor sharing the owner's version counter."""
        with internal(), torch.no_grad():
            return self.owner.as_strided((self.length,), (1,), 0)

    def load_bounds(self) -> None:
        """Read the region's enclosure from the side store (or its values, exact) once."""
        if self.lo is not None:
            return
        flat = self.flat()
        try:
            record = STORE.record_of(flat)
        except StaleBoundsError:
            STORE.forget(flat)
            record = None
            self.notes.append(
                f"an argument of shape {tuple(self.owner.shape)} was modified outside tracking "
                "after its bounds were recorded; its current value was taken as exact"
            )
        if record is not None:
            self.lo = record.lo.copy()
            self.hi = self.lo if record.hi is record.lo else record.hi.copy()
            self.provenance = record.provenance
            self.notes.extend(record.notes)
            return
        with internal(), torch.no_grad():
            values = flat.detach().to(torch.float64).numpy().copy()
        self.lo = self.hi = values


class LaunchMemory:
    """The regions of one kernel launch, addressed by pointer values."""

    def __init__(
        self,
        tensors: list[torch.Tensor],
        *,
        kernel: str = "kernel",
        names: dict[int, str] | None = None,
    ) -> None:
        """``names``: the pointer arguments' names by ``id`` of their tensors (for the message
        of an out-of-bounds access)."""
        regions: dict[int, Region] = {}
        names = names or {}
        for t in tensors:
            storage = t.untyped_storage()
            if storage.nbytes() == 0:
                continue
            name = names.get(id(t), f"argument {len(regions)}")
            region = regions.get(storage.data_ptr())
            if region is None:
                region = regions[storage.data_ptr()] = Region(
                    t,
                    storage.data_ptr(),
                    storage.nbytes(),
                    t.element_size(),
                    dtype_format(t.dtype),
                    name=name,
                )
            if t.numel():
                steps = zip(t.shape, t.stride(), strict=True)
                span = 1 + sum((size - 1) * abs(stride) for size, stride in steps)
                first = t.data_ptr() - region.base
                region.extents.append((first, first + span * t.element_size(), name))
        self.kernel = kernel
        self.regions = sorted(regions.values(), key=lambda r: r.base)
        self._bases = np.array([r.base for r in self.regions], dtype=np.uint64)

    def _out_of_bounds(self, address: int, number: int, where: str, access: str) -> None:
        """Raise :class:`OutOfBoundsAccess` for ``address``, which lies in no region: named
        after the region it lies past the end of (``number``), or the first one it precedes."""
        region = self.regions[max(number, 0)]
        start = region.owner.data_ptr()
        extent = (region.base + region.nbytes - start) // region.itemsize
        raise OutOfBoundsAccess(
            self.kernel,
            where=where,
            argument=region.name,
            offset=(address - start) // region.itemsize,
            extent=extent,
            access=access,
        )

    def _locate(
        self,
        addresses: np.ndarray,
        fmt: Format | None,
        itemsize: int,
        where: str,
        access: str = "load",
    ) -> list[tuple[Region, np.ndarray, np.ndarray]]:
        """(region, lane mask, element index) for each region the addresses fall in; an address
        in none raises :class:`OutOfBoundsAccess`."""
        flat = addresses.reshape(-1)
        which = np.searchsorted(self._bases, flat, side="right").astype(np.int64) - 1
        found = []
        for number in np.unique(which):
            lanes = which == number
            if number < 0:
                self._out_of_bounds(int(flat[lanes].max()), -1, where, access)
            region = self.regions[int(number)]
            offsets = flat[lanes] - np.uint64(region.base)
            outside = offsets >= np.uint64(region.nbytes)
            if outside.any():
                self._out_of_bounds(int(flat[lanes][outside].min()), int(number), where, access)
            self._within_arguments(region, offsets, itemsize, where, access)
            if itemsize != region.itemsize or (offsets % np.uint64(itemsize)).any():
                self._check_reinterpretable(region, where)
            if fmt is not None and region.fmt is not None and fmt.name != region.fmt.name:
                self._check_reinterpretable(region, where)
            found.append((region, lanes, (offsets // np.uint64(itemsize)).astype(np.int64)))
        return found

    def _within_arguments(
        self, region: Region, offsets: np.ndarray, itemsize: int, where: str, access: str
    ) -> None:
        """Raise :class:`OutOfBoundsAccess` for a byte offset into ``region``'s storage that
        lies in no tensor argument's extent: the kernel was given a view (a slice of a buffer,
        a block of a fused projection) and reached past it, into memory it was not given."""
        inside = np.zeros(offsets.shape, bool)
        for first, end, _ in region.extents:
            inside |= (offsets >= np.uint64(first)) & (offsets + np.uint64(itemsize) <= end)
        if inside.all():
            return
        offending = int(offsets[~inside].min())
        # named after the argument it lies past the end of, or else the first one it precedes
        before = [e for e in region.extents if e[0] <= offending]
        first, end, name = max(before) if before else min(region.extents)
        raise OutOfBoundsAccess(
            self.kernel,
            where=where,
            argument=name,
            offset=(offending - first) // region.itemsize,
            extent=(end - first) // region.itemsize,
            access=access,
        )

    @staticmethod
    def _check_reinterpretable(region: Region, where: str) -> None:
        region.load_bounds()
        if region.hi is not region.lo or region.atomics is not None:
            raise UnsupportedOperation(
                "reading tracked memory through a pointer of another element type",
                where=where,
                how="load it with its own element type, or run this kernel outside fp.track()",
            )

    def load(
        self,
        addresses: np.ndarray,
        mask: np.ndarray,
        other: Interval,
        loaded: np.ndarray,
        fmt: Format,
        itemsize: int,
        where: str,
    ) -> Interval:
        """The enclosure of a masked load: ``other`` where the mask is off, the bounds recorded
        for the memory where it is on (``loaded``, the values read, for exact memory; also for
        exact memory read through a pointer of another element type)."""
        shape = addresses.shape
        mask = np.broadcast_to(mask, shape).reshape(-1)
        lanes_on = np.flatnonzero(mask)
        lo = np.array(np.broadcast_to(other.lo, shape), dtype=np.float64).reshape(-1)
        hi = lo if other.is_point else np.array(np.broadcast_to(other.hi, shape)).reshape(-1)
        values = np.broadcast_to(loaded, shape).reshape(-1)[lanes_on]
        lo[lanes_on] = values
        if hi is not lo:
            hi[lanes_on] = values
        for region, lanes, index in self._locate(
            addresses.reshape(-1)[lanes_on], fmt, itemsize, where
        ):
            region.load_bounds()
            region.read = True
            if region.hi is region.lo:
                continue  # exact memory: the values read are the enclosure
            assert region.lo is not None
            assert region.hi is not None
            if region.atomics is not None and (region.atomics.count[index] > 0).any():
                raise UnsupportedOperation(
                    "a load of an address that atomics of the same launch update",
                    where=where,
                    how="its value depends on the order the programs run in; read it after "
                    "the launch",
                )
            if hi is lo:
                hi = lo.copy()
            target = lanes_on[lanes]
            lo[target] = region.lo[index]
            hi[target] = region.hi[index]
        return Interval(lo.reshape(shape), hi.reshape(shape))

    def loaded_provenance(self) -> Provenance:
        """The provenance of what the launch read (not of what it only overwrote)."""
        return Provenance().merge(*(r.provenance for r in self.regions if r.read))

    def _writes(
        self,
        addresses: np.ndarray,
        mask: np.ndarray,
        value: Interval,
        fmt: Format,
        itemsize: int,
        where: str,
    ) -> Iterator[tuple[Region, np.ndarray, np.ndarray, np.ndarray]]:
        """(region, element index, lo, hi) of each region a masked write reaches, the region's
        bounds loaded and marked written."""
        shape = addresses.shape
        lanes_on = np.flatnonzero(np.broadcast_to(mask, shape).reshape(-1))
        if lanes_on.size == 0:
            return
        v_lo = np.broadcast_to(value.lo, shape).reshape(-1)[lanes_on]
        v_hi = np.broadcast_to(value.hi, shape).reshape(-1)[lanes_on]
        for region, lanes, index in self._locate(
            addresses.reshape(-1)[lanes_on], fmt, itemsize, where, "store"
        ):
            region.load_bounds()
            region.written = True
            if region.stored is None:
                region.stored = np.zeros(region.length, dtype=bool)
            region.stored[index] = True
            yield region, index, v_lo[lanes], v_hi[lanes]

    def bits_written(
        self, addresses: np.ndarray, mask: np.ndarray, itemsize: int, where: str
    ) -> None:
        """Integers just stored into memory (exact bits): a floating tensor's elements they
        reached hold exact values now, read back from the memory."""
        shape = addresses.shape
        lanes_on = np.flatnonzero(np.broadcast_to(mask, shape).reshape(-1))
        if lanes_on.size == 0:
            return
        for region, _, index in self._locate(
            addresses.reshape(-1)[lanes_on], None, itemsize, where, "store"
        ):
            if region.fmt is None:
                continue
            region.load_bounds()
            self._resolve(region, index)
            assert region.lo is not None
            with internal(), torch.no_grad():
                values = region.flat().detach()[torch.from_numpy(index)]
                exact = values.to(torch.float64).numpy()
            region.written = True
            if region.stored is None:
                region.stored = np.zeros(region.length, dtype=bool)
            region.stored[index] = True
            region.lo[index] = exact
            if region.hi is not region.lo:
                assert region.hi is not None
                region.hi[index] = exact

    def store(
        self,
        addresses: np.ndarray,
        mask: np.ndarray,
        value: Interval,
        fmt: Format,
        itemsize: int,
        where: str,
    ) -> None:
        """Record a masked store of ``value`` (already rounded to the element type)."""
        for region, index, lo, hi in self._writes(addresses, mask, value, fmt, itemsize, where):
            assert region.lo is not None
            self._resolve(region, index)
            if value.is_point and region.hi is region.lo:
                region.lo[index] = lo  # stays exact
                continue
            if region.hi is region.lo:
                region.hi = region.lo.copy()
            assert region.hi is not None
            region.lo[index] = np.inf
            region.hi[index] = -np.inf
            np.minimum.at(region.lo, index, lo)
            np.maximum.at(region.hi, index, hi)

    def atomic(
        self,
        op: str,
        addresses: np.ndarray,
        mask: np.ndarray,
        value: Interval,
        fmt: Format,
        itemsize: int,
        where: str,
    ) -> None:
        """Record an atomic ``fadd``, ``max`` or ``min`` of ``value`` (any order)."""
        for region, index, lo, hi in self._writes(addresses, mask, value, fmt, itemsize, where):
            assert region.lo is not None
            if region.hi is region.lo:
                region.hi = region.lo.copy()
            assert region.hi is not None
            region.read = True  # the result combines what the memory held
            if op == "max":
                np.maximum.at(region.lo, index, lo)
                np.maximum.at(region.hi, index, hi)
                continue
            if op == "min":
                np.minimum.at(region.lo, index, lo)
                np.minimum.at(region.hi, index, hi)
                continue
            if region.atomics is None:
                n = region.length
                region.atomics = _Atomics(np.zeros(n, np.int64), *(np.zeros(n) for _ in range(3)))
            acc = region.atomics
            with np.errstate(invalid="ignore", over="ignore"):
                np.add.at(acc.count, index, 1)
                np.add.at(acc.lo, index, lo)
                np.add.at(acc.hi, index, hi)
                np.add.at(acc.magnitude, index, np.maximum(np.abs(lo), np.abs(hi)))
            region.fmt = fmt

    @staticmethod
    def _resolve(region: Region, index: np.ndarray | None = None) -> None:
        """Turn pending atomic additions (at ``index``, or everywhere) into enclosures."""
        acc = region.atomics
        if acc is None or region.fmt is None:
            return
        assert region.lo is not None
        assert region.hi is not None
        where = np.flatnonzero(acc.count) if index is None else index[acc.count[index] > 0]
        if where.size == 0:
            return
        fmt = region.fmt
        m = acc.count[where].astype(np.float64)
        c_lo, c_hi = region.lo[where], region.hi[where]
        with np.errstate(invalid="ignore", over="ignore"):
            top = float(m.max()) + 2
            total = up(
                (np.maximum(np.abs(c_lo), np.abs(c_hi)) + acc.magnitude[where])
                * (1 + 2 * gamma(int(top), _U64))
            )
            float64_error = up(total * gamma(int(top), _U64))
            nu = up(m * fmt.unit_roundoff)
            g = np.where(nu < 1, up(nu / down(1 - nu)), np.inf)
            spread = up(up(g * total) + float64_error + m * fmt.smallest_subnormal)
            lo = down(down(c_lo + acc.lo[where]) - spread)
            hi = up(up(c_hi + acc.hi[where]) + spread)
            overflow = may_overflow(total, g, fmt.max_finite) | np.isnan(lo) | np.isnan(hi)
        enclosure = Interval(np.where(overflow, -np.inf, lo), np.where(overflow, np.inf, hi))
        rounded = enclosure.to_format(fmt)
        region.lo[where] = np.where(overflow, -np.inf, rounded.lo)
        region.hi[where] = np.where(overflow, np.inf, rounded.hi)
        acc.count[where] = 0
        acc.lo[where] = acc.hi[where] = acc.magnitude[where] = 0.0

    def finish(
        self,
        *,
        kernel: str,
        provenance: Provenance,
        notes: tuple[str, ...],
        mode: str,
        reduced: bool = True,
    ) -> None:
        """Record every region the launch wrote in the side store. The interpreter's results
        must lie inside: one that does not was computed wrongly by the interpreter itself
        (``reduced``: the launch handled bfloat16 or float8 values, whose arithmetic and
        conversions triton 3.9's interpreter gets wrong), or else by a rule of this package."""
        loaded = self.loaded_provenance()
        wrong = total = 0
        for region in self.regions:
            if not region.written or region.fmt is None:
                continue
            self._resolve(region)
            assert region.lo is not None
            assert region.hi is not None
            interval = (
                Interval.point(region.lo)
                if region.hi is region.lo
                else Interval(region.lo, region.hi)
            )
            with internal(), torch.no_grad():
                values = region.flat().detach().to(torch.float64).numpy()
            stored = region.stored if region.stored is not None else np.zeros(values.size, bool)
            wrong += int((~contains(region.lo, region.hi, values) & stored).sum())
            total += int(stored.sum())
            interval = _kept(interval, stored, values)
            # elements the launch did not store keep what they held, its provenance and notes
            held = region.read or not stored.all()
            kept = region.provenance if held else Provenance()
            STORE.write(
                region.flat(),
                interval,
                provenance=loaded.merge(kept, provenance),
                mode=mode,
                notes=tuple(dict.fromkeys([*(region.notes if held else ()), *notes])),
            )
        if wrong and not reduced:
            raise UnsupportedOperation(
                f"the result of Triton kernel {kernel!r}",
                how=f"{wrong} of {total} stored values lie outside their enclosures, and the "
                "kernel handled no bfloat16 or float8 values, whose interpreter defects would "
                "explain it: this is likely a soundness bug of pytest-fpcheck; please report it "
                "with the kernel",
            )
        if wrong:
            import triton

            raise UnsupportedOperation(
                f"the result of Triton kernel {kernel!r}",
                how=f"{wrong} of {total} stored values lie outside the bounds of IEEE "
                f"arithmetic: Triton's interpreter ({triton.__version__}) computed them wrongly "
                "(triton 3.9 adds and multiplies bfloat16 bit patterns as integers, and its "
                "bfloat16 and float8 conversions mishandle subnormals); the bounds are recorded, but "
                "the values are not what a GPU computes: compute in float32 inside the kernel",
            )


def _kept(interval: Interval, stored: np.ndarray, values: np.ndarray) -> Interval:
    """The enclosure of a region after a launch: elements the launch never stored keep what
    they held; one of those holding a NaN the kernel never wrote (``torch.empty`` memory) gets
    the whole line, the enclosure that admits NaN, rather than a point NaN no value lies in."""
    kept_nan = ~stored & np.isnan(values)
    if not kept_nan.any():
        return interval
    return Interval(
        np.where(kept_nan, -np.inf, interval.lo), np.where(kept_nan, np.inf, interval.hi)
    )


def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors among a launch's arguments (inside tuples, descriptors and wrappers)."""
    if isinstance(value, torch.Tensor):
        return [value]
    base = getattr(value, "base", None)
    if isinstance(base, torch.Tensor):
        return [base]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_of(item)]
    return []
