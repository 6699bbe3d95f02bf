"""Outward rounding of endpoints: exact one-step moves and directed rounding onto every format,
checked against nextafter and against the exact round_to on many values."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_fpcheck import formats as F
from pytest_fpcheck.interval.rounding import down, down_to, up, up_to


def sample(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(20000) * 10.0 ** rng.integers(-320, 308, 20000)
    specials = [
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        1.0,
        -1.0,
        2.0,
        -2.0,
        0.5,
        -0.5,
        1e308,
        -1e308,
        2.2250738585072014e-308,
        -2.2250738585072014e-308,
        np.finfo(np.float64).max,
        -np.finfo(np.float64).max,
    ]
    grid = np.concatenate(
        [
            np.ldexp(1.0, np.arange(-1074, 1024)),
            np.ldexp(1.0, np.arange(-1022, 1024)) * (2 - 2.0**-52),
        ]
    )
    return np.concatenate([x, specials, grid, -grid])


def test_up_and_down_move_exactly_one_step() -> None:
    x = sample()
    with np.errstate(over="ignore"):
        assert (up(x) == np.nextafter(x, np.inf)).all()
        assert (down(x) == np.nextafter(x, -np.inf)).all()


def test_non_finite_endpoints() -> None:
    x = np.array([np.inf, -np.inf, np.nan])
    big = np.finfo(np.float64).max
    assert up(x).tolist() == [np.inf, -big, np.inf]
    assert down(x).tolist() == [big, -np.inf, -np.inf]


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float8_e4m3fn", "tfloat32"])
def test_directed_rounding_agrees_with_exact_rounding(name: str) -> None:
    fmt = F.FORMATS[name]
    x = sample(1)
    x = np.concatenate(
        [
            x[np.abs(x) < 1e40],
            F.round_to(x[:2000], fmt),
            [fmt.max_finite * 1.5, -fmt.max_finite * 1.5, np.nan],
        ]
    )
    with np.errstate(invalid="ignore", over="ignore"):
        expected_up = F.round_to(x, fmt, "up")
        expected_down = F.round_to(x, fmt, "down")
    expected_up = np.where(np.isnan(expected_up), np.inf, expected_up)
    expected_down = np.where(np.isnan(expected_down), -np.inf, expected_down)
    assert (up_to(x, fmt) == expected_up).all()
    assert (down_to(x, fmt) == expected_down).all()


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float8_e4m3fn", "tfloat32"])
def test_fused_outward_steps_equal_a_float64_step_then_directed_rounding(name: str) -> None:
    """step_down_to / step_up_to (one pass in the compiled rules) are exactly down_to(down(x))
    and up_to(up(x)): on the format's grid points, their float64 neighbours, and random values."""
    from pytest_fpcheck.interval.rounding import step_down_to, step_up_to

    fmt = F.FORMATS[name]
    x = sample(2)
    grid = F.round_to(x[np.abs(x) < fmt.max_finite][:3000], fmt)
    values = np.concatenate(
        [grid, np.nextafter(grid, np.inf), np.nextafter(grid, -np.inf), x[:3000], [np.inf, -np.inf]]
    )
    arguments = (fmt.precision, fmt.smallest_normal, fmt.emin, fmt.max_finite, fmt.has_inf)
    fused_down = np.array([step_down_to(v, *arguments) for v in values])
    fused_up = np.array([step_up_to(v, *arguments) for v in values])
    assert (fused_down == down_to(down(values), fmt)).all()
    assert (fused_up == up_to(up(values), fmt)).all()


