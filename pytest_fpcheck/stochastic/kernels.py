"""The compiled passes of stochastic arithmetic over host memory, each with its NumPy twin.

**Stochastic rounding by truncation** (:func:`truncate`). Rule
(:func:`pytest_fpcheck.stochastic.rounding.round_stochastic`): where a target format's grid is
the wide format's with its ``k`` low bits cleared (bfloat16 and float16 from float32, float32
from float64, in the target's normal range), the stochastic rounding of ``x`` adds to its bit
pattern a random integer below ``2**k`` and clears the ``k`` low bits. The integer of row ``r``
(a sample), element ``i`` is ``(pool[start_r + i] + shift_r) mod 2**k``: the pool read at the
row's offset, shifted by its stratum (:class:`~pytest_fpcheck.stochastic.rounding.SampleRandom`).
The same pass reads what the rounding needs to know about ``x``: whether every value is finite
and at most the target's largest finite value in magnitude (``in_range``), and which rows hold a
value below the target's smallest normal magnitude, zero excepted (its coarser subnormal grid,
rounded apart). Every step is integer arithmetic on the bit patterns, so the compiled loop and
its twin give the same bits, and the same bits as the tensor operations that do it on other
devices. Done with tensor operations this took ten passes over the batch (the draw's view, its
shift and modulus, the addition, the mask, the range's minimum and maximum, the magnitude and
two comparisons for the subnormal rows): on 16 samples of 8,192 float64 values, 535 against 104
microseconds.

**A matrix product's accumulation term** (:func:`product_noise`): ``t + sigma z`` for each
element ``t`` of a float32 product, ``sigma`` the sequential model's standard deviation from the
squared norms of the element's row of ``a`` and column of ``b``
(:mod:`pytest_fpcheck.stochastic.accumulation`) and ``z`` the sample's standard normal number.
The tensor operations took eight passes (the variance's square, scaling, outer product and
square root, the draw's gather and widening, the widening of ``sigma``, the sum). The float32
and float64 operations are spelled out in one order, which the twin follows; the tensor
operations of other devices (an ``addcmul``) may round the last bit differently.

docs/performance.md ("Stochastic arithmetic", "Cost") has the figures.
"""

from __future__ import annotations

import numpy as np

from ..interval.jit import jit

__all__ = ["product_noise", "truncate"]


def truncate_twin(
    bits: np.ndarray,
    pool: np.ndarray,
    starts: np.ndarray,
    shifts: np.ndarray,
    constants: tuple[int, int, int, int, int, int],
    out: np.ndarray,
) -> tuple[bool, np.ndarray]:
    """:func:`_truncate` on whole rows: the same integers, the same flags."""
    low, mask, magnitude, largest, smallest, half = constants
    rows, n = bits.shape
    outside = False
    tiny = np.zeros(rows, dtype=np.bool_)
    for row in range(rows):
        start = int(starts[row])
        if start < 0 or start > pool.shape[0] - n:
            raise ValueError(_OUTSIDE_THE_POOL)
        drawn = (pool[start : start + n].astype(np.int64) + shifts[row]) & low
        b = bits[row].astype(np.int64)
        out[row] = (((b + drawn) & mask) >> half).astype(out.dtype)
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
    constants: tuple[int, int, int, int, int, int],
    out: np.ndarray,
) -> tuple[bool, np.ndarray]:  # pragma: no cover
    """Row ``r`` of ``out``: ``((bits[r] + ((pool[starts[r]:] + shifts[r]) & low)) & mask) >>
    half`` (wrapping as the integers of ``out``'s width do); whether some magnitude exceeds
    ``largest`` (an infinity or a NaN does: compared as bit patterns, magnitudes order as their
    values), and per row whether some magnitude is below ``smallest`` and not zero."""
    low, mask, magnitude, largest, smallest, half = constants
    rows, n = bits.shape
    outside = False
    tiny = np.zeros(rows, dtype=np.bool_)
    for row in range(rows):
        shift, start = shifts[row], starts[row]
        if start < 0 or start > pool.shape[0] - n:  # the loop below reads without a check
            raise ValueError(_OUTSIDE_THE_POOL)
        source, target, drawn = bits[row], out[row], pool[start:]
        # the flags as a maximum and a minimum (reductions that vectorise)
        widest, narrowest = np.int64(0), np.int64(magnitude)
        for i in range(n):
            b = np.int64(source[i])
            target[i] = ((b + ((np.int64(drawn[i]) + shift) & low)) & mask) >> half
            size = b & magnitude
            widest = max(widest, size)
            narrowest = min(narrowest, size if size > 0 else np.int64(magnitude))
        outside = outside or bool(widest > largest)
        tiny[row] = narrowest < smallest
    return outside, tiny


