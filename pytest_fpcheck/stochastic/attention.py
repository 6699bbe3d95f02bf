"""Fused attention in a stochastic run off the CPU: ATen's math path, whose operations the mode rounds.

Rule: in a randomly rounded run, ``F.scaled_dot_product_attention`` on a query that is not on
the CPU runs ``aten._scaled_dot_product_attention_math`` (scores, softmax, weighted sum) with
the call's own arguments (a boolean mask made additive first, 0 where it keeps and ``-inf``
where it masks, as ``F.scaled_dot_product_attention`` does before any of its kernels), so
that each of its operations reaches the dispatch mode (:mod:`pytest_fpcheck.stochastic.mode`)
and is rounded at random as any other is. The math path is composite: autograd differentiates
it operation by operation, so backward passes are rounded the same way.

Why: on CUDA, PyTorch picks a fused kernel (cuDNN's, flash or memory-efficient attention) that
has no float32 version for half-precision operands, no float64 version at all and no batching
rule of its own; the mode could only move its result one step of its grid. On an H200
(docs/gpu.md, "Stochastic bounds on CUDA", ``benchmarks/gpu_stochastic.py``), the
stochastic intervals of the zoo's GPT-2, Llama and nanoGPT logits in bfloat16 and float16 were
then hundreds to thousands of times wider than the actual error and still missed the float64
model's logits in 28 of 72 runs; with the math path none missed, and the intervals were as
wide as on the CPU (about 16 times the actual error). The fused kernels and the math path
compute the same exact attention, which is what the samples estimate; the math path (for half
precisions PyTorch computes it in float32 and rounds the output once) rounds no more than the
fused kernels do, and the run's own result still comes from the fused kernel.

The function mode that does this is entered only in a process that has an accelerator
(:func:`needed`): it sees every torch call, and a machine with only a CPU never needs it.

On the CPU the fused kernel (``_scaled_dot_product_flash_attention_for_cpu``) runs in float32 on
widened operands as an operation of its own, which the CPU calibration measured
(docs/performance.md); it stays.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["MathAttention", "needed"]

#: device types whose fused attention kernel the stochastic mode runs as one operation
FUSED_IN_MODE = frozenset({"cpu"})


def needed() -> bool:
    """Whether this process has a device outside :data:`FUSED_IN_MODE` (a function mode sees
    every torch call, about a microsecond each: a run on a machine with only a CPU goes
    without it)."""
    return not _devices() <= FUSED_IN_MODE


@functools.cache
def _devices() -> frozenset[str]:
    """The device types this process can run on: the CPU and its accelerator, if any."""
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None:
        found = accelerator.current_accelerator() if accelerator.is_available() else None
        return frozenset({"cpu"} | ({found.type} if found is not None else set()))
    return frozenset({"cpu", "cuda"} if torch.cuda.is_available() else {"cpu"})


class MathAttention(TorchFunctionMode):
    """Runs ``F.scaled_dot_product_attention`` off the devices in :data:`FUSED_IN_MODE` through
    ATen's math path; every other function as it is."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            query = args[0] if args else kwargs["query"]
            if isinstance(query, torch.Tensor) and query.device.type not in FUSED_IN_MODE:
                return _math(*args, **kwargs)
        return func(*args, **kwargs)


def _math(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # as F.scaled_dot_product_attention does before its kernels: True keeps, False masks
        additive = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device)
        attn_mask = additive.masked_fill(attn_mask.logical_not(), float("-inf"))
    extra = {"enable_gqa": True} if enable_gqa else {}  # torch < 2.5 has no such argument
    output: torch.Tensor = torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, **extra
    )[0]
    return output
