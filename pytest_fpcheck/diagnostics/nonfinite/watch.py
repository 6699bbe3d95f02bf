"""The non-finite watch itself: where NaN, Inf and subnormals appear in PyTorch operations and
Triton kernels (GPU-FPX, Li et al., "Array Programming on GPUs: Challenges and Opportunities",
sections 1-4).

GPU-FPX instruments every floating-point instruction, checks its destination register for NaN,
INF, subnormal and division by zero, reports each instruction once with counts (section 4.2), and
its analyzer tells an *appearance* (finite operands, exceptional result, section 3.2) from a
value that was only carried along (the incoming NaN of section 3.1). ``fp.watch_nonfinite()``
does the same one level up: every ATen operation run on this thread inside the block is an
instruction, its user source line and ``nn.Module`` path the location. A watch subscribes to the
Triton instrumentation (:mod:`pytest_fpcheck.tracking.core.observe`) for its block, which shows
it every computing operation of a launched kernel (:meth:`Watch.kernel_operation`).

The rules:

* an operation is watched when it returns a floating tensor; views (they compute nothing) and
  ``empty``-like factories (their contents are not values) are passed through;
* ``nan`` / ``inf``: the output holds such values; it *appeared* there when every floating input
  tensor was finite (Python scalars are constants written into the program, so
  ``x.fill_(nan)`` is where that NaN appears);
* ``subnormal``: ``0 < |x| < tiny`` of the output's format; it appeared when every floating
  input was finite and none subnormal;
* ``div0``: a division (``div``, ``reciprocal``, ``rsqrt``) whose divisor is zero where the
  dividend is finite (``0/0`` counts too); it always appears at the division;
* events are kept per (site, kind, dtype) with counts, so a loop reports a site once;
* the flow of a value: each exceptional output's storage remembers the appearances whose values
  it holds; an operation reading it adds them to its events' ``origins``.

Inputs are the floating tensors an operation reads: ``self`` of an overwriting in-place operation
(``fill_``, ``copy_``, ...) and ``out=`` arguments are not inputs; the ``self`` of any other
in-place operation is examined before the operation overwrites it.

A graph compiled by ``torch.compile`` runs without the watch (its fused kernels are not ATen
operations; :mod:`pytest_fpcheck.tracking.core.compiled`): the watch examines what it produced
at the boundary, as one operation named ``torch.compile(fn)`` at the user's line, by the same
rules (its outputs against its floating inputs).

Checks run with Python dispatch disabled and take the cheap path first: one
``aminmax(|out|)`` per output (per piece of 32767 elements on the CPU, which keeps the scan on
the calling thread), with a test on the bits for subnormals only when the output holds zeros;
inputs are examined only when the output is exceptional, the ones known to carry exceptional
values first.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import numpy as np
import torch

from ...adapters.torch import internal
from ...errors import InvalidArgument
from ...tracking.core.compiled import CompiledRegion, floating_tensors
from ...tracking.core.interpose import Interposer, OpCall
from ...tracking.triton import scope as triton_scope
from .events import KINDS, Event, EventKey, flow_text, report_text

__all__ = ["KINDS", "Event", "Watch", "watch_nonfinite"]

_RECIPROCALS = frozenset({"aten.reciprocal", "aten.reciprocal_", "aten.rsqrt", "aten.rsqrt_"})
_DIVISIONS = _RECIPROCALS | {"aten.div", "aten.div_"}
#: in-place operations that overwrite all of ``self`` without reading it
_OVERWRITES = frozenset(
    f"aten.{name}_"
    for name in (
        "fill",
        "zero",
        "copy",
        "uniform",
        "normal",
        "random",
        "exponential",
        "geometric",
        "cauchy",
        "log_normal",
        "bernoulli",
    )
)
_UNINITIALISED = frozenset(
    {
        "aten.empty",
        "aten.empty_like",
        "aten.empty_strided",
        "aten.new_empty",
        "aten.new_empty_strided",
    }
)
_BIT_MASKS: dict[torch.dtype, tuple[torch.dtype, int, int]] = {}
_SAME_WIDTH_INT = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}
_SERIAL_PIECE = 32767  # below at::internal::GRAIN_SIZE: ATen runs it on the calling thread


_SPARSE = frozenset(
    {torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc}
)


def _watchable(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """What the watch can read of these tensors: a strided tensor (or a parameter) itself, a
    sparse tensor's stored values; nothing of a nested tensor, a meta one or a tensor subclass
    (a ``FakeTensorMode`` tensor has no data: reading one crashed the process). The watch
    observes; it must never make a program fail."""
    readable = []
    for t in tensors:
        if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.is_meta or t.is_nested:
            continue
        if _strided(t):
            readable.append(t)
        elif t.layout in _SPARSE:
            readable.append(t.values() if t.layout != torch.sparse_coo else t._values())
    return readable


def _strided(t: torch.Tensor) -> bool:
    """A plain strided tensor with data the watch can read."""
    return (
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.layout == torch.strided
        and not (t.is_meta or t.is_nested)
    )


def _read_tensors(call: OpCall) -> list[torch.Tensor]:
    """The floating tensors an operation reads: its arguments less ``self`` of an overwriting
    in-place operation (``fill_``, ``copy_``, ...) and the ``out=`` arguments it only writes."""
    written = {
        a.name
        for a in call.func._schema.arguments
        if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
    }
    args = call.args[1:] if call.packet in _OVERWRITES else call.args
    return _watchable(
        floating_tensors(args)
        + floating_tensors({k: v for k, v in call.kwargs.items() if k not in written})
    )


def _bit_masks(dtype: torch.dtype) -> tuple[torch.dtype, int, int]:
    """(signed integer dtype of the same width, mask of every bit but the sign, mask of the
    fraction bits) of a floating dtype."""
    if dtype not in _BIT_MASKS:
        info = torch.finfo(dtype)
        fraction_bits = round(-math.log2(info.eps))
        _BIT_MASKS[dtype] = (
            _SAME_WIDTH_INT[info.bits],
            (1 << (info.bits - 1)) - 1,
            (1 << fraction_bits) - 1,
        )
    return _BIT_MASKS[dtype]


def _has_subnormal_bits(piece: torch.Tensor) -> bool:
    """On the bits: ``v = (|bits| - 1) & magnitude_mask`` sends zero to the top and a subnormal
    ``s`` (``1 <= |bits| <= fraction_mask``) to ``s - 1``; a subnormal is there iff
    ``min(v) < fraction_mask``. Integer operations only, and no overflow."""
    int_dtype, magnitude, fraction = _bit_masks(piece.dtype)
    bits = piece.view(int_dtype) & magnitude
    return int(((bits - 1) & magnitude).amin()) < fraction


def _pieces(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``t`` itself, or, for a contiguous CPU tensor, flat pieces below ATen's parallel grain
    size: a scan is memory-bound and cheap, and waking the intra-op thread pool for it can cost
    more than the scan (tens of times more on a busy machine)."""
    if t.device.type != "cpu" or not t.is_contiguous() or t.numel() <= _SERIAL_PIECE:
        return (t,)
    return t.view(-1).chunk(math.ceil(t.numel() / _SERIAL_PIECE))