#: what the compiled loops raise for a window outside the pool (they check each row's before
#: reading it without bounds checks); :func:`_windowed` says which
_OUTSIDE_THE_POOL = "a window leaves the pool"


def _check_window(pool: np.ndarray, starts: np.ndarray, rows: int) -> None:
    """``rows`` starts (int64) into the 1-D ``pool``; whether each window lies inside it, the
    loops check as they go."""
    if pool.ndim != 1 or starts.ndim != 1 or starts.dtype != np.int64 or len(starts) != rows:
        raise ValueError(
            f"starts of {rows} int64 offsets into a 1-D pool expected, not {starts.dtype} "
            f"{starts.shape} into {pool.shape}"
        )


def _windowed(error: ValueError, pool: np.ndarray, starts: np.ndarray, length: int) -> Exception:
    """The loops' error with the windows named (or ``error`` itself, if it is another)."""
    if str(error) != _OUTSIDE_THE_POOL:
        return error
    return ValueError(
        f"starts {starts.tolist()} reading {length} numbers each leave the pool of {pool.size}"
    )


def truncate(
    bits: np.ndarray,
    pool: np.ndarray,
    starts: np.ndarray,
    shifts: np.ndarray,
    dropped: int,
    largest: int,
    smallest: int,
    out: np.ndarray,
) -> tuple[bool, np.ndarray]:
    """The stochastic truncation of the bit patterns ``bits`` (rows x elements, int32 or int64,
    any strides) by ``dropped`` low bits, drawing row ``r``'s integers from ``pool`` at
    ``starts[r]`` shifted by ``shifts[r]``, written into ``out`` (of ``bits``' shape and
    dtype, or int16 for the high 16 bits of each truncated 32-bit pattern: bfloat16's pattern
    of a float32 whose 16 low bits are cleared); returns whether some magnitude exceeds the
    pattern ``largest`` (the target's largest finite value: not :func:`in_range`) and which
    rows hold a non-zero magnitude below the pattern ``smallest`` (the target's smallest
    normal value; 0 where the target's range is the wide format's)."""
    if bits.ndim != 2 or bits.dtype not in (np.int32, np.int64) or pool.dtype != bits.dtype:
        raise ValueError(
            f"bits and pool of one integer width expected (rows x elements, int32 or int64), "
            f"not {bits.dtype} {bits.shape} and {pool.dtype}"
        )
    rows, n = bits.shape
    _check_window(pool, starts, rows)
    if shifts.shape != (rows,) or shifts.dtype != np.int64:
        raise ValueError(f"{rows} int64 shifts expected, not {shifts.dtype} {shifts.shape}")
    high = out.dtype == np.int16
    if out.shape != bits.shape or (out.dtype != bits.dtype and not high):
        raise ValueError(
            f"out of {bits.dtype} or int16 and shape {bits.shape} expected, not {out.dtype} "
            f"{out.shape}"
        )
    if high and (bits.dtype != np.int32 or dropped < 16):
        raise ValueError(f"high halves of 32-bit patterns cleared of 16 bits, not {bits.dtype}")
    width = bits.dtype.itemsize * 8
    magnitude = (1 << (width - 1)) - 1
    half = 16 if high else 0
    constants = ((1 << dropped) - 1, -(1 << dropped), magnitude, largest, smallest, half)
    try:
        outside, tiny = _truncate(bits, pool, starts, shifts, constants, out)
    except ValueError as error:
        raise _windowed(error, pool, starts, n) from None
    return bool(outside), tiny


