"""Calls of the matmul under probe: a row of ``A`` and a column of ``B`` placed in matrices of
:data:`~.features.PROBE_SHAPE` (other entries zero), element [0, 0] read back, the calls counted
against :data:`~.features.MAX_CALLS`; and the result format, read from the results or checked
against ``out_dtype`` (FTTN, paper 004 section 5, probes one output element the same way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidArgument
from ...formats import Format, format_of, numpy_dtype
from ..order.inputs import to_float
from .features import MAX_CALLS, PROBE_SHAPE

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

__all__ = ["Budget", "Caller", "result_format"]

_OUT_FORMATS = ("float32", "float16", "bfloat16")


class Budget(Exception):
    """The probe reached MAX_CALLS calls."""


class Caller:
    """Calls ``matmul`` on a probe row of ``A`` and column of ``B`` (other entries zero), counts
    the calls, and reads element [0, 0]."""

    def __init__(self, matmul: Callable[[Any, Any], Any], in_fmt: Format) -> None:
        self.matmul = matmul
        self.in_fmt = in_fmt
        self.dtype = numpy_dtype(in_fmt)
        self.calls = 0
        self.last: Any = None

    def raw(self, a_row: NDArray[np.float64], b_col: NDArray[np.float64]) -> Any:
        if self.calls >= MAX_CALLS:
            raise Budget
        m, k, n = PROBE_SHAPE
        a = np.zeros((m, k), dtype=self.dtype)
        b = np.zeros((k, n), dtype=self.dtype)
        a[0] = a_row.astype(self.dtype)
        b[:, 0] = b_col.astype(self.dtype)
        self.calls += 1
        with np.errstate(all="ignore"):  # probes overflow narrow formats on purpose
            result = self.matmul(a, b)
        self.last = result
        return result

    def __call__(self, a_row: NDArray[np.float64], b_col: NDArray[np.float64]) -> float:
        result = self.raw(a_row, b_col)
        try:
            element = result[0][0]
        except (TypeError, IndexError, KeyError):
            raise InvalidArgument(
                "matmul", self.matmul, "a callable returning the (16, 16) product matrix"
            ) from None
        return to_float(element, what="matmul(a, b)[0][0]")


def result_format(caller: Caller, out_dtype: Any) -> Format:
    """The format of ``matmul``'s results: ``out_dtype`` if given (and consistent with them),
    else read from a result (one call on zeros)."""
    k = PROBE_SHAPE[1]
    caller(np.zeros(k), np.zeros(k))
    result = caller.last
    shape = tuple(getattr(result, "shape", ()))
    if shape and shape != (PROBE_SHAPE[0], PROBE_SHAPE[2]):
        raise InvalidArgument(
            "matmul", caller.matmul, f"a callable returning a (16, 16) matrix, got shape {shape}"
        )
    found: Format | None = None
    if hasattr(result, "dtype"):
        try:
            found = format_of(result, argument="matmul")
        except InvalidArgument:
            found = None
    if out_dtype is not None:
        out = format_of(out_dtype, argument="out_dtype")
        if out.name not in _OUT_FORMATS:
            raise InvalidArgument(
                "out_dtype", out_dtype, "None, 'float32', 'float16' or 'bfloat16'"
            )
        if found is not None and found.name != out.name:
            raise InvalidArgument(
                "out_dtype", out_dtype, f"the format of matmul's results ({found.name}) or None"
            )
        return out
    if found is None or found.name not in _OUT_FORMATS:
        raise InvalidArgument(
            "out_dtype",
            out_dtype,
            "the format of matmul's results ('float32', 'float16' or 'bfloat16'); it cannot be "
            f"read from a result of type {type(result).__name__}"
            + (f" and dtype {result.dtype}" if hasattr(result, "dtype") else ""),
        )
    return found