def _values(piece: torch.Tensor) -> torch.Tensor:
    """``piece`` in a dtype ATen reduces on every device: float8 widens to float32, exactly."""
    return piece.float() if piece.element_size() == 1 else piece


def _scan(t: torch.Tensor) -> tuple[bool, bool]:
    """(holds a NaN or Inf, holds a subnormal), exactly, for a floating tensor.

    The cheap path is one ``aminmax`` of ``|piece|`` per piece: a NaN propagates to both ends and
    an infinity is the maximum; a minimum at or above ``tiny`` rules subnormals out, one in
    ``(0, tiny)`` is one. Only a minimum of zero or NaN needs :func:`_has_subnormal_bits`."""
    nonfinite = subnormal = False
    if not t.numel() or t.is_meta:
        return nonfinite, subnormal
    tiny = torch.finfo(t.dtype).tiny
    for piece in _pieces(t):
        low, high = (float(end) for end in torch.aminmax(_values(piece).abs()))
        nonfinite = nonfinite or not math.isfinite(high)
        if subnormal:
            continue
        subnormal = _has_subnormal_bits(piece) if low == 0 or math.isnan(low) else low < tiny
    return nonfinite, subnormal


def _counts(t: torch.Tensor, kinds: frozenset[str]) -> dict[str, int]:
    """How many NaN, Inf and subnormal values ``t`` holds (watched kinds only, zeros left out).

    :func:`_scan` runs first; elements are counted, piece by piece, only when it finds
    something."""
    nonfinite, subnormal = _scan(t)
    tests: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
    if nonfinite:
        tests.update(nan=torch.isnan, inf=torch.isinf)
    if subnormal:
        tiny = torch.finfo(t.dtype).tiny
        tests["subnormal"] = lambda piece: (piece.abs() < tiny) & (piece != 0)
    found = {kind: 0 for kind in tests if kind in kinds}
    for piece in _pieces(t) if found else ():
        for kind in found:
            found[kind] += int(tests[kind](_values(piece)).sum())
    return {kind: n for kind, n in found.items() if n}


