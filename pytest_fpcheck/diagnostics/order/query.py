"""Masked all-one queries (FPRev section 4.1) and what they may be trusted for (section 8.1).

A query puts ``+M`` at leaf ``i``, ``-M`` at leaf ``j`` and a *unit* ``u`` (the "one") or ``0``
everywhere else. Inside the lowest common ancestor of ``i`` and ``j`` every unit is swamped by a
mask; the units outside it survive, and so ``impl`` returns ``c`` units. With ``W`` units in the
query (the masked leaves counted as units), ``W - c`` is the *weight* of that ancestor.

:class:`Encoding` holds, per format, the mask and unit (from
:func:`pytest_fpcheck.formats.mask_and_unit`, the base rule) and two counts:

* ``exact_count`` (``2**p`` of the input format): a sum of at most that many units is exact, in
  any order, also once the result is stored in the input format. A sum of more units computes to
  at least ``exact_count`` units (rounding is monotone and ``2**p`` is representable), so a
  returned count below it is exact and a count at or above it is not trusted (section 8.1.2).
* ``swamp_count``: a partial sum of at most that many units is swamped by the mask in the
  accumulator (``s < ulp(M)/4``: then ``M + s`` and ``-M + s`` round back to ``+-M``).

For dot products and matrix products of float8 inputs both operands are scaled (section 8.1.1):
the products are ``+-M**2`` and ``u**2``, which widens the swamping margin by the square.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidArgument
from ...formats import Format, format_of, mask_and_unit, numpy_dtype, ulp
from .errors import NondeterministicOrder, OrderRevealError
from .inputs import same_float, to_float

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Encoding", "Querier", "encoding_for"]


@dataclass(frozen=True)
class Encoding:
    """Masks, units and trust limits for revealing sums of ``fmt`` values (see module doc)."""

    fmt: Format
    accumulator: Format
    mask: float
    unit: float
    out_unit: float
    exact_count: int
    swamp_count: int

    @property
    def direct_limit(self) -> int:
        """The largest ``n`` whose queries are all exact with every other term a unit: the ``n - 2``
        units are both exact and swamped (the rule of ``mask_and_unit``)."""
        return min(self.exact_count, self.swamp_count) + 2

    @property
    def mitigated_limit(self) -> int:
        """The largest ``n`` FPRev's accumulator mitigation (section 8.1.2) can take: every partial
        sum of units, even an inexact one, must stay swamped. Half the swamping count leaves room
        for inexact partial sums that rounded up."""
        return max(self.direct_limit, self.swamp_count // 2)


def encoding_for(fmt: Format, *, accumulator: Any = None, products: bool = False) -> Encoding:
    """The :class:`Encoding` for sums of ``fmt`` values accumulated in ``accumulator`` (default:
    ``fmt``); ``products`` scales both operands of a product (FPRev section 8.1.1)."""
    acc = fmt if accumulator is None else format_of(accumulator, argument="accumulator")
    mask, unit = mask_and_unit(fmt, 2, accumulator=accumulator)
    big, small = (mask * mask, unit * unit) if products else (mask, unit)
    if big > acc.max_finite:
        raise InvalidArgument(
            "accumulator",
            accumulator,
            f"a format that holds the scaled products (+-{big!r}) of two {fmt.name} masks, "
            "e.g. 'float32'",
        )
    swamped = float(ulp(big, acc)) / 4
    return Encoding(
        fmt=fmt,
        accumulator=acc,
        mask=mask,
        unit=unit,
        out_unit=small,
        exact_count=2**fmt.precision,
        swamp_count=max(math.ceil(swamped / small) - 1, 0),
    )


class Querier:
    """Asks ``impl`` masked queries, checks every answer, and keeps a few to ask again.

    In the direct regime (``n <= direct_limit``) every leaf holds a unit and the query weight is
    ``n``. Beyond it (section 8.1.2) a frame over leaves ``L`` zeroes every leaf outside ``L``
    except one unit at the parent frame's pivot (which keeps a partial fused node detectable), so
    the weight is ``|L| + 1``; answers of ``exact_count`` units or more are untrusted and the caller
    resolves them in a smaller frame, or, when that cannot shrink the frame, asks again with the
    units spread over blocks that each count exactly (:meth:`pivot_counts_blocked`).
    """

    def __init__(self, impl: Callable[[Any], Any], n: int, encoding: Encoding) -> None:
        self.impl = impl
        self.n = n
        self.enc = encoding
        self.calls = 0
        self.mitigated = n > encoding.direct_limit
        dtype = numpy_dtype(encoding.fmt)
        self._x = np.full(n, encoding.unit, dtype=dtype)
        self._kept: list[tuple[NDArray[Any], float, int, int]] = []
        self._next_keep = 1

    def _keep(self, x: NDArray[Any], y: float, i: int, j: int) -> None:
        """Keep queries number 1, 2, 4, 8, ... to ask again at the end."""
        if self.calls >= self._next_keep:
            self._kept.append((x.copy(), y, i, j))
            self._next_keep *= 2

    def pivot_counts(
        self, leaves: NDArray[np.int64], pivot: int, outside: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        """Query ``(pivot, j)`` for every other ``j`` in ``leaves``; return those ``j``, the
        surviving unit counts, and the query weight ``W``."""
        others = leaves[leaves != pivot]
        if not self.mitigated:
            return others, self._ask_all(pivot, others, self.n), self.n
        units = leaves if outside < 0 else np.append(leaves, outside)
        return others, self._ask_all(pivot, others, len(units), units), len(units)

    def pivot_counts_blocked(
        self, leaves: NDArray[np.int64], pivot: int, outside: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        """As :meth:`pivot_counts`, every count exact: the units are spread over blocks of fewer
        than ``exact_count`` leaves, one query per block, and the per-block counts added."""
        others = leaves[leaves != pivot]
        units = np.append(leaves, outside) if outside >= 0 else leaves
        counts = np.zeros(len(others), dtype=np.int64)
        size = self.enc.exact_count - 1
        for start in range(0, len(units), size):
            block = units[start : start + size]
            counts += self._ask_all(pivot, others, len(block) + 2, block)
        return others, counts, len(units)

    def _ask_all(
        self,
        pivot: int,
        others: NDArray[np.int64],
        total: int,
        units: NDArray[np.int64] | None = None,
    ) -> NDArray[np.int64]:
        """One query per ``j`` in ``others``, the units at ``units`` (default: everywhere)."""
        x = self._x
        unit = self.enc.unit
        if units is not None:
            x[:] = 0
            x[units] = unit
        results = np.empty(len(others), dtype=np.float64)
        impl = self.impl
        x[pivot] = self.enc.mask
        negative = -self.enc.mask
        for k, j in enumerate(others.tolist()):
            before = x[j]
            x[j] = negative
            y = impl(x)
            if type(y) is not float:
                y = to_float(y)
            results[k] = y
            self.calls += 1
            if self.calls >= self._next_keep:
                self._keep(x, y, pivot, j)
            x[j] = before
        x[pivot] = unit
        if units is not None:
            x[:] = unit
        return self._counts(results, total, pivot, others)

    def all_pairs(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """BasicFPRev's queries (section 4.2): every pair ``i < j``; returns ``i``, ``j`` and the
        weight ``n - c`` of their lowest common ancestor."""
        first, second = np.triu_indices(self.n, k=1)
        weights = np.empty(len(first), dtype=np.int64)
        start = 0
        for i in range(self.n - 1):
            others = np.arange(i + 1, self.n, dtype=np.int64)
            weights[start : start + len(others)] = self.n - self._ask_all(i, others, self.n)
            start += len(others)
        return first.astype(np.int64), second.astype(np.int64), weights

    def absorbed(self, i: int, j: int, z: int) -> bool:
        """Is leaf ``z`` swamped when the masks sit at ``i`` and ``j``? (One unit at ``z``, zeros
        elsewhere; used to tell apart two trees that give the same counts.)"""
        x = np.zeros(self.n, dtype=self._x.dtype)
        x[i] = self.enc.mask
        x[j] = -self.enc.mask
        x[z] = self.enc.unit
        y = to_float(self.impl(x))
        self.calls += 1
        self._keep(x, y, i, j)
        return bool(self._counts(np.array([y]), 3, i, np.array([j]))[0] == 0)

    def _counts(
        self, results: NDArray[np.float64], total: int, pivot: int, others: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """Surviving units per answer; every answer must be a whole number of units between 0 and
        ``total - 2``."""
        with np.errstate(invalid="ignore", over="ignore"):
            counts = results / self.enc.out_unit
            good = np.isfinite(counts) & (counts == np.rint(counts)) & (counts >= 0)
            # an untrusted count (section 8.1.2) may have rounded above the true one
            good &= (counts <= total - 2) | (counts >= self.enc.exact_count)
        if not good.all():
            k = int(np.flatnonzero(~good)[0])
            raise OrderRevealError(
                self._bad_answer(float(results[k]), float(counts[k]), total, pivot, int(others[k]))
            )
        return counts.astype(np.int64)

    def _bad_answer(self, y: float, count: float, total: int, i: int, j: int) -> str:
        enc = self.enc
        head = (
            f"impl(x) returned {y!r} for the masked input with +M at x[{i}] and -M at x[{j}] "
            f"(M = {enc.mask!r}, the other terms {enc.unit!r} or 0, dtype {enc.fmt.name}); "
            f"expected a whole number of units of {enc.out_unit!r} between 0 and {total - 2}"
        )
        if not math.isfinite(count):
            why = "the masks overflowed: does impl scale or square its input?"
        elif count != round(count):
            why = (
                "this is not a plain sum of the terms (a mean or a scaled sum?), or a compensated "
                "or extra-precise summation kept the swamped terms; such orders cannot be revealed"
            )
        else:
            why = (
                "the masks did not cancel the terms they should swamp: the accumulator may be "
                "wider than the masks allow (pass accumulator=... to the adapter), or impl does "
                "not sum its whole input"
            )
        return f"{head}: {why}."

    def recheck(self) -> None:
        """Ask the kept queries again (FPRev section 3.2 requires one fixed order); raise
        :class:`NondeterministicOrder` when an answer changed."""
        for x, y, i, j in self._kept:
            again = to_float(self.impl(x.copy()))
            self.calls += 1
            if not same_float(again, y):
                raise NondeterministicOrder(
                    f"impl(x) returned {y!r} and then {again!r} for the same masked input (+M at "
                    f"x[{i}], -M at x[{j}]): its accumulation order is not fixed (threads, "
                    "atomics, or an order that depends on the data), and FPRev can only reveal a "
                    "fixed order (section 3.2)."
                )
