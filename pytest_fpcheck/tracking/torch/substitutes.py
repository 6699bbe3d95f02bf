"""Kernels that ``fp.track()`` runs as a composition of operations it has rules for (the
:data:`SUBSTITUTES` table): the tracker re-enters itself and runs the substitute instead of the
kernel, so that each of its operations is bounded by its rule (or, for attention, runs the
kernel itself and the substitute beside it, :mod:`.attention`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .attention import cuda_attention, flash_attention_for_cpu

__all__ = ["SUBSTITUTES"]


def _mse_loss(prediction: torch.Tensor, target: torch.Tensor, reduction: int = 1) -> torch.Tensor:
    """ATen's CPU ``mse_loss`` kernel: (prediction - target) squared element by element, each step
    rounded to the tensors' format, then the reduction (0 none, 1 mean, 2 sum) as
    ``apply_loss_reduction`` takes it; the same values, bit for bit
    (``tests/tracking/test_rules.py``)."""
    loss = (prediction - target) ** 2
    if reduction == 1:
        return loss.mean()
    if reduction == 2:
        return loss.sum()
    return loss


def _fused_adam_in_place(functional: str) -> Callable[..., None]:
    """``_fused_adam_`` / ``_fused_adamw_`` (what ``torch.optim``'s fused CPU optimizers call;
    they return nothing and overwrite their arguments) as their functional variant, which the
    tracker bounds by its rule (``rules/fused_optimizer.py``), copied back into the parameters,
    gradients (when a ``grad_scale`` unscales them) and states: the same kernel on copies of the
    same tensors, the same values."""
    packet = getattr(torch.ops.aten, functional)

    def step(
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        exp_avgs: list[torch.Tensor],
        exp_avg_sqs: list[torch.Tensor],
        max_exp_avg_sqs: list[torch.Tensor],
        state_steps: list[torch.Tensor],
        **kwargs: Any,
    ) -> None:
        written = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)
        results = packet(*written, state_steps, **kwargs)
        for index, (targets, values) in enumerate(zip(written, results, strict=True)):
            if index == 1 and kwargs.get("grad_scale") is None:
                continue  # gradients are only written when a scale unscales them
            for target, value in zip(targets, values, strict=True):
                target.copy_(value)

    return step


def _amp_unscale_in_place(
    grads: list[torch.Tensor], found_inf: torch.Tensor, inv_scale: torch.Tensor
) -> None:
    """``_amp_foreach_non_finite_check_and_unscale_`` (``GradScaler.unscale_``) as its
    functional variant, which the tracker bounds by its rule (``rules/gradient_scaling.py``),
    copied back into the gradients and ``found_inf``: the same kernel on copies of the same
    tensors, the same values."""
    unscaled, found = torch.ops.aten._amp_foreach_non_finite_check_and_unscale(
        grads, found_inf, inv_scale
    )
    for grad, value in zip(grads, unscaled, strict=True):
        grad.copy_(value)
    found_inf.copy_(found)


def _amp_update_scale_in_place(
    scale: torch.Tensor,
    growth_tracker: torch.Tensor,
    found_inf: torch.Tensor,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
) -> torch.Tensor:
    """``_amp_update_scale_`` (``GradScaler.update``) as its functional variant and copies back,
    as :func:`_amp_unscale_in_place`; returns the scale, as the in-place kernel does."""
    new_scale, new_tracker = torch.ops.aten._amp_update_scale(
        scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval
    )
    scale.copy_(new_scale)
    growth_tracker.copy_(new_tracker)
    return scale


#: element-wise operations whose ``_foreach_`` forms (in place and not) run as a loop
_FOREACH = (
    *("add", "sub", "mul", "div", "lerp", "addcmul", "addcdiv", "sqrt", "neg", "reciprocal"),
    *("exp", "abs", "sign", "clamp_min", "clamp_max"),
)
#: those whose number argument is a keyword of the per-tensor operation
_VALUE_KEYWORD = ("addcmul", "addcdiv")


def _foreach(name: str, in_place: bool) -> Callable[..., Any]:
    """``_foreach_<name>_`` (in place, returns nothing) or ``_foreach_<name>`` (a list of
    results) as ATen's CPU kernels run them (their slow path, a loop): ``<name>_`` or
    ``<name>`` on each tensor of the first list, with the i-th item of each other list argument
    (tensors or numbers) and any other argument as it is. The overload is the one the loop
    calls: ``.Scalar`` where a number is among the arguments (``t.mul_(scalar)`` with a
    ``Scalar``, ``t.lerp_(end, weight)``), ``.Tensor`` for tensors only, ``.default`` for
    unary operations; addcmul and addcdiv take their number (a ``Scalar``, the i-th of a
    ``ScalarList``, or of a tensor of scalars) as ``value``. The overload packet would pick
    ``.Tensor`` for a number too, and ``mul_.Tensor`` takes the number in float32 where
    ``mul_.Scalar`` rounds it to a float16/bfloat16 tensor's format first: a tracked
    ``_foreach_mul_(tensors, 1.7)`` differed from the untracked one in about a quarter of the
    elements (``tests/tracking/test_wrapped_numbers.py``). CUDA's fused foreach kernels compute
    each element in the same opmath format as the per-tensor kernels, rounded once."""
    packet = getattr(torch.ops.aten, f"{name}_" if in_place else name)
    overloads = set(packet.overloads())

    def one(tensor: torch.Tensor, items: list[Any], kwargs: dict[str, Any]) -> Any:
        if name in _VALUE_KEYWORD:
            first, second, *rest = items
            value = rest[0] if rest else kwargs.get("value", 1)
            return packet.default(tensor, first, second, value=value)
        if not items:
            return packet.default(tensor, **kwargs)
        number = any(not isinstance(item, torch.Tensor) for item in items)
        overload = "Scalar" if number else "Tensor"
        if overload not in overloads:
            overload = "default"
        return getattr(packet, overload)(tensor, *items, **kwargs)

    def each(tensors: list[torch.Tensor], *args: Any, **kwargs: Any) -> list[Any] | None:
        if name in _VALUE_KEYWORD and len(args) > 2 and isinstance(args[2], torch.Tensor):
            # the .Tensor overload: a 1-d tensor of scalars, one per tensor, read as numbers
            args = (*args[:2], args[2].tolist(), *args[3:])
        results = []
        for index, tensor in enumerate(tensors):
            items = [a[index] if isinstance(a, (list, tuple)) else a for a in args]
            results.append(one(tensor, items, kwargs))
        return None if in_place else results

    return each


def _foreach_norm(tensors: list[torch.Tensor], ord: Any = 2, dtype: Any = None) -> list[Any]:
    """``_foreach_norm`` (``clip_grad_norm_``'s default on the CPU) as ATen's CPU kernel runs it
    (its slow path): ``linalg_vector_norm`` of each tensor, the same values."""
    return [torch.ops.aten.linalg_vector_norm(t, ord, None, False, dtype=dtype) for t in tensors]


def _foreach_extremum(name: str, in_place: bool) -> Callable[..., Any]:
    """``_foreach_maximum_`` / ``_foreach_minimum_`` (Adam's amsgrad with its foreach default)
    and their functional forms, as a loop: ``maximum`` (``minimum``) against the i-th tensor,
    or ``clamp_min`` (``clamp_max``) against a number, then copied back in place. A selection:
    the same values in any order of evaluation."""
    aten = torch.ops.aten
    pick = getattr(aten, name)
    clamp = aten.clamp_min if name == "maximum" else aten.clamp_max

    def each(tensors: list[torch.Tensor], other: Any) -> list[Any] | None:
        results = []
        for index, tensor in enumerate(tensors):
            item = other[index] if isinstance(other, (list, tuple)) else other
            value = pick(tensor, item) if isinstance(item, torch.Tensor) else clamp(tensor, item)
            if in_place:
                tensor.copy_(value)
            results.append(value)
        return None if in_place else results

    return each


#: CUDA's fused attention kernels (those this PyTorch has)
_CUDA_ATTENTION = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
)

#: Kernels that tracking replaces by a composition of operations it has rules for:
#:
#: * the fused attention kernels (the CPU's flash kernel; CUDA's flash, memory-efficient and
#:   cuDNN kernels) run themselves, bounded beside by ATen's math path (:mod:`.attention`):
#:   the values of an untracked run;
#: * ``mse_loss`` runs as its own kernel's steps, which give the same values;
#: * the fused CPU Adam and AdamW steps and the gradient scaler's two kernels run as their
#:   functional variants and copies back, and
#:   the foreach arithmetic (``_foreach_add_``, ``_foreach_lerp_``, ``_foreach_sqrt``, ...: the
#:   foreach optimizers, the default on CUDA, and the fused ones' step counts), the foreach
#:   norm (``clip_grad_norm_``) and maximum (amsgrad) as a loop over its tensors, as ATen's CPU
#:   kernels do: the same values.
SUBSTITUTES: dict[str, Callable[..., Any]] = {
    "aten._scaled_dot_product_flash_attention_for_cpu": flash_attention_for_cpu,
    **{
        f"aten.{name}": cuda_attention(name)
        for name in _CUDA_ATTENTION
        if hasattr(torch.ops.aten, name)
    },
    "aten.mse_loss": _mse_loss,
    "aten._fused_adam_": _fused_adam_in_place("_fused_adam"),
    "aten._fused_adamw_": _fused_adam_in_place("_fused_adamw"),
    "aten._amp_foreach_non_finite_check_and_unscale_": _amp_unscale_in_place,
    "aten._amp_update_scale_": _amp_update_scale_in_place,
    **{f"aten._foreach_{name}_": _foreach(name, in_place=True) for name in _FOREACH},
    **{f"aten._foreach_{name}": _foreach(name, in_place=False) for name in _FOREACH},
    "aten._foreach_norm": _foreach_norm,
    **{
        f"aten._foreach_{name}{suffix}": _foreach_extremum(name, in_place=suffix == "_")
        for name in ("maximum", "minimum")
        for suffix in ("", "_")
    },
}
