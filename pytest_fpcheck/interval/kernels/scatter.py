"""Kernels of the accumulating scatters (:mod:`pytest_fpcheck.tracking.torch.rules.scatter`):
an embedding's gradient rows added into the rows of their indices (:func:`row_sums`), and the
enclosure of sums of known term counts added in any order (:func:`accumulated_bounds`), each
one compiled pass.

The bound (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2): a
sum of m terms added in a format of unit roundoff u, in any order, errs by at most gamma_m(u)
times the sum of the terms' magnitudes, plus m smallest subnormals for underflow. Its ends are
the float64 sums of the terms' lower and upper ends, widened by that allowance and by
gamma_{m+1}(2**-53) times the magnitudes' sum (the float64 sums' own rounding, in any order),
stepped outward and rounded outward onto the format; every partial sum is at most the
magnitudes' sum grown by both factors, so where that may pass the format's largest finite
number an infinity (then NaN) is possible and the element is the whole line.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...formats import Format
from .. import fallbacks
from ..jit import jit
from ..rounding import next_down, next_up
from .base import format_args, outward

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["accumulated_bounds", "row_sums"]

_U64 = 2.0**-53


@jit(cache=True, error_model="numpy", fallback=fallbacks.row_sums)
def _row_sums(
    g_lo: np.ndarray,
    g_hi: np.ndarray,
    rows: np.ndarray,
    skip: int,
    lo: np.ndarray,
    hi: np.ndarray,
    total: np.ndarray,
    count: np.ndarray,
) -> None:  # pragma: no cover - compiled
    # g: (n, w) C-contiguous; rows: (n,) within lo's rows, checked by the caller; each sum
    # from the zeros it is given, row after row in order; a NaN end makes the magnitude NaN
    n, w = g_lo.shape
    for r in range(n):
        k = rows[r]
        if k == skip:
            continue
        count[k] += 1.0
        for j in range(w):
            a, b = g_lo[r, j], g_hi[r, j]
            lo[k, j] += a
            hi[k, j] += b
            total[k, j] += math.nan if (a != a) | (b != b) else max(abs(a), abs(b))


def row_sums(
    g_lo: Array, g_hi: Array, rows: NDArray[np.int64], skip: int, num_rows: int
) -> tuple[Array, Array, Array, Array]:
    """(sums of lower ends, sums of upper ends, sums of max(|lo|, |hi|), counts) of the rows of
    the (n, w) ``g_lo`` and ``g_hi`` added into the rows ``rows`` of (``num_rows``, w) zeros,
    rows whose index is ``skip`` left out (an embedding's ``padding_idx``); the counts as a
    (``num_rows``, 1) column. Each sum in float64, row after row in order (an order the
    allowance of :func:`accumulated_bounds` covers). An index outside [0, ``num_rows``) other
    than ``skip`` is refused: ``ValueError`` naming it."""
    n, w = g_lo.shape
    index = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    if index.size != n:
        raise ValueError(f"rows: {index.size} indices for {n} rows of terms; one index per row")
    counted = index[index != skip]
    if counted.size and (counted.min() < 0 or counted.max() >= num_rows):
        wrong = counted[(counted < 0) | (counted >= num_rows)][0]
        raise ValueError(f"rows: index {int(wrong)} is outside [0, {num_rows}) of the result")
    lo, hi, total = (np.zeros((num_rows, w)) for _ in range(3))
    count = np.zeros((num_rows, 1))
    first = np.ascontiguousarray(g_lo, dtype=np.float64)
    second = first if g_hi is g_lo else np.ascontiguousarray(g_hi, dtype=np.float64)
    _row_sums(first, second, index, int(skip), lo, hi, total, count)
    return lo, hi, total, count


@jit(cache=True, forceinline=True)
def _gamma(m: float, u: float) -> float:  # pragma: no cover - compiled
    """gamma_m(u) = m u / (1 - m u), rounded upward; inf where m u >= 1."""
    nu = m * u
    return next_up(nu / next_down(1.0 - nu)) if nu < 1.0 else math.inf


@functools.cache
def _accumulated(fast32: bool) -> Callable[..., None]:
    """The compiled kernel for this switch (compiled on first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.accumulated, fast32),
    )
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        total: np.ndarray,
        count: np.ndarray,
        width: int,
        c: tuple[float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        u, eta, big = c
        for row in range(lo.size // width):
            # the count's factors once per row of elements that share it
            m = count[row]
            relative, evaluation = _gamma(m, u), _gamma(m + 1.0, _U64)
            if m == 0.0:  # nothing added: the values given, exactly
                for n in range(row * width, (row + 1) * width):
                    i = np.uint64(n)
                    out_lo[i], out_hi[i] = outward(lo[i], hi[i], fa, fast32)
                continue
            for n in range(row * width, (row + 1) * width):
                i = np.uint64(n)
                t = total[i]
                spread = next_up(relative * t + evaluation * t + m * eta)
                overflow = next_up(t * (1.0 + relative) * (1.0 + evaluation)) > big
                low = -math.inf if overflow else next_down(lo[i] - spread)
                high = math.inf if overflow else next_up(hi[i] + spread)
                out_lo[i], out_hi[i] = outward(low, high, fa, fast32)

    return kernel


def accumulated_bounds(
    lo: Array, hi: Array, total: Array, count: Array, fmt: Format
) -> tuple[Array, Array]:
    """The enclosure of sums of ``count`` terms each (an array of ``lo``'s shape, or with one
    column: one count per row) added in ``fmt`` in any order, from the float64 sums of their
    lower ends ``lo``, upper ends ``hi`` and magnitudes ``total`` (module docstring); ends
    rounded outward onto ``fmt``. Where nothing is added (a count of 0) the result is the value
    the sum starts from, exactly: [``lo``, ``hi``] itself (a NaN end the infinity of its side).
    One pass."""
    shape = np.shape(lo)
    if np.shape(count) != shape and np.shape(count) != (*shape[:-1], 1):
        raise ValueError(
            f"count: shape {np.shape(count)}; {shape} or {(*shape[:-1], 1)} (one per row) "
            f"for sums of shape {shape}"
        )
    width = 1 if np.shape(count) == shape else (shape[-1] if shape else 1)

    def flat(v: Array) -> np.ndarray:
        return np.ascontiguousarray(v, dtype=np.float64).reshape(-1)

    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        _accumulated(fmt.name == "float32")(
            flat(lo),
            flat(hi),
            flat(total),
            flat(count),
            max(width, 1),
            (fmt.unit_roundoff, fmt.smallest_subnormal, fmt.max_finite),
            format_args(fmt),
            out_lo.reshape(-1),
            out_hi.reshape(-1),
        )
    return out_lo, out_hi
