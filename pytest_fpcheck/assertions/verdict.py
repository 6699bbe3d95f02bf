"""Type-I / Type-II classification (RENDER section III-A, step 3).

The rule (API section 1):

* one-sided (RENDER): every expected element must lie inside the enclosure of ``actual``;
* two-sided, when ``expected`` has bounds too: the two enclosures must intersect element-wise;
  disjoint enclosures prove a bug; ``expected`` may itself be a Bounds (its value and its
  enclosure), and one of mode ``"exact"`` (``fp.exact_reference``) judges against the exact
  result, which the message says;
* NaN and Inf positions are compared before values: an element where one side is NaN (or an
  infinity the other side's enclosure does not reach) is outside; where both are NaN it matches
  only with ``equal_nan``;
* without any bounds, the comparison falls back to ``rtol``/``atol`` and says so: kind
  ``"close"`` (within tolerance, no round-off claim) or ``"bug"``; it never says "roundoff";
* every bounded verdict states its resolution (:mod:`.resolution`: the median over the elements
  of the smallest relative deviation the enclosure would have flagged) and where no element is
  outside but the enclosure cannot separate round-off from a bug (an unbounded enclosure on a
  finite value, or a resolution worse than ``max_resolution``), the kind is ``"inconclusive"``,
  never ``"roundoff"`` (API section 9): a Type-I verdict always comes from an enclosure that
  rejects a factor of 2 on at least half of the elements.

Before judging, ``actual`` is checked against its own enclosure: a computed value outside the
bounds recorded for it would be a soundness bug of this package, reported as
:class:`~pytest_fpcheck.errors.InternalError`, never as a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from ..adapters import as_float64, is_torch_tensor, storage_format
from ..errors import InternalError, InvalidArgument
from ..formats import Format, ulp
from ..interval.bounds import Bounds
from ..interval.rounding import down_to, up_to
from . import messages
from .resolution import (
    Resolution,
    current_max_resolution,
    inconclusive_reason,
    resolution_from,
)
from .summary import Summary, median_of, summarise

__all__ = ["KINDS", "Excess", "Offender", "Verdict", "classify", "default_tolerances"]

KINDS = ("exact", "roundoff", "inconclusive", "close", "bug")

#: what the headline of a failure message says of each kind
_HEADLINES = {
    "exact": "exact: actual equals expected element for element",
    "roundoff": "Type-I (round-off): the difference is within the round-off that the computation of actual can produce",
    "inconclusive": "inconclusive: no element is outside the round-off enclosure of actual, but the enclosure is too wide to tell round-off from a bug",
    "close": "within rtol/atol, but unproven: no round-off bounds were recorded for actual",
    "bug": "Type-II (bug): the difference is more than round-off can explain",
}
_FALLBACK_BUG = (
    "outside rtol/atol; no round-off bounds were recorded for actual, so this is a tolerance "
    "failure, not a proof of a bug (compute actual inside fp.track() for a verdict)"
)

# torch.testing's defaults (torch/testing/_comparison.py); float8 has none there, so one
# unit round-off of the format is used.
_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "tfloat32": (1e-3, 1e-5),
    "float64": (1e-7, 1e-7),
    "float8_e4m3fn": (2.0**-4, 2.0**-9),
    "float8_e5m2": (2.0**-3, 2.0**-16),
}


def default_tolerances(fmt: Format) -> tuple[float, float]:
    """(rtol, atol) as ``torch.testing.assert_close`` uses them for ``fmt``."""
    return _TOLERANCES[fmt.name]


class Excess(NamedTuple):
    """How far the worst element lies outside: absolute, in radii of the enclosure, in ULPs."""

    absolute: float
    radii: float
    ulps: float


class Offender(NamedTuple):
    """One element: its position, both values and the enclosure of actual there."""

    position: tuple[int, ...]
    actual: float
    expected: float
    lo: float
    hi: float


@dataclass(frozen=True)
class Allclose:
    """What plain ``allclose`` would have said about the same pair."""

    rtol: float
    atol: float
    total: int
    mismatched: int
    greatest_absolute: float
    greatest_absolute_index: tuple[int, ...] | None
    greatest_relative: float
    greatest_relative_index: tuple[int, ...] | None

    @property
    def passed(self) -> bool:
        return self.mismatched == 0


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing ``actual`` with ``expected`` (see the module docstring)."""

    kind: str
    outside: int
    total: int
    worst_index: tuple[int, ...] | None
    worst_excess: Excess | None
    offenders: tuple[Offender, ...]
    format: Format
    allclose: Allclose
    two_sided: bool = False
    fallback: bool = False
    against: str = ""
    nonfinite_mismatches: int = 0
    tightness: float | None = None
    resolved: Resolution | None = None
    max_resolution: float | None = None
    reason: str = ""
    widest: str = ""
    estimate: dict[str, Any] | None = None
    provenance: str = ""
    notes: tuple[str, ...] = ()
    shape: tuple[int, ...] = ()
    worst: Offender | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Neither a bug nor inconclusive."""
        return self.kind not in ("bug", "inconclusive")

    @property
    def resolution(self) -> float | None:
        """The smallest relative deviation the enclosure would have flagged, as the median
        over the elements (:mod:`~pytest_fpcheck.assertions.resolution`); None without bounds."""
        return None if self.resolved is None else self.resolved.median

    def report(self) -> str:
        """The verdict as text, in the layout of every failure message
        (:mod:`~pytest_fpcheck.assertions.messages`)."""
        text = _FALLBACK_BUG if self.fallback and self.kind == "bug" else _HEADLINES[self.kind]
        if self.against:
            text += f", judged against {self.against}"
        if self.estimate is not None and self.kind != "exact":
            text = _estimated(text, self.estimate)
        lines = [messages.headline("verdict", [self.kind], text)]
        lines.append(messages.count_line(self.outside, self.total, self._counted()))
        if self.nonfinite_mismatches:
            lines.append(f"NaN/Inf positions differ at {self.nonfinite_mismatches} of them")
        if self.worst is not None:
            lines.append("worst at index " + self._offender_line(self.worst))
            if self.worst_excess is not None:
                excess = self.worst_excess
                lines.append(
                    messages.excess_line(
                        excess.absolute, excess.radii, excess.ulps, self.format.name
                    )
                )
        lines += messages.offender_lines(self._offender_line(o) for o in self.offenders)
        if self.tightness is not None:
            lines.append(f"enclosure: median radius {self.tightness:.3g} ULP ({self.format.name})")
        if self.resolved is not None:
            lines.append(_resolution_line(self.resolved))
        if self.reason:
            lines.append(f"why inconclusive: {self.reason}")
        if self.provenance:
            lines.append(f"widest provenance: {self.provenance}")
        if self.kind == "inconclusive":
            lines.append(_NEXT_STEP)
        lines += [f"note: {note}" for note in self.notes]
        close = self.allclose
        lines.append(
            messages.allclose_line(
                rtol=close.rtol,
                atol=close.atol,
                mismatched=close.mismatched,
                total=close.total,
                greatest_absolute=close.greatest_absolute,
                greatest_absolute_index=close.greatest_absolute_index,
                greatest_relative=close.greatest_relative,
                greatest_relative_index=close.greatest_relative_index,
            )
        )
        return messages.message(lines)

    def _counted(self) -> str:
        """What the count line counts."""
        if self.fallback:
            return "elements outside rtol/atol"
        if self.two_sided:
            other = self.against or "expected"
            return f"elements where the enclosures of actual and {other} are disjoint"
        return "expected elements outside the round-off enclosure of actual"

    def _offender_line(self, offender: Offender) -> str:
        """One element; a tolerance comparison (no bounds) has no enclosure to show."""
        enclosure = None if self.fallback else (offender.lo, offender.hi)
        return messages.offender_line(
            offender.position, offender.actual, offender.expected, enclosure
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (for the run report)."""
        return {
            "kind": self.kind,
            "outside": self.outside,
            "total": self.total,
            "shape": list(self.shape),
            "dtype": self.format.name,
            "two_sided": self.two_sided,
            "fallback": self.fallback,
            "worst_index": list(self.worst_index) if self.worst_index is not None else None,
            "worst_excess": self.worst_excess._asdict() if self.worst_excess else None,
            "tightness_ulps": self.tightness,
            "resolution": self.resolution,
            "factor2_fraction": self.resolved.factor2 if self.resolved is not None else None,
            "unbounded": self.resolved.unbounded if self.resolved is not None else None,
            "max_resolution": self.max_resolution,
            "inconclusive_reason": self.reason or None,
            "widest": self.widest or None,
            "provenance": self.provenance,
            "notes": list(self.notes),
            "allclose_passed": self.allclose.passed,
            "estimate": self.estimate,
        }


