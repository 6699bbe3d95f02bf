"""fp.emulate: the fused multi-term model against an exact rational reference, known values of
the features it stands for (FTTN, paper 004 sections 5-6.1), the IEEE model, and bad arguments."""

from __future__ import annotations

import math
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from pytest_fpcheck.diagnostics.order import SummationTree
from pytest_fpcheck.emulate import fused_matmul, ieee_matmul
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.formats import FORMATS, numpy_dtype, round_to

from .reference import chain_entry

ROUNDINGS = ("nearest-even", "toward-zero", "down", "up")


def random_matrix(
    rng: np.random.Generator, shape: tuple[int, int], fmt: str, span: int = 10
) -> np.ndarray:
    """Values on ``fmt``'s grid with exponents in [-span, span/2), signs mixed, some subnormal."""
    values = rng.uniform(1, 2, size=shape) * 2.0 ** rng.integers(-span, span // 2, size=shape)
    values *= rng.choice([-1.0, 1.0], size=shape)
    tiny = FORMATS[fmt].smallest_normal
    values = np.where(rng.random(shape) < 0.1, values * tiny / 2**10, values)
    return round_to(values, fmt, "toward-zero").astype(numpy_dtype(fmt))


CONFIGS = [
    ("float32", "float32", 1, 0, "nearest-even", "keep"),
    ("float32", "float32", 4, 3, "toward-zero", "flush"),
    ("bfloat16", "float32", 8, 1, "up", "flush-inputs"),
    ("float16", "float32", 16, 2, "down", "flush-outputs"),
    ("float16", "float16", 2, 0, "nearest-even", "keep"),
    ("bfloat16", "bfloat16", 32, None, "toward-zero", "keep"),
    ("float8_e4m3fn", "float16", 4, 1, "nearest-even", "flush"),
    ("float8_e5m2", "float32", 3, None, "up", "keep"),
]


@pytest.mark.parametrize(("in_dtype", "out", "width", "extra", "rounding", "subnormals"), CONFIGS)
def test_fused_matmul_matches_the_exact_reference(
    in_dtype: str, out: str, width: int, extra: int | None, rounding: str, subnormals: str
) -> None:
    rng = np.random.default_rng(width * 7 + (extra or 9))
    span = 10 if FORMATS[out].emax > 15 else 6  # no overflow of a float16 accumulator
    a = random_matrix(rng, (3, 24), in_dtype, span)
    b = random_matrix(rng, (24, 2), in_dtype, span)
    c = round_to(rng.standard_normal((3, 2)), out).astype(numpy_dtype(out))
    got = fused_matmul(
        a,
        b,
        c,
        width=width,
        extra_bits=extra,
        rounding=rounding,
        out_dtype=out,
        subnormals=subnormals,
    )
    fmt, in_fmt = FORMATS[out], FORMATS[in_dtype]
    flush_in = subnormals in ("flush", "flush-inputs")
    av, bv = a.astype(np.float64), b.astype(np.float64)
    if flush_in:
        av = np.where(np.abs(av) < in_fmt.smallest_normal, 0.0, av)
        bv = np.where(np.abs(bv) < in_fmt.smallest_normal, 0.0, bv)
    for i in range(3):
        for j in range(2):
            products = [float(av[i, t] * bv[t, j]) for t in range(24)]
            start = float(c[i, j])
            if flush_in and abs(start) < fmt.smallest_normal:
                start = 0.0
            want = chain_entry(
                products,
                start,
                width=width,
                extra=extra,
                mode=rounding,
                fmt=fmt,
                flush_outputs=subnormals in ("flush", "flush-outputs"),
            )
            assert float(got[i, j]) == want, (i, j)
    assert got.dtype == numpy_dtype(out)


def one_row(*terms: float, dtype: Any = np.float32) -> tuple[np.ndarray, np.ndarray]:
    return np.array([terms], dtype=dtype), np.ones((len(terms), 1), dtype=dtype)


@pytest.mark.parametrize(
    ("width", "extra", "expected"),
    [(1, 0, 1.0), (2, 0, 1.0), (2, 1, 1.0), (4, 1, 1 + 2**-23), (4, None, 1 + 2**-23)],
)
def test_alignment_keeps_extra_bits_only_within_one_block(
    width: int, extra: int | None, expected: float
) -> None:
    """1 + 2**-24 + 2**-24: sequential adds lose both halves (ties to even); a 4-term block
    keeps them with one extra bit (or exactly), and their sum is a whole ulp."""
    a, b = one_row(1.0, 2.0**-24, 2.0**-24)
    got = fused_matmul(
        a, b, width=width, extra_bits=extra, rounding="nearest-even", out_dtype="float32"
    )
    assert float(got[0, 0]) == expected


@pytest.mark.parametrize(
    ("rounding", "positive", "negative"),
    [
        ("nearest-even", 2.0, -2.0),
        ("toward-zero", 2.0, -2.0),
        ("down", 2.0, -(2.0 + 2**-22)),
        ("up", 2.0 + 2**-22, -2.0),
    ],
)
def test_rounding_of_a_carry_into_a_new_binade(
    rounding: str, positive: float, negative: float
) -> None:
    """(1 + 2**-23) + 1 = 2 + half an ulp of 2: FTTN's rounding-direction test (Figure 2)."""
    for sign, expected in ((1.0, positive), (-1.0, negative)):
        a, b = one_row(sign * (1 + 2.0**-23), sign * 1.0)
        got = fused_matmul(a, b, width=2, extra_bits=0, rounding=rounding, out_dtype="float32")
        assert float(got[0, 0]) == expected


def test_subnormal_flushing_of_inputs_and_results() -> None:
    tiny = FORMATS["float16"].smallest_subnormal
    a, b = one_row(tiny, 0.0, dtype=np.float16)
    b[0, 0] = 2.0**10
    keep = fused_matmul(a, b, width=1, extra_bits=0, rounding="nearest-even", out_dtype="float16")
    flushed = fused_matmul(
        a,
        b,
        width=1,
        extra_bits=0,
        rounding="nearest-even",
        out_dtype="float16",
        subnormals="flush-inputs",
    )
    assert float(keep[0, 0]) == tiny * 2**10
    assert float(flushed[0, 0]) == 0.0
    a, b = one_row(2.0**-10, 0.0, dtype=np.float16)
    b[0, 0] = 2.0**-10  # the product 2**-20 is subnormal in float16
    kept = fused_matmul(a, b, width=1, extra_bits=0, rounding="nearest-even", out_dtype="float16")
    gone = fused_matmul(
        a,
        b,
        width=1,
        extra_bits=0,
        rounding="nearest-even",
        out_dtype="float16",
        subnormals="flush-outputs",
    )
    assert float(kept[0, 0]) == 2.0**-20
    assert float(gone[0, 0]) == 0.0


def test_fma_keeps_the_low_part_of_a_product() -> None:
    """-RN(x y) + x y: a fused multiply-add returns the rounding error of the product, a
    multiply followed by an add returns 0."""
    x = np.float32(1 + 2.0**-12)
    rounded = np.float32(np.float64(x) * np.float64(x))
    a = np.array([[-rounded, x]], dtype=np.float32)
    b = np.array([[1.0], [x]], dtype=np.float32)
    fma = ieee_matmul(a, b, out_dtype="float32")
    plain = ieee_matmul(a, b, out_dtype="float32", fma=False)
    assert float(fma[0, 0]) == 2.0**-24
    assert float(plain[0, 0]) == 0.0


def test_ieee_matmul_follows_the_order_given() -> None:
    """0.5 + 512 + 512.5 in float16 depends on the order (FPRev section 1)."""
    a = np.array([[0.5, 512.0, 512.5]], dtype=np.float16)
    b = np.ones((3, 1), dtype=np.float16)
    left = ieee_matmul(a, b, out_dtype="float16")
    right = ieee_matmul(a, b, out_dtype="float16", order=SummationTree.from_nested((0, (1, 2))))
    assert float(left[0, 0]) == 1025.0
    assert float(right[0, 0]) == 1024.0


def test_wide_chain_of_exact_sums_is_the_ieee_fma_chain() -> None:
    rng = np.random.default_rng(3)
    a = random_matrix(rng, (5, 40), "float32")
    b = random_matrix(rng, (40, 4), "float32")
    fused = fused_matmul(
        a, b, width=1, extra_bits=None, rounding="nearest-even", out_dtype="float32"
    )
    assert np.array_equal(fused, ieee_matmul(a, b, out_dtype="float32"))


def test_bfloat16_and_torch_inputs() -> None:
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 2.0**-8, 2.0**-8]], dtype=ml_dtypes.bfloat16)
    b = np.ones((3, 1), dtype=ml_dtypes.bfloat16)
    want = fused_matmul(a, b, width=2, extra_bits=1, rounding="nearest-even", out_dtype="bfloat16")
    ta = torch.tensor([[1.0, 2.0**-8, 2.0**-8]], dtype=torch.bfloat16)
    got = fused_matmul(
        ta,
        torch.ones(3, 1, dtype=torch.bfloat16),
        width=2,
        extra_bits=1,
        rounding="nearest-even",
        out_dtype="bfloat16",
    )
    assert float(got[0, 0]) == float(want[0, 0]) == 1.0


