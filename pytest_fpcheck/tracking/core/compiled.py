"""Compiled regions: code that ``torch.compile`` compiled, and the JIT tracer's recording run,
run as they run without this package.

``torch.compile(fn, fullgraph=True)`` refuses to compile while a ``TorchDispatchMode`` is active
(Dynamo skips every frame: "found no compiled frames"), unless the mode declares
``ignore_compile_internals()``: then Dynamo compiles with the modes popped
(``convert_frame``'s ``_disable_current_modes``) and runs the compiled artifact with them pushed
again, so the modes see whichever ATen operations the backend's code still dispatches (all of
them for ``aot_eager``, a few extern kernels around fused ones for ``inductor``), on tensors
produced by kernels they never saw. The package's dispatch modes (:class:`~.interpose.Interposer`)
declare it, and step aside while a compiled graph runs:

* while a tracking or watching block is open, the graphs Dynamo compiles are wrapped
  (``OutputGraph.call_user_compiler``, restored when the last block closes); a wrapped graph
  called while one of the package's modes is on the thread's dispatch stack runs with those
  modes popped (the user's own modes stay), so a compiled function computes exactly what it
  computes in a plain run, and nothing of it reaches the modes;
* what the region produced is then handed to the innermost mode of each kind
  (:meth:`~.interpose.Interposer.compiled_region`): its floating outputs, and the floating
  inputs it overwrote (their version counter moved). A tracker gives them no bounds (a named
  gap, ``"torch.compile region"``, counted with its first source line; under ``strict=True``
  the call raises ``UnsupportedOperation`` before anything runs); the non-finite watch examines
  the outputs at the boundary, as one operation;
* a ``torch.compile``'d module (``OptimizedModule``) is called with the package's global module
  hooks (the module paths) set aside, as torch warns about any such hook when it is called;
* a graph compiled outside every block is not wrapped: the modes see what reaches the
  dispatcher from it, as torch's ``ignore_compile_internals`` contract says.

``torch.jit.trace`` records a program by running it once; under any dispatch mode the recording
fails or records a wrong graph (pytorch/pytorch#130726). While a block is open, the tracer's
entry points (``torch._C._create_function_from_trace``, ``_create_graph_by_tracing``,
``torch._C.ScriptModule._create_method_from_trace`` and their ``_with_dict`` variants) run
with the package's modes popped: the traced program is what a plain run records, and the
recording run's values are not the program's results.

This is a scoped hook (set while a block is open, like the Triton instrumentation), not a
patch of torch: the wrapper of a graph compiled inside a block only calls the graph when no
dispatch mode is active.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack, _pop_mode, _push_mode

from .frames import user_frame

__all__ = [
    "CompiledRegion",
    "attach",
    "detach",
    "ensure_attached",
    "floating_tensors",
    "stepped_aside",
]

_LOCK = threading.Lock()
_USERS = 0
#: (owner, name, original) of the hooked ``OutputGraph.call_user_compiler`` and
#: ``OptimizedModule.__call__``, while hooked
_HOOKED: list[tuple[Any, str, Any]] = []
#: (owner, name, original) of the hooked tracer entry points, while hooked
_TRACER: list[tuple[Any, str, Any]] = []
#: the tracer's entry points: functions of ``torch._C`` and methods of its ``ScriptModule``
_TRACER_FUNCTIONS = (
    "_create_function_from_trace",
    "_create_function_from_trace_with_dict",
    "_create_graph_by_tracing",
)
_TRACER_METHODS = ("_create_method_from_trace", "_create_method_from_trace_with_dict")


@dataclass
class CompiledRegion:
    """One call of a compiled graph: ``name`` (``torch.compile(forward)``), the user's
    ``source`` line and ``site`` text, the floating tensors it produced (``outputs``) and the
    floating inputs it overwrote (``written``)."""

    name: str
    source: tuple[str, int] | None
    site: str
    inputs: list[torch.Tensor] = field(default_factory=list)
    outputs: list[torch.Tensor] = field(default_factory=list)
    written: list[torch.Tensor] = field(default_factory=list)


def floating_tensors(value: Any) -> list[torch.Tensor]:
    """The real floating tensors in an argument or result (nested in lists, tuples, dicts)."""
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in floating_tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in floating_tensors(item)]
    return []


def _is_interposer(mode: Any) -> bool:
    return bool(getattr(type(mode), "_fpcheck_interposer", False))


@contextlib.contextmanager
def stepped_aside() -> Iterator[list[Any]]:
    """Pop the package's dispatch modes from this thread's stack for the block (the others
    stay, in their order); yields the popped ones, innermost first."""
    stack = _get_current_dispatch_mode_stack()
    lowest = next((i for i, mode in enumerate(stack) if _is_interposer(mode)), None)
    if lowest is None:
        yield []
        return
    popped = [_pop_mode() for _ in range(len(stack) - lowest)]  # innermost first
    kept = [mode for mode in reversed(popped) if not _is_interposer(mode)]
    for mode in kept:
        _push_mode(mode)
    try:
        yield [mode for mode in popped if _is_interposer(mode)]
    finally:
        for _ in kept:
            _pop_mode()
        for mode in reversed(popped):
            _push_mode(mode)


def _region_name(output_graph: Any) -> str:
    """``torch.compile(f)`` for a compiled function, ``torch.compile(Linear)`` for a compiled
    module (Dynamo's frame is then torch's ``inner``, whose ``fn`` is the module)."""
    transaction = getattr(output_graph, "root_tx", None)
    code = getattr(transaction, "f_code", None)
    name = getattr(code, "co_name", "graph")
    fn = getattr(transaction, "f_locals", {}).get("fn")
    if name == "inner" and fn is not None:
        name = (
            type(fn).__name__ if isinstance(fn, torch.nn.Module) else getattr(fn, "__name__", name)
        )
    return f"torch.compile({name})"


def _wrap(compiled: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The compiled graph ``compiled``, stepping the package's modes aside when it runs."""

    def region(*args: Any, **kwargs: Any) -> Any:
        if not torch._C._len_torch_dispatch_stack():
            return compiled(*args, **kwargs)
        inputs = floating_tensors(list(args)) + floating_tensors(kwargs)
        versions = [t._version for t in inputs]
        source = user_frame(_caller_of_compiled_frame())
        site = f"{name} at {source[0].rsplit('/', 1)[-1]}:{source[1]}" if source else name
        described = CompiledRegion(name, source, site, inputs)
        with stepped_aside() as modes:
            innermost: dict[type, Any] = {}
            for mode in modes:
                innermost.setdefault(type(mode), mode)
            for mode in innermost.values():
                mode.before_compiled_region(described)  # strict tracking raises here
            out = compiled(*args, **kwargs)
        described.outputs = floating_tensors(out)
        described.written = [
            t for t, version in zip(inputs, versions, strict=True) if t._version != version
        ]
        for mode in innermost.values():
            mode.compiled_region(described)
        return out

    region.__name__ = getattr(compiled, "__name__", "compiled_graph")
    if getattr(compiled, "_boxed_call", False):  # called with one list of arguments
        region._boxed_call = True  # type: ignore[attr-defined]
    return region


