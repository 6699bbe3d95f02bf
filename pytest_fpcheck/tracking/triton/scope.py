"""When the Triton instrumentation is in place: from the first ``fp.track()`` or
``fp.watch_nonfinite()`` block of the process to the last one's end (reference counted), and
only if triton is imported (a process without triton cannot launch a kernel, and importing it
costs a second and 200 MiB). Triton first imported inside a block is reported when the block
closes (:class:`UnsupportedTritonImport`) if a kernel of the user's was defined, hence may have
run uninstrumented; not when a library merely probed for triton. A tracker or a watch opens and
closes its block with :func:`open_block` and :func:`close_block`: the instrumentation attached,
the dispatch mode entered, the block subscribed to what the instrumentation reports. The hooks
themselves are in :mod:`.hooks`.
"""

from __future__ import annotations

import gc
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..core import observe

__all__ = ["UnsupportedTritonImport", "attach", "close_block", "detach", "open_block"]

_LOCK = threading.Lock()
_USERS = 0
_TRITON_ABSENT = False
_MISSING = object()
#: (owner, name, original) of what the installed hooks replaced
_RESTORE: list[tuple[Any, str, Any]] = []


class UnsupportedTritonImport(UserWarning):
    """Triton was first imported inside a tracking or watching block: kernels launched in that
    block ran without instrumentation."""


def _user_kernels_exist() -> bool:
    """Whether a Triton kernel of the user's exists (a ``@triton.jit`` function defined outside
    triton and torch). A library that only probes for triton (torch does, ``has_triton_package``,
    from operations as common as a matmul when ``TRITON_INTERPRET=1`` is set) imports it without
    defining a kernel: then no kernel ran uninstrumented and there is nothing to warn about.

    Called once per process at most (only when triton arrived inside a block), so a walk over the
    objects the garbage collector tracks is affordable."""
    kinds = tuple(
        kind
        for module, name in (
            ("triton.runtime.jit", "KernelInterface"),
            ("triton.runtime.jit", "JITFunction"),
            ("triton.runtime.interpreter", "InterpretedFunction"),
        )
        if isinstance(kind := getattr(sys.modules.get(module), name, None), type)
    )
    if not kinds:
        return False
    for candidate in gc.get_objects():
        if issubclass(type(candidate), kinds):  # type(), not a proxy's __class__
            module = getattr(getattr(candidate, "fn", None), "__module__", None) or ""
            if not module.startswith(("triton.", "torch.")) and module not in ("triton", "torch"):
                return True
    return False


def attach() -> None:
    """Instrument the interpreter when the first block opens (if triton is imported)."""
    global _USERS, _TRITON_ABSENT
    with _LOCK:
        if _USERS == 0:
            _TRITON_ABSENT = "triton" not in sys.modules
            if not _TRITON_ABSENT:
                from .hooks import hook_set

                for owner, name, value in hook_set():
                    _RESTORE.append((owner, name, owner.__dict__.get(name, _MISSING)))
                    setattr(owner, name, value)
        _USERS += 1


def detach() -> None:
    """Undo :func:`attach` when the last block closes; warn if triton was first imported
    inside the block."""
    global _USERS
    with _LOCK:
        _USERS -= 1
        if _USERS > 0:
            return
        while _RESTORE:
            owner, name, original = _RESTORE.pop()
            if original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        late = _TRITON_ABSENT and "triton.runtime.interpreter" in sys.modules
    if late and _user_kernels_exist():
        warnings.warn(
            "triton was first imported inside an fp.track() or fp.watch_nonfinite() block: "
            "Triton kernels launched in that block ran without instrumentation (no bounds, "
            "no non-finite checks). Import the kernels' modules before the block opens.",
            UnsupportedTritonImport,
            stacklevel=3,
        )


def open_block(subscriber: Any, enter: Callable[[], Any]) -> None:
    """Open a tracking or watching block: attach the instrumentation, run ``enter`` (the dispatch
    mode's own entry; the attachment is undone if it fails), then subscribe ``subscriber``."""
    attach()
    try:
        enter()
    except BaseException:
        detach()
        raise
    observe.subscribe(subscriber)


def close_block(subscriber: Any, leave: Callable[[], Any]) -> None:
    """Close what :func:`open_block` opened, in reverse order; the instrumentation is detached
    even when ``leave`` raises."""
    observe.unsubscribe(subscriber)
    try:
        leave()
    finally:
        detach()
