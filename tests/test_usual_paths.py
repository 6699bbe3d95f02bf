"""The branch-free paths of sums and products (``kernels.elementwise.usual_ends``) against the
general paths (``sum_element``, ``product_element``): wherever an element is called usual, its
ends are the general path's bits, onto float64 and float32, stepped or not, for every pair of
intervals whose ends are signed zeros, subnormals, float32's smallest numbers, ordinary and huge
numbers or infinities. Products with a zero end (a square of an interval holding 0, a product
with an exact zero) are usual: the compiled passes take them without the second, element by
element pass."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from pytest_fpcheck import formats as F
from pytest_fpcheck.interval.kernels import elementwise, format_args

VALUES = [0.0, -0.0, 5e-324, -5e-324, 1e-310, -1e-310, 2.0**-149, -(2.0**-149), 2.0**-150]
VALUES += [1.0, -1.0, 3.0, -0.5, 1e300, -1e300, 2.0**-537, -(2.0**-537), math.inf, -math.inf]
INTERVALS = np.array([(a, b) for a in VALUES for b in VALUES if a <= b])


@numba.njit
def _compare(ends, product, switch, fast32, fa):  # type: ignore[no-untyped-def]
    """(pairs whose usual ends differ from the general path's bits, usual pairs, pairs with a
    zero end of the exact hull that are usual)."""
    differ = usual_count = zero_usual = 0
    for i in range(ends.shape[0]):
        for j in range(ends.shape[0]):
            x_lo, x_hi, y_lo, y_hi = ends[i, 0], ends[i, 1], ends[j, 0], ends[j, 1]
            low, high, usual = elementwise.usual_ends(
                x_lo, x_hi, y_lo, y_hi, product, switch, fast32
            )
            if not usual:
                continue
            usual_count += 1
            if product:
                g_lo, g_hi = elementwise.product_element(x_lo, x_hi, y_lo, y_hi, switch, fa, fast32)
                hull = (x_lo * y_lo, x_lo * y_hi, x_hi * y_lo, x_hi * y_hi)
                zero_usual += (min(hull) == 0) | (max(hull) == 0)
            elif switch:
                g_lo, g_hi = elementwise.sum_element(x_lo, x_hi, -y_hi, -y_lo, fa, fast32)
            else:
                g_lo, g_hi = elementwise.sum_element(x_lo, x_hi, y_lo, y_hi, fa, fast32)
            same = (np.float64(low).view(np.int64) == np.float64(g_lo).view(np.int64)) & (
                np.float64(high).view(np.int64) == np.float64(g_hi).view(np.int64)
            )
            differ += not same
    return differ, usual_count, zero_usual


@pytest.mark.parametrize("fast32", [False, True], ids=["float64", "float32"])
@pytest.mark.parametrize(
    ("product", "switch"),
    [(True, True), (True, False), (False, False), (False, True)],
    ids=["stepped-product", "product", "sum", "difference"],
)
def test_usual_elements_take_the_general_paths_bits(product, switch, fast32):
    fa = format_args(F.format_of("float32" if fast32 else "float64"))
    differ, usual, zero_usual = _compare(INTERVALS, product, switch, fast32, fa)
    assert differ == 0
    assert usual > INTERVALS.shape[0] ** 2 // 2
    if product:
        # about a fifth of the pairs have a zero end: all of those with finite ends are usual
        assert zero_usual > INTERVALS.shape[0] ** 2 // 8


@numba.njit(error_model="numpy")  # IEEE division, as the kernels compile it
def _compare_quotients(ends, fast32, fa):  # type: ignore[no-untyped-def]
    """(pairs whose usual ends differ from the general path's bits, usual pairs, usual pairs
    with a zero quotient at an end)."""
    differ = usual_count = zero_usual = 0
    for i in range(ends.shape[0]):
        for j in range(ends.shape[0]):
            x_lo, x_hi, y_lo, y_hi = ends[i, 0], ends[i, 1], ends[j, 0], ends[j, 1]
            low, high, usual = elementwise.quotient_usual(x_lo, x_hi, y_lo, y_hi, fa, fast32)
            if not usual:
                continue
            usual_count += 1
            zero_usual += (x_lo == 0) | (x_hi == 0)
            g_lo, g_hi = elementwise.quotient_element(x_lo, x_hi, y_lo, y_hi, fa, fast32)
            same = (np.float64(low).view(np.int64) == np.float64(g_lo).view(np.int64)) & (
                np.float64(high).view(np.int64) == np.float64(g_hi).view(np.int64)
            )
            differ += not same
    return differ, usual_count, zero_usual


@pytest.mark.parametrize("name", ["float64", "float32", "bfloat16"])
def test_usual_quotients_take_the_general_paths_bits(name):
    """Quotients (a dropout mask's zeros and ones over its keep probability among them): every
    pair the branch-free pass calls usual has the general path's bits, zero dividends
    included; divisors holding zero and infinite ends are not usual."""
    fa = format_args(F.format_of(name))
    differ, usual, zero_usual = _compare_quotients(INTERVALS, name == "float32", fa)
    assert differ == 0
    assert usual > INTERVALS.shape[0] ** 2 // 8
    assert zero_usual > INTERVALS.shape[0] ** 2 // 25
