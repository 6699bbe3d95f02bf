"""Random rounding of an interpreted kernel's results, for a subscribed
:class:`~..core.observe.OperationRounder` (a stochastic-arithmetic run, CESTAC's random
rounding; Monte Carlo arithmetic as in Verificarlo, GPU-FPX/FTTN paper section 7).

Each builder operation that rounds (:data:`ROUNDED`: arithmetic, fma, the library functions,
narrowing casts, integer-to-float conversions, ``tl.dot``) and ``tl.sum`` is computed as the
interpreter computes it, then once more in float64 on the float64 values of its operands (the
builder's own method on float64 handles, so the operation is the interpreter's); the rounder
turns that wide value into the result (a random rounding onto the result's format) and the
kernel goes on with it. Exact operations (moves, comparisons, selections, ``min``/``max``,
``abs``, negation, ``floor``/``ceil``, widening casts) keep the interpreter's result, and so do
results in a format without one here (the AMD float8 variants). ``tl.cumsum`` and
``tl.cumprod`` (which the interpreter computes with NumPy, outside the builder) are rounded as
sequential scans (:func:`round_scan`: each prefix computed in float64, with the accumulated
errors of the additions before it and its own random rounding). A ``tl.reduce`` or
``tl.associative_scan`` with a combine function of the user's is rounded one operation per
combine call: the interpreter runs the function on scalars through the builder, so each addition
of such a scan is a stochastic rounding. ``tl.max``, ``tl.min`` and ``tl.argmax``/``argmin``
are exact.

The interpreter computes bfloat16 arithmetic on the bit patterns (triton 3.9), a result that
is no rounding of the exact one; the float64 value here is computed from the decoded operands,
so a randomly rounded run computes what the kernel means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import UnsupportedOperation
from ..core.observe import OperationRounder
from . import handles as h

__all__ = ["ROUNDED", "round_constant", "round_result", "round_scan", "round_sum"]

#: builder operations (without ``create_``) whose floating result is a rounding
ROUNDED = frozenset(
    {
        *("fadd", "fsub", "fmul", "fdiv", "precise_divf", "approx_divf", "fma"),
        *("exp", "exp2", "log", "log2", "erf", "sqrt", "precise_sqrt", "rsqrt", "sin", "cos"),
        *("fp_trunc", "fp_to_fp", "si_to_fp", "ui_to_fp", "dot"),
    }
)
_CONVERSIONS = frozenset({"fp_trunc", "fp_to_fp", "si_to_fp", "ui_to_fp"})
_STORAGE = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


def _decoded(handle: Any) -> np.ndarray:
    """The float64 values of an interpreter handle (integers converted)."""
    if h.is_floating(handle):
        return h.decode(np.asarray(handle.data), h.format_of_type(handle.dtype))
    return np.asarray(handle.data, dtype=np.float64)


def _encode(values: np.ndarray, format_name: str, like: np.ndarray) -> np.ndarray:
    """``values`` (float64, on the format's grid) as the interpreter stores that format, in
    ``like``'s shape: NumPy floats, bfloat16 and float8 as their bit patterns."""
    storage = _STORAGE.get(format_name)
    if storage is not None:
        encoded = values.astype(storage)
    elif format_name == "bfloat16":
        bits = values.astype(np.float32).view(np.uint32) >> np.uint32(16)
        encoded = bits.astype(np.uint16)
    else:
        import ml_dtypes

        encoded = values.astype(getattr(ml_dtypes, format_name)).view(np.uint8)
    return np.reshape(encoded, np.shape(like))


def _format_name(handle: Any) -> str | None:
    """The format of a floating handle, None for a type without one here."""
    try:
        return h.format_of_type(handle.dtype).name
    except UnsupportedOperation:
        return None


def round_result(
    rounder: OperationRounder,
    kernel: str,
    name: str,
    original: Callable[..., Any],
    args: tuple[Any, ...],
    keywords: dict[str, Any],
    result: Any,
) -> Any:
    """``result`` of builder operation ``name`` (computed by ``original(*args, **keywords)``)
    with its data replaced by the rounder's random rounding (see the module docstring)."""
    if name not in ROUNDED or not hasattr(result, "attr") or not h.is_floating(result):
        return result
    format_name = _format_name(result)
    if format_name is None:
        return result
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    handles = [a for a in args if hasattr(a, "attr") and hasattr(a, "data")]
    operands = tuple(_decoded(a) for a in handles)
    if name == "dot":
        a, b, d = operands[:3]
        wide = np.matmul(a, b) + d
    elif name in _CONVERSIONS:
        wide = operands[0]
    else:
        wide_args = [
            TensorHandle(_decoded(a), tl.float64)
            if hasattr(a, "attr") and hasattr(a, "data") and h.is_floating(a)
            else a
            for a in args
        ]
        with np.errstate(all="ignore"):
            wide = np.asarray(original(*wide_args, **keywords).data, dtype=np.float64)
    rounded = rounder.kernel_rounded(
        f"{kernel}.{name}", np.broadcast_to(wide, np.shape(result.data)), format_name, operands
    )
    result.data = _encode(rounded, format_name, result.data)
    return result


def round_constant(
    rounder: OperationRounder, kernel: str, given: np.ndarray, result: Any, format_name: str
) -> Any:
    """A floating constant (``given``, the Python float a kernel argument or literal was)
    that the builder rounded onto ``format_name`` (``result``), rounded at random instead: the
    rounding every use of a scaled kernel shares, which the samples must spread."""
    wide = np.broadcast_to(given, np.shape(result.data))
    rounded = rounder.kernel_rounded(f"{kernel}.constant", wide, format_name, (wide,))
    result.data = _encode(rounded, format_name, result.data)
    return result


def round_sum(
    rounder: OperationRounder, kernel: str, x: Any, output: Any, axis: int | None, keep: bool
) -> None:
    """Replace the data of ``output``, ``tl.sum`` of handle ``x`` along ``axis``, by the
    rounder's random rounding of the float64 sum."""
    format_name = _format_name(output)
    if format_name is None or not h.is_floating(x):
        return
    values = _decoded(x)
    with np.errstate(all="ignore"):
        wide = np.sum(values, axis=axis, keepdims=keep)
    rounded = rounder.kernel_rounded(
        f"{kernel}.sum",
        np.reshape(wide, np.shape(output.data)),
        format_name,
        (values,),
        axis,
    )
    output.data = _encode(rounded, format_name, output.data)


def round_scan(
    rounder: OperationRounder,
    kernel: str,
    kind: str,
    x: Any,
    output: Any,
    axis: int,
    reverse: bool,
) -> None:
    """Replace the data of ``output``, the prefix sums (``kind == "cumsum"``) or products
    (``"cumprod"``) of handle ``x`` along ``axis`` (from the end when ``reverse``), by the
    rounder's random rounding of the sequential scan (computed in float64; the accumulated
    errors are the rounder's, :func:`~pytest_fpcheck.stochastic.accumulation.kernel_scan_noise`)."""
    format_name = _format_name(output)
    if format_name is None or not h.is_floating(x):
        return
    values = _decoded(x)
    if reverse:
        values = np.flip(values, axis=axis)
    with np.errstate(all="ignore"):
        wide = np.cumsum(values, axis=axis) if kind == "cumsum" else np.cumprod(values, axis=axis)
    rounded = rounder.kernel_rounded(f"{kernel}.{kind}", wide, format_name, (values,), axis)
    if reverse:
        rounded = np.flip(rounded, axis=axis)
    output.data = _encode(np.ascontiguousarray(rounded), format_name, output.data)
