"""The operation interposition layer shared by tracking, the non-finite watch and isolation.

A subclass of :class:`Interposer` is a ``TorchDispatchMode`` scoped to a ``with`` block: it sees
every ATen operation run in that block on that thread, below autograd, and implements one method,
``handle(call, run)``, which must return the operation's result (normally ``run()``'s). Modes
nest: an inner interposer's ``run()`` passes through the outer ones. Nothing global is patched;
the module-path hooks below are registered for the duration of the outermost block only.

:class:`OpCall` describes one operation: its overload name (``aten.add.Tensor``), its packet
(``aten.add``), arguments, and, computed on demand, the user's source line (the innermost frame
outside torch, this package and the standard library) and the ``nn.Module`` path it ran in
(``MLP.layers.3``).

The promise (issue 17) holds for code the modes cannot follow, which they step aside from:

* **compiled code**: the modes declare ``ignore_compile_internals()``, so ``torch.compile``
  (``fullgraph=True`` included) compiles inside a block as outside it, and a compiled graph runs
  with the package's modes popped; what it produced reaches :meth:`Interposer.compiled_region`
  (:mod:`.compiled`);
* **the JIT tracer** (``torch.jit.trace`` runs the program once to record it; under a dispatch
  mode it records a broken graph or fails, pytorch/pytorch#130726): the modes are popped while
  it records (:mod:`.compiled`); what it records is a program, not values the test sees;
* **the TorchScript interpreter** hands a constant scalar of a graph (a *wrapped number*: a
  0-d CPU tensor standing for a Python number) to Python dispatch as that Python number, which
  the operation's schema then refuses (pytorch/pytorch#124731, #130726). Such an argument is
  rebuilt as the 0-d tensor it was (float64, int64, bool or complex128, as ATen wraps numbers;
  only where no tensor stands beside it, the one case the schema refuses), and the operation
  is handled as any other.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import compiled as _compiled
from .frames import describe_location, user_frame

__all__ = ["Interposer", "OpCall", "current_module_path", "describe_location", "user_frame"]


class _ModulePaths(threading.local):
    def __init__(self) -> None:
        self.stack: list[str] = []


_PATHS = _ModulePaths()
_NAMES: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()
_HOOKS_LOCK = threading.Lock()
_HOOK_USERS = 0
_HOOK_HANDLES: list[Any] = []


def _enter_module(module: torch.nn.Module, args: Any) -> None:
    name = _NAMES.get(module)
    if name is None:
        root = type(module).__name__
        for qualified, child in module.named_modules(prefix=root):
            _NAMES.setdefault(child, qualified)
        name = _NAMES[module]
    _PATHS.stack.append(name)


def _leave_module(module: torch.nn.Module, args: Any, output: Any) -> None:
    if _PATHS.stack:
        _PATHS.stack.pop()


#: what :mod:`.compiled` sets aside while a compiled module is called
_enter_module._fpcheck_module_path = True  # type: ignore[attr-defined]
_leave_module._fpcheck_module_path = True  # type: ignore[attr-defined]


def current_module_path() -> str:
    """The qualified name of the innermost ``nn.Module`` running on this thread, or ''."""
    return _PATHS.stack[-1] if _PATHS.stack else ""


def _acquire_hooks() -> None:
    global _HOOK_USERS
    _compiled.attach()
    with _HOOKS_LOCK:
        _HOOK_USERS += 1
        if _HOOK_USERS == 1:
            modules = torch.nn.modules.module
            _HOOK_HANDLES.append(modules.register_module_forward_pre_hook(_enter_module))
            _HOOK_HANDLES.append(
                modules.register_module_forward_hook(_leave_module, always_call=True)
            )


def _release_hooks() -> None:
    global _HOOK_USERS
    _compiled.detach()
    with _HOOKS_LOCK:
        _HOOK_USERS -= 1
        if _HOOK_USERS == 0:
            while _HOOK_HANDLES:
                _HOOK_HANDLES.pop().remove()


@dataclass
class OpCall:
    """One ATen operation as an interposer sees it."""

    func: torch._ops.OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    module_path: str = field(default_factory=current_module_path)

    @property
    def name(self) -> str:
        """The overload's name, e.g. ``aten.add.Tensor``."""
        return str(self.func)

    @property
    def packet(self) -> str:
        """The overload packet's name, e.g. ``aten.add`` (``aten.add_`` for the in-place
        variant)."""
        return f"{self.func.namespace}.{self.func._opname}"

    @property
    def functional(self) -> str:
        """The packet's name without the in-place suffix (``aten.add`` for ``aten.add_``):
        what a rule shared by both variants compares with."""
        return self.packet.removesuffix("_")

    @cached_property
    def source(self) -> tuple[str, int] | None:
        return user_frame()

    @property
    def location(self) -> str:
        """``model.py:12 in MLP.layers.0`` (file, line and module path, as far as known)."""
        return describe_location(self.source, self.module_path)

    @property
    def site(self) -> str:
        """``aten.mm at model.py:12 in MLP.layers.0``: what a report shows of this call."""
        location = self.location
        if not location:
            return self.packet
        return (
            f"{self.packet} {location}"
            if location.startswith("in ")
            else f"{self.packet} at {location}"
        )


