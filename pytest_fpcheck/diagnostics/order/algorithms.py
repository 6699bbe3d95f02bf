"""The three revelation algorithms of FPRev: NaiveSol (section 3.3), BasicFPRev (section 4,
Algorithm 2) and FPRev (section 5, Algorithms 3-5), all iterative.

A query with the masks at ``i`` and ``j`` gives the weight ``v`` (number of leaves, section 4.2) of
what the masks swamp. Two kinds of multi-term node are decoded:

* *swamping* fused nodes (the paper's model of matrix accelerators, section 5.2: terms aligned to
  the largest and truncated, so a mask wipes out its siblings): ``v`` is the weight of the lowest
  common ancestor ``a``, as for additions. A sub-problem over some children of ``a`` builds a node
  *partial* in the paper's sense: its weight is below the ``v`` it was made for; the caller adds
  the missing child (Algorithm 4).
* *exact* fused nodes (children added exactly, rounded once: the model ``SummationTree.replay``
  uses): the masks cancel exactly and the other children of ``a`` survive, so ``v`` is the weight
  of the two children of ``a`` that hold the masks. A group whose weight exceeds ``v - W(r)``
  therefore joins a fused node. Two trees can give the same counts (``((0, 1), 2, 3)`` and
  ``(0, 1, (2, 3))`` both count 2 for the pairs (0, 1) and (2, 3), 3 for the rest); one extra
  query, with a single unit at a leaf ``z`` of the running sum, tells them apart: ``z`` is swamped
  exactly when it sits below the new node.

Pivot choice (FPRev): the smallest label, as in Algorithms 3-4, except in a sub-problem holding more
than half of its parent's leaves, where a pseudo-random pivot (fixed seed) is used, as section 8.2
suggests. The tree found does not depend on the pivot; the number of queries does: sequential and
strided orders cost the paper's ``n - 1`` queries, the reverse order ``~3n`` instead of
``n(n-1)/2``, and every tree ``O(n log n)`` in expectation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...formats import Format, numpy_dtype
from .errors import OrderRevealError
from .inputs import random_inputs, to_float
from .query import Querier
from .tree import SummationTree

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["NAIVE_MAX_N", "reveal_basic", "reveal_fprev", "reveal_naive"]

NAIVE_MAX_N = 12
_PIVOT_SEED = 20240917
_NAIVE_TRIALS = 32
_NAIVE_SURVIVORS = 256


def _inconsistent(what: str) -> OrderRevealError:
    return OrderRevealError(
        f"the answers to the masked queries fit no summation tree ({what}); the order may depend "
        "on the data, or impl may not be a plain sum in this format."
    )


class _Builder:
    """Nodes under construction. Inner nodes are numbered from ``n`` as they are made; ``full`` is
    the weight a partial swamping node is waiting to reach (0 once complete; BasicFPRev's
    union-find keeps it, FPRev passes partiality up its frames instead)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.kids: list[list[int]] = []
        self.weight: list[int] = []
        self.low: list[int] = []
        self.full: list[int] = []
        self.parent: list[int] = [-1] * n

    def size(self, node: int) -> int:
        return 1 if node < self.n else self.weight[node - self.n]

    def min_leaf(self, node: int) -> int:
        return node if node < self.n else self.low[node - self.n]

    def children(self, node: int) -> list[int]:
        return self.kids[node - self.n] if node >= self.n else []

    def new(self, kids: list[int], full: int = 0) -> int:
        node = self.n + len(self.kids)
        self.kids.append([])
        self.weight.append(0)
        self.low.append(node)
        self.full.append(full)
        self.parent.append(-1)
        for child in kids:
            self.attach(node, child)
        return node

    def attach(self, node: int, child: int) -> None:
        k = node - self.n
        self.kids[k].append(child)
        self.weight[k] += self.size(child)
        self.low[k] = min(self.low[k], self.min_leaf(child))
        self.parent[child] = node

    def dissolve(self, node: int) -> list[int]:
        """Remove ``node`` (a stand-in grouping siblings) and hand back its children."""
        kids = self.kids[node - self.n]
        self.kids[node - self.n] = []
        return kids

    def child_toward(self, top: int, leaf: int) -> int:
        """The child of ``top`` on the path from ``leaf`` up to it."""
        node = leaf
        while self.parent[node] != top:
            node = self.parent[node]
        return node

    def tree(self, root: int, fmt: Format) -> SummationTree:
        ids: dict[int, int] = {}
        order = [root] if root >= self.n else []
        for node in order:  # grows while iterating
            ids[node] = self.n + len(ids)
            order.extend(c for c in self.kids[node - self.n] if c >= self.n)
        children = [[c if c < self.n else ids[c] for c in self.kids[v - self.n]] for v in order]
        return SummationTree(self.n, children, dtype=fmt)


