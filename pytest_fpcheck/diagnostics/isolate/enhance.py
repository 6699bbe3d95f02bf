"""Precision enhancement of chosen operation sites (CIEL section 3.3), as a dispatch mode.

Built on the shared interposition layer (:class:`~pytest_fpcheck.tracking.core.interpose.Interposer`).
Each ATen operation run inside the block is one of three kinds:

* a **site**: it computes a floating result in a format narrower than the enhanced one (a
  narrowing cast, and a constant written in a narrow format, are sites too: CIEL found
  constants such as ``1.4E-41f`` to be culprits). An *enhanced* site runs on its inputs promoted
  to the enhanced format and its result is cast back to the dtype the program gave it, so the
  program's types stay as written (CIEL's expression transformation,
  ``(float)((double)b * 2.0)``);
* **exact**: it moves or selects values without rounding them (views, copies, concatenation,
  indexing, ``relu``, ``max`` ...; a cast that does not narrow);
* **opaque**: no floating result, or random numbers; it runs as written.

Region merge (CIEL section 3.3, variable checkpoints): an enhanced site keeps its enhanced
result as a *shadow* of the tensor the program sees; an enhanced site reading that tensor reads
the shadow, and exact operations carry shadows along (the view of a shadowed tensor is shadowed
by the same view of its shadow). So a chain of enhanced sites computes in the enhanced format
throughout, and the cast to the program's dtype happens only where a value leaves the enhanced
region. A shadow is dropped when its tensor (or a view of it) is modified in place (PyTorch's
version counter, which views share, tells).

The mode composes with other modes (``fp.track()``, ``fp.watch_nonfinite()``, autocast): what an
enhanced site runs (promotions, the operation in the enhanced format, the cast back) passes
through the modes below it like any operation, so an outer ``fp.track()`` bounds the enhanced
program. Autocast runs above dispatch: the casts it inserts reach this mode as ``_to_copy``
sites, and it leaves float64 operations alone.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from ...adapters.torch import dtype_format
from ...tracking.core.frames import _PACKAGE_DIR, outside_user_code
from ...tracking.core.interpose import Interposer, OpCall
from .sites import Site

__all__ = ["ENHANCE", "EXACT", "OPAQUE", "SITE", "Enhancer", "SiteTable"]

#: the formats a site can be enhanced to
ENHANCE = {"float64": torch.float64, "float32": torch.float32}

OPAQUE, EXACT, SITE = 0, 1, 2

_RANDOM = re.compile(
    r"rand|normal|uniform|bernoulli|dropout|multinomial|poisson|exponential|geometric|cauchy"
)
#: operations that move, select or compare values without rounding them
_EXACT = frozenset(
    f"aten.{name}"
    for name in (
        "clone",
        "contiguous",
        "cat",
        "stack",
        "index",
        "index_select",
        "gather",
        "take",
        "take_along_dim",
        "masked_select",
        "expand",
        "expand_copy",
        "_unsafe_view",
        "_reshape_alias",
        "view_copy",
        "permute_copy",
        "t_copy",
        "transpose_copy",
        "squeeze_copy",
        "unsqueeze_copy",
        "slice_copy",
        "select_copy",
        "as_strided_copy",
        "repeat",
        "repeat_interleave",
        "tile",
        "flip",
        "roll",
        "constant_pad_nd",
        "select_scatter",
        "slice_scatter",
        "diagonal_scatter",
        "where",
        "masked_fill",
        "neg",
        "abs",
        "relu",
        "clamp",
        "clamp_min",
        "clamp_max",
        "maximum",
        "minimum",
        "max",
        "min",
        "amax",
        "amin",
        "sort",
        "topk",
        "zeros",
        "ones",
        "empty",
        "zeros_like",
        "ones_like",
        "empty_like",
        "empty_strided",
        "new_zeros",
        "new_ones",
        "new_empty",
        "lift_fresh",
        "lift_fresh_copy",
        "alias",
        "detach",
        "view_as_real",
        "unfold",
        "tril",
        "triu",
        "sign",
    )
)
_CASTS = frozenset({"aten._to_copy", "aten.copy_", "aten.copy", "aten.to"})
#: softmax's ``half_to_float`` flag must be off once the input is promoted
_HALF_TO_FLOAT = frozenset({"aten._softmax", "aten._log_softmax"})

Key = tuple[Any, ...]


def _floats(value: Any) -> list[torch.Tensor]:
    """The floating tensors in an operation's arguments or result, in order."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _floats(item)]
    return []


def _precision(dtype: torch.dtype) -> tuple[int, int]:
    fmt = dtype_format(dtype)
    return (fmt.precision, fmt.emax) if fmt is not None else (0, 0)


def _narrower(dtype: torch.dtype, than: torch.dtype) -> bool:
    """True when ``dtype`` loses precision or range against ``than``."""
    (p, e), (q, f) = _precision(dtype), _precision(than)
    return p < q or e < f


