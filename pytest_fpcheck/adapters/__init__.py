"""Array adapters: the only place that knows which backend an array belongs to.

``as_float64`` turns what a user passes (a NumPy array of any floating dtype, including
ml_dtypes' bfloat16 and float8; a PyTorch tensor on any device; a Python float or nested list)
into a float64 NumPy array, exactly. Deciding "is this a torch tensor?" looks in ``sys.modules``
and at the type's module first, so it never imports torch: the check is free.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgument
from ..formats import FORMATS, Format, format_of

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["as_float64", "is_torch_tensor", "storage_format"]


def is_torch_tensor(x: Any) -> bool:
    """True for a ``torch.Tensor`` (free: torch must already be imported for one to exist)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def storage_format(x: Any, *, argument: str) -> Format:
    """The floating format ``x`` is stored in; a Python float or list counts as float64."""
    if is_torch_tensor(x) or isinstance(x, (np.ndarray, np.generic)):
        return format_of(x.dtype, argument=argument)
    return FORMATS["float64"]


def as_float64(x: Any, *, argument: str, copy: bool = True) -> NDArray[np.float64]:
    """``x`` as a float64 NumPy array (a copy), exactly; CUDA tensors are copied to the host.
    ``copy=False`` is for a caller that only reads the array: a float64 tensor on the host is
    then read in place.

    Integer, boolean and complex inputs are refused: comparing them with round-off bounds is
    meaningless, and a silent coercion would hide the mistake.
    """
    if is_torch_tensor(x):
        from .torch import tensor_to_float64

        return tensor_to_float64(x, argument=argument, copy=copy)
    if isinstance(x, (bool, np.bool_)):
        raise InvalidArgument(
            argument, x, "a floating array, tensor, float or nested list of floats"
        )
    array = np.asarray(x)
    kind = array.dtype.kind
    if kind == "f" or array.dtype.name in FORMATS:
        return array.astype(np.float64)
    if kind in "iu" and not isinstance(x, (np.ndarray, np.generic)):
        return array.astype(np.float64)  # Python ints (or lists of them) used as numbers
    raise InvalidArgument(
        argument,
        x,
        "a floating array, tensor, float or nested list of floats",
        hint=f"Its dtype is {array.dtype}; compare floating results only.",
    )
