"""What the engine hands to users: the enclosure of one computed array, with its provenance.

Containment rule (API section 1): ``y`` is inside when ``lo <= y <= hi``; a NaN is inside only
where the enclosure is the whole line ``[-inf, +inf]``, the engine's way of saying "this element
may be NaN" (see :mod:`pytest_fpcheck.interval.elementwise`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..formats import Format
from .rounding import up

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

__all__ = ["MODES", "Bounds", "Estimate", "Provenance", "contains"]

#: how a Bounds was obtained: proven, tighter with a documented confidence, estimated from
#: stochastic runs (:func:`pytest_fpcheck.stochastic.stochastic_bounds`), or an enclosure of the
#: exact result itself (:func:`pytest_fpcheck.oracle.exact.exact_reference`)
MODES = ("rigorous", "probabilistic", "a_posteriori", "stochastic", "exact")

_PROVENANCE_KEPT = 5


@dataclass(frozen=True)
class Provenance:
    """The operation sites that widened an enclosure most: ``(site, widening)`` pairs, widest
    first, at most five. ``widening`` is the largest radius an operation added by its own
    rounding (not the radius it inherited)."""

    entries: tuple[tuple[str, float], ...] = ()

    def merge(
        self, *others: Provenance, site: str | None = None, widening: float = 0.0
    ) -> Provenance:
        """The union of several provenances plus one new site, widest first, deduplicated."""
        best: dict[str, float] = {}
        for provenance in (self, *others):
            for name, amount in provenance.entries:
                best[name] = max(best.get(name, 0.0), amount)
        if site is not None and widening > 0:
            best[site] = max(best.get(site, 0.0), widening)
        ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
        return Provenance(tuple(ranked[:_PROVENANCE_KEPT]))

    def describe(self) -> str:
        if not self.entries:
            return "no operation widened it (exact inputs and exact operations)"
        return "; ".join(f"{site} (+{amount:.3g})" for site, amount in self.entries)


def contains(
    lo: NDArray[np.float64], hi: NDArray[np.float64], y: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """Element-wise ``lo <= y <= hi``, with NaN inside only where the enclosure is unbounded."""
    with np.errstate(invalid="ignore"):
        inside: NDArray[np.bool_] = ((lo <= y) & (y <= hi)) | (
            np.isnan(y) & np.isneginf(lo) & np.isposinf(hi)
        )
    return inside


@dataclass(frozen=True, eq=False)
class Estimate:
    """What the stochastic runs behind a ``mode="stochastic"`` Bounds measured, per element:
    the samples' ``mean`` and standard deviation ``std``, CESTAC's number of significant decimal
    ``digits`` the mean shares with the exact result; and the run: ``samples``, the family-wise
    ``confidence`` of the interval over all ``elements``, the Student's t ``quantile`` it used,
    and the ``seed`` that reproduces the samples."""

    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    digits: NDArray[np.float64]
    samples: int
    confidence: float
    quantile: float
    seed: int

    def describe(self) -> str:
        """One line for a verdict: how the interval was estimated."""
        return (
            f"stochastic arithmetic, estimated, not proven: {self.samples} randomly rounded "
            f"runs (seed={self.seed}), interval at confidence {self.confidence:g} over all "
            f"elements (Student's t quantile {self.quantile:.3g}, {self.samples - 1} degrees "
            f"of freedom); median {float(np.median(self.digits)):.3g} significant digits"
        )


@dataclass(frozen=True, eq=False)
class Bounds:
    """The recorded enclosure ``[lo, hi]`` of a computed array ``value``.

    ``lo``, ``hi`` and ``value`` are float64 NumPy arrays of the array's shape; ``dtype`` is the
    array's own dtype and ``format`` its :class:`~pytest_fpcheck.formats.Format`; ``mode`` is
    ``"rigorous"``, ``"probabilistic"``, ``"a_posteriori"`` (``[lo, hi]`` holds the exact
    result and the value this run computed, not other runs' values) or ``"stochastic"`` (then ``estimate`` holds the
    statistics, ``value`` is the samples' mean, and ``[lo, hi]`` holds the exact result and a
    new run's result at the estimate's confidence: estimated, not proven) or ``"exact"`` (from
    ``fp.exact_reference``: ``[lo, hi]`` encloses the exact result, ``value`` is it rounded to
    nearest, ``dtype`` float64); ``notes`` says
    anything a reader of a verdict should know about how the bounds were obtained.
    """

    lo: NDArray[np.float64]
    hi: NDArray[np.float64]
    value: NDArray[np.float64]
    dtype: Any
    format: Format
    provenance: Provenance = field(default_factory=Provenance)
    mode: str = "rigorous"
    notes: tuple[str, ...] = ()
    estimate: Estimate | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.lo.shape)

    @property
    def radius(self) -> NDArray[np.float64]:
        """(hi - lo) / 2, rounded up: half the width of the enclosure."""
        with np.errstate(invalid="ignore", over="ignore"):
            width = np.where(self.lo == self.hi, 0.0, up(self.hi - self.lo))  # -inf == -inf too
        radius: NDArray[np.float64] = np.where(np.isnan(width), np.inf, width / 2)
        return radius

    def contains(self, y: ArrayLike) -> NDArray[np.bool_]:
        """Element-wise: does the enclosure contain ``y`` (broadcast to the bounds' shape)?"""
        from ..adapters import as_float64

        return contains(self.lo, self.hi, as_float64(y, argument="y"))

    def __repr__(self) -> str:
        return (
            f"Bounds(shape={self.shape}, format={self.format.name}, mode={self.mode}, "
            f"max radius={float(np.max(self.radius, initial=0.0)):.3g})"
        )
