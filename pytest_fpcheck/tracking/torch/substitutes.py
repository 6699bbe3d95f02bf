"""Kernels that ``fp.track()`` runs as a composition of operations it has rules for (the
:data:`SUBSTITUTES` table): the tracker re-enters itself and runs the substitute instead of the
kernel, so that each of its operations is bounded by its rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...adapters.torch import internal

__all__ = ["SUBSTITUTES"]


def _sdpa_math(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    attn_mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ATen's math path of scaled dot-product attention, in tracked operations, with the
    log-sum-exp of the scores that the fused CPU kernel also returns (untracked: it only feeds
    autograd's backward pass, which tracking does not bound).

    Grouped-query attention (``enable_gqa=True``: fewer key/value heads than query heads) reaches
    the fused kernel with the key and value heads as they are; query head h reads key/value head
    h // (query heads / key-value heads), as ``repeat_interleave`` along the head dimension lays
    them out (ATen's math path does exactly that), so the substitute repeats them first: copies,
    whose bounds are the operands' own."""
    if query.dim() >= 3 and key.dim() >= 3 and query.shape[-3] != key.shape[-3]:
        repeats = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(repeats, dim=-3)
        value = value.repeat_interleave(repeats, dim=-3)
    # decompose(): run the composite kernel, whose operations then reach the tracker one by one
    output, weights = torch.ops.aten._scaled_dot_product_attention_math.default.decompose(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale
    )
    factor = scale if scale is not None else query.shape[-1] ** -0.5
    with internal(), torch.no_grad():
        # from the weights where they hold every one of float32's bits, and none was dropped
        if dropout_p == 0.0 and weights.dtype in (torch.float32, torch.float64):
            logsumexp = _logsumexp_from_weights(query, key, attn_mask, weights, factor)
        else:
            logsumexp = _logsumexp_of_scores(query, key, attn_mask, is_causal, factor)
    return output, logsumexp


def _logsumexp_from_weights(
    query: torch.Tensor,
    key: torch.Tensor,
    attn_mask: torch.Tensor | None,
    weights: torch.Tensor,
    factor: float,
) -> torch.Tensor:
    """log sum_j exp(s_ij) = s_ij - log p_ij for any j with p_ij = softmax(s_i)_j > 0: taken at
    each row's largest weight (well conditioned: p >= 1 / n there), which costs one dot product
    per row instead of the whole score matrix; -inf in rows whose weights are all 0."""
    probabilities = weights.float()
    top, where = probabilities.max(-1, keepdim=True)
    keys = key.float().gather(-2, where.expand(*where.shape[:-1], key.shape[-1]))
    scores = (query.float() * keys).sum(-1, keepdim=True) * factor
    if attn_mask is not None and attn_mask.dtype != torch.bool:  # a boolean mask passes p > 0
        scores = scores + torch.broadcast_to(attn_mask, probabilities.shape).gather(-1, where)
    negative_infinity = torch.full_like(scores, float("-inf"))
    return torch.where(top > 0, scores - top.log(), negative_infinity).squeeze(-1)


def _logsumexp_of_scores(
    query: torch.Tensor,
    key: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    factor: float,
) -> torch.Tensor:
    """log sum_j exp(s_ij) from the whole (masked) score matrix, in float32."""
    scores = (query.float() @ key.float().transpose(-2, -1)) * factor
    if is_causal:
        length, source = scores.shape[-2], scores.shape[-1]
        keep = torch.ones(length, source, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = (
            scores.masked_fill(~attn_mask, float("-inf"))
            if attn_mask.dtype == torch.bool
            else scores + attn_mask
        )
    return scores.logsumexp(-1)


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
    argument (tensors or numbers) and any other argument as it is. The same values."""
    packet = getattr(torch.ops.aten, f"{name}_")

    def each(tensors: list[torch.Tensor], *args: Any, **kwargs: Any) -> None:
        for index, tensor in enumerate(tensors):
            items = [a[index] if isinstance(a, (list, tuple)) else a for a in args]
            packet(tensor, *items, **kwargs)

    return each


#: Kernels that tracking replaces by a composition of operations it has rules for:
#:
#: * the fused CPU attention kernels (flash) run as ATen's math path: the value may then
#:   differ from an untracked run's by round-off (API: "scaled_dot_product_attention (math
#:   path)");
#: * ``mse_loss`` runs as its own kernel's steps, which give the same values;
#: * the fused CPU Adam and AdamW steps run as their functional variants and copies back, and
#:   the in-place foreach arithmetic (``_foreach_add_``, ... : the fused optimizers count their
#:   steps with it) as a loop over its tensors, as ATen's CPU kernels do: the same values.
SUBSTITUTES: dict[str, Callable[..., Any]] = {
    "aten._scaled_dot_product_flash_attention_for_cpu": _sdpa_math,
    "aten.mse_loss": _mse_loss,
    "aten._fused_adam_": _fused_adam_in_place("_fused_adam"),
    "aten._fused_adamw_": _fused_adam_in_place("_fused_adamw"),
    **{f"aten._foreach_{name}_": _foreach_in_place(name) for name in ("add", "sub", "mul", "div")},
}