class _InputState:
    """Whether any floating input holds a non-finite or a subnormal value.

    Scanning stops at the first non-finite input: no kind can have appeared then. Callers put
    the inputs most likely to hold one first."""

    def __init__(self, tensors: Iterable[torch.Tensor]) -> None:
        self.nonfinite = self.subnormal = False
        for t in tensors:
            nonfinite, subnormal = _scan(t)
            self.subnormal = self.subnormal or subnormal
            if nonfinite:
                self.nonfinite = True
                break

    def appeared(self, kind: str) -> bool:
        """The appearance rule of the module docstring for ``kind``."""
        if kind == "subnormal":
            return not (self.nonfinite or self.subnormal)
        return not self.nonfinite


def _fresh_elements(kind: str, out: torch.Tensor, inputs: list[torch.Tensor]) -> tuple[bool, bool]:
    """For an element-wise operation whose inputs hold exceptional values somewhere: (does an
    element of ``out`` of this kind sit where every input's element, broadcast, is finite (and,
    for a subnormal, normal or zero), does one sit where an input's is not). The first
    appeared there, as GPU-FPX judges each thread: ``b / [1, 0]`` with ``b = [nan, 1]`` makes
    an INF at the second element, unrelated to the NaN at the first; the second carries what
    its inputs held. (False, True), the per-tensor rule, where the inputs do not broadcast."""
    exceptional = torch.zeros(out.shape, dtype=torch.bool, device=out.device)
    try:
        for t in inputs:
            values = _values(t)
            mask = ~torch.isfinite(values)
            if kind == "subnormal":
                mask = mask | ((values.abs() < torch.finfo(t.dtype).tiny) & (values != 0))
            exceptional |= mask.broadcast_to(out.shape)
    except RuntimeError:  # shapes that do not broadcast, another device
        return False, True
    found = _values(out)
    if kind == "nan":
        here = torch.isnan(found)
    elif kind == "inf":
        here = torch.isinf(found)
    else:
        here = (found.abs() < torch.finfo(out.dtype).tiny) & (found != 0)
    return bool((here & ~exceptional).any()), bool((here & exceptional).any())


def _division_by_zero(call: OpCall) -> int:
    """How many output elements divide a finite dividend by zero (0/0 included; 0 when none).

    ``reciprocal`` and ``rsqrt`` divide 1; a Python number in either place is broadcast."""
    if call.packet in _RECIPROCALS:
        dividend: Any = 1.0
        divisor = call.args[0]
    else:
        dividend, divisor = call.args[0], call.args[1]
    if isinstance(divisor, torch.Tensor):
        zero = divisor == 0
        if not bool(zero.any()):
            return 0
    elif divisor != 0:
        return 0
    else:
        zero = torch.tensor(True)
    if isinstance(dividend, torch.Tensor):
        zero = zero & torch.isfinite(dividend)
    elif not math.isfinite(dividend):
        return 0
    return int(zero.sum())


def _storage_key(t: torch.Tensor) -> int | None:
    storage = t.untyped_storage()
    return storage.data_ptr() if storage.nbytes() else None


def _covers_storage(t: torch.Tensor) -> bool:
    return t.numel() * t.element_size() == t.untyped_storage().nbytes()


