"""The compiled core of the emulators: one summation tree evaluated per row of products.

Every inner node adds its children as a fused multi-term adder (FPRev section 5.2.1; FTTN, the
paper's reference [24]): the children are aligned to the largest exponent among them and each is
truncated toward zero to ``p - 1 + extra`` bits below that exponent's leading bit, the truncated
terms are added exactly (a fixed-point sum), and the sum is rounded once to the accumulator format
in the node's rounding mode. With ``extra < 0`` nothing is truncated: the exact sum is rounded once
(an IEEE addition for two children, an IEEE fused multiply-add when one child is a product).

All values are float64: the products of two inputs of at most 24 significant bits are exact, a
truncated term is an integer multiple of the quantum ``2**qe`` below ``2**(p + extra + 1)``, and the
sum of at most 2**10 of them stays below 2**53, so the fixed-point sum is exact. The exact sums of
``extra < 0`` use Shewchuk's non-overlapping expansions (the algorithm of ``math.fsum``) and the
sign of the remainder.

Rounding modes are coded as in :data:`pytest_fpcheck.formats.MODE_CODES` (0 nearest-even, 1
toward zero, 2 down, 3 up). This module imports Numba (a core dependency; compiled once per
process and cached on disk); the emulators import it on their first call, never at import time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..interval.jit import jit
from ..interval.rounding import round_scalar

__all__ = ["evaluate"]


@jit(cache=True, forceinline=True)
def _round_one(x: float, p: int, emin: int, big: float, mode: int) -> float:  # pragma: no cover
    """``x`` rounded to the format (precision p, emin, largest finite big) in ``mode``: the
    package's one rounder (:func:`pytest_fpcheck.interval.rounding.round_scalar`); NaN, an
    infinity and a zero stay as they are."""
    if x != x or x == 0.0 or math.isinf(x):
        return x
    return round_scalar(x, p, emin, big, mode)


@jit(cache=True)
def _exact_sum(terms: Any, count: int, partials: Any) -> tuple[float, float]:  # pragma: no cover
    """(hi, sign of the remainder): hi is the float64 nearest the exact sum of ``terms[:count]``,
    the second value is -1, 0 or 1 as the exact sum is below, at or above hi."""
    n = 0
    for k in range(count):
        x = terms[k]
        i = 0
        for j in range(n):
            y = partials[j]
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                partials[i] = lo
                i += 1
            x = hi
        partials[i] = x
        n = i + 1
    if n == 0:
        return 0.0, 0.0
    # correctly rounded top (the final step of math.fsum)
    hi = partials[n - 1]
    lo = 0.0
    j = n - 1
    while j > 0:
        x = hi
        y = partials[j - 1]
        hi = x + y
        lo = y - (hi - x)
        j -= 1
        if lo != 0.0:
            break
    if j > 0 and ((lo < 0.0 and partials[j - 1] < 0.0) or (lo > 0.0 and partials[j - 1] > 0.0)):
        y = lo * 2.0
        x = hi + y
        if y == x - hi:
            hi = x
    # sign of (exact sum - hi): add -hi to the expansion; its top partial carries the sign
    x = -hi
    i = 0
    for k in range(n):
        y = partials[k]
        if abs(x) < abs(y):
            x, y = y, x
        s = x + y
        r = y - (s - x)
        if r != 0.0:
            partials[i] = r
            i += 1
        x = s
    top = x
    if top == 0.0:
        for k in range(i - 1, -1, -1):
            if partials[k] != 0.0:
                top = partials[k]
                break
    return hi, (1.0 if top > 0.0 else (-1.0 if top < 0.0 else 0.0))


@jit(cache=True)
def _round_exact(
    hi: float, sign: float, p: int, emin: int, big: float, mode: int
) -> float:  # pragma: no cover
    """The exact value hi + r (r of the given sign, |r| <= ulp64(hi) / 2) rounded to the format."""
    r = _round_one(hi, p, emin, big, mode)
    if sign == 0.0 or math.isinf(hi):
        return r
    lower = _round_one(hi, p, emin, big, 2)
    upper = _round_one(hi, p, emin, big, 3)
    if lower == upper:  # hi is on the grid: the remainder decides for the directed modes
        below = _round_one(np.nextafter(hi, -math.inf), p, emin, big, 2)
        above = _round_one(np.nextafter(hi, math.inf), p, emin, big, 3)
        if mode == 2 or (mode == 1 and hi > 0.0):
            return below if sign < 0.0 else hi
        if mode == 3 or (mode == 1 and hi < 0.0):
            return above if sign > 0.0 else hi
        return hi
    if mode == 0 and hi - lower == upper - hi:  # a midpoint: the remainder breaks the tie
        return upper if sign > 0.0 else lower
    return r


@jit(cache=True, forceinline=True)
def _flush(y: float, emin: int, flush: bool) -> float:  # pragma: no cover
    if flush and y != 0.0 and abs(y) < math.ldexp(1.0, emin):
        return math.copysign(0.0, y)
    return y


@jit(cache=True)
def evaluate(
    products: Any,
    starts: Any,
    kids: Any,
    acc: Any,
    extra: int,
    mode: int,
    flush: bool,
    products_mode: int,
    out: Any,
    convert: bool,
    conv_mode: int,
) -> Any:  # pragma: no cover - compiled
    """One tree sum per row of ``products``. ``acc`` and ``out`` are (p, emin, max finite) of the
    accumulator and the result format; ``starts``/``kids`` list the children of each inner node
    (post-order, numbered from the number of leaves). ``products_mode``: 0 exact products, 1 each
    rounded to the accumulator, 2 exact except the first child of a node of leaves only (a chain
    that a multiply starts and fused multiply-adds continue)."""
    rows, leaves = products.shape
    inner = starts.size - 1
    p = int(acc[0])
    emin = int(acc[1])
    big = acc[2]
    result = np.empty(rows)
    values = np.empty(leaves + inner)
    terms = np.empty(leaves + 1)
    partials = np.empty(leaves + 2)
    for row in range(rows):
        for leaf in range(leaves):
            v = products[row, leaf]
            if products_mode == 1:
                v = _flush(_round_one(v, p, emin, big, 0), emin, flush)
            values[leaf] = v
        for node in range(inner):
            count = 0
            finite = True
            top = -100000
            first = starts[node]
            leaves_only = products_mode == 2
            for k in range(first, starts[node + 1]):
                leaves_only = leaves_only and kids[k] < leaves
            for k in range(first, starts[node + 1]):
                t = values[kids[k]]
                if leaves_only and k == first:  # a multiply starts this chain: rounded
                    t = _flush(_round_one(t, p, emin, big, 0), emin, flush)
                terms[count] = t
                count += 1
                if math.isinf(t) or t != t:
                    finite = False
                elif t != 0.0:
                    _, e = math.frexp(abs(t))
                    top = max(top, e - 1)
            if not finite or top == -100000:
                y = 0.0
                for k in range(count):
                    y += terms[k]
                if finite and mode == 2 and count > 0:  # all zeros: -0 when any is -0
                    for k in range(count):
                        if math.copysign(1.0, terms[k]) < 0:
                            y = -0.0
            elif extra < 0:
                hi, sign = _exact_sum(terms, count, partials)
                y = _round_exact(hi, sign, p, emin, big, mode)
                if y == 0.0:
                    y = -0.0 if mode == 2 else 0.0
            else:
                qe = top - (p - 1) - extra
                total = 0.0
                for k in range(count):
                    total += math.trunc(math.ldexp(terms[k], -qe))
                if total == 0.0:
                    y = -0.0 if mode == 2 else 0.0
                else:
                    y = _round_one(math.ldexp(total, qe), p, emin, big, mode)
            values[leaves + node] = _flush(y, emin, flush)
        y = values[leaves + inner - 1] if inner > 0 else values[0]
        if convert:
            y = _flush(
                _round_one(y, int(out[0]), int(out[1]), out[2], conv_mode), int(out[1]), flush
            )
        result[row] = y
    return result
