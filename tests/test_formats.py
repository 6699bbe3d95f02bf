"""The format table against numpy/torch/ml_dtypes, and exact rounding on every bit pattern."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

from pytest_fpcheck import formats as F
from pytest_fpcheck.errors import InvalidArgument

NARROW = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
STORAGE = ["float64", "float32", *NARROW]


def all_values(name: str) -> np.ndarray:
    """Every value of an 8- or 16-bit format, from its bit patterns, as float64."""
    fmt = F.FORMATS[name]
    bits = np.arange(2**fmt.bits, dtype=np.uint16 if fmt.bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        return bits.view(F.numpy_dtype(fmt)).astype(np.float64)


def finite_grid(name: str) -> np.ndarray:
    values = all_values(name)
    return np.unique(values[np.isfinite(values)])


@pytest.mark.parametrize("name", STORAGE)
def test_facts_match_numpy_and_ml_dtypes_finfo(name: str) -> None:
    fmt = F.FORMATS[name]
    info = ml_dtypes.finfo(F.numpy_dtype(fmt))
    assert fmt.precision == info.nmant + 1
    assert fmt.emin == info.minexp
    assert fmt.emax == info.maxexp - 1
    assert fmt.eps == float(info.eps)
    assert fmt.max_finite == float(info.max)
    assert fmt.smallest_normal == float(info.smallest_normal)
    assert fmt.smallest_subnormal == float(info.smallest_subnormal)
    assert fmt.unit_roundoff == fmt.eps / 2
    assert fmt.bits == info.bits
    if fmt.bits <= 16:
        values = all_values(name)
        assert fmt.has_inf == bool(np.isinf(values).any())
        assert fmt.has_nan == bool(np.isnan(values).any())


@pytest.mark.parametrize("name", STORAGE)
def test_facts_match_torch_finfo(name: str) -> None:
    torch = pytest.importorskip("torch")
    fmt = F.FORMATS[name]
    info = torch.finfo(getattr(torch, name))
    assert fmt.eps == info.eps
    assert fmt.max_finite == info.max
    assert fmt.smallest_normal == info.smallest_normal
    assert fmt.bits == info.bits
    assert F.format_of(getattr(torch, name)) is fmt
    assert F.format_of(torch.zeros(2, dtype=getattr(torch, name))) is fmt


def test_tfloat32_facts() -> None:
    tf32, f32 = F.FORMATS["tfloat32"], F.FORMATS["float32"]
    assert (tf32.precision, tf32.emin, tf32.emax) == (11, f32.emin, f32.emax)
    assert tf32.max_finite == (2 - 2**-10) * 2.0**127
    assert tf32.smallest_subnormal == 2.0**-136
    assert not tf32.storage
    assert tf32.bits == 32
    assert F.numpy_dtype("tf32") == np.float32


def rounding_inputs(grid: np.ndarray) -> np.ndarray:
    """Grid values, midpoints and their float32 neighbours, beyond the ends, and specials; all
    exactly representable in float32 (so that casts from float32 are a valid oracle)."""
    mids = ((grid[:-1] + grid[1:]) / 2).astype(np.float32)
    top = np.float32(grid[-1])
    with np.errstate(over="ignore"):
        xs = np.concatenate(
            [
                grid.astype(np.float32),
                mids,
                np.nextafter(mids, np.float32(np.inf)),
                np.nextafter(mids, np.float32(-np.inf)),
                np.array([top * 1.01, -top * 1.01, top * 4, np.inf, -np.inf, np.nan], np.float32),
            ]
        )
    return xs


def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", NARROW)
def test_nearest_even_matches_ml_dtypes_casts_on_every_bit_pattern(name: str) -> None:
    xs = rounding_inputs(finite_grid(name))
    with np.errstate(over="ignore", invalid="ignore"):
        expected = xs.astype(F.numpy_dtype(name)).astype(np.float64)
    got = F.round_to(xs.astype(np.float64), name)
    bad = ~same(got, expected)
    assert not bad.any(), (xs[bad][:5], got[bad][:5], expected[bad][:5])


@pytest.mark.parametrize("name", NARROW)
def test_nearest_even_matches_torch_casts_on_every_bit_pattern(name: str) -> None:
    torch = pytest.importorskip("torch")
    xs = rounding_inputs(finite_grid(name))
    expected = torch.from_numpy(xs).to(getattr(torch, name)).double().numpy()
    got = F.round_to(xs.astype(np.float64), name)
    bad = ~same(got, expected)
    if name == "float8_e4m3fn":
        # torch saturates what overflows (infinities included) to +-448, where ml_dtypes and
        # round_to give NaN for a format without infinities; every other element must agree.
        assert (np.abs(xs[bad]) > 448).all()
        assert (np.abs(expected[bad]) == 448).all()
    else:
        assert not bad.any(), (xs[bad][:5], got[bad][:5], expected[bad][:5])


@pytest.mark.parametrize("name", NARROW)
@pytest.mark.parametrize("mode", ["toward-zero", "up", "down"])
def test_directed_rounding_matches_brute_force_on_every_bit_pattern(name: str, mode: str) -> None:
    fmt = F.FORMATS[name]
    grid = finite_grid(name)
    xs = rounding_inputs(grid).astype(np.float64)
    xs = xs[np.isfinite(xs)]
    below = grid[np.clip(np.searchsorted(grid, xs, side="right") - 1, 0, None)]
    above = grid[np.clip(np.searchsorted(grid, xs, side="left"), None, len(grid) - 1)]
    overflow = np.inf if fmt.has_inf else np.nan
    down = np.where(xs < grid[0], -overflow, below)
    up = np.where(xs > grid[-1], overflow, above)
    # the brute-force grid has one zero; directed rounding keeps the sign of the input
    down = np.where(down == 0, np.copysign(0.0, xs), down)
    up = np.where(up == 0, np.copysign(0.0, xs), up)
    expected = {"down": down, "up": up, "toward-zero": np.where(xs >= 0, down, up)}[mode]
    expected = np.where(np.abs(expected) > fmt.max_finite, np.sign(xs) * fmt.max_finite, expected)
    if mode != "toward-zero":
        expected = np.where((xs > grid[-1]) & (mode == "up"), overflow, expected)
        expected = np.where((xs < grid[0]) & (mode == "down"), -overflow, expected)
    got = F.round_to(xs, name, mode)
    bad = ~same(got, expected)
    assert not bad.any(), (xs[bad][:5], got[bad][:5], expected[bad][:5])


def test_float32_rounding_matches_numpy_casts() -> None:
    rng = np.random.default_rng(1)
    xs = np.concatenate(
        [
            rng.standard_normal(20000) * 10.0 ** rng.integers(-45, 39, 20000),
            np.float32(np.arange(1, 2000)).astype(np.float64) * 2.0**-149 * 1.5,
            [3.4028235677973366e38, 3.4028236e38, -3.5e38, 0.0, -0.0],
        ]
    )
    with np.errstate(over="ignore"):
        expected = xs.astype(np.float32).astype(np.float64)
    assert same(F.round_to(xs, "float32"), expected).all()
    assert same(F.round_to(xs, "float64"), xs).all()


def test_directed_float32_rounding_brackets_and_is_adjacent() -> None:
    rng = np.random.default_rng(2)
    xs = rng.standard_normal(5000) * 10.0 ** rng.integers(-44, 38, 5000)
    down, up = F.round_to(xs, "float32", "down"), F.round_to(xs, "float32", "up")
    assert (down <= xs).all()
    assert (xs <= up).all()
    inexact = down != up
    assert (F.next_up(down[inexact], "float32") == up[inexact]).all()


def test_tfloat32_rounding_keeps_ten_fraction_bits() -> None:
    x = 1 + 2.0**-10 + 2.0**-11  # a tie between 1 + 2**-10 and 1 + 2**-9
    assert F.round_to(x, "tf32") == 1 + 2.0**-9
    assert F.round_to(x, "tf32", "toward-zero") == 1 + 2.0**-10
    assert F.round_to(1e-40, "tf32") == round(1e-40 / 2.0**-136) * 2.0**-136


@pytest.mark.parametrize("name", NARROW)
def test_ordinals_are_the_magnitude_bit_patterns(name: str) -> None:
    values = all_values(name)
    finite = np.isfinite(values)
    fmt = F.FORMATS[name]
    bits = np.arange(2**fmt.bits, dtype=np.int64)
    sign_bit = 1 << (fmt.bits - 1)
    signed = np.where(bits & sign_bit, -(bits & (sign_bit - 1)), bits)
    assert (F.ordinal(values[finite], name) == signed[finite]).all()
    assert same(
        F.from_ordinal(signed[finite], name), np.abs(values[finite]) * np.sign(signed[finite]) + 0.0
    ).all()


@pytest.mark.parametrize("name", NARROW)
def test_next_up_and_down_step_through_the_whole_grid(name: str) -> None:
    grid = finite_grid(name)
    fmt = F.FORMATS[name]
    assert (F.next_up(grid[:-1], name) == grid[1:]).all()
    assert (F.next_down(grid[1:], name) == grid[:-1]).all()
    top = F.next_up(grid[-1], name)
    assert (top == np.inf) if fmt.has_inf else np.isnan(top)
    assert F.next_up(-np.inf, name) == -fmt.max_finite
    assert np.isnan(F.next_up(np.nan, name))
    assert F.next_up(0.0, name) == fmt.smallest_subnormal == F.next_up(-0.0, name)
    mids = (grid[:-1] + grid[1:]) / 2
    assert (F.next_up(mids, name) == grid[1:]).all()


def test_next_up_float64_and_float32_agree_with_nextafter() -> None:
    xs = np.array([0.0, 1.0, -1.0, 1e-310, 1e308, -np.inf, np.finfo(np.float64).max])
    with np.errstate(over="ignore"):
        assert (F.next_up(xs, "float64") == np.nextafter(xs, np.inf)).all()
    x32 = np.array([1.0, -2.0, 1e-45, 3.4028235e38], np.float32)
    with np.errstate(over="ignore"):
        expected = np.nextafter(x32, np.float32(np.inf)).astype(np.float64)
    assert (F.next_up(x32.astype(np.float64), "float32") == expected).all()


@pytest.mark.parametrize("name", ["float64", "float32", "float16"])
def test_ulp_matches_numpy_spacing(name: str) -> None:
    dtype = np.dtype(name)
    xs = np.array([1.0, 1.5, 2.0, 1000.0, 3e-5, 0.0, 1e-7], dtype=dtype)
    expected = np.spacing(np.abs(xs)).astype(np.float64)
    assert (F.ulp(xs.astype(np.float64), name) == expected).all()
    assert np.isnan(F.ulp(np.inf, name))


def test_is_on_grid() -> None:
    assert F.is_on_grid([1.0, 1 + 2.0**-10, np.nan, np.inf], "float16").tolist() == [
        True,
        True,
        True,
        True,
    ]
    assert F.is_on_grid([1 + 2.0**-11, 1e6, np.inf], "float8_e4m3fn").tolist() == [
        False,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("name", "acc", "n"),
    [("float16", "float16", 2049), ("float16", "float32", 2050), ("bfloat16", "float32", 258)],
)
def test_mask_and_unit_swamp_every_partial_sum(name: str, acc: str, n: int) -> None:
    mask, unit = F.mask_and_unit(name, n, accumulator=acc)
    assert F.is_on_grid([mask, -mask, unit], name).all()
    partial = np.arange(n - 1, dtype=np.float64) * unit
    assert (F.round_to(partial, acc) == partial).all()
    assert (F.round_to(mask + partial, acc) == mask).all()
    assert (F.round_to(-mask + partial, acc) == -mask).all()


def test_mask_and_unit_refuses_what_cannot_be_revealed() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "n=2051 (type int) is not valid: expected at most 2050 for float16 summed in float16"
        ),
    ):
        F.mask_and_unit("float16", 2051)
    with pytest.raises(
        InvalidArgument, match=re.escape("expected at most 2 for float8_e4m3fn summed in float32")
    ):
        F.mask_and_unit("float8_e4m3fn", 3, accumulator="float32")
    with pytest.raises(
        InvalidArgument, match=re.escape("n=1 (type int) is not valid: expected an int >= 2")
    ):
        F.mask_and_unit("float32", 1)
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "accumulator='float16' (type str) is not valid: expected a format at least as precise as float32"
        ),
    ):
        F.mask_and_unit("float32", 8, accumulator="float16")


def test_format_of_accepts_every_spelling() -> None:
    assert F.format_of("half").name == "float16"
    assert F.format_of("torch.bfloat16").name == "bfloat16"
    assert F.format_of(np.float32).name == "float32"
    assert F.format_of(np.zeros(3, ml_dtypes.float8_e5m2)).name == "float8_e5m2"
    assert F.format_of(ml_dtypes.bfloat16).name == "bfloat16"
    assert F.format_of(1.5).name == "float64"
    assert F.format_of(F.FORMATS["tfloat32"]).name == "tfloat32"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("float12", "dtype='float12' (type str) is not valid: expected one of 'float64', "),
        (np.int32, "dtype=<class 'numpy.int32'> (type type) is not valid: expected a floating"),
        (np.zeros(2, np.int8), "dtype=<numpy array of shape (2,) and dtype int8> (type ndarray)"),
        (object(), "(type object) is not valid: expected a floating format name, dtype or array"),
    ],
)
def test_format_of_rejects_non_float_formats(value: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        F.format_of(value)


def test_format_of_rejects_torch_integer_dtype() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(
        InvalidArgument,
        match=re.escape("dtype=torch.int64 (type dtype) is not valid: expected a floating dtype"),
    ):
        F.format_of(torch.int64)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: F.round_to(1.0, "float16", "nearest"),
            "mode='nearest' (type str) is not valid: expected one of 'nearest-even', 'toward-zero', 'up', 'down'.",
        ),
        (
            lambda: F.round_to("a", "float16"),
            "x='a' (type str) is not valid: expected real numbers",
        ),
        (
            lambda: F.ordinal(1 + 2.0**-12, "float16"),
            "x=1.000244140625 (type float) is not valid: expected finite values on the float16 grid.",
        ),
        (
            lambda: F.from_ordinal(2**15, "float16"),
            "k=32768 (type int) is not valid: expected ordinals in [-31743, 31743] for float16.",
        ),
        (lambda: F.ulp(1.0, "int8"), "fmt='int8' (type str) is not valid"),
    ],
)
def test_helpers_reject_bad_arguments(call: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()  # type: ignore[operator]


def test_float64_ordinals_do_not_overflow() -> None:
    xs = np.array([2.0**60, -1e300, 5e-324, np.finfo(np.float64).max])
    k = F.ordinal(xs, "float64")
    assert k.dtype == np.int64
    assert (F.from_ordinal(k, "float64") == xs).all()
    assert k[3] == F.FORMATS["float64"].max_ordinal == 0x7FEFFFFFFFFFFFFF


def test_overflow_limits_follow_ieee_754_section_7_4() -> None:
    """Nearest-even and the direction away from zero overflow (to the given infinity or NaN),
    the directions toward zero give the largest finite number."""
    big = 448.0
    limits = {mode: F.overflow_limits(F.MODE_CODES[mode], big, math.inf) for mode in F.MODE_CODES}
    assert limits == {
        "nearest-even": (math.inf, -math.inf),
        "toward-zero": (big, -big),
        "down": (big, -math.inf),
        "up": (math.inf, -big),
    }
    assert sorted(F.MODE_CODES) == sorted(F.ROUNDING_MODES)
