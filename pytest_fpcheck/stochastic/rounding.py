"""Random rounding onto a format's grid, and the random numbers it draws.

Stochastic rounding (SR; Monte Carlo arithmetic's "random rounding", Verificarlo, cited in the
GPU-FPX/FTTN paper section 7, and CESTAC's random rounding mode) rounds a value ``x`` lying
between two neighbours ``a < x < b`` of a format's grid to ``b`` with probability
``(x - a) / (b - a)`` and to ``a`` otherwise: it is unbiased (``E[SR(x)] = x``) and its error has
variance ``g**2 f (1 - f)`` for a gap ``g`` and a fractional position ``f``. A value on the grid
stays where it is.

Three roundings are implemented here, each exact in its arithmetic:

* :func:`round_stochastic`: ``x`` (float32 or float64) onto the grid of a narrower format
  (bfloat16, float16, float32 from float64, float8). For bfloat16 from float32, whose grid is
  float32's with the 16 low bits cleared, a random integer below ``2**16`` is added to the bit
  pattern and the low bits are cleared (sign and magnitude: the rounding acts on the magnitude,
  carries reach the next binade or infinity as they should); the same with 13 and 29 bits gives
  float16 from float32 and float32 from float64 in their normal ranges. Otherwise (their
  subnormals, float8) ``(floor(x / g) + [U < frac(x / g)]) * g`` with ``g`` the gap of ``x``'s
  binade (``frexp``), every step exact (scaling by powers of two; ``x / g`` has at most ``p``
  integer bits).
* :func:`perturb_in_place_format`: for a result that has no wider value (the operation ran in
  its own format), the exact value is taken as uniformly placed in the rounding
  interval of the computed ``y``; its stochastic rounding then moves ``y`` one step of its grid
  up or down, each with probability ``1/12``, which is the average variance ``g**2 / 6`` of a
  stochastic rounding. Zeros and non-finite values stay.
* accumulation noise (:func:`add_noise`): a Gaussian term of a given standard deviation per
  element (see :mod:`pytest_fpcheck.stochastic.accumulation`).

Random numbers come from pools (:class:`Pools`) generated once per process, in chunks from
``numpy.random.SeedSequence((POOL_SEED, kind, chunk))``, and read at a random offset for each
operation (the offset comes from a generator seeded by the run's seed, and drawn in batches);
the numbers that decide rounding directions are stratified across a run's samples, with a
fresh assignment of strata to samples for each operation (:class:`SampleRandom`). A new seed costs nothing: generating pools per seed cost
17 ms a call, more than 16 runs of a small model. Reading a pool costs nothing,
where drawing a fresh number per element costs more than the operation it rounds; two
operations share a number only at positions their offsets pair at random, never element for
element.
"""

from __future__ import annotations

import ctypes
import functools
import math
import threading
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from ..formats import Format
from .kernels import product_noise, truncate

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "BatchRandom",
    "Pools",
    "SampleRandom",
    "add_noise",
    "add_product_noise",
    "in_range",
    "perturb_in_place_format",
    "round_checked",
    "round_stochastic",
]

_MIN_POOL = 1 << 20
_SAME_WIDTH: dict[int, torch.dtype] = {
    1: torch.int8,
    2: torch.int16,
    4: torch.int32,
    8: torch.int64,
}
_KINDS = {"uniform": 1, "bits16": 2, "step": 3, "normal": 4, "bits13": 5, "bits29": 6}
#: the probability of each one-step move of :func:`perturb_in_place_format` (variance g**2/6)
STEP_PROBABILITY = 1.0 / 12.0


def _generate(kind: str, size: int, seed: int, chunk: int) -> torch.Tensor:
    """Chunk ``chunk`` of the pool of ``kind`` (``size`` numbers)."""
    generator = np.random.Generator(
        np.random.PCG64(np.random.SeedSequence((seed, _KINDS[kind], chunk)))
    )
    array: NDArray[np.generic]
    if kind == "uniform":
        array = generator.random(size, dtype=np.float32)
    elif kind == "bits16":
        array = generator.integers(0, 1 << 16, size, dtype=np.int32)
    elif kind == "bits13":
        array = generator.integers(0, 1 << 13, size, dtype=np.int32)
    elif kind == "bits29":
        array = generator.integers(0, 1 << 29, size, dtype=np.int64)
    elif kind == "step":
        u = generator.random(size, dtype=np.float32)
        array = (u >= 1 - STEP_PROBABILITY).astype(np.int8) - (u < STEP_PROBABILITY).astype(np.int8)
    else:
        array = generator.standard_normal(size, dtype=np.float32)
    return torch.from_numpy(array)


