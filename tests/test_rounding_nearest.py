"""The enclosure of a result rounded to nearest (``rounding.nearest``, ``Interval.to_nearest``),
against an mpmath oracle: for intervals [lo, hi] of every kind (points on the grid, ties and
their float64 neighbours, intervals straddling a tie or a grid number, subnormal and
underflowing values, the overflow threshold, infinities, NaN), every value v of the interval
(its ends, its ties, points in between, as exact mpmath numbers) rounded to nearest even onto
the format, directly or after nearest roundings onto float32 and float64, lies in the
enclosure, and so does [lo, hi] itself; the ends have at most 26 significant bits above the
format's exponent floor (the invariant that keeps products of ends exact in float64)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from pytest_fpcheck import formats as F
from pytest_fpcheck.interval import fallbacks, rounding
from pytest_fpcheck.interval.core import Interval
from pytest_fpcheck.interval.rounding import NEAREST_BITS, down_to, nearest, up_to

NEAREST_FORMATS = ["bfloat16", "float16", "float32"]
_F32, _F64 = F.FORMATS["float32"], F.FORMATS["float64"]


def rn(v: mpmath.mpf, fmt: F.Format) -> mpmath.mpf:
    """v rounded to nearest even onto ``fmt``'s grid, exactly (IEEE 754: +-inf from
    max_finite + ulp(max_finite) / 2 on)."""
    if v == 0 or mpmath.isinf(v):
        return v
    threshold = mpmath.mpf(fmt.max_finite) + mpmath.ldexp(1, fmt.emax - fmt.precision)
    if abs(v) >= threshold:
        return mpmath.inf if v > 0 else -mpmath.inf
    _, e = mpmath.frexp(v)  # |v| = m 2**e, 1/2 <= m < 1
    quantum = mpmath.ldexp(1, max(int(e) - 1, fmt.emin) - fmt.precision + 1)
    scaled = v / quantum  # exact: a power of two
    low = mpmath.floor(scaled)
    rest = scaled - low
    if rest > 0.5 or (rest == 0.5 and int(low) % 2 == 1):
        low += 1
    return low * quantum


def chains(fmt: F.Format) -> list[list[F.Format]]:
    """The rounding chains the rule admits, innermost first."""
    if fmt.name == "float32":
        return [[fmt], [_F64, fmt]]
    return [[fmt], [_F32, fmt], [_F64, _F32, fmt], [_F64, fmt]]


def stored(v: mpmath.mpf, chain: list[F.Format]) -> mpmath.mpf:
    for fmt in chain:
        v = rn(v, fmt)
    return v


def samples(lo: float, hi: float, fmt: F.Format) -> list[mpmath.mpf]:
    """Values of [lo, hi]: its ends, three points between, and the ties of the format (and
    its grid numbers) inside it, the first four of each."""
    a, b = mpmath.mpf(lo), mpmath.mpf(hi)
    values = [a, b] + [a + (b - a) * mpmath.mpf(k) / 4 for k in range(1, 4)]
    if math.isfinite(lo) and math.isfinite(hi):
        start = float(F.round_to(lo, fmt, "down"))
        for _ in range(4):
            if not math.isfinite(start) or start > hi:
                break
            after = float(F.next_up(start, fmt))
            if not math.isfinite(after):
                break
            for point in (mpmath.mpf(start), (mpmath.mpf(start) + mpmath.mpf(after)) / 2):
                if a <= point <= b:
                    values.append(point)
            start = after
    return values


def intervals(fmt: F.Format, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Adversarial [lo, hi] pairs, both signs."""
    rng = np.random.default_rng(seed)
    ordinals = np.concatenate(
        [rng.integers(0, fmt.max_ordinal, 40), np.arange(0, 12), fmt.max_ordinal - np.arange(4)]
    )
    grid = F.from_ordinal(ordinals, fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        after = F.next_up(grid, fmt)
        after = np.where(np.isfinite(after), after, 2 * fmt.max_finite - grid)
        ties = (grid + after) / 2
        ulp = after - grid
    threshold = fmt.max_finite + math.ldexp(1.0, fmt.emax - fmt.precision)
    # within half a spacing of the intermediate format (float32, or float64 for a float32
    # result) of a tie: where a double rounding and a direct one may differ
    finer = 53 if fmt.name == "float32" else 24
    near_ties = [ties + ulp * math.ldexp(k, fmt.precision - finer - 2) for k in (1, 1.5, -1, -1.5)]
    points = np.concatenate(
        [
            grid,
            ties,
            *near_ties,
            np.nextafter(ties, np.inf),
            np.nextafter(ties, -np.inf),
            np.nextafter(grid, np.inf),
            grid + ulp * rng.uniform(0, 1, grid.size),
            fmt.smallest_subnormal * np.array([0.25, 0.5, 0.75, 1.5, 2.5, 1 / 3]),
            [1e-300, 5e-324, threshold, np.nextafter(threshold, 0), np.nextafter(threshold, 1e300)],
            [fmt.max_finite * 1.5, 1e300],
        ]
    )
    widths = [0.0, 1e-9, 0.3, 3.5]
    lo_parts, hi_parts = [], []
    for width in widths:
        step = np.abs(points) * width * rng.uniform(0.5, 1.0, points.size) * 2.0**-fmt.precision
        lo_parts.append(points - step * rng.uniform(0, 1, points.size))
        hi_parts.append(points + step * rng.uniform(0, 1, points.size))
    # straddling a tie, or a grid number, by a little on either side
    for centre in (ties, grid):
        lo_parts.append(np.nextafter(centre, -np.inf))
        hi_parts.append(np.nextafter(centre, np.inf))
    lo, hi = np.concatenate(lo_parts), np.concatenate(hi_parts)
    return np.concatenate([lo, -hi]), np.concatenate([hi, -lo])


def on_wide_grid(x: np.ndarray, fmt: F.Format) -> np.ndarray:
    """Whether each finite x has at most 26 significant bits above 2**(emin - 25)."""
    finite = np.isfinite(x)
    safe = np.where(finite, x, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        again = F.quantize(safe, NEAREST_BITS, fmt.emin, 0)
    result: np.ndarray = ~finite | (again == safe)
    return result


@pytest.mark.parametrize("name", NEAREST_FORMATS)
def test_nearest_encloses_every_nearest_rounding_of_the_interval(name: str) -> None:
    fmt = F.FORMATS[name]
    # enough for every interval's ends, ties and points between (one binade or two wide) and
    # for rn's exact scaling
    mpmath.mp.prec = 256
    lo, hi = intervals(fmt, seed=len(name))
    lower, upper = nearest(lo, hi, fmt)
    assert (lower <= lo).all()
    assert (hi <= upper).all()
    assert on_wide_grid(lower, fmt).all()
    assert on_wide_grid(upper, fmt).all()
    # nothing beyond the largest finite number but an infinity, as outward rounding gives
    assert ((np.abs(lower) <= fmt.max_finite) | np.isinf(lower)).all()
    assert ((np.abs(upper) <= fmt.max_finite) | np.isinf(upper)).all()
    misses = []
    for i in range(lo.size):
        a, b = mpmath.mpf(lower[i]), mpmath.mpf(upper[i])
        for v in samples(float(lo[i]), float(hi[i]), fmt):
            for chain in chains(fmt):
                r = stored(v, chain)
                if not a <= r <= b:
                    misses.append((lo[i], hi[i], float(v), [f.name for f in chain], float(r)))
    assert not misses, misses[:5]


@pytest.mark.parametrize("name", NEAREST_FORMATS)
def test_nearest_is_never_wider_than_outward_rounding_where_it_stays_finite(name: str) -> None:
    """The hull lies inside [down_to(lo), up_to(hi)] (both contain [lo, hi] and the format's
    nearest roundings of it), and on points away from ties it is the hull of the point and its
    nearest rounding: the actual error, not the ULP."""
    fmt = F.FORMATS[name]
    lo, hi = intervals(fmt, seed=3)
    lower, upper = nearest(lo, hi, fmt)
    outer_lo, outer_hi = down_to(lo, fmt), up_to(hi, fmt)
    assert (lower >= outer_lo).all()
    assert (upper <= outer_hi).all()
    rng = np.random.default_rng(4)
    x = rng.standard_normal(5000)
    lower, upper = nearest(x, x, fmt)
    spacing = F.ulp(x, fmt)
    nearest_value = F.round_to(x, fmt)
    away_from_ties = np.abs(np.abs(x - nearest_value) - spacing / 2) > spacing * 2.0**-12
    expected_lo = np.minimum(F.quantize(x, NEAREST_BITS, fmt.emin, 2), nearest_value)
    expected_hi = np.maximum(F.quantize(x, NEAREST_BITS, fmt.emin, 3), nearest_value)
    assert (lower[away_from_ties] == expected_lo[away_from_ties]).all()
    assert (upper[away_from_ties] == expected_hi[away_from_ties]).all()
    # what that buys: the width is the actual error (to 2**-26), not one spacing
    width = (upper - lower)[away_from_ties]
    error = np.abs(x - nearest_value)[away_from_ties]
    assert (width <= error + 2 * np.abs(x[away_from_ties]) * 2.0**-25).all()


def test_nearest_keeps_infinities_and_turns_nan_ends_into_the_infinity_of_their_side() -> None:
    fmt = F.FORMATS["bfloat16"]
    big = fmt.max_finite
    threshold = big + math.ldexp(1.0, fmt.emax - fmt.precision)
    lo = np.array([np.nan, -np.inf, np.inf, 1.0, threshold, np.nextafter(threshold, 0), big])
    hi = np.array([1.0, np.nan, np.inf, np.inf, threshold, np.nextafter(threshold, 0), 2 * big])
    lower, upper = nearest(lo, hi, fmt)
    assert lower.tolist() == [-np.inf, -np.inf, np.inf, 1.0, big, big, big]
    assert upper.tolist() == [1.0, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf]


@pytest.mark.parametrize("name", ["float64", "tfloat32", "float8_e4m3fn", "float8_e5m2"])
def test_other_formats_round_outward(name: str) -> None:
    fmt = F.FORMATS[name]
    lo, hi = intervals(F.FORMATS["float16"], seed=5)
    result = Interval(lo, hi).to_nearest(fmt)
    if name == "float64":
        assert result.lo is lo
        assert result.hi is hi
    else:
        assert (result.lo == down_to(lo, fmt)).all()
        assert (result.hi == up_to(hi, fmt)).all()


@pytest.mark.parametrize("name", NEAREST_FORMATS)
def test_nearest_twin_gives_the_kernels_bits(name: str) -> None:
    """The NumPy twin of the compiled pass (used while it compiles) gives its bits."""
    fmt = F.FORMATS[name]
    lo, hi = intervals(fmt, seed=6)
    lo = np.concatenate([lo, [np.nan, 0.0, -0.0, 5e-324]])
    hi = np.concatenate([hi, [np.nan, 0.0, -0.0, 5e-324]])
    threshold = fmt.max_finite + math.ldexp(1.0, fmt.emax - fmt.precision)
    arguments = (fmt.precision, fmt.emin, fmt.max_finite, fmt.has_inf)
    constants = (threshold, *rounding._DRIFT[name])
    compiled = np.empty(lo.size), np.empty(lo.size)
    twin = np.empty(lo.size), np.empty(lo.size)
    rounding._nearest_all.dispatcher(lo, hi, *arguments, constants, *compiled)
    fallbacks.nearest_all(lo, hi, *arguments, constants, *twin)
    for got, expected in zip(compiled, twin, strict=True):
        assert (got.view(np.int64) == expected.view(np.int64)).all()


def _bits(x: float) -> int:
    return int(np.float64(x).view(np.int64))


@pytest.mark.parametrize("name", NEAREST_FORMATS)
def test_the_pass_gives_each_pair_the_bits_it_gets_alone(name: str) -> None:
    """The pass rounds the usual pairs in a branch-free loop and the others element by element
    after it: a pair's ends are the same in any company (alone, among usual pairs only, among
    special ones) and the twin's."""
    fmt = F.FORMATS[name]
    lo, hi = intervals(fmt, seed=8)
    threshold = fmt.max_finite + math.ldexp(1.0, fmt.emax - fmt.precision)
    # one end special, the other usual: each end's test must hold on its own
    normal, big = fmt.smallest_normal, fmt.max_finite
    special = [0.0, -0.0, 5e-324, 1e-40, 2.0**-126, 2.0**-127, 2.0**127, 1e39, threshold]
    special += [np.nan, np.inf, big, np.nextafter(2.0**-126, 0.0), normal, 2 * normal, big / 2]
    special += [np.nextafter(2 * normal, 0.0), np.nextafter(big / 2, np.inf), normal / 3]
    special_lo = np.array([-x for x in special] + [np.nan, -np.inf] + special[:7])
    usual_hi = np.full(special_lo.size, 1.5)
    special_hi = np.array(special + [-x for x in special[:7]])
    usual_lo = np.full(special_hi.size, -1.5)
    # infinite ends on either side (a mask's [-inf, -inf] among them)
    infinite_lo = np.array([np.inf, -np.inf, -np.inf, 1.5, -np.inf, np.inf])
    infinite_hi = np.array([np.inf, -np.inf, 1.5, np.inf, np.inf, np.nan])
    lo = np.concatenate([lo, special_lo, usual_lo, infinite_lo])
    hi = np.concatenate([hi, usual_hi, special_hi, infinite_hi])
    arguments = (fmt.precision, fmt.emin, fmt.max_finite, fmt.has_inf)
    constants = (threshold, *rounding._DRIFT[name])

    def compiled(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.empty(a.size), np.empty(a.size)
        rounding._nearest_all.dispatcher(a, b, *arguments, constants, *out)
        return out

    if name == "float32":
        pairs = [rounding._nearest32_usual.dispatcher(a, b) for a, b in zip(lo, hi, strict=True)]
    else:
        bounds = (np.int64(_bits(2 * normal)), np.int64(_bits(big / 2)))
        pairs = [
            rounding._nearest_usual.dispatcher(a, b, fmt.precision, *bounds, fmt.has_inf, constants)
            for a, b in zip(lo, hi, strict=True)
        ]
    usual = np.array([bool(pair[2]) for pair in pairs])
    assert 0 < usual.sum() < usual.size  # both kinds present
    together = compiled(lo, hi)
    apart = compiled(lo[usual], hi[usual]), compiled(lo[~usual], hi[~usual])
    twin = np.empty(lo.size), np.empty(lo.size)
    fallbacks.nearest_all(lo, hi, *arguments, constants, *twin)
    for side in (0, 1):
        bits = together[side].view(np.int64)
        assert (bits == twin[side].view(np.int64)).all()
        assert (bits[usual] == apart[0][side].view(np.int64)).all()
        assert (bits[~usual] == apart[1][side].view(np.int64)).all()
    for i in range(0, lo.size, 97):  # alone
        alone = compiled(lo[i : i + 1], hi[i : i + 1])
        assert alone[0].view(np.int64)[0] == together[0].view(np.int64)[i]
        assert alone[1].view(np.int64)[0] == together[1].view(np.int64)[i]
