"""Run a callback right after a module is first imported, on one thread, inside a block.

The plugin opens a test's PyTorch blocks (the non-finite watch and, where the test is tracked,
``fp.track()``) around its call when torch is already imported; importing torch to find out
would cost every test that never uses it a second or more. A test that imports torch in its
own body (``import torch`` inside the function, or a library it calls doing so) gets them
opened when it does: :func:`when_imported` puts a finder at the front of ``sys.meta_path`` for
the block's duration. The finder answers for no module: for every name but the one it waits
for it returns None at once (one string comparison per import), and for that one it asks the
finders behind it and hands back their spec with the loader wrapped, so that the callback runs
just after the module has finished loading and before the import statement returns to the
test. The module keeps its own loader (``__loader__`` and ``__spec__.loader`` are restored
before it runs). Only an import on the block's own thread fires it (dispatch modes are per
thread); an import that fails fires nothing. A failure of the callback never reaches the
importing code: it is kept in the list the block yields, for the caller to report.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = ["when_imported"]


class _ThenCall:
    """The real loader, with ``then`` called after it has executed the module (anything else
    asked of it, ``get_filename`` or ``is_package`` say, is the real loader's answer)."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self._loader = loader
        self._then = then

    def __getattr__(self, name: str) -> Any:  # get_filename, is_package, ...: the real loader's
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> ModuleType | None:
        module: ModuleType | None = self._loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._then()


class _Finder:
    """A ``sys.meta_path`` finder that wraps the loader of module ``name`` on ``thread``."""

    def __init__(self, name: str, then: Callable[[], None], thread: int) -> None:
        self._name = name
        self._then = then
        self._thread = thread
        self._searching = False
        self.fired = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if (
            fullname != self._name
            or self.fired
            or self._searching
            or threading.get_ident() != self._thread
        ):
            return None
        self._searching = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._searching = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ThenCall(spec.loader, self._fire)
        return spec

    def _fire(self) -> None:
        self.fired = True
        self._then()


@contextmanager
def when_imported(name: str, then: Callable[[], None]) -> Iterator[list[str]]:
    """Call ``then()`` right after the top-level module ``name`` is imported on this thread
    inside the block (at most once; never if it is already in ``sys.modules``). Yields a list
    that receives the formatted traceback of any exception ``then`` raised, which the import
    itself never sees."""
    failures: list[str] = []

    def guarded() -> None:
        try:
            then()
        except Exception:  # the importing code must run as if nothing were watching
            failures.append(traceback.format_exc())

    finder = _Finder(name, guarded, threading.get_ident())
    sys.meta_path.insert(0, finder)
    try:
        yield failures
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