#: the seed of the pools: fixed, so that they are generated once per process whatever the
#: runs' seeds (which choose the offsets)
POOL_SEED = 21


class Pools:
    """The random pools, generated once per process (from :data:`POOL_SEED`) and shared by
    every sample run in it; a sample's seed and index choose where it reads them."""

    _shared: ClassVar[Pools | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, seed: int = POOL_SEED) -> None:
        self.seed = seed
        self.arrays: dict[str, torch.Tensor] = {}
        self.lock = threading.Lock()

    @classmethod
    def shared(cls) -> Pools:
        """The pools of this process."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def pool(self, kind: str, n: int) -> torch.Tensor:
        """The pool of ``kind``, at least :func:`pool_size` ``(n)`` long. It grows by whole chunks
        of ``2**20`` numbers, each a function of the seed, the kind and its index only: a
        prefix never changes, so what a sample reads does not depend on what ran before it in
        this process."""
        with self.lock:
            array = self.arrays.get(kind)
            need = pool_size(n)
            if array is None or array.numel() < need:
                parts = [] if array is None else [array]
                parts += [
                    _generate(kind, _MIN_POOL, self.seed, index)
                    for index in range(
                        sum(p.numel() for p in parts) // _MIN_POOL, need // _MIN_POOL
                    )
                ]
                array = torch.cat(parts)
                self.arrays[kind] = array
            return array


def pool_size(n: int) -> int:
    """The part of a pool that ``n`` numbers are read from: at least twice ``n`` (so their
    offsets vary), a power of two of at least ``2**20``."""
    return max(_MIN_POOL, 1 << (2 * n - 1).bit_length())


#: offsets a sample draws from its generator at a time, at most (and first)
_OFFSET_BATCH = 1024
_FIRST_BATCH = 16


#: the pools whose numbers decide a rounding's direction, stratified across a call's samples:
#: each number's modulus (None: uniform numbers in [0, 1))
_STRATIFIED: dict[str, int | None] = {
    "uniform": None,
    "bits16": 1 << 16,
    "bits13": 1 << 13,
    "bits29": 1 << 29,
}


class _Offsets:
    """Uniform integers from a generator, drawn in batches (one generator call for many
    operations, not one per operation): 16 first, doubling up to :data:`_OFFSET_BATCH`, so that
    a small run does not pay for a thousand draws it does not use. The numbers do not depend on
    the batches (each is one 64-bit output of the generator)."""

    def __init__(self, entropy: tuple[int, ...]) -> None:
        self._generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
        self._pending: list[int] = []
        self._batch = _FIRST_BATCH

    def below(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)`` (the remainder of a 62-bit number: its bias is
        below ``bound / 2**62``)."""
        if not self._pending:
            self._pending = self._generator.integers(0, 1 << 62, self._batch).tolist()[::-1]
            self._batch = min(2 * self._batch, _OFFSET_BATCH)
        return self._pending.pop() % bound


