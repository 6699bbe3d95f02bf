"""The ``"mpmath"`` oracle for PyTorch references: a dispatch mode with mpmath shadow values.

The rule (Dual-Delta paper, section 3.2.2): each ATen operation the reference performs is
evaluated in mpmath at ``dps`` decimal digits. :class:`MpmathMode` is a
:class:`~pytest_fpcheck.oracle.shadow_torch.ShadowMode`: every operation still runs in float64
on ordinary tensors, and beside each floating tensor the mode keeps its *shadow*, a NumPy object
array of ``mpmath.mpf`` computed by the operation's mpmath rule from the shadows of its inputs. A
tensor without a shadow (an input, a constant, a factory's result) stands for its exact float64
value. The oracle returns the shadow of the reference's result, rounded to float64.

Supported operations on floating tensors:

* arithmetic, in mpmath: add, sub, rsub, mul, div (true division), neg, abs, pow, exp, log,
  sqrt, tanh, relu, maximum, minimum, mm, bmm, addmm, sum, mean, and the in-place forms add_,
  sub_, mul_, div_, copy_, fill_, zero_ (``acc += x`` works);
* data movement, exact: view, reshape, transpose, t, permute, expand, squeeze, unsqueeze,
  select, slice, index, index_select, gather, cat, stack, split, unbind, flip, roll, repeat,
  clone, detach, alias, and floating dtype conversions (``_to_copy``, which keep the values).
  Their shadows are found by running the same operation on a tensor of element indices.

Anything else that takes a floating tensor (comparisons, ``.item()``, conversions to integers,
other functions) raises :class:`UnsupportedOracleOperation` naming the ATen operation. An
in-place operation on a view, or on a tensor with a live view, is refused too: shadows are kept
per tensor, so a write through one alias would leave the other's shadow stale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mpmath
import numpy as np
import torch

from ..errors import InvalidArgument, describe_value
from .shadow_torch import ShadowMode
from .unsupported import UnsupportedOracleOperation

__all__ = ["MpmathMode", "evaluate"]

_ORACLE = "mpmath"
aten = torch.ops.aten
_TO_MPF = np.frompyfunc(mpmath.mpf, 1, 1)
_TO_FLOAT = np.frompyfunc(float, 1, 1)

Values = Any  # a NumPy object array of mpmath numbers (Python ints for integer tensors)
Rule = Callable[[Sequence[Any], Mapping[str, Any]], Values]


def _unary(function: Callable[[Any], Any]) -> Rule:
    ufunc = np.frompyfunc(function, 1, 1)
    return lambda args, kwargs: ufunc(args[0])


def _reduce_axes(args: Sequence[Any]) -> tuple[int, ...] | None:
    dims = args[1] if len(args) > 1 else None
    return None if dims is None or len(dims) == 0 else tuple(dims)


def _sum(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    keepdim = bool(args[2]) if len(args) > 2 else False
    return np.sum(args[0], axis=_reduce_axes(args), keepdims=keepdim)


def _mean(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    axes = _reduce_axes(args)
    shape = np.shape(args[0])
    count = math.prod(shape) if axes is None else math.prod(shape[a] for a in axes)
    return _sum(args, kwargs) / count


def _true_division(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    if kwargs.get("rounding_mode") is not None:
        raise UnsupportedOracleOperation(
            _ORACLE,
            f"aten.div(rounding_mode={kwargs['rounding_mode']!r})",
            "only true division has an mpmath rule",
            "Pass oracle='fp64' or oracle=<callable>",
        )
    return args[0] / args[1]


def _alpha(kwargs: Mapping[str, Any]) -> Any:
    return kwargs.get("alpha", 1)


_ZERO = mpmath.mpf(0)
_COMPUTE: dict[Any, Rule] = {
    aten.add: lambda a, k: a[0] + _alpha(k) * a[1],
    aten.add_: lambda a, k: a[0] + _alpha(k) * a[1],
    aten.sub: lambda a, k: a[0] - _alpha(k) * a[1],
    aten.sub_: lambda a, k: a[0] - _alpha(k) * a[1],
    aten.rsub: lambda a, k: a[1] - _alpha(k) * a[0],
    aten.mul: lambda a, k: a[0] * a[1],
    aten.mul_: lambda a, k: a[0] * a[1],
    aten.div: _true_division,
    aten.div_: _true_division,
    aten.neg: lambda a, k: -a[0],
    aten.abs: lambda a, k: np.abs(a[0]),
    aten.pow: lambda a, k: a[0] ** a[1],
    aten.exp: _unary(mpmath.exp),
    aten.log: _unary(mpmath.log),
    aten.sqrt: _unary(mpmath.sqrt),
    aten.tanh: _unary(mpmath.tanh),
    aten.relu: lambda a, k: np.maximum(a[0], _ZERO),
    aten.maximum: lambda a, k: np.maximum(a[0], a[1]),
    aten.minimum: lambda a, k: np.minimum(a[0], a[1]),
    aten.mm: lambda a, k: np.matmul(a[0], a[1]),
    aten.bmm: lambda a, k: np.matmul(a[0], a[1]),
    aten.addmm: lambda a, k: k.get("beta", 1) * a[0] + k.get("alpha", 1) * np.matmul(a[1], a[2]),
    aten.sum: _sum,
    aten.mean: _mean,
    aten.copy_: lambda a, k: np.broadcast_to(a[1], np.shape(a[0])).copy(),
    aten.fill_: lambda a, k: np.full(np.shape(a[0]), a[1], dtype=object),
    aten.zero_: lambda a, k: np.full(np.shape(a[0]), _ZERO, dtype=object),
}
SUPPORTED = ", ".join(sorted(str(packet).removeprefix("aten.") for packet in _COMPUTE))


def _exact_values(tensor: torch.Tensor) -> Values:
    """The exact mpmath values of a float64 (or integer) tensor, as an object array."""
    host = tensor.detach().cpu()
    if host.is_floating_point():
        return np.asarray(_TO_MPF(host.to(torch.float64).numpy()), dtype=object)
    return host.numpy().astype(object)


class MpmathMode(ShadowMode):  # type: ignore[no-untyped-call]
    """ShadowMode whose shadows are mpmath numbers (module docstring); :meth:`values_of` gives
    a tensor's mpmath values."""

    oracle_name = _ORACLE
    rules = _COMPUTE
    supported = SUPPORTED

    def exact_values(self, tensor: torch.Tensor) -> Values:
        return _exact_values(tensor)

    def scalar(self, value: float) -> Any:
        return mpmath.mpf(value)


def evaluate(reference: Callable[..., Any], args: tuple[Any, ...], dps: int) -> Any:
    """``reference(*args)`` with every operation evaluated in mpmath at ``dps`` digits; the
    result (a tensor) as its mpmath values rounded to a float64 NumPy array."""
    mode = MpmathMode()
    with mpmath.mp.workdps(dps), mode:
        result = reference(*args)
        if not isinstance(result, torch.Tensor):
            raise InvalidArgument(
                "reference",
                reference,
                "a function returning one tensor: the mpmath oracle returns that tensor's "
                f"mpmath values, and this one returned {describe_value(result)}",
            )
        values = mode.values_of(result)
    return np.asarray(_TO_FLOAT(values), dtype=np.float64)
