"""masked_all_one: FPRev's inputs (sections 3.2 and 8.1). One +M, one -M, units elsewhere; in the
format's own arithmetic every summation order yields the unit times the number of summands
outside the subtree where +M and -M meet."""

from __future__ import annotations

import functools
import re
from typing import Any, TypeAlias

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from pytest_fpcheck import formats as F
from pytest_fpcheck import strategies as fst
from pytest_fpcheck.errors import InvalidArgument

from .draws import draw_values

ALL = list(F.FORMATS)
Tree: TypeAlias = "int | tuple[Tree, Tree]"


def draws(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """Deterministic draws (see tests/strategies/draws.py)."""
    return draw_values(strategy, count)


def sequential(n: int) -> Tree:
    tree: Tree = 0
    for leaf in range(1, n):
        tree = (tree, leaf)
    return tree


def pairwise(first: int, stop: int) -> Tree:
    if stop - first == 1:
        return first
    middle = (first + stop) // 2
    return (pairwise(first, middle), pairwise(middle, stop))


def four_lanes(n: int) -> Tree:
    """Lane k sums the summands k, k + 4, ... sequentially; the lanes are then added pairwise."""
    lanes = [sequential_of(list(range(k, n, 4))) for k in range(min(4, n))]
    while len(lanes) > 1:
        lanes = [
            (lanes[i], lanes[i + 1]) if i + 1 < len(lanes) else lanes[i]
            for i in range(0, len(lanes), 2)
        ]
    return lanes[0]


def sequential_of(leaves: list[int]) -> Tree:
    tree: Tree = leaves[0]
    for leaf in leaves[1:]:
        tree = (tree, leaf)
    return tree


def leaves_of(tree: Tree) -> set[int]:
    if isinstance(tree, int):
        return {tree}
    return leaves_of(tree[0]) | leaves_of(tree[1])


def unmasked(tree: Tree, n: int, i: int, j: int) -> int:
    """Summands outside the smallest subtree holding leaves i and j (FPRev section 3.2)."""
    node = tree
    while not isinstance(node, int):
        inside = [child for child in node if {i, j} <= leaves_of(child)]
        if not inside:
            break
        node = inside[0]
    return n - len(leaves_of(node))


def largest_n(fmt: F.Format, cap: int) -> int:
    """The largest n <= cap that mask_and_unit accepts for ``fmt``."""
    for n in range(cap, 1, -1):
        try:
            F.mask_and_unit(fmt, n)
        except InvalidArgument:
            continue
        return n
    raise AssertionError(f"mask_and_unit accepts no n for {fmt.name}")


def summed(values: list[float], tree: Tree, fmt: F.Format) -> float:
    """The sum in ``fmt``'s arithmetic: each addition rounded to nearest-even in ``fmt``."""
    if isinstance(tree, int):
        return values[tree]
    exact = summed(values, tree[0], fmt) + summed(values, tree[1], fmt)
    return float(F.round_to(exact, fmt))


@pytest.mark.parametrize("name", ALL)
@given(data=st.data())
@settings(max_examples=40, database=None, deadline=None, derandomize=True)
def test_every_summation_order_leaves_the_unmasked_units(name: str, data: st.DataObject) -> None:
    fmt = F.FORMATS[name]
    n = data.draw(st.integers(2, largest_n(fmt, 40)))
    array = data.draw(fst.masked_all_one(n, dtype=name))
    _, unit = F.mask_and_unit(fmt, n)
    values = array.astype(np.float64).tolist()
    i, j = int(np.argmax(values)), int(np.argmin(values))
    for tree in (sequential(n), pairwise(0, n), four_lanes(n)):
        assert summed(values, tree, fmt) == unmasked(tree, n, i, j) * unit
    if fmt.storage:
        native = functools.reduce(lambda total, x: total + x, array)
        assert native.dtype == array.dtype
        assert float(native) == (n - 1 - max(i, j)) * unit


@pytest.mark.parametrize("name", ALL)
def test_one_plus_mask_one_minus_mask_and_units_elsewhere(name: str) -> None:
    fmt = F.FORMATS[name]
    mask, unit = F.mask_and_unit(fmt, 10)
    for array in draws(fst.masked_all_one(10, dtype=name), 20):
        assert array.dtype == F.numpy_dtype(fmt)
        assert array.shape == (10,)
        values = array.astype(np.float64)
        assert (values == mask).sum() == 1
        assert (values == -mask).sum() == 1
        assert (values == unit).sum() == 8


def test_float16_uses_fprev_section_8_1_mask_and_unit() -> None:
    array = draws(fst.masked_all_one(4, dtype="float16", positions=(2, 0)), 1)[0]
    np.testing.assert_array_equal(
        array.astype(np.float64), [-(2.0**15), 2.0**-24, 2.0**15, 2.0**-24]
    )


def test_pinned_positions_place_plus_and_minus_mask() -> None:
    arrays = draws(fst.masked_all_one(5, positions=[3, 1]), 5)
    expected = [1.0, -(2.0**100), 1.0, 2.0**100, 1.0]
    for array in arrays:
        assert array.dtype == np.float32
        np.testing.assert_array_equal(array.astype(np.float64), expected)


def test_drawn_positions_cover_every_ordered_pair_and_shrink_to_the_first_two() -> None:
    strategy = fst.masked_all_one(3, dtype="bfloat16")
    pairs = {(int(np.argmax(a)), int(np.argmin(a))) for a in draws(strategy, 200)}
    assert pairs == {(i, j) for i in range(3) for j in range(3) if i != j}
    simplest = find(strategy, lambda a: True, settings=settings(database=None, derandomize=True))
    assert (int(np.argmax(simplest)), int(np.argmin(simplest))) == (0, 1)


def test_each_draw_is_a_fresh_array() -> None:
    strategy = fst.masked_all_one(4, positions=(0, 1))
    first, second = draws(st.tuples(strategy, strategy), 1)[0]
    first[2] = 7
    assert second[2] == 1


BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    (
        {"n": 1},
        "n=1 (type int) is not valid: expected an int >= 2 (one +M, one -M, ones elsewhere).",
    ),
    (
        {"n": True},
        "n=True (type bool) is not valid: expected an int >= 2 (one +M, one -M, ones elsewhere).",
    ),
    (
        {"n": 5000, "dtype": "float16"},
        "n=5000 (type int) is not valid: expected at most 2050 for float16 summed in float16 "
        "(mask 32768.0, unit 5.960464477539063e-08). FPRev section 8.1: the accumulator cannot "
        "keep partial sums exact beyond it.",
    ),
    (
        {"dtype": "int32"},
        "dtype='int32' (type str) is not valid: expected one of 'float64', 'float32', "
        "'tfloat32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2'.",
    ),
    (
        {"positions": (1, 1)},
        "positions=(1, 1) (type tuple) is not valid: expected two distinct indices (one +M, one -M).",
    ),
    (
        {"positions": (0, 5)},
        "positions=(0, 5) (type tuple) is not valid: expected indices in [0, 4] for n=5.",
    ),
    (
        {"positions": (-1, 2)},
        "positions=(-1, 2) (type tuple) is not valid: expected indices in [0, 4] for n=5.",
    ),
    (
        {"positions": 3},
        "positions=3 (type int) is not valid: expected None or a pair (i, j) of ints: where +M "
        "and -M go.",
    ),
    (
        {"positions": (0, 1, 2)},
        "positions=(0, 1, 2) (type tuple) is not valid: expected None or a pair (i, j) of ints: "
        "where +M and -M go.",
    ),
    (
        {"positions": ("0", 1)},
        "positions=('0', 1) (type tuple) is not valid: expected None or a pair (i, j) of ints: "
        "where +M and -M go.",
    ),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_CALLS)
def test_invalid_arguments_are_refused_at_call_time(kwargs: dict[str, Any], message: str) -> None:
    n = kwargs.pop("n", 5)
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fst.masked_all_one(n, **kwargs)