def _check_complete(builder: _Builder, root: int, partial: bool) -> None:
    if partial or builder.size(root) != builder.n:
        raise _inconsistent(
            f"the sums found join {builder.size(root)} of the {builder.n} terms at the top"
        )


@dataclass
class _Frame:
    """One BuildSubtree call of Algorithm 4, unrolled: the pivot's queries are grouped by weight
    (one group per ancestor of the pivot) and joined to the running sum ``root`` one by one."""

    leaves: NDArray[np.int64]
    pivot: int
    outside: int
    groups: list[tuple[int, NDArray[np.int64]]] | None = None
    next: int = 0
    root: int = -1
    base: int = -1  # the child of ``root`` holding the pivot
    partial: bool = False
    waiting_prefix: bool = False


def _groups(others: NDArray[np.int64], weights: NDArray[np.int64]) -> list[tuple[int, Any]]:
    """Leaves grouped by equal weight, lightest first; ``others`` is sorted and the sort is
    stable, so each group is sorted."""
    order = np.argsort(weights, kind="stable")
    sorted_w = weights[order].tolist()
    members = others[order]
    bounds = [0, *(np.flatnonzero(np.diff(weights[order])) + 1).tolist(), len(sorted_w)]
    return [(sorted_w[a], members[a:b]) for a, b in itertools.pairwise(bounds)]


