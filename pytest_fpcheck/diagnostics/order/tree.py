"""The summation tree: the accumulation order of a sum, as FPRev reveals it (FPRev section 3.2,
multiway nodes for fused multi-term summation in section 5.2).

Nodes are ints. Leaves ``0 .. n-1`` are the summands; inner nodes are numbered from ``n`` in
post-order (every child before its parent), so the root is the largest node. A node with two
children is one IEEE addition; a node with ``w + 1`` children is a fused ``(w+1)``-term sum.

**Canonical form and equality.** Masked all-one queries see which summands meet in which
addition, never the operand order inside an addition, and IEEE addition is commutative bit for
bit. So a tree is stored canonically: the children of every node are ordered by their smallest
leaf, and inner nodes are numbered by a post-order walk in that order. Two trees are equal when
they have the same ``n`` and group the leaves the same way, i.e. every node of one has a node in
the other over the same set of leaves (the same *clusters*); equality is therefore equality up to
the order of the operands of each addition, and it ignores ``dtype``.

All walks are iterative: a reverse-sequential tree of 100,000 leaves is 100,000 deep.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidArgument
from ...formats import Format, format_of, numpy_dtype, round_to
from .inputs import random_inputs, same_float, to_float
from .replay import LevelPlan, level_plan, replay_rows
from .text import render

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["Mismatch", "SummationTree"]

_HASH_SEED = 0x5EED


@dataclass(frozen=True)
class Mismatch:
    """One input on which an implementation and a replayed tree disagree."""

    trial: int
    inputs: NDArray[Any]
    expected: float
    actual: float

    def __str__(self) -> str:
        return (
            f"trial {self.trial}: replaying the tree gives {self.expected!r}, the implementation "
            f"returned {self.actual!r} (inputs: {self.inputs.size} values of dtype "
            f"{self.inputs.dtype}, kept in .inputs)"
        )


def _canonical(n: int, children: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """Validate ``children`` (entry k lists the children of node n + k) and return the canonical
    children lists: children sorted by smallest leaf, inner nodes renumbered in post-order."""
    total = n + len(children)
    parent = [-1] * total
    lists: list[list[int]] = []
    for k, kids in enumerate(children):
        node = n + k
        if isinstance(kids, (str, bytes)) or not isinstance(kids, Sequence) or len(kids) < 2:
            raise InvalidArgument(
                "children", children, f"entry {k} (node {node}) to list at least two child nodes"
            )
        if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in kids):
            raise InvalidArgument("children", children, f"int node ids in entry {k}")
        ids = [int(c) for c in kids]
        for c in ids:
            if not 0 <= c < total or c == node:
                raise InvalidArgument(
                    "children", children, f"child ids in [0, {total}) other than the node itself"
                )
            if parent[c] != -1:
                raise InvalidArgument(
                    "children", children, f"a tree: node {c} has two parents ({parent[c]}, {node})"
                )
            parent[c] = node
        lists.append(ids)
    roots = [v for v in range(total) if parent[v] == -1]
    if len(roots) != 1:
        raise InvalidArgument(
            "children", children, f"one root joining all {n} leaves, found {len(roots)} roots"
        )
    order = [roots[0]]
    for node in order:  # breadth-first; grows while iterating
        if node >= n:
            order.extend(lists[node - n])
    if len(order) != total:
        raise InvalidArgument("children", children, "a tree (the nodes form a cycle)")
    minleaf = list(range(total))
    for node in reversed(order):
        if node >= n:
            kids = lists[node - n]
            kids.sort(key=minleaf.__getitem__)
            minleaf[node] = minleaf[kids[0]]
    canonical: list[tuple[int, ...]] = []
    new_id = list(range(total))
    stack: list[int] = [roots[0]]
    while stack:  # post-order: a node is numbered after its children, visited smallest first
        node = stack.pop()
        if node >= 0:
            stack.append(~node)
            stack.extend(c for c in reversed(lists[node - n]) if c >= n)
        else:
            node = ~node
            new_id[node] = n + len(canonical)
            canonical.append(tuple(new_id[c] for c in lists[node - n]))
    return canonical


class SummationTree:
    """The order in which an implementation sums ``n`` terms (FPRev section 3.2).

    Build one with ``SummationTree(n, children, dtype=...)`` where ``children[k]`` lists the
    children of inner node ``n + k`` (any numbering; the tree is stored canonically, see the
    module docstring), with :meth:`from_nested`, or get one from ``fp.reveal_order``.
    ``dtype`` is the format whose arithmetic :meth:`replay` and :meth:`verify` use.
    """

    __slots__ = ("_depths", "_fmt", "_hash", "_kids", "_levels", "_minleaf", "_n", "_size")

    def __init__(
        self, n: int, children: Sequence[Sequence[int]], *, dtype: Any = "float32"
    ) -> None:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise InvalidArgument("n", n, "an int >= 1, the number of summands")
        self._n = int(n)
        self._fmt = format_of(dtype)
        if self._n == 1 and len(children) == 0:
            self._kids: tuple[tuple[int, ...], ...] = ()
        else:
            self._kids = tuple(_canonical(self._n, children))
        total = self._n + len(self._kids)
        size = [1] * total
        minleaf = list(range(total))
        for k, kids in enumerate(self._kids):
            size[self._n + k] = sum(size[c] for c in kids)
            minleaf[self._n + k] = minleaf[kids[0]]
        self._size = size
        self._minleaf = minleaf
        self._depths: NDArray[np.int64] | None = None
        self._levels: LevelPlan | None = None
        self._hash: NDArray[np.uint64] | None = None

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def from_nested(cls, nested: Any, *, dtype: Any = "float32") -> SummationTree:
        """The tree written as nested tuples or lists: an int is a leaf, a sequence of two or more
        items is a node summing them. ``((0, 1), 2)`` is sequential summation of three terms;
        ``(0, 1, 2, 3)`` one fused four-term sum. The leaves must be 0 .. n-1, each once."""
        leaves: list[int] = []
        stack = [nested]
        while stack:
            item = stack.pop()
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                leaves.append(int(item))
            elif isinstance(item, (tuple, list)) and len(item) >= 2:
                stack.extend(item)
            else:
                raise InvalidArgument(
                    "nested", nested, "ints (leaves) and tuples or lists of two or more items"
                )
        n = len(leaves)
        if sorted(leaves) != list(range(n)):
            raise InvalidArgument("nested", nested, f"the leaves 0 .. {n - 1}, each exactly once")
        children: list[list[int]] = []
        ids: dict[int, int] = {}
        walk: list[tuple[Any, bool]] = [(nested, False)]
        while walk:
            item, expanded = walk.pop()
            if not isinstance(item, (tuple, list)):
                continue
            if not expanded:
                walk.append((item, True))
                walk.extend((child, False) for child in item)
                continue
            ids[id(item)] = n + len(children)
            children.append(
                [int(c) if not isinstance(c, (tuple, list)) else ids[id(c)] for c in item]
            )
        return cls(n, children, dtype=dtype)

    def to_nested(self) -> Any:
        """The tree as nested tuples (the inverse of :meth:`from_nested`), children in canonical
        order: ``((0, 1), 2)`` for sequential summation of three terms."""
        built: dict[int, Any] = {}
        for k, kids in enumerate(self._kids):
            built[self._n + k] = tuple(c if c < self._n else built.pop(c) for c in kids)
        return built[self.root] if self._kids else 0

    # -- structure ------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        """The number of summands (leaves)."""
        return self._n

    @property
    def root(self) -> int:
        """The node holding the final sum: the largest node (``0`` when ``n == 1``)."""
        return self._n + len(self._kids) - 1 if self._kids else 0

    @property
    def dtype(self) -> str:
        """The name of the format whose arithmetic :meth:`replay` uses."""
        return self._fmt.name

    @property
    def format(self) -> Format:
        """The :class:`~pytest_fpcheck.formats.Format` of :attr:`dtype`."""
        return self._fmt

    def _check_node(self, node: Any) -> int:
        total = self._n + len(self._kids)
        if (
            not isinstance(node, (int, np.integer))
            or isinstance(node, bool)
            or not (0 <= node < total)
        ):
            raise InvalidArgument("node", node, f"a node id in [0, {total})")
        return int(node)

    def children(self, node: int) -> tuple[int, ...]:
        """The children of ``node`` ordered by their smallest leaf (operand order is not
        observable, see the module docstring); ``()`` for a leaf."""
        node = self._check_node(node)
        return self._kids[node - self._n] if node >= self._n else ()

    def size(self, node: int) -> int:
        """The number of leaves under ``node``."""
        return self._size[self._check_node(node)]

    def min_leaf(self, node: int) -> int:
        """The smallest leaf under ``node`` (the key of the canonical child order)."""
        return self._minleaf[self._check_node(node)]

    def leaves(self, node: int | None = None) -> NDArray[np.int64]:
        """The sorted leaves under ``node`` (default: the root)."""
        start = self.root if node is None else self._check_node(node)
        found: list[int] = []
        stack = [start]
        while stack:
            v = stack.pop()
            if v < self._n:
                found.append(v)
            else:
                stack.extend(self._kids[v - self._n])
        return np.array(sorted(found), dtype=np.int64)

    def fanout(self) -> int:
        """The largest number of children of a node: 2 for plain IEEE additions, ``w + 1`` when
        fused ``w``-term additions accumulate into a running sum; 0 for a single summand."""
        return max((len(k) for k in self._kids), default=0)

    def roundings(self) -> NDArray[np.int64]:
        """For each leaf, the number of inner nodes (roundings) on its path to the root."""
        if self._depths is None:
            depth = np.zeros(self._n + len(self._kids), dtype=np.int64)
            for k in range(len(self._kids) - 1, -1, -1):  # parents before children
                kids = self._kids[k]
                depth[list(kids)] = depth[self._n + k] + 1
            self._depths = depth[: self._n]
        return self._depths.copy()

    def depth(self) -> int:
        """The longest root-to-leaf path, in edges: the most roundings any summand goes through."""
        return int(self.roundings().max())

    # -- error bound ----------------------------------------------------------------------------

    def error_factor(self, u: float) -> float:
        """The factor ``gamma_h = h*u / (1 - h*u)`` with ``h = depth()``, rounded up to a float:
        summing in this order gives ``|fl(sum) - sum| <= gamma_h * sum(|x_i|)``.

        Derivation (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section
        4.2, with Lemma 3.1): every inner node ``v`` computes ``s_v = (sum of its children) *
        (1 + d_v)`` with ``|d_v| <= u``: one IEEE addition in round-to-nearest, or a fused node
        that adds its children exactly and rounds once (the model :meth:`replay` uses). Addition
        is exact when its result is subnormal, so this holds without underflow terms; overflow
        is excluded. Unrolling, ``fl(sum) = sum_i x_i * prod_{v on path(i)} (1 + d_v)``, so
        ``|fl(sum) - sum| <= sum_i |x_i| * |prod (1 + d_v) - 1| <= gamma_{d_i} |x_i|`` where
        ``d_i`` is the number of inner nodes on leaf i's path (:meth:`roundings`), and
        ``gamma_{d_i} <= gamma_h``. Sequential summation of ``n`` terms has ``h = n - 1``,
        pairwise summation ``h = ceil(log2 n)``. ``u`` is the unit round-off of the arithmetic
        the nodes use (``2**-24`` for float32); a final conversion to a narrower output format
        adds one more rounding that this factor does not include.
        """
        if not isinstance(u, (float, int, np.floating)) or isinstance(u, bool) or not 0 < u < 1:
            raise InvalidArgument("u", u, "a unit round-off in (0, 1), e.g. 2**-24 for float32")
        h = self.depth()
        hu = Fraction(h) * Fraction(float(u))
        if hu >= 1:
            raise InvalidArgument(
                "u", u, f"u < 1/{h}: the tree has a path of {h} roundings and gamma_h needs h*u < 1"
            )
        gamma = hu / (1 - hu)
        value = float(gamma)
        return value if Fraction(value) >= gamma else math.nextafter(value, math.inf)

    # -- replay and verification ----------------------------------------------------------------

    def replay(self, x: Any, *, accumulator: Any = None, output: Any = None) -> Any:
        """Sum ``x`` in this order in the format's arithmetic; a 2-D ``x`` is one sum per row.

        Leaves are ``x`` (values on :attr:`dtype`'s grid). Each binary node is one IEEE addition
        in ``accumulator`` (default: :attr:`dtype`) with round-to-nearest-even; each fused node
        adds its children exactly and rounds once. The root is then rounded to ``output`` (default:
        :attr:`dtype`; pass the accumulator when the implementation returns the wide sum).
        Returns a float (or a float64 array, one per row).
        """
        acc = self._accumulator(accumulator)
        out = self._fmt if output is None else format_of(output, argument="output")
        arr = np.asarray(x)
        rows = arr.reshape(1, -1) if arr.ndim == 1 else arr
        if rows.ndim != 2 or rows.shape[1] != self._n:
            raise InvalidArgument(
                "x", x, f"{self._n} values, or an array of shape (trials, {self._n})"
            )
        leaves = rows.astype(np.float64)
        if not np.array_equal(round_to(leaves, self._fmt), leaves, equal_nan=True):
            raise InvalidArgument("x", x, f"values on the {self._fmt.name} grid")
        if self._levels is None:
            self._levels = level_plan(self._n, self._kids)
        result = replay_rows(self._n, self._kids, self._levels, leaves, acc, out)
        return float(result[0]) if arr.ndim == 1 else result

    def _accumulator(self, accumulator: Any) -> Format:
        if accumulator is None:
            return self._fmt
        acc = format_of(accumulator, argument="accumulator")
        if acc.precision < self._fmt.precision or acc.emax < self._fmt.emax:
            raise InvalidArgument(
                "accumulator", accumulator, f"a format that holds every {self._fmt.name} value"
            )
        return acc

    def mismatch(
        self,
        impl: Callable[[Any], Any],
        *,
        trials: int = 16,
        seed: int = 0,
        accumulator: Any = None,
        output: Any = None,
    ) -> Mismatch | None:
        """The first random input on which ``impl`` and :meth:`replay` differ bit for bit, or
        None. ``impl`` takes a NumPy array of :attr:`dtype` (ml_dtypes for bfloat16 and float8),
        as ``fp.reveal_order`` passes it; the inputs come from a generator seeded with
        ``seed``, and make sums order-sensitive (wide spread of magnitudes, mixed signs).
        ``accumulator`` and ``output`` are as for :meth:`replay`. A product adapter that scales
        both operands (float8) multiplies ``x`` by ``|x|``: verify with ``scale=False``."""
        if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
            raise InvalidArgument("trials", trials, "an int >= 1")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise InvalidArgument("seed", seed, "an int")
        inputs = random_inputs(self._fmt, self._n, trials, np.random.default_rng(seed))
        expected = self.replay(inputs, accumulator=accumulator, output=output)
        native = inputs.astype(numpy_dtype(self._fmt))
        for trial in range(trials):
            actual = to_float(impl(native[trial].copy()))
            if not same_float(float(expected[trial]), actual):
                return Mismatch(trial, native[trial].copy(), float(expected[trial]), actual)
        return None

    def verify(
        self,
        impl: Callable[[Any], Any],
        *,
        trials: int = 16,
        seed: int = 0,
        accumulator: Any = None,
        output: Any = None,
    ) -> bool:
        """True when ``impl`` agrees bit for bit with :meth:`replay` on ``trials`` random inputs
        (the randomized check of FPRev section 3.3). :meth:`mismatch` gives the failing input.

        Fused nodes are modelled as exact sums rounded once; hardware that aligns and truncates
        the terms first (tensor cores, FPRev section 5.2.1) can differ in the last bit.
        """
        found = self.mismatch(
            impl, trials=trials, seed=seed, accumulator=accumulator, output=output
        )
        return found is None

    # -- comparison -----------------------------------------------------------------------------

    def _cluster_hashes(self) -> NDArray[np.uint64]:
        """A 64-bit fingerprint of every node's leaf set: the wrapping sum of fixed random words
        of its leaves (equal sets always agree; different sets collide with probability 2**-64)."""
        if self._hash is None:
            words = np.random.default_rng(_HASH_SEED).integers(
                0, 2**63, size=self._n, dtype=np.uint64
            )
            hashes = np.zeros(self._n + len(self._kids), dtype=np.uint64)
            hashes[: self._n] = words
            with np.errstate(over="ignore"):
                for k, kids in enumerate(self._kids):
                    hashes[self._n + k] = hashes[list(kids)].sum(dtype=np.uint64)
            self._hash = hashes
        return self._hash

    def _signature(self, node: int) -> list[tuple[int, int, int]]:
        hashes = self._cluster_hashes()
        return [(self._minleaf[c], self._size[c], int(hashes[c])) for c in self.children(node)]

    def first_difference(self, other: SummationTree) -> tuple[int, int] | None:
        """The first pair of nodes (one per tree, over the same leaves) whose children group the
        leaves differently, in a depth-first walk from the roots; None when the trees are equal.
        Both trees must have the same ``n``."""
        if not isinstance(other, SummationTree) or other.n != self._n:
            raise InvalidArgument("other", other, f"a SummationTree with n={self._n}")
        stack = [(self.root, other.root)]
        while stack:
            a, b = stack.pop()
            if self._signature(a) != other._signature(b):
                return a, b
            pairs = zip(self.children(a), other.children(b), strict=True)
            stack.extend((ca, cb) for ca, cb in reversed(list(pairs)) if ca >= self._n)
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SummationTree):
            return NotImplemented
        return self._n == other._n and self._kids == other._kids

    def __hash__(self) -> int:
        return hash((self._n, self._kids))

    def __repr__(self) -> str:
        return (
            f"SummationTree(n={self._n}, depth={self.depth()}, fanout={self.fanout()}, "
            f"dtype={self._fmt.name!r})"
        )

    # -- rendering ------------------------------------------------------------------------------

    def to_text(self, *, node: int | None = None, max_lines: int = 24) -> str:
        """An indented, readable description of the subtree at ``node`` (default: the root).
        Repeating structure is summarised (``64 lanes combined pairwise; each lane: sequential,
        16 terms, stride 8``); at most ``max_lines`` lines are printed."""
        start = self.root if node is None else self._check_node(node)
        if not isinstance(max_lines, int) or isinstance(max_lines, bool) or max_lines < 1:
            raise InvalidArgument("max_lines", max_lines, "an int >= 1")
        return render(self, start, max_lines)

    def to_dot(self) -> str:
        """The tree in Graphviz DOT: leaves ``x[i]`` as boxes, additions as ``+`` (fused nodes
        ``+ (k terms)``), edges from each operand to its sum."""
        lines = ["digraph summation_tree {", "  rankdir=BT;"]
        lines.extend(f'  {i} [label="x[{i}]", shape=box];' for i in range(self._n))
        for k, kids in enumerate(self._kids):
            node = self._n + k
            label = "+" if len(kids) == 2 else f"+ ({len(kids)} terms)"
            lines.append(f'  {node} [label="{label}", shape=circle];')
            lines.extend(f"  {c} -> {node};" for c in kids)
        lines.append("}")
        return "\n".join(lines) + "\n"
