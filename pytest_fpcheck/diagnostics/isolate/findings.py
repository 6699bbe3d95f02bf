"""What an isolation found, as plain data (CIEL section 3.2: the culprit regions, and each
configuration the bisection ran): the facts :func:`~pytest_fpcheck.isolate` reports, which
:mod:`.text` lays out and :class:`~.result.Isolation` extends with what re-runs the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from .compare import Check
from .sites import Site

__all__ = ["OUTCOMES", "Configuration", "Findings"]

#: ``"isolated"``: sites found; ``"consistent"``: the plain run agrees already;
#: ``"unresolved"``: enhancing every site does not make it agree (the cause is not precision)
OUTCOMES = ("isolated", "consistent", "unresolved")


@dataclass(frozen=True)
class Configuration:
    """One run of the program with some sites enhanced."""

    #: 1, 2, ... in the order they ran
    number: int
    #: ``"whole program"``, ``"bisection"`` or ``"minimality"``
    stage: str
    #: how many sites it enhanced, and which (``Net.blocks.0 (12 sites), aten.mul #0 ...``)
    site_count: int
    description: str
    #: whether the program then agreed
    resolved: bool
    #: the error it left (the largest difference in units of its tolerance; NaN for a test)
    error: float
    #: a line saying so
    detail: str


@dataclass(frozen=True)
class Findings:
    """What :func:`~pytest_fpcheck.isolate` found. ``sites`` is empty unless
    ``outcome == "isolated"``."""

    #: one of :data:`OUTCOMES`
    outcome: str
    #: the 1-minimal set of culprit sites, in program order
    sites: tuple[Site, ...]
    #: how many configurations ran (the plain run not counted)
    searches: int
    #: those configurations, in order
    configurations: tuple[Configuration, ...]
    #: every site the program ran (in the order they first ran)
    program_sites: tuple[Site, ...]
    #: the format sites were enhanced to
    enhance: str
    #: what "agrees" meant
    criterion: str
    #: how the plain run compared
    plain: Check
    #: how the run with just ``sites`` enhanced compared (None unless isolated)
    fixed: Check | None
    #: remarks (sites that could not be enhanced, the program taking another path)
    notes: tuple[str, ...]
