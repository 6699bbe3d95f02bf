"""The ``"arb"`` oracle for NumPy references: arrays of Arb balls.

The rule (Dual-Delta paper, section 3.2.2; Johansson 2017 for ball arithmetic): every floating
input becomes a :class:`BallArray`, an object array of ``flint.arb`` point balls holding the
input's values exactly, and the reference runs on it at the working precision that
:func:`~pytest_fpcheck.oracle.arb_balls.adaptive` chose; each operation returns balls that
contain its exact result.

Supported operations (NumPy ufuncs, called directly, as operators or through the NumPy functions
built on them -- ``np.sum``, ``x.mean()``, ``x.max()``, ``@``): every operation of the mpmath
oracle (:mod:`.mpmath_numpy`) --

* add, subtract, multiply, divide, negative, positive, absolute, square, power: NumPy's object
  loops over Arb's operators;
* matmul: one ``arb_mat`` product per matrix pair (:func:`~.arb_balls.matmul`);
* maximum, minimum (also as reductions, ``x.max()``): Arb's ball maximum / minimum;
* the comparisons: decided when the balls are disjoint, otherwise a request for more precision;
* exp, expm1, log, log1p, sqrt, tanh, sin, cos: Arb's functions --

and also tan, arctan, arcsin, arccos, sinh, cosh, arctanh, arcsinh, arccosh, reciprocal.

Any other ufunc raises :class:`UnsupportedOracleOperation`, as does a NumPy function that cannot
work on object arrays. Casts to a floating dtype are ignored (values stay balls); a write of
balls into an ordinary float array (``out=``) is refused, as it would round them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from . import arb_balls as balls
from .promote import is_floating_numpy
from .unsupported import UnsupportedOracleOperation

__all__ = ["BallArray", "to_ball_array"]

_ORACLE = "arb"


def _comparison(op: str) -> Callable[..., Any]:
    return lambda a, b: balls.compare(a, b, op)


_COMPARE: dict[np.ufunc, Callable[..., Any]] = {
    np.equal: _comparison("__eq__"),
    np.not_equal: _comparison("__ne__"),
    np.less: _comparison("__lt__"),
    np.less_equal: _comparison("__le__"),
    np.greater: _comparison("__gt__"),
    np.greater_equal: _comparison("__ge__"),
}
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
)
_CALLS: dict[np.ufunc, Callable[..., Any]] = {
    np.matmul: balls.matmul,
    np.maximum: balls.ball_maximum,
    np.minimum: balls.ball_minimum,
    np.reciprocal: lambda x: 1 / x,
    **_COMPARE,
    **{
        ufunc: balls.UNARY[name]
        for ufunc, name in (
            (np.exp, "exp"),
            (np.expm1, "expm1"),
            (np.log, "log"),
            (np.log1p, "log1p"),
            (np.sqrt, "sqrt"),
            (np.sin, "sin"),
            (np.cos, "cos"),
            (np.tan, "tan"),
            (np.arctan, "atan"),
            (np.arcsin, "asin"),
            (np.arccos, "acos"),
            (np.sinh, "sinh"),
            (np.cosh, "cosh"),
            (np.tanh, "tanh"),
            (np.arctanh, "atanh"),
            (np.arcsinh, "asinh"),
            (np.arccosh, "acosh"),
        )
    },
}
_REDUCTIONS: dict[np.ufunc, Callable[..., Any]] = {
    np.add: lambda x, axis, keepdims: balls.sum_axes(x, axis, keepdims),
    np.maximum: balls.reduce_maximum,
    np.minimum: balls.reduce_minimum,
}
SUPPORTED = ", ".join(sorted(ufunc.__name__ for ufunc in (*_NATIVE, *_CALLS)))


def to_ball_array(value: Any) -> Any:
    """A floating NumPy array / scalar or Python float as a :class:`BallArray` of its exact
    values; anything else unchanged."""
    if isinstance(value, BallArray):
        return value
    if is_floating_numpy(value) or isinstance(value, float):
        exact = np.asarray(value, dtype=np.float64)
        return np.asarray(balls.to_balls(exact), dtype=object).view(BallArray)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, BallArray):
        return value.view(np.ndarray)
    converted = to_ball_array(value)
    return converted.view(np.ndarray) if isinstance(converted, BallArray) else converted


def _wrap(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.view(BallArray) if value.dtype == object else value
    if isinstance(value, (bool, np.bool_)):
        return value
    return np.asarray(value, dtype=object).view(BallArray)


def _masked(kwargs: Mapping[str, Any]) -> bool:
    """Whether a reduction has ``initial=`` or ``where=`` (then NumPy's own loop runs it)."""
    return kwargs.get("initial") is not None or kwargs.get("where", True) is not True


def _refuse(name: str) -> UnsupportedOracleOperation:
    return UnsupportedOracleOperation(
        _ORACLE,
        name,
        f"it has no arb rule (supported: {SUPPORTED})",
        "Pass oracle='mpmath', oracle='fp64' or oracle=<callable>",
    )


class BallArray(np.ndarray):
    """An object array of ``flint.arb`` whose ufuncs are evaluated in ball arithmetic (module
    docstring)."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        for key in ("dtype", "signature", "casting"):
            kwargs.pop(key, None)
        outputs = kwargs.pop("out", None)
        operands = [_plain(x) for x in inputs]
        if method == "__call__" and ufunc in _NATIVE:
            result = ufunc(*operands, **kwargs)
        elif method == "__call__" and ufunc in _CALLS:
            result = _CALLS[ufunc](*operands)
        elif method == "reduce" and ufunc in _REDUCTIONS and not _masked(kwargs):
            axis = kwargs.get("axis", 0)
            result = _REDUCTIONS[ufunc](operands[0], axis, bool(kwargs.get("keepdims", False)))
        elif method in ("reduce", "accumulate") and ufunc in (np.multiply, np.add):
            if method == "reduce" and kwargs.get("initial") is None:
                kwargs["initial"] = 1 if ufunc is np.multiply else 0  # object loops have none
            result = getattr(ufunc, method)(*operands, **kwargs)
        else:
            name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            raise _refuse(name)
        if ufunc not in _COMPARE:
            balls.check_finite(f"numpy.{ufunc.__name__}", operands, np.asarray(result))
        if outputs is None:
            return _wrap(result)
        (target,) = outputs
        if not isinstance(target, BallArray):
            raise UnsupportedOracleOperation(
                _ORACLE,
                f"numpy.{ufunc.__name__}(out=...)",
                f"it would write balls into a {target.dtype} array and round them",
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
        kept = {k: v for k, v in kwargs.items() if k != "dtype" or v is None}
        try:
            result = super().__array_function__(func, types, promoted, kept)
        except TypeError as error:
            raise UnsupportedOracleOperation(
                _ORACLE,
                f"{func.__module__}.{func.__name__}",
                f"it does not work on arrays of balls ({error})",
                "Pass oracle='fp64' or oracle=<callable>",
            ) from error
        return _wrap(result)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        """A cast to a floating (or object) dtype keeps the balls; others are refused."""
        target = np.dtype(dtype)
        if target.kind in "fO" or is_floating_numpy(np.zeros(0, target)):
            return self.copy()
        raise UnsupportedOracleOperation(
            _ORACLE,
            f"ndarray.astype({target})",
            "a conversion of balls to a non-floating dtype has no rule",
            "Pass oracle='fp64' or oracle=<callable>",
        )

    def __getitem__(self, key: Any) -> Any:
        return _wrap(super().__getitem__(key))


def _promote_nested(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_promote_nested(item) for item in value)
    return to_ball_array(value)
