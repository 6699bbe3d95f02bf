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

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..adapters import as_float64, is_torch_tensor, storage_format
from ..errors import InternalError, InvalidArgument
from ..formats import Format, ulp
from ..interval.bounds import Bounds, contains
from ..interval.rounding import down_to, up_to
from . import messages
from .resolution import (
    Resolution,
    current_max_resolution,
    inconclusive_reason,
    median_of,
    resolution_of,
)

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
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _allclose(
    actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float, equal_nan: bool
) -> Allclose:
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        difference = np.abs(actual - expected)
        same = actual == expected  # equal infinities
        ok = same | (difference <= atol + rtol * np.abs(expected))
        if equal_nan:
            ok |= np.isnan(actual) & np.isnan(expected)
        relative = np.where(same, 0.0, difference / np.abs(expected))
    finite_diff = np.where(np.isnan(difference) | same, -1.0, difference)
    finite_rel = np.where(np.isnan(relative), -1.0, relative)
    shape = tuple(actual.shape)
    worst_abs = int(np.argmax(finite_diff)) if finite_diff.size else None
    worst_rel = int(np.argmax(finite_rel)) if finite_rel.size else None
    return Allclose(
        rtol,
        atol,
        int(actual.size),
        int(np.count_nonzero(~ok)),
        float(max(finite_diff.flat[worst_abs], 0.0)) if worst_abs is not None else 0.0,
        _index(worst_abs, shape) if worst_abs is not None else None,
        float(max(finite_rel.flat[worst_rel], 0.0)) if worst_rel is not None else 0.0,
        _index(worst_rel, shape) if worst_rel is not None else None,
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
    a = as_float64(actual, argument="actual")
    e = as_float64(expected, argument="expected")
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
    close = _allclose(
        a,
        e,
        default_rtol if rtol_value is None else rtol_value,
        default_atol if atol_value is None else atol_value,
        equal_nan,
    )
    bounds = recorded_bounds(actual) if bounds is None else _check_bounds(bounds, "bounds", shape)
    if expected_bounds is None:
        expected_bounds = recorded_bounds(expected)
    else:
        expected_bounds = _check_bounds(expected_bounds, "expected_bounds", shape)
    both_nan = np.isnan(a) & np.isnan(e)
    with np.errstate(invalid="ignore"):
        equal = (a == e) | (both_nan & equal_nan)
    if bounds is None:
        return _fallback(a, e, fmt, shape, close, equal, equal_nan)
    estimated_notes = _self_check(bounds, a, "actual")
    own_radius = _half_width(bounds)  # computed once: it is used three times below
    if expected_bounds is not None:
        estimated_notes += _self_check(expected_bounds, e, "expected")
        with np.errstate(invalid="ignore"):
            lo = np.maximum(bounds.lo, expected_bounds.lo)
            hi = np.minimum(bounds.hi, expected_bounds.hi)
            inside = (lo <= hi) | (np.isnan(a) & np.isnan(e) & equal_nan)
        radius = np.maximum(own_radius, _half_width(expected_bounds))
    else:
        inside, grid_note = _inside_one_sided(bounds, e, expected)
        estimated_notes += grid_note
        if not equal_nan:
            inside &= ~both_nan
        else:
            inside |= both_nan
        radius = own_radius
    outside_mask = ~inside
    outside = int(np.count_nonzero(outside_mask))
    nonfinite = int(np.count_nonzero(_nonfinite_mismatch(a, e) & outside_mask)) if outside else 0
    kind = "exact" if equal.all() else ("roundoff" if outside == 0 else "bug")
    resolved = resolution_of(
        a,
        bounds.lo,
        bounds.hi,
        other=(e, expected_bounds.lo, expected_bounds.hi) if expected_bounds is not None else None,
    )
    reason = inconclusive_reason(resolved, threshold) if kind == "roundoff" else None
    if reason is not None:
        kind = "inconclusive"
    worst, excess = _worst(a, e, bounds, radius, outside_mask, fmt, expected_bounds)
    offenders = tuple(
        _offender(a, e, bounds, int(i), shape) for i in np.flatnonzero(outside_mask)[:5]
    )
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
        allclose=close,
        two_sided=expected_bounds is not None,
        against="the exact result"
        if expected_bounds is not None and expected_bounds.mode == "exact"
        else "",
        nonfinite_mismatches=nonfinite,
        tightness=_tightness(own_radius, a, fmt),
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


def _inside_one_sided(
    bounds: Bounds, e: np.ndarray, expected: Any
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Where ``expected`` (without bounds of its own) lies in the enclosure of ``actual``.

    The rule: an ``expected`` stored in a format F coarser than float64 is at best the exact
    result rounded onto F, and any faithful rounding onto F of a value in [lo, hi] lies in
    [down_to(lo, F), up_to(hi, F)] (:mod:`pytest_fpcheck.interval.rounding`), so that is the
    range it is judged against. Without it, an enclosure that hugs the exact value (a result
    rounded to nearest) would call a float32 reference's own last rounding a bug. Round-off
    ``expected`` accumulated before its last rounding is not bounded by anything: the note
    says so (where some element lies outside the enclosure itself), and how to get a sound
    reference."""
    fmt = storage_format(expected, argument="expected")
    if fmt.precision >= 53:
        return contains(bounds.lo, bounds.hi, e), ()
    raw = contains(bounds.lo, bounds.hi, e)
    if raw.all():
        return raw, ()
    inside = contains(down_to(bounds.lo, fmt), up_to(bounds.hi, fmt), e)
    note = (
        f"expected is stored in {fmt.name} and has no bounds of its own: it was judged as the "
        f"exact result rounded onto {fmt.name}, but any round-off it accumulated before its "
        "last rounding is not bounded; compute expected in float64, or under fp.track() for "
        "a two-sided verdict"
    )
    return inside, (note,)


def _nonfinite_mismatch(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Where the NaN and Inf positions of the two sides differ (compared before values)."""
    mask: np.ndarray = (np.isnan(a) != np.isnan(e)) | ((np.isinf(a) | np.isinf(e)) & (a != e))
    return mask


def recorded_bounds(x: Any) -> Bounds | None:
    """The bounds tracking recorded for ``x`` (only tensors are tracked; torch is already
    imported when ``x`` is one)."""
    if not is_torch_tensor(x):
        return None
    from ..tracking.track import bounds_of

    return bounds_of(x)


def _self_check(bounds: Bounds, values: np.ndarray, name: str) -> tuple[str, ...]:
    """A computed value outside its proven enclosure is a bug of this package
    (:class:`InternalError`); outside stochastic bounds it is a note (a single run lies outside
    the interval at the bounds' confidence, or ``name`` was not computed by the function the
    bounds were estimated for)."""
    inside = contains(bounds.lo, bounds.hi, values)
    if bounds.mode == "stochastic":
        if inside.all():
            return ()
        count = int(np.count_nonzero(~inside))
        return (
            f"the computed {name} lies outside its stochastic interval at {count} / "
            f"{inside.size} elements: a single run may (rarely, at the stated confidence), or "
            f"{name} was not computed by the function the bounds were estimated for",
        )
    if not inside.all():
        flat = int(np.flatnonzero(~inside)[0])
        raise InternalError(
            f"the computed {name} lies outside the enclosure recorded for it",
            {
                "index": _index(flat, tuple(values.shape)),
                "value": float(values.flat[flat]),
                "lo": float(bounds.lo.flat[flat]),
                "hi": float(bounds.hi.flat[flat]),
                "provenance": bounds.provenance.describe(),
            },
        )
    return ()


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
    radius: np.ndarray,
    outside: np.ndarray,
    fmt: Format,
    expected_bounds: Bounds | None,
) -> tuple[Offender | None, Excess | None]:
    """The element farthest outside, with its excess; (None, None) when none is."""
    if not outside.any():
        return None, None
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if expected_bounds is not None:
            gap = np.maximum(expected_bounds.lo - bounds.hi, bounds.lo - expected_bounds.hi)
        else:
            gap = np.maximum(bounds.lo - e, e - bounds.hi)
        gap = np.where(np.isnan(gap), np.inf, gap)
        score = np.where(outside, gap, -np.inf)
        flat = int(np.argmax(score))
        absolute = float(gap.flat[flat])
        r = float(radius.flat[flat])
        radii = absolute / r if r > 0 else float("inf")
        reference = e.flat[flat] if np.isfinite(e.flat[flat]) else a.flat[flat]
        unit = float(ulp(reference, fmt)) if np.isfinite(reference) else float("nan")
        ulps = absolute / unit if unit > 0 else float("nan")
    return _offender(a, e, bounds, flat, tuple(a.shape)), Excess(absolute, radii, ulps)


def _half_width(bounds: Bounds) -> np.ndarray:
    """(hi - lo) / 2 in float64 arithmetic (0 where lo == hi, infinities included): the
    radius the message shows in ULPs and counts excesses in. Display only, so not rounded up
    as :attr:`Bounds.radius` is (which costs a pass of outward rounding per verdict)."""
    with np.errstate(invalid="ignore", over="ignore"):
        half: np.ndarray = np.where(bounds.lo == bounds.hi, 0.0, 0.5 * (bounds.hi - bounds.lo))
    return half


def _tightness(radius: np.ndarray, a: np.ndarray, fmt: Format) -> float | None:
    """The median radius of the enclosure (``radius``, the bounds' own) in ULPs of the actual
    values' format (over the whole array, the non-finite values' NaN left out after)."""
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = radius / ulp(a, fmt)
    finite = np.isfinite(radius) & np.isfinite(a)
    if not finite.any():
        return None
    return median_of(ratio[finite])


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
    close: Allclose,
    equal: np.ndarray,
    equal_nan: bool,
) -> Verdict:
    with np.errstate(invalid="ignore", over="ignore"):
        ok = equal | (np.abs(a - e) <= close.atol + close.rtol * np.abs(e))
        if equal_nan:
            ok |= np.isnan(a) & np.isnan(e)
    outside_mask = ~ok
    outside = int(np.count_nonzero(outside_mask))
    kind = "exact" if equal.all() else ("close" if outside == 0 else "bug")
    offenders = tuple(
        Offender(
            _index(int(i), shape), float(a.flat[i]), float(e.flat[i]), float("nan"), float("nan")
        )
        for i in np.flatnonzero(outside_mask)[:5]
    )
    worst = None
    if close.greatest_absolute_index is not None and outside:
        i = int(np.ravel_multi_index(close.greatest_absolute_index, shape)) if shape else 0
        worst = Offender(
            close.greatest_absolute_index,
            float(a.flat[i]),
            float(e.flat[i]),
            float("nan"),
            float("nan"),
        )
    nonfinite = _nonfinite_mismatch(a, e)
    return Verdict(
        kind=kind,
        outside=outside,
        total=int(a.size),
        worst_index=worst.position if worst is not None else None,
        worst_excess=None,
        offenders=offenders,
        format=fmt,
        allclose=close,
        fallback=True,
        nonfinite_mismatches=int(np.count_nonzero(nonfinite & outside_mask)),
        notes=(
            "no round-off bounds were recorded for actual: compared with rtol/atol only",
            *_why_untracked(),
        ),
        shape=shape,
        worst=worst,
    )
