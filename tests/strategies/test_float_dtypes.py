"""float_dtypes: canonical storage-format names by width, usable as ``dtype`` everywhere."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from pytest_fpcheck import formats as F
from pytest_fpcheck import strategies as fst
from pytest_fpcheck.errors import InvalidArgument


def drawn_names(**kwargs: Any) -> set[str]:
    seen: set[str] = set()

    @settings(
        max_examples=100,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(fst.float_dtypes(**kwargs))
    def collect(name: str) -> None:
        seen.add(name)

    collect()
    return seen


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {},
            {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"},
        ),
        ({"min_bits": 16, "max_bits": 16}, {"float16", "bfloat16"}),
        ({"max_bits": 8}, {"float8_e4m3fn", "float8_e5m2"}),
        ({"min_bits": 32}, {"float64", "float32"}),
    ],
)
def test_names_by_width_without_tfloat32(kwargs: dict[str, int], expected: set[str]) -> None:
    assert drawn_names(**kwargs) == expected


def test_shrinks_toward_float64() -> None:
    assert (
        find(fst.float_dtypes(), lambda name: True, settings=settings(database=None)) == "float64"
    )


@given(data=st.data())
@settings(max_examples=20, database=None, deadline=None, derandomize=True)
def test_every_name_works_as_a_dtype(data: st.DataObject) -> None:
    name = data.draw(fst.float_dtypes())
    assert F.format_of(name).name == name
    value = data.draw(fst.floats_on_grid(name))
    array = data.draw(fst.arrays(name, 3))
    assert array.dtype == F.numpy_dtype(name)
    assert F.is_on_grid(np.append(array.astype(np.float64), value), name).all()
    assert len(data.draw(fst.masked_all_one(4, dtype=name))) == 4
    assert F.is_on_grid(data.draw(fst.corner_values(name)), name)


BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    ({"min_bits": 12}, "min_bits=12 (type int) is not valid: expected one of 8, 16, 32, 64."),
    ({"min_bits": 16.0}, "min_bits=16.0 (type float) is not valid: expected one of 8, 16, 32, 64."),
    ({"max_bits": True}, "max_bits=True (type bool) is not valid: expected one of 8, 16, 32, 64."),
    ({"max_bits": 128}, "max_bits=128 (type int) is not valid: expected one of 8, 16, 32, 64."),
    (
        {"min_bits": 32, "max_bits": 16},
        "max_bits=16 (type int) is not valid: expected a width >= min_bits=32.",
    ),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_CALLS)
def test_invalid_arguments_are_refused_at_call_time(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fst.float_dtypes(**kwargs)
