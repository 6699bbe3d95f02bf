"""Facts of floating formats and exact rounding: what a value becomes in a narrower format."""

import numpy as np

import pytest_fpcheck as fp


def test_float16_facts():
    half = fp.format_of("float16")
    assert half.precision == 11
    assert half.unit_roundoff == 2.0**-11
    assert half.max_finite == 65504.0
    assert half.smallest_subnormal == 2.0**-24


def test_rounding_one_third_into_every_format():
    third = 1 / 3
    rounded = {
        name: float(fp.formats.round_to(third, name))
        for name in ("float32", "tfloat32", "float16", "bfloat16", "float8_e4m3fn")
    }
    assert rounded == {
        "float32": 0.3333333432674408,
        "tfloat32": 0.333251953125,
        "float16": 0.333251953125,
        "bfloat16": 0.333984375,
        "float8_e4m3fn": 0.34375,
    }


def test_directed_rounding_brackets_the_exact_value():
    x = np.array([0.1, -0.1, 70000.0])
    down = fp.formats.round_to(x, "float16", "down")
    up = fp.formats.round_to(x, "float16", "up")
    assert (down <= x).all()
    assert (x <= up).all()
    assert up[2] == np.inf  # beyond float16's largest finite number, rounding up overflows


def test_neighbours_and_spacing():
    assert fp.formats.next_up(1.0, "bfloat16") == 1 + 2.0**-7
    assert fp.formats.ulp(1000.0, "float16") == 0.5
