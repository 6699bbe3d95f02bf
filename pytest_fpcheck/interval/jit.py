"""The decorator every compiled kernel goes through (:func:`jit`), where their compiled code is
cached (:func:`cache_dir`), and the warm-up that compiles them off the caller's thread.

:func:`jit` takes the options of ``numba.njit`` and returns a :class:`Kernel`, a stand-in that
imports Numba and builds the real dispatcher only when it is first needed: importing the interval
engine (and with it the tracker) costs no Numba import. Inside compiled code a kernel is its
dispatcher (Numba types it through ``_numba_type_``), so kernels call each other as before.

**Inlining is LLVM's.** A helper that must vanish into its caller's loop (so that the loop
vectorises and its flags fold to constants) is compiled with ``forceinline=True``: Numba compiles
it once per signature and marks it ``alwaysinline`` for LLVM. Numba's own ``inline="always"``
copies and re-analyses the callee's IR at every call site, and again for every helper nested in
it: a sum rounded onto float32 took 45 s to compile that way against 6 s now, at the same speed.
:func:`jit` refuses that option.

**Where the cache lives.** ``cache=True`` caches a kernel's machine code on disk, under
:func:`cache_dir`: ``$FPCHECK_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/pytest-fpcheck``, else
``~/.cache/pytest-fpcheck`` (``%LOCALAPPDATA%`` on Windows), in a folder named after the Python
and Numba versions and a digest of every source file compiled code can come from
(:func:`source_digest`: ``interval/``, ``emulate/``, ``formats.py``, the verdict's pass
``assertions/summary.py`` and stochastic arithmetic's ``stochastic/kernels.py``). Numba itself
keys a cached kernel by its own file only, so an edit of an inlined helper in another file (say
``rounding.py``) would run stale code; with the digest in the folder, an upgrade or an edit
compiles afresh. The package's own folders are never written to. Where the cache folder cannot be
created or written, kernels compile in memory (each process pays the compilation).

Several processes (pytest-xdist workers) share the folder safely: each file is written whole
under a temporary name and renamed into place, and a compiled kernel's data file is named after
its index key (signature, target, bytecode and closure digests), so no two kernels ever share one
(Numba numbers them in order of arrival, and two processes that compile different settings of
one kernel at once can otherwise leave one setting's key pointing at the other's code). Two
processes that add to one index at once may lose one entry, which costs a compilation later,
never a wrong kernel.

**The warm-up.** A kernel given a ``fallback`` (an exact NumPy twin, vectorised, bit-identical to
the compiled loop: :mod:`pytest_fpcheck.interval.fallbacks`) never makes its caller wait for a
compilation: until the compiled kernel is ready, a call runs the twin. Once the work is worth a
compilation (a twin called on more than :data:`WARM_UP_SIZE` elements, or the twins' time
reaching :data:`WARM_UP_SECONDS`), each twin call asks a background thread to load (or compile)
its kernel for the call's types, and later calls run compiled; a short script never starts the
thread, so it neither imports Numba nor waits at exit for a compilation (a process that ends
while the thread works waits for the kernel in hand, never for the rest of the queue). Calls with
more than :data:`FALLBACK_LIMIT` elements in one array wait for the compiled kernel (the twin's
temporaries grow with the array), and so does every kernel without a twin.
``FPCHECK_JIT=eager`` turns the twins and the thread off: every call waits for its kernel.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = [
    "CACHE_ENV",
    "FALLBACK_LIMIT",
    "WARM_UP_SECONDS",
    "WARM_UP_SIZE",
    "Kernel",
    "cache_dir",
    "cache_root",
    "jit",
    "source_digest",
    "wait_for_kernels",
]

#: the environment variable that overrides the cache folder
CACHE_ENV = "FPCHECK_CACHE_DIR"
#: the environment variable that, set to ``eager``, turns the NumPy twins and the warm-up off
MODE_ENV = "FPCHECK_JIT"
#: the most elements an array argument may hold for a call to run a kernel's NumPy twin
FALLBACK_LIMIT = 1 << 20
#: a twin called with an array larger than this begins the warm-up
WARM_UP_SIZE = 1 << 16
#: twins that have run this long in all (seconds) begin the warm-up
WARM_UP_SECONDS = 0.5

_PACKAGE = Path(__file__).resolve().parent.parent
#: the sources compiled code is built from (kernels inline helpers across these files)
_COMPILED_SOURCES = (
    "interval",
    "emulate",
    "formats.py",
    "assertions/summary.py",
    "stochastic/kernels.py",
)


def cache_root() -> Path:
    """The package's cache folder: ``$FPCHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-fpcheck``,
    else the platform's user cache folder (``~/.cache/pytest-fpcheck``)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "pytest-fpcheck"
    local = os.environ.get("LOCALAPPDATA")
    if sys.platform == "win32" and local:
        return Path(local) / "pytest-fpcheck" / "Cache"
    return Path.home() / ".cache" / "pytest-fpcheck"


