"""The grid of emulated fused multi-term matmuls that fp.probe_matmul must recover (issue 9),
shared by the CI slice (test_probe.py) and the whole-grid campaign (benchmarks/bench_probe.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pytest_fpcheck.diagnostics.probe import MAX_CALLS, MatmulFeatures
from pytest_fpcheck.emulate import fused_matmul

PAIRS = [
    ("float32", "float32"),
    ("tfloat32", "float32"),
    ("bfloat16", "float32"),
    ("bfloat16", "bfloat16"),
    ("float16", "float16"),
    ("float16", "float32"),
    ("float8_e5m2", "float16"),
    ("float8_e4m3fn", "float16"),
]
WIDTHS = (1, 2, 4, 8, 16, 32)
ROUNDINGS = ("nearest-even", "toward-zero", "down", "up")
SUBNORMALS = ("keep", "flush", "flush-inputs", "flush-outputs")

#: (input format, result format, width, extra bits, rounding, subnormals)
Config = tuple[str, str, int, int, str, str]


def emulated(config: Config) -> Callable[[Any, Any], Any]:
    """The emulated matmul of one configuration."""
    _, out, width, extra, rounding, subnormals = config
    return functools.partial(
        fused_matmul,
        width=width,
        extra_bits=extra,
        rounding=rounding,
        out_dtype=out,
        subnormals=subnormals,
    )


def unreachable(in_dtype: str, out: str, subnormals: str) -> set[str]:
    """Features no input can reveal: float16 products never fall below float32's normal range;
    float8_e4m3fn products of normal numbers never fall below float16's."""
    if (in_dtype, out) == ("float16", "float32"):
        return {"subnormal_outputs"}
    if in_dtype == "float8_e4m3fn" and subnormals in ("flush", "flush-inputs"):
        return {"subnormal_outputs"}
    return set()


def mismatches(features: MatmulFeatures, config: Config) -> list[str]:
    """What the probe got wrong for ``config``: each feature must equal the emulated parameter
    (None where unreachable), within the call budget, and the revealed tree must have fan-out
    width + 1."""
    in_dtype, out, width, extra, rounding, subnormals = config
    hidden = unreachable(in_dtype, out, subnormals)
    expected = {
        "block_width": width,
        "extra_bits": extra,
        "exact_sums": False,
        "rounding": rounding,
        "subnormal_inputs": subnormals in ("keep", "flush-outputs"),
        "subnormal_outputs": subnormals in ("keep", "flush-inputs"),
        "products_exact": True,
        "products": "exact",
        "accumulator": out,
        "conversion": None,
        "out_dtype": out,
    }
    wrong = [
        f"{name}={getattr(features, name)!r}"
        for name, value in expected.items()
        if getattr(features, name) != (None if name in hidden else value)
    ]
    if features.calls > MAX_CALLS:
        wrong.append(f"calls={features.calls}")
    if features.order is not None and features.order.fanout() != width + 1:
        wrong.append(f"fanout={features.order.fanout()}")
    return wrong
