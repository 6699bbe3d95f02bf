"""The fused-model error bound (pytest_fpcheck.interval.fused) is rigorous: it contains the
emulator's result for every input, checked against mpmath's exact sums, with subnormal,
cancellation and overflow inputs; and it is tight enough to be violated by a wrong model."""

from __future__ import annotations

import functools
import re
from typing import Any

import mpmath
import numpy as np
import pytest

from pytest_fpcheck.diagnostics.probe import probe_matmul
from pytest_fpcheck.emulate import fused_matmul, ieee_matmul
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.formats import FORMATS, numpy_dtype, round_to
from pytest_fpcheck.interval.fused import bound_from_features, fused_error_bound

mpmath.mp.prec = 1400  # every sum of products of these formats is exact


def exact(a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> list[list[Any]]:
    av, bv = a.astype(np.float64), b.astype(np.float64)
    rows = []
    for i in range(av.shape[0]):
        row = []
        for j in range(bv.shape[1]):
            terms = [
                mpmath.mpf(float(x)) * mpmath.mpf(float(y))
                for x, y in zip(av[i], bv[:, j], strict=True)
            ]
            if c is not None:
                terms.append(mpmath.mpf(float(c[i, j])))
            row.append(mpmath.fsum(terms))
        rows.append(row)
    return rows


def inputs(rng: np.random.Generator, kind: str, shape: tuple[int, int], fmt: str) -> np.ndarray:
    info = FORMATS[fmt]
    if kind == "subnormal":
        values = (
            rng.uniform(-1, 1, size=shape)
            * info.smallest_normal
            * 2.0 ** rng.integers(-3, 3, size=shape)
        )
    elif kind == "wide":
        values = rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, size=shape)
    elif kind == "overflow":
        values = rng.standard_normal(shape) * info.max_finite**0.5 * 2
    else:  # cancellation: pairs of terms that nearly cancel
        half = rng.standard_normal((shape[0], shape[1] // 2 + 1)) * 2.0 ** rng.integers(
            -4, 12, size=(shape[0], shape[1] // 2 + 1)
        )
        values = np.concatenate(
            [half, -half * (1 + 2.0 ** -rng.integers(3, 20, size=half.shape))], axis=1
        )[:, : shape[1]]
    return round_to(values, fmt, "toward-zero").astype(numpy_dtype(fmt))


def assert_contained(got: np.ndarray, want: list[list[Any]], radius: np.ndarray) -> None:
    for i, row in enumerate(want):
        for j, value in enumerate(row):
            r = float(radius[i, j])
            if r == np.inf:
                continue
            computed = float(got[i, j])
            assert np.isfinite(computed), (i, j, computed, r)
            assert abs(mpmath.mpf(computed) - value) <= mpmath.mpf(r), (i, j, computed, value, r)


CONFIGS = [
    ("float32", "float32", 1, 0, "nearest-even", "keep"),
    ("float32", "float32", 4, 3, "toward-zero", "flush"),
    ("bfloat16", "float32", 8, 1, "up", "flush-inputs"),
    ("float16", "float32", 16, None, "down", "flush-outputs"),
    ("float16", "float16", 2, 0, "nearest-even", "flush"),
    ("bfloat16", "bfloat16", 32, 2, "toward-zero", "keep"),
    ("float8_e5m2", "float16", 4, 0, "up", "flush-outputs"),
    ("float8_e4m3fn", "float32", 3, 1, "down", "keep"),
]


@pytest.mark.parametrize(("in_dtype", "out", "width", "extra", "rounding", "subnormals"), CONFIGS)
@pytest.mark.parametrize("kind", ["subnormal", "wide", "cancellation", "overflow"])
def test_bound_contains_the_fused_result(
    in_dtype: str,
    out: str,
    width: int,
    extra: int | None,
    rounding: str,
    subnormals: str,
    kind: str,
) -> None:
    rng = np.random.default_rng(abs(hash((in_dtype, out, width, kind))) % 2**32)
    k = 40
    a = inputs(rng, kind, (4, k), in_dtype)
    b = inputs(rng, "wide" if kind == "cancellation" else kind, (k, 3), in_dtype).astype(np.float64)
    b = round_to(np.abs(b) if kind == "cancellation" else b, in_dtype).astype(numpy_dtype(in_dtype))
    c = round_to(rng.standard_normal((4, 3)), out).astype(numpy_dtype(out))
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
    bound = fused_error_bound(
        k,
        width=width,
        extra_bits=extra,
        rounding=rounding,
        in_dtype=in_dtype,
        out_dtype=out,
        subnormals=subnormals,
        has_c=True,
    )
    radius = bound.radius(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64))
    if kind == "overflow" and FORMATS[in_dtype].max_finite ** 2 > FORMATS[out].max_finite:
        assert np.isinf(radius).any()
    assert_contained(got, exact(a, b, c), radius)


@pytest.mark.parametrize("fma", [True, False])
def test_bound_with_an_order_and_rounded_products(fma: bool) -> None:
    from pytest_fpcheck.diagnostics.order import SummationTree

    rng = np.random.default_rng(11)
    order = SummationTree.from_nested(((0, 1, 2), ((3, 4), (5, (6, 7)))))
    a = inputs(rng, "cancellation", (5, 8), "float32")
    b = inputs(rng, "wide", (8, 4), "float32")
    got = ieee_matmul(a, b, out_dtype="float32", order=order, fma=fma)
    bound = fused_error_bound(
        8,
        width=None,
        extra_bits=None,
        rounding="nearest-even",
        in_dtype="float32",
        out_dtype="float32",
        order=order,
        products="exact" if fma else "rounded",
    )
    assert_contained(got, exact(a, b, None), bound.radius(a, b))


def test_a_wrong_model_is_caught() -> None:
    """The bound for 3 extra bits does not hold for hardware with none: the containment check
    can fail (cancellation after truncated alignment)."""
    small = 2.0**-23 * (1 - 2.0**-24)  # just below the quantum of a block led by 1.0
    a = np.array([[1.0, -1.0] + [small] * 30], dtype=np.float32)
    b = np.ones((32, 1), dtype=np.float32)
    got = fused_matmul(a, b, width=32, extra_bits=0, rounding="toward-zero", out_dtype="float32")
    assert float(got[0, 0]) == 0.0  # every small term truncated away
    right = fused_error_bound(
        32, width=32, extra_bits=0, rounding="toward-zero", in_dtype="float32", out_dtype="float32"
    )
    wrong = fused_error_bound(
        32, width=32, extra_bits=8, rounding="nearest-even", in_dtype="float32", out_dtype="float32"
    )
    want = exact(a, b, None)
    assert_contained(got, want, right.radius(a, b))
    with pytest.raises(AssertionError):
        assert_contained(got, want, wrong.radius(a, b))


def test_bound_from_probed_features() -> None:
    matmul = functools.partial(
        fused_matmul,
        width=8,
        extra_bits=1,
        rounding="toward-zero",
        out_dtype="float32",
        subnormals="flush",
    )
    features = probe_matmul(matmul, in_dtype="bfloat16")
    bound = bound_from_features(features, 64)
    rng = np.random.default_rng(5)
    a = inputs(rng, "cancellation", (3, 64), "bfloat16")
    b = inputs(rng, "wide", (64, 2), "bfloat16")
    assert_contained(
        matmul(a, b), exact(a, b, None), bound.radius(a.astype(np.float64), b.astype(np.float64))
    )
    unknown = features.__class__(**{**features.__dict__, "block_width": None, "order": None})
    with pytest.raises(
        InvalidArgument, match=re.escape("The bound needs the shape of the summation tree.")
    ):
        bound_from_features(unknown, 64)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k=0 (type int) is not valid: expected an int >= 1, the number of products."),
        ({"width": 0}, "width=0 (type int) is not valid: expected None or an int >= 1."),
        (
            {"extra_bits": -1},
            "extra_bits=-1 (type int) is not valid: expected None (exact sums) or an int >= 0.",
        ),
        (
            {"rounding": "odd"},
            "rounding='odd' (type str) is not valid: expected None or one of 'nearest-even', 'toward-zero', 'down', 'up'.",
        ),
        (
            {"subnormals": "no"},
            "subnormals='no' (type str) is not valid: expected one of 'keep', 'flush', 'flush-inputs', 'flush-outputs'.",
        ),
        (
            {"products": "fused"},
            "products='fused' (type str) is not valid: expected one of 'exact', 'rounded', 'first-rounded'.",
        ),
        (
            {"width": None},
            "width=None (type NoneType) is not valid: expected an int >= 1 (or an order): the bound needs the tree's shape.",
        ),
    ],
)
def test_invalid_arguments(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {
        "k": 8,
        "width": 4,
        "extra_bits": 0,
        "rounding": "nearest-even",
        "in_dtype": "float16",
        "out_dtype": "float32",
        **kwargs,
    }
    k = arguments.pop("k")
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fused_error_bound(k, **arguments)
