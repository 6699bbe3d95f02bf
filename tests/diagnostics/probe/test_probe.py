"""fp.probe_matmul (FTTN, paper 004 section 5): the probes recover the parameters of every
emulated fused multi-term model in a seeded slice of the grid (the whole grid runs in
benchmarks/bench_probe.py), within 200 calls; undecidable features are None; a matmul outside
the model family is described by no model; bad arguments are refused."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck.diagnostics.probe import MAX_CALLS, MatmulFeatures, probe_matmul
from pytest_fpcheck.emulate import fused_matmul
from pytest_fpcheck.emulate.models import evaluate_products, tree_plan
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.formats import FORMATS, round_to

from .probe_grid import PAIRS, ROUNDINGS, SUBNORMALS, WIDTHS, emulated, mismatches


def grid_slice() -> list[tuple[str, str, int, int, str, str]]:
    """The corners, then a seeded sample, on a few (formats, width) pairs so that the probe
    libraries (cached per order and formats) are shared."""
    corners = [
        ("float32", "float32", 1, 0, "nearest-even", "keep"),
        ("float32", "float32", 32, 3, "up", "flush"),
        ("bfloat16", "bfloat16", 1, 3, "down", "flush-inputs"),
        ("float16", "float16", 32, 0, "toward-zero", "flush-outputs"),
        ("tfloat32", "float32", 16, 0, "nearest-even", "flush"),
        ("float8_e5m2", "float16", 8, 3, "toward-zero", "keep"),
        ("float8_e4m3fn", "float16", 2, 1, "up", "keep"),
        ("float16", "float32", 4, 2, "down", "flush-outputs"),
    ]
    rng = np.random.default_rng(20250611)
    keys = [
        (*PAIRS[int(i)], int(w))
        for i, w in zip(rng.choice(len(PAIRS), 6), rng.choice(WIDTHS, 6), strict=True)
    ]
    sample = []
    for _ in range(32):
        in_dtype, out, width = keys[int(rng.integers(len(keys)))]
        sample.append(
            (
                in_dtype,
                out,
                width,
                int(rng.integers(4)),
                str(rng.choice(ROUNDINGS)),
                str(rng.choice(SUBNORMALS)),
            )
        )
    return corners + sample


@pytest.mark.parametrize(
    ("in_dtype", "out", "width", "extra", "rounding", "subnormals"), grid_slice()
)
def test_probes_recover_the_emulated_parameters(
    in_dtype: str, out: str, width: int, extra: int, rounding: str, subnormals: str
) -> None:
    config = (in_dtype, out, width, extra, rounding, subnormals)
    features = probe_matmul(emulated(config), in_dtype=in_dtype)
    assert mismatches(features, config) == []


def ties_away(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sequential float32 sums rounded to nearest with ties away from zero: no model of the
    family rounds that way."""
    av, bv = a.astype(np.float64), b.astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]))
    for t in range(a.shape[1]):
        exact = acc + np.outer(av[:, t], bv[t])
        low, high = round_to(exact, "float32", "down"), round_to(exact, "float32", "up")
        nearest = round_to(exact, "float32")
        tie = (exact - low == high - exact) & (low != high)
        acc = np.where(tie, np.where(exact > 0, high, low), nearest)
    return acc.astype(np.float32)


def test_a_matmul_outside_the_family_has_unknown_features() -> None:
    features = probe_matmul(ties_away, in_dtype="float32")
    assert features.order is not None
    assert features.consistent == 0
    assert (features.rounding, features.extra_bits, features.block_width) == (None, None, None)
    assert "no model of the family explains the matmul" in " ".join(features.notes) or (
        "no fused multi-term model explains" in " ".join(features.notes)
    )
    assert features.calls <= MAX_CALLS


def test_a_matmul_whose_order_cannot_be_revealed() -> None:
    def noisy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        exact = a.astype(np.float64) @ b.astype(np.float64)
        return np.nextafter(exact.astype(np.float32), np.float32(np.inf))

    features = probe_matmul(noisy, in_dtype="float32")
    assert features.order is None
    assert all(
        getattr(features, name) is None for name in ("rounding", "block_width", "subnormal_inputs")
    )
    assert features.notes[-1].startswith("accumulation order not revealed")


