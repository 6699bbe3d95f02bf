"""corner_values: the corner cases of every format, on its grid, simplest first."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import find, settings

from pytest_fpcheck import formats as F
from pytest_fpcheck import strategies as fst
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.strategies._corners import corner_list

ALL = list(F.FORMATS)


def signed(values: Iterable[float]) -> set[tuple[float, bool]]:
    """Values keyed with their sign bit, so that 0.0 and -0.0 differ (NaN left out)."""
    return {(x, math.copysign(1.0, x) < 0) for x in values if not math.isnan(x)}


@pytest.mark.parametrize("name", ALL)
def test_the_listed_corners_are_present_on_the_grid_and_unique(name: str) -> None:
    fmt = F.FORMATS[name]
    corners = corner_list(fmt)
    assert F.is_on_grid(np.array(corners), fmt).all()
    assert len(signed(corners)) == len(corners) - 1  # NaN once, everything else once
    tiny = fmt.smallest_subnormal
    required = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        float(F.next_up(1.0, fmt)),
        float(F.next_down(1.0, fmt)),
        tiny,
        -tiny,
        fmt.smallest_normal - tiny,
        fmt.smallest_normal,
        -fmt.smallest_normal,
        math.ldexp(1.0, fmt.emax),
        fmt.max_finite,
        -fmt.max_finite,
    ]
    assert signed(required) <= signed(corners)
    assert sum(math.isnan(x) for x in corners) == 1
    infinities = {x for x in corners if math.isinf(x)}
    assert infinities == ({math.inf, -math.inf} if fmt.has_inf else set())


def test_float8_e4m3fn_has_no_infinite_corner() -> None:
    assert not any(math.isinf(x) for x in corner_list(F.FORMATS["float8_e4m3fn"]))


@pytest.mark.parametrize("name", ALL)
def test_cast_ties_of_every_lower_precision_format_are_ties(name: str) -> None:
    """Each listed 1 + u_G and 1 + 3 u_G lies exactly halfway between two G values, and the
    first rounds down to 1, the second up (round-to-nearest-even)."""
    fmt = F.FORMATS[name]
    corners = set(corner_list(fmt))
    for narrow in F.FORMATS.values():
        if narrow.precision >= fmt.precision:
            continue
        down_tie = 1.0 + narrow.unit_roundoff
        up_tie = 1.0 + 3 * narrow.unit_roundoff
        for tie in (down_tie, up_tie):
            assert tie in corners
            below = float(F.round_to(tie, narrow, "down"))
            above = float(F.round_to(tie, narrow, "up"))
            assert tie - below == above - tie > 0
        assert float(F.round_to(down_tie, narrow)) == 1.0
        assert float(F.round_to(up_tie, narrow)) == 1.0 + 4 * narrow.unit_roundoff


def test_overflow_and_underflow_ties_of_narrower_formats_appear_where_representable() -> None:
    corners = set(corner_list(F.FORMATS["float32"]))
    assert 65520.0 in corners  # float16: 65504 + 32 / 2 rounds to inf
    assert 2.0**-25 in corners  # float16: half the smallest subnormal rounds to 0
    assert 464.0 in corners  # float8_e4m3fn: 448 + 32 / 2
    assert 2.0**-150 not in corners  # float32's own underflow tie is not a float32 value


@pytest.mark.parametrize("name", ALL)
def test_the_strategy_draws_the_list_and_shrinks_to_zero(name: str) -> None:
    fmt = F.FORMATS[name]
    strategy = fst.corner_values(name)
    search = settings(database=None, derandomize=True, max_examples=500)
    assert find(strategy, lambda x: True, settings=search) == 0.0
    assert math.isnan(find(strategy, math.isnan, settings=search))
    found = find(strategy, lambda x: abs(x) == fmt.max_finite, settings=search)
    assert found == fmt.max_finite


def test_invalid_dtype_is_refused() -> None:
    message = (
        "dtype='complex64' (type str) is not valid: expected one of 'float64', 'float32', "
        "'tfloat32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fst.corner_values("complex64")
