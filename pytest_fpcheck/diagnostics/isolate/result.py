"""The result of :func:`~pytest_fpcheck.isolate`: :class:`Isolation`, the findings with the site
table that identifies the culprit sites in a new run of the program, so that
:meth:`Isolation.enhanced` re-runs a function with just those sites enhanced (CIEL section 3.3)
to confirm the fix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import InvalidArgument
from .enhance import ENHANCE, Enhancer, SiteTable
from .findings import Findings
from .text import report_text

__all__ = ["Isolation"]


@dataclass(frozen=True)
class Isolation(Findings):
    """What :func:`~pytest_fpcheck.isolate` found (the fields of :class:`~.findings.Findings`).
    ``sites`` is empty unless ``outcome == "isolated"``."""

    _table: SiteTable
    _numbers: frozenset[int]

    def report(self) -> str:
        """The outcome, the culprit sites with their source lines, and each configuration with
        the error it left."""
        return report_text(self)

    def enhanced(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` run with just :attr:`sites` enhanced (every call identifies the sites anew by
        module path, operation and source line), to confirm the fix."""
        if not callable(fn):
            raise InvalidArgument("fn", fn, "a callable (the program, or one that runs it)")
        table, numbers, target = self._table, self._numbers, ENHANCE[self.enhance]

        @functools.wraps(fn)
        def run_enhanced(*args: Any, **kwargs: Any) -> Any:
            with Enhancer(table, target=target, enabled=numbers):
                return fn(*args, **kwargs)

        return run_enhanced