def _is_view(func: torch._ops.OpOverload) -> bool:
    schema = func._schema
    return not schema.is_mutable and any(r.alias_info is not None for r in schema.returns)


def classify(call: OpCall, out: Any, target: torch.dtype) -> int:
    """The kind of an operation (``SITE``, ``EXACT`` or ``OPAQUE``), from its result."""
    results = _floats(out)
    packet = call.packet
    if (
        not results
        or _RANDOM.search(packet)
        or call.func is torch.ops.aten.view.dtype
        or not any(_narrower(t.dtype, target) for t in results)
    ):
        return OPAQUE
    if packet in _CASTS:
        sources = _floats(call.args[1:2] if packet.startswith("aten.copy") else call.args[:1])
        narrowing = any(_narrower(r.dtype, s.dtype) for r in results for s in sources)
        return SITE if narrowing else EXACT
    if packet in _EXACT or _is_view(call.func):
        return EXACT
    return SITE


def site_key(call: OpCall, stop: FrameType | None) -> tuple[Key, tuple[str, int] | None]:
    """The static identity of an operation (its overload, module path and the Python frames from
    the dispatcher up to the user's line, or up to ``stop``, the frame that entered the mode)
    and that line, as ``(file, line)``."""
    frames: list[tuple[str, int, int]] = []
    source = None
    frame = sys._getframe(1)
    while frame is not None and frame is not stop:
        code = frame.f_code
        filename = code.co_filename
        if not filename.startswith(_PACKAGE_DIR):
            frames.append((filename, code.co_firstlineno, frame.f_lasti))
            if not outside_user_code(filename, frame.f_globals.get("__name__", "")):
                source = (filename, frame.f_lineno)
                break
        frame = frame.f_back  # type: ignore[assignment]
    return (call.name, call.module_path, tuple(frames)), source


class SiteTable:
    """The sites one program ran, numbered in the order they first ran."""

    def __init__(self) -> None:
        self.ids: dict[Key, int] = {}
        self.sites: list[Site] = []
        self.dtypes: list[tuple[torch.dtype, ...]] = []
        self._per_module: dict[str, int] = {}

    def add(self, key: Key, call: OpCall, source: tuple[str, int] | None, out: Any) -> int:
        number = self.ids.get(key)
        if number is not None:
            return number
        dtypes = tuple(t.dtype for t in _floats(out))
        index = self._per_module.get(call.module_path, 0)
        self._per_module[call.module_path] = index + 1
        low = next(d for d in dtypes if dtype_format(d) is not None)
        fmt = dtype_format(low)
        assert fmt is not None
        self.sites.append(Site(call.packet, call.module_path, index, source, fmt.name))
        self.dtypes.append(dtypes)
        self.ids[key] = len(self.sites) - 1
        return len(self.sites) - 1


#: one entry per operation of the recorded run: (overload, module path, kind, site number)
TraceEntry = tuple[torch._ops.OpOverload, str, int, int]


