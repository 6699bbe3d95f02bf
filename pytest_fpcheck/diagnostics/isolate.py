"""``fp.isolate``: the operation sites whose precision causes an inconsistency (CIEL: Miao, Laguna,
Rubio-González, "Expression Isolation of Compiler-Induced Numerical Inconsistencies in
Heterogeneous Code").

When a low-precision program disagrees with its reference, CIEL raises the precision of code
regions in a hierarchical bisection until the smallest set of regions whose enhancement makes
the program agree is left (section 3.2). Here the program is ``fn(*args)``, a region is a set
of operation *sites* (:mod:`._isolate_sites`: ``nn.Module`` path, operation, Python call and
source line), and enhancement runs a site in float64 with its result cast back to the program's
dtype (:mod:`._isolate_enhance`, section 3.3).

The steps (:mod:`._isolate_search`): a plain run, which records the sites (if it agrees there
is nothing to isolate); the whole program enhanced (if that still disagrees, the cause is not
precision: a bug, reported as such); bisection over the sites in program order, splitting at
module boundaries before statement boundaries before operations, which finds sites that only
resolve the inconsistency together one after the other; and a 1-minimality check. The result
says which sites, what each configuration left, and :meth:`Isolation.enhanced` runs a function
with just those sites enhanced, to confirm the fix.

Every run starts from the same state of torch's random number generators, so a program that
draws random numbers is run on the same draws each time; anything else ``fn`` depends on must
not change between calls.

For the pytest plugin (``--fpcheck-isolate``): :func:`isolate_test_call` isolates the sites that
make a failing test fail, :func:`isolation_note` is the text appended to its failure message,
and :func:`failing_dual_delta` turns a dual-delta re-run into a call that fails like the test.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import DualDeltaFailure, InvalidArgument
from ._isolate_compare import Check, Comparison, failure_check, parse_tolerance
from ._isolate_enhance import Enhancer, SiteTable, TraceEntry
from ._isolate_search import Trial, search
from ._isolate_sites import Site, describe_sites, hierarchy_path
from ._isolate_text import isolation_note, report_text

__all__ = [
    "ENHANCE",
    "OUTCOMES",
    "Configuration",
    "Isolation",
    "Site",
    "failing_dual_delta",
    "isolate",
    "isolate_test_call",
    "isolation_note",
]

#: the formats a site can be enhanced to
ENHANCE = {"float64": torch.float64, "float32": torch.float32}
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
class Isolation:
    """What :func:`isolate` found. ``sites`` is empty unless ``outcome == "isolated"``."""

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


@contextlib.contextmanager
def _same_randomness() -> Iterator[Callable[[], None]]:
    """A function that puts torch's generators back where they were on entry."""
    cpu = torch.get_rng_state()
    initialised = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    cuda = torch.cuda.get_rng_state_all() if initialised else None

    def reset() -> None:
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)

    yield reset


def _run_isolation(
    attempt: Callable[[], Check], *, enhance: str, criterion: Callable[[], str]
) -> Isolation:
    """The whole procedure for a program run by ``attempt`` (which runs it once and judges)."""
    target = ENHANCE[enhance]
    table = SiteTable()
    trace: list[TraceEntry] = []
    notes: dict[str, None] = {}
    checks: dict[frozenset[int], Check] = {}

    def resolves(numbers: frozenset[int]) -> bool:
        reset()
        enhancer = Enhancer(table, target=target, enabled=numbers, trace=trace)
        try:
            with enhancer:
                check = attempt()
        except Exception as error:  # a configuration that breaks the program resolves nothing
            lines = str(error).strip().splitlines()
            check = Check(
                False, math.nan, f"raised {type(error).__name__}: {lines[0] if lines else ''}"
            )
        for number, why in enhancer.failures.items():
            notes[f"{table.sites[number]} could not be enhanced ({why}); it ran as written"] = None
        if not enhancer.followed:
            notes["a configuration took another path through the program than the plain run"] = None
        checks[numbers] = check
        return check.agrees

    with _same_randomness() as reset:
        reset()
        with Enhancer(table, target=target, trace=trace, record=True):
            plain = attempt()
        if plain.agrees:
            found: tuple[int, ...] | None = ()
            trials: list[Trial] = []
        else:
            paths = [hierarchy_path(site) for site in table.sites]
            found, trials = search(len(table.sites), paths, resolves)
    if not table.sites:
        notes[
            "the program ran no PyTorch operation in a format narrower than "
            f"{enhance}: there is nothing to enhance"
        ] = None
    numbers = frozenset(found or ())
    return Isolation(
        outcome="consistent" if plain.agrees else "unresolved" if found is None else "isolated",
        sites=tuple(table.sites[i] for i in found or ()),
        searches=len(trials),
        configurations=tuple(
            Configuration(
                number=i + 1,
                stage=trial.stage,
                site_count=len(trial.sites),
                description=describe_sites(trial.sites, table.sites),
                resolved=trial.resolved,
                error=checks[trial.sites].error,
                detail=checks[trial.sites].detail,
            )
            for i, trial in enumerate(trials)
        ),
        program_sites=tuple(table.sites),
        enhance=enhance,
        criterion=criterion(),
        plain=plain,
        fixed=checks[numbers] if found else None,
        notes=tuple(notes),
        _table=table,
        _numbers=numbers,
    )