def _compiled_source_files() -> list[Path]:
    files: list[Path] = []
    for name in _COMPILED_SOURCES:
        path = _PACKAGE / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


_DIGEST: list[str] = []


def source_digest() -> str:
    """The SHA-256 of every source file compiled code can come from (their paths inside the
    package and their bytes), computed once per process."""
    if not _DIGEST:
        digest = hashlib.sha256()
        for path in _compiled_source_files():
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        _DIGEST.append(digest.hexdigest())
    return _DIGEST[0]


def cache_dir() -> Path:
    """The folder of this installation's compiled kernels: :func:`cache_root` /
    ``numba/py<X><Y>-numba<version>-<digest>`` (imports Numba to learn its version)."""
    import numba

    version = f"py{sys.version_info[0]}{sys.version_info[1]}-numba{numba.__version__}"
    return cache_root() / "numba" / f"{version}-{source_digest()[:16]}"


def _covered(py_file: str) -> bool:
    """Whether a kernel's source file is among those :func:`source_digest` reads."""
    path = Path(py_file).resolve()
    return any(path == source or source in path.parents for source in _roots())


def _roots() -> list[Path]:
    return [_PACKAGE / name for name in _COMPILED_SOURCES]


_BUILD_LOCK = threading.RLock()
F = TypeVar("F", bound=Callable[..., Any])


class Kernel:
    """A compiled function, built on first need (see the module docstring).

    ``py_func`` and ``targetoptions`` are what :attr:`dispatcher` is built from; it is the Numba
    dispatcher; calling the kernel runs it compiled, or its NumPy twin while the compiled
    code is not ready."""

    def __init__(
        self,
        py_func: Callable[..., Any],
        options: dict[str, Any],
        cache: bool,
        fallback: Callable[..., Any] | None,
    ) -> None:
        self.py_func = py_func
        self.targetoptions = dict(options)
        self.cache = cache
        self.fallback = fallback
        self.failed = False
        self._dispatcher: Any = None
        self._requested = False
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__module__ = py_func.__module__

    def __repr__(self) -> str:
        return f"<compiled kernel {self.__module__}.{self.__qualname__}>"

    @property
    def dispatcher(self) -> Any:
        """The Numba dispatcher (imports Numba and attaches the user-folder cache the first
        time)."""
        if self._dispatcher is None:
            with _BUILD_LOCK:
                if self._dispatcher is None:
                    self._dispatcher = _build(self)
        return self._dispatcher

    @property
    def _numba_type_(self) -> Any:
        # how Numba types a global or closure variable that is not a dispatcher itself
        return self.dispatcher._numba_type_

    @property
    def ready(self) -> bool:
        """Whether some compiled version is loaded (a call then never runs the twin)."""
        return self._dispatcher is not None and bool(self._dispatcher.overloads)

    def __call__(self, *args: Any) -> Any:
        dispatcher = self._dispatcher
        if dispatcher is not None and dispatcher.overloads:
            return dispatcher(*args)
        if self.fallback is not None and not self.failed and _use_fallback(args):
            if not self._requested and _TWINS.warming(args):
                self._requested = True
                _WORKER.request(self, args)
            start = time.perf_counter()
            try:
                return self.fallback(*args)
            finally:
                _TWINS.seconds += time.perf_counter() - start
        return self.dispatcher(*args)


