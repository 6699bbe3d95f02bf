"""The accumulation order of element [0, 0] of a matmul: FPRev's masked queries (section 4.1, with
multiway nodes for fused multi-term sums, section 5.2) on a row and a column whose masks and units
are products of normal (or subnormal) factors, so that flushed subnormals and narrow input formats
do not spoil the queries (FPRev section 8.1); before them FTTN's block test (paper 004 section 5)
looks for chains of fused ``w``-term blocks, whose full order would cost about ``w**2`` calls a
block.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...formats import FORMATS, Format
from ..order.errors import NondeterministicOrder, OrderRevealError
from ..order.reveal import reveal_tree
from ..order.tree import SummationTree
from .calls import Caller
from .features import PROBE_SHAPE

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["reveal_element_order"]

# the largest number of terms whose order is revealed, by block width (0: no blocks found);
# FPRev needs about n * w / 2 calls for swamping w-term fused sums
_REVEAL_LIMITS = {3: 7, 4: 9, 5: 11, 6: 13, 7: 15, 8: 17}


def _mask_schemes(in_fmt: Format, out: Format) -> list[tuple[int, int, bool]]:
    """(log2 of the mask product, log2 of the unit product, unit uses subnormal factors) to try:
    the widest gap first (for a float32 accumulator), then masks inside the result's range."""
    wide = FORMATS["float32"]
    schemes = []
    for subnormal in (False, True):
        low_factor = in_fmt.emin - (in_fmt.precision - 1 if subnormal else 0)
        unit = max(2 * low_factor, out.emin, wide.emin)
        for top in (min(2 * in_fmt.emax, wide.emax - 8), min(2 * in_fmt.emax, out.emax - 2)):
            if top - unit >= 8 and (top, unit, subnormal) not in schemes:
                schemes.append((top, unit, subnormal))
    return schemes


def _split(exponent: int, in_fmt: Format, subnormal: bool) -> tuple[float, float]:
    low = in_fmt.emin - (in_fmt.precision - 1 if subnormal else 0)
    first = min(max(exponent - exponent // 2, low), in_fmt.emax)
    return math.ldexp(1.0, first), math.ldexp(1.0, exponent - first)


class _Masked:
    """FPRev's masked queries (section 4.1) on the first ``n`` terms of element [0, 0], the mask
    and unit products built from normal (or, if asked, subnormal) factors; returns unit counts."""

    def __init__(self, caller: Caller, scheme: tuple[int, int, bool], n: int) -> None:
        top, unit, subnormal = scheme
        self.caller = caller
        self.n = n
        self.big = _split(top, caller.in_fmt, subnormal=False)
        self.small = _split(unit, caller.in_fmt, subnormal)
        self.unit = math.ldexp(1.0, unit)

    def __call__(self, x: NDArray[Any]) -> float:
        k = PROBE_SHAPE[1]
        values = x.astype(np.float64)
        a, b = np.zeros(k), np.zeros(k)
        masks = np.abs(values) > 1.0
        a[: self.n] = np.where(masks, np.sign(values) * self.big[0], values * self.small[0])
        b[: self.n] = np.where(masks, self.big[1], np.where(values != 0, self.small[1], 0.0))
        return self.caller(a, b) / self.unit

    def count(self, i: int, j: int) -> float:
        """Surviving units with +M at leaf i, -M at leaf j and units on the other leaves."""
        x = np.ones(self.n)
        x[i], x[j] = 2.0, -2.0
        return self(x)


def _blocked_width(masked: _Masked) -> int | None:
    """FTTN's block test through masked queries: with the masks on terms 0 and j, the units in
    the fused sums that hold both masks vanish. In a chain of ``w``-term blocks (``w >= 3``) terms
    0, 1 and 2 share the first block, so the counts for j = 1 and 2 are both ``n - w``, and the
    second block's count for ``j = w`` is ``n - 2w``; returns ``w``, or None for any other
    pattern (IEEE additions, 2-term blocks, other orders)."""
    n = masked.n
    first, second = masked.count(0, 1), masked.count(0, 2)
    width = n - first
    if first != second or width != int(width) or not 3 <= width <= n:
        return None
    w = int(width)
    if 2 * w <= n and masked.count(0, w) != n - 2 * w:
        return None
    if w - 1 > 2 and masked.count(0, w - 1) != first:
        return None
    return w


def reveal_element_order(
    caller: Caller, in_fmt: Format, out: Format
) -> tuple[SummationTree | None, int | None, list[str]]:
    """(the order of element [0, 0] or None, the width of its fused blocks when read from the
    block test rather than from a full tree, notes)."""
    k = PROBE_SHAPE[1]
    notes: list[str] = []
    why = "no mask scheme fits these formats"
    for scheme in _mask_schemes(in_fmt, out):
        masked = _Masked(caller, scheme, k)
        try:
            if not float(masked.count(0, 1)).is_integer():
                why = "the masked queries do not return whole numbers of units"
                continue
            width = _blocked_width(masked)
            n = k if width is None else 2 * width + 1
            if width is not None and n > _REVEAL_LIMITS.get(width, 0):
                notes.append(
                    f"blocks of {width} terms found by the block test; revealing their order "
                    f"with FPRev would take about {width * width} calls, more than the budget: "
                    "the order is taken to be the chain of blocks, which the probes then check"
                )
                return None, width, notes
            tree = reveal_tree(_Masked(caller, scheme, n), n, dtype="float32")
        except (OrderRevealError, NondeterministicOrder) as error:
            why = str(error)
            continue
        children = [list(tree.children(v)) for v in range(n, tree.root + 1)]
        tree = SummationTree(n, children, dtype=in_fmt)
        if width is not None:
            if tree.fanout() != width + 1:
                notes.append(
                    f"the block test found {width}-term blocks but the revealed tree has fan-out "
                    f"{tree.fanout()}"
                )
                return tree, None, notes
            notes.append(f"order revealed over the first {n} terms (three blocks)")
        return tree, width, notes
    notes.append(f"accumulation order not revealed: {why}")
    return None, None, notes