A = np.ones((2, 3), dtype=np.float32)
B = np.ones((3, 2), dtype=np.float32)
GOOD: dict[str, Any] = {
    "width": 4,
    "extra_bits": 0,
    "rounding": "nearest-even",
    "out_dtype": "float32",
}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: fused_matmul(A, B, **{**GOOD, "width": 0}),
            "width=0 (type int) is not valid: expected an int in [1, 256] (products fused per addition).",
        ),
        (
            lambda: fused_matmul(A, B, **{**GOOD, "extra_bits": 17}),
            "extra_bits=17 (type int) is not valid: expected an int in [0, 16] (or None: exact sums).",
        ),
        (
            lambda: fused_matmul(A, B, **{**GOOD, "rounding": "nearest"}),
            "rounding='nearest' (type str) is not valid: expected one of 'nearest-even', 'toward-zero', 'down', 'up'.",
        ),
        (
            lambda: fused_matmul(A, B, **GOOD, subnormals="ftz"),
            "subnormals='ftz' (type str) is not valid: expected one of 'keep', 'flush', 'flush-inputs', 'flush-outputs'.",
        ),
        (
            lambda: fused_matmul(A, B, **{**GOOD, "out_dtype": "float64"}),
            "out_dtype='float64' (type str) is not valid: expected an accumulator format of at most 24 bits, e.g. 'float32'.",
        ),
        (
            lambda: fused_matmul(A.astype(np.float64), B, **GOOD),
            "a=<numpy array of shape (2, 3) and dtype float64> (type ndarray) is not valid: expected values of at most 24 significant bits (float32, tfloat32, float16, bfloat16, float8_e4m3fn, float8_e5m2). Matrix units take low-precision inputs; float64 products are not exact here.",
        ),
        (
            lambda: fused_matmul([[1.0]], B, **GOOD),
            "a=[[1.0]] (type list) is not valid: expected a NumPy array or PyTorch tensor of float32, float16, bfloat16 or float8 values. Wrap a list as np.asarray(x, dtype=np.float32): the input format matters.",
        ),
        (
            lambda: fused_matmul(A, B.astype(np.float16), **GOOD),
            "b=<numpy array of shape (3, 2) and dtype float16> (type ndarray) is not valid: expected a matrix of the same format as a (float32).",
        ),
        (
            lambda: fused_matmul(A, A, **GOOD),
            "b=<numpy array of shape (2, 3) and dtype float32> (type ndarray) is not valid: expected a matrix with 3 rows (a has shape (2, 3)).",
        ),
        (
            lambda: fused_matmul(A[0], B, **GOOD),
            "a=<numpy array of shape (3,) and dtype float32> (type ndarray) is not valid: expected a 2-D matrix.",
        ),
        (
            lambda: fused_matmul(A, B, np.full((2, 2), 0.1), **GOOD),
            "c=<numpy array of shape (2, 2) and dtype float64> (type ndarray) is not valid: expected values on the float32 grid, of shape (2, 2).",
        ),
        (
            lambda: ieee_matmul(A, B, out_dtype="float32", order=SummationTree.from_nested((0, 1))),
            "order=SummationTree",
        ),
        (
            lambda: ieee_matmul(A, B, out_dtype="float32", fma=1),
            "fma=1 (type int) is not valid: expected True or False.",
        ),
    ],
)
def test_invalid_arguments(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


def test_scalar_c_and_large_inputs_overflow_by_the_rounding_mode() -> None:
    big = FORMATS["float32"].max_finite
    a, b = one_row(big, big)
    up = fused_matmul(a, b, width=2, extra_bits=0, rounding="up", out_dtype="float32")
    zero = fused_matmul(a, b, width=2, extra_bits=0, rounding="toward-zero", out_dtype="float32")
    assert math.isinf(float(up[0, 0]))
    assert float(zero[0, 0]) == big
    shifted = fused_matmul(*one_row(1.0), 2.0, **GOOD)
    assert float(shifted[0, 0]) == 3.0
