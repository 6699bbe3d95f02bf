"""reveal_order: known orders revealed exactly by the three algorithms (FPRev sections 3.3, 4, 5),
multiway nodes (section 5.2), every format and the accumulator mitigation (section 8.1), and the
refusals of what cannot be revealed."""

from __future__ import annotations

import math
import re
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fpcheck.diagnostics.order import (
    NondeterministicOrder,
    OrderRevealError,
    SummationTree,
    reveal_order,
    sum_of,
)
from pytest_fpcheck.errors import InvalidArgument

from .test_trees import (
    blocked,
    exact_fused_adder,
    fused_chain,
    pairwise,
    reverse,
    sequential,
    strided,
    truncating_replay,
)

ALGORITHMS = ("fprev", "basic", "naive")
NAIVE_N = 7

# -- implementations written with NumPy, independent of SummationTree.replay ------------------


def np_sequential(x: Any) -> Any:
    return np.cumsum(x)[-1]


def np_reverse(x: Any) -> Any:
    return np.cumsum(x[::-1])[-1]


def np_pairwise(x: Any) -> Any:
    while len(x) > 1:
        head = x[: len(x) // 2 * 2]
        summed = head[0::2] + head[1::2]
        x = np.concatenate([summed, x[len(head) :]])
    return x[0]


def np_strided(lanes: int) -> Any:
    def impl(x: Any) -> Any:
        return np_pairwise(np.add.reduce(x.reshape(-1, lanes), axis=0))

    return impl


def np_blocked(block: int) -> Any:
    def impl(x: Any) -> Any:
        return np.cumsum(np.cumsum(x.reshape(-1, block), axis=1)[:, -1])[-1]

    return impl


KNOWN = [
    ("sequential", sequential, lambda n: np_sequential),
    ("reverse", reverse, lambda n: np_reverse),
    ("pairwise", pairwise, lambda n: np_pairwise),
    ("8-way strided", lambda n: strided(n, 8), lambda n: np_strided(8)),
    ("blocks of 4", lambda n: blocked(n, 4), lambda n: np_blocked(4)),
]


def reveal(impl: Any, n: int, algorithm: str, dtype: str = "float32") -> SummationTree:
    return reveal_order(sum_of(impl, backend="numpy"), n, dtype=dtype, algorithm=algorithm)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(("name", "tree_of", "impl_of"), KNOWN, ids=[k[0] for k in KNOWN])
def test_known_orders_are_revealed_exactly(
    algorithm: str, name: str, tree_of: Any, impl_of: Any
) -> None:
    n = 8 if algorithm == "naive" else 64
    expected = tree_of(n)
    revealed = reveal(impl_of(n), n, algorithm)
    assert revealed == expected, name
    assert revealed.verify(sum_of(impl_of(n), backend="numpy"))


@pytest.mark.parametrize(("name", "tree_of", "impl_of"), KNOWN, ids=[k[0] for k in KNOWN])
def test_verify_fails_on_a_perturbed_tree(name: str, tree_of: Any, impl_of: Any) -> None:
    tree = tree_of(64)
    nested = tree.to_nested()
    perturbed = SummationTree.from_nested(_swap_leaves(nested, 0, 63))
    assert perturbed != tree
    assert not perturbed.verify(sum_of(impl_of(64), backend="numpy")), name


def _swap_leaves(nested: Any, a: int, b: int) -> Any:
    """The nested tree with leaves ``a`` and ``b`` exchanged (built without recursion)."""
    built: dict[int, Any] = {}
    stack: list[tuple[Any, bool]] = [(nested, False)]
    while stack:
        item, expanded = stack.pop()
        if not isinstance(item, tuple):
            continue
        if not expanded:
            stack.append((item, True))
            stack.extend((c, False) for c in item)
            continue
        built[id(item)] = tuple(
            built[id(c)] if isinstance(c, tuple) else {a: b, b: a}.get(c, c) for c in item
        )
    return built[id(nested)]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("w", [2, 3, 4])
def test_exact_fused_adders_are_multiway_nodes(algorithm: str, w: int) -> None:
    n = NAIVE_N if algorithm == "naive" else 17
    impl = sum_of(exact_fused_adder(w), backend="numpy")
    tree = reveal_order(impl, n, dtype="float64", algorithm=algorithm)
    assert tree == fused_chain(n, w)
    assert tree.fanout() == (w + 1 if n >= 2 * w else w)
    assert tree.verify(impl)


@pytest.mark.parametrize("algorithm", ["fprev", "basic"])
@pytest.mark.parametrize("w", [4, 8, 16])
def test_truncating_fused_adders_are_multiway_nodes(algorithm: str, w: int) -> None:
    """Matrix accelerators align and truncate before adding (FPRev section 5.2.1): a mask wipes
    out its siblings, the case of the paper's Algorithm 4."""
    n = 3 * w + 1
    tree = fused_chain(n, w)
    revealed = reveal_order(
        sum_of(truncating_replay(tree), backend="numpy"), n, algorithm=algorithm
    )
    assert revealed == tree
    assert revealed.fanout() == w + 1


# -- random trees: every algorithm recovers them ---------------------------------------------


@st.composite
def trees(draw: st.DrawFn, max_n: int, dtype: str = "float32") -> SummationTree:
    """Random summation trees: repeatedly join 2 (or, for fused nodes, 3-5) random subtrees."""
    n = draw(st.integers(2, max_n))
    nodes = list(range(n))
    children: list[list[int]] = []
    while len(nodes) > 1:
        width = draw(st.sampled_from([2, 2, 2, 3, 4, 5]))
        picks = draw(
            st.lists(
                st.integers(0, len(nodes) - 1),
                min_size=min(width, len(nodes)),
                max_size=min(width, len(nodes)),
                unique=True,
            )
        )
        children.append([nodes[p] for p in picks])
        nodes = [v for k, v in enumerate(nodes) if k not in picks] + [n + len(children) - 1]
    return SummationTree(n, children, dtype=dtype)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(trees(max_n=24))
def test_fprev_and_basic_recover_random_trees(tree: SummationTree) -> None:
    impl = sum_of(tree.replay, backend="numpy")
    assert reveal_order(impl, tree.n, algorithm="fprev") == tree
    assert reveal_order(impl, tree.n, algorithm="basic") == tree


@settings(max_examples=25, deadline=None, derandomize=True)
@given(trees(max_n=NAIVE_N))
def test_all_three_algorithms_agree_on_small_random_trees(tree: SummationTree) -> None:
    impl = sum_of(tree.replay, backend="numpy")
    revealed = {a: reveal_order(impl, tree.n, algorithm=a) for a in ALGORITHMS}
    assert revealed["fprev"] == revealed["basic"] == revealed["naive"] == tree


@settings(max_examples=40, deadline=None, derandomize=True)
@given(trees(max_n=20))
def test_random_trees_with_truncating_fused_nodes(tree: SummationTree) -> None:
    impl = sum_of(truncating_replay(tree), backend="numpy")
    assert reveal_order(impl, tree.n, algorithm="fprev") == tree
    assert reveal_order(impl, tree.n, algorithm="basic") == tree


# -- formats and the accumulator mitigation (section 8.1.2) -----------------------------------

FORMATS = ["float64", "float32", "tfloat32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("dtype", FORMATS)
def test_every_format_small(dtype: str) -> None:
    for tree in (strided(8, 2, dtype), fused_chain(9, 4, dtype)):
        impl = sum_of(tree.replay, backend="numpy")
        assert reveal_order(impl, tree.n, dtype=dtype) == tree
        assert reveal_order(impl, tree.n, dtype=dtype, algorithm="basic") == tree


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    st.sampled_from(["float8_e4m3fn", "float8_e5m2"]).flatmap(
        lambda dtype: trees(max_n=48, dtype=dtype)
    ),
    st.booleans(),
)
def test_mitigation_beyond_what_the_format_counts_exactly(
    tree: SummationTree, truncating: bool
) -> None:
    """float8 counts 8 (e5m2) or 16 (e4m3) units exactly: larger sums are revealed by building the
    low subtrees alone (Algorithm 5) or by counting in blocks."""
    impl = truncating_replay(tree) if truncating else tree.replay
    revealed = reveal_order(sum_of(impl, backend="numpy"), tree.n, dtype=tree.dtype)
    assert revealed == tree


@pytest.mark.parametrize(
    ("dtype", "n"), [("bfloat16", 700), ("float16", 2600), ("float8_e4m3fn", 200)]
)
@pytest.mark.parametrize(("name", "tree_of", "impl_of"), KNOWN[:4], ids=[k[0] for k in KNOWN[:4]])
def test_mitigation_for_long_sums(
    dtype: str, n: int, name: str, tree_of: Any, impl_of: Any
) -> None:
    """NumPy adds these formats one rounding at a time; beyond 2**p terms the counts are no longer
    exact and FPRev's Algorithm 5 takes over."""
    n -= n % 8
    tree = SummationTree.from_nested(tree_of(n).to_nested(), dtype=dtype)
    impl = sum_of(impl_of(n), backend="numpy")
    assert reveal_order(impl, n, dtype=dtype) == tree, name
    assert tree.verify(impl)


# -- what cannot be revealed ------------------------------------------------------------------


def test_a_mean_is_refused() -> None:
    def mean(x: Any) -> Any:
        return np_sequential(x) / 16

    message = (
        "impl(x) returned 0.875 for the masked input with +M at x[0] and -M at x[1] "
        "(M = 1.2676506002282294e+30, the other terms 1.0 or 0, dtype float32); expected a whole "
        "number of units of 1.0 between 0 and 14: this is not a plain sum of the terms (a mean "
        "or a scaled sum?), or a compensated or extra-precise summation kept the swamped terms; "
        "such orders cannot be revealed."
    )
    with pytest.raises(OrderRevealError, match=re.escape(message)):
        reveal(mean, 16, "fprev")


def test_overflowing_masks_are_refused() -> None:
    def sum_of_squares(x: Any) -> Any:
        with np.errstate(over="ignore"):
            return np.sum(x * x)

    with pytest.raises(OrderRevealError, match=re.escape("the masks overflowed")):
        reveal(sum_of_squares, 16, "fprev")


def test_a_changing_order_is_refused() -> None:
    calls = [0]

    def impl(x: Any) -> Any:
        calls[0] += 1
        return np_sequential(x) if calls[0] < 16 else np_reverse(x)

    message = (
        "impl(x) returned 14.0 and then 0.0 for the same masked input (+M at x[0], -M at x[1]): "
        "its accumulation order is not fixed (threads, atomics, or an order that depends on the "
        "data), and FPRev can only reveal a fixed order (section 3.2)."
    )
    with pytest.raises(NondeterministicOrder, match=re.escape(message)):
        reveal(impl, 16, "fprev")


def test_contradictory_answers_are_refused_or_fail_verify() -> None:
    def impl(x: Any) -> Any:  # sequential, but reverse whenever the first term is masked
        return np_reverse(x) if abs(x[0]) > 1 else np_sequential(x)

    message = (
        "the answers to the masked queries fit no summation tree (a partial fused sum is "
        "followed by a larger one); the order may depend on the data, or impl may not be a "
        "plain sum in this format."
    )
    with pytest.raises(OrderRevealError, match=re.escape(message)):
        reveal(impl, 16, "fprev")
    # all pairs together do fit a tree (x[0] added at the root), which random inputs refute
    tree = reveal(impl, 16, "basic")
    assert 0 in tree.children(tree.root)
    assert not tree.verify(sum_of(impl, backend="numpy"))


def kahan(x: Any) -> Any:
    total = np.float32(0)
    carry = np.float32(0)
    for value in x:
        y = value - carry
        t = total + y
        carry = (t - total) - y
        total = t
    return total


def test_compensated_summation_passes_the_masks_but_fails_verify() -> None:
    tree = reveal(kahan, 12, "fprev")
    assert tree == sequential(12)
    assert not tree.verify(sum_of(kahan, backend="numpy"))


def test_an_exactly_rounded_sum_is_one_fused_node() -> None:
    tree = reveal_order(sum_of(math.fsum), 20, dtype="float64")
    assert tree == SummationTree.from_nested(tuple(range(20)), dtype="float64")
    assert tree.verify(sum_of(math.fsum))


@pytest.mark.parametrize("algorithm", ["fprev", "basic"])
def test_a_data_dependent_order_fails_verify(algorithm: str) -> None:
    def by_magnitude(x: Any) -> Any:
        return np.cumsum(x[np.argsort(np.abs(x), kind="stable")])[-1]

    tree = reveal(by_magnitude, 16, algorithm)
    assert not tree.verify(sum_of(by_magnitude, backend="numpy"))


# -- complexity: the paper's call counts ------------------------------------------------------


def _calls(impl: Any, n: int, algorithm: str) -> int:
    count = [0]

    def counted(x: Any) -> Any:
        count[0] += 1
        return impl(x)

    reveal(counted, n, algorithm)
    return count[0]


def test_call_counts() -> None:
    n = 256
    pairs = n * (n - 1) // 2
    # queries number 1, 2, 4, 8, ... are asked a second time
    assert _calls(np_sequential, n, "fprev") == n - 1 + (n - 1).bit_length()  # best case
    assert _calls(np_sequential, n, "basic") == pairs + pairs.bit_length()
    assert _calls(np_reverse, n, "fprev") < 4 * n  # the paper's worst case, n(n-1)/2, avoided
    assert _calls(np_pairwise, n, "fprev") < n * math.log2(n)


def test_no_recursion_even_for_a_deep_order() -> None:
    n = 3000
    depth = 0
    frame = sys._getframe()
    while frame.f_back is not None:
        depth += 1
        frame = frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 60)
    try:
        tree = reveal(np_reverse, n, "fprev")
    finally:
        sys.setrecursionlimit(limit)
    assert tree == reverse(n)