_NEXT_STEP = (
    "next: judge the model module by module on the reference's inputs, where enclosures stay "
    "narrow: fp.compare_modules(model, torch.float64, *inputs) names the first module that is "
    "a bug (docs/roundoff.md); or bound this run only, which is narrower: "
    'fp.track(mode="a_posteriori"); or accept this verdict with accept_inconclusive=True'
)


def _estimated(text: str, estimate: dict[str, Any]) -> str:
    """A headline of stochastic bounds: ``Type-I (round-off), estimated, not proven (...): ...``."""
    kind, _, rest = text.partition(": ")
    return (
        f"{kind}, estimated, not proven (stochastic arithmetic, {estimate['samples']} runs, "
        f"confidence {estimate['confidence']:g}, seed {estimate['seed']}): {rest}"
    )


def _estimate_of(bounds: Bounds) -> dict[str, Any] | None:
    """What a verdict records of stochastic bounds (None for proven ones)."""
    if bounds.mode != "stochastic" or bounds.estimate is None:
        return None
    return {
        "method": "stochastic arithmetic",
        "samples": bounds.estimate.samples,
        "confidence": bounds.estimate.confidence,
        "seed": bounds.estimate.seed,
    }


def _resolution_line(resolved: Resolution) -> str:
    """``resolution: R relative ...``: what the enclosure could have flagged."""
    return (
        f"resolution: {resolved.median:.3g} relative (the median element flags a deviation of "
        f"that size); {100.0 * resolved.factor2:.3g}% of the elements would reject a factor of 2"
    )


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of flat (C-order) position ``flat`` in an array of ``shape``."""
    index = []
    for size in reversed(shape):
        flat, position = divmod(flat, size)
        index.append(position)
    return tuple(reversed(index))


def _allclose(found: Summary, rtol: float, atol: float, shape: tuple[int, ...]) -> Allclose:
    return Allclose(
        rtol,
        atol,
        math.prod(shape),
        found.mismatched,
        found.greatest_absolute,
        _index(found.greatest_absolute_index, shape),
        found.greatest_relative,
        _index(found.greatest_relative_index, shape),
    )


def _check_bounds(bounds: Any, name: str, shape: tuple[int, ...]) -> Bounds:
    if not isinstance(bounds, Bounds):
        raise InvalidArgument(
            name, bounds, "a Bounds (from fp.bounds_of, fp.roundoff_bounds or fp.hull)"
        )
    if bounds.shape != shape:
        raise InvalidArgument(
            name, bounds, f"Bounds of shape {shape}, the shape of the arrays compared"
        )
    return bounds


def split_expected(expected: Any, expected_bounds: Bounds | None) -> tuple[Any, Bounds | None]:
    """``expected`` given as a Bounds (``fp.exact_reference``'s enclosure of the exact result,
    or any recorded enclosure) stands for its value, with itself as ``expected_bounds``."""
    if not isinstance(expected, Bounds):
        return expected, expected_bounds
    if expected_bounds is not None:
        raise InvalidArgument(
            "expected_bounds",
            expected_bounds,
            "None when expected is a Bounds (its own enclosure is used)",
        )
    return expected.value, expected


def _tolerance(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgument(name, value, "a non-negative number or None (the dtype's default)")
    return float(value)


def classify(
    actual: Any,
    expected: Any,
    *,
    bounds: Bounds | None = None,
    expected_bounds: Bounds | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    max_resolution: float | None = None,
) -> Verdict:
    """Compare ``actual`` with ``expected`` and say whether their difference is round-off.

    ``max_resolution`` (a relative deviation below 0.5; None: the run's default, 0.1 unless
    the ``fpcheck_max_resolution`` option says otherwise) is the worst resolution a
    "roundoff" verdict may have: a wider enclosure gives "inconclusive"."""
    threshold = current_max_resolution(max_resolution)
    expected, expected_bounds = split_expected(expected, expected_bounds)
    if is_torch_tensor(actual) and is_torch_tensor(expected) and actual.device != expected.device:
        raise InvalidArgument(
            "expected",
            expected,
            f"a tensor on {actual.device}, the device of actual",
            hint="Move one of them (e.g. expected.to(actual.device)).",
        )
    a = as_float64(actual, argument="actual", copy=False)  # only read: a verdict keeps none
    e = as_float64(expected, argument="expected", copy=False)
    if a.shape != e.shape:
        raise InvalidArgument(
            "expected",
            expected,
            f"an array of shape {a.shape}, the shape of actual",
            hint="Broadcasting is not applied: compare arrays of one shape.",
        )
    if a.size == 0:
        raise InvalidArgument("actual", actual, "a non-empty array (there is nothing to compare)")
    fmt = storage_format(actual, argument="actual")
    shape = tuple(a.shape)
    rtol_value, atol_value = _tolerance(rtol, "rtol"), _tolerance(atol, "atol")
    default_rtol, default_atol = default_tolerances(fmt)
    rtol_used = default_rtol if rtol_value is None else rtol_value
    atol_used = default_atol if atol_value is None else atol_value
    bounds = _read(actual, a) if bounds is None else _check_bounds(bounds, "bounds", shape)
    if expected_bounds is None:
        expected_bounds = _read(expected, e)
    else:
        expected_bounds = _check_bounds(expected_bounds, "expected_bounds", shape)
    if bounds is None:
        return _fallback(a, e, fmt, shape, rtol_used, atol_used, equal_nan)
    judged = partial(
        summarise,
        a,
        e,
        bounds,
        expected_bounds=expected_bounds,
        equal_nan=equal_nan,
        rtol=rtol_used,
        atol=atol_used,
        fmt=fmt,
    )
    found = judged(None)
    grid_note: tuple[str, ...] = ()
    if expected_bounds is None and found.raw_outside:
        found, grid_note = _judged_on_grid(judged, found, bounds, expected)
    estimated_notes = _self_check(bounds, a, "actual", found.self_outside, found.first_self_outside)
    if expected_bounds is not None:
        estimated_notes += _self_check(
            expected_bounds,
            e,
            "expected",
            found.expected_self_outside,
            found.first_expected_self_outside,
        )
    estimated_notes += grid_note
    outside = found.outside
    kind = "exact" if found.all_equal else ("roundoff" if outside == 0 else "bug")
    resolved = resolution_from(found.relative, found.factor2, found.unbounded)
    reason = inconclusive_reason(resolved, threshold) if kind == "roundoff" else None
    if reason is not None:
        kind = "inconclusive"
    worst, excess = _worst(a, e, bounds, found, fmt, shape)
    offenders = tuple(_offender(a, e, bounds, i, shape) for i in found.offenders)
    notes = (
        bounds.notes
        + (expected_bounds.notes if expected_bounds is not None else ())
        + estimated_notes
    )
    return Verdict(
        kind=kind,
        outside=outside,
        total=int(a.size),
        worst_index=worst.position if worst is not None else None,
        worst_excess=excess,
        offenders=offenders,
        format=fmt,
        allclose=_allclose(found, rtol_used, atol_used, shape),
        two_sided=expected_bounds is not None,
        against="the exact result"
        if expected_bounds is not None and expected_bounds.mode == "exact"
        else "",
        nonfinite_mismatches=found.nonfinite,
        tightness=median_of(found.ratio) if found.ratio.size else None,
        resolved=resolved,
        max_resolution=threshold,
        reason=reason or "",
        widest=bounds.provenance.entries[0][0] if bounds.provenance.entries else "",
        # stochastic bounds come from whole runs, not from operations that widened them
        provenance="" if bounds.mode == "stochastic" else bounds.provenance.describe(),
        notes=tuple(dict.fromkeys(notes)),
        shape=shape,
        worst=worst,
        estimate=_estimate_of(bounds)
        or (_estimate_of(expected_bounds) if expected_bounds is not None else None),
    )


def _judged_on_grid(
    judged: Callable[[tuple[np.ndarray, np.ndarray] | None], Summary],
    found: Summary,
    bounds: Bounds,
    expected: Any,
) -> tuple[Summary, tuple[str, ...]]:
    """The one-sided verdict of an ``expected`` (without bounds of its own) some of whose
    elements lie outside the enclosure of ``actual``.

    The rule: an ``expected`` stored in a format F coarser than float64 is at best the exact
    result rounded onto F, and any faithful rounding onto F of a value in [lo, hi] lies in
    [down_to(lo, F), up_to(hi, F)] (:mod:`pytest_fpcheck.interval.rounding`), so that is the
    range it is judged against. Without it, an enclosure that hugs the exact value (a result
    rounded to nearest) would call a float32 reference's own last rounding a bug. Round-off
    ``expected`` accumulated before its last rounding is not bounded by anything: the note
    says so, and how to get a sound reference."""
    fmt = storage_format(expected, argument="expected")
    if fmt.precision >= 53:
        return found, ()
    note = (
        f"expected is stored in {fmt.name} and has no bounds of its own: it was judged as the "
        f"exact result rounded onto {fmt.name}, but any round-off it accumulated before its "
        "last rounding is not bounded; compute expected in float64, or under fp.track() for "
        "a two-sided verdict"
    )
    return judged((down_to(bounds.lo, fmt), up_to(bounds.hi, fmt))), (note,)


def recorded_bounds(x: Any) -> Bounds | None:
    """The bounds tracking recorded for ``x`` (only tensors are tracked; torch is already
    imported when ``x`` is one)."""
    if not is_torch_tensor(x):
        return None
    from ..tracking.track import bounds_of

    return bounds_of(x)


def _read(x: Any, value: np.ndarray) -> Bounds | None:
    """:func:`recorded_bounds` of ``x`` whose float64 ``value`` is in hand, its ends read in
    place (the verdict only reads them)."""
    if not is_torch_tensor(x):
        return None
    from ..tracking.track import recorded

    return recorded(x, value, copy=False)


def _self_check(
    bounds: Bounds, values: np.ndarray, name: str, count: int, first: int
) -> tuple[str, ...]:
    """A computed value outside its proven enclosure (``count`` of them, the first at flat
    index ``first``) is a bug of this package (:class:`InternalError`); outside stochastic
    bounds it is a note (a single run lies outside the interval at the bounds' confidence, or
    ``name`` was not computed by the function the bounds were estimated for)."""
    if not count:
        return ()
    if bounds.mode == "stochastic":
        return (
            f"the computed {name} lies outside its stochastic interval at {count} / "
            f"{values.size} elements: a single run may (rarely, at the stated confidence), or "
            f"{name} was not computed by the function the bounds were estimated for",
        )
    raise InternalError(
        f"the computed {name} lies outside the enclosure recorded for it",
        {
            "index": _index(first, tuple(values.shape)),
            "value": float(values.flat[first]),
            "lo": float(bounds.lo.flat[first]),
            "hi": float(bounds.hi.flat[first]),
            "provenance": bounds.provenance.describe(),
        },
    )


def _offender(
    a: np.ndarray, e: np.ndarray, bounds: Bounds, flat: int, shape: tuple[int, ...]
) -> Offender:
    return Offender(
        _index(flat, shape),
        float(a.flat[flat]),
        float(e.flat[flat]),
        float(bounds.lo.flat[flat]),
        float(bounds.hi.flat[flat]),
    )


def _worst(
    a: np.ndarray,
    e: np.ndarray,
    bounds: Bounds,
    found: Summary,
    fmt: Format,
    shape: tuple[int, ...],
) -> tuple[Offender | None, Excess | None]:
    """The element farthest outside, with its excess; (None, None) when none is."""
    if found.worst < 0:
        return None, None
    flat, absolute, r = found.worst, found.gap, found.radius
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        radii = absolute / r if r > 0 else float("inf")
        reference = e.flat[flat] if np.isfinite(e.flat[flat]) else a.flat[flat]
        unit = float(ulp(reference, fmt)) if np.isfinite(reference) else float("nan")
        ulps = absolute / unit if unit > 0 else float("nan")
    return _offender(a, e, bounds, flat, shape), Excess(absolute, radii, ulps)


def _why_untracked() -> tuple[str, ...]:
    """Why ``pytest --fpcheck`` did not track the test asking, when it did not (issue 17)."""
    from ..tracking.core.gaps import why_untracked

    reason = why_untracked()
    return (reason,) if reason else ()


def _fallback(
    a: np.ndarray,
    e: np.ndarray,
    fmt: Format,
    shape: tuple[int, ...],
    rtol: float,
    atol: float,
    equal_nan: bool,
) -> Verdict:
    found = summarise(a, e, None, None, None, equal_nan=equal_nan, rtol=rtol, atol=atol, fmt=fmt)
    close = _allclose(found, rtol, atol, shape)
    kind = "exact" if found.all_equal else ("close" if found.outside == 0 else "bug")
    offenders = tuple(
        Offender(_index(i, shape), float(a.flat[i]), float(e.flat[i]), math.nan, math.nan)
        for i in found.offenders
    )
    worst = None
    if found.outside:
        i = found.greatest_absolute_index
        worst = Offender(_index(i, shape), float(a.flat[i]), float(e.flat[i]), math.nan, math.nan)
    return Verdict(
        kind=kind,
        outside=found.outside,
        total=int(a.size),
        worst_index=worst.position if worst is not None else None,
        worst_excess=None,
        offenders=offenders,
        format=fmt,
        allclose=close,
        fallback=True,
        nonfinite_mismatches=found.nonfinite,
        notes=(
            "no round-off bounds were recorded for actual: compared with rtol/atol only",
            *_why_untracked(),
        ),
        shape=shape,
        worst=worst,
    )
