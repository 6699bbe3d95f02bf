"""The ``"mpmath"`` oracle for PyTorch references: a dispatch mode with mpmath shadow values.

The rule (Dual-Delta paper, section 3.2.2): each ATen operation the reference performs is
evaluated in mpmath at ``dps`` decimal digits. :class:`MpmathMode` extends
:class:`~pytest_fpcheck.oracle.torch_fp64.Float64Mode`: every operation still runs in float64
on ordinary tensors (which keeps shapes, views and control flow working), and beside each
floating tensor the mode keeps its *shadow*, a NumPy object array of ``mpmath.mpf`` computed by
the operation's mpmath rule from the shadows of its inputs. A tensor without a shadow (an input,
a constant, a factory's result) stands for its exact float64 value. The oracle returns the
shadow of the reference's result, rounded to float64.

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
import weakref
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, cast

import mpmath
import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ..errors import InternalError, InvalidArgument, describe_value
from .torch_fp64 import Float64Mode, promote_call, refuse_lossy
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
_MOVEMENT = frozenset(
    {
        aten.view,
        aten._unsafe_view,
        aten.reshape,
        aten.transpose,
        aten.t,
        aten.permute,
        aten.expand,
        aten.squeeze,
        aten.unsqueeze,
        aten.select,
        aten.slice,
        aten.index,
        aten.index_select,
        aten.gather,
        aten.cat,
        aten.stack,
        aten.split,
        aten.split_with_sizes,
        aten.unbind,
        aten.flip,
        aten.roll,
        aten.repeat,
        aten.clone,
        aten.detach,
        aten.alias,
        aten.lift_fresh,
        aten.lift_fresh_copy,
        aten._to_copy,
    }
)
SUPPORTED = ", ".join(sorted(str(packet).removeprefix("aten.") for packet in _COMPUTE))


def _is_inexact(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _exact_values(tensor: torch.Tensor) -> Values:
    """The exact mpmath values of a float64 (or integer) tensor, as an object array."""
    host = tensor.detach().cpu()
    if host.is_floating_point():
        return np.asarray(_TO_MPF(host.to(torch.float64).numpy()), dtype=object)
    return host.numpy().astype(object)


class MpmathMode(Float64Mode):  # type: ignore[no-untyped-call]
    """Float64Mode that also evaluates each supported operation in mpmath (module docstring);
    :meth:`values_of` gives a tensor's mpmath values."""

    oracle_name = _ORACLE

    def __init__(self) -> None:
        super().__init__()
        self._shadows = cast("MutableMapping[torch.Tensor, Values]", WeakIdKeyDictionary())
        self._views = cast(
            "MutableMapping[torch.Tensor, list[weakref.ref[torch.Tensor]]]", WeakIdKeyDictionary()
        )

    def values_of(self, tensor: torch.Tensor) -> Values:
        """The mpmath values of ``tensor``: its shadow, or its exact value if it has none."""
        shadow = self._shadows.get(tensor)
        return shadow if shadow is not None else _exact_values(tensor)

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
        inexact_inputs = [leaf for leaf in tree_flatten((args, kwargs))[0] if _is_inexact(leaf)]
        if not inexact_inputs:
            return super().__torch_dispatch__(func, types, args, kwargs)
        if packet not in _COMPUTE and packet not in _MOVEMENT:
            raise UnsupportedOracleOperation(
                _ORACLE,
                str(func),
                f"it has no mpmath rule (arithmetic supported: {SUPPORTED}; data movement "
                "and floating conversions are exact)",
                "Pass oracle='fp64' or oracle=<callable>",
            )
        if any(t.is_complex() for t in inexact_inputs):
            raise UnsupportedOracleOperation(
                _ORACLE, str(func), "complex values have no mpmath rule here", "Pass oracle='fp64'"
            )
        refuse_lossy(func, args, kwargs, _ORACLE)
        self._refuse_aliased_write(func, args)
        new_args, new_kwargs = promote_call(func, args, kwargs)
        if packet in _COMPUTE:
            shadows = [self._compute(packet, new_args, new_kwargs)]
        else:
            shadows = self._move(func, new_args, new_kwargs)
        result = func(*new_args, **new_kwargs)
        self._record(func, new_args, new_kwargs, result, shadows)
        return result

    def _refuse_aliased_write(self, func: torch._ops.OpOverload, args: Sequence[Any]) -> None:
        if not func._schema.is_mutable or not isinstance(args[0], torch.Tensor):
            return
        target = args[0]
        views = [ref() for ref in self._views.get(target, [])]
        if target._base is not None or any(view is not None for view in views):
            raise UnsupportedOracleOperation(
                _ORACLE,
                str(func),
                "it writes into a tensor that is a view or has a live view, whose mpmath "
                "values would go stale",
                "Write into a fresh tensor (x = x + y, torch.cat, torch.stack) instead",
            )

    def _operand(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self.values_of(value)
        if isinstance(value, float):
            return mpmath.mpf(value)
        return value

    def _compute(self, packet: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
        """The mpmath values of an arithmetic operation, from its operands' values before it
        runs (an in-place operation changes its first operand)."""
        operands = [self._operand(arg) for arg in args]
        options = {key: self._operand(value) for key, value in kwargs.items()}
        return np.asarray(_COMPUTE[packet](operands, options), dtype=object)

    def _move(
        self, func: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[Values]:
        """The mpmath values of each output of a data-movement operation: the operation run on
        tensors of element indices picks the values out of its inputs'."""
        pieces: list[Values] = []
        offset = 0

        def to_indices(value: Any) -> Any:
            nonlocal offset
            if not _is_inexact(value):
                return value
            pieces.append(self.values_of(value).reshape(-1))
            indices = torch.arange(offset, offset + value.numel()).reshape(value.shape)
            offset += value.numel()
            return indices

        index_args = tree_map(to_indices, tuple(args))
        index_kwargs = tree_map(to_indices, dict(kwargs))
        flat = np.concatenate(pieces)
        index_results = tree_flatten(func(*index_args, **index_kwargs))[0]
        return [
            np.asarray(flat[indices.to(torch.int64).numpy()], dtype=object)
            for indices in index_results
        ]

    def _record(
        self,
        func: torch._ops.OpOverload,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        result: Any,
        shadows: list[Values],
    ) -> None:
        """Keep each output's shadow, and note outputs that share storage with an input."""
        for tensor, values in zip(tree_flatten(result)[0], shadows, strict=True):
            if not _is_inexact(tensor):
                raise UnsupportedOracleOperation(
                    _ORACLE,
                    str(func),
                    f"it converts floating values to {tensor.dtype}, which has no mpmath rule",
                    "Pass oracle='fp64' or oracle=<callable>",
                )
            if values.shape != tuple(tensor.shape):
                raise InternalError(
                    f"the mpmath rule of {func} gave shape {values.shape}, the operation "
                    f"{tuple(tensor.shape)}",
                    record={"func": str(func), "args": args, "kwargs": kwargs},
                )
            self._shadows[tensor] = values
            storage = tensor.untyped_storage().data_ptr()
            for source in tree_flatten((args, kwargs))[0]:
                if source is tensor or not _is_inexact(source):
                    continue
                if source.untyped_storage().data_ptr() == storage:
                    self._views.setdefault(source, []).append(weakref.ref(tensor))
                    self._views.setdefault(tensor, []).append(weakref.ref(source))


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
