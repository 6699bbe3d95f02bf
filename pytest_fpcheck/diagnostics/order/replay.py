"""Summing in a given order, in a format's arithmetic: the replay behind
``SummationTree.replay`` and ``verify`` (FPRev section 3.3 checks orders this way).

Binary nodes are IEEE additions with round-to-nearest-even. They run in the format's own NumPy
dtype (ml_dtypes for bfloat16 and float8), whose addition computes in float32 or float64 and
rounds once to the format: a double rounding, but an innocuous one, since the wide format has at
least ``2p + 2`` bits (Figueroa, "When is double rounding innocuous?", 1995). tfloat32 has no
dtype and is rounded explicitly. Nodes of the same height are added in one vectorised step.

A fused node adds its children exactly and rounds once (:func:`round_exact_sum`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from ...formats import Format, numpy_dtype, round_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["LevelPlan", "level_plan", "replay_rows", "round_exact_sum"]

# per height: the binary nodes, their two children (an (m, 2) array), and the fused nodes
LevelPlan = list[tuple["NDArray[np.int64]", "NDArray[np.int64]", list[int]]]


def level_plan(n: int, kids: tuple[tuple[int, ...], ...]) -> LevelPlan:
    """Inner nodes (numbered ``n + k``, children before parents) grouped by height."""
    height = [0] * (n + len(kids))
    for k, children in enumerate(kids):
        height[n + k] = 1 + max(height[c] for c in children)
    top = max(height, default=0)
    binary: list[list[tuple[int, int, int]]] = [[] for _ in range(top + 1)]
    fused: list[list[int]] = [[] for _ in range(top + 1)]
    for k, children in enumerate(kids):
        node = n + k
        if len(children) == 2:
            binary[height[node]].append((node, children[0], children[1]))
        else:
            fused[height[node]].append(node)
    plan: LevelPlan = []
    for h in range(1, top + 1):
        triple = np.array(binary[h], dtype=np.int64).reshape(-1, 3)
        plan.append((triple[:, 0], triple[:, 1:], fused[h]))
    return plan


def replay_rows(
    n: int,
    kids: tuple[tuple[int, ...], ...],
    plan: LevelPlan,
    leaves: NDArray[np.float64],
    acc: Format,
    out: Format,
) -> NDArray[np.float64]:
    """One sum per row of ``leaves`` (values already on the input grid), every node rounded to
    ``acc``, the root then rounded to ``out``."""
    native = acc.name != "tfloat32"
    work = numpy_dtype(acc) if native else np.dtype(np.float64)
    values = np.empty((leaves.shape[0], n + len(kids)), dtype=work)
    values[:, :n] = leaves.astype(work)
    with np.errstate(over="ignore", invalid="ignore"):
        for ids, pairs, fused in plan:
            if ids.size:
                total = values[:, pairs[:, 0]] + values[:, pairs[:, 1]]
                values[:, ids] = total if native else round_to(total, acc)
            for node in fused:
                terms = values[:, list(kids[node - n])].astype(np.float64)
                values[:, node] = [round_exact_sum(row, acc) for row in terms]
    root = n + len(kids) - 1 if kids else 0
    result: NDArray[np.float64] = round_to(values[:, root].astype(np.float64), out)
    return result


def round_exact_sum(terms: NDArray[np.float64], fmt: Format) -> float:
    """The exact sum of ``terms`` rounded once to ``fmt`` (nearest, ties to even).

    ``math.fsum`` gives s = RN64(S) of the exact sum S, and the sign of the residual S - s. Every
    rounding boundary of ``fmt`` (a midpoint between neighbours) is a float64 number, so S and s
    round alike except when s is itself a midpoint and S is not: then the residual's sign picks
    the neighbour.
    """
    if not np.all(np.isfinite(terms)):
        return float(round_to(np.sum(terms), fmt)[()])
    try:
        s = math.fsum(terms)
    except OverflowError:
        s = math.copysign(math.inf, float(sum(Fraction(t) for t in terms.tolist())))
    if fmt.name == "float64" or not math.isfinite(s):
        return float(round_to(s, fmt)[()])
    residual = math.fsum([*terms.tolist(), -s])
    lo = float(round_to(s, fmt, "down")[()])
    hi = float(round_to(s, fmt, "up")[()])
    midpoint = math.isfinite(hi) and math.isfinite(lo) and lo != hi and s == (lo + hi) / 2
    if residual != 0 and midpoint:
        return hi if residual > 0 else lo
    return float(round_to(s, fmt)[()])
