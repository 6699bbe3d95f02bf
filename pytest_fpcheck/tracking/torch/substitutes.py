"""Kernels that ``fp.track()`` runs as a composition of operations it has rules for (the
:data:`SUBSTITUTES` table): the tracker re-enters itself and runs the substitute instead of the
kernel, so that each of its operations is bounded by its rule (or, for attention, runs the
kernel itself and the substitute beside it, :mod:`.attention`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .attention import flash_attention_for_cpu

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


def _foreach_in_place(name: str) -> Callable[..., None]:
    """``_foreach_<name>_`` (in place, returns nothing) as ATen's CPU kernel runs it (its slow
    path, a loop): ``<name>_`` on each tensor of the list, with the i-th item of each other list
    argument (tensors or numbers) and any other argument as it is. The same values: the
    overload is the one the loop calls, ``<name>_.Scalar`` for a number (``t.mul_(scalar)``
    with a ``Scalar``), ``<name>_.Tensor`` for a tensor. The overload packet would pick
    ``.Tensor`` for a number too, and ``mul_.Tensor`` takes the number in float32 where
    ``mul_.Scalar`` rounds it to a float16/bfloat16 tensor's format first: a tracked
    ``_foreach_mul_(tensors, 1.7)`` differed from the untracked one in about a quarter of the
    elements (``tests/tracking/test_wrapped_numbers.py``)."""
    packet = getattr(torch.ops.aten, f"{name}_")

    def each(tensors: list[torch.Tensor], *args: Any, **kwargs: Any) -> None:
        for index, tensor in enumerate(tensors):
            items = [a[index] if isinstance(a, (list, tuple)) else a for a in args]
            number = bool(items) and not isinstance(items[0], torch.Tensor)
            (packet.Scalar if number else packet.Tensor)(tensor, *items, **kwargs)

    return each


#: Kernels that tracking replaces by a composition of operations it has rules for:
#:
#: * the fused CPU attention kernel (flash) runs itself, bounded beside by ATen's math path
#:   (:mod:`.attention`): the values of an untracked run;
#: * ``mse_loss`` runs as its own kernel's steps, which give the same values;
#: * the fused CPU Adam and AdamW steps run as their functional variants and copies back, and
#:   the in-place foreach arithmetic (``_foreach_add_``, ... : the fused optimizers count their
#:   steps with it) as a loop over its tensors, as ATen's CPU kernels do: the same values.
SUBSTITUTES: dict[str, Callable[..., Any]] = {
    "aten._scaled_dot_product_flash_attention_for_cpu": flash_attention_for_cpu,
    "aten.mse_loss": _mse_loss,
    "aten._fused_adam_": _fused_adam_in_place("_fused_adam"),
    "aten._fused_adamw_": _fused_adam_in_place("_fused_adamw"),
    **{f"aten._foreach_{name}_": _foreach_in_place(name) for name in ("add", "sub", "mul", "div")},
}
