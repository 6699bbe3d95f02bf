"""The search of :func:`~pytest_fpcheck.isolate`: CIEL's hierarchical bisection with a 1-minimal
check (Miao, Laguna, Rubio-González, "Expression Isolation of Compiler-Induced
Numerical Inconsistencies in Heterogeneous Code" (CIEL), section 3.2, Algorithm 1), over numbered sites. Pure Python.

The sites are numbered in program order; each carries a *hierarchy path*, its ``nn.Module`` path
then its source line (CIEL's function / block / statement levels). ``resolves(sites)`` runs one
configuration (those sites enhanced) and says whether the inconsistency is gone.

The search (all configurations are cached by their set of sites, so none runs twice):

1. the whole program enhanced; if that does not resolve, the cause is not precision: stop;
2. with ``R`` the sites found so far (at first none) and ``C`` the candidates in program order
   (at first all sites), ``R + C`` resolves and ``R`` does not. Bisection finds the shortest
   prefix ``C[:j]`` with ``R + C[:j]`` resolving: ``C[j-1]`` is needed, joins ``R``, and the
   candidates shrink to ``C[:j-1]``; repeat until ``R`` resolves alone. Several sites that only
   resolve the inconsistency together are found one after the other this way;
3. the 1-minimality check: drop each site of ``R`` in turn; one whose removal still resolves is
   removed (numerics need not be monotone) and the check starts again.

Every configuration enhances a *contiguous* prefix plus the sites already found, so enhanced
regions stay merged (CIEL's region merge, section 3.3: no cast inside a region). Each bisection
step splits at the coarsest boundary of the hierarchy (between top-level modules first, then
submodules, then statements, then operations of one statement) within the middle third of the
range, so that module subtrees are tried before their statements, and the range shrinks by a
third at least: a step count within ``2 ceil(log2 n)`` however lopsided the module tree. With
``k`` sites found among ``N`` that makes at most ``k (2 ceil(log2 N) + 2) + 1`` configurations
(``k ceil(log2 N) + 2k + 1`` on balanced trees) when the numerics are monotone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Trial", "bisection_steps", "search"]

STAGES = ("whole program", "bisection", "minimality")


@dataclass(frozen=True)
class Trial:
    """One configuration the search ran: the sites it enhanced and whether that resolved."""

    sites: frozenset[int]
    stage: str
    resolved: bool


def _common_depth(a: Sequence[str], b: Sequence[str]) -> int:
    depth = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        depth += 1
    return depth


def _split(lo: int, hi: int, candidates: Sequence[int], paths: Sequence[Sequence[str]]) -> int:
    """A split point in (lo, hi): the coarsest hierarchy boundary in the middle third."""
    n = hi - lo
    margin = max(1, -(-n // 3))
    first, last = lo + margin, hi - margin
    if first > last:
        first = last = lo + n // 2
    middle = (lo + hi) / 2
    return min(
        range(first, last + 1),
        key=lambda m: (
            _common_depth(paths[candidates[m - 1]], paths[candidates[m]]),
            abs(m - middle),
        ),
    )


def bisection_steps(n: int) -> int:
    """The most bisection steps a range of ``n`` candidates can take with middle-third splits."""
    steps = [0] * (n + 1)
    for size in range(2, n + 1):
        margin = max(1, -(-size // 3))
        first, last = margin, size - margin
        if first > last:
            first = last = size // 2
        steps[size] = 1 + max(max(steps[m], steps[size - m]) for m in range(first, last + 1))
    return steps[n]


class _Runner:
    def __init__(self, resolves: Callable[[frozenset[int]], bool]) -> None:
        self._resolves = resolves
        self.cache: dict[frozenset[int], bool] = {}
        self.trials: list[Trial] = []

    def __call__(self, sites: frozenset[int], stage: str) -> bool:
        if sites not in self.cache:
            resolved = self._resolves(sites)
            self.cache[sites] = resolved
            self.trials.append(Trial(sites, stage, resolved))
        return self.cache[sites]


def search(
    count: int,
    paths: Sequence[Sequence[str]],
    resolves: Callable[[frozenset[int]], bool],
) -> tuple[tuple[int, ...] | None, list[Trial]]:
    """A 1-minimal set of sites (of ``0 .. count-1``) that resolves, in program order, or None
    when enhancing every site does not resolve; and the configurations run, in order.

    The empty configuration is the plain run, known not to resolve; it is not run again."""
    run = _Runner(resolves)
    run.cache[frozenset()] = False
    everything = frozenset(range(count))
    if count == 0 or not run(everything, STAGES[0]):
        return None, run.trials
    found: list[int] = []
    candidates = list(range(count))
    while not run(frozenset(found), STAGES[1]):
        lo, hi = (
            0,
            len(candidates),
        )  # found + candidates[:lo] fails, found + candidates[:hi] resolves
        while hi - lo > 1:
            middle = _split(lo, hi, candidates, paths)
            if run(frozenset(found).union(candidates[:middle]), STAGES[1]):
                hi = middle
            else:
                lo = middle
        found.append(candidates[hi - 1])
        candidates = candidates[: hi - 1]
    return tuple(sorted(_one_minimal(found, run))), run.trials


def _one_minimal(found: list[int], run: _Runner) -> list[int]:
    """Drop any site whose removal still resolves, until none can be dropped."""
    result = list(found)
    changed = True
    while changed and len(result) > 1:
        changed = False
        for site in list(result):
            rest = [s for s in result if s != site]
            if run(frozenset(rest), STAGES[2]):
                result = rest
                changed = True
                break
    return result
