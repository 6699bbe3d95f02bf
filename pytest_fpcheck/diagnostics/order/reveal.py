"""The entry points of ``fp.order``: :func:`reveal_order` checks its arguments, picks the masks
and units of the format (FPRev section 8.1, :mod:`.query`) and runs one of the three algorithms
(:mod:`.algorithms`); :func:`assert_same_order` reveals two orders and fails with the first
subtree where they differ (FPRev section 6 compares libraries this way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import InvalidArgument
from ...formats import Format, format_of
from .adapters import OrderImpl, scales_both
from .algorithms import NAIVE_MAX_N, reveal_basic, reveal_fprev, reveal_naive
from .errors import OrderMismatch
from .query import Querier, encoding_for
from .text import mismatch_text
from .tree import SummationTree

__all__ = [
    "ALGORITHMS",
    "assert_same_order",
    "order_mismatch_message",
    "reveal_order",
    "reveal_tree",
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
    from ...assertions.sink import publish

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


def order_mismatch_message(
    tree_a: SummationTree, tree_b: SummationTree, name_a: str, name_b: str
) -> str:
    """The failure text of :func:`assert_same_order`: the first subtree (over the same terms in
    both trees) that the two split differently, each side's split and each side's subtree."""
    first = tree_a.first_difference(tree_b)
    if first is None:
        raise InvalidArgument("tree_b", tree_b, "a tree that differs from tree_a")
    return mismatch_text(tree_a, first[0], tree_b, first[1], name_a, name_b)


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
