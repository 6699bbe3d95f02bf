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
