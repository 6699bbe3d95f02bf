"""The ``"mpmath"`` oracle for NumPy references: arrays of mpmath numbers.

The rule (Dual-Delta paper, section 3.2.2: arbitrary precision "eliminates oracle error"): every
floating input becomes an :class:`MpArray`, an object array of ``mpmath.mpf`` holding the input's
values exactly, and the reference runs on it while ``mpmath.mp.dps`` is raised to ``dps``
decimal digits, so each operation is carried out by mpmath, rounded to ``dps`` digits.

Supported operations (NumPy ufuncs, called directly, as operators or through the NumPy
functions built on them -- ``np.sum``, ``x.mean()``, ``x.max()``, ``@``):

* evaluated by NumPy's object loops on mpmath numbers: add, subtract, multiply, divide, negative,
  positive, absolute, square, power, matmul, maximum, minimum, and the comparisons;
* evaluated by mpmath functions: exp, expm1, log, log1p, sqrt, tanh, sin, cos.

Any other ufunc raises :class:`UnsupportedOracleOperation`, as does a NumPy function that cannot
work on object arrays (``np.linalg``, for instance). Casts to a floating dtype
(``x.astype(np.float16)``, ``dtype=`` arguments) are ignored: values stay in mpmath. A write of
mpmath values into an ordinary float array (``out=`` or an augmented assignment to an array
created with a float dtype) is refused, as it would round them. Python floats met along the
way are taken at their exact float64 value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import mpmath
import numpy as np
from numpy.typing import NDArray

from .promote import is_floating_numpy
from .unsupported import UnsupportedOracleOperation

__all__ = ["MpArray", "evaluate", "to_float64", "to_mpmath"]

_ORACLE = "mpmath"
_NATIVE = (
    np.add,
    np.subtract,
    np.multiply,
    np.true_divide,
    np.negative,
    np.positive,
    np.absolute,
    np.square,
    np.power,
    np.matmul,
    np.maximum,
    np.minimum,
    np.equal,
    np.not_equal,
    np.less,
    np.less_equal,
    np.greater,
    np.greater_equal,
)
_MPMATH = {
    np.exp: mpmath.exp,
    np.expm1: mpmath.expm1,
    np.log: mpmath.log,
    np.log1p: mpmath.log1p,
    np.sqrt: mpmath.sqrt,
    np.tanh: mpmath.tanh,
    np.sin: mpmath.sin,
    np.cos: mpmath.cos,
}
_UFUNCS: dict[np.ufunc, np.ufunc] = {
    **{ufunc: ufunc for ufunc in _NATIVE},
    **{ufunc: np.frompyfunc(function, 1, 1) for ufunc, function in _MPMATH.items()},
}
_METHODS = ("__call__", "reduce", "accumulate")
SUPPORTED = ", ".join(sorted(ufunc.__name__ for ufunc in _UFUNCS))
_TO_MPF = np.frompyfunc(mpmath.mpf, 1, 1)
_TO_FLOAT = np.frompyfunc(float, 1, 1)


def to_mpmath(value: Any) -> Any:
    """A floating NumPy array / scalar or Python float as mpmath values (exactly); anything else
    unchanged. Arrays become :class:`MpArray`."""
    if isinstance(value, MpArray):
        return value
    if is_floating_numpy(value) or isinstance(value, float):
        exact = np.asarray(value, dtype=np.float64)
        return np.asarray(_TO_MPF(exact), dtype=object).view(MpArray)
    return value


def _plain(value: Any) -> Any:
    """An operand for NumPy's object loops: MpArray as a plain object array, floats as mpmath."""
    if isinstance(value, MpArray):
        return value.view(np.ndarray)
    converted = to_mpmath(value)
    return converted.view(np.ndarray) if isinstance(converted, MpArray) else converted


def _wrap(value: Any) -> Any:
    """A result back as MpArray (object results, including reduction scalars); booleans and
    other non-object arrays unchanged."""
    if isinstance(value, np.ndarray):
        return value.view(MpArray) if value.dtype == object else value
    if isinstance(value, (mpmath.mpf, int)) and not isinstance(value, bool):
        return np.asarray(value, dtype=object).view(MpArray)
    return value


def _without_float_dtype(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    kept = dict(kwargs)
    for key in ("dtype", "signature"):
        if kept.get(key) is not None:
            kept.pop(key)
    kept.pop("casting", None)
    return kept


class MpArray(np.ndarray):
    """An object array of ``mpmath.mpf`` whose ufuncs are evaluated by mpmath (module
    docstring)."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        implementation = _UFUNCS.get(ufunc)
        if implementation is None or method not in _METHODS:
            name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            raise UnsupportedOracleOperation(
                _ORACLE,
                name,
                f"it has no mpmath rule (supported: {SUPPORTED})",
                "Pass oracle='fp64' or oracle=<callable>",
            )
        kwargs = _without_float_dtype(kwargs)
        outputs = kwargs.pop("out", None)
        result = getattr(implementation, method)(*(_plain(x) for x in inputs), **kwargs)
        if outputs is None:
            return _wrap(result)
        (target,) = outputs
        if not isinstance(target, MpArray):
            raise UnsupportedOracleOperation(
                _ORACLE,
                f"numpy.{ufunc.__name__}(out=...)",
                f"it would write mpmath values into a {target.dtype} array and round them",
                "Create the array from the inputs (np.zeros_like(x)) inside the reference",
            )
        target.view(np.ndarray)[...] = result
        return target

    def __array_function__(
        self,
        func: Callable[..., Any],
        types: Iterable[type],
        args: Iterable[Any],
        kwargs: Mapping[str, Any],
    ) -> Any:
        promoted = tuple(_promote_nested(arg) for arg in args)
        try:
            result = super().__array_function__(func, types, promoted, _without_float_dtype(kwargs))
        except TypeError as error:
            raise UnsupportedOracleOperation(
                _ORACLE,
                f"{func.__module__}.{func.__name__}",
                f"it does not work on arrays of mpmath numbers ({error})",
                "Pass oracle='fp64' or oracle=<callable>",
            ) from error
        return _wrap(result)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        """A cast to a floating (or object) dtype keeps the mpmath values; others are refused."""
        target = np.dtype(dtype)
        if target.kind in "fO" or is_floating_numpy(np.zeros(0, target)):
            return self.copy()
        raise UnsupportedOracleOperation(
            _ORACLE,
            f"ndarray.astype({target})",
            "a conversion of mpmath values to a non-floating dtype has no rule",
            "Pass oracle='fp64' or oracle=<callable>",
        )

    def __getitem__(self, key: Any) -> Any:
        return _wrap(super().__getitem__(key))


def _promote_nested(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_promote_nested(item) for item in value)
    return to_mpmath(value)


def to_float64(value: Any) -> Any:
    """mpmath values (MpArray, object arrays, ``mpf``) rounded to the nearest float64 array;
    anything else unchanged."""
    if isinstance(value, np.ndarray) and value.dtype == object:
        plain = value.view(np.ndarray)
        result: NDArray[np.float64] = np.asarray(_TO_FLOAT(plain), dtype=np.float64)
        return result
    if isinstance(value, mpmath.mpf):
        return np.float64(float(value))
    return value


def evaluate(reference: Callable[..., Any], args: tuple[Any, ...], dps: int) -> Any:
    """``reference(*args)`` on mpmath versions of its floating arguments at ``dps`` digits, the
    result rounded to float64."""
    with mpmath.mp.workdps(dps):
        result = reference(*(_promote_nested(arg) for arg in args))
    return to_float64(result)
