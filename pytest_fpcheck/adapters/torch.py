"""PyTorch specifics. Imported only when a torch tensor is already in hand or tracking starts.

Conversions run with Python dispatch disabled (``torch._C._DisableTorchDispatch``) so that the
package's own dispatch modes, and any other active mode, never see the package's bookkeeping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..errors import InvalidArgument
from ..formats import FORMATS, Format

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "dtype_format",
    "float64_values",
    "internal",
    "is_float",
    "tensor_to_float64",
    "undeclared_writes",
]

_FLOAT_DTYPES: dict[torch.dtype, Format] = {
    getattr(torch, name): fmt for name, fmt in FORMATS.items() if hasattr(torch, name)
}


def internal() -> torch._C._DisableTorchDispatch:
    """A context in which torch operations bypass every Python dispatch mode."""
    return torch._C._DisableTorchDispatch()


def is_float(t: torch.Tensor) -> bool:
    return t.dtype in _FLOAT_DTYPES


def dtype_format(dtype: torch.dtype) -> Format | None:
    """The format of a floating torch dtype, None for any other dtype."""
    return _FLOAT_DTYPES.get(dtype)


def float64_values(t: torch.Tensor, *, copy: bool = False) -> NDArray[np.float64]:
    """``t``'s current values as float64 on the host (``Tensor.to``: exact for every floating
    format); the array shares a float64 host tensor's memory unless ``copy`` (a conversion is a
    copy already: only a tensor ``to`` returns unchanged is copied again). The tensor is
    detached first, so autograd records nothing without a ``no_grad`` block (which costs more
    than the conversion of a small tensor)."""
    with internal():
        detached = t.detach()
        converted = detached.to("cpu", torch.float64)
        values: NDArray[np.float64] = converted.numpy()
    return values.copy() if copy and converted is detached else values


def tensor_to_float64(t: torch.Tensor, *, argument: str, copy: bool = True) -> NDArray[np.float64]:
    """A float64 NumPy copy of ``t`` (detached, on the host), exactly (``copy=False``: a
    float64 host tensor's own memory, for a caller that only reads it)."""
    if t.is_complex():
        raise InvalidArgument(
            argument, t, "a real floating tensor", hint="Complex tensors are not supported."
        )
    if not is_float(t):
        raise InvalidArgument(
            argument,
            t,
            "a floating tensor",
            hint=f"Its dtype is {t.dtype}; compare floating results only.",
        )
    return float64_values(t, copy=copy)


def batch_norm_channels_last(x: torch.Tensor) -> bool:
    """Does ATen's CPU batch norm take its channels-last path (``batch_norm_choose_impl``): a
    contiguous input whose channel stride is 1 (any ``(N, C)`` input), or a channels-last one?
    That path sums a training batch's statistics in the input's format (float32 for float32),
    the other in double."""
    if x.is_contiguous():
        return x.stride(1) == 1
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    return x.dim() in formats and x.is_contiguous(memory_format=formats[x.dim()])


def undeclared_writes(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[torch.Tensor]:
    """The tensors an operation writes although its schema does not say so (no ``Tensor(a!)``):
    ``native_batch_norm`` in training mode updates its running mean and variance in place (its
    schema predates alias annotations; ``_native_batch_norm_legit`` declares the same writes).
    A dispatch mode that trusted the schema would leave them with stale bounds, or would run
    the kernel on copies and never update them."""
    if func._opname != "native_batch_norm" or func.namespace != "aten":
        return []
    names = ("input", "weight", "bias", "running_mean", "running_var", "training")
    values = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
    if not values.get("training"):
        return []
    return [
        t
        for t in (values.get("running_mean"), values.get("running_var"))
        if isinstance(t, torch.Tensor)
    ]
