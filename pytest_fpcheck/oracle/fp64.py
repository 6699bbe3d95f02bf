"""The ``"fp64"`` oracle: the reference re-run in float64 (Dual-Delta paper, section 3.2.2).

The rule: every floating input is promoted to float64 (:mod:`.promote`) and the reference is
called on the promoted inputs.

* PyTorch code runs inside :class:`~pytest_fpcheck.oracle.torch_fp64.Float64Mode`, which keeps
  every operation in float64, the reference's own down-casts (``.half()``, ``dtype=``) included.
  The mode is entered only when torch is already imported (when neither the inputs nor the
  reference use torch, it is not): the check is free.
* NumPy offers no hook on a dtype change inside a function, so NumPy code runs as written on
  float64 inputs. A NumPy reference that follows its inputs' dtype is evaluated in float64; one
  that casts explicitly (``x.astype(np.float16)``) cannot be, and when such a cast shows in the
  result's dtype the oracle refuses the reference instead of returning a low-precision
  "oracle". A cast that is undone before the result is returned cannot be detected; write such
  references with PyTorch or pass ``oracle=<callable>``.

Whatever the backend, the oracle's result must be float64 (complex128): anything else raises
:class:`~pytest_fpcheck.errors.InvalidArgument` naming the reference and the dtype it returned.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .promote import is_floating_numpy, is_torch_tensor, promote_arguments

__all__ = ["fp64_oracle"]

_HIGH_DTYPES = ("float64", "complex128", "torch.float64", "torch.complex128")


def _low_precision_leaf(value: Any) -> str | None:
    """The dtype of the first floating or complex leaf of ``value`` that is not float64 /
    complex128, or None."""
    if is_torch_tensor(value):
        inexact = value.is_floating_point() or value.is_complex()
    elif isinstance(value, (np.ndarray, np.generic)):
        inexact = is_floating_numpy(value) or value.dtype.kind == "c"
    elif isinstance(value, (tuple, list)):
        found = (_low_precision_leaf(item) for item in value)
        return next((name for name in found if name is not None), None)
    else:
        return None
    name = str(value.dtype)
    return name if inexact and name not in _HIGH_DTYPES else None


def fp64_oracle(reference: Callable[..., Any]) -> Callable[..., Any]:
    """The float64 re-run of ``reference``: ``oracle(*args)`` promotes every floating argument to
    float64 and calls ``reference`` on them, inside :class:`Float64Mode` when torch is in use
    (rules in the module docstring). The oracle pickles wherever ``reference`` does, so trials
    can carry it to a process pool."""
    return _Float64Oracle(reference)


class _Float64Oracle:
    """:func:`fp64_oracle`'s callable: an instance, not a closure, so that it pickles."""

    def __init__(self, reference: Callable[..., Any]) -> None:
        self.reference = reference
        self.__name__ = self.__qualname__ = f"fp64({getattr(reference, '__name__', 'reference')})"

    def __call__(self, *args: Any) -> Any:
        reference = self.reference
        promoted = promote_arguments(args)
        if "torch" in sys.modules:
            from .torch_fp64 import Float64Mode

            with Float64Mode():
                result = reference(*promoted)
        else:
            result = reference(*promoted)
        low = _low_precision_leaf(result)
        if low is not None:
            raise InvalidArgument(
                "reference",
                reference,
                "a function that computes in its inputs' precision: called by the fp64 oracle "
                f"on float64 inputs it returned {low}, so it casts internally",
                hint=(
                    "NumPy gives no hook to undo a cast inside a function: use a PyTorch "
                    "reference (the fp64 oracle intercepts its casts) or pass oracle=<callable> "
                    "computing the result in float64."
                ),
            )
        return result
