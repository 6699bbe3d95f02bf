"""The user's source line: the innermost frame outside torch, this package and the standard
library (and triton, pytest, pluggy, numpy), which every report of an operation names."""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

import torch

__all__ = ["describe_location", "user_frame"]

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


def user_frame(start: FrameType | None = None) -> tuple[str, int] | None:
    """(file, line) of the innermost frame that belongs to the user's code (from ``start``,
    by default the caller's frame, outward)."""
    frame = start or sys._getframe(1)
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
