"""What an instrumented interpreter value carries beside its data (RENDER section III-B).

Triton's interpreter represents every value as a ``TensorHandle`` (a NumPy array, a Triton type
and an ``attr`` dict). Instrumentation keeps its facts in that dict, so they live and die with
the value and need no side table:

* a floating value's enclosure: float64 arrays ``lo``/``hi`` of the data's shape. A floating
  handle without them is exact (a constant, or loaded from memory tracking never wrote);
* a boolean from a floating comparison: the lanes where the intervals did not decide it
  (``where`` takes the hull of both branches there; using such a mask as a load/store mask or
  for control flow raises);
* an integer that depends on rounding (a conversion of an interval that straddles an integer,
  an undecided ``argmax``): *tainted*. Using a tainted integer as an address or converting it
  back to floating point raises, because the bound could no longer cover the other outcomes.

Formats: Triton's ``fp64``, ``fp32``, ``fp16``, ``bf16``, ``fp8e4nv`` (float8_e4m3fn) and
``fp8e5`` (float8_e5m2). The interpreter stores bfloat16 and float8 data as raw bits; values are
decoded here. The AMD float8 variants (``fp8e4b8``, ``fp8e5b16``) and ``fp8e4b15`` have no
format in :mod:`pytest_fpcheck.formats` and raise when a rule needs them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import UnsupportedOperation
from ...formats import FORMATS, Format
from ...interval.core import Interval

__all__ = [
    "decode",
    "element_type",
    "format_of_type",
    "interval_of",
    "is_floating",
    "outcome",
    "set_interval",
    "set_outcome",
    "set_taint",
    "set_undecided",
    "tainted",
    "undecided",
]

_LO, _HI = "fpcheck.lo", "fpcheck.hi"
_UNDECIDED, _TAINT = "fpcheck.undecided", "fpcheck.taint"
_OUTCOME = "fpcheck.outcome"

_FORMAT_NAMES = {
    "fp64": "float64",
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8e4nv": "float8_e4m3fn",
    "fp8e5": "float8_e5m2",
}


def element_type(dtype: Any) -> Any:
    """The scalar element type of a Triton type (block and pointer types unwrapped once)."""
    while hasattr(dtype, "element_ty") and not dtype.is_ptr():
        dtype = dtype.element_ty
    return dtype


def is_floating(handle: Any) -> bool:
    """Does the handle hold floating values? Not a comparison's result, whose handle the
    interpreter types with its left operand's floating type around boolean data."""
    dtype = element_type(handle.dtype)
    if dtype.is_ptr() or not dtype.is_floating():
        return False
    return bool(np.asarray(handle.data).dtype != np.bool_)


def format_of_type(dtype: Any, *, where: str | None = None) -> Format:
    """The :class:`Format` of a floating Triton type; UnsupportedOperation for the others."""
    name = _FORMAT_NAMES.get(element_type(dtype).name)
    if name is None:
        raise UnsupportedOperation(
            f"values of Triton type {element_type(dtype).name}",
            where=where,
            how="tracking bounds fp64, fp32, fp16, bf16, fp8e4nv (float8_e4m3fn) and fp8e5 "
            "(float8_e5m2) values; run this kernel outside fp.track()",
        )
    return FORMATS[name]


def decode(data: np.ndarray, fmt: Format) -> np.ndarray:
    """The float64 values of interpreter data in ``fmt`` (bfloat16 and float8 are raw bits)."""
    if fmt.name == "bfloat16" and data.dtype == np.uint16:
        return (data.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if fmt.name.startswith("float8") and data.dtype == np.uint8:
        import ml_dtypes

        decoded: np.ndarray = data.view(getattr(ml_dtypes, fmt.name)).astype(np.float64)
        return decoded
    return np.asarray(data, dtype=np.float64)


def interval_of(handle: Any, fmt: Format) -> Interval:
    """The enclosure of a floating handle (its exact value when it carries none)."""
    lo = handle.attr.get(_LO)
    if lo is not None:
        return Interval(lo, handle.attr[_HI])
    return Interval.point(decode(np.asarray(handle.data), fmt))


def set_interval(handle: Any, interval: Interval) -> Any:
    """Attach ``interval`` to ``handle`` (nothing for a point: the data is the value)."""
    if interval.is_point:
        handle.attr.pop(_LO, None)
        handle.attr.pop(_HI, None)
    else:
        shape = np.shape(handle.data)
        handle.attr[_LO] = np.broadcast_to(interval.lo, shape)
        handle.attr[_HI] = np.broadcast_to(interval.hi, shape)
    return handle


def undecided(handle: Any) -> np.ndarray | None:
    """Lanes of a boolean handle that a floating comparison left undecided (None: all decided)."""
    mask: np.ndarray | None = handle.attr.get(_UNDECIDED)
    return mask


def set_undecided(handle: Any, mask: np.ndarray | None) -> Any:
    if mask is not None and mask.any():
        handle.attr[_UNDECIDED] = np.broadcast_to(mask, np.shape(handle.data))
    return handle


def outcome(handle: Any) -> np.ndarray:
    """A boolean handle's lanes as a floating comparison of the decoded values decides them
    (Triton 3.9's interpreter compares bfloat16 bit patterns), else its data."""
    result: np.ndarray = handle.attr.get(_OUTCOME, np.asarray(handle.data, bool))
    return result


def set_outcome(handle: Any, lanes: np.ndarray) -> Any:
    if not np.array_equal(lanes, np.asarray(handle.data, bool)):
        handle.attr[_OUTCOME] = np.broadcast_to(lanes, np.shape(handle.data))
    return handle


def tainted(handle: Any) -> bool:
    """Whether an integer handle's value depends on how earlier operations rounded."""
    return bool(handle.attr.get(_TAINT, False))


def set_taint(handle: Any, taint: bool) -> Any:
    if taint:
        handle.attr[_TAINT] = True
    return handle