# -- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            (3, 8),
            {},
            "impl=3 (type int) is not valid: expected a callable impl(x) -> sum of x (see "
            "fp.order.sum_of, dot_of, matmul_of).",
        ),
        (
            (np.sum, 1),
            {},
            "n=1 (type int) is not valid: expected an int >= 2 (the masks take two of the terms).",
        ),
        (
            (np.sum, 8),
            {"algorithm": "quick"},
            "algorithm='quick' (type str) is not valid: expected one of 'fprev', 'basic', 'naive'.",
        ),
        (
            (np.sum, 8),
            {"dtype": "int8"},
            "dtype='int8' (type str) is not valid: expected one of 'float64', 'float32', ",
        ),
        (
            (np.sum, 13),
            {"algorithm": "naive"},
            "n=13 (type int) is not valid: expected at most 12 for algorithm='naive'. Use 'fprev'.",
        ),
        (
            (np.sum, 300),
            {"algorithm": "basic", "dtype": "bfloat16"},
            "n=300 (type int) is not valid: expected at most 258 for algorithm='basic' with "
            "bfloat16 summed in bfloat16. algorithm='fprev' goes further (FPRev section 8.1.2).",
        ),
        (
            (sum_of(np.sum, accumulator="float64"), 8),
            {"dtype": "float16"},
            "n=8 (type int) is not valid: expected at most 2 for float16 summed in float64. "
            "Beyond it the masks (+-32768.0) cannot swamp the partial sums of units "
            "(5.960464477539063e-08) in float64 (FPRev section 8.1).",
        ),
    ],
)
def test_invalid_arguments(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        reveal_order(*args, **kwargs)
