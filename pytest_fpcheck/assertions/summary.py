"""One pass over a verdict's arrays: everything :func:`~.verdict.classify` counts, finds and
summarises element by element, in one compiled loop (issue 20's cost: a module comparison gives
one verdict per module call, and the sixty NumPy passes a verdict took over a module's small
arrays cost more than the module's own tracked run).

The rules are those the verdict states (:mod:`.verdict`, :mod:`.resolution`); per element ``i``
of ``actual`` ``a``, ``expected`` ``e``, the enclosure ``[lo, hi]`` of ``a`` and, two-sided,
the enclosure ``[elo, ehi]`` of ``e``:

* *allclose*: ``|a - e| <= atol + rtol |e|``, or ``a == e``, or both NaN with ``equal_nan``;
  the greatest absolute and relative differences (NaN left out) and their first positions;
* *self-checks*: ``a`` in ``[lo, hi]`` and, two-sided, ``e`` in ``[elo, ehi]``, by
  :func:`~pytest_fpcheck.interval.bounds.contains` (NaN inside only an unbounded enclosure);
* *inside*: one-sided, ``e`` in the judging range ``[jlo, jhi]`` (the enclosure itself, or its
  outward rounding onto ``expected``'s coarser format), a pair of NaNs outside unless
  ``equal_nan``; two-sided, ``max(lo, elo) <= min(hi, ehi)`` (a NaN end meets nothing), or both
  NaN with ``equal_nan``. The first five positions outside, how many of them differ in where
  NaN and infinities are, and the one farthest outside (its gap, NaN counted infinite);
* *resolution*: for a finite ``a``, the relative reach ``reach / |a|``;
* *tightness*: the radius ``(hi - lo) / 2`` in ULPs of ``a``'s format, where both are finite.

A verdict's two medians (of the relative reaches and of the radii in ULPs) are taken by
:func:`median_of`, compiled too (NumPy's partition costs four times the compiled selection on
a module call's arrays, and a module comparison takes two medians per call).

The compiled loop and its NumPy twin (:func:`_twin`, run until the loop is compiled:
:mod:`pytest_fpcheck.interval.jit`) give the same numbers bit for bit
(``tests/assertions/test_summary.py``); NumPy's ``maximum`` and ``minimum`` propagate NaN, so
the loop spells that out where the rules use them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..formats import Format
from ..interval.bounds import Bounds, contains
from ..interval.jit import jit
from .threshold import FACTOR_TWO

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["Summary", "median_of", "summarise"]

#: how many positions outside a verdict lists
OFFENDERS = 5

# the slots of the counts and values arrays the loop fills
(
    _SELF_OUTSIDE,
    _FIRST_SELF_OUTSIDE,
    _EXPECTED_SELF_OUTSIDE,
    _FIRST_EXPECTED_SELF_OUTSIDE,
    _UNEQUAL,
    _OUTSIDE,
    _NONFINITE,
    _WORST,
    _JUDGED,
    _FACTOR2,
    _UNBOUNDED,
    _TIGHT,
    _MISMATCHED,
    _WORST_ABSOLUTE,
    _WORST_RELATIVE,
    _RAW_OUTSIDE,
) = range(16)
_COUNTS = 16
_GREATEST_ABSOLUTE, _GREATEST_RELATIVE, _GAP, _RADIUS = range(4)
_VALUES = 4


class Summary(NamedTuple):
    """What one pass found (module docstring). Positions are flat indices (-1: none);
    ``relative`` and ``ratio`` hold the judged elements' relative reaches and the finite radii
    in ULPs, in element order, for their medians."""

    self_outside: int
    first_self_outside: int
    expected_self_outside: int
    first_expected_self_outside: int
    all_equal: bool
    outside: int
    raw_outside: int
    nonfinite: int
    offenders: tuple[int, ...]
    worst: int
    gap: float
    radius: float
    relative: Array
    factor2: int
    unbounded: int
    ratio: Array
    mismatched: int
    greatest_absolute: float
    greatest_absolute_index: int
    greatest_relative: float
    greatest_relative_index: int


def summarise(
    a: Array,
    e: Array,
    bounds: Bounds | None,
    judge: tuple[Array, Array] | None,
    expected_bounds: Bounds | None,
    *,
    equal_nan: bool,
    rtol: float,
    atol: float,
    fmt: Format,
) -> Summary:
    """One pass over the flattened arrays: ``judge`` is the one-sided judging range of ``e``
    (None: the enclosure itself), ``expected_bounds`` makes the verdict two-sided; without
    ``bounds`` an element is outside where allclose fails (the enclosure is the whole line)."""
    n = a.size
    if bounds is None:
        lo, hi = np.full(n, -math.inf), np.full(n, math.inf)
    else:
        lo, hi = bounds.lo, bounds.hi
    judge_lo, judge_hi = judge if judge is not None else (lo, hi)
    other_lo, other_hi = (
        (expected_bounds.lo, expected_bounds.hi) if expected_bounds is not None else (lo, hi)
    )
    a_, e_, lo_, hi_, judge_lo, judge_hi, other_lo, other_hi = map(
        _flat, (a, e, lo, hi, judge_lo, judge_hi, other_lo, other_hi)
    )
    relative = np.empty(n)
    ratio = np.empty(n)
    offenders = np.empty(OFFENDERS, dtype=np.int64)
    offenders.fill(-1)
    counts = np.zeros(_COUNTS, dtype=np.int64)
    values = np.zeros(_VALUES)
    _pass(
        a_,
        e_,
        lo_,
        hi_,
        judge_lo,
        judge_hi,
        other_lo,
        other_hi,
        expected_bounds is not None,
        bounds is None,
        bool(equal_nan),
        float(rtol),
        float(atol),
        int(fmt.precision),
        int(fmt.emin),
        relative,
        ratio,
        offenders,
        counts,
        values,
    )
    c, v = counts.tolist(), values.tolist()  # Python numbers, read field by field
    return Summary(
        self_outside=c[_SELF_OUTSIDE],
        first_self_outside=c[_FIRST_SELF_OUTSIDE],
        expected_self_outside=c[_EXPECTED_SELF_OUTSIDE],
        first_expected_self_outside=c[_FIRST_EXPECTED_SELF_OUTSIDE],
        all_equal=c[_UNEQUAL] == 0,
        outside=c[_OUTSIDE],
        raw_outside=c[_RAW_OUTSIDE],
        nonfinite=c[_NONFINITE],
        offenders=tuple(i for i in offenders.tolist() if i >= 0),
        worst=c[_WORST],
        gap=v[_GAP],
        radius=v[_RADIUS],
        relative=relative[: c[_JUDGED]],
        factor2=c[_FACTOR2],
        unbounded=c[_UNBOUNDED],
        ratio=ratio[: c[_TIGHT]],
        mismatched=c[_MISMATCHED],
        greatest_absolute=v[_GREATEST_ABSOLUTE],
        greatest_absolute_index=c[_WORST_ABSOLUTE],
        greatest_relative=v[_GREATEST_RELATIVE],
        greatest_relative_index=c[_WORST_RELATIVE],
    )


def _flat(x: Array) -> Array:
    """``x`` as a flat, contiguous float64 array (a view where its memory already is one)."""
    if type(x) is np.ndarray and x.dtype == np.float64 and x.flags.c_contiguous:
        return x.reshape(-1)
    return np.ascontiguousarray(x, dtype=np.float64).reshape(-1)


def _twin(
    a: Array,
    e: Array,
    lo: Array,
    hi: Array,
    jlo: Array,
    jhi: Array,
    elo: Array,
    ehi: Array,
    two_sided: bool,
    by_tolerance: bool,
    equal_nan: bool,
    rtol: float,
    atol: float,
    precision: int,
    emin: int,
    relative: Array,
    ratio: Array,
    offenders: NDArray[np.int64],
    counts: NDArray[np.int64],
    values: Array,
) -> None:
    """:func:`_pass` on whole arrays (the same float64 operations, the same bits)."""
    with np.errstate(all="ignore"):
        a_nan, e_nan = np.isnan(a), np.isnan(e)
        both_nan = a_nan & e_nan
        # allclose
        difference = np.abs(a - e)
        same = a == e
        ok = same | (difference <= atol + rtol * np.abs(e)) | (both_nan & equal_nan)
        rel = np.where(same, 0.0, difference / np.abs(e))
        finite_difference = np.where(np.isnan(difference) | same, -1.0, difference)
        finite_rel = np.where(np.isnan(rel), -1.0, rel)
        worst_absolute = int(np.argmax(finite_difference))
        worst_relative = int(np.argmax(finite_rel))
        counts[_MISMATCHED] = np.count_nonzero(~ok)
        counts[_WORST_ABSOLUTE], counts[_WORST_RELATIVE] = worst_absolute, worst_relative
        values[_GREATEST_ABSOLUTE] = max(finite_difference[worst_absolute], 0.0)
        values[_GREATEST_RELATIVE] = max(finite_rel[worst_relative], 0.0)
        counts[_UNEQUAL] = np.count_nonzero(~(same | (both_nan & equal_nan)))
        # self-checks
        own = contains(lo, hi, a)
        counts[_SELF_OUTSIDE], counts[_FIRST_SELF_OUTSIDE] = _count_first(~own)
        half = np.where(lo == hi, 0.0, 0.5 * (hi - lo))
        if two_sided:
            counts[_EXPECTED_SELF_OUTSIDE], counts[_FIRST_EXPECTED_SELF_OUTSIDE] = _count_first(
                ~contains(elo, ehi, e)
            )
            inside = (np.maximum(lo, elo) <= np.minimum(hi, ehi)) | (both_nan & equal_nan)
            gap = np.maximum(elo - hi, lo - ehi)
            radius = np.maximum(half, np.where(elo == ehi, 0.0, 0.5 * (ehi - elo)))
        else:
            counts[_FIRST_EXPECTED_SELF_OUTSIDE] = -1
            raw = contains(jlo, jhi, e)
            counts[_RAW_OUTSIDE] = np.count_nonzero(~raw)
            inside = (raw & ~both_nan) | (both_nan & equal_nan)
            gap = np.maximum(lo - e, e - hi)
            radius = half
        if by_tolerance:
            inside = ok
        outside = ~inside
        counts[_OUTSIDE] = np.count_nonzero(outside)
        nonfinite = (a_nan != e_nan) | ((np.isinf(a) | np.isinf(e)) & (a != e))
        counts[_NONFINITE] = np.count_nonzero(nonfinite & outside)
        positions = np.flatnonzero(outside)[:OFFENDERS]
        offenders[: positions.size] = positions
        if counts[_OUTSIDE]:
            score = np.where(outside, np.where(np.isnan(gap), np.inf, gap), -np.inf)
            worst = int(np.argmax(score))
            counts[_WORST] = worst
            values[_GAP] = score[worst]
            values[_RADIUS] = radius[worst]
        else:
            counts[_WORST] = -1
        # resolution
        judged = np.isfinite(a)
        reach = _reach(a, lo, hi)
        if two_sided:
            reach = reach + _reach(e, elo, ehi)
        reach = reach[judged]
        relative_judged = np.where(reach == 0, 0.0, reach / np.abs(a[judged]))
        relative_judged = np.where(np.isnan(relative_judged), np.inf, relative_judged)
        counts[_JUDGED] = relative_judged.size
        relative[: relative_judged.size] = relative_judged
        counts[_FACTOR2] = np.count_nonzero(relative_judged < FACTOR_TWO)
        counts[_UNBOUNDED] = np.count_nonzero(np.isinf(reach))
        # tightness
        tight = np.isfinite(half) & np.isfinite(a)
        _, exponent = np.frexp(a[tight])
        exponent = np.where(a[tight] == 0, emin, np.maximum(exponent.astype(np.int64) - 1, emin))
        in_ulps = half[tight] / np.ldexp(1.0, exponent - precision + 1)
        counts[_TIGHT] = in_ulps.size
        ratio[: in_ulps.size] = in_ulps


def _count_first(mask: NDArray[np.bool_]) -> tuple[int, int]:
    count = int(np.count_nonzero(mask))
    return count, (int(np.argmax(mask)) if count else -1)


def _reach(value: Array, lo: Array, hi: Array) -> Array:
    """The distance from ``value`` to the farther end of ``[lo, hi]`` (:mod:`.resolution`): 0
    for an exact element, infinite where the enclosure's ends are NaN or infinite."""
    reach = np.maximum(hi - value, value - lo)
    exact = (lo == value) & (hi == value)
    result: Array = np.where(exact, 0.0, np.where(np.isnan(reach), np.inf, reach))
    return result


