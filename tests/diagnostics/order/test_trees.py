"""SummationTree: construction, canonical form, equality, structure, rendering, replay and
verification (FPRev section 3.2). The builders at the top are shared with the other order tests."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck.diagnostics.order import SummationTree
from pytest_fpcheck.errors import InvalidArgument

# -- known orders, built without recursion ------------------------------------------------------


def sequential(n: int, dtype: str = "float32") -> SummationTree:
    """((x0 + x1) + x2) + ..."""
    children: list[list[int]] = []
    node = 0
    for i in range(1, n):
        children.append([node, i])
        node = n + len(children) - 1
    return SummationTree(n, children, dtype=dtype)


def reverse(n: int, dtype: str = "float32") -> SummationTree:
    """((x[n-1] + x[n-2]) + x[n-3]) + ..."""
    children: list[list[int]] = []
    node = n - 1
    for i in range(n - 2, -1, -1):
        children.append([node, i])
        node = n + len(children) - 1
    return SummationTree(n, children, dtype=dtype)


def _pairwise_over(leaves: list[int], n: int, children: list[list[int]]) -> int:
    """Balanced pairwise sum of ``leaves`` (adjacent pairs first, odd one out carried up)."""
    level = list(leaves)
    while len(level) > 1:
        joined = []
        for a, b in zip(level[0::2], level[1::2], strict=False):
            children.append([a, b])
            joined.append(n + len(children) - 1)
        if len(level) % 2:
            joined.append(level[-1])
        level = joined
    return level[0]


def pairwise(n: int, dtype: str = "float32") -> SummationTree:
    children: list[list[int]] = []
    _pairwise_over(list(range(n)), n, children)
    return SummationTree(n, children, dtype=dtype)


def strided(n: int, lanes: int, dtype: str = "float32") -> SummationTree:
    """``lanes`` ways, lane l summing x[l], x[l + lanes], ... sequentially; lanes combined
    pairwise (NumPy's order inside a block, FPRev section 6.1)."""
    children: list[list[int]] = []
    tops = []
    for lane in range(lanes):
        node = lane
        for i in range(lane + lanes, n, lanes):
            children.append([node, i])
            node = n + len(children) - 1
        tops.append(node)
    _pairwise_over(tops, n, children)
    return SummationTree(n, children, dtype=dtype)


def blocked(n: int, block: int, dtype: str = "float32") -> SummationTree:
    """Contiguous blocks summed sequentially, then the block sums added sequentially."""
    children: list[list[int]] = []
    total = -1
    for start in range(0, n, block):
        node = start
        for i in range(start + 1, min(start + block, n)):
            children.append([node, i])
            node = n + len(children) - 1
        if total < 0:
            total = node
        else:
            children.append([total, node])
            total = n + len(children) - 1
    return SummationTree(n, children, dtype=dtype)


def fused_chain(n: int, w: int, dtype: str = "float32") -> SummationTree:
    """Fused w-term additions into a running sum (tensor-core style, FPRev section 5.2): the first
    node sums x[0:w], every next one the running sum and the next w terms."""
    children: list[list[int]] = [list(range(min(w, n)))]
    for start in range(w, n, w):
        children.append([n + len(children) - 1, *range(start, min(start + w, n))])
    return SummationTree(n, children, dtype=dtype)


def exact_fused_adder(w: int) -> Any:
    """A fused adder written independently of the package: each step adds the running sum and the
    next w float64 terms exactly (Fractions) and rounds once (``float`` of a Fraction rounds to
    nearest, ties to even)."""

    def impl(x: Any) -> float:
        terms = [Fraction(float(v)) for v in np.asarray(x, dtype=np.float64)]
        total = float(sum(terms[:w], Fraction(0)))
        for start in range(w, len(terms), w):
            total = float(Fraction(total) + sum(terms[start : start + w], Fraction(0)))
        return total

    return impl


def round_fraction(value: Fraction, precision: int) -> float:
    """``value`` rounded to ``precision`` significant bits, nearest, ties to even (no underflow or
    overflow handling: the test values stay in range)."""
    if value == 0:
        return 0.0
    exponent = math.floor(math.log2(abs(value)))
    while Fraction(2) ** exponent > abs(value):
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= abs(value):
        exponent += 1
    quantum = Fraction(2) ** (exponent - precision + 1)
    return float(round(value / quantum) * quantum)


def truncating_replay(tree: SummationTree, extra_bits: int = 3) -> Any:
    """``tree`` replayed as matrix accelerators add (FPRev section 5.2.1): a fused node aligns
    its terms to the largest exponent, truncates them to ``p + extra_bits`` bits there, adds them
    exactly and rounds once; a binary node is one IEEE addition."""
    precision = tree.format.precision

    def impl(x: Any) -> float:
        values = {i: Fraction(float(v)) for i, v in enumerate(np.asarray(x, dtype=np.float64))}
        for node in range(tree.n, tree.root + 1):
            terms = [values[c] for c in tree.children(node)]
            if len(terms) > 2 and any(terms):
                top = max(math.floor(math.log2(abs(t))) for t in terms if t)
                quantum = Fraction(2) ** (top - precision + 1 - extra_bits)
                terms = [math.trunc(t / quantum) * quantum for t in terms]
            values[node] = Fraction(round_fraction(sum(terms, Fraction(0)), precision))
        return float(values[tree.root])

    return impl


# -- construction and canonical form ------------------------------------------------------------


def test_nested_round_trip_in_canonical_order() -> None:
    tree = SummationTree.from_nested(((2, 1), (3, 0)))
    assert tree.to_nested() == ((0, 3), (1, 2))
    assert tree.n == 4
    assert tree.root == 6
    assert tree.children(tree.root) == (4, 5)
    assert tree.children(4) == (0, 3)
    assert tree.children(2) == ()
    assert tree.size(4) == 2
    assert tree.min_leaf(5) == 1
    assert tree.leaves(5).tolist() == [1, 2]
    assert tree.dtype == "float32"


def test_children_lists_in_any_numbering() -> None:
    tree = SummationTree(3, [[4, 2], [0, 1]], dtype="float64")
    assert tree.to_nested() == ((0, 1), 2)
    assert tree == sequential(3)


def test_equality_is_up_to_operand_order_and_ignores_dtype() -> None:
    a = SummationTree.from_nested(((0, 1), 2))
    b = SummationTree.from_nested((2, (1, 0)), dtype="float16")
    assert a == b
    assert hash(a) == hash(b)
    assert a != SummationTree.from_nested((0, (1, 2)))
    assert a != SummationTree.from_nested((0, 1, 2))
    assert a != sequential(4)
    assert a != "((0, 1), 2)"


def test_single_leaf() -> None:
    tree = SummationTree(1, [])
    assert tree.root == 0
    assert tree.depth() == 0
    assert tree.fanout() == 0
    assert tree.to_nested() == 0
    assert tree.error_factor(2.0**-24) == 0.0


@pytest.mark.parametrize(
    ("n", "children", "message"),
    [
        (0, [], "n=0 (type int) is not valid: expected an int >= 1, the number of summands."),
        (
            2,
            [[0]],
            "children=[[0]] (type list) is not valid: expected entry 0 (node 2) to list at least "
            "two child nodes.",
        ),
        (
            3,
            [[0, 1], [0, 2]],
            "children=[[0, 1], [0, 2]] (type list) is not valid: expected a tree: node 0 has two "
            "parents (3, 4).",
        ),
        (
            3,
            [[0, 1]],
            "children=[[0, 1]] (type list) is not valid: expected one root joining all 3 leaves, "
            "found 2 roots.",
        ),
        (
            2,
            [[0, 5]],
            "children=[[0, 5]] (type list) is not valid: expected child ids in [0, 3) other than "
            "the node itself.",
        ),
        (
            2,
            [[0, 1.0]],
            "children=[[0, 1.0]] (type list) is not valid: expected int node ids in entry 0.",
        ),
        (
            2,
            [[0, 1], [2, 3]],
            "children=[[0, 1], [2, 3]] (type list) is not valid: expected child ids in [0, 4) "
            "other than the node itself.",
        ),
        (
            2,
            [[0, 3], [1, 2]],
            "children=[[0, 3], [1, 2]] (type list) is not valid: expected one root joining all 2 "
            "leaves, found 0 roots.",
        ),
    ],
)
def test_invalid_children(n: int, children: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        SummationTree(n, children)


@pytest.mark.parametrize(
    ("nested", "message"),
    [
        (
            ((0, 1), 3),
            "nested=((0, 1), 3) (type tuple) is not valid: expected the leaves 0 .. 2, each "
            "exactly once.",
        ),
        (
            ((0,), 1),
            "nested=((0,), 1) (type tuple) is not valid: expected ints (leaves) and tuples or "
            "lists of two or more items.",
        ),
    ],
)
def test_invalid_nested(nested: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        SummationTree.from_nested(nested)


def test_invalid_node() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape("node=5 (type int) is not valid: expected a node id in [0, 5)."),
    ):
        sequential(3).children(5)


# -- structure ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 7, 64, 1000])
def test_sequential_and_pairwise_depths(n: int) -> None:
    assert sequential(n).depth() == n - 1
    assert reverse(n).depth() == n - 1
    assert pairwise(n).depth() == math.ceil(math.log2(n))
    assert sequential(n).fanout() == 2
    assert sequential(n).roundings().tolist() == [n - 1, *range(n - 1, 0, -1)]


def test_fused_chain_structure() -> None:
    tree = fused_chain(16, 4)
    assert tree.fanout() == 5
    assert tree.depth() == 4
    assert tree.roundings().tolist() == [4] * 4 + [3] * 4 + [2] * 4 + [1] * 4


def test_to_dot() -> None:
    assert SummationTree.from_nested(((0, 1), 2, 3)).to_dot() == (
        "digraph summation_tree {\n"
        "  rankdir=BT;\n"
        '  0 [label="x[0]", shape=box];\n'
        '  1 [label="x[1]", shape=box];\n'
        '  2 [label="x[2]", shape=box];\n'
        '  3 [label="x[3]", shape=box];\n'
        '  4 [label="+", shape=circle];\n'
        "  0 -> 4;\n"
        "  1 -> 4;\n"
        '  5 [label="+ (3 terms)", shape=circle];\n'
        "  4 -> 5;\n"
        "  2 -> 5;\n"
        "  3 -> 5;\n"
        "}\n"
    )


def test_to_text_summarises_repeating_structure() -> None:
    assert sequential(16).to_text() == (
        "sum of x[0:16] (16 terms): sequential, 16 terms, stride 1, from x[0]"
    )
    assert reverse(16).to_text() == (
        "sum of x[0:16] (16 terms): sequential, 16 terms, stride -1, from x[15]"
    )
    assert pairwise(64).to_text() == "sum of x[0:64] (64 terms): pairwise over the 64 terms"
    assert strided(1024, 8).to_text() == (
        "sum of x[0:1024] (1024 terms): 8 parts combined pairwise\n"
        "  8 of 128 terms, first at x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]; each:\n"
        "    sum of x[0::8] (128 terms): sequential, 128 terms, stride 8, from x[0]"
    )
    assert blocked(64, 16).to_text() == (
        "sum of x[0:64] (64 terms): 4 parts combined sequentially\n"
        "  4 of 16 terms, first at x[0], x[16], x[32], x[48]; each:\n"
        "    sum of x[0:16] (16 terms): sequential, 16 terms, stride 1, from x[0]"
    )
    assert fused_chain(16, 4).to_text() == (
        "sum of x[0:16] (16 terms): sequential in fused steps (4 terms, then 4 per step: 5-term "
        "adds), 16 terms, x[0:16]"
    )


def test_to_text_shows_operands_of_irregular_trees_within_max_lines() -> None:
    tree = SummationTree.from_nested(((0, (1, 2)), ((3, 4, 5), 6)))
    assert tree.to_text() == (
        "sum of x[0:7] (7 terms): addition of\n"
        "  sum of x[0:3] (3 terms): sequential, 3 terms, stride -1, from x[2]\n"
        "  sum of x[3:7] (4 terms): one fused sum of 3 terms, x[3:6], then adds x[6] one at a "
        "time"
    )
    assert tree.to_text(max_lines=2) == ("sum of x[0:7] (7 terms): addition of\n  ...")
    with pytest.raises(
        InvalidArgument,
        match=re.escape("max_lines=0 (type int) is not valid: expected an int >= 1."),
    ):
        tree.to_text(max_lines=0)


def test_first_difference() -> None:
    a, b = strided(32, 8), strided(32, 4)
    node_a, node_b = a.first_difference(b)  # type: ignore[misc]
    assert node_a == a.root
    assert node_b == b.root
    assert a.first_difference(strided(32, 8)) is None
    with pytest.raises(
        InvalidArgument,
        match=re.escape("other=3 (type int) is not valid: expected a SummationTree with n=32."),
    ):
        a.first_difference(3)  # type: ignore[arg-type]


def test_a_hundred_thousand_deep_tree_is_handled_without_recursion() -> None:
    n = 100_000
    tree = reverse(n)
    assert tree.depth() == n - 1
    assert tree.to_text() == (
        "sum of x[0:100000] (100000 terms): sequential, 100000 terms, stride -1, from x[99999]"
    )
    assert tree == reverse(n)
    assert tree.first_difference(sequential(n)) == (tree.root, sequential(n).root)
    assert tree.error_factor(2.0**-53) > (n - 1) * 2.0**-53
    assert len(tree.to_dot().splitlines()) == 3 + n + 3 * (n - 1)


# -- replay and verification --------------------------------------------------------------------


def test_replay_follows_the_order() -> None:
    big = 2.0**24
    x = np.array([big, 1.0, -big], dtype=np.float32)
    assert SummationTree.from_nested(((0, 1), 2)).replay(x) == 0.0
    assert SummationTree.from_nested((0, (1, 2))).replay(x) == 1.0
    assert SummationTree.from_nested((0, 1, 2)).replay(x) == 1.0
    rows = np.stack([x, x[::-1]])
    assert SummationTree.from_nested(((0, 1), 2)).replay(rows).tolist() == [0.0, 1.0]


def test_replay_in_a_wider_accumulator() -> None:
    x = np.array([2048.0, 1.0, 1.0], dtype=np.float16)
    tree = SummationTree.from_nested(((0, 1), 2), dtype="float16")
    assert tree.replay(x) == 2048.0
    assert tree.replay(x, accumulator="float32") == 2050.0
    assert tree.replay(np.array([2048, 1, 0], dtype=np.float16), accumulator="float32") == 2048.0
    assert (
        tree.replay(
            np.array([2048, 1, 0], dtype=np.float16), accumulator="float32", output="float32"
        )
        == 2049.0
    )


def test_replay_of_a_fused_node_rounds_once() -> None:
    # 1 + 2**-24 + 2**-24 is exactly 1 + 2**-23: representable, unlike either partial sum
    x = np.array([1.0, 2.0**-24, 2.0**-24], dtype=np.float32)
    assert SummationTree.from_nested((0, 1, 2)).replay(x) == 1.0 + 2.0**-23
    assert SummationTree.from_nested(((0, 1), 2)).replay(x) == 1.0
    # a tie broken by the exact sum: 1 + 2**-24 + 2**-60 rounds up in float32
    x = np.array([1.0, 2.0**-24, 2.0**-60], dtype=np.float64)
    tree = SummationTree.from_nested((0, 1, 2), dtype="float32")
    assert tree.replay(x) == 1.0 + 2.0**-23


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"x": np.ones(4)},
            "x=<numpy array of shape (4,) and dtype float64> (type ndarray) is not valid: "
            "expected 3 values, or an array of shape (trials, 3).",
        ),
        (
            {"x": np.array([0.1, 0.2, 0.3])},
            "x=<numpy array of shape (3,) and dtype float64> (type ndarray) is not valid: "
            "expected values on the float32 grid.",
        ),
        (
            {"x": np.ones(3), "accumulator": "float16"},
            "accumulator='float16' (type str) is not valid: expected a format that holds every "
            "float32 value.",
        ),
    ],
)
def test_replay_rejects(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        sequential(3).replay(**kwargs)


def test_verify_and_mismatch() -> None:
    tree = strided(64, 8)

    def impl(x: Any) -> Any:
        lanes = np.add.reduce(x.reshape(-1, 8), axis=0)  # lane l: x[l], x[l+8], ... in order
        return (lanes[0] + lanes[1] + (lanes[2] + lanes[3])) + (
            lanes[4] + lanes[5] + (lanes[6] + lanes[7])
        )

    assert tree.verify(impl)
    assert tree.mismatch(impl, trials=4) is None
    wrong = strided(64, 4)
    assert not wrong.verify(impl)
    found = wrong.mismatch(impl)
    assert found is not None
    assert found.actual == float(impl(found.inputs))
    assert found.expected == wrong.replay(found.inputs)
    assert str(found).startswith(f"trial {found.trial}: replaying the tree gives ")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trials": 0}, "trials=0 (type int) is not valid: expected an int >= 1."),
        ({"seed": 1.5}, "seed=1.5 (type float) is not valid: expected an int."),
    ],
)
def test_verify_rejects(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        sequential(3).verify(np.sum, **kwargs)