class _FPRev:
    """FPRev (Algorithm 4) with the accumulator mitigation of Algorithm 5."""

    def __init__(self, querier: Querier) -> None:
        self.q = querier
        self.b = _Builder(querier.n)
        self.rng = np.random.default_rng(_PIVOT_SEED)

    def _pivot(self, leaves: NDArray[np.int64], parent_size: int) -> int:
        if 2 * len(leaves) > parent_size:
            return int(leaves[self.rng.integers(len(leaves))])
        return int(leaves[0])

    def run(self) -> int:
        n = self.q.n
        stack = [_Frame(np.arange(n, dtype=np.int64), 0, -1)]
        result: tuple[int, int, bool] | None = None
        while stack:
            frame = stack[-1]
            if frame.groups is None:
                self._start(frame, stack)
            elif result is not None:
                node, base, partial = result
                result = None
                if frame.waiting_prefix:
                    frame.root, frame.base, frame.partial = node, base, partial
                    frame.waiting_prefix = False
                else:
                    weight, group = frame.groups[frame.next]
                    frame.next += 1
                    self._join(frame, weight, group, node, partial)
            elif frame.next < len(frame.groups):
                weight, group = frame.groups[frame.next]
                if frame.partial:
                    raise _inconsistent("a partial fused sum is followed by a larger one")
                if len(group) == 1:
                    self._join(frame, weight, group, int(group[0]), False)
                    frame.next += 1
                elif self._join_leaves(frame, weight, group):
                    frame.next += 1
                else:
                    pivot = self._pivot(group, len(frame.leaves))
                    stack.append(_Frame(group, pivot, frame.pivot))
            else:
                stack.pop()
                result = (frame.root, frame.base, frame.partial)
        if result is None:  # the loop always ends by popping the first frame
            raise _inconsistent("no sum was built")
        _check_complete(self.b, result[0], result[2])
        return result[0]

    def _start(self, frame: _Frame, stack: list[_Frame]) -> None:
        others, counts, total = self.q.pivot_counts(frame.leaves, frame.pivot, frame.outside)
        weights = total - counts
        frame.root = frame.pivot
        trusted = counts < self.q.enc.exact_count
        if trusted.all():
            frame.groups = _groups(others, weights)
            return
        # Algorithm 5: counts too large to be exact belong to the lowest ancestors of the pivot;
        # those leaves form one subtree, built alone (zeros elsewhere), then joined as one node.
        prefix = np.sort(np.append(others[~trusted], frame.pivot))
        if len(prefix) == len(frame.leaves):
            # no smaller subtree to split off (exact fused sums keep their other children):
            # count exactly block by block instead
            others, counts, total = self.q.pivot_counts_blocked(
                frame.leaves, frame.pivot, frame.outside
            )
            frame.groups = _groups(others, total - counts)
            return
        frame.groups = _groups(others[trusted], weights[trusted])
        frame.waiting_prefix = True
        stack.append(_Frame(prefix, frame.pivot, -1))

    def _join(
        self, frame: _Frame, weight: int, group: NDArray[np.int64], node: int, partial: bool
    ) -> None:
        """Join the subtree ``node`` built over ``group`` to the running sum (section 5.2.2)."""
        b = self.b
        root = frame.root
        w_root, w_group = b.size(root), len(group)
        if partial:  # Algorithm 4: node is the partial common ancestor; root is its missing child
            b.attach(node, root)
            frame.base, frame.root = root, node
            if b.size(node) > weight:
                raise _inconsistent(f"a fused sum outgrew its weight {weight}")
            frame.partial = b.size(node) < weight
            return
        if w_root + w_group == weight:
            frame.base, frame.root = root, b.new([root, node])
        elif w_root + w_group < weight:  # a swamping fused node missing children outside
            frame.base, frame.root = root, b.new([root, node])
            frame.partial = True
        else:
            self._join_exact(frame, weight, group, node)

    def _join_exact(self, frame: _Frame, weight: int, group: NDArray[np.int64], node: int) -> None:
        """An exact fused node: ``weight`` counts the pivot's child and one child in ``group``."""
        b = self.b
        root = frame.root
        step = weight - b.size(root)
        kids = b.children(node)
        new_level = (
            step >= 1
            and len(group) % step == 0
            and len(group) // step >= 2
            and len(kids) == len(group) // step
            and all(b.size(c) == step for c in kids)
        )
        same_step = weight - b.size(frame.base) if root >= b.n else 0
        whole = same_step == len(group)
        split = (
            same_step >= 1
            and len(kids) >= 2
            and len(kids) * same_step == len(group)
            and all(b.size(c) == same_step for c in kids)
        )
        choice = self._choose(frame, new_level, whole or split, group)
        if choice == "new" and new_level:
            frame.base, frame.root = root, b.new([root, *b.dissolve(node)])
        elif choice == "same" and whole:
            b.attach(root, node)
        elif choice == "same" and split:
            for child in b.dissolve(node):
                b.attach(root, child)
        else:
            raise _inconsistent(f"a group of {len(group)} terms at weight {weight}")

    def _join_leaves(self, frame: _Frame, weight: int, group: NDArray[np.int64]) -> bool:
        """Join a group of single leaves to a new exact fused node without a sub-problem, when
        the counts say each is one child (the weight exceeds the running sum by one) and the group
        cannot be children of the running sum's own node instead (whose children would weigh
        ``weight - W(base)``). Returns False when the group needs its own sub-problem."""
        b = self.b
        root = frame.root
        if b.size(root) + len(group) <= weight or weight - b.size(root) != 1:
            return False
        if root >= b.n and len(group) % (weight - b.size(frame.base)) == 0:
            return False  # the group may also be children of the running sum's node
        frame.base, frame.root = root, b.new([root, *group.tolist()])
        return True

    def _choose(self, frame: _Frame, new_level: bool, same: bool, group: NDArray[np.int64]) -> str:
        """``new``: the group's children and the running sum are children of a new node; ``same``:
        the group joins the running sum's own node. One query decides when both fit."""
        if new_level and same:
            other = next(c for c in self.b.children(frame.root) if c != frame.base)
            z = self.b.min_leaf(other)
            return "new" if self.q.absorbed(frame.pivot, int(group[0]), z) else "same"
        if new_level:
            return "new"
        if same:
            return "same"
        raise _inconsistent(f"a group of {len(group)} terms does not fit the running sum")


