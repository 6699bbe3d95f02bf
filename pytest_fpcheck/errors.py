"""The exceptions of pytest-fpcheck (API.md, "Errors").

Three kinds of failure, three types (STYLE.md, principle 4):

* a bad argument raises :class:`InvalidArgument` at once; it is also a ``TypeError`` so that
  callers who guard against misuse in the usual Python way catch it;
* a numerical violation is an ``AssertionError`` subclass (:class:`RoundoffMismatch`,
  :class:`DualDeltaFailure`), so pytest reports it as a test failure, not an error;
* everything the package cannot do is an :class:`FPCheckError` that says why and what to do.

Messages name the argument, its value and type, and what would be valid.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DualDeltaFailure",
    "FPCheckError",
    "InconclusiveVerdict",
    "InternalError",
    "InvalidArgument",
    "NonFiniteAppeared",
    "NonFiniteWarning",
    "OutOfBoundsAccess",
    "RoundoffMismatch",
    "StaleBoundsError",
    "UnsupportedOperation",
    "describe_value",
]

_REPR_LIMIT = 80


def describe_value(value: Any) -> str:
    """A short, unambiguous rendering of ``value`` for a message: arrays by shape and dtype.

    The rule: anything with ``shape`` and ``dtype`` attributes is shown by those (an array's full
    repr would drown the message); other values by ``repr``, cut to 80 characters.
    """
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(value, type):
        kind = type(value).__module__.split(".")[0]
        return f"<{kind} array of shape {tuple(shape)} and dtype {dtype}>"
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return text


class FPCheckError(Exception):
    """Base class of every exception raised by pytest-fpcheck."""


class InvalidArgument(FPCheckError, TypeError):
    """An argument has a value, type or shape the function cannot accept.

    Build it with the argument's name, the offending value and a phrase saying what would be
    valid; the message then reads ``name=<value> (type T) is not valid: expected ...``.
    """

    def __init__(self, name: str, value: Any, expected: str, *, hint: str | None = None) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        self.hint = hint
        text = (
            f"{name}={describe_value(value)} (type {type(value).__name__}) is not valid: "
            f"expected {expected}."
        )
        if hint:
            text += f" {hint}"
        super().__init__(text)


class StaleBoundsError(FPCheckError):
    """The tensor was modified in place after its bounds were recorded; they no longer hold."""


class UnsupportedOperation(FPCheckError):
    """Tracking met an operation that has no interval rule; it is never silently skipped."""

    def __init__(self, op: str, *, where: str | None = None, how: str | None = None) -> None:
        self.op = op
        self.where = where
        location = f" at {where}" if where else ""
        advice = how or (
            "register one with pytest_fpcheck.interval.register_rule(op_name, rule), "
            "or run this code outside fp.track()"
        )
        super().__init__(f"no interval rule for operation {op!r}{location}: {advice}.")


class OutOfBoundsAccess(FPCheckError):
    """A Triton kernel loaded or stored outside every tensor argument: a bug in the kernel (a
    Type-II finding, like a wrong mask), not a missing rule (API section 9). Names the kernel
    and its source line (``where``), the pointer argument nearest the address (``argument``),
    the offending element offset from that argument's first element (``offset``, negative
    before it) and the argument's extent in elements (``extent``)."""

    def __init__(
        self, kernel: str, *, where: str, argument: str, offset: int, extent: int, access: str
    ) -> None:
        self.kernel = kernel
        self.where = where
        self.argument = argument
        self.offset = offset
        self.extent = extent
        side = "before the start of" if offset < 0 else "past the end of"
        super().__init__(
            f"Triton kernel {kernel!r} made an out-of-bounds {access} at {where}: element "
            f"offset {offset} of pointer argument {argument!r}, {side} its tensor "
            f"({extent} elements, valid offsets 0 to {extent - 1}); the kernel's mask or "
            "index arithmetic is wrong."
        )


class RoundoffMismatch(FPCheckError, AssertionError):
    """The verdict is "bug" (Type-II): expected values lie outside the round-off enclosure."""

    def __init__(self, message: str, verdict: Any = None) -> None:
        super().__init__(message)
        self.verdict = verdict


class InconclusiveVerdict(FPCheckError, AssertionError):
    """The verdict is "inconclusive": the round-off enclosure is too wide to separate round-off
    from a bug (API section 9). A test failure, but no proof of a bug: a sibling of
    :class:`RoundoffMismatch`, not a subclass, so that ``pytest.raises(RoundoffMismatch)``
    around a planted bug cannot pass on a check that saw nothing. ``.verdict`` holds the
    verdict (or the module comparison)."""

    def __init__(self, message: str, verdict: Any = None) -> None:
        super().__init__(message)
        self.verdict = verdict


class DualDeltaFailure(FPCheckError, AssertionError):
    """The custom implementation is significantly less accurate or stable than the reference."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class NonFiniteAppeared(FPCheckError, AssertionError):
    """A NaN, infinity, subnormal or division by zero appeared in a test run with
    ``fpcheck_nonfinite = fail`` (even if every assertion of the test passed)."""


class NonFiniteWarning(UserWarning):
    """A NaN, infinity, subnormal or division by zero appeared in a test run with
    ``fpcheck_nonfinite = warn`` (the default under --fpcheck)."""


class InternalError(FPCheckError):
    """Something pytest-fpcheck believed impossible happened; the record helps us fix it."""

    def __init__(self, what: str, record: Any = None) -> None:
        self.record = record
        super().__init__(
            f"internal error in pytest-fpcheck: {what}. This is a bug in pytest-fpcheck, not in "
            "your code; please report it with this message and the record attached to the "
            f"exception (.record = {describe_value(record)})."
        )
