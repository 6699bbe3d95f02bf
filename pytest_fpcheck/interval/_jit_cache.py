"""Numba's on-disk cache, pointed at the user's cache folder (:func:`.jit.cache_dir`) instead of
the package's ``__pycache__``, and safe for processes that share it (see :mod:`.jit`).

This module imports Numba and subclasses three classes of ``numba.core.caching`` (the locator,
the cache implementation and the index file); :mod:`.jit` imports it only when it builds a
kernel's dispatcher.
"""

# mypy: disable-error-code="no-untyped-call, no-any-return"
# (Numba's caching module is untyped)
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar

from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    IndexDataCacheFile,
    _CacheLocator,
)

__all__ = ["user_function_cache"]


class _UserCacheLocator(_CacheLocator):
    """Every kernel's files go to one folder (:func:`.jit.cache_dir`, set by
    :func:`user_function_cache`); the source stamp is the digest of all compiled sources
    (:func:`.jit.source_digest`), not the kernel's own file alone."""

    #: the folder and stamp of the locators made next (set under :mod:`.jit`'s build lock)
    path: ClassVar[str] = ""
    stamp: ClassVar[str] = ""

    def __init__(self, py_func: Callable[..., Any], py_file: str) -> None:
        self._path = self.path
        self._stamp = self.stamp
        self._lineno = py_func.__code__.co_firstlineno
        self._py_file = py_file  # where Numba's warnings about an uncachable kernel point

    def get_cache_path(self) -> str:
        return self._path

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Callable[..., Any], py_file: str) -> _UserCacheLocator | None:
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:  # not creatable or not writable: the kernel compiles in memory
            return None
        return locator


class _KeyedIndexFile(IndexDataCacheFile):
    """Numba's index and data files, with each data file named after its index key and written
    before the index that points at it: two processes saving different kernels of one index at
    once can no longer write to one data file (Numba picks the next free number)."""

    def save(self, key: Any, data: Any) -> None:
        data_name = self._data_name_pattern.replace(
            "{number:d}", hashlib.sha256(repr(key).encode()).hexdigest()[:24]
        )
        self._save_data(data_name, data)
        overloads = self._load_index()
        if overloads.get(key) != data_name:
            overloads[key] = data_name
            self._save_index(overloads)


class _UserCacheImpl(CompileResultCacheImpl):
    _locator_classes: list[type[object]] = [_UserCacheLocator]  # noqa: RUF012 (Numba's name)

    def __init__(self, py_func: Callable[..., Any]) -> None:
        if not hasattr(py_func, "__module__"):  # pragma: no cover - every kernel has one
            raise RuntimeError(f"{py_func!r} has no module")
        self._module = py_func.__module__
        super().__init__(py_func)

    def get_filename_base(self, fullname: str, abiflags: str) -> str:
        # the module's dotted name, not its file's base name: kernels/linalg.py and
        # interval/linalg.py would share "linalg"
        qualified = f"{self._module}.{fullname.split('.', 1)[1]}"
        return super().get_filename_base(qualified, abiflags)


class _UserFunctionCache(FunctionCache):
    _impl_class = _UserCacheImpl

    def __init__(self, py_func: Callable[..., Any]) -> None:
        super().__init__(py_func)
        self._cache_file = _KeyedIndexFile(
            cache_path=self._cache_path,
            filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp(),
        )


def user_function_cache(py_func: Callable[..., Any], path: str, stamp: str) -> FunctionCache | None:
    """The cache of ``py_func`` in the folder ``path`` with the source stamp ``stamp``, or None
    where that folder cannot be written (Numba's own locators, which would write into the
    package, are never tried)."""
    _UserCacheLocator.path, _UserCacheLocator.stamp = path, stamp
    try:
        return _UserFunctionCache(py_func)
    except RuntimeError:  # "no locator available": the folder is not writable
        return None