def _check_enhance(enhance: Any) -> str:
    if not isinstance(enhance, str) or enhance not in ENHANCE:
        raise InvalidArgument("enhance", enhance, " or ".join(map(repr, ENHANCE)))
    return enhance


def isolate(
    fn: Callable[..., Any],
    *args: Any,
    reference: Any,
    tol: Any = None,
    enhance: str = "float64",
) -> Isolation:
    """A 1-minimal set of operation sites of ``fn(*args)`` whose computation in ``enhance``
    makes the result agree with ``reference`` (CIEL's hierarchical bisection).

    ``reference`` is the result to agree with (a tensor, array or float, or a structure of
    them like ``fn``'s result), or a callable, called once as ``reference(*args)``. ``tol``:
    None compares with torch.testing's tolerances for the result's dtype; a number ``t`` means
    ``|actual - reference| <= t * (1 + |reference|)``; a pair is ``(rtol, atol)``.
    ``enhance``: ``"float64"`` or ``"float32"``."""
    if not callable(fn):
        raise InvalidArgument("fn", fn, "a callable running the program (a model, a function)")
    tolerance = parse_tolerance(tol)
    target = _check_enhance(enhance)
    expected = reference(*args) if callable(reference) else reference
    compare = Comparison(expected, tolerance)
    isolation = _run_isolation(
        lambda: compare(fn(*args)), enhance=target, criterion=compare.describe
    )
    from ..report.sink import publish

    publish("isolations", isolation, enhance=enhance)
    return isolation


def isolate_test_call(
    call: Callable[[], object],
    failure_type: type[BaseException],
    *,
    enhance: str = "float64",
) -> Isolation:
    """Isolate the sites that make a failing test fail: ``call`` runs the test (for pytest, the
    test function with its fixtures' values); a configuration is consistent when ``call``
    returns, inconsistent when it raises (``failure_type``, the failure seen, or any other
    exception). For ``--fpcheck-isolate``."""
    if not callable(call):
        raise InvalidArgument("call", call, "a callable that runs the failing test")
    if not (isinstance(failure_type, type) and issubclass(failure_type, BaseException)):
        raise InvalidArgument(
            "failure_type", failure_type, "an exception class (the failure's type)"
        )
    target = _check_enhance(enhance)
    name = failure_type.__name__
    return _run_isolation(
        lambda: failure_check(call, failure_type),
        enhance=target,
        criterion=lambda: f"the test passes (it failed with {name})",
    )


def failing_dual_delta(rerun: Callable[[], Any]) -> Callable[[], None]:
    """A call that re-runs a dual-delta comparison (``rerun()`` returns its DualDeltaResult)
    and raises :class:`~pytest_fpcheck.DualDeltaFailure` when it fails, as the test did."""
    if not callable(rerun):
        raise InvalidArgument("rerun", rerun, "a callable returning a DualDeltaResult")

    def call() -> None:
        result = rerun()
        if not hasattr(result, "failed") or not hasattr(result, "failure_message"):
            raise InvalidArgument("rerun", rerun, "a callable returning a DualDeltaResult")
        if result.failed:
            raise DualDeltaFailure(result.failure_message(), result)

    return call
