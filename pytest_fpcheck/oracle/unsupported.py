"""The error an oracle raises for an operation it cannot carry out at its precision.

It is an :class:`~pytest_fpcheck.errors.UnsupportedOperation` (API.md, "Errors": an operation is
never silently skipped), with a message that speaks of oracles rather than interval rules: it
names the oracle, the operation, why it is refused and what to do instead.
"""

from __future__ import annotations

from ..errors import FPCheckError, UnsupportedOperation

__all__ = ["UnsupportedOracleOperation"]


class UnsupportedOracleOperation(UnsupportedOperation):
    """An oracle met an operation it cannot evaluate at its own precision."""

    def __init__(self, oracle: str, op: str, why: str, advice: str) -> None:
        self.op = op
        self.where = None
        self.oracle = oracle
        FPCheckError.__init__(
            self, f"the {oracle} oracle cannot evaluate operation {op!r}: {why}. {advice}."
        )
