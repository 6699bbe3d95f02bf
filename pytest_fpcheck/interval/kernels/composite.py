"""Kernel of the composite element-wise rules: GELU (erf form) as the hull of a unimodal
function's end values with ATen's evaluation allowance (:func:`gelu_erf_bounds`, the rule
``aten.gelu`` of :mod:`pytest_fpcheck.tracking.torch.rules.composite`).
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
from ..rounding import _select, steps_out
from .base import (
    empty_like_order,
    flat,
    flat_views,
    format_args,
    outward_step,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["gelu_erf_bounds"]


@jit(cache=True, inline="always")
def _gelu_element(
    a: float,
    b: float,
    e_a: float,
    e_b: float,
    point: bool,
    c: tuple[float, float, float, float],
) -> tuple[float, float, float]:  # pragma: no cover - compiled
    """(f(a), the hull's ends moved out by the allowance) of one element, before rounding."""
    x_min, f_min, u, floor = c
    f_a = 0.5 * a * (1.0 + e_a)
    if point:
        b, low, high = a, f_a, f_a
    else:
        f_b = 0.5 * b * (1.0 + e_b)
        low, high = min(f_a, f_b), max(f_a, f_b)
        holds_minimum = (a <= x_min + 1e-9) & (x_min - 1e-9 <= b)
        low = _select(holds_minimum, min(low, f_min), low)
        undefined = f_b != f_b
        low, high = _select(undefined, f_b, low), _select(undefined, f_b, high)
    x_mag = max(abs(a), abs(b))
    f_mag = max(abs(low), abs(high))
    spread = x_mag * u * (9.0 + 0.5 * x_mag) + floor + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
    return f_a, low - spread, high + spread


@jit(cache=True, inline="always")
def _gelu_erf_bounds_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    point: bool,
    erf_lo: np.ndarray,
    erf_hi: np.ndarray,
    c: tuple[float, float, float, float],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    # onto float64 (a run that rounds to nearest), the usual elements in one branch-free pass
    # that vectorises: f(a) and both moved ends finite and nonzero, where the general path
    # steps each end one unit of its pattern out and float64 keeps it; then the others
    missed = 0
    if fa[0]:
        for n in range(lo.size):
            i = np.uint64(n)  # unsigned: numba then skips its negative-index wraparound
            f_a, down_end, up_end = _gelu_element(lo[i], hi[i], erf_lo[i], erf_hi[i], point, c)
            out_lo[i], out_hi[i], ordinary = steps_out(down_end, up_end)
            missed += not ((abs(f_a) < math.inf) & ordinary)
        if not missed:
            return
    for n in range(lo.size):
        i = np.uint64(n)
        f_a, down_end, up_end = _gelu_element(lo[i], hi[i], erf_lo[i], erf_hi[i], point, c)
        if missed and (abs(f_a) < math.inf) & steps_out(down_end, up_end)[2]:
            continue  # written by the first pass
        if f_a != f_a or down_end != down_end or up_end != up_end:
            out_lo[i], out_hi[i] = -math.inf, math.inf
        else:
            out_lo[i], out_hi[i] = outward_step(down_end, up_end, fa, fast32)


@functools.cache
def _gelu_erf_bounds(point: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.gelu_erf, point, fast32),
    )
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        erf_lo: np.ndarray,
        erf_hi: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _gelu_erf_bounds_loop(lo, hi, point, erf_lo, erf_hi, c, fa, fast32, out_lo, out_hi)

    return kernel


def gelu_erf_bounds(
    lo: Array,
    hi: Array,
    point: bool,
    minimum: tuple[float, float],
    fmt: Format,
    compute: Format,
    erf: Callable[[Array], Array],
) -> tuple[Array, Array]:
    """The enclosure of ATen's erf GELU, x (1 + erf(x / sqrt 2)) / 2, over [lo, hi] (see
    ``rules.composite._gelu``): the hull of the end values (and of the minimum ``minimum`` =
    (abscissa, value) when [lo, hi] holds its abscissa), computed with ``erf`` (a float64 array
    function within a few ULPs, e.g. SLEEF's, vectorised), widened by ATen's evaluation error in
    ``compute``, ``|x| u (9 + |x| / 2) + 4 smallest normals``, and by 2**-48 (|f| + |x|) +
    2**-1000 for the float64 evaluation here, then rounded outward onto ``fmt``; the whole line
    where an end value is NaN."""
    flats, order, _ = flat_views(lo, hi)
    erf_lo = np.ascontiguousarray(erf(flats[0] * math.sqrt(0.5)), dtype=np.float64)
    erf_hi = erf_lo if point else np.ascontiguousarray(erf(flats[1] * math.sqrt(0.5)))
    out_lo, out_hi = empty_like_order(lo.shape, order), empty_like_order(lo.shape, order)
    constants = (minimum[0], minimum[1], compute.unit_roundoff, 4 * compute.smallest_normal)
    _gelu_erf_bounds(point, fmt.name == "float32")(
        flats[0],
        flats[1],
        erf_lo,
        erf_hi,
        constants,
        format_args(fmt),
        flat(out_lo),
        flat(out_hi),
    )
    return out_lo, out_hi
