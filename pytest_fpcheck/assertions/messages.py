"""Every failure message of pytest-fpcheck, built by pure functions in one layout
(STYLE principle 5):

    <headline: what was compared and the verdict>
    <k / n (p%) elements ...>
    worst at index I: actual=..., expected=..., enclosure=[lo, hi]
      outside by X = R radii = U ULP (<format>)
    first offenders:
      I: actual=..., expected=..., enclosure=[lo, hi]
    widest provenance: <site (+widening)>; ...
    notes: ...
    plain allclose (rtol=..., atol=...): <what it would have said>

A failed dual-delta test (:func:`dual_delta_message`) has the same headline form, then the
result's summary table:

    fpcheck dual-delta <'custom_less_accurate'>, <'custom_less_stable'>: custom C is
    significantly less accurate and less stable than reference R (alpha = A).

    <DualDeltaResult.summary()>

``msg`` (a string or a callable that wraps the generated text) is applied by :func:`with_user_message`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from ..dualdelta.result import DualDeltaResult
    from .verdict import Allclose, Offender, Verdict

__all__ = [
    "allclose_line",
    "count_line",
    "dual_delta_message",
    "offender_line",
    "verdict_message",
    "with_user_message",
]

_HEADLINES = {
    "exact": "exact: actual equals expected element for element",
    "roundoff": "Type-I (round-off): the difference is within the round-off that the computation of actual can produce",
    "close": "within rtol/atol, but unproven: no round-off bounds were recorded for actual",
    "bug": "Type-II (bug): the difference is more than round-off can explain",
}


def _index(index: tuple[int, ...] | None) -> str:
    if index is None:
        return "-"
    return "(" + ", ".join(str(i) for i in index) + ("," if len(index) == 1 else "") + ")"


def count_line(k: int, n: int, what: str) -> str:
    """``k / n (p%) <what>``."""
    percent = 100.0 * k / n if n else 0.0
    return f"{k} / {n} ({percent:.3g}%) {what}"


def offender_line(offender: Offender, *, with_enclosure: bool = True) -> str:
    text = (
        f"{_index(offender.position)}: actual={offender.actual!r}, expected={offender.expected!r}"
    )
    if with_enclosure:
        text += f", enclosure=[{offender.lo!r}, {offender.hi!r}]"
    return text


def allclose_line(close: Allclose) -> str:
    """What plain allclose would have said."""
    head = f"plain allclose (rtol={close.rtol:g}, atol={close.atol:g}): "
    if close.passed:
        return head + "would have passed"
    return (
        head
        + "would have failed, "
        + count_line(close.mismatched, close.total, "mismatched")
        + f"; greatest absolute difference {close.greatest_absolute:.6g} at "
        f"{_index(close.greatest_absolute_index)}, greatest relative difference "
        f"{close.greatest_relative:.6g} at {_index(close.greatest_relative_index)}"
    )


_FALLBACK_BUG = (
    "outside rtol/atol; no round-off bounds were recorded for actual, so this is a tolerance "
    "failure, not a proof of a bug (compute actual inside fp.track() for a verdict)"
)


def verdict_message(verdict: Verdict) -> str:
    """The full text of a verdict (see the module docstring for the layout)."""
    headline = (
        _FALLBACK_BUG if verdict.fallback and verdict.kind == "bug" else _HEADLINES[verdict.kind]
    )
    lines = [f"fpcheck verdict {verdict.kind!r}: {headline}."]
    if verdict.fallback:
        lines.append(count_line(verdict.outside, verdict.total, "elements outside rtol/atol"))
    elif verdict.two_sided:
        lines.append(
            count_line(
                verdict.outside,
                verdict.total,
                "elements where the enclosures of actual and expected are disjoint",
            )
        )
    else:
        lines.append(
            count_line(
                verdict.outside,
                verdict.total,
                "expected elements outside the round-off enclosure of actual",
            )
        )
    if verdict.nonfinite_mismatches:
        lines.append(f"NaN/Inf positions differ at {verdict.nonfinite_mismatches} of them")
    if verdict.worst is not None:
        lines.append(
            "worst at index " + offender_line(verdict.worst, with_enclosure=not verdict.fallback)
        )
        if verdict.worst_excess is not None:
            excess = verdict.worst_excess
            lines.append(
                f"  outside by {excess.absolute:.6g} = {excess.radii:.4g} radii = {excess.ulps:.4g} ULP ({verdict.format.name})"
            )
    if verdict.offenders:
        lines.append("first offenders:")
        lines.extend(
            "  " + offender_line(o, with_enclosure=not verdict.fallback) for o in verdict.offenders
        )
    if verdict.tightness is not None:
        lines.append(
            f"enclosure: median radius {verdict.tightness:.3g} ULP ({verdict.format.name})"
        )
    if verdict.provenance:
        lines.append(f"widest provenance: {verdict.provenance}")
    for note in verdict.notes:
        lines.append(f"note: {note}")
    lines.append(allclose_line(verdict.allclose))
    return "\n".join(lines)


#: the dual-delta verdicts that fail a test, and what they say of the custom implementation
_WORSE = {"custom_less_accurate": "less accurate", "custom_less_stable": "less stable"}


def dual_delta_message(result: DualDeltaResult) -> str:
    """The text of a failed dual-delta test (see the module docstring for the layout)."""
    failing = [v for v in (result.accuracy, result.stability) if v in _WORSE]
    headline = (
        f"fpcheck dual-delta {', '.join(repr(v) for v in failing)}: custom {result.custom} is "
        f"significantly {' and '.join(_WORSE[v] for v in failing)} than reference "
        f"{result.reference} (alpha = {result.alpha:g})."
    )
    return f"{headline}\n\n{result.summary()}"


def with_user_message(text: str, msg: str | Callable[[str], str] | None) -> str:
    """Apply ``msg``: a string is put before the generated text, a callable wraps it."""
    if msg is None:
        return text
    if isinstance(msg, str):
        return f"{msg}\n{text}"
    if callable(msg):
        wrapped = msg(text)
        if not isinstance(wrapped, str):
            raise InvalidArgument("msg", msg, "a string, or a callable that returns a string")
        return wrapped
    raise InvalidArgument("msg", msg, "a string, a callable taking the generated message, or None")
