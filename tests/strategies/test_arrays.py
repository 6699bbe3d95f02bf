"""arrays (NumPy backend): dtypes, shapes, grid membership, corner mixing, foreign element
strategies, and every invalid argument refused with its message."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_fpcheck import formats as F
from pytest_fpcheck import strategies as fst
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.strategies._corners import corner_list

from .draws import draw_values

ALL = list(F.FORMATS)


def draws(strategy: st.SearchStrategy[Any], count: int = 60) -> list[Any]:
    """Deterministic draws (see tests/strategies/draws.py)."""
    return draw_values(strategy, count)


def as_float64(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).astype(np.float64)


def signed(values: np.ndarray) -> set[tuple[float, bool]]:
    return {(float(x), bool(np.signbit(x))) for x in values.ravel() if not np.isnan(x)}


@pytest.mark.parametrize("name", ALL)
def test_arrays_have_the_storage_dtype_and_every_element_on_the_grid(name: str) -> None:
    arrays = draws(fst.arrays(name, 40))
    storage = F.numpy_dtype(name)
    assert all(a.dtype == storage and a.shape == (40,) for a in arrays)
    values = np.concatenate([as_float64(a) for a in arrays])
    assert F.is_on_grid(values, name).all()
    assert np.isfinite(values).any()
    assert len(np.unique(values[np.isfinite(values)])) > 40


@pytest.mark.parametrize(
    ("shape", "expected"), [(5, (5,)), ((2, 3), (2, 3)), ((), ()), ((0, 4), (0, 4)), ([3], (3,))]
)
def test_fixed_shapes(shape: Any, expected: tuple[int, ...]) -> None:
    assert {a.shape for a in draws(fst.arrays("float16", shape), 5)} == {expected}


def test_a_strategy_of_shapes_is_drawn_from() -> None:
    shapes = st.tuples(st.integers(0, 3), st.integers(1, 2))
    got = {a.shape for a in draws(fst.arrays("bfloat16", shapes), 60)}
    assert len(got) > 3
    assert all(0 <= rows <= 3 and 1 <= cols <= 2 for rows, cols in got)


def test_a_drawn_invalid_shape_is_refused_when_drawn() -> None:
    message = (
        "shape=-2 (type int) is not valid: expected an int >= 0, a tuple of ints >= 0, or a "
        "strategy of shapes."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        draws(fst.arrays("float16", st.just(-2)), 1)


@given(fst.arrays("bfloat16", (100, 100)))
@settings(
    max_examples=10,
    database=None,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_large_arrays_pass_hypothesis_size_health_checks(array: np.ndarray) -> None:
    assert array.shape == (100, 100)


@pytest.mark.parametrize("name", ALL)
def test_corner_fraction_one_draws_only_corners(name: str) -> None:
    corners = np.array(corner_list(F.FORMATS[name]))
    values = np.concatenate([as_float64(a) for a in draws(fst.arrays(name, 20, corner_fraction=1))])
    assert signed(values) <= signed(corners)
    assert len(signed(values)) > 5


def test_corner_fraction_applies_to_the_corners_a_floats_on_grid_strategy_allows() -> None:
    elements = fst.floats_on_grid("float16", min_value=0.0, max_value=1.0)
    arrays = draws(fst.arrays("float16", 20, elements=elements, corner_fraction=1.0))
    values = np.concatenate([as_float64(a) for a in arrays])
    assert ((values >= 0) & (values <= 1)).all()
    assert not np.signbit(values).any()
    assert signed(values) <= signed(np.array(corner_list(F.FORMATS["float16"])))
    assert {1.0, 2.0**-24, 2.0**-14} <= set(values.tolist())


def test_corner_fraction_zero_leaves_plain_bit_patterns() -> None:
    corners = signed(np.array(corner_list(F.FORMATS["float64"])))
    elements = fst.floats_on_grid("float64")
    plain = [
        as_float64(a)
        for a in draws(fst.arrays("float64", 20, elements=elements, corner_fraction=0))
    ]
    mixed = [
        as_float64(a)
        for a in draws(fst.arrays("float64", 20, elements=elements, corner_fraction=0.5))
    ]
    nonzero_corners = corners - {(0.0, False), (0.0, True)}
    assert not signed(np.concatenate(plain)) & nonzero_corners
    assert len(signed(np.concatenate(mixed)) & nonzero_corners) > 5


@pytest.mark.parametrize("name", ALL)
def test_default_elements_reach_nan_and_the_infinities_of_the_format(name: str) -> None:
    fmt = F.FORMATS[name]
    values = np.concatenate([as_float64(a) for a in draws(fst.arrays(name, 10), 100)])
    assert np.isnan(values).any()
    assert np.isinf(values).any() == fmt.has_inf


def test_elements_without_nan_or_infinity_give_none() -> None:
    elements = fst.floats_on_grid("float8_e5m2")
    values = np.concatenate(
        [as_float64(a) for a in draws(fst.arrays("float8_e5m2", 30, elements=elements))]
    )
    assert np.isfinite(values).all()


def test_foreign_element_strategies_are_used_as_they_are() -> None:
    arrays = draws(fst.arrays("bfloat16", 8, elements=st.sampled_from([0.5, -2.0, 3.0])), 30)
    assert set(np.concatenate([as_float64(a) for a in arrays]).tolist()) == {0.5, -2.0, 3.0}
    corners = draws(fst.arrays("float8_e4m3fn", 8, elements=fst.corner_values("float8_e4m3fn")))
    assert F.is_on_grid(np.concatenate([as_float64(a) for a in corners]), "float8_e4m3fn").all()


def test_foreign_elements_off_the_grid_are_refused_when_drawn() -> None:
    message = (
        "elements=0.1 (type float) is not valid: expected values exactly representable in "
        "float16. Draw them with fst.floats_on_grid('float16', ...)."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        draws(fst.arrays("float16", 3, elements=st.just(0.1)), 1)


@pytest.mark.parametrize("name", ALL)
def test_numpy_conversion_is_exact_on_every_corner(name: str) -> None:
    fmt = F.FORMATS[name]
    corners = np.array(corner_list(fmt))
    stored = fst._converter(fmt, "numpy")(corners)
    assert stored.dtype == F.numpy_dtype(fmt)
    np.testing.assert_array_equal(as_float64(stored), corners)
    numbers = ~np.isnan(corners)
    assert (np.signbit(as_float64(stored))[numbers] == np.signbit(corners[numbers])).all()


def test_importing_the_strategies_and_drawing_numpy_arrays_leaves_torch_unimported() -> None:
    code = (
        "import sys\n"
        "from pytest_fpcheck import strategies as fst\n"
        "fst.arrays('bfloat16', 3)\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    ({"backend": "jax"}, "backend='jax' (type str) is not valid: expected 'numpy' or 'torch'."),
    (
        {"corner_fraction": 1.5},
        "corner_fraction=1.5 (type float) is not valid: expected a number in [0, 1].",
    ),
    (
        {"corner_fraction": -0.1},
        "corner_fraction=-0.1 (type float) is not valid: expected a number in [0, 1].",
    ),
    (
        {"corner_fraction": math.nan},
        "corner_fraction=nan (type float) is not valid: expected a number in [0, 1].",
    ),
    (
        {"corner_fraction": True},
        "corner_fraction=True (type bool) is not valid: expected a number in [0, 1].",
    ),
    (
        {"corner_fraction": "0.1"},
        "corner_fraction='0.1' (type str) is not valid: expected a number in [0, 1].",
    ),
    (
        {"shape": -1},
        "shape=-1 (type int) is not valid: expected an int >= 0, a tuple of ints >= 0, or a "
        "strategy of shapes.",
    ),
    (
        {"shape": (2, "a")},
        "shape=(2, 'a') (type tuple) is not valid: expected an int >= 0, a tuple of ints >= 0, "
        "or a strategy of shapes.",
    ),
    (
        {"shape": 2.5},
        "shape=2.5 (type float) is not valid: expected an int >= 0, a tuple of ints >= 0, or a "
        "strategy of shapes.",
    ),
    (
        {"shape": (True, 2)},
        "shape=(True, 2) (type tuple) is not valid: expected an int >= 0, a tuple of ints >= 0, "
        "or a strategy of shapes.",
    ),
    (
        {"elements": [1.0]},
        "elements=[1.0] (type list) is not valid: expected None or a Hypothesis strategy of "
        "floats.",
    ),
    (
        {"elements": fst.floats_on_grid("float32")},
        "elements=binary(min_size=7, max_size=7).map(floats_on_grid('float32')) (type "
        "LazyStrategy) is not valid: expected a floats_on_grid strategy of the array's format "
        "float16, not float32. Pass fst.floats_on_grid('float16', ...) with the same arguments.",
    ),
    (
        {"dtype": "int16"},
        "dtype='int16' (type str) is not valid: expected one of 'float64', 'float32', "
        "'tfloat32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'.",
    ),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_CALLS)
def test_invalid_arguments_are_refused_at_call_time(kwargs: dict[str, Any], message: str) -> None:
    dtype = kwargs.pop("dtype", "float16")
    shape = kwargs.pop("shape", 3)
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fst.arrays(dtype, shape, **kwargs)