class _TwinTime:
    """When the warm-up begins: once a twin has been called with more than
    :data:`WARM_UP_SIZE` elements in one array, or the twins have run for
    :data:`WARM_UP_SECONDS` in all; from then on each kernel is asked for at its next twin call.
    A short script (the README's tour) never compiles and never waits for a compilation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.begun = False

    def warming(self, args: tuple[Any, ...]) -> bool:
        if not self.begun:
            large = any(getattr(arg, "size", 0) > WARM_UP_SIZE for arg in args)
            self.begun = large or self.seconds >= WARM_UP_SECONDS
        return self.begun


_TWINS = _TwinTime()


def jit(
    *, cache: bool = False, fallback: Callable[..., Any] | None = None, **options: Any
) -> Callable[[F], F]:
    """``numba.njit(**options)``, built on first need, cached under :func:`cache_dir` when
    ``cache``; ``fallback`` is the kernel's exact NumPy twin (same arguments, same results bit
    for bit), run while the compiled kernel is not ready. The :class:`Kernel` it returns is
    typed as the function it compiles, so that calls keep their types."""

    if "inline" in options:
        raise ValueError(
            f"jit(inline={options['inline']!r}): Numba's IR inlining copies the callee at every "
            f"call site and multiplies compile times; pass forceinline=True (LLVM inlines it)"
        )

    def decorate(py_func: F) -> F:
        if cache and not _covered(py_func.__code__.co_filename):
            raise RuntimeError(
                f"{py_func.__qualname__} in {py_func.__code__.co_filename} is compiled with a "
                f"cache, but source_digest() does not read its file: add its folder to "
                f"_COMPILED_SOURCES in {__name__}"
            )
        return cast("F", Kernel(py_func, options, cache, fallback))

    return decorate


def _eager() -> bool:
    return os.environ.get(MODE_ENV, "") == "eager"


def _use_fallback(args: tuple[Any, ...]) -> bool:
    if _eager():
        return False
    return all(getattr(arg, "size", 0) <= FALLBACK_LIMIT for arg in args)


def _build(kernel: Kernel) -> Any:
    import numba

    dispatcher = numba.njit(**kernel.targetoptions)(kernel.py_func)
    if kernel.cache:
        cache = _user_cache(kernel.py_func)
        if cache is not None:
            dispatcher._cache = cache
    return dispatcher


def _user_cache(py_func: Callable[..., Any]) -> Any:
    """A Numba function cache in :func:`cache_dir` (None where that folder is not writable)."""
    from ._jit_cache import user_function_cache

    return user_function_cache(py_func, str(cache_dir()), source_digest())


def _standin(value: Any) -> Any:
    """A small value Numba types as it types ``value``: an empty or tiny array of the same
    dtype, dimensions, layout and writability; tuples element by element; scalars as they are."""
    import numpy as np

    if isinstance(value, np.ndarray):
        ndim = value.ndim
        if value.flags.c_contiguous or ndim == 0:
            standin = np.empty((0,) * ndim, dtype=value.dtype) if ndim else value.copy()
        elif value.flags.f_contiguous:
            standin = np.empty((2,) * ndim, dtype=value.dtype, order="F")
        else:
            standin = np.empty((2,) * (ndim - 1) + (4,), dtype=value.dtype)[..., ::2]
        standin.flags.writeable = value.flags.writeable
        return standin
    if isinstance(value, tuple):
        return tuple(_standin(item) for item in value)
    return value


class _Worker:
    """One daemon thread that runs the tasks asked of it (loading or compiling a kernel), one at
    a time; at exit it finishes the task in hand (no compilation is cut off mid-way) and stops."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = False

    def submit(self, task: Callable[[], None]) -> bool:
        """Queue ``task`` (False when the thread has stopped: the task will not run)."""
        with self._lock:
            if self._stopping:
                return False
            self._queue.put(task)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="pytest-fpcheck kernel warm-up", daemon=True
                )
                self._thread.start()
                atexit.register(self.stop)
        return True

    def request(self, kernel: Kernel, args: tuple[Any, ...]) -> None:
        standins = tuple(_standin(arg) for arg in args)
        self.submit(functools.partial(_load, kernel, standins))

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            if task is None or self._stopping:
                return
            task()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._queue.put(None)
        if thread is not None:
            thread.join()


def _load(kernel: Kernel, standins: tuple[Any, ...]) -> None:
    try:
        compile_for(kernel, standins)
    except Exception:  # the caller's thread meets the error when it compiles the kernel itself
        kernel.failed = True


def compile_for(kernel: Kernel, args: tuple[Any, ...]) -> None:
    """Load or compile ``kernel`` for the Numba types of ``args`` (no call is made)."""
    from numba import typeof

    dispatcher = kernel.dispatcher
    signature = tuple(typeof(arg) for arg in args)  # type: ignore[no-untyped-call]
    if signature not in dispatcher.overloads:
        dispatcher.compile(signature)


_WORKER = _Worker()


def wait_for_kernels() -> None:
    """Wait until every kernel asked of the background thread so far is loaded or compiled."""
    done = threading.Event()
    if _WORKER.submit(done.set):
        done.wait()