class _Common:
    """The numbers every sample of a run draws alike, drawn once per run in a process and read by
    each sample at its own position: the offsets of the stratified pools (a generator of
    ``SeedSequence((seed,))``, as :class:`_Offsets`) and a random permutation of
    ``range(count)`` per operation (the ranks of ``count`` uniform numbers, a generator of
    ``SeedSequence(seed, spawn_key=(1,))``). Each sample used to make both generators and draw
    both sequences itself (20 microseconds and more per sample); the numbers are the same.
    :meth:`of` keeps the runs of the last few seeds (a thread pool's samples share them)."""

    _recent: ClassVar[dict[tuple[int, int], _Common]] = {}
    _recent_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, seed: int, count: int) -> None:
        self.count = count
        self._offset_generator = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence((seed,)))
        )
        self._strata_generator = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(1,)))
        )
        self.offsets: list[int] = []
        self.strata: list[list[int]] = []
        self._batches = [_FIRST_BATCH, _FIRST_BATCH]
        self._lock = threading.Lock()

    @classmethod
    def of(cls, seed: int, count: int) -> _Common:
        """The common numbers of the run of ``seed`` with ``count`` samples in this process."""
        key = (seed, count)
        with cls._recent_lock:
            common = cls._recent.get(key)
            if common is None:
                if len(cls._recent) >= 4:
                    cls._recent.pop(next(iter(cls._recent)))
                common = cls._recent[key] = cls(seed, count)
            return common

    def offset(self, position: int) -> int:
        """The 62-bit number of operation ``position``."""
        if position >= len(self.offsets):
            with self._lock:
                while position >= len(self.offsets):
                    batch = self._batches[0]
                    self.offsets.extend(self._offset_generator.integers(0, 1 << 62, batch).tolist())
                    self._batches[0] = min(2 * batch, _OFFSET_BATCH)
        return self.offsets[position]

    def stratum(self, position: int, index: int) -> int:
        """Sample ``index``'s stratum for operation ``position``."""
        if position >= len(self.strata):
            with self._lock:
                while position >= len(self.strata):
                    batch = self._batches[1]
                    draws = self._strata_generator.random((batch, self.count))
                    self.strata.extend(draws.argsort(axis=1).tolist())
                    self._batches[1] = min(2 * batch, _OFFSET_BATCH)
        return self.strata[position][index]


#: shape -> the strides of a contiguous tensor of that shape (:meth:`SampleRandom.take`)
_STRIDES: dict[torch.Size, tuple[int, ...]] = {}


def _contiguous_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, step = [], 1
    for length in reversed(shape):
        strides.append(step)
        step *= max(length, 1)
    return tuple(reversed(strides))


#: where the pools are drawn (:meth:`SampleRandom.pool` copies them to other devices)
_HOST = torch.device("cpu")