@jit(cache=True, error_model="numpy", fallback=_twin)
def _pass(
    a: Array,
    e: Array,
    lo: Array,
    hi: Array,
    jlo: Array,
    jhi: Array,
    elo: Array,
    ehi: Array,
    two_sided: bool,
    by_tolerance: bool,
    equal_nan: bool,
    rtol: float,
    atol: float,
    precision: int,
    emin: int,
    relative: Array,
    ratio: Array,
    offenders: NDArray[np.int64],
    counts: NDArray[np.int64],
    values: Array,
) -> None:  # pragma: no cover - compiled
    inf = math.inf
    greatest_absolute, greatest_relative, greatest_score = -inf, -inf, -inf
    worst_absolute = worst_relative = worst = -1
    worst_radius = 0.0
    self_outside = expected_self_outside = unequal = outside = raw_outside = nonfinite = 0
    first_self = first_expected = -1
    judged = factor2 = unbounded = tight = mismatched = 0
    bits = a.view(np.int64)
    for i in range(a.size):
        x, y, low_end, high_end = a[i], e[i], lo[i], hi[i]
        x_nan, y_nan = x != x, y != y
        both_nan = x_nan & y_nan
        # allclose
        difference = abs(x - y)
        same = x == y
        ok = same or difference <= atol + rtol * abs(y) or (both_nan and equal_nan)
        if not ok:
            mismatched += 1
        rel = 0.0 if same else difference / abs(y)
        finite_difference = -1.0 if (difference != difference) or same else difference
        finite_rel = -1.0 if rel != rel else rel
        if finite_difference > greatest_absolute:
            greatest_absolute, worst_absolute = finite_difference, i
        if finite_rel > greatest_relative:
            greatest_relative, worst_relative = finite_rel, i
        if not (same or (both_nan and equal_nan)):
            unequal += 1
        # self-checks
        whole = (low_end == -inf) & (high_end == inf)
        if not ((low_end <= x and x <= high_end) or (x_nan and whole)):
            self_outside += 1
            if first_self < 0:
                first_self = i
        half = 0.0 if low_end == high_end else 0.5 * (high_end - low_end)
        if two_sided:
            el, eh = elo[i], ehi[i]
            if not ((el <= y and y <= eh) or (y_nan and (el == -inf) & (eh == inf))):
                expected_self_outside += 1
                if first_expected < 0:
                    first_expected = i
            low = low_end if low_end != low_end else (el if el != el or el > low_end else low_end)
            high = (
                high_end
                if high_end != high_end
                else (eh if eh != eh or eh < high_end else high_end)
            )
            inside = (low <= high) or (both_nan and equal_nan)
            g1, g2 = el - high_end, low_end - eh
            gap = g1 if g1 != g1 else (g2 if g2 != g2 or g2 > g1 else g1)
            other = 0.0 if el == eh else 0.5 * (eh - el)
            radius = half if half != half else (other if other != other or other > half else half)
        else:
            jl, jh = jlo[i], jhi[i]
            raw = (jl <= y and y <= jh) or (y_nan and (jl == -inf) & (jh == inf))
            if not raw:
                raw_outside += 1
            inside = (raw and not both_nan) or (both_nan and equal_nan)
            g1, g2 = low_end - y, y - high_end
            gap = g1 if g1 != g1 else (g2 if g2 != g2 or g2 > g1 else g1)
            radius = half
        if by_tolerance:
            inside = ok
        score = -inf
        if not inside:
            if outside < offenders.size:
                offenders[outside] = i
            outside += 1
            if (x_nan != y_nan) or ((math.isinf(x) or math.isinf(y)) and x != y):
                nonfinite += 1
            score = inf if gap != gap else gap
        # the first greatest score, as np.argmax finds it
        if worst < 0 or score > greatest_score:
            greatest_score, worst, worst_radius = score, i, radius
        # resolution
        if math.isfinite(x):
            reach = _reach_of(x, low_end, high_end)
            if two_sided:
                reach += _reach_of(y, elo[i], ehi[i])
            relative_reach = 0.0 if reach == 0 else reach / abs(x)
            relative_reach = inf if relative_reach != relative_reach else relative_reach
            relative[judged] = relative_reach
            judged += 1
            if relative_reach < 0.5:
                factor2 += 1
            if math.isinf(reach):
                unbounded += 1
        # tightness
        if math.isfinite(half) and math.isfinite(x):
            # floor(log2|x|) from the exponent field: a float64 zero or subnormal reads -1023,
            # below every format's emin (-1022 at the lowest), so the clamp gives emin as frexp
            exponent = max(((bits[i] >> 52) & 0x7FF) - 1023, emin) - precision + 1
            if exponent >= -1022:  # a normal float64 power of two, built from its bits
                unit = float(np.int64((exponent + 1023) << 52).view(np.float64))
            else:
                unit = math.ldexp(1.0, exponent)
            ratio[tight] = half / unit
            tight += 1
    counts[0], counts[1], counts[2], counts[3] = (
        self_outside,
        first_self,
        expected_self_outside,
        first_expected if two_sided else -1,
    )
    counts[4], counts[5], counts[6], counts[7] = unequal, outside, nonfinite, worst
    counts[8], counts[9], counts[10], counts[11] = judged, factor2, unbounded, tight
    counts[12], counts[13], counts[14], counts[15] = (
        mismatched,
        worst_absolute,
        worst_relative,
        raw_outside,
    )
    values[0] = max(greatest_absolute, 0.0)
    values[1] = max(greatest_relative, 0.0)
    if outside == 0:
        counts[7] = -1
    else:
        values[2], values[3] = greatest_score, worst_radius


@jit(cache=True, forceinline=True)
def _reach_of(value: float, lo: float, hi: float) -> float:  # pragma: no cover - compiled
    """:func:`_reach` of one element."""
    if lo == value and hi == value:
        return 0.0
    up, down = hi - value, value - lo
    if up != up or down != down:
        return math.inf
    return up if up >= down else down


def _median_twin(values: Array) -> float:
    """:func:`median_of` by one NumPy partition: the upper middle element, and for an even size
    the largest of the elements the partition put below it."""
    middle = values.size // 2
    parted = np.partition(values, middle)
    high = parted[middle]
    if values.size % 2:
        return float(high)
    low = parted[:middle].max()
    with np.errstate(over="ignore", invalid="ignore"):
        return float((low + high) / 2)


@jit(cache=True, error_model="numpy", fallback=_median_twin)
def median_of(values: Array) -> float:  # pragma: no cover - compiled
    """The median of a non-empty 1-d array without NaN (infinities allowed), as ``np.median``
    gives it: for an even size the mean of the two middle elements, ``(low + high) / 2``."""
    return np.median(values)