def product_noise_twin(
    total: np.ndarray,
    rows: np.ndarray,
    columns: np.ndarray,
    scales: tuple[float, float],
    pool: np.ndarray,
    starts: np.ndarray,
    per: int,
    wide: bool,
    out: np.ndarray,
) -> None:
    """:func:`_product_noise` a group at a time: the same float32 and float64 operations."""
    groups, m, n = total.shape
    square, cross = np.float32(scales[0]), np.float32(scales[1])
    for group in range(groups):
        first, offset = starts[group // per], (group % per) * m * n
        if first < 0 or first > pool.shape[0] - offset - m * n:
            raise ValueError(_OUTSIDE_THE_POOL)
        start = first + offset
        z = pool[start : start + m * n].reshape(m, n)
        t = total[group]
        with np.errstate(all="ignore"):  # as compiled code: infinities and NaNs, no warning
            terms = (cross * rows[group])[:, None] * columns[group][None, :]
            sigma = np.sqrt(t * t * square + terms)
            if wide:
                out[group] = t.astype(np.float64) + sigma.astype(np.float64) * z.astype(np.float64)
            else:
                out[group] = t + sigma * z


@jit(cache=True, error_model="numpy", fallback=product_noise_twin)
def _product_noise(
    total: np.ndarray,
    rows: np.ndarray,
    columns: np.ndarray,
    scales: tuple[float, float],
    pool: np.ndarray,
    starts: np.ndarray,
    per: int,
    wide: bool,
    out: np.ndarray,
) -> None:  # pragma: no cover
    """``out[g, i, j] = t + sqrt(t * t * c + (d * rows[g, i]) * columns[g, j]) * z`` for
    ``t = total[g, i, j]`` and ``(c, d) = scales``, the square root's argument in float32, the
    rest in float64 when ``wide`` (exact widenings, then one rounded product and sum) and in
    float32 otherwise; ``z`` read from ``pool`` at the start of sample ``g // per`` and group
    ``g``'s place in it."""
    groups, m, n = total.shape
    square, cross = np.float32(scales[0]), np.float32(scales[1])
    sigma = np.empty(n, dtype=np.float32)
    for group in range(groups):
        first, offset = starts[group // per], (group % per) * m * n
        if first < 0 or first > pool.shape[0] - offset - m * n:  # no sum that could wrap
            raise ValueError(_OUTSIDE_THE_POOL)
        start = first + offset
        for i in range(m):
            row = cross * rows[group, i]
            t, column, z, target = (
                total[group, i],
                columns[group],
                pool[start + i * n :],
                out[group, i],
            )
            for j in range(n):
                sigma[j] = np.sqrt(t[j] * t[j] * square + row * column[j])
            # one loop per width, no branch inside: each vectorises
            if wide:
                for j in range(n):
                    target[j] = np.float64(t[j]) + np.float64(sigma[j]) * np.float64(z[j])
            else:
                for j in range(n):
                    target[j] = t[j] + sigma[j] * z[j]


def product_noise(
    total: np.ndarray,
    rows: np.ndarray,
    columns: np.ndarray,
    scales: tuple[float, float],
    pool: np.ndarray,
    starts: np.ndarray,
    out: np.ndarray,
) -> None:
    """A float32 matrix product's values ``total`` (groups x rows x columns; the samples'
    groups one after the other, ``len(starts)`` samples) plus their Gaussian term, written
    into ``out`` (float64 or float32, ``total``'s shape; see :func:`_product_noise`)."""
    arrays = {"total": total, "rows": rows, "columns": columns, "pool": pool}
    for name, array in arrays.items():
        if array.dtype != np.float32:
            raise ValueError(f"{name} of float32 expected, not {array.dtype}")
    if total.ndim != 3 or rows.shape != total.shape[:2] or columns.shape != total.shape[::2]:
        raise ValueError(
            f"total (groups, m, n), rows (groups, m) and columns (groups, n) expected, not "
            f"{total.shape}, {rows.shape} and {columns.shape}"
        )
    if out.shape != total.shape or out.dtype not in (np.float32, np.float64):
        raise ValueError(
            f"out of float32 or float64 and shape {total.shape} expected, not {out.dtype} "
            f"{out.shape}"
        )
    groups, m, n = total.shape
    if len(starts) == 0 or groups % len(starts):
        raise ValueError(f"{groups} groups do not divide among {len(starts)} samples")
    per = groups // len(starts)
    _check_window(pool, starts, len(starts))
    # contiguous operands (the norms broadcast over groups are small): a strided row of
    # norms keeps the inner loop from vectorising, eight times slower on 64 x 64 products
    total, rows, columns = (np.ascontiguousarray(a) for a in (total, rows, columns))
    wide = out.dtype == np.float64
    try:
        _product_noise(total, rows, columns, scales, pool, starts, per, wide, out)
    except ValueError as error:
        raise _windowed(error, pool, starts, per * m * n) from None
