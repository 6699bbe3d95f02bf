"""Promotion of a call's arguments to float64, shared by the fp64 and mpmath oracles.

The rule (Dual-Delta paper, section 3.2.2, "precision separation"): every floating input of the
reference is carried to float64 before the reference runs, exactly (every format the package
knows is a subset of float64). NumPy arrays and scalars of float16, float32 and the ml_dtypes
formats (bfloat16, float8_e4m3fn, float8_e5m2) become float64; PyTorch floating tensors become
float64 and complex tensors complex128. Python floats are float64 already. Tuples, lists and
dicts are promoted element by element; everything else (ints, strings, integer arrays) passes
unchanged.

Deciding whether a value is a PyTorch tensor looks in ``sys.modules`` and never imports torch:
the check is free (STYLE.md, principle 1).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..formats import FORMATS

__all__ = ["contains_torch_tensor", "is_floating_numpy", "is_torch_tensor", "promote_arguments"]


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a ``torch.Tensor``; False without importing torch when torch was
    never imported (no tensor can exist then)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def contains_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a tensor or a tuple / list / dict holding one, at any depth."""
    if is_torch_tensor(value):
        return True
    if isinstance(value, (tuple, list)):
        return any(contains_torch_tensor(item) for item in value)
    if isinstance(value, dict):
        return any(contains_torch_tensor(item) for item in value.values())
    return False


def is_floating_numpy(value: Any) -> bool:
    """Whether ``value`` is a NumPy array or scalar of a floating format (ml_dtypes included)."""
    if not isinstance(value, (np.ndarray, np.generic)):
        return False
    return value.dtype.kind == "f" or value.dtype.name in FORMATS


def promote_arguments(value: Any) -> Any:
    """``value`` with every floating NumPy array / scalar and PyTorch tensor carried to float64
    (complex tensors to complex128), recursing into tuples, lists and dicts."""
    if is_floating_numpy(value):
        return value.astype(np.float64)
    if is_torch_tensor(value):
        if value.is_floating_point():
            return value.to(sys.modules["torch"].float64)
        if value.is_complex():
            return value.to(sys.modules["torch"].complex128)
        return value
    if isinstance(value, tuple):
        return tuple(promote_arguments(item) for item in value)
    if isinstance(value, list):
        return [promote_arguments(item) for item in value]
    if isinstance(value, dict):
        return {key: promote_arguments(item) for key, item in value.items()}
    return value