def _caller_of_compiled_frame() -> FrameType | None:
    """The frame that called the function whose compiled code runs (the frame above the one
    Dynamo runs its transformed code in), or None when none is found."""
    codes = getattr(sys.modules.get("torch._dynamo.utils"), "orig_code_map", None)
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and codes is not None:
        if frame.f_code in codes:
            return frame.f_back
        frame = frame.f_back
    return None


def _hooked(original: Callable[..., Any]) -> Callable[..., Any]:
    def call_user_compiler(self: Any, gm: Any, *args: Any, **kwargs: Any) -> Any:
        compiled = original(self, gm, *args, **kwargs)
        return _wrap(compiled, _region_name(self))

    return call_user_compiler


@contextlib.contextmanager
def _module_hooks_aside() -> Iterator[None]:
    """Take the package's global module hooks (the module paths of :mod:`.interpose`, marked
    ``_fpcheck_module_path``) out of torch's tables for the block, and put them back in their
    order: ``torch.compile(module)`` warns about any global module hook when called."""
    module = torch.nn.modules.module
    tables: tuple[OrderedDict[int, Any], ...] = (
        module._global_forward_pre_hooks,  # type: ignore[assignment]
        module._global_forward_hooks,
        module._global_forward_hooks_always_called,
    )
    ours = {
        key
        for table in tables[:2]
        for key, hook in table.items()
        if getattr(hook, "_fpcheck_module_path", False)
    }
    saved = [(table, list(table), {k: table[k] for k in ours if k in table}) for table in tables]
    for table, _, taken in saved:
        for key in taken:
            del table[key]
    try:
        yield
    finally:
        for table, order, taken in saved:
            table.update(taken)
            for key in [k for k in order if k in table] + [k for k in table if k not in order]:
                table.move_to_end(key)


def _module_call(original: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _module_hooks_aside():
            return original(self, *args, **kwargs)

    return call


def _install() -> None:
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    output_graph = sys.modules.get("torch._dynamo.output_graph")
    compiler = getattr(output_graph, "OutputGraph", None)
    optimized = getattr(eval_frame, "OptimizedModule", None)
    if compiler is None or optimized is None or _HOOKED:
        return
    _HOOKED.append((compiler, "call_user_compiler", compiler.__dict__["call_user_compiler"]))
    _HOOKED.append((optimized, "__call__", optimized.__dict__["__call__"]))
    compiler.call_user_compiler = _hooked(_HOOKED[0][2])
    optimized.__call__ = _module_call(_HOOKED[1][2])


def _untraced(original: Callable[..., Any]) -> Callable[..., Any]:
    def record(*args: Any, **kwargs: Any) -> Any:
        with stepped_aside():
            return original(*args, **kwargs)

    record.__name__ = getattr(original, "__name__", "trace")
    return record


def attach() -> None:
    """A block opens: hook the tracer's entry points, and Dynamo's compiler call if Dynamo is
    imported (reference counted)."""
    global _USERS
    with _LOCK:
        _USERS += 1
        if _USERS == 1:
            entries = ((torch._C, _TRACER_FUNCTIONS), (torch._C.ScriptModule, _TRACER_METHODS))
            for owner, names in entries:
                for name in names:
                    original = owner.__dict__.get(name)
                    if original is not None:
                        _TRACER.append((owner, name, original))
                        setattr(owner, name, _untraced(original))
        _install()


def ensure_attached() -> None:
    """Hook Dynamo's compiler call now if a block is open and Dynamo arrived since it opened."""
    if _USERS and not _HOOKED:
        with _LOCK:
            if _USERS:
                _install()


def detach() -> None:
    """The last block closes: restore Dynamo's compiler call."""
    global _USERS
    with _LOCK:
        _USERS -= 1
        if _USERS == 0:
            while _HOOKED:
                owner, name, original = _HOOKED.pop()
                setattr(owner, name, original)
            while _TRACER:
                owner, name, original = _TRACER.pop()
                setattr(owner, name, original)