def test_numpy_features_predict_numpy() -> None:
    """The probed model of NumPy's float32 matmul on this machine reproduces element [0, 0] of
    NumPy's results on random inputs (nothing about NumPy is assumed)."""
    features = probe_matmul(np.matmul, in_dtype="float32")
    assert features.order is not None
    assert features.consistent == 1
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((64, 16)).astype(np.float32)
    products = (a[0].astype(np.float64) * b[:, 0].astype(np.float64))[None, :]
    predicted = evaluate_products(
        products,
        tree_plan(features.order, with_c=False),
        accumulator=FORMATS[features.accumulator or "float32"],
        extra_bits=features.extra_bits,
        rounding=features.rounding or "nearest-even",
        flush_outputs=not features.subnormal_outputs,
        products=features.products or "exact",
        out=FORMATS["float32"],
    )
    assert float(predicted[0]) == float((a @ b)[0, 0])


def test_summary_and_header() -> None:
    matmul = functools.partial(
        fused_matmul, width=4, extra_bits=3, rounding="toward-zero", out_dtype="float32"
    )
    features = probe_matmul(matmul, in_dtype="bfloat16")
    calls = features.calls
    assert features.summary() == "\n".join(
        [
            "matmul features: bfloat16 inputs, float32 results (16x64 @ 64x16)",
            "  products exact                              yes",
            "  how products enter the sums                 exact",
            "  block width (terms fused per addition)      4",
            "  extra alignment bits                        3",
            "  exact sums (IEEE: no alignment truncation)  no",
            "  rounding of each addition                   toward-zero",
            "  subnormal inputs kept                       yes",
            "  subnormal results kept                      yes",
            "  accumulator format                          float32",
            "  rounding of the conversion to the result    n/a (accumulates in the result's format)",
            "  accumulation order                          9 terms, fan-out 5, depth 3",
            "  consistent models                           1",
            f"  matmul calls                                {calls} (at most 200)",
            "  note: order revealed over the first 9 terms (three blocks)",
        ]
    )
    assert features.header() == (
        "matmul bfloat16->float32: width=4 extra_bits=3 rounding=toward-zero acc=float32 "
        f"products_exact=true subnormals in/out=kept/kept calls={calls}"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"matmul": 3},
            "matmul=3 (type int) is not valid: expected a callable matmul(a, b) -> a @ b.",
        ),
        (
            {"in_dtype": "float64"},
            "in_dtype='float64' (type str) is not valid: expected a format of at most 24 bits",
        ),
        ({"in_dtype": "float31"}, "in_dtype='float31' (type str) is not valid: expected one of"),
        (
            {"out_dtype": "float8_e5m2"},
            "out_dtype='float8_e5m2' (type str) is not valid: expected None, 'float32', 'float16' or 'bfloat16'.",
        ),
        (
            {"out_dtype": "float16"},
            "out_dtype='float16' (type str) is not valid: expected the format of matmul's results (float32) or None.",
        ),
        (
            {"matmul": lambda a, b: (a @ b)[:2]},
            "expected a callable returning a (16, 16) matrix, got shape (2, 16).",
        ),
        (
            {"matmul": lambda a, b: (a.astype(np.float64) @ b).tolist()},
            "out_dtype=None (type NoneType) is not valid: expected the format of matmul's results ('float32', 'float16' or 'bfloat16'); it cannot be read from a result of type list.",
        ),
    ],
)
def test_invalid_arguments(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"matmul": np.matmul, "in_dtype": "float32", **kwargs}
    matmul = arguments.pop("matmul")
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        probe_matmul(matmul, **arguments)


def test_features_are_frozen() -> None:
    features = MatmulFeatures(
        "float32", "float32", None, None, None, None, None, None, None, None, None, None, None, 0, 0
    )
    with pytest.raises(AttributeError):
        features.rounding = "up"  # type: ignore[misc]
    assert "unknown" in features.summary()


def test_a_probe_reports_itself_not_the_trees_it_reveals_on_the_way() -> None:
    from pytest_fpcheck.assertions.sink import collecting

    with collecting() as published:
        features = probe_matmul(np.matmul, in_dtype="float16")
    assert [(p.kind, p.result) for p in published] == [("probes", features)]
