"""Running :func:`~pytest_fpcheck.isolate` (CIEL section 3.2): the plain run that records the
sites, the configurations the search (:mod:`.search`) asks for, each run from the same state of
torch's random number generators and judged by a comparison (:mod:`.compare`), and the
:class:`~.result.Isolation` they add up to. :func:`isolate_test_call` and
:func:`failing_dual_delta` serve the pytest plugin's ``--fpcheck-isolate``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...errors import DualDeltaFailure, InvalidArgument
from .compare import Check, Comparison, failure_check, parse_tolerance
from .enhance import ENHANCE, Enhancer, SiteTable, TraceEntry
from .findings import Configuration
from .result import Isolation
from .search import Trial, search
from .sites import describe_sites, hierarchy_path

__all__ = ["failing_dual_delta", "isolate", "isolate_test_call"]


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
    from ...assertions.sink import publish

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
