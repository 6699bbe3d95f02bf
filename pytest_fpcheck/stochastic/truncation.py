"""The stochastic rounding by truncation in one compiled pass, with its range check.

Rule (:func:`pytest_fpcheck.stochastic.rounding.round_stochastic`): where a target format's grid
is the wide format's with its ``k`` low bits cleared (bfloat16 and float16 from float32, float32
from float64, in the target's normal range), the stochastic rounding of ``x`` adds to its bit
pattern a random integer below ``2**k`` and clears the ``k`` low bits. The integer of row ``r``
(a sample), element ``i`` is ``(pool[start_r + i] + shift_r) mod 2**k``: the pool read at the
row's offset, shifted by its stratum (:class:`~pytest_fpcheck.stochastic.rounding.SampleRandom`).
The same pass reads what the rounding needs to know about ``x``: whether every value is finite
and at most the target's largest finite value in magnitude (``in_range``), and which rows hold a
value below the target's smallest normal magnitude, zero excepted (its coarser subnormal grid,
rounded apart). Every step is integer arithmetic on the bit patterns, so the compiled loop and
its NumPy twin give the same bits.

Done with tensor operations this took ten passes over the batch (the draw's view, its shift
and modulus, the addition, the mask, the range's minimum and maximum, the magnitude and two
comparisons for the subnormal rows): on 16 samples of 8,192 float64 values, 535 against 104
microseconds (docs/performance.md, "Stochastic arithmetic", "Cost").
"""

from __future__ import annotations

import numpy as np

from ..interval.jit import jit

__all__ = ["truncate"]


def truncate_twin(
    bits: np.ndarray,
    pool: np.ndarray,
    starts: np.ndarray,
    shifts: np.ndarray,
    constants: tuple[int, int, int, int, int],
    out: np.ndarray,
) -> tuple[bool, np.ndarray]:
    """:func:`_truncate` on whole rows: the same integers, the same flags."""
    low, mask, magnitude, largest, smallest = constants
    rows, n = bits.shape
    outside = False
    tiny = np.zeros(rows, dtype=np.bool_)
    for row in range(rows):
        start = int(starts[row])
        drawn = (pool[start : start + n].astype(np.int64) + shifts[row]) & low
        b = bits[row].astype(np.int64)
        out[row] = ((b + drawn) & mask).astype(out.dtype)
        size = b & magnitude
        outside |= bool(np.any(size > largest))
        tiny[row] = bool(np.any((size < smallest) & (size > 0)))
    return outside, tiny


@jit(cache=True, error_model="numpy", fallback=truncate_twin)
def _truncate(
    bits: np.ndarray,
    pool: np.ndarray,
    starts: np.ndarray,
    shifts: np.ndarray,
    constants: tuple[int, int, int, int, int],
    out: np.ndarray,
) -> tuple[bool, np.ndarray]:  # pragma: no cover
    """Row ``r`` of ``out``: ``(bits[r] + ((pool[starts[r]:] + shifts[r]) & low)) & mask``
    (wrapping as the integers of ``out``'s width do); whether some magnitude exceeds
    ``largest`` (an infinity or a NaN does: compared as bit patterns, magnitudes order as their
    values), and per row whether some magnitude is below ``smallest`` and not zero."""
    low, mask, magnitude, largest, smallest = constants
    rows, n = bits.shape
    outside = False
    tiny = np.zeros(rows, dtype=np.bool_)
    for row in range(rows):
        start = starts[row]
        shift = shifts[row]
        small = False
        for i in range(n):
            b = np.int64(bits[row, i])
            out[row, i] = (b + ((np.int64(pool[start + i]) + shift) & low)) & mask
            size = b & magnitude
            outside |= bool(size > largest)
            small |= bool((size < smallest) & (size > 0))
        tiny[row] = small
    return outside, tiny


def truncate(
    bits: np.ndarray,
    pool: np.ndarray,
    starts: np.ndarray,
    shifts: np.ndarray,
    dropped: int,
    largest: int,
    smallest: int,
) -> tuple[np.ndarray, bool, np.ndarray]:
    """The stochastic truncation of the bit patterns ``bits`` (rows x elements, int32 or int64,
    any strides) by ``dropped`` low bits, drawing row ``r``'s integers from ``pool`` at
    ``starts[r]`` shifted by ``shifts[r]``; with whether some magnitude exceeds the pattern
    ``largest`` (the target's largest finite value: not :func:`in_range`) and which rows hold
    a non-zero magnitude below the pattern ``smallest`` (the target's smallest normal value;
    0 where the target's range is the wide format's)."""
    if bits.ndim != 2 or bits.dtype not in (np.int32, np.int64) or pool.dtype != bits.dtype:
        raise ValueError(
            f"bits and pool of one integer width expected (rows x elements, int32 or int64), "
            f"not {bits.dtype} {bits.shape} and {pool.dtype}"
        )
    width = bits.dtype.itemsize * 8
    out = np.empty(bits.shape, dtype=bits.dtype)
    constants = ((1 << dropped) - 1, -(1 << dropped), (1 << (width - 1)) - 1, largest, smallest)
    outside, tiny = _truncate(bits, pool, starts, shifts, constants, out)
    return out, bool(outside), tiny