class SampleRandom:
    """What sample ``index`` of a run draws: offsets into the pools.

    With ``count`` (the run's number of samples) the numbers that decide a rounding's direction
    are stratified across the samples: every sample reads them at the same offsets (from
    ``SeedSequence((seed,))``), and for each operation sample ``i`` shifts them by ``s_i / count``
    of their range, modulo the range, ``s`` a random permutation of ``range(count)`` drawn per
    operation (the same in every sample: :class:`_Common`), so that of ``count`` samples rounding
    a value at fractional position ``f`` between its neighbours, ``floor(count f)`` or
    ``ceil(count f)`` round up (Latin-hypercube sampling of each rounding; each sample alone
    still rounds with probability ``f``). The permutation changes from one operation to the
    next: with the shift ``i / count`` of every operation (commit 5490cb7), a chain of roundings
    of one value (a scan's additions, a loop's accumulator) kept each sample in the same stratum,
    samples of neighbouring strata took the same directions step after step, and the 16
    samples of a ``tl.associative_scan`` collapsed to 2 to 9 distinct values, at times one (a
    spread of zero, and false Type-II verdicts; docs/performance.md). Without
    it the samples' roundings are independent, and a rounding near a grid point shared by many
    outputs (a parameter converted inside the run) takes the same direction in all 16 samples
    with probability ``f**16 + (1 - f)**16``, unseen by their spread (docs/performance.md,
    "Calibration on Triton kernels"). The Gaussian accumulation terms and the one-step moves
    stay independent (offsets from ``SeedSequence((seed, index))``)."""

    #: a sample rounds one row (a batch, :class:`BatchRandom`, one per sample)
    rows = 1

    def __init__(self, pools: Pools, seed: int, index: int, count: int | None = None) -> None:
        self.pools = pools
        self.index, self.count = index, count
        self._own = _Offsets((seed, index))
        self._common = None if count is None else _Common.of(seed, count)
        self._offset_position = 0  # of the common offsets
        self._stratum_position = 0  # of the common strata
        self._arrays: dict[tuple[str, torch.device], tuple[torch.Tensor, int]] = {}

    def pool(self, kind: str, n: int, device: torch.device = _HOST) -> torch.Tensor:
        """The pool of ``kind`` that ``n`` numbers are read from (kept for the run), on
        ``device`` (a copy of the host's pool there: the same numbers on every device)."""
        size = pool_size(n)
        pool, length = self._arrays.get((kind, device), (None, 0))
        if pool is None or length < size:
            pool = self.pools.pool(kind, n)
            if device != _HOST:
                pool = pool.to(device)
            self._arrays[(kind, device)] = (pool, pool.numel())
        return pool

    def locate(self, kind: str, n: int) -> tuple[int, int | None]:
        """Where this sample reads its next ``n`` numbers of ``kind``: the start in the pool and,
        for a stratified kind, the sample's stratum (None otherwise); advances its positions."""
        size = pool_size(n)
        common = self._common
        if common is not None and kind in _STRATIFIED:
            start = common.offset(self._offset_position) % (size - n + 1)
            stratum = common.stratum(self._stratum_position, self.index)
            self._offset_position += 1
            self._stratum_position += 1
            return start, stratum
        return self._own.below(size - n + 1), None

    def skip(self, kind: str) -> None:
        """Advance past a draw of the stratified ``kind`` not needed here (a rounding whose
        subnormal road no element of this sample takes), as a take would: the samples of a run
        then stay at the same position whichever of them drew (a batch keeps reading them all
        at once). Independent samples (no ``count``) have nothing to keep together."""
        if self._common is not None and kind in _STRATIFIED:
            self._offset_position += 1
            self._stratum_position += 1

    def window(self, kind: str, n: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        """Where the next ``n`` numbers of ``kind`` (one whose stratum shift is an integer, or
        that has none) come from, as :meth:`BatchRandom.window` gives them for a batch: the
        host's pool, and this sample's start and shift (one row; 0 where the kind is not
        stratified)."""
        _check_windowed(kind)
        pool = self.pool(kind, n)
        start, stratum = self.locate(kind, n)
        modulus = _STRATIFIED.get(kind)
        shift = 0
        if stratum is not None and self.count is not None and modulus is not None:
            shift = (stratum * modulus) // self.count
        return pool, np.array([start], dtype=np.int64), np.array([shift], dtype=np.int64)

    def take(self, kind: str, like: torch.Tensor) -> torch.Tensor:
        """``like.numel()`` numbers of ``kind`` in ``like``'s shape (a view of a pool, or the
        view shifted for this sample's stratum)."""
        n = like.numel()
        pool = self.pool(kind, n, like.device)
        # the same whatever ran before
        start, stratum = self.locate(kind, n)
        shape = like.shape
        # pool[start:start + n] in like's shape, one call (slicing and a view take two);
        # read only: callers never write into it
        values = pool.as_strided(shape, _strides(shape), start)
        if stratum is None or self.count is None:
            return values
        # (v + s / count) modulo the range: each element's v (uniform over the whole range)
        # rotates the strata, so that one sample's strata of the elements of an operation are
        # independent (a number reduced into the first stratum plus s / count would give every
        # element the same stratum in a sample: their errors would move together, and a
        # softmax, which cancels a common shift, showed 10 to 18% less spread)
        modulus = _STRATIFIED[kind]
        if modulus is None:
            return values.add(stratum / self.count).remainder_(1.0)
        return values.add((stratum * modulus) // self.count).bitwise_and_(modulus - 1)


def _check_windowed(kind: str) -> None:
    """A window gives integer shifts: the uniform numbers' shifts are fractions."""
    if kind not in _KINDS or _STRATIFIED.get(kind, 0) is None:
        windowed = sorted(k for k in _KINDS if _STRATIFIED.get(k, 0) is not None)
        raise ValueError(f"kind: one of {windowed} expected, not {kind!r}")


def _strides(shape: torch.Size) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape`` (remembered per shape)."""
    strides = _STRIDES.get(shape)
    if strides is None:
        if len(_STRIDES) > 4096:  # a program of ever new shapes: forget them
            _STRIDES.clear()
        strides = _STRIDES[shape] = _contiguous_strides(shape)
    return strides


class BatchRandom:
    """What the ``count`` samples of a run draw when they run together, as one batch along a
    leading dimension (:mod:`pytest_fpcheck.stochastic.batched`): :meth:`take` gives
    ``(count, *shape)`` numbers whose row ``i`` is, bit for bit, what
    ``SampleRandom(pools, seed, i, count).take`` gives at the same point of sample ``i``'s run.
    While every sample has read the common numbers up to the same operation (they all round
    the same operations), the stratified pools are read at one offset (a view) and shifted by
    each row's stratum (one addition over the batch); :meth:`row` hands one sample's own
    generator to a rounding only some rows make (a float16 subnormal), after which each row's
    positions are followed separately, until :meth:`realign` finds them together again."""

    def __init__(self, pools: Pools, seed: int, count: int) -> None:
        self.rows = count
        self.samples = [SampleRandom(pools, seed, index, count) for index in range(count)]
        common = self.samples[0]._common
        assert common is not None
        self._common = common
        #: the common position of every sample, or None once they differ
        self._aligned: tuple[int, int] | None = (0, 0)
        #: modulus -> each operation's shifts of the rows (operation x row), as take() adds them
        self._shifts: dict[int | None, np.ndarray] = {}

    def _shift(self, modulus: int | None, position: int, dtype: torch.dtype) -> np.ndarray:
        """The rows' shifts of the stratified numbers of operation ``position``: ``s / count``
        (rounded to the pool's float32 from the float64 quotient, as a Python float added to a
        float32 tensor is) or ``(s * modulus) // count``, in the pool's ``dtype``."""
        shifts = self._shifts.get(modulus)
        if shifts is None or shifts.shape[0] <= position:
            self._common.stratum(position, 0)  # drawn up to here
            strata = torch.tensor(self._common.strata, dtype=torch.int64)
            if modulus is None:
                table = (strata.double() / self.rows).to(dtype)
            else:
                table = ((strata * modulus) // self.rows).to(dtype)
            shifts = self._shifts[modulus] = table.numpy()
        row: np.ndarray = shifts[position]
        return row

    def row(self, index: int) -> SampleRandom:
        """Sample ``index``'s own draws (its positions then move apart from the others')."""
        if self._aligned is not None:
            offset, stratum = self._aligned
            for sample in self.samples:
                sample._offset_position, sample._stratum_position = offset, stratum
            self._aligned = None
        return self.samples[index]

    def skip(self, kind: str) -> None:
        """Every sample's :meth:`SampleRandom.skip`."""
        if self._aligned is not None and kind in _STRATIFIED:
            offset, position = self._aligned
            self._aligned = (offset + 1, position + 1)
            return
        for sample in self.samples:
            sample.skip(kind)

    def realign(self) -> None:
        """After rows drew on their own (:meth:`row`): read the common numbers for all rows at
        once again if every sample has reached the same position."""
        if self._aligned is None:
            positions = {(s._offset_position, s._stratum_position) for s in self.samples}
            if len(positions) == 1:
                self._aligned = positions.pop()

    def _located(
        self, kind: str, n: int, dtype: torch.dtype
    ) -> tuple[int | list[int], np.ndarray | None]:
        """Where each row reads its next ``n`` numbers of ``kind``: one start for all rows
        (while they are aligned) or each row's, and each row's shift of a stratified kind
        (as ``SampleRandom.take`` shifts it, in ``dtype``; None for a kind not stratified)."""
        count = self.rows
        modulus = _STRATIFIED.get(kind, 0)
        if modulus == 0:  # each sample's own offsets (SampleRandom.locate's, without its checks)
            bound = pool_size(n) - n + 1
            return [sample._own.below(bound) for sample in self.samples], None
        if self._aligned is not None:
            offset, position = self._aligned
            start = self._common.offset(offset) % (pool_size(n) - n + 1)
            self._aligned = (offset + 1, position + 1)
            return start, self._shift(modulus, position, dtype)
        located = [sample.locate(kind, n) for sample in self.samples]
        starts = [start for start, _ in located]
        strata: list[int] = [stratum for _, stratum in located]  # type: ignore[misc]
        if modulus is None:
            shifts = torch.tensor([s / count for s in strata], dtype=dtype)
        else:
            shifts = torch.tensor([(s * modulus) // count for s in strata], dtype=dtype)
        return starts, shifts.numpy()

    def window(self, kind: str, n: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        """Where the rows' next ``n`` numbers of ``kind`` (as :meth:`SampleRandom.window`)
        come from: the host's pool, each row's start and shift (0 where the kind is not
        stratified); row ``i`` of ``(pool[starts[i]:][:n] + shifts[i]) mod range`` is what
        :meth:`take` gives."""
        _check_windowed(kind)
        pool = self.samples[0].pool(kind, n)
        starts, shift = self._located(kind, n, pool.dtype)
        rows = np.empty(self.rows, dtype=np.int64)
        rows[:] = starts
        shifts = np.zeros(self.rows, dtype=np.int64) if shift is None else shift
        return pool, rows, shifts.astype(np.int64, copy=False)

    def take(self, kind: str, like: torch.Tensor) -> torch.Tensor:
        """``like[0].numel()`` numbers of ``kind`` per row, in ``like``'s shape (``like``'s
        first dimension is the samples')."""
        shape = like.shape[1:]
        n = math.prod(shape)
        pool = self.samples[0].pool(kind, n, like.device)
        strides = _strides(shape)
        count = self.rows
        starts, shift = self._located(kind, n, pool.dtype)
        if isinstance(starts, int) or len(set(starts)) == 1:
            start = starts if isinstance(starts, int) else starts[0]
            values = pool.as_strided((1, *shape), (0, *strides), start)
        else:
            windows = pool.as_strided((pool.numel() - n + 1, n), (1, 1))
            values = windows[torch.tensor(starts, device=pool.device)].view(count, *shape)
        if shift is None:
            return values.expand(count, *shape)
        # each row shifted by its sample's stratum, as SampleRandom.take shifts it
        rows = torch.from_numpy(shift).to(pool.device).view(count, *([1] * len(shape)))
        if _STRATIFIED[kind] is None:
            return values.add(rows).remainder_(1.0)
        return values.add(rows).bitwise_and_(_STRATIFIED[kind] - 1)  # type: ignore[operator]


#: a sample's draws, or a batch of samples' (row by row)
Draw = SampleRandom | BatchRandom


def _power_of_two(exponent: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``2**exponent`` (an integer tensor within the normal range of ``dtype``), exactly: built
    from its bit pattern (``torch.ldexp`` goes through ``pow``, several times slower)."""
    if dtype == torch.float64:
        return ((exponent.to(torch.int64) + 1023) << 52).view(torch.float64)
    return ((exponent.to(torch.int32) + 127) << 23).view(torch.float32)


def _round_generic(x: torch.Tensor, fmt: Format, draw: Draw) -> torch.Tensor:
    """``(floor(x / g) + [U < frac(x / g)]) * g`` in ``x``'s dtype, ``g`` the gap of ``x``'s
    binade in ``fmt``; exact (scaling by powers of two within ``x``'s normal range)."""
    _, exponent = torch.frexp(x)
    gap = torch.clamp(exponent - 1, min=fmt.emin) - (fmt.precision - 1)
    scaled = x * _power_of_two(-gap, x.dtype)
    down = torch.floor(scaled)
    # up with probability equal to the (exact) fraction: never a rounded sum of the two
    up = draw.take("uniform", x) < (scaled - down)
    result = (down + up) * _power_of_two(gap, x.dtype)
    return torch.where(torch.isfinite(x), result, x)


#: (wide dtype, target dtype) -> (integer view, low bits dropped, pool, whether the target has
#: the wide format's exponent range): the target's grid is the wide format's with those bits
#: cleared, within the target's normal range
_TRUNCATIONS = {
    (torch.float32, torch.bfloat16): (torch.int32, 16, "bits16", True),
    (torch.float32, torch.float16): (torch.int32, 13, "bits13", False),
    (torch.float64, torch.float32): (torch.int64, 29, "bits29", False),
}


def in_range(x: torch.Tensor, fmt: Format) -> bool:
    """Is every value of ``x`` finite and at most ``fmt``'s largest finite value in magnitude
    (one pass)? Then ``x`` holds no NaN to guard, and no rounding onto ``fmt`` overflows."""
    if x.numel() == 0:
        return True
    low, high = (float(v) for v in torch.aminmax(x))
    return math.isfinite(low) and math.isfinite(high) and max(-low, high) <= fmt.max_finite


def round_stochastic(x: torch.Tensor, dtype: torch.dtype, fmt: Format, draw: Draw) -> torch.Tensor:
    """``x`` (float32 or float64, wider than ``fmt``) stochastically rounded onto ``fmt``'s grid,
    as a tensor of ``dtype``. Non-finite values are converted as they are."""
    return round_checked(x, dtype, fmt, draw)[0]


def round_checked(
    x: torch.Tensor, dtype: torch.dtype, fmt: Format, draw: Draw
) -> tuple[torch.Tensor, bool]:
    """:func:`round_stochastic` and :func:`in_range` of ``x``. On the host, a rounding by
    truncation does both in one compiled pass (:mod:`pytest_fpcheck.stochastic.kernels`),
    the same bits as the tensor operations of elsewhere."""
    truncation = _TRUNCATIONS.get((x.dtype, dtype))
    if truncation is None:
        inside = in_range(x, fmt)
        return _round_generic(x, fmt, draw).to(dtype), inside
    if x.device == _HOST and x.numel() > 0:
        return _truncated_on_host(x, dtype, fmt, draw)
    return _truncated_by_tensors(x, dtype, fmt, draw)


def _truncated_by_tensors(
    x: torch.Tensor, dtype: torch.dtype, fmt: Format, draw: Draw
) -> tuple[torch.Tensor, bool]:
    """:func:`round_checked` by truncation, in tensor operations (any device)."""
    integer, dropped, kind, same_range = _TRUNCATIONS[(x.dtype, dtype)]
    inside = in_range(x, fmt)
    mask = -(1 << dropped)
    rounded = x.view(integer).add(draw.take(kind, x)).bitwise_and_(mask).view(x.dtype)
    if not inside:  # a NaN's payload may carry: keep NaNs
        rounded = torch.where(torch.isnan(x), x, rounded)
    rounded = rounded.to(dtype)
    if not same_range:
        magnitude = torch.abs(x)
        tiny = (magnitude < fmt.smallest_normal) & (magnitude > 0)
        _round_subnormals(x, rounded, fmt, draw, tiny.reshape(draw.rows, -1).any(1))
    return rounded, inside


def _truncated_on_host(
    x: torch.Tensor, dtype: torch.dtype, fmt: Format, draw: Draw
) -> tuple[torch.Tensor, bool]:
    """:func:`round_checked` by truncation, in one compiled pass (host memory)."""

    patterns, dropped, kind, same_range = _TRUNCATIONS[(x.dtype, dtype)]
    rows = draw.rows
    n = x.numel() // rows
    pool, starts, shifts = draw.window(kind, n)
    largest, smallest = _edges(x.dtype, fmt, same_range)
    bits = x.reshape(rows, n).view(patterns).numpy()
    high = dtype == torch.bfloat16  # the kernel writes bfloat16's patterns
    out = torch.empty((rows, n), dtype=torch.int16 if high else patterns)
    outside, tiny = truncate(
        bits,
        pool.numpy(),
        starts,
        shifts,
        dropped,
        largest,
        smallest,
        _written(out) if high else out.numpy(),  # only bfloat16's is the result itself
    )
    rounded = out.view(dtype if high else x.dtype).view(x.shape).to(dtype)
    if outside:  # a NaN's payload may carry: keep NaNs, converted as the tensor path does
        nans = torch.isnan(x)
        converted = torch.where(nans, x, torch.zeros((), dtype=x.dtype)).to(dtype)
        rounded = torch.where(nans, converted, rounded)
    if not same_range:
        _round_subnormals(x, rounded, fmt, draw, torch.from_numpy(tiny))
    return rounded, not outside


@functools.lru_cache(maxsize=32)
def _edges(wide: torch.dtype, fmt: Format, same_range: bool) -> tuple[int, int]:
    """The bit patterns, in the ``wide`` format, of ``fmt``'s largest finite value and of its
    smallest normal one (0 where ``fmt`` has the wide format's exponent range)."""
    patterns = _SAME_WIDTH[wide.itemsize]

    def pattern(value: float) -> int:
        return int(torch.tensor(value, dtype=wide).view(patterns))

    return pattern(fmt.max_finite), 0 if same_range else pattern(fmt.smallest_normal)


def _round_subnormals(
    x: torch.Tensor, rounded: torch.Tensor, fmt: Format, draw: Draw, rows: torch.Tensor
) -> None:
    """Round into ``rounded`` the values of ``x`` in ``fmt``'s subnormal range, a coarser grid
    than the truncation's (zeros, which the truncation keeps, are not: a model's masked
    attention weights and ReLU outputs would take every rounding there). ``rows``: which rows
    (of a batch; the one row of a sample) hold such a value."""
    if not bool(rows.any()):
        draw.skip("uniform")  # what the subnormal road would have drawn
        return
    dtype = rounded.dtype
    if isinstance(draw, BatchRandom):  # each row with its own sample's draws
        for row, has in enumerate(rows.tolist()):
            if has:
                magnitude = torch.abs(x[row])
                tiny = (magnitude < fmt.smallest_normal) & (magnitude > 0)
                rounded[row][tiny] = _round_generic(x[row][tiny], fmt, draw.row(row)).to(dtype)
            else:
                draw.row(row).skip("uniform")
        draw.realign()  # every sample drew once: together again
        return
    magnitude = torch.abs(x)
    tiny = (magnitude < fmt.smallest_normal) & (magnitude > 0)
    rounded[tiny] = _round_generic(x[tiny], fmt, draw).to(dtype)


def perturb_in_place_format(y: torch.Tensor, draw: Draw) -> torch.Tensor:
    """``y`` (computed in its own format) moved one step of its grid up or down with
    probability 1/12 each; zeros and non-finite values stay."""
    integer = _SAME_WIDTH[y.element_size()]
    moved = (y.view(integer) + draw.take("step", y)).to(integer).view(y.dtype)
    keep = (y == 0) | ~torch.isfinite(moved) | ~torch.isfinite(y)
    return torch.where(keep, y, moved)


def add_product_noise(
    total: torch.Tensor,
    rows: torch.Tensor,
    columns: torch.Tensor,
    scales: tuple[float, float],
    draw: Draw,
    dtype: torch.dtype,
) -> torch.Tensor:
    """``total + sigma * Z`` in ``dtype`` for a float32 matrix product ``total`` in host
    memory (its last two dimensions; for a batch, the samples' first), ``Z`` standard normal
    as :func:`add_noise` draws it, ``sigma = sqrt(total**2 c + rows_i columns_j d)`` in float32
    for ``scales = (c, d)``, ``rows`` and ``columns`` the squared norms of the product's rows
    and columns, broadcast over its leading dimensions (the sequential model of
    :mod:`pytest_fpcheck.stochastic.accumulation`): one compiled pass
    (:mod:`pytest_fpcheck.stochastic.kernels`), where the tensor operations took eight."""

    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype: float32 or float64 expected, not {dtype}")
    if total.numel() == 0:
        return total.to(dtype)
    m, n = total.shape[-2], total.shape[-1]
    groups = total.numel() // (m * n)
    pool, starts, _ = draw.window("normal", total.numel() // draw.rows)
    out = torch.empty(total.shape, dtype=dtype)
    product_noise(
        total.reshape(groups, m, n).numpy(),
        rows.expand(total.shape[:-1]).reshape(groups, m).numpy(),
        columns.expand(*total.shape[:-2], n).reshape(groups, n).numpy(),
        scales,
        pool.numpy(),
        starts,
        out.numpy().reshape(groups, m, n),  # rounded afterwards into a tensor of its own
    )
    return out


def _written(out: torch.Tensor) -> np.ndarray:
    """A NumPy array over the memory of the new contiguous int16 tensor ``out`` (bfloat16's
    patterns, the rounding's result itself), for a compiled kernel to write into. Not
    ``out.numpy()``: that marks the storage as shared with NumPy for good, and a result the
    user then resizes (``y.resize_(n)``, as a plain run allows) raised "Trying to resize
    storage that is not resizable". ``out`` outlives the call."""
    pointer = ctypes.cast(out.data_ptr(), ctypes.POINTER(ctypes.c_int16))
    return np.ctypeslib.as_array(pointer, shape=tuple(out.shape))


def add_noise(y: torch.Tensor, sigma: torch.Tensor, draw: Draw) -> torch.Tensor:
    """``y + sigma * Z`` with ``Z`` standard normal per element (in ``y``'s dtype)."""
    return torch.addcmul(y, sigma.to(y.dtype), draw.take("normal", y).to(y.dtype))
