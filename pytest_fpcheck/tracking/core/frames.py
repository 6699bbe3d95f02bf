"""The user's source line: the innermost frame outside torch, this package and the standard
library (and triton, pytest, pluggy, numpy), which every report of an operation names."""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

import torch

__all__ = ["describe_location", "outside_user_code", "user_frame"]

#: the package root (pytest_fpcheck/): frames in it are never the user's
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: folders whose files are never the user's, each ending in a separator (``.../torch/`` is
#: not a prefix of ``.../torchvision/``)
_SKIPPED_DIRS = tuple(
    os.path.join(p, "") for p in {_PACKAGE_DIR, os.path.dirname(os.path.abspath(torch.__file__))}
)
_STDLIB_DIR = os.path.join(sysconfig.get_paths()["stdlib"], "")
#: third-party packages, which a Python installed without a virtual environment keeps inside
#: its standard library's folder: they are not the standard library
_SITE_DIRS = tuple(
    os.path.join(p, "")
    for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    if p
)
#: packages whose modules are never the user's: the package itself or a submodule of it
#: (a user's ``numpy_helpers`` or ``triton_ops`` is not numpy's or triton's)
_SKIPPED_PACKAGES = frozenset({"triton", "_pytest", "pluggy", "numpy"})
_SKIPPED_STARTS = ("<", *_SKIPPED_DIRS)


def outside_user_code(filename: str, module: str) -> bool:
    """Whether a frame of this file and module is outside the user's code."""
    if filename.startswith(_SKIPPED_STARTS):
        return True
    if filename.startswith(_STDLIB_DIR) and not filename.startswith(_SITE_DIRS):
        return True
    return module.partition(".")[0] in _SKIPPED_PACKAGES


def describe_location(source: tuple[str, int] | None, module_path: str) -> str:
    """``model.py:12 in MLP.layers.0``: the file's name and line, then the module path, as far
    as each is known ('' when neither is)."""
    parts = []
    if source is not None:
        parts.append(f"{os.path.basename(source[0])}:{source[1]}")
    if module_path:
        parts.append(f"in {module_path}")
    return " ".join(parts)


def user_frame(start: FrameType | None = None) -> tuple[str, int] | None:
    """(file, line) of the innermost frame that belongs to the user's code (from ``start``,
    by default the caller's frame, outward)."""
    frame = start or sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not outside_user_code(filename, frame.f_globals.get("__name__", "")):
            return filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None