def reveal_fprev(querier: Querier) -> SummationTree:
    """FPRev (sections 5 and 8.1.2): on-demand queries, multiway nodes, iterative."""
    algorithm = _FPRev(querier)
    root = algorithm.run()
    querier.recheck()
    return algorithm.b.tree(root, querier.enc.fmt)


def reveal_basic(querier: Querier) -> SummationTree:
    """BasicFPRev (section 4, Algorithm 2): query all ``n(n-1)/2`` pairs, then join subtrees in
    increasing order of weight with a union-find (section 4.3), extended to both kinds of fused
    node."""
    n = querier.n
    first, second, weights = querier.all_pairs()
    b = _Builder(n)
    rep = list(range(n))  # union-find over leaves
    top = list(range(n))  # the node at the top of each set

    def find(v: int) -> int:
        while rep[v] != v:
            rep[v] = rep[rep[v]]
            v = rep[v]
        return v

    for k in np.argsort(weights, kind="stable").tolist():
        i, j, weight = int(first[k]), int(second[k]), int(weights[k])
        ri, rj = find(i), find(j)
        if ri == rj:
            continue
        joined = _union(b, querier, top[ri], top[rj], i, j, weight)
        rep[rj] = ri
        top[ri] = joined
    root = top[find(0)]
    _check_complete(b, root, root >= n and b.full[root - n] != 0)
    querier.recheck()
    return b.tree(root, querier.enc.fmt)


def _union(b: _Builder, q: Querier, p: int, r: int, i: int, j: int, weight: int) -> int:
    """Join the sets topped by ``p`` (holding leaf ``i``) and ``r`` (holding ``j``) whose lowest
    common ancestor has the given weight; return the new top."""
    full_p = b.full[p - b.n] if p >= b.n else 0
    full_r = b.full[r - b.n] if r >= b.n else 0
    if full_p == weight and full_r == weight:  # two partial pieces of one swamping node
        for child in b.dissolve(r):
            b.attach(p, child)
        top = p
    elif full_p == weight:
        b.attach(p, r)
        top = p
    elif full_r == weight:
        b.attach(r, p)
        top = r
    elif b.size(p) + b.size(r) == weight:
        return b.new([p, r])
    elif b.size(p) + b.size(r) < weight:
        return b.new([p, r], full=weight)
    else:
        return _union_exact(b, q, p, r, i, j, weight)
    if b.size(top) > weight:
        raise _inconsistent(f"a fused sum outgrew its weight {weight}")
    if b.size(top) == weight:
        b.full[top - b.n] = 0
    return top


def _union_exact(b: _Builder, q: Querier, p: int, r: int, i: int, j: int, weight: int) -> int:
    """Exact fused node: ``weight`` counts the two children of the common ancestor that hold the
    masks; either set may already be that ancestor, partly built."""
    a = b.child_toward(p, i) if p >= b.n else -1
    c = b.child_toward(r, j) if r >= b.n else -1
    p_grows = a >= 0 and b.size(a) + b.size(r) == weight
    r_grows = c >= 0 and b.size(p) + b.size(c) == weight
    both = a >= 0 and c >= 0 and b.size(a) + b.size(c) == weight
    if p_grows and r_grows:  # p is the ancestor (z survives) or a child of it (z swamped)
        z = b.min_leaf(next(k for k in b.children(p) if k != a))
        swamped = q.absorbed(i, j, z)
        p_grows, r_grows = not swamped, swamped
    if p_grows:
        b.attach(p, r)
        return p
    if r_grows:
        b.attach(r, p)
        return r
    if both:
        for child in b.dissolve(r):
            b.attach(p, child)
        return p
    raise _inconsistent(f"terms {i} and {j} meet at weight {weight}")


