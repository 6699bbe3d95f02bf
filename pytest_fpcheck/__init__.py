"""pytest-fpcheck: honest floating-point assertions for numerical code.

Everything public is importable from here (``import pytest_fpcheck as fp``). Names resolve lazily
(PEP 562): importing this package imports neither NumPy nor any heavy backend; each submodule loads
on first use of one of its names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    DualDeltaFailure,
    FPCheckError,
    InternalError,
    InvalidArgument,
    RoundoffMismatch,
    StaleBoundsError,
    UnsupportedOperation,
)

__version__ = "0.1.0"

# name -> (module, attribute); attribute None means the module itself.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "formats": ("pytest_fpcheck.formats", None),
    "Format": ("pytest_fpcheck.formats", "Format"),
    "format_of": ("pytest_fpcheck.formats", "format_of"),
}

__all__ = [
    "DualDeltaFailure",
    "FPCheckError",
    "Format",
    "InternalError",
    "InvalidArgument",
    "RoundoffMismatch",
    "StaleBoundsError",
    "UnsupportedOperation",
    "__version__",
    "format_of",
    "formats",
]

if TYPE_CHECKING:
    from . import formats as formats
    from .formats import Format as Format
    from .formats import format_of as format_of


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'pytest_fpcheck' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
