"""Readable text for summation trees (FPRev section 6 describes NumPy's order in these words:
"eight ways, each accumulated sequentially with a stride of 8, the ways summed pairwise").

The rules, applied at each node from the top:

* a *chain* (each addition adds single terms to the running sum below it) is one line:
  sequential, with its number of terms and stride, or fused steps of ``w`` terms. When the running
  sum starts from a larger subtree, the line says which terms are added one by one, and the
  subtree follows, indented;
* otherwise the subtree is cut into *parts*: the highest nodes whose shape (the tree with leaves
  taken relative to its first leaf) occurs at least twice in it, and single terms. Parts with one
  shape are counted (``8 of 128 terms``), the tree joining them is named (``pairwise``: additions
  only, height ``ceil(log2 k)``; ``sequentially``: height ``k - 1``), and one part is described,
  indented. While the joining tree keeps its name, parts are split further (64 lanes under one
  pairwise tree read as one level). When the joining tree is neither, the node's operands are
  shown one by one.

The functions read a tree through :class:`Nodes`, the few structural queries they need, and
import nothing of this package: ``SummationTree`` (``tree.py``) satisfies it and calls them, so
the import runs one way, tree to text.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["Nodes", "describe_leaves", "mismatch_text", "render"]

_SHOWN = 8  # leading items shown of a long list


class Nodes(Protocol):
    """What the text reads of a summation tree (``SummationTree`` has it): leaves are the nodes
    below ``n``, inner nodes list their children by smallest leaf."""

    @property
    def n(self) -> int: ...

    @property
    def dtype(self) -> str: ...

    def children(self, node: int) -> tuple[int, ...]: ...

    def size(self, node: int) -> int: ...

    def min_leaf(self, node: int) -> int: ...

    def leaves(self, node: int | None = None) -> NDArray[np.int64]: ...


def describe_leaves(leaves: NDArray[np.int64] | list[int], n: int | None = None) -> str:
    """``x[a:b]`` or ``x[a:b:s]`` for an arithmetic progression (in the given order; ``x[a::s]``
    when it runs to the end of ``n`` terms), else the first few indices."""
    idx = [int(i) for i in leaves]
    if len(idx) == 1:
        return f"x[{idx[0]}]"
    stride = _stride(idx)
    if stride is None:
        shown = ", ".join(str(i) for i in idx[:_SHOWN])
        more = ", ..." if len(idx) > _SHOWN else ""
        return f"x[{{{shown}{more}}}]"
    if stride == 1:
        return f"x[{idx[0]}:{idx[-1] + 1}]"
    to_end = idx[-1] + stride < 0 or (n is not None and idx[-1] + stride >= n)
    stop = "" if to_end else str(idx[-1] + (1 if stride > 0 else -1))
    return f"x[{idx[0]}:{stop}:{stride}]"


def _stride(idx: list[int]) -> int | None:
    if len(idx) < 2:
        return None
    step = idx[1] - idx[0]
    if step == 0 or any(b - a != step for a, b in itertools.pairwise(idx)):
        return None
    return step


def _spine(tree: Nodes, node: int) -> tuple[list[list[int]], int]:
    """Walk down while each node adds single terms to one running sum: the terms added, lowest
    step first, and the node where the walk stops (-1 when the bottom adds only single terms)."""
    steps: list[list[int]] = []
    current = node
    while True:
        kids = tree.children(current)
        inner = [c for c in kids if c >= tree.n]
        if len(inner) > 1:
            bottom = current
            break
        steps.append([c for c in kids if c < tree.n])
        if not inner:
            bottom = -1
            break
        current = inner[0]
    steps.reverse()
    return steps, bottom


def _chain_text(steps: list[list[int]], on_top: bool) -> tuple[str, str | None]:
    """A chain's shape and first term: ``("sequential, 16 terms, stride 8", "x[0]")``; the first
    term is None when the terms are not an arithmetic progression. ``on_top``: the chain adds its
    terms to a subtree instead of starting from its first step."""
    first, rest = steps[0], steps[1:]
    terms = sum(len(s) for s in steps)
    widths = {len(s) for s in (steps if on_top else rest)}
    if on_top and widths == {1}:
        order = [s[0] for s in steps]
        if terms == 1:
            return f"adds x[{order[0]}] to", None
        return f"adds {describe_leaves(order)} one at a time ({terms} terms) to", None
    if not on_top and len(first) == 2 and widths <= {1}:
        tail = [s[0] for s in rest]
        for order in ([first[0], first[1], *tail], [first[1], first[0], *tail]):
            stride = _stride(order)
            if stride is not None:
                return f"sequential, {terms} terms, stride {stride}", f"x[{order[0]}]"
        return f"sequential, {terms} terms, over {describe_leaves(first + tail)}", None
    if not on_top and widths <= {1}:
        fused = f"one fused sum of {len(first)} terms, {describe_leaves(first)}"
        if not rest:
            return fused, None
        return f"{fused}, then adds {describe_leaves([s[0] for s in rest])} one at a time", None
    order = [i for s in steps for i in s]
    if len(widths) == 1:
        (w,) = widths
        lead = "" if on_top else f"{len(first)} terms, then "
        ending = " to" if on_top else ""
        return (
            f"sequential in fused steps ({lead}{w} per step: {w + 1}-term adds), {terms} terms, "
            f"{describe_leaves(order)}{ending}"
        ), None
    return f"a chain of {len(steps)} additions over {describe_leaves(order)}", None


def _shapes(tree: Nodes, node: int) -> dict[int, int]:
    """A fingerprint of every node's shape under ``node``: its tree with leaves numbered from its
    first leaf (equal shapes, shifted, get equal fingerprints)."""
    order = [node]
    for v in order:  # breadth-first; grows while iterating
        order.extend(c for c in tree.children(v) if c >= tree.n)
    shape: dict[int, int] = {}
    for v in reversed(order):
        low = tree.min_leaf(v)
        shape[v] = hash(tuple((shape.get(c, -1), tree.min_leaf(c) - low) for c in tree.children(v)))
    return shape


def _repeated(tree: Nodes, node: int, shape: dict[int, int], counts: dict[int, int]) -> list[int]:
    """The highest nodes strictly under ``node`` whose shape occurs twice or more, and the single
    terms not under any of them."""
    parts: list[int] = []
    stack = list(tree.children(node))
    while stack:
        v = stack.pop()
        if v < tree.n or counts[shape[v]] > 1:
            parts.append(v)
        else:
            stack.extend(tree.children(v))
    return parts


def _join_pattern(tree: Nodes, node: int, parts: list[int]) -> str:
    """``pairwise`` / ``sequentially`` / ``""`` (neither) for the tree joining ``parts`` under
    ``node``: height ``ceil(log2 k)`` or ``k - 1`` over ``k`` parts."""
    part_set = set(parts)
    joins = [node]
    for v in joins:  # breadth-first; grows while iterating
        joins.extend(c for c in tree.children(v) if c not in part_set)
    height: dict[int, int] = {}
    binary = True
    for v in reversed(joins):
        kids = tree.children(v)
        binary = binary and len(kids) == 2
        height[v] = 1 + max(0 if c in part_set else height[c] for c in kids)
    h, k = height[node], len(parts)
    fused = "" if binary else " (with fused adds)"
    if binary and h == math.ceil(math.log2(k)):
        return "pairwise"
    if h == k - 1:
        return f"sequentially{fused}"
    return ""


def _split(tree: Nodes, part: int, shape: dict[int, int], counts: dict[int, int]) -> list[int]:
    """A part split into its own repeated parts; a pair into its two terms; single terms and
    longer chains stay whole."""
    if part < tree.n:
        return [part]
    if tree.size(part) == 2:
        return list(tree.children(part))
    steps, bottom = _spine(tree, part)
    return [part] if bottom < 0 or steps else _repeated(tree, part, shape, counts)


def _cut(tree: Nodes, node: int) -> tuple[list[int], str, dict[int, int]]:
    """Parts under ``node`` joined by a named pattern, as fine as the pattern stays named: start
    from the highest repeated shapes and split every part into its own while the joining tree is
    still pairwise or sequential (so 64 lanes under a pairwise tree read as one level, not six)."""
    shape = _shapes(tree, node)
    counts: dict[int, int] = {}
    for value in shape.values():
        counts[value] = counts.get(value, 0) + 1
    parts = _repeated(tree, node, shape, counts)
    pattern = _join_pattern(tree, node, parts)
    while pattern:
        finer = [q for p in parts for q in _split(tree, p, shape, counts)]
        finer_pattern = _join_pattern(tree, node, finer) if len(finer) > len(parts) else ""
        if finer_pattern != pattern:
            break
        parts = finer
    parts.sort(key=tree.min_leaf)
    return parts, pattern, shape


def render(tree: Nodes, node: int, max_lines: int) -> str:
    """The text of the subtree at ``node``, at most ``max_lines`` lines."""
    lines: list[str] = []
    _render(tree, node, "", lines, max_lines)
    if len(lines) > max_lines:
        lines[max_lines - 1] = "  ..."
    return "\n".join(lines[:max_lines])


def _render(tree: Nodes, node: int, indent: str, lines: list[str], budget: int) -> None:
    if len(lines) > budget:
        return
    if node < tree.n:
        lines.append(f"{indent}x[{node}]")
        return
    head = f"{indent}sum of {describe_leaves(tree.leaves(node), tree.n)} ({tree.size(node)} terms)"
    steps, bottom = _spine(tree, node)
    if bottom < 0 or steps:
        shape, start = _chain_text(steps, on_top=bottom >= 0)
        lines.append(f"{head}: {shape}" + (f", from {start}" if start else ""))
        if bottom >= 0:
            _render(tree, bottom, indent + "  ", lines, budget)
        return
    parts, pattern, shape_of = _cut(tree, node)
    groups: dict[int, list[int]] = {}
    for part in parts:
        groups.setdefault(shape_of.get(part, -1), []).append(part)
    if pattern and len(groups) <= 3:
        if list(groups) == [-1]:
            lines.append(f"{head}: {pattern} over the {len(parts)} terms")
            return
        lines.append(f"{head}: {len(parts)} parts combined {pattern}")
        for members in groups.values():
            starts = ", ".join(f"x[{tree.min_leaf(p)}]" for p in members[:_SHOWN])
            more = ", ..." if len(members) > _SHOWN else ""
            if members[0] < tree.n:
                lines.append(f"{indent}  {len(members)} single terms: {starts}{more}")
                continue
            size = tree.size(members[0])
            lines.append(
                f"{indent}  {len(members)} of {size} terms, first at {starts}{more}; each:"
            )
            _render(tree, members[0], indent + "    ", lines, budget)
        return
    kids = tree.children(node)
    kind = "addition" if len(kids) == 2 else f"fused {len(kids)}-term sum"
    lines.append(f"{head}: {kind} of")
    for child in kids:
        _render(tree, child, indent + "  ", lines, budget)


def _split_text(tree: Nodes, node: int) -> str:
    parts = [describe_leaves(tree.leaves(c), tree.n) for c in tree.children(node)]
    shown = " + ".join(parts[:_SHOWN]) + (" + ..." if len(parts) > _SHOWN else "")
    return f"{shown} ({len(parts)} operands)"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def mismatch_text(tree_a: Nodes, a: int, tree_b: Nodes, b: int, name_a: str, name_b: str) -> str:
    """The failure text of ``fp.assert_same_order``: ``a`` and ``b`` are the first nodes (over
    the same terms) that the two trees split differently; each side's split and subtree."""
    return "\n".join(
        [
            f"{name_a} and {name_b} accumulate {tree_a.n} {tree_a.dtype} terms in different "
            "orders.",
            f"First difference: the sum of {describe_leaves(tree_a.leaves(a), tree_a.n)} "
            f"({tree_a.size(a)} terms)",
            f"  {name_a} adds {_split_text(tree_a, a)}",
            f"  {name_b} adds {_split_text(tree_b, b)}",
            f"{name_a}:",
            _indent(render(tree_a, a, max_lines=8)),
            f"{name_b}:",
            _indent(render(tree_b, b, max_lines=8)),
        ]
    )