def test_float32_hardware_conversion_path_equals_the_general_path_bit_for_bit() -> None:
    """float32_directed (the kernels' float32 path: the hardware's nearest conversion and one
    step) gives exactly what the format-generic bit-pattern path gives, signed zeros included:
    on float32 numbers, their float64 neighbours, midpoints between float32 neighbours (ties),
    float32's subnormal range, float64 subnormals, the overflow threshold and NaN."""
    from pytest_fpcheck.interval.rounding import (
        float32_directed,
        round_to,
        step_down_to,
        step_up_to,
    )

    fmt = F.FORMATS["float32"]
    rng = np.random.default_rng(5)
    grid = np.concatenate(
        [
            rng.standard_normal(2000).astype(np.float32),
            (rng.uniform(-1, 1, 1000) * 2.0**-126).astype(np.float32),
            np.array([fmt.max_finite, -fmt.max_finite, 2.0**-149, -(2.0**-149)], np.float32),
        ]
    ).astype(np.float64)
    with np.errstate(over="ignore"):
        above = np.nextafter(grid.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    values = np.concatenate(
        [
            grid,
            np.nextafter(grid, np.inf),
            np.nextafter(grid, -np.inf),
            (grid + above) / 2,  # ties of the nearest conversion
            sample(3)[:3000],
            [0.0, -0.0, 5e-324, -5e-324, 1e-320, -1e-320, 2.0**-150, -(2.0**-150)],
            [np.inf, -np.inf, np.nan, 3.4028235677973366e38, -3.4028235677973366e38, 1e300],
        ]
    )
    arguments = (fmt.precision, fmt.smallest_normal, fmt.emin, fmt.max_finite, fmt.has_inf)
    pairs = {
        (False, False): lambda v: round_to(v, *arguments, False),
        (True, False): lambda v: round_to(v, *arguments, True),
        (False, True): lambda v: step_down_to(v, *arguments),
        (True, True): lambda v: step_up_to(v, *arguments),
    }
    for (up_, strict), general in pairs.items():
        fast = np.array([float32_directed(v, up_, strict) for v in values])
        expected = np.array([general(v) for v in values])
        assert (fast.view(np.int64) == expected.view(np.int64)).all(), (up_, strict)


def _summary_reference(lo: np.ndarray, hi: np.ndarray) -> tuple[float, bool]:
    """kernels.summary's rule, element by element in NumPy."""
    with np.errstate(invalid="ignore", over="ignore"):
        width = np.where(lo == hi, 0.0, hi - lo)
    width = np.where(np.isnan(width), np.inf, width)
    widest = float(width.max(initial=0.0))
    unbounded = bool((np.isneginf(lo) & np.isposinf(hi)).any())
    return (widest / 2 if np.isfinite(widest) else np.inf), unbounded


@pytest.mark.parametrize("seed", range(8))
def test_summary_matches_its_rule_on_special_ends(seed: int) -> None:
    """The vectorised summary (largest radius, some element the whole line) of ends with
    infinities, equal infinite ends, signed zeros, subnormal and huge widths."""
    from pytest_fpcheck.interval.kernels import summary

    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, 5e-324, -5e-324, 1.7e308, -1.7e308, np.inf, -np.inf, 1.0])
    lo = np.where(rng.random(257) < 0.3, rng.choice(special, 257), rng.standard_normal(257))
    hi = np.where(rng.random(257) < 0.3, rng.choice(special, 257), lo + rng.random(257))
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    if seed % 2:  # no element the whole line, so that the finite widths decide
        hi = np.where(np.isneginf(lo) & np.isposinf(hi), lo, hi)
    assert summary(lo, hi) == _summary_reference(lo, hi)
    assert summary(lo[:0], hi[:0]) == (0.0, False)
    finite = np.isfinite(lo) & np.isfinite(hi)
    assert summary(lo[finite], hi[finite]) == _summary_reference(lo[finite], hi[finite])


