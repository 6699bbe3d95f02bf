"""Revealing accumulation orders: FPRev (Xie et al., "Revealing Floating-Point Accumulation Orders
in Software/Hardware Implementations"), exported as ``fp.order``.

``fp.reveal_order(impl, n)`` finds the summation tree of ``impl`` from its results on *masked
all-one* inputs (section 4.1: one ``+M``, one ``-M``, units elsewhere), with the paper's three
algorithms: ``"naive"`` (section 3.3: search the trees, checked on random inputs; small ``n``
only), ``"basic"`` (BasicFPRev, section 4: all ``n(n-1)/2`` pairs, joined with a union-find) and
``"fprev"`` (section 5: queries on demand, multiway nodes for fused multi-term sums, and the
accumulator mitigation of section 8.1.2). Masks and units per format follow section 8.1 (see
``_order_query``); the tree and its error factor are in ``_order_tree``.

``impl(x)`` gets a NumPy array of the format's dtype and returns the sum. The adapters here build
``impl`` for the common shapes::

    fp.reveal_order(fp.order.sum_of(numpy.sum), 1024)
    fp.reveal_order(fp.order.dot_of(torch.dot), 256)
    fp.reveal_order(fp.order.matmul_of(torch.matmul, 4, 256, 4), 256)

``fp.assert_same_order(impl_a, impl_b, n)`` fails with :class:`OrderMismatch` (an
``AssertionError``) showing the first subtree where the orders differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from ..formats import Format, format_of
from ._order_adapters import OrderImpl, dot_of, matmul_of, scales_both, sum_of
from ._order_errors import NondeterministicOrder, OrderMismatch, OrderRevealError
from ._order_query import Querier, encoding_for
from ._order_reveal import NAIVE_MAX_N, reveal_basic, reveal_fprev, reveal_naive
from ._order_text import describe_leaves
from ._order_tree import Mismatch, SummationTree

__all__ = [
    "ALGORITHMS",
    "Mismatch",
    "NondeterministicOrder",
    "OrderImpl",
    "OrderMismatch",
    "OrderRevealError",
    "SummationTree",
    "assert_same_order",
    "dot_of",
    "matmul_of",
    "reveal_order",
    "sum_of",
]

ALGORITHMS = ("fprev", "basic", "naive")


def _settings(impl: Any, fmt: Format) -> tuple[bool, Any]:
    """(scaled products?, accumulator) for ``impl``: an adapter's declarations, else a plain sum
    accumulated in the input format (None)."""
    if not isinstance(impl, OrderImpl):
        return False, None
    products = impl.products and scales_both(fmt.name, impl.scale)
    if impl.accumulator is None and products:
        return products, "float32"
    return products, impl.accumulator


def reveal_order(
    impl: Callable[[Any], Any], n: int, *, dtype: Any = "float32", algorithm: str = "fprev"
) -> SummationTree:
    """The summation tree by which ``impl`` adds ``n`` terms of ``dtype``.

    ``impl(x)`` receives a NumPy array of ``dtype`` (ml_dtypes for bfloat16 and float8), must
    not modify it, and returns the sum (see :func:`sum_of`, :func:`dot_of`, :func:`matmul_of`).
    Raises :class:`OrderRevealError` when the answers fit no fixed summation tree (a result that
    is not a whole number of units, contradictory counts) and :class:`NondeterministicOrder`
    when a query asked twice gives two answers. A compensated summation can pass the queries
    and still be no tree: confirm with ``tree.verify(impl)``.
    """
    tree = reveal_tree(impl, n, dtype, algorithm)
    from ..report.sink import publish

    publish("trees", tree, impl=_impl_name(impl), algorithm=algorithm)
    return tree


def reveal_tree(
    impl: Callable[[Any], Any], n: int, dtype: Any = "float32", algorithm: str = "fprev"
) -> SummationTree:
    """:func:`reveal_order` without publishing the tree to the run report (for diagnostics that
    reveal orders on the way to their own result, like ``fp.probe_matmul``)."""
    if not callable(impl):
        raise InvalidArgument(
            "impl", impl, "a callable impl(x) -> sum of x (see fp.order.sum_of, dot_of, matmul_of)"
        )
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise InvalidArgument("n", n, "an int >= 2 (the masks take two of the terms)")
    fmt = format_of(dtype)
    if algorithm not in ALGORITHMS:
        raise InvalidArgument("algorithm", algorithm, "one of 'fprev', 'basic', 'naive'")
    length = impl.length if isinstance(impl, OrderImpl) else None
    if length is not None and n != length:
        raise InvalidArgument("n", n, f"{length}, the k of the matmul_of adapter")
    products, acc = _settings(impl, fmt)
    if algorithm == "naive":
        if n > NAIVE_MAX_N:
            raise InvalidArgument(
                "n", n, f"at most {NAIVE_MAX_N} for algorithm='naive'", hint="Use 'fprev'."
            )
        accumulator = None if acc is None else format_of(acc, argument="accumulator")
        return reveal_naive(impl, n, fmt, accumulator=accumulator)
    encoding = encoding_for(fmt, accumulator=acc, products=products)
    summed_in = f"{fmt.name} summed in {encoding.accumulator.name}"
    if algorithm == "basic" and n > encoding.direct_limit:
        raise InvalidArgument(
            "n",
            n,
            f"at most {encoding.direct_limit} for algorithm='basic' with {summed_in}",
            hint="algorithm='fprev' goes further (FPRev section 8.1.2).",
        )
    if n > encoding.mitigated_limit:
        raise InvalidArgument(
            "n",
            n,
            f"at most {encoding.mitigated_limit} for {summed_in}",
            hint=f"Beyond it the masks (+-{encoding.mask!r}) cannot swamp the partial sums of "
            f"units ({encoding.unit!r}) in {encoding.accumulator.name} (FPRev section 8.1).",
        )
    querier = Querier(impl, n, encoding)
    return reveal_fprev(querier) if algorithm == "fprev" else reveal_basic(querier)


def _impl_name(impl: Any) -> str:
    if isinstance(impl, OrderImpl):
        return impl.description
    return str(getattr(impl, "__qualname__", None) or repr(impl))


def _split_text(tree: SummationTree, node: int) -> str:
    parts = [describe_leaves(tree.leaves(c), tree.n) for c in tree.children(node)]
    shown = " + ".join(parts[:8]) + (" + ..." if len(parts) > 8 else "")
    return f"{shown} ({len(parts)} operands)"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def order_mismatch_message(
    tree_a: SummationTree, tree_b: SummationTree, name_a: str, name_b: str
) -> str:
    """The failure text of :func:`assert_same_order`: the first subtree (over the same terms in
    both trees) that the two split differently, each side's split and each side's subtree."""
    first = tree_a.first_difference(tree_b)
    if first is None:
        raise InvalidArgument("tree_b", tree_b, "a tree that differs from tree_a")
    a, b = first
    return "\n".join(
        [
            f"{name_a} and {name_b} accumulate {tree_a.n} {tree_a.dtype} terms in different "
            "orders.",
            f"First difference: the sum of {describe_leaves(tree_a.leaves(a), tree_a.n)} "
            f"({tree_a.size(a)} terms)",
            f"  {name_a} adds {_split_text(tree_a, a)}",
            f"  {name_b} adds {_split_text(tree_b, b)}",
            f"{name_a}:",
            _indent(tree_a.to_text(node=a, max_lines=8)),
            f"{name_b}:",
            _indent(tree_b.to_text(node=b, max_lines=8)),
        ]
    )


def assert_same_order(
    impl_a: Callable[[Any], Any],
    impl_b: Callable[[Any], Any],
    n: int,
    *,
    dtype: Any = "float32",
    algorithm: str = "fprev",
) -> SummationTree:
    """Reveal both orders (keywords as for :func:`reveal_order`) and return the common tree, or
    raise :class:`OrderMismatch` showing the first subtree where they differ."""
    __tracebackhide__ = True
    tree_a = reveal_order(impl_a, n, dtype=dtype, algorithm=algorithm)
    tree_b = reveal_order(impl_b, n, dtype=dtype, algorithm=algorithm)
    if tree_a == tree_b:
        return tree_a
    message = order_mismatch_message(tree_a, tree_b, _impl_name(impl_a), _impl_name(impl_b))
    raise OrderMismatch(message, tree_a, tree_b)
