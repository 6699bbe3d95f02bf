"""The resolution of a verdict: how large a deviation its enclosure could have told from round-off
(issue 20; RENDER section III-A's verdict, made honest about its own power).

The rule, per judged element ``i`` (an element whose computed value is finite):

* its *reach* is the distance from the computed value to the farther end of its enclosure,
  ``max(hi - value, value - lo)``: an ``expected`` value farther than that from ``actual`` is
  outside the enclosure, whatever side it lies on. For a two-sided verdict (``expected`` has an
  enclosure too) the reach is the sum of both sides' reaches;
* its *relative reach* is ``reach / |value|``: the smallest relative deviation that element
  would surely have flagged (0 where the reach is 0, infinite where the value is 0 and the
  reach is not, or where the enclosure is unbounded).

A verdict's :attr:`Resolution.median` is the median relative reach over the judged elements:
a deviation of that relative size on every element is flagged on at least half of them.
:attr:`Resolution.factor2` is the fraction of judged elements whose relative reach is below
1/2, the elements that would reject both ``2 * actual`` and ``actual / 2``.

A verdict is *inconclusive* instead of "roundoff" when its enclosure cannot separate round-off
from a bug: a finite computed value has an unbounded enclosure, or the median relative reach
is worse than ``max_resolution``. ``max_resolution`` must be below 1/2, so that a "roundoff"
verdict always comes from an enclosure that flags a factor of 2 on at least half the elements.
The default, :data:`DEFAULT_MAX_RESOLUTION` (0.1), says: a verdict that could not tell a 10%
error from round-off on the median element proves nothing worth the name. A run sets its own
default with the ``fpcheck_max_resolution`` ini option (``--fpcheck-max-resolution``), which the
plugin installs around each test with :func:`~.threshold.run_default` (:mod:`.threshold`, free of
NumPy, holds the threshold and its checks).

This module imports NumPy and the verdict's compiled pass (:mod:`.summary`; Numba is imported
only when a kernel first runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .summary import median_of
from .threshold import (
    DEFAULT_MAX_RESOLUTION,
    check_max_resolution,
    current_max_resolution,
    run_default,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "DEFAULT_MAX_RESOLUTION",
    "Resolution",
    "check_max_resolution",
    "current_max_resolution",
    "inconclusive_reason",
    "resolution_from",
    "run_default",
]


class Resolution(NamedTuple):
    """The summary of an enclosure's relative reach over the judged elements (module
    docstring): ``median``; ``factor2``, the fraction of judged elements that reject a factor
    of 2; ``unbounded``, how many finite values have an unbounded enclosure; ``judged``, how
    many elements were judged (the finite computed values)."""

    median: float
    factor2: float
    unbounded: int
    judged: int


def resolution_from(
    relative: NDArray[np.float64], factor2: int, unbounded: int
) -> Resolution | None:
    """The :class:`Resolution` of the judged elements' relative reaches ``relative`` (of which
    ``factor2`` are below 1/2 and ``unbounded`` come from an unbounded enclosure), as
    :func:`~.summary.summarise` finds them in its pass; None when no element was judged."""
    if not relative.size:
        return None
    return Resolution(
        median=median_of(relative),
        factor2=factor2 / relative.size,
        unbounded=unbounded,
        judged=int(relative.size),
    )


def inconclusive_reason(resolution: Resolution | None, max_resolution: float) -> str | None:
    """Why an enclosure of this resolution cannot give a "roundoff" verdict, or None."""
    if resolution is None:
        return None
    if resolution.unbounded:
        return (
            f"{resolution.unbounded} / {resolution.judged} finite values of actual have an "
            "unbounded enclosure: there the bounds cannot tell any value from round-off"
        )
    if not resolution.median <= max_resolution:
        return (
            f"the enclosure's resolution {resolution.median:.3g} is worse than "
            f"max_resolution={max_resolution:g}: it could not tell a relative error of "
            f"{max_resolution:g} from round-off on half of the elements"
        )
    return None
