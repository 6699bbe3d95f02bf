"""The elements a verdict's plot shows: ``|actual - expected|`` against the enclosure's radius,
per element, outside elements marked (RENDER, section III-A: an element is a bug where the
expected value lies outside the enclosure of the computed one).

A plot helps where a number cannot tell the story: a bug (which elements lie outside, and by
how much more than their radius), an inconclusive verdict and a loose round-off enclosure (how
far below its radius every error sits). Only those verdicts get points, so a run of ten thousand tight verdicts
stays small. At most :data:`POINTS` elements are kept, half outside (the worst among them) and
half inside unless one side has fewer, each side sampled evenly over the array; values keep three significant digits, all a
log-log plot needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kinds import loose_warning

if TYPE_CHECKING:
    import numpy as np

__all__ = ["POINTS", "element_points"]

#: elements a verdict's plot shows at most
POINTS = 48
#: the verdict kinds whose elements are always plotted (a round-off one only when loose)
_PLOTTED = ("bug", "inconclusive")


def _evenly(indices: np.ndarray, count: int) -> np.ndarray:
    """At most ``count`` of ``indices``, evenly spaced over them (first and last kept)."""
    import numpy as np

    if indices.size <= count:
        return indices
    picks: np.ndarray = indices[np.linspace(0, indices.size - 1, count).round().astype(np.int64)]
    return picks


def _three_digits(value: float) -> float:
    return float(f"{value:.3g}")


def element_points(
    verdict: Any,
    actual: Any,
    expected: Any,
    bounds: Any = None,
    expected_bounds: Any = None,
) -> list[list[float]] | None:
    """``[[radius, |actual - expected|, outside], ...]`` (``outside`` 1 or 0) of the elements
    of a bug, inconclusive or loose verdict (module docstring), with the bounds the verdict used (the
    recorded ones unless given); None for any other verdict. The pytest layer passes it to
    :func:`pytest_fpcheck.assertions.record.collecting`, which calls it as a verdict is made."""
    record = {
        "kind": verdict.kind,
        "dtype": verdict.format.name,
        "tightness_ulps": verdict.tightness,
    }
    if verdict.fallback or not (verdict.kind in _PLOTTED or loose_warning(record)):
        return None
    import numpy as np

    from ..adapters import as_float64
    from ..assertions.verdict import recorded_bounds
    from ..interval.bounds import contains

    bounds = recorded_bounds(actual) if bounds is None else bounds
    if bounds is None:
        return None
    if expected_bounds is None:
        expected_bounds = recorded_bounds(expected)
    a = as_float64(actual, argument="actual").ravel()
    e = as_float64(expected, argument="expected").ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        distance = np.abs(a - e)
        radius = bounds.radius.ravel()
        if expected_bounds is not None:
            radius = np.maximum(radius, expected_bounds.radius.ravel())
            lo = np.maximum(bounds.lo.ravel(), expected_bounds.lo.ravel())
            inside = lo <= np.minimum(bounds.hi.ravel(), expected_bounds.hi.ravel())
        else:
            inside = contains(bounds.lo.ravel(), bounds.hi.ravel(), e)
    shown = np.isfinite(distance) & np.isfinite(radius)
    outside, within = np.flatnonzero(shown & ~inside), np.flatnonzero(shown & inside)
    room = POINTS - min(within.size, POINTS // 2)  # half each, unless one side has fewer
    picked = _evenly(outside, room)
    if verdict.worst_index is not None and verdict.shape:
        worst = int(np.ravel_multi_index(verdict.worst_index, verdict.shape))
        if shown[worst] and worst not in picked:
            picked = np.append(picked[: room - 1], worst)
    rest = _evenly(within, POINTS - picked.size)
    return [
        [_three_digits(radius[i]), _three_digits(distance[i]), int(not inside[i])]
        for i in np.sort(np.concatenate([picked, rest]))
    ]
