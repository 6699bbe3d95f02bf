"""The corner values of each floating-point format: where numerical code breaks first.

The list holds, for a format F (IEEE 754-2019 section 3.4; RENDER section II-A for the terms):

* both zeros, +-1 and its neighbours 1 + eps and 1 - eps/2;
* the low end: the smallest subnormal and its double (powers of two), the largest subnormal, the
  smallest normal 2**emin and its successor;
* the high end: the largest power of two 2**emax, the largest finite number and its predecessor;
* ties of the casts to every format G of lower precision than F (the casts that mixed-precision
  code performs): 1 + u_G and 1 + 3 u_G (halfway cases that round down and up under
  round-to-nearest-even), the overflow tie max_G + ulp_G(max_G) / 2 and the underflow tie
  smallest_subnormal_G / 2; each is kept only where it lies on F's grid and is finite there;
* +-inf where F has infinities, and NaN.

Every finite magnitude appears with both signs. The list starts with the simplest values, so that
Hypothesis, which shrinks a sampled value toward the start of its list, shrinks toward 0.0.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ..formats import FORMATS, Format, is_on_grid, next_down, next_up, ulp

__all__ = ["corner_list"]


def _cast_ties(fmt: Format) -> list[float]:
    """The rounding ties of casting ``fmt`` values to each format of lower precision."""
    ties: list[float] = []
    for narrow in FORMATS.values():
        if narrow.precision >= fmt.precision:
            continue
        top = narrow.max_finite
        ties += [
            1.0 + narrow.unit_roundoff,
            1.0 + 3.0 * narrow.unit_roundoff,
            top + float(ulp(top, narrow)) / 2.0,
            narrow.smallest_subnormal / 2.0,
        ]
    return ties


@cache
def corner_list(fmt: Format) -> tuple[float, ...]:
    """The corner values of ``fmt`` (see the module docstring), each once, simplest first."""
    magnitudes = [
        1.0,
        float(next_up(1.0, fmt)),
        float(next_down(1.0, fmt)),
        fmt.smallest_subnormal,
        2.0 * fmt.smallest_subnormal,
        fmt.smallest_normal - fmt.smallest_subnormal,
        fmt.smallest_normal,
        float(next_up(fmt.smallest_normal, fmt)),
        math.ldexp(1.0, fmt.emax),
        float(next_down(fmt.max_finite, fmt)),
        fmt.max_finite,
        *_cast_ties(fmt),
    ]
    candidates = [0.0, -0.0]
    for magnitude in magnitudes:
        candidates += [magnitude, -magnitude]
    finite = np.array(candidates)
    keep = is_on_grid(finite, fmt) & (np.abs(finite) <= fmt.max_finite)
    corners: list[float] = []
    seen: set[tuple[float, bool]] = set()
    for value, kept in zip(candidates, keep.tolist(), strict=True):
        key = (value, math.copysign(1.0, value) < 0)
        if kept and key not in seen:
            seen.add(key)
            corners.append(value)
    if fmt.has_inf:
        corners += [math.inf, -math.inf]
    corners.append(math.nan)
    return tuple(corners)