def reveal_naive(
    impl: Callable[[Any], Any], n: int, fmt: Format, *, accumulator: Format | None, seed: int = 0
) -> SummationTree:
    """NaiveSol (section 3.3): search the trees, keeping those that reproduce ``impl`` on random
    inputs. Trees are grown one leaf at a time: the trees over leaves ``0 .. k`` are tested on
    inputs that are zero beyond ``k`` (a zero changes no sum), so only survivors are extended."""
    rng = np.random.default_rng(seed)
    inputs = random_inputs(fmt, n, _NAIVE_TRIALS, rng)
    dtype = numpy_dtype(fmt)
    survivors = [SummationTree(1, [], dtype=fmt)]
    for k in range(1, n):
        padded = inputs.copy()
        padded[:, k + 1 :] = 0.0
        expected = np.array([to_float(impl(row.astype(dtype))) for row in padded])
        grown = {t for tree in survivors for t in _insertions(tree, fmt)}
        survivors = [t for t in grown if _reproduces(t, inputs[:, : k + 1], expected, accumulator)]
        if not survivors:
            raise OrderRevealError(
                f"no summation tree over x[0:{k + 1}] reproduces impl on random inputs (zeros "
                f"beyond x[{k}]): it does not sum in {fmt.name} arithmetic with IEEE additions "
                "and exact fused sums (pass accumulator=... if it accumulates wider)."
            )
        if len(survivors) > _NAIVE_SURVIVORS:
            raise _ambiguous(len(survivors))
    for round_ in range(4):
        if len(survivors) == 1:
            return survivors[0]
        extra = random_inputs(fmt, n, _NAIVE_TRIALS, np.random.default_rng(seed + 1 + round_))
        expected = np.array([to_float(impl(row.astype(dtype))) for row in extra])
        survivors = [t for t in survivors if _reproduces(t, extra, expected, accumulator)]
    if len(survivors) == 1:
        return survivors[0]
    raise _ambiguous(len(survivors))


def _ambiguous(count: int) -> OrderRevealError:
    return OrderRevealError(
        f"the naive search kept {count} summation trees that random inputs cannot tell apart; "
        "use algorithm='fprev'."
    )


def _insertions(tree: SummationTree, fmt: Format) -> list[SummationTree]:
    """Every tree over one more leaf ``k = tree.n`` whose restriction to the old leaves is
    ``tree``: ``k`` added to any node by a new addition, or to any inner node as a new child."""
    k = tree.n
    old = tree.root + 1  # nodes of the old tree: leaves 0 .. k-1, inner nodes k .. root

    def shifted(v: int) -> int:
        return v if v < k else v + 1

    base = [[shifted(c) for c in tree.children(v)] for v in range(k, old)]
    result = []
    for target in range(old):
        children = [list(kids) for kids in base]
        new_node = old + 1
        moved = shifted(target)
        for kids in children:
            kids[:] = [new_node if c == moved else c for c in kids]
        children.append([moved, k])
        result.append(SummationTree(k + 1, children, dtype=fmt))
        if target >= k:
            fused = [list(kids) for kids in base]
            fused[target - k].append(k)
            result.append(SummationTree(k + 1, fused, dtype=fmt))
    return result


def _reproduces(
    tree: SummationTree,
    inputs: NDArray[np.float64],
    expected: NDArray[np.float64],
    accumulator: Format | None,
) -> bool:
    got = tree.replay(inputs, accumulator=accumulator)
    same = (got == expected) & (np.signbit(got) == np.signbit(expected))
    return bool(np.all(same | (np.isnan(got) & np.isnan(expected))))
