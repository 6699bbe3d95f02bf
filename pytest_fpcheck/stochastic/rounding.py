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

Random numbers come from pools (:class:`Pools`) generated once per seed and process, in chunks
from ``numpy.random.SeedSequence((seed, kind, chunk))``, and read at a random offset for each
operation (the offset comes from the sample's own generator). Reading a pool costs nothing,
where drawing a fresh number per element costs more than the operation it rounds; two
operations share a number only at positions their offsets pair at random, never element for
element.
"""

from __future__ import annotations

import math
import random
import threading
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from ..formats import Format

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "Pools",
    "SampleRandom",
    "add_noise",
    "in_range",
    "perturb_in_place_format",
    "round_stochastic",
]

_MIN_POOL = 1 << 20
_SAME_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_EMIN = {torch.float32: -126, torch.float64: -1022}
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


class Pools:
    """The random pools of one seed, shared by every sample run in this process."""

    _cache: ClassVar[dict[int, Pools]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.arrays: dict[str, torch.Tensor] = {}
        self.lock = threading.Lock()

    @classmethod
    def of(cls, seed: int) -> Pools:
        """The pools of ``seed`` (those of the last two seeds are kept)."""
        with cls._lock:
            pools = cls._cache.get(seed)
            if pools is None:
                pools = cls(seed)
                if len(cls._cache) >= 2:
                    cls._cache.pop(next(iter(cls._cache)))
                cls._cache[seed] = pools
            return pools

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


class SampleRandom:
    """What one sample draws: offsets into the pools, from its own generator."""

    def __init__(self, pools: Pools, seed: int, index: int) -> None:
        self.pools = pools
        self.offsets = random.Random(f"{seed}:{index}")

    def take(self, kind: str, like: torch.Tensor) -> torch.Tensor:
        """``like.numel()`` numbers of ``kind`` in ``like``'s shape (a view of a pool)."""
        n = like.numel()
        pool = self.pools.pool(kind, n)
        start = self.offsets.randrange(pool_size(n) - n + 1)  # the same whatever ran before
        return pool[start : start + n].view(like.shape)


def _power_of_two(exponent: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``2**exponent`` (an integer tensor within the normal range of ``dtype``), exactly: built
    from its bit pattern (``torch.ldexp`` goes through ``pow``, several times slower)."""
    if dtype == torch.float64:
        return ((exponent.to(torch.int64) + 1023) << 52).view(torch.float64)
    return ((exponent.to(torch.int32) + 127) << 23).view(torch.float32)


def _round_generic(x: torch.Tensor, fmt: Format, draw: SampleRandom) -> torch.Tensor:
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


#: (wide dtype, target dtype) -> (integer view, low bits dropped, pool): the target's grid is
#: the wide format's with those bits cleared, within the target's normal range
_TRUNCATIONS = {
    (torch.float32, torch.bfloat16): (torch.int32, 16, "bits16"),
    (torch.float32, torch.float16): (torch.int32, 13, "bits13"),
    (torch.float64, torch.float32): (torch.int64, 29, "bits29"),
}


def in_range(x: torch.Tensor, fmt: Format) -> bool:
    """Is every value of ``x`` finite and at most ``fmt``'s largest finite value in magnitude
    (one pass)? Then ``x`` holds no NaN to guard, and no rounding onto ``fmt`` overflows."""
    if x.numel() == 0:
        return True
    low, high = (float(v) for v in torch.aminmax(x))
    return math.isfinite(low) and math.isfinite(high) and max(-low, high) <= fmt.max_finite


def round_stochastic(
    x: torch.Tensor,
    dtype: torch.dtype,
    fmt: Format,
    draw: SampleRandom,
    *,
    finite: bool | None = None,
) -> torch.Tensor:
    """``x`` (float32 or float64, wider than ``fmt``) stochastically rounded onto ``fmt``'s grid,
    as a tensor of ``dtype``. Non-finite values are converted as they are. ``finite``: whether
    ``x`` is known to be finite (None: find out)."""
    truncation = _TRUNCATIONS.get((x.dtype, dtype))
    if truncation is None:
        return _round_generic(x, fmt, draw).to(dtype)
    integer, dropped, pool = truncation
    bits = x.view(integer) + draw.take(pool, x)
    rounded = torch.bitwise_and(bits, -(1 << dropped)).view(x.dtype)
    if finite is None:
        finite = math.isfinite(x.sum(dtype=torch.float64))
    if not finite:  # a NaN's payload may carry: keep NaNs
        rounded = torch.where(torch.isnan(x), x, rounded)
    rounded = rounded.to(dtype)
    if fmt.emin <= _EMIN[x.dtype]:
        return rounded  # bfloat16 from float32: the same exponent range, subnormals included
    tiny = torch.abs(x) < fmt.smallest_normal  # the target's subnormals: a coarser grid
    if bool(tiny.any()):
        rounded[tiny] = _round_generic(x[tiny], fmt, draw).to(dtype)
    return rounded


def perturb_in_place_format(y: torch.Tensor, draw: SampleRandom) -> torch.Tensor:
    """``y`` (computed in its own format) moved one step of its grid up or down with
    probability 1/12 each; zeros and non-finite values stay."""
    integer = _SAME_WIDTH[y.element_size()]
    moved = (y.view(integer) + draw.take("step", y)).to(integer).view(y.dtype)
    keep = (y == 0) | ~torch.isfinite(moved) | ~torch.isfinite(y)
    return torch.where(keep, y, moved)


def add_noise(y: torch.Tensor, sigma: torch.Tensor, draw: SampleRandom) -> torch.Tensor:
    """``y + sigma * Z`` with ``Z`` standard normal per element (in ``y``'s dtype)."""
    return torch.addcmul(y, sigma.to(y.dtype), draw.take("normal", y).to(y.dtype))
