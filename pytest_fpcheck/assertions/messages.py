"""The one failure-message layout of pytest-fpcheck, as small pure functions over plain data
(STYLE principle 5). A result object assembles its message from these lines and the module knows
no result class: a verdict (:meth:`~pytest_fpcheck.assertions.verdict.Verdict.report`) gives

    <headline: what was compared and the verdict>
    <k / n (p%) elements ...>
    worst at index I: actual=..., expected=..., enclosure=[lo, hi]
      outside by X = R radii = U ULP (<format>)
    first offenders:
      I: actual=..., expected=..., enclosure=[lo, hi]
    widest provenance: <site (+widening)>; ...
    notes: ...
    plain allclose (rtol=..., atol=...): <what it would have said>

and a failed dual-delta test
(:meth:`~pytest_fpcheck.dualdelta.result.DualDeltaResult.failure_message`) has the same headline
form, then the result's summary table:

    fpcheck dual-delta <'custom_less_accurate'>, <'custom_less_stable'>: custom C is
    significantly less accurate and less stable than reference R (alpha = A).

    <DualDeltaResult.summary()>

A module comparison (:meth:`~pytest_fpcheck.assertions.modules.ModuleComparison.report`) has
the same headline form, a count line, one table row per module call (:func:`table_lines`), then
the full verdict of the first failing call, indented:

    fpcheck modules 'bug': Type-II (bug) in <path> (<class>): ...
    <n> module calls judged against <reference> ...: <counts>
    call  module  class  verdict  outside  resolution  widest operation
       0  <root>  ...
    first bug: <path>, <what>:
      <its verdict's message>

``msg`` (a string or a callable that wraps the generated text) is applied by :func:`with_user_message`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..errors import InvalidArgument

__all__ = [
    "allclose_line",
    "count_line",
    "excess_line",
    "headline",
    "index_text",
    "message",
    "offender_line",
    "offender_lines",
    "table_lines",
    "with_user_message",
]


def index_text(index: tuple[int, ...] | None) -> str:
    """An element index as Python writes a tuple (``(3,)``, ``(1, 2)``); ``-`` for none."""
    if index is None:
        return "-"
    return "(" + ", ".join(str(i) for i in index) + ("," if len(index) == 1 else "") + ")"


def headline(what: str, kinds: Sequence[str], text: str) -> str:
    """``fpcheck <what> <'kind'>, ...: <text>.``: the first line of every failure message."""
    return f"fpcheck {what} {', '.join(repr(kind) for kind in kinds)}: {text}."


def count_line(k: int, n: int, what: str) -> str:
    """``k / n (p%) <what>``."""
    percent = 100.0 * k / n if n else 0.0
    return f"{k} / {n} ({percent:.3g}%) {what}"


def offender_line(
    position: tuple[int, ...] | None,
    actual: float,
    expected: float,
    enclosure: tuple[float, float] | None = None,
) -> str:
    """``I: actual=..., expected=...`` and, when given, ``, enclosure=[lo, hi]``."""
    text = f"{index_text(position)}: actual={actual!r}, expected={expected!r}"
    if enclosure is not None:
        text += f", enclosure=[{enclosure[0]!r}, {enclosure[1]!r}]"
    return text


def offender_lines(lines: Iterable[str]) -> list[str]:
    """The ``first offenders:`` block of already formatted offender lines (none: no block)."""
    indented = ["  " + line for line in lines]
    return ["first offenders:", *indented] if indented else []


def excess_line(absolute: float, radii: float, ulps: float, format_name: str) -> str:
    """How far the worst element lies outside: absolute, in radii of the enclosure, in ULPs."""
    return f"  outside by {absolute:.6g} = {radii:.4g} radii = {ulps:.4g} ULP ({format_name})"


def allclose_line(
    *,
    rtol: float,
    atol: float,
    mismatched: int,
    total: int,
    greatest_absolute: float,
    greatest_absolute_index: tuple[int, ...] | None,
    greatest_relative: float,
    greatest_relative_index: tuple[int, ...] | None,
) -> str:
    """What plain allclose would have said."""
    head = f"plain allclose (rtol={rtol:g}, atol={atol:g}): "
    if mismatched == 0:
        return head + "would have passed"
    return (
        head
        + "would have failed, "
        + count_line(mismatched, total, "mismatched")
        + f"; greatest absolute difference {greatest_absolute:.6g} at "
        f"{index_text(greatest_absolute_index)}, greatest relative difference "
        f"{greatest_relative:.6g} at {index_text(greatest_relative_index)}"
    )


def table_lines(
    header: Sequence[str], rows: Iterable[Sequence[str]], *, right: Sequence[int] = ()
) -> list[str]:
    """A plain-text table: each column as wide as its widest cell, two spaces between columns,
    the columns numbered in ``right`` aligned right; trailing spaces removed."""
    cells = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]


def message(lines: Iterable[str]) -> str:
    """The lines of a message as one text."""
    return "\n".join(lines)


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