def adversarial(fmt: F.Format, seed: int) -> np.ndarray:
    """Values that stress a rounder to ``fmt``, both signs: grid numbers and their float64
    neighbours, the ties between grid neighbours and theirs, the subnormal range and what
    underflows below it, float64 subnormals, the overflow threshold (the tie above the largest
    finite number, and its neighbours), huge values, signed zeros, infinities and NaN."""
    rng = np.random.default_rng(seed)
    ordinals = np.concatenate(
        [rng.integers(0, fmt.max_ordinal, 3000), np.arange(0, 40), fmt.max_ordinal - np.arange(8)]
    )
    grid = F.from_ordinal(ordinals, fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        after = F.next_up(grid, fmt)
        ties = (grid + np.where(np.isfinite(after), after, 2 * fmt.max_finite - grid)) / 2
    tiny = fmt.smallest_subnormal * np.array([0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 1 / 3])
    big = fmt.max_finite + ulp_top(fmt) / 2  # the tie between the largest number and overflow
    x = np.concatenate(
        [
            grid,
            ties,
            np.nextafter(ties, np.inf),
            np.nextafter(ties, -np.inf),
            np.nextafter(grid, np.inf),
            tiny,
            [5e-324, 1e-310, 2.2250738585072014e-308, 1e300, np.finfo(np.float64).max],
            [big, np.nextafter(big, 0.0), np.nextafter(big, np.inf), 2 * fmt.max_finite],
            [0.0, np.inf, np.nan],
        ]
    )
    return np.concatenate([x, -x])


def ulp_top(fmt: F.Format) -> float:
    return float(F.ulp(fmt.max_finite, fmt))


def bits_equal(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Equal bit for bit (signed zeros told apart), any NaN equal to any NaN."""
    both_nan = np.isnan(got) & np.isnan(expected)
    equal: np.ndarray = both_nan | (got.view(np.int64) == expected.view(np.int64))
    return equal


NARROWER = ["float32", "tfloat32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("name", NARROWER)
def test_one_rounder_gives_every_site_the_same_bits(name: str) -> None:
    """The interval engine's directed rounding (its bit-pattern and float32 shortcuts included)
    and the emulators' compiled rounder in all four modes give, bit for bit, what
    :func:`~pytest_fpcheck.formats.round_to` gives (pinned in test_formats against ml_dtypes,
    torch and a brute-force grid), under each site's stated rules: the engine turns a NaN
    endpoint into the infinity of its direction and overflows outward to an infinity (also where
    the format has none); the emulators overflow to an infinity and keep NaN, infinities and
    zeros as given; both give +0 for a nonzero value that rounds to zero."""
    from pytest_fpcheck.emulate._kernel import _round_one

    fmt = F.FORMATS[name]
    x = adversarial(fmt, seed=len(name))
    big = fmt.max_finite
    for mode, upward in (("up", True), ("down", False)):
        with np.errstate(invalid="ignore", over="ignore"):
            exact = F.round_to(x, fmt, mode)
        outward, inward = (np.inf, -big) if upward else (big, -np.inf)
        expected = np.where(np.isnan(exact), np.where(x > 0, outward, inward), exact)
        expected = np.where(np.isnan(x), np.inf if upward else -np.inf, expected)
        expected = np.where((expected == 0) & (x != 0), 0.0, expected)
        got = (up_to if upward else down_to)(x, fmt)
        bad = ~bits_equal(got, expected)
        assert not bad.any(), (mode, x[bad][:5], got[bad][:5], expected[bad][:5])
    for code, mode in enumerate(("nearest-even", "toward-zero", "down", "up")):
        assert F.MODE_CODES[mode] == code
        with np.errstate(invalid="ignore", over="ignore"):
            exact = F.round_to(x, fmt, mode)
        expected = np.where(np.isnan(exact), np.copysign(np.inf, x), exact)
        expected = np.where((expected == 0) & (x != 0), 0.0, expected)
        expected = np.where(np.isfinite(x) & (x != 0), expected, x)
        got = np.array([_round_one(v, fmt.precision, fmt.emin, big, code) for v in x])
        bad = ~bits_equal(got, expected)
        assert not bad.any(), (mode, x[bad][:5], got[bad][:5], expected[bad][:5])
