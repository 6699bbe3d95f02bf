"""``fp.compare_modules`` and ``fp.assert_modules_roundoff_close`` (API section 9).

The reference model runs once, untracked, recording every module call (:mod:`.reference`);
each recorded call of the custom model's module at the same path is then replayed on the
recorded inputs under tracking and judged (:mod:`.replay`). The cost is one plain run of the
reference plus, isolated (the default), about one tracked run of the custom model: every
module's own code runs once, the modules it calls answer from the record. Not isolated, each
level of modules runs its whole subtree again (at most the number of levels times that). A
reference that is not float64 is replayed too, under tracking, so that its own round-off is
bounded (:mod:`.replay`): twice the tracked cost.

The keywords ``isolate``, ``leaves_only``, ``max_resolution`` and (for the assertion)
``accept_inconclusive`` and ``msg`` belong to these functions; every other argument goes to the
models' ``forward``. Put both models in ``eval()`` mode: a dropout that draws different masks in
the two runs is a difference no round-off explains.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from ...errors import InconclusiveVerdict, InvalidArgument, RoundoffMismatch
from ...interval.bounds import Bounds
from ..messages import with_user_message
from ..record import record_verdict
from ..resolution import current_max_resolution
from .parameters import seeded
from .reference import RecordedCall, record_calls
from .replay import Replay, module_dtype
from .result import ModuleCall, ModuleComparison
from .structure import floating_leaves, map_tensors

__all__ = ["assert_modules_roundoff_close", "compare_modules"]


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgument(name, value, "True or False")
    return value


def _reference_model(custom: torch.nn.Module, reference: Any) -> tuple[torch.nn.Module, str]:
    if isinstance(reference, torch.dtype):
        if not reference.is_floating_point:
            raise InvalidArgument(
                "reference", reference, "an nn.Module or a floating dtype (e.g. torch.float64)"
            )
        return copy.deepcopy(custom).to(reference), f"a {reference} copy of custom"
    if isinstance(reference, torch.nn.Module):
        if reference is custom:
            raise InvalidArgument(
                "reference",
                reference,
                "a different module than custom (a float64 copy, or a stock implementation)",
                hint="Pass reference=torch.float64 for a float64 copy of custom.",
            )
        return reference, f"{type(reference).__name__} (reference)"
    raise InvalidArgument(
        "reference",
        reference,
        "an nn.Module with custom's module paths, or a floating dtype (e.g. torch.float64)",
    )


def _input_dtype(
    custom: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> torch.dtype:
    """The dtype of the first floating tensor the custom model is given, else of its
    parameters."""
    given = floating_leaves(args, "args") + floating_leaves(kwargs, "kwargs")
    if given:
        return given[0][1].dtype
    return module_dtype(custom, torch.get_default_dtype())


def compare_modules(
    custom: Any,
    reference: Any,
    *args: Any,
    isolate: bool = True,
    leaves_only: bool = False,
    max_resolution: float | None = None,
    **kwargs: Any,
) -> ModuleComparison:
    """Judge every module call of ``custom`` against the same call of ``reference``.

    ``reference`` is an ``nn.Module`` with ``custom``'s module paths (a float64 copy, or the
    stock implementation of what ``custom`` replaces), or a floating dtype meaning a deep copy
    of ``custom`` in that dtype. ``args``/``kwargs`` are the inputs as ``custom`` takes them;
    the reference gets their floating tensors cast to its own dtype.

    Each module call of the reference run is replayed: the custom model's module at the same
    path runs on the reference's recorded inputs (cast to its dtype inside tracking) and each
    floating output is judged against the reference's by :func:`~pytest_fpcheck.classify`.
    ``isolate=True`` (the default) answers the modules a call makes from the reference's
    record and judges the inputs it hands them, so each call is judged on its own code;
    ``isolate=False`` runs its whole subtree. ``leaves_only=True`` judges modules without
    children only. ``max_resolution`` is the threshold of an "inconclusive" verdict (the
    run's default when None). Integer tensors and non-tensor outputs are not judged.

    A parameter or buffer of ``custom`` that is the reference's rounded to its narrower dtype
    (a bfloat16 copy of a float32 model) starts from the enclosure of that cast, like the
    inputs (:mod:`.parameters`): the verdict is about the modules' code, not the format their
    weights are stored in.
    """
    if not isinstance(custom, torch.nn.Module):
        raise InvalidArgument("custom", custom, "an nn.Module (the model under test)")
    _check_bool("isolate", isolate)
    _check_bool("leaves_only", leaves_only)
    threshold = current_max_resolution(max_resolution)
    model, described = _reference_model(custom, reference)
    input_dtype = _input_dtype(custom, args, kwargs)
    reference_dtype = module_dtype(model, torch.float64)

    def to_reference(t: torch.Tensor) -> torch.Tensor:
        return t.to(reference_dtype) if t.is_floating_point() else t

    calls = record_calls(
        model,
        map_tensors(args, to_reference),
        map_tensors(kwargs, to_reference),
        inner=not leaves_only,
    )
    paths = dict(custom.named_modules())
    missing = sorted({call.path for call in calls if call.path not in paths})
    if missing:
        raise InvalidArgument(
            "reference",
            reference,
            "a module with custom's module paths",
            hint=f"custom has no module at {', '.join(missing[:5])}.",
        )
    replay = Replay(
        custom,
        calls,
        input_dtype=input_dtype,
        isolate=isolate,
        max_resolution=threshold,
        expected=None
        if reference_dtype == torch.float64
        else _own_enclosures(model, calls, reference_dtype, isolate, leaves_only, threshold),
    )
    judged: list[ModuleCall] = []
    with seeded(custom, model), replay.installed():
        for call in calls:
            if leaves_only and not call.leaf:
                continue
            judged.append(replay.replay(call))
    comparison = ModuleComparison(
        calls=tuple(judged),
        reference=described,
        isolate=isolate,
        leaves_only=leaves_only,
        max_resolution=threshold,
    )
    record_verdict(comparison)
    return comparison


def _own_enclosures(
    model: torch.nn.Module,
    calls: list[RecordedCall],
    dtype: torch.dtype,
    isolate: bool,
    leaves_only: bool,
    threshold: float,
) -> dict[int, dict[str, Bounds | None]]:
    """The enclosures of a reference that is not float64, call by call: its own calls replayed
    on its own model as the custom model's will be (:mod:`.replay`), so that each verdict can
    allow for the reference's round-off as well as the custom model's."""
    replay = Replay(
        model, calls, input_dtype=dtype, isolate=isolate, max_resolution=threshold, collect=True
    )
    with replay.installed():
        for call in calls:
            if not (leaves_only and not call.leaf):
                replay.replay(call)
    return replay.enclosures


def assert_modules_roundoff_close(
    custom: Any,
    reference: Any,
    *args: Any,
    isolate: bool = True,
    leaves_only: bool = False,
    max_resolution: float | None = None,
    accept_inconclusive: bool = False,
    msg: str | Callable[[str], str] | None = None,
    **kwargs: Any,
) -> ModuleComparison:
    """:func:`compare_modules`, raising :class:`~pytest_fpcheck.RoundoffMismatch` when a module
    call is Type-II (the message names the first bug's module), and
    :class:`~pytest_fpcheck.InconclusiveVerdict` when one is inconclusive unless
    ``accept_inconclusive=True``. Returns the comparison otherwise."""
    __tracebackhide__ = True
    _check_bool("accept_inconclusive", accept_inconclusive)
    comparison = compare_modules(
        custom,
        reference,
        *args,
        isolate=isolate,
        leaves_only=leaves_only,
        max_resolution=max_resolution,
        **kwargs,
    )
    if comparison.bugs:
        raise RoundoffMismatch(with_user_message(comparison.report(), msg), comparison) from None
    if comparison.inconclusive and not accept_inconclusive:
        raise InconclusiveVerdict(with_user_message(comparison.report(), msg), comparison) from None
    return comparison
