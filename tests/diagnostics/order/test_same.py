"""assert_same_order: one tree when two implementations agree, OrderMismatch (an AssertionError)
showing the first differing subtree when they do not."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_fpcheck.diagnostics.order import OrderMismatch, assert_same_order, sum_of
from pytest_fpcheck.errors import FPCheckError

from .test_reveal import np_pairwise, np_sequential, np_strided
from .test_trees import pairwise, sequential


def test_same_orders_give_the_common_tree() -> None:
    tree = assert_same_order(np_sequential, sum_of(sum), 24, dtype="float64")
    assert tree == sequential(24)


def test_different_orders_show_the_first_difference() -> None:
    message = (
        "np_pairwise and np_strided.<locals>.impl accumulate 16 float32 terms in different "
        "orders.\n"
        "First difference: the sum of x[0:16] (16 terms)\n"
        "  np_pairwise adds x[0:8] + x[8:16] (2 operands)\n"
        "  np_strided.<locals>.impl adds x[0::2] + x[1::2] (2 operands)\n"
        "np_pairwise:\n"
        "    sum of x[0:16] (16 terms): pairwise over the 16 terms\n"
        "np_strided.<locals>.impl:\n"
        "    sum of x[0:16] (16 terms): 2 parts combined pairwise\n"
        "      2 of 8 terms, first at x[0], x[1]; each:\n"
        "        sum of x[0::2] (8 terms): sequential, 8 terms, stride 2, from x[0]"
    )
    with pytest.raises(OrderMismatch, match=f"^{re.escape(message)}$") as info:
        assert_same_order(np_pairwise, np_strided(2), 16)
    assert isinstance(info.value, AssertionError)
    assert isinstance(info.value, FPCheckError)
    assert info.value.tree_a == pairwise(16)


def test_the_difference_may_be_deep() -> None:
    def late(x: Any) -> Any:  # pairwise, except that x[6] and x[7] are added to x[0:6]
        return np_pairwise(x[:4]) + np_pairwise(x[4:6]) + x[6] + x[7] + np_pairwise(x[8:])

    with pytest.raises(OrderMismatch) as info:
        assert_same_order(np_pairwise, late, 16)
    lines = str(info.value).splitlines()
    assert lines[1] == "First difference: the sum of x[0:8] (8 terms)"
    assert lines[2] == "  np_pairwise adds x[0:4] + x[4:8] (2 operands)"
    assert (
        lines[3]
        == "  test_the_difference_may_be_deep.<locals>.late adds x[0:7] + x[7] (2 operands)"
    )
