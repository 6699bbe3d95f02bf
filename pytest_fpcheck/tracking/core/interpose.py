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
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Interposer", "OpCall", "current_module_path", "describe_location", "user_frame"]

#: the package root (pytest_fpcheck/): frames in it are never the user's
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SKIPPED_PREFIXES = tuple(
    p
    for p in {
        _PACKAGE_DIR,
        os.path.dirname(os.path.abspath(torch.__file__)),
        sysconfig.get_paths()["stdlib"],
    }
    if p
)
_SKIPPED_MODULE_PREFIXES = ("triton", "_pytest", "pluggy", "numpy")


def describe_location(source: tuple[str, int] | None, module_path: str) -> str:
    """``model.py:12 in MLP.layers.0``: the file's name and line, then the module path, as far
    as each is known ('' when neither is)."""
    parts = []
    if source is not None:
        parts.append(f"{os.path.basename(source[0])}:{source[1]}")
    if module_path:
        parts.append(f"in {module_path}")
    return " ".join(parts)


def user_frame() -> tuple[str, int] | None:
    """(file, line) of the innermost frame that belongs to the user's code."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        module = frame.f_globals.get("__name__", "")
        if (
            not filename.startswith(_SKIPPED_PREFIXES)
            and not filename.startswith("<")
            and not module.startswith(_SKIPPED_MODULE_PREFIXES)
        ):
            return filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


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


def current_module_path() -> str:
    """The qualified name of the innermost ``nn.Module`` running on this thread, or ''."""
    return _PATHS.stack[-1] if _PATHS.stack else ""


def _acquire_hooks() -> None:
    global _HOOK_USERS
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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._active = threading.local()

    def handle(self, call: OpCall, run: Callable[[], Any]) -> Any:
        """Run the operation (``run()``) and return its result; the base class only runs it."""
        return run()

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


@functools.cache
def _dispatch_without_dynamo() -> Callable[..., Any]:
    """:meth:`Interposer._interpose` run with Dynamo disabled, as torch runs a dispatch mode's
    ``__torch_dispatch__`` (``torch._disable_dynamo(..., recursive=True)``)."""
    import torch._dynamo  # already imported: the caller checked

    disabled: Callable[..., Any] = torch._dynamo.disable(Interposer._interpose, recursive=True)
    return disabled
