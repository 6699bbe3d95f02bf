"""A PyTorch dispatch mode that carries out every floating operation in float64.

This is the PyTorch half of the ``"fp64"`` oracle (Dual-Delta paper, section 3.2.2: the oracle's
own error must be negligible next to the implementations'). A reference written for float16 --
with explicit ``.half()`` / ``.float()`` casts, ``dtype=`` arguments, or fp16 buffers -- is
re-run with every operation in float64, its internal down-casts included.

:class:`Float64Mode` is a ``TorchDispatchMode``: it sees each ATen operation after autograd and
the composite decompositions (``Tensor.half()`` and ``Tensor.to(dtype)`` arrive as
``aten._to_copy``), only inside its ``with`` block and only on the entering thread. It patches
nothing global except the default dtype, which it sets to float64 on entry and restores on exit.
Its rules, applied to every operation:

1. a floating tensor argument of lower precision is converted to float64 (a complex one to
   complex128) before the operation runs;
2. every dtype argument naming a floating dtype becomes float64 (complex: complex128), which
   keeps ``_to_copy`` (``.half()``, ``.to(torch.bfloat16)``), factories (``torch.zeros(...,
   dtype=torch.float16)``) and reductions (``x.sum(dtype=torch.float32)``) in float64;
3. ``half_to_float=True`` (softmax's fused up-cast) is switched off: its input is float64 now;
4. while the mode is active the default dtype is float64, so ``torch.zeros(n)`` and
   ``torch.tensor(0.1)`` are created in float64.

Refused, with :class:`~pytest_fpcheck.oracle.unsupported.UnsupportedOracleOperation`: writing
into a lower-precision floating tensor created outside the mode (a promoted copy would not be
seen by the caller), and ``Tensor.view(dtype)`` on floating data (a bit-level reinterpretation
has no float64 meaning).

Known limit: a constant built before any operation runs with an explicit low dtype,
``torch.tensor(0.1, dtype=torch.float16)``, is rounded by the constructor; the mode sees it only
afterwards (and promotes the rounded value).

The mode is deliberately small: the general operation-interposition layer of round-off tracking
(``tracking/``) is a separate piece and may later absorb these rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .unsupported import UnsupportedOracleOperation

__all__ = ["Float64Mode", "promote_call", "refuse_lossy"]

_FLOAT_TARGET = torch.float64
_COMPLEX_TARGET = torch.complex128


def _is_low_floating(tensor: torch.Tensor) -> bool:
    if tensor.is_floating_point():
        return tensor.dtype != _FLOAT_TARGET
    return tensor.is_complex() and tensor.dtype != _COMPLEX_TARGET


def _promote_leaf(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.dtype != _FLOAT_TARGET:
            return value.to(_FLOAT_TARGET)
        if value.is_complex() and value.dtype != _COMPLEX_TARGET:
            return value.to(_COMPLEX_TARGET)
        return value
    if isinstance(value, torch.dtype):
        if value.is_floating_point:
            return _FLOAT_TARGET
        if value.is_complex:
            return _COMPLEX_TARGET
    return value


def promote_call(
    func: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``func``'s arguments rewritten by rules 1-3 of the module docstring."""
    new_args = list(tree_map(_promote_leaf, tuple(args)))
    new_kwargs = dict(tree_map(_promote_leaf, dict(kwargs)))
    for index, argument in enumerate(func._schema.arguments):
        if argument.name != "half_to_float":
            continue
        if index < len(new_args) and not argument.kwarg_only:
            new_args[index] = False
        elif argument.name in new_kwargs:
            new_kwargs[argument.name] = False
    return tuple(new_args), new_kwargs


def _argument_value(
    func: torch._ops.OpOverload, index: int, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Any:
    argument = func._schema.arguments[index]
    if not argument.kwarg_only and index < len(args):
        return args[index]
    return kwargs.get(argument.name)


def refuse_lossy(
    func: torch._ops.OpOverload, args: Sequence[Any], kwargs: Mapping[str, Any], oracle: str
) -> None:
    """Raise for the operations the module docstring lists as refused."""
    if func is torch.ops.aten.view.dtype:
        source, target = args[0], args[1]
        if source.is_floating_point() or source.is_complex() or target.is_floating_point:
            raise UnsupportedOracleOperation(
                oracle,
                str(func),
                f"Tensor.view({target}) reinterprets the bits of a {source.dtype} tensor, which "
                "has no meaning once the values are promoted",
                "Pass oracle=<callable> that computes the reference result in high precision",
            )
    for index, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        target = _argument_value(func, index, args, kwargs)
        if isinstance(target, torch.Tensor) and _is_low_floating(target):
            raise UnsupportedOracleOperation(
                oracle,
                str(func),
                f"it writes into a {target.dtype} tensor of shape {tuple(target.shape)} created "
                "outside the oracle, and a promoted copy would not be seen by its owner",
                "Create the buffer inside the reference (e.g. torch.zeros_like(x)), or pass "
                "oracle=<callable>",
            )


class Float64Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Inside ``with Float64Mode():`` every floating PyTorch operation runs in float64 (rules in
    the module docstring)."""

    oracle_name = "fp64"

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._saved_default: list[torch.dtype] = []

    def __enter__(self) -> Float64Mode:
        self._saved_default.append(torch.get_default_dtype())
        torch.set_default_dtype(_FLOAT_TARGET)
        super().__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            super().__exit__(exc_type, exc, traceback)  # type: ignore[no-untyped-call]
        finally:
            torch.set_default_dtype(self._saved_default.pop())

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        refuse_lossy(func, args, kwargs, self.oracle_name)
        new_args, new_kwargs = promote_call(func, args, kwargs)
        return func(*new_args, **new_kwargs)