class Enhancer(Interposer):
    """Runs the block with the sites numbered in ``enabled`` enhanced to ``target``.

    ``record=True`` numbers new sites into ``table`` and writes ``trace`` (the run's sequence of
    operations); a later run given that ``trace`` follows it without looking at frames, and falls
    back to identifying each operation by its frames from the first operation that differs."""

    def __init__(
        self,
        table: SiteTable,
        *,
        target: torch.dtype,
        enabled: frozenset[int] = frozenset(),
        trace: list[TraceEntry] | None = None,
        record: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.table = table
        self.target = target
        self.enabled = enabled
        self.record = record
        self.trace = trace
        self.followed = trace is not None and not record
        #: site number -> why it could not be enhanced (it then ran as written)
        self.failures: dict[int, str] = {}
        self._position = 0
        self._shadows: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._entry: FrameType | None = None
        self._written: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __enter__(self) -> Enhancer:
        self._entry = sys._getframe(1)
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._entry = None
        self._written.clear()
        super().__exit__(*exc)

    def handle(self, call: OpCall, run: Callable[[], Any]) -> Any:
        if self._written:
            self._settle()
        position = self._position
        self._position += 1
        if self.followed:
            assert self.trace is not None
            if position < len(self.trace):
                func, module_path, kind, number = self.trace[position]
                if func is call.func and module_path == call.module_path:
                    return self._dispatch(call, run, kind, number)
            self.followed = False  # the run took another path: identify operations by frames
        key, source = site_key(call, self._entry)
        number = self.table.ids.get(key, -1)
        if number in self.enabled:
            return self._enhance(call, run, number)
        out = run()
        kind = classify(call, out, self.target)
        if kind == SITE and self.record:
            number = self.table.add(key, call, source, out)
        if self.record:
            assert self.trace is not None
            self.trace.append((call.func, call.module_path, kind, number))
        if kind == EXACT and len(self._shadows):
            return self._carry(call, out)
        return out

    def _dispatch(self, call: OpCall, run: Callable[[], Any], kind: int, number: int) -> Any:
        if kind == SITE and number in self.enabled:
            return self._enhance(call, run, number)
        out = run()
        if kind == EXACT and len(self._shadows):
            return self._carry(call, out)
        return out

    # -- shadows ---------------------------------------------------------------------------

    def _shadow(self, t: torch.Tensor) -> torch.Tensor | None:
        entry = self._shadows.get(t)  # type: ignore[no-untyped-call]
        if entry is not None and entry[0] == _version(t):
            return entry[1]  # type: ignore[no-any-return]
        return None

    def _keep(self, t: torch.Tensor, shadow: torch.Tensor) -> None:
        version = _version(t)
        if version is not None:  # inference tensors have no version counter: no shadow
            self._shadows[t] = (version, shadow)

    def _settle(self) -> None:
        """Shadow the tensors the last enhanced in-place operation wrote, now that PyTorch has
        bumped their version counters (it does so after the operation returns)."""
        for t, shadow in self._written:
            self._keep(t, shadow)
        self._written.clear()

    def _promote(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if not value.is_floating_point():
                return value
            shadow = self._shadow(value)
            if shadow is not None:
                return shadow
            return value.to(self.target) if _narrower(value.dtype, self.target) else value
        if isinstance(value, (list, tuple)):
            return type(value)(self._promote(v) for v in value)
        if isinstance(value, torch.dtype) and value.is_floating_point:
            return self.target if _narrower(value, self.target) else value
        return value

    def _promoted_arguments(self, call: OpCall) -> tuple[list[Any], dict[str, Any]]:
        args = [self._promote(a) for a in call.args]
        kwargs = {k: self._promote(v) for k, v in call.kwargs.items()}
        if call.packet in _HALF_TO_FLOAT and len(args) > 2:
            args[2] = False
        return args, kwargs

    def _carry(self, call: OpCall, out: Any) -> Any:
        """An exact operation on a shadowed tensor: its result gets the same operation's result
        on the shadows. A widening cast (``.float()`` of a float16 tensor) is where a value
        leaves the enhanced region: its result is the shadow rounded to the wider dtype."""
        if call.func._schema.is_mutable:
            return out  # it overwrites a tensor: the version counter drops that tensor's shadow
        inputs = _floats(call.args) + _floats(list(call.kwargs.values()))
        if not any(self._shadow(t) is not None for t in inputs):
            return out
        args, kwargs = self._promoted_arguments(call)
        shadowed = _floats(call.func(*args, **kwargs))
        if call.packet == "aten._to_copy" and isinstance(out, torch.Tensor) and shadowed:
            widened = shadowed[0].to(out.dtype)
            self._keep(widened, shadowed[0])
            return widened
        for result, shadow in zip(_floats(out), shadowed, strict=False):
            self._keep(result, shadow)
        return out

    # -- enhanced sites --------------------------------------------------------------------

    def _enhance(self, call: OpCall, run: Callable[[], Any], number: int) -> Any:
        args, kwargs = self._promoted_arguments(call)
        try:
            enhanced = call.func(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as error:
            self.failures.setdefault(number, str(error).strip().splitlines()[0])
            return run()
        written = _written(call, args, kwargs)
        for original, promoted in written:
            original.copy_(promoted)
            self._written.append((original, promoted))
        back = {id(promoted): original for original, promoted in written}
        dtypes = iter(self.table.dtypes[number])
        return self._cast_back(enhanced, back, dtypes)

    def _cast_back(self, value: Any, back: dict[int, torch.Tensor], dtypes: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if id(value) in back:
                next(dtypes, None)  # the written tensor keeps its own dtype
                return back[id(value)]
            if not value.is_floating_point():
                return value
            dtype = next(dtypes, value.dtype)
            result = value.to(dtype)
            self._keep(result, value)
            return result
        if isinstance(value, (list, tuple)):
            return type(value)(self._cast_back(v, back, dtypes) for v in value)
        return value


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:  # an inference tensor
        return None


def _written(
    call: OpCall, args: list[Any], kwargs: dict[str, Any]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(original, promoted) for each tensor the operation writes (``self`` of ``add_``,
    ``out=``), whose promoted copy it wrote instead."""
    pairs = []
    schema = call.func._schema
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if position < len(call.args) and not argument.kwarg_only:
            original, promoted = call.args[position], args[position]
        elif argument.name in call.kwargs:
            original, promoted = call.kwargs[argument.name], kwargs[argument.name]
        else:
            continue
        if isinstance(original, torch.Tensor) and promoted is not original:
            pairs.append((original, promoted))
    return pairs
