"""``tl.dot``: the midpoint-radius matmul of :mod:`pytest_fpcheck.interval.linalg` with the
accumulation model of :func:`pytest_fpcheck.tracking.core.policy.dot_factor` (float8 dots with
imprecise accumulation keep :data:`.base.FP8_IMPRECISE_ACCUMULATOR_BITS` bits).
"""

from __future__ import annotations

import numpy as np

from ....formats import FORMATS
from ....interval.linalg import matmul
from ...core.policy import dot_factor
from .base import (
    F64,
    FP8_IMPRECISE_ACCUMULATOR_BITS,
    KernelOp,
    rule,
    set_result,
)

__all__ = []


@rule("dot")
def _dot(op: KernelOp) -> None:
    a, b, d, input_precision, max_num_imprecise_acc = op.args
    fa, fb, fd = op.fmt(a), op.fmt(b), op.fmt(d)
    left, right, acc = op.interval(a), op.interval(b), op.interval(d)
    precision = str(getattr(input_precision, "name", input_precision)).lower()
    k = int(np.shape(a.data)[-1])
    accumulator_bits = fd.precision
    if fa.precision == 24 and fb.precision == 24 and "tf32" in precision:
        tf32 = FORMATS["tfloat32"]
        if "x3" in precision:
            # three TF32 products per term, the dropped ones below 2**-20 relative
            inputs, products_exact = "fused", False
            accumulator_bits = min(accumulator_bits, 20)
            k = 3 * k
        else:
            left, right = left.to_format(tf32), right.to_format(tf32)
            inputs, products_exact = "fused", False
    elif max(fa.precision, fb.precision) <= 11 or fa.name == "bfloat16" or fb.name == "bfloat16":
        inputs, products_exact = "fused", accumulator_bits >= 2 * max(fa.precision, fb.precision)
        if fa.name.startswith("float8") or fb.name.startswith("float8"):
            accumulator_bits = min(accumulator_bits, FP8_IMPRECISE_ACCUMULATOR_BITS)
            products_exact = False
    else:
        inputs, products_exact = "ieee", False
    del max_num_imprecise_acc  # float8 accumulation is bounded at its imprecise width anyway
    factor = dot_factor(
        k, inputs=inputs, accumulator_bits=accumulator_bits, products_exact=products_exact
    )
    k_terms = int(np.shape(a.data)[-1])
    result = matmul(left, right, F64, factor=factor, accumulate=fd, k=k_terms, addend=acc)
    set_result(op, result)