class Interposer(TorchDispatchMode):
    """Base of the package's dispatch modes. Subclasses implement :meth:`handle`."""

    #: set on a thread while an interposer of the same class handles an op, so that an outer
    #: instance of that class lets the op pass (the innermost one alone decides).
    _active: ClassVar[threading.local]
    #: what :mod:`.compiled` pops while a compiled graph runs
    _fpcheck_interposer: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._active = threading.local()

    def handle(self, call: OpCall, run: Callable[[], Any]) -> Any:
        """Run the operation (``run()``) and return its result; the base class only runs it."""
        return run()

    def before_compiled_region(self, region: _compiled.CompiledRegion) -> None:
        """A compiled graph is about to run without the modes (may raise to refuse it)."""

    def compiled_region(self, region: _compiled.CompiledRegion) -> None:
        """A compiled graph ran without the modes; ``region`` says what it produced."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """Dynamo compiles with the modes popped, and compiled graphs run without them
        (:mod:`.compiled`): ``torch.compile`` behaves inside a block as outside it."""
        return True

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would wrap __torch_dispatch__ in torch._dynamo.disable, whose first call imports
        # torch._dynamo (a second of CPU, the most of a first tracked block); the dispatch below
        # does what that wrapper does, once Dynamo is imported (before, nothing can be compiling)
        return False

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if "torch._dynamo" in sys.modules:
            _compiled.ensure_attached()
            return _dispatch_without_dynamo()(self, func, types, args, kwargs)
        return self._interpose(func, types, args, kwargs)

    def _interpose(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        active = type(self)._active
        if getattr(active, "depth", 0):
            return func(*args, **kwargs)
        if _numbers_for_tensors(func, args, kwargs):
            args, kwargs = _rewrapped(func, args, kwargs)
        active.depth = 1
        try:
            return self.handle(OpCall(func, args, kwargs), lambda: func(*args, **kwargs))
        finally:
            active.depth = 0

    def __enter__(self) -> Interposer:
        _acquire_hooks()
        try:
            super().__enter__()
        except BaseException:
            _release_hooks()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            _release_hooks()


def _tensor_slots(func: torch._ops.OpOverload) -> dict[str, tuple[int, bool]]:
    """name -> (position, keyword-only) of the arguments the schema types ``Tensor``."""
    slots = _SLOTS.get(func)
    if slots is None:
        slots = _SLOTS[func] = {
            a.name: (i, a.kwarg_only)
            for i, a in enumerate(func._schema.arguments)
            if isinstance(a.type, torch.TensorType)
        }
    return slots


_SLOTS: dict[torch._ops.OpOverload, dict[str, tuple[int, bool]]] = {}
_NUMBERS = (bool, int, float, complex)


def _numbers_for_tensors(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bool:
    """Whether the operation has no tensor argument and a Python number stands where the
    schema wants a Tensor: a wrapped number the TorchScript interpreter handed over unwrapped,
    which the schema refuses when no tensor stands beside it (``mul.Tensor(x, 2)`` is
    accepted, ``_local_scalar_dense(2)`` is not). Free for the usual calls: a tensor argument
    decides at once."""
    if any(isinstance(a, torch.Tensor) for a in args):
        return False
    if any(isinstance(v, torch.Tensor) for v in kwargs.values()):
        return False
    for name, (position, kwarg_only) in _tensor_slots(func).items():
        value = kwargs.get(name) if kwarg_only or position >= len(args) else args[position]
        if isinstance(value, _NUMBERS):
            return True
    return False


def _rewrapped(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with each number in a Tensor slot rebuilt as the 0-d tensor ATen wraps
    it in (float64, int64, bool, complex128). With no other tensor beside them, such 0-d
    tensors promote as the wrapped numbers do."""
    slots = _tensor_slots(func)
    positions = {p for p, kwarg_only in slots.values() if not kwarg_only}

    def rebuilt(value: Any) -> Any:
        if not isinstance(value, _NUMBERS):
            return value
        dtype = {bool: torch.bool, int: torch.int64, float: torch.float64}.get(
            type(value), torch.complex128
        )
        return torch.scalar_tensor(value, dtype=dtype)

    with torch._C._DisableTorchDispatch():
        new_args = tuple(rebuilt(a) if i in positions else a for i, a in enumerate(args))
        new_kwargs = {k: rebuilt(v) if k in slots else v for k, v in kwargs.items()}
    return new_args, new_kwargs


@functools.cache
def _dispatch_without_dynamo() -> Callable[..., Any]:
    """:meth:`Interposer._interpose` run with Dynamo disabled, as torch runs a dispatch mode's
    ``__torch_dispatch__`` (``torch._disable_dynamo(..., recursive=True)``)."""
    import torch._dynamo  # already imported: the caller checked

    disabled: Callable[..., Any] = torch._dynamo.disable(Interposer._interpose, recursive=True)
    return disabled
