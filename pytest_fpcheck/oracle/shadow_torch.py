"""A PyTorch dispatch mode that keeps high-precision shadow values beside float64 tensors.

The machinery shared by the mpmath and Arb oracles for PyTorch references (Dual-Delta paper,
section 3.2.2: the oracle evaluates the reference operation by operation in high precision).
:class:`ShadowMode` extends :class:`~pytest_fpcheck.oracle.torch_fp64.Float64Mode`: every
operation still runs in float64 on ordinary tensors (which keeps shapes, views and control flow
working), and beside each floating tensor the mode keeps its *shadow*, a NumPy object array of
high-precision numbers computed by the operation's rule from the shadows of its inputs. A tensor
without a shadow (an input, a constant, a factory's result) stands for its exact float64 value.

A subclass names its oracle, its arithmetic rules (one per ATen overload packet) and how a
tensor's exact values and a Python float become its numbers. The data-movement operations are
common: view, reshape, transpose, t, permute, expand, squeeze, unsqueeze, select, slice, index,
index_select, gather, cat, stack, split, unbind, flip, roll, repeat, clone, detach, alias, and
floating dtype conversions (``_to_copy``, which keep the values), plus what a subclass adds.
Their shadows are found by running the same operation on a tensor of element indices.

Anything else that takes a floating tensor raises
:class:`~pytest_fpcheck.oracle.unsupported.UnsupportedOracleOperation` naming the ATen
operation. An in-place operation on a view, or on a tensor with a live view, is refused too:
shadows are kept per tensor, so a write through one alias would leave the other's shadow stale.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, ClassVar, cast

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ..errors import InternalError
from .torch_fp64 import Float64Mode, promote_call, refuse_lossy
from .unsupported import UnsupportedOracleOperation

__all__ = ["MOVEMENT", "Rule", "ShadowMode", "is_inexact"]

aten = torch.ops.aten

Values = Any  # a NumPy object array of high-precision numbers (Python ints for integer tensors)
Rule = Callable[[Sequence[Any], Mapping[str, Any]], Any]

MOVEMENT = frozenset(
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


# movement that returns its first argument's values in the same order and shape
_SAME_VALUES = frozenset(
    {
        aten.clone,
        aten.detach,
        aten.alias,
        aten.lift_fresh,
        aten.lift_fresh_copy,
        aten._to_copy,
    }
)


def is_inexact(value: Any) -> bool:
    """Whether ``value`` is a floating or complex tensor."""
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


class ShadowMode(Float64Mode):  # type: ignore[no-untyped-call]
    """Float64Mode that also evaluates each supported operation in the subclass's arithmetic
    (module docstring); :meth:`values_of` gives a tensor's high-precision values."""

    rules: ClassVar[Mapping[Any, Rule]]
    movement: ClassVar[frozenset[Any]] = MOVEMENT
    supported: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self._shadows = cast("MutableMapping[torch.Tensor, Values]", WeakIdKeyDictionary())
        self._views = cast(
            "MutableMapping[torch.Tensor, list[weakref.ref[torch.Tensor]]]", WeakIdKeyDictionary()
        )

    def exact_values(self, tensor: torch.Tensor) -> Values:
        """The exact high-precision values of a float64 (or integer) tensor."""
        raise NotImplementedError

    def scalar(self, value: float) -> Any:
        """A Python float operand as a high-precision number, exactly."""
        raise NotImplementedError

    def check(self, func: torch._ops.OpOverload, operands: Sequence[Any], values: Values) -> None:
        """Called with each arithmetic result; the base accepts every result."""

    def values_of(self, tensor: torch.Tensor) -> Values:
        """The high-precision values of ``tensor``: its shadow, or its exact value if it has
        none."""
        shadow = self._shadows.get(tensor)
        return shadow if shadow is not None else self.exact_values(tensor)

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
        inexact_inputs = [leaf for leaf in tree_flatten((args, kwargs))[0] if is_inexact(leaf)]
        if not inexact_inputs:
            return super().__torch_dispatch__(func, types, args, kwargs)
        if packet not in self.rules and packet not in self.movement:
            raise UnsupportedOracleOperation(
                self.oracle_name,
                str(func),
                f"it has no {self.oracle_name} rule (arithmetic supported: {self.supported}; "
                "data movement and floating conversions are exact)",
                "Pass oracle='fp64' or oracle=<callable>",
            )
        if any(t.is_complex() for t in inexact_inputs):
            raise UnsupportedOracleOperation(
                self.oracle_name,
                str(func),
                f"complex values have no {self.oracle_name} rule here",
                "Pass oracle='fp64'",
            )
        refuse_lossy(func, args, kwargs, self.oracle_name)
        self._refuse_aliased_write(func, args)
        new_args, new_kwargs = promote_call(func, args, kwargs)
        if packet in self.rules:
            shadows = self._compute(func, new_args, new_kwargs)
        elif packet in _SAME_VALUES and isinstance(new_args[0], torch.Tensor):
            shadows = [self.values_of(new_args[0])]  # shadows are never written in place
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
                self.oracle_name,
                str(func),
                f"it writes into a tensor that is a view or has a live view, whose "
                f"{self.oracle_name} values would go stale",
                "Write into a fresh tensor (x = x + y, torch.cat, torch.stack) instead",
            )

    def _operand(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self.values_of(value)
        if isinstance(value, float):
            return self.scalar(value)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(self._operand(v) for v in value)
        return value

    def _compute(
        self, func: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[Values]:
        """The high-precision values of each output of an arithmetic operation, from its
        operands' values before it runs (an in-place operation changes its first operand)."""
        operands = [self._operand(arg) for arg in args]
        options = {key: self._operand(value) for key, value in kwargs.items()}
        produced = self.rules[func.overloadpacket](operands, options)
        outputs = list(produced) if isinstance(produced, tuple) else [produced]
        values = [np.asarray(output, dtype=object) for output in outputs]
        for output in values:
            self.check(func, [*operands, *options.values()], output)
        return values

    def _move(
        self, func: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[Values]:
        """The high-precision values of each output of a data-movement operation: the
        operation run on tensors of element indices picks the values out of its inputs'."""
        pieces: list[Values] = []
        offset = 0

        def to_indices(value: Any) -> Any:
            nonlocal offset
            if not is_inexact(value):
                return value
            pieces.append(np.asarray(self.values_of(value), dtype=object).reshape(-1))
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
            if not is_inexact(tensor):
                raise UnsupportedOracleOperation(
                    self.oracle_name,
                    str(func),
                    f"it converts floating values to {tensor.dtype}, which has no "
                    f"{self.oracle_name} rule",
                    "Pass oracle='fp64' or oracle=<callable>",
                )
            if values.shape != tuple(tensor.shape):
                raise InternalError(
                    f"the {self.oracle_name} rule of {func} gave shape {values.shape}, the "
                    f"operation {tuple(tensor.shape)}",
                    record={"func": str(func), "args": args, "kwargs": kwargs},
                )
            self._shadows[tensor] = values
            storage = tensor.untyped_storage().data_ptr()
            for source in tree_flatten((args, kwargs))[0]:
                if source is tensor or not is_inexact(source):
                    continue
                if source.untyped_storage().data_ptr() == storage:
                    self._views.setdefault(source, []).append(weakref.ref(tensor))
                    self._views.setdefault(tensor, []).append(weakref.ref(source))