class Watch(Interposer):
    """The dispatch mode behind :func:`watch_nonfinite`.

    ``events`` lists the :class:`Event` records in the order first seen; ``operations`` counts the
    floating operations watched.
    """

    def __init__(self, kinds: Iterable[str] = KINDS) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # TorchDispatchMode is untyped
        if isinstance(kinds, (str, bytes)) or not isinstance(kinds, Iterable):
            raise InvalidArgument(
                "kinds",
                kinds,
                f"a collection of kind names from {KINDS!r}",
                hint=f"Pass a tuple, e.g. kinds=({kinds!r},).",
            )
        chosen = tuple(kinds)
        unknown = [k for k in chosen if k not in KINDS]
        if unknown or not chosen:
            raise InvalidArgument(
                "kinds", kinds, f"a non-empty collection of kind names from {KINDS!r}"
            )
        self.kinds = tuple(k for k in KINDS if k in chosen)
        self._watched = frozenset(self.kinds)
        self._events: dict[EventKey, Event] = {}
        self._carried: dict[int, frozenset[EventKey]] = {}
        self.operations = 0

    @property
    def events(self) -> list[Event]:
        """Every event, in the order first seen."""
        return list(self._events.values())

    def appearances(self) -> list[Event]:
        """The events whose values appeared at their site, first appearance first."""
        return [e for e in self._events.values() if e.appeared]

    def flow(self, event: Event) -> list[Event]:
        """``event``, then every later event whose inputs carried values that appeared there."""
        return [event] + [e for e in self._events.values() if event.key in e.origins]

    def report_text(self) -> str:
        """The report (see :func:`.events.report_text`) as a string."""
        return report_text(self._events.values(), self.kinds, self.operations)

    def report(self, file: TextIO | None = None) -> None:
        """Print the report to ``file`` (standard output by default)."""
        print(self.report_text(), file=file or sys.stdout)

    def flow_text(self, event: Event) -> str:
        """The flow of ``event`` (see :meth:`flow`) with the source line of each step."""
        if event.key not in self._events or self._events[event.key] is not event:
            raise InvalidArgument("event", event, "an Event from this watch's events")
        return flow_text(self.flow(event))

    def __enter__(self) -> Watch:
        triton_scope.open_block(self, super().__enter__)
        return self

    def __exit__(self, *exc: Any) -> None:
        """Leave the block, and hand each appearance to the run report (its sink)."""
        triton_scope.close_block(self, lambda: super(Watch, self).__exit__(*exc))
        from ...assertions.sink import publish

        for event in self.appearances():
            publish("appearances", event)

    def handle(self, call: OpCall, run: Callable[[], Any]) -> Any:
        func = call.func
        if func.is_view or call.packet in _UNINITIALISED:
            return run()
        inputs = _read_tensors(call)
        everything = floating_tensors(call.args) + floating_tensors(call.kwargs)
        with internal(), torch.no_grad():
            before = self._input_state(inputs) if func._schema.is_mutable else None
            div0 = 0
            if (
                "div0" in self._watched
                and call.packet in _DIVISIONS
                and all(_strided(t) for t in everything)
            ):
                div0 = _division_by_zero(call)
        result = run()
        outputs = _watchable(floating_tensors(result))
        if not outputs:
            return result
        self.operations += 1
        with internal(), torch.no_grad():
            self._classify(call, inputs, outputs, before, div0)
        return result

    def compiled_region(self, region: CompiledRegion) -> None:
        """A compiled graph ran without the watch: its floating outputs (and the inputs it
        overwrote) are examined at the boundary, against its floating inputs (module
        docstring)."""
        written = {id(t) for t in region.written}
        outputs = _watchable(region.outputs + region.written)
        if not outputs:
            return
        self.operations += 1
        inputs = _watchable([t for t in region.inputs if id(t) not in written])
        call = _RegionCall(region)
        with internal(), torch.no_grad():
            self._classify(call, inputs, outputs, None, 0)

    def _classify(
        self,
        call: OpCall | _RegionCall,
        inputs: list[torch.Tensor],
        outputs: list[torch.Tensor],
        before: _InputState | None,
        div0: int,
    ) -> None:
        state = before
        origins: frozenset[EventKey] | None = None
        # element by element for an element-wise operation that keeps its inputs (an in-place
        # one has overwritten its input with the output by now)
        pointwise = (
            isinstance(call, OpCall)
            and torch.Tag.pointwise in call.func.tags
            and not call.func._schema.is_mutable
        )
        for position, out in enumerate(outputs):
            found = _counts(out, self._watched)
            if position == 0 and div0:
                found["div0"] = div0
            key = _storage_key(out)
            if not found:
                if key is not None and _covers_storage(out):
                    self._carried.pop(key, None)
                continue
            if state is None:
                state = self._input_state(inputs)
            if origins is None:
                origins = self._origins(inputs, state)
            carried = set(origins)
            for kind, count in found.items():
                event = self._record(call, out.dtype, kind, count)
                whole = kind == "div0" or state.appeared(kind)
                fresh, inherited = (
                    (whole, not whole)
                    if whole or not pointwise
                    else _fresh_elements(kind, out, inputs)
                )
                if fresh:
                    event.appeared = True
                    carried.add(event.key)
                if inherited:
                    event.origins |= origins
            if key is not None:
                if not _covers_storage(out):  # a partial write keeps what the rest carried
                    carried |= self._carried.get(key, frozenset())
                self._carried[key] = frozenset(carried)

    def _input_state(self, inputs: list[torch.Tensor]) -> _InputState:
        """Inputs whose storage carries exceptional values are scanned first."""
        return _InputState(sorted(inputs, key=lambda t: _storage_key(t) not in self._carried))

    def _origins(self, inputs: list[torch.Tensor], state: _InputState) -> frozenset[EventKey]:
        if not (state.nonfinite or state.subnormal):
            return frozenset()
        keys = (_storage_key(t) for t in inputs)
        return frozenset().union(*(self._carried.get(k, frozenset()) for k in keys if k))

    def _record(
        self, call: OpCall | _RegionCall, dtype: torch.dtype, kind: str, count: int
    ) -> Event:
        dtype_name = str(dtype).removeprefix("torch.")
        return self._record_at(
            (call.packet, call.module_path, call.source, dtype_name, kind), count
        )

    def _record_at(self, key: EventKey, count: int) -> Event:
        event = self._events.get(key)
        if event is None:
            event = Event(*key, order=len(self._events))
            self._events[key] = event
        event.count += count
        event.calls += 1
        return event

    def kernel_operation(
        self,
        op: str,
        source: tuple[str, int] | None,
        dtype: str,
        smallest_normal: float,
        inputs: list[np.ndarray],
        output: np.ndarray,
        divisions_by_zero: int = 0,
    ) -> None:
        """Watch one operation of an interpreted Triton kernel (``op`` names the kernel and the
        operation): its float64 ``inputs`` and ``output`` values, by the same rules as an ATen
        operation (the instrumented interpreter calls this: a watch subscribes to it as a
        :class:`~pytest_fpcheck.tracking.core.observe.OperationWatcher`)."""
        self.operations += 1
        found: dict[str, int] = {}
        with np.errstate(invalid="ignore"):
            magnitude = np.abs(output)
            if "nan" in self._watched:
                found["nan"] = int(np.isnan(output).sum())
            if "inf" in self._watched:
                found["inf"] = int(np.isinf(output).sum())
            if "subnormal" in self._watched:
                found["subnormal"] = int(((magnitude > 0) & (magnitude < smallest_normal)).sum())
        if "div0" in self._watched:
            found["div0"] = divisions_by_zero
        found = {kind: count for kind, count in found.items() if count}
        if not found:
            return
        finite = all(np.isfinite(values).all() for values in inputs)
        with np.errstate(invalid="ignore"):
            subnormal = any(((np.abs(v) > 0) & (np.abs(v) < smallest_normal)).any() for v in inputs)
        for kind, count in found.items():
            event = self._record_at((op, "", source, dtype, kind), count)
            if kind == "div0" or (finite and (kind != "subnormal" or not subnormal)):
                event.appeared = True


class _RegionCall:
    """A compiled region as :meth:`Watch._classify` reads an operation: its name and site."""

    def __init__(self, region: CompiledRegion) -> None:
        self.packet = region.name
        self.module_path = ""
        self.source = region.source


def watch_nonfinite(*, kinds: Iterable[str] = KINDS) -> Watch:
    """A context manager recording where NaN, Inf, subnormal values and divisions by zero
    appear in the PyTorch operations run inside it on this thread (see the module docstring)."""
    return Watch(kinds)
