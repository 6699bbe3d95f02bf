"""floats_on_grid: every draw on the grid, bounds and flags honoured, subnormals skipped or
produced, shrinking toward 0.0, and every invalid argument refused with its message."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from pytest_fpcheck import formats as F
from pytest_fpcheck import strategies as fst
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.strategies import _bitpatterns

from .draws import draw_values

ALL = list(F.FORMATS)
SEARCH = settings(database=None, derandomize=True, max_examples=3000)


def draws(strategy: st.SearchStrategy[Any], count: int = 300) -> list[Any]:
    """Deterministic draws (see tests/strategies/draws.py)."""
    return draw_values(strategy, count)


def is_subnormal(x: float, name: str) -> bool:
    return 0 < abs(x) < F.FORMATS[name].smallest_normal


def negative(x: float) -> bool:
    return math.copysign(1.0, x) < 0


@pytest.mark.parametrize("name", ALL)
def test_every_draw_lies_on_the_grid_and_is_finite_by_default(name: str) -> None:
    values = np.array(draws(fst.floats_on_grid(name)))
    assert F.is_on_grid(values, name).all()
    assert np.isfinite(values).all()
    assert np.abs(values).max() <= F.FORMATS[name].max_finite


@pytest.mark.parametrize("name", ALL)
def test_draws_cover_the_binades_from_subnormal_to_near_the_largest(name: str) -> None:
    fmt = F.FORMATS[name]
    magnitudes = np.abs(np.array(draws(fst.floats_on_grid(name))))
    assert magnitudes.max() >= fmt.max_finite / 2**8
    assert magnitudes[magnitudes > 0].min() <= fmt.smallest_normal * 2**8


@pytest.mark.parametrize("name", ALL)
def test_subnormals_are_found_when_allowed(name: str) -> None:
    found = find(fst.floats_on_grid(name), lambda x: is_subnormal(x, name), settings=SEARCH)
    assert is_subnormal(found, name)


@pytest.mark.parametrize("name", ALL)
def test_no_subnormal_is_drawn_when_they_are_excluded(name: str) -> None:
    values = draws(fst.floats_on_grid(name, allow_subnormal=False), 300)
    assert not any(is_subnormal(x, name) for x in values)
    assert F.is_on_grid(np.array(values), name).all()


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_the_subnormal_range_is_skipped_exactly(name: str) -> None:
    """Between -2*tiny and 2*tiny without subnormals only +-0, +-tiny and the successors of
    +-tiny remain (tiny: the smallest normal); all six are drawn."""
    fmt = F.FORMATS[name]
    tiny = fmt.smallest_normal
    above = float(F.next_up(tiny, fmt))
    strategy = fst.floats_on_grid(name, min_value=-above, max_value=above, allow_subnormal=False)
    got = {(x, negative(x)) for x in draws(strategy, 200)}
    expected = {(x, negative(x)) for x in (0.0, -0.0, tiny, -tiny, above, -above)}
    assert got == expected
    # Subnormal bounds move inward past the whole subnormal range.
    subnormal = fmt.smallest_subnormal
    positive = fst.floats_on_grid(name, min_value=subnormal, max_value=above, allow_subnormal=False)
    assert set(draws(positive, 100)) == {tiny, above}
    negative_side = fst.floats_on_grid(
        name, min_value=-above, max_value=-subnormal, allow_subnormal=False
    )
    assert set(draws(negative_side, 100)) == {-tiny, -above}


def test_a_small_range_is_covered_value_by_value() -> None:
    expected = {0.5 + k / 16 for k in range(9)}  # float8_e4m3fn between 0.5 and 1
    got = set(draws(fst.floats_on_grid("float8_e4m3fn", min_value=0.5, max_value=1.0), 300))
    assert got == expected


@pytest.mark.parametrize("name", ALL)
@given(data=st.data())
@settings(max_examples=40, database=None, deadline=None, derandomize=True)
def test_drawn_bounds_are_respected(name: str, data: st.DataObject) -> None:
    ends = sorted(data.draw(st.lists(fst.floats_on_grid(name), min_size=2, max_size=2)))
    allow_subnormal = data.draw(st.booleans())
    try:
        strategy = fst.floats_on_grid(
            name, min_value=ends[0], max_value=ends[1], allow_subnormal=allow_subnormal
        )
    except InvalidArgument:
        # Refused only when the range holds nothing but subnormals of one sign, or -0.0 is
        # asked to lie above 0.0.
        only_subnormals = not allow_subnormal and all(is_subnormal(x, name) for x in ends)
        reversed_zeros = ends[0] == ends[1] == 0 and negative(ends[1]) and not negative(ends[0])
        assert only_subnormals or reversed_zeros
        return
    x = data.draw(strategy)
    assert ends[0] <= x <= ends[1]
    assert bool(F.is_on_grid(x, name))
    assert allow_subnormal or not is_subnormal(x, name)
    if x == 0:
        assert not (negative(x) and ends[0] == 0 and not negative(ends[0]))
        assert not (not negative(x) and ends[1] == 0 and negative(ends[1]))


def test_signed_zero_bounds_follow_hypothesis() -> None:
    assert not any(negative(x) for x in draws(fst.floats_on_grid("float16", min_value=0.0)))
    assert all(negative(x) for x in draws(fst.floats_on_grid("float16", max_value=-0.0)))
    only = draws(fst.floats_on_grid("float16", min_value=-0.0, max_value=-0.0), 20)
    assert {(x, negative(x)) for x in only} == {(0.0, True)}
    assert negative(find(fst.floats_on_grid("float16"), negative, settings=SEARCH))


def test_infinite_bounds_on_the_open_side_mean_no_bound() -> None:
    strategy = fst.floats_on_grid("float16", min_value=-math.inf, max_value=math.inf)
    assert find(strategy, lambda x: x < -60000, settings=SEARCH) < -60000


@pytest.mark.parametrize("name", ALL)
def test_nan_and_infinity_appear_only_when_allowed(name: str) -> None:
    fmt = F.FORMATS[name]
    assert np.isfinite(np.array(draws(fst.floats_on_grid(name), 300))).all()
    with_nan = np.array(draws(fst.floats_on_grid(name, allow_nan=True), 300))
    assert np.isnan(with_nan).any()
    assert not np.isinf(with_nan).any()
    if fmt.has_inf:
        with_inf = np.array(draws(fst.floats_on_grid(name, allow_infinity=True), 300))
        assert np.isposinf(with_inf).any()
        assert np.isneginf(with_inf).any()
        assert not np.isnan(with_inf).any()


def test_one_bound_allows_only_the_infinity_on_the_open_side() -> None:
    above = np.array(draws(fst.floats_on_grid("bfloat16", min_value=-2.0, allow_infinity=True)))
    assert (above >= -2.0).all()
    assert np.isposinf(above).any()
    below = np.array(draws(fst.floats_on_grid("bfloat16", max_value=3.0, allow_infinity=True)))
    assert (below <= 3.0).all()
    assert np.isneginf(below).any()


def test_failing_values_shrink_toward_zero() -> None:
    assert find(fst.floats_on_grid("float16"), lambda x: x > 1, settings=SEARCH) == 1.0009765625
    assert find(fst.floats_on_grid("float16"), lambda x: x != 0, settings=SEARCH) in (
        2.0**-24,
        -(2.0**-24),
    )
    strategy = fst.floats_on_grid("bfloat16", min_value=3.0, max_value=5.0)
    assert find(strategy, lambda x: True, settings=SEARCH) == 3.0


def test_the_repr_names_the_call() -> None:
    strategy = fst.floats_on_grid("half", min_value=0.0, allow_subnormal=False)
    assert repr(strategy) == (
        "binary(min_size=5, max_size=5)"
        ".map(floats_on_grid('float16', min_value=0.0, allow_subnormal=False))"
    )


@pytest.mark.parametrize("name", ALL)
def test_magnitudes_by_bit_pattern_or_table_equal_from_ordinal(name: str) -> None:
    fmt = F.FORMATS[name]
    rng = np.random.default_rng(0)
    ends = np.concatenate([np.arange(300), fmt.max_ordinal - np.arange(300)])
    ordinals = np.unique(np.concatenate([ends, rng.integers(0, fmt.max_ordinal, 2000)]))
    ordinals = ordinals[(ordinals >= 0) & (ordinals <= fmt.max_ordinal)]
    expected = F.from_ordinal(ordinals, fmt)
    got = np.array([_bitpatterns.magnitude(int(k), fmt) for k in ordinals])
    np.testing.assert_array_equal(got, expected)


def test_dtype_accepts_what_format_of_accepts() -> None:
    import ml_dtypes

    for dtype in ("bf16", ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16), F.FORMATS["bfloat16"]):
        values = np.array(draws(fst.floats_on_grid(dtype), 50))
        assert F.is_on_grid(values, "bfloat16").all()


BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    (
        {"dtype": "int8"},
        "dtype='int8' (type str) is not valid: expected one of 'float64', 'float32', "
        "'tfloat32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'.",
    ),
    (
        {"min_value": 0.1},
        "min_value=0.1 (type float) is not valid: expected a value exactly representable in "
        "float16. The nearest float16 value inside the range is 0.10003662109375: pass that.",
    ),
    (
        {"max_value": 0.1},
        "max_value=0.1 (type float) is not valid: expected a value exactly representable in "
        "float16. The nearest float16 value inside the range is 0.0999755859375: pass that.",
    ),
    (
        {"max_value": 1e6},
        "max_value=1000000.0 (type float) is not valid: expected a value exactly representable "
        "in float16. The nearest float16 value inside the range is 65504.0: pass that.",
    ),
    (
        {"min_value": 1e6},
        "min_value=1000000.0 (type float) is not valid: expected a value exactly representable "
        "in float16. No finite float16 value is >= 1000000.0.",
    ),
    (
        {"min_value": 10**400},
        "expected a value exactly representable in float16. It overflows float64.",
    ),
    ({"min_value": "1"}, "min_value='1' (type str) is not valid: expected a real number or None."),
    (
        {"min_value": math.nan},
        "min_value=nan (type float) is not valid: expected a finite number, -inf or None.",
    ),
    (
        {"min_value": math.inf},
        "min_value=inf (type float) is not valid: expected a finite number, -inf or None.",
    ),
    (
        {"max_value": -math.inf},
        "max_value=-inf (type float) is not valid: expected a finite number, inf or None.",
    ),
    (
        {"min_value": 2, "max_value": 1},
        "max_value=1 (type int) is not valid: expected a value >= min_value=2.",
    ),
    (
        {"min_value": 0.0, "max_value": -0.0},
        "max_value=-0.0 (type float) is not valid: expected a value >= min_value=0.0. "
        "-0.0 counts as less than 0.0 here, as in Hypothesis.",
    ),
    (
        {"min_value": 0.0, "allow_nan": True},
        "allow_nan=True (type bool) is not valid: expected False when min_value or max_value "
        "is given.",
    ),
    (
        {"dtype": "float8_e4m3fn", "allow_infinity": True},
        "allow_infinity=True (type bool) is not valid: expected False for float8_e4m3fn, which "
        "has no infinities.",
    ),
    (
        {"min_value": 0.0, "max_value": 1.0, "allow_infinity": True},
        "allow_infinity=True (type bool) is not valid: expected False when both min_value and "
        "max_value are given.",
    ),
    (
        {"min_value": 2.0**-24, "max_value": 2.0**-23, "allow_subnormal": False},
        "allow_subnormal=False (type bool) is not valid: expected True: every float16 value "
        "from min_value=5.960464477539063e-08 to max_value=1.1920928955078125e-07 is "
        "subnormal.",
    ),
    ({"allow_nan": 1}, "allow_nan=1 (type int) is not valid: expected True or False."),
    (
        {"allow_infinity": None},
        "allow_infinity=None (type NoneType) is not valid: expected True or False.",
    ),
    (
        {"allow_subnormal": "no"},
        "allow_subnormal='no' (type str) is not valid: expected True or False.",
    ),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_CALLS)
def test_invalid_arguments_are_refused_at_call_time(kwargs: dict[str, Any], message: str) -> None:
    dtype = kwargs.pop("dtype", "float16")
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fst.floats_on_grid(dtype, **kwargs)
