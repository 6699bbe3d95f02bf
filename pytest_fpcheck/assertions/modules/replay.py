"""Replaying one module call of the custom model on the reference's recorded inputs, under
tracking (RENDER section III-C-1, made automatic: each layer starts from the reference's values
instead of the custom run's, so no earlier layer's error reaches it).

The rule for one recorded call of path ``p``:

* the custom model's module at ``p`` runs alone, its ``forward`` called directly, on the
  reference's recorded inputs; floating tensors are cast to that module's own dtype (its first
  floating parameter's, else buffer's, else the custom input dtype) *inside* ``fp.track()``,
  so the enclosures start from the exact reference values and include the cast's rounding;
* isolated (the default), every module it calls answers with the reference's recorded output
  of the matching call (same path, in call order within this call), cast the same way, and the
  floating inputs handed to it are judged against the reference's: the call is judged on its
  own code alone. A call the reference did not make runs for real and makes the call a bug;
* not isolated, the modules it calls run for real: the whole subtree is judged;
* each floating output (and each handed input) is judged by :func:`~..verdict.classify`
  against the reference's; a shape that differs is a bug;
* the largest finite values of a format (``torch.finfo(dtype).min`` and ``.max``) are what
  models write into attention masks for "never": a reference value equal to one of its own
  format's extremes stands for the same extreme of the custom module's format, in the inputs
  it gets and in what it is judged against;
* a call whose replay meets an operation without an interval rule is not judged: its kind is
  "inconclusive", and it says which operation (never silently skipped);
* a reference that is not float64 has round-off of its own, which nothing else bounds: its
  calls are replayed first the same way on its own model (``collect``), and the enclosures of
  what each call hands on and returns (:attr:`Replay.enclosures`) make the custom model's
  verdicts two-sided (:func:`~..verdict.classify` with ``expected_bounds``: the two enclosures
  must meet). A float64 reference needs none: a posteriori enclosures hold a float64 run of the
  same operations (:mod:`pytest_fpcheck.tracking.torch.mode`).

Every call is replayed in one tracking block (opened once: its cost is paid once, not per call);
what replay does besides running the module (substituting extremes, copying integer tensors,
judging) bypasses tracking, so that only the module's own operations and the casts are tracked.
"""

from __future__ import annotations

import contextlib
import itertools
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...adapters.torch import internal
from ...errors import UnsupportedOperation
from ...interval.bounds import Bounds
from ...tracking.core.interpose import OpCall
from ...tracking.torch.mode import record_conversion
from ...tracking.track import bounds_of, track
from ..verdict import Verdict, classify
from .reference import RecordedCall
from .result import ModuleCall
from .structure import floating_leaves, map_tensors

__all__ = ["Replay", "module_dtype"]


def module_dtype(module: torch.nn.Module, fallback: torch.dtype) -> torch.dtype:
    """The dtype a module computes in: its first floating parameter's, else its first floating
    buffer's, else ``fallback``."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):  # lazily: the first
        if tensor.is_floating_point():
            return tensor.dtype
    return fallback


def cast_to(dtype: torch.dtype, site: str | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """A fresh copy of a tensor, floating ones in ``dtype``. Only the cast is bounded: as a
    posteriori tracking bounds ``aten._to_copy``, recorded directly (a recorded reference value
    is an exact input; ``site``, where the caller knows it, names where the casts are made);
    the substitution of a format's extremes and the copies of integer tensors make no
    rounding."""

    def cast(t: torch.Tensor) -> torch.Tensor:
        with internal():
            if not t.is_floating_point():
                return t.clone()
            exact = as_extremes_of(t, dtype)
            converted = exact.to(dtype, copy=True)
        record_conversion(exact, converted, site)
        return converted

    return cast


def as_extremes_of(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` with its format's extreme finite values replaced by those of ``dtype`` (module
    docstring); ``t`` itself when it holds none."""
    if t.dtype == dtype or not t.is_floating_point() or not dtype.is_floating_point:
        return t
    if t.numel() == 0:
        return t
    own = torch.finfo(t.dtype).max
    low, high = torch.aminmax(t)
    if -own < float(low) and float(high) < own:
        return t
    other = torch.finfo(dtype).max
    return torch.where(t == own, other, torch.where(t == -own, -other, t))


