"""The operations a stochastic run computes by their kernels' formulas, re-entered (a registry).

Rule: an operation named here runs, in a stochastic run (:mod:`.mode`, :mod:`.batched`), as the
formula its ATen CPU kernel evaluates, in torch operations that the mode rounds at random one
by one, instead of being computed in a wider format and rounded once: where a kernel's
intermediate values are far larger than its result (a normalisation's output near 0, its
gradient's ``b * x + c``), their roundings are its error (:mod:`.normalisation`,
:mod:`.normalisation_backward`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .normalisation import _WIDE, _batch_norm, _group_norm, _layer_norm
from .normalisation_backward import layer_norm_backward

__all__ = ["SUBSTITUTES", "substitute"]


Substitute = Callable[
    [torch._ops.OpOverload, tuple[Any, ...], dict[str, Any]], Callable[[], Any] | None
]

#: functional packet name -> the substitute's maker
SUBSTITUTES: dict[str, Substitute] = {
    "aten.native_layer_norm": _layer_norm,
    "aten.native_layer_norm_backward": layer_norm_backward,
    "aten.native_group_norm": _group_norm,
    "aten.native_batch_norm": _batch_norm,
    "aten._native_batch_norm_legit": _batch_norm,
    "aten._native_batch_norm_legit_no_training": _batch_norm,
}


def substitute(
    func: torch._ops.OpOverload, functional: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[], Any] | None:
    """The kernel's formula for this call, to run with the mode re-entered (None: the call
    takes the mode's general rule). Only floating inputs on which the formula is defined:
    anything else (an empty input, a complex one) takes the general rule, which refuses or
    runs it."""
    maker = SUBSTITUTES.get(functional)
    if maker is None or func._overloadname.endswith("out"):  # out= overloads: the general rule
        return None
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return None
    if functional in _WIDE_OPERANDS_ONLY and any(
        isinstance(t, torch.Tensor) and t.dtype not in _WIDE for t in (*args, *kwargs.values())
    ):
        return None
    return maker(func, args, kwargs)


#: substitutes for float32 and float64 operands only: ATen's CPU layer-norm backward on
#: half-precision operands rounds inside far more than its float32 formula (measured: a
#: bfloat16 weight's gradient 180 units of bfloat16 from the same formula computed exactly
#: with the kernel's own saved statistics, 15 with float32 parameters; its partial sums look
#: bfloat16), a form not established here: those keep the general rule (docs/performance.md,
#: "Normalisations")
_WIDE_OPERANDS_ONLY = frozenset({"aten.native_layer_norm_backward"})
