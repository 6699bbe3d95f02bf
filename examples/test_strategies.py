"""Hypothesis strategies for floating-point tests: values on a format's grid, corner cases, whole
arrays (NumPy or PyTorch), and FPRev's masked all-one inputs."""

import importlib.util
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given

from pytest_fpcheck import strategies as fst

UNIT_ROUNDOFF_FP16 = 2.0**-11


@given(fst.arrays("float16", 64, elements=fst.floats_on_grid("float16", min_value=-1, max_value=1)))
def test_float16_sum_stays_within_the_a_priori_error_bound(x):
    """|computed - exact| <= gamma_(n-1) * sum |x_i| for any summation order (Higham 4.2)."""
    computed = float(np.sum(x, dtype=np.float16))
    exact = math.fsum(x.astype(np.float64))
    n = x.size
    gamma = (n - 1) * UNIT_ROUNDOFF_FP16 / (1 - (n - 1) * UNIT_ROUNDOFF_FP16)
    assert abs(computed - exact) <= gamma * np.abs(x.astype(np.float64)).sum()


@given(fst.corner_values("float8_e4m3fn"))
def test_every_float8_corner_survives_a_round_trip_through_ml_dtypes(x):
    back = float(np.float64(x).astype(ml_dtypes.float8_e4m3fn).astype(np.float64))
    assert back == x or (math.isnan(back) and math.isnan(x))


@given(fst.masked_all_one(16, dtype="float32"))
def test_a_sequential_sum_counts_the_units_after_the_later_mask(x):
    """FPRev: +M absorbs what is added to it until -M cancels it; only later units survive."""
    total = np.float32(0)
    for value in x:
        total = np.float32(total + value)
    later_mask = max(int(np.argmax(x)), int(np.argmin(x)))
    assert total == 16 - 1 - later_mask


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs PyTorch")
@given(fst.float_dtypes(max_bits=16).flatmap(lambda d: fst.arrays(d, 8, backend="torch")))
def test_widening_to_float32_and_back_is_exact_in_every_narrow_format(t):
    import torch

    back = t.to(torch.float32).to(t.dtype)
    same = (back.to(torch.float64) == t.to(torch.float64)) | torch.isnan(t.to(torch.float64))
    assert bool(same.all())