class Replay:
    """Replays recorded calls on ``custom`` (module docstring). Use inside :meth:`installed`."""

    def __init__(
        self,
        custom: torch.nn.Module,
        calls: list[RecordedCall],
        *,
        input_dtype: torch.dtype,
        isolate: bool,
        max_resolution: float,
        expected: dict[int, dict[str, Bounds | None]] | None = None,
        collect: bool = False,
    ) -> None:
        self.modules = dict(custom.named_modules())
        #: the reference's own enclosures by call index and label (module docstring)
        self.expected = expected or {}
        #: record enclosures instead of judging (the reference's own replay)
        self.collect = collect
        self.enclosures: dict[int, dict[str, Bounds | None]] = {}
        self.index = -1  # the call being replayed
        self.calls = calls
        self.input_dtype = input_dtype
        self.isolate = isolate
        self.max_resolution = max_resolution
        #: where the casts are made: the comparison's caller (the site of each cast's widening)
        self.site = OpCall(torch.ops.aten._to_copy.default, (), {}).site
        self.forwards: dict[str, Callable[..., Any]] = {}
        self.casts: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
        self.dtypes: dict[str, torch.dtype] = {}
        #: the inputs' casts: (recorded tensor, its cast, the cast's version) by dtype and the
        #: recorded tensor's id
        self.converted: dict[torch.dtype, dict[int, tuple[torch.Tensor, torch.Tensor, int]]] = {}
        # the state of the call being replayed
        self.frame: list[int] | None = None
        self.used: set[int] = set()
        self.handed: list[tuple[str, Verdict]] = []
        self.problems: list[str] = []

    @contextlib.contextmanager
    def installed(self) -> Iterator[Replay]:
        """Give every custom module a forward that answers from the reference when isolated,
        open the one tracking block every call is replayed in (strict: a call that meets an
        operation without a rule is left unjudged, module docstring), and restore the modules'
        own forwards afterwards."""
        saved: dict[str, Any] = {}
        for path, module in self.modules.items():
            own = module.__dict__.get("forward")
            saved[path] = own
            real = own if own is not None else types.MethodType(type(module).forward, module)
            self.forwards[path] = real
            module.forward = self._stub(path, module, real)
        try:
            with torch.no_grad(), track(mode="a_posteriori", strict=True):
                yield self
        finally:
            for path, module in self.modules.items():
                if saved[path] is None:
                    del module.forward
                else:
                    module.forward = saved[path]

    def _cast(self, path: str) -> Callable[[torch.Tensor], torch.Tensor]:
        """The cast to the dtype of the module at ``path`` (looked up once per path)."""
        cast = self.casts.get(path)
        if cast is None:
            self.dtypes[path] = module_dtype(self.modules[path], self.input_dtype)
            cast = cast_to(self.dtypes[path], self.site)
            self.casts[path] = cast
        return cast

    def _input_cast(self, path: str) -> Callable[[torch.Tensor], torch.Tensor]:
        """:meth:`_cast` for the inputs of a replayed call: a recorded input cast to the same
        dtype for an earlier call gives that cast tensor again while nothing has written it
        (its version counter). Calls that shared an input in the reference run share it in
        their replays (:mod:`.reference`), and its cast is bounded once, where the replays
        begin (its site is the comparison's caller for every call)."""
        convert = self._cast(path)
        converted = self.converted.setdefault(self.dtypes[path], {})

        def cast(t: torch.Tensor) -> torch.Tensor:
            kept = converted.get(id(t))
            if kept is not None and kept[0] is t and kept[1]._version == kept[2]:
                return kept[1]
            result = convert(t)
            converted[id(t)] = (t, result, result._version)
            return result

        return cast

    def _stub(
        self, path: str, module: torch.nn.Module, real: Callable[..., Any]
    ) -> Callable[..., Any]:
        def forward(*args: Any, **kwargs: Any) -> Any:
            if self.frame is None:
                return real(*args, **kwargs)
            match = next(
                (i for i in self.frame if i not in self.used and self.calls[i].path == path), None
            )
            if match is None:
                self.problems.append(
                    f"it called {path or '<root>'} ({type(module).__name__}) more often than the "
                    "reference did; that call ran for real"
                )
                frame, self.frame = self.frame, None
                try:
                    return real(*args, **kwargs)
                finally:
                    self.frame = frame
            self.used.add(match)
            called = self.calls[match]
            with internal():
                self._judge(
                    f"input of {called.path or '<root>'}: ",
                    _inputs(args, kwargs),
                    _inputs(called.args, called.kwargs),
                    self.handed,
                )
            return map_tensors(called.output, self._cast(path))

        return forward

    def _judge(
        self,
        prefix: str,
        actual: list[tuple[str, torch.Tensor]],
        expected: list[tuple[str, torch.Tensor]],
        into: list[tuple[str, Verdict]],
    ) -> None:
        """Judge each labelled floating tensor of ``actual`` against the one of ``expected``
        with the same label."""
        found, wanted = dict(actual), dict(expected)
        for label in sorted(wanted.keys() - found.keys()):
            self.problems.append(f"{prefix}{label} is missing (the reference has one)")
        for label in sorted(found.keys() - wanted.keys()):
            self.problems.append(f"{prefix}{label} is extra (the reference has none)")
        for label, value in found.items():
            reference = wanted.get(label)
            if reference is None:
                continue
            if value.shape != reference.shape:
                self.problems.append(
                    f"{prefix}{label} has shape {tuple(value.shape)}, the reference's "
                    f"{tuple(reference.shape)}"
                )
                continue
            if self.collect:
                self.enclosures.setdefault(self.index, {})[prefix + label] = bounds_of(value)
                continue
            target = as_extremes_of(reference, value.dtype)
            # the reference's own enclosure, where its values are the ones judged against
            own = self.expected.get(self.index, {}).get(prefix + label)
            verdict = classify(
                value,
                target,
                expected_bounds=own if target is reference else None,
                max_resolution=self.max_resolution,
            )
            into.append((prefix + label, verdict))

    def replay(self, call: RecordedCall) -> ModuleCall:
        """Run one recorded call on the custom model and judge it (inside :meth:`installed`)."""
        module = self.modules[call.path]
        cast = self._input_cast(call.path)
        self.index = call.index
        self.used, self.handed, self.problems = set(), [], []
        outputs: list[tuple[str, Verdict]] = []
        unjudged = ""
        try:
            args = map_tensors(call.args, cast)
            kwargs = map_tensors(call.kwargs, cast)
            self.frame = list(call.frame) if self.isolate else None
            try:
                output = self.forwards[call.path](*args, **kwargs)
            finally:
                self.frame = None
        except UnsupportedOperation as error:  # a gap: the call is not judged
            unjudged = f"not judged: {error}"
        else:
            with internal():
                self._judge(
                    "",
                    floating_leaves(output, "output"),
                    floating_leaves(call.output, "output"),
                    outputs,
                )
        return ModuleCall(
            index=call.index,
            path=call.path,
            module_class=type(module).__name__,
            occurrence=call.occurrence,
            parent=call.parent,
            depth=call.depth,
            leaf=call.leaf,
            verdicts=tuple(self.handed + outputs),
            problems=tuple(self.problems),
            unjudged=unjudged,
        )


def _inputs(args: Any, kwargs: Any) -> list[tuple[str, torch.Tensor]]:
    return floating_leaves(args, "args") + floating_leaves(kwargs, "kwargs")
