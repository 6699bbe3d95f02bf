"""Bounds from PyTorch's decompositions, for operations without a rule of their own (issue 19).

Many ATen kernels, the backward ones above all (``_softmax_backward_data``,
``nll_loss2d_backward``, ...), have a
decomposition into simpler operations in ``torch._decomp`` (PyTorch's own reference, used by
its compilers; STYLE.md principle 15). Where an operation has neither a rule nor a composite
kernel, the tracker bounds it with its decomposition:

1. The real kernel has already run: the program keeps its value, computed once.
2. The decomposition is evaluated on the same operands, the tracker re-entered, so that each of
   its operations is bounded by its own rule, on float32 copies of float16 and bfloat16
   operands (ATen computes those in float32; the casts are exact and keep the bounds). Its
   operations only read the operands: an operation whose schema mutates an argument, or one
   that draws random numbers (its decomposition would move the random stream), never takes
   this road. A few decompositions are written here in operations that have rules
   (``var_mean``; ``native_batch_norm`` in training mode, which leaves the running statistics
   to the kernel; ``cdist`` and its backward; ``mse_loss_backward``; ``convolution_backward``
   in convolutions, transposed ones too; the CPU flash-attention backward through the math
   path; average pooling and its backward in its kernel's order; layer norm's backward in its
   kernel's form and order; an LSTM layer, ``mkldnn_rnn_layer`` and its backward, step by
   step); the rest are torch._decomp's. Any operand's version changing
   during the evaluation is an internal error. Float16 and bfloat16 operands are first widened to
   float32; if the kernel's value misses that (tighter) enclosure, the decomposition is run
   again in the operands' own formats, each step's enclosure rounded outward onto the narrow
   format, which holds that step computed in float32 as well; if it misses that too, once more
   with its products accumulated in the narrow format
   (:func:`~pytest_fpcheck.tracking.core.policy.accumulating_in_format`: some CPUs' float16
   convolution backward kernels round their partial sums to float16).
3. The enclosure of each of the decomposition's results holds the exact value of the
   mathematical function both compute (every rule encloses the exact result of its operation
   over its operands' enclosures, and the decomposition computes the same function). The
   kernel's own value is a different rounding of it, so it must be checked: each element of the
   kernel's result must lie in the enclosure, or the operation is refused (a gap, or an
   ``UnsupportedOperation`` under ``strict=True``) naming the decomposition. The enclosure then
   holds both the exact value and the one the program computed: what a rule promises.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...adapters.torch import dtype_format
from ...errors import InternalError, UnsupportedOperation
from ...interval.bounds import contains
from ...interval.core import Interval
from ..core.interpose import OpCall
from ..core.policy import accumulating_in_format
from ..core.store import STORE, float64_values, version_of
from .context import RuleContext

__all__ = ["decomposition_rule"]

_REDUCED = (torch.float16, torch.bfloat16)


def _var_mean(
    x: torch.Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``var_mean``: ``var`` and ``mean``, each with its own rule (torch._decomp's reaches the
    primitive ``prims.var``)."""
    return x.var(dim, correction=correction, keepdim=keepdim), x.mean(dim, keepdim=keepdim)


def _batch_norm_training(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``native_batch_norm`` in training mode: (output, batch mean, 1 / sqrt(biased batch
    variance + eps)); the running statistics are the kernel's business (it already updated
    them) and are not touched."""
    # per channel, a layer norm over the batch and spatial elements: its rule bounds the
    # normalisation as one function of the row, far tighter than (x - mean) * rsqrt(var + eps)
    # step by step (the dependency problem)
    channels = x.shape[1]
    moved = x.transpose(0, 1)
    rows = moved.reshape(channels, -1)
    normed, mean, rstd = torch.ops.aten.native_layer_norm(rows, [rows.shape[1]], None, None, eps)
    out = normed.reshape(moved.shape).transpose(0, 1)
    shape = [1, -1] + [1] * (x.dim() - 2)
    if weight is not None:
        out = out * weight.view(shape)
    if bias is not None:
        out = out + bias.view(shape)
    return out, mean.reshape(channels), rstd.reshape(channels)


def _cdist(x1: torch.Tensor, x2: torch.Tensor, p: float, compute_mode: Any = None) -> torch.Tensor:
    """``_cdist_forward``: the p-norm of each difference of rows, as ATen's CPU kernel forms
    it: the count of non-zero differences (p = 0), the sum of their magnitudes (p = 1), the
    square root of the sum of their squares (p = 2), their largest magnitude (p = inf), else
    the sum of their magnitudes to the power p, to the power 1 / p."""
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (diff != 0).to(diff.dtype).sum(-1)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return (diff * diff).sum(-1).sqrt()
    if p == math.inf:
        return diff.amax(-1)
    return (diff**p).sum(-1) ** (1.0 / p)


def _cdist_backward(
    grad: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor, p: float, dist: torch.Tensor
) -> torch.Tensor:
    """``_cdist_backward``: the gradient of each row of ``x1``, the sum over the rows of
    ``x2`` of grad * sign(d) |d|^(p - 1) / dist^(p - 1) for the difference d (p = 1: grad
    sign(d); p = inf: grad sign(d) where |d| is the distance), 0 where the distance (or, for
    p < 1, the difference) is 0, as ATen's kernel takes it."""
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    g, distance = grad.unsqueeze(-1), dist.unsqueeze(-1)
    zero = torch.zeros((), dtype=diff.dtype)
    if p == 0:
        return torch.zeros_like(x1)
    if p == 1:
        terms = g * diff.sign()
    elif p == math.inf:
        terms = torch.where(diff.abs() == distance, g * diff.sign(), zero)
    else:
        ratio = diff.abs() / distance
        terms = g * diff.sign() * (ratio ** (p - 1) if p != 2 else ratio)
        terms = torch.where(distance == 0, zero, terms)
        if p < 1:
            terms = torch.where(diff == 0, zero, terms)
    return terms.sum(-2)


def _convolution_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias_sizes: Any,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
    output_mask: list[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``convolution_backward`` in convolutions. Of a convolution: the input's gradient is
    the transposed convolution of the output's gradient with the weight; the weight's, per
    group, the convolution of the input (batch as channels) with the output's gradient as the
    kernel, stride and dilation swapped, cropped to the kernel's size; the bias's, the sum of
    the output's gradient over all but the channels. A transposed convolution is the adjoint
    of the convolution with its weight: its input's gradient is that convolution of the
    output's gradient, its weight's the same formula with the output's gradient as the input
    and the input as the output's gradient."""
    aten = torch.ops.aten
    spatial = list(range(2, x.dim()))
    kernel = weight.shape[2:]
    grad_input = grad_weight = grad_bias = None
    if output_mask[0] and transposed:
        grad_input = aten.convolution.default(
            grad, weight, None, stride, padding, dilation, False, [0] * len(spatial), groups
        )
    elif output_mask[0]:
        extra = [
            x.shape[d] - ((grad.shape[d] - 1) * s - 2 * p + dl * (k - 1) + 1)
            for d, s, p, dl, k in zip(spatial, stride, padding, dilation, kernel, strict=True)
        ]
        grad_input = aten.convolution.default(
            grad, weight, None, stride, padding, dilation, True, extra, groups
        )
    if output_mask[1]:
        inputs, grads = (grad, x) if transposed else (x, grad)
        parts = []
        for xg, gg in zip(inputs.chunk(groups, 1), grads.chunk(groups, 1), strict=True):
            full = aten.convolution.default(
                xg.transpose(0, 1),
                gg.transpose(0, 1),
                None,
                dilation,
                padding,
                stride,
                False,
                [0] * len(spatial),
                1,
            )
            index = tuple(slice(0, k) for k in kernel)
            parts.append(full.transpose(0, 1)[(slice(None), slice(None), *index)])
        grad_weight = torch.cat(parts, 0) if groups > 1 else parts[0]
    if output_mask[2]:
        grad_bias = grad.sum([0, *spatial])
    return grad_input, grad_weight, grad_bias


def _mse_loss_backward(
    grad: torch.Tensor, x: torch.Tensor, target: torch.Tensor, reduction: int
) -> torch.Tensor:
    """``mse_loss_backward`` as ATen's CPU kernel computes it: ``norm * (x - target) * grad``
    with ``norm`` = 2 / n (mean) or 2 (sum, none) converted to the tensors' format first
    (``norm.to<scalar_t>()``: for bfloat16, 2 / 28 is 0.0713). The norm is formed as a tracked
    division in that format, whose enclosure holds both 2 / n and its rounding."""
    two = torch.full((), 2.0, dtype=x.dtype)
    norm = two / x.numel() if reduction == 1 else two
    return norm * (x - target) * grad


def _lstm_layout(x: torch.Tensor, hx: torch.Tensor, batch_sizes: Any, mode: int, what: str) -> bool:
    """Whether an LSTM layer's input is batch-major (B, T, I) rather than time-major
    (T, B, I), read from the state's batch size; refuses packed sequences and other cells."""
    if mode != 2 or len(batch_sizes) or x.dim() != 3:
        raise UnsupportedOperation(
            what, how="a packed sequence, or a cell other than LSTM, has no rule yet"
        )
    return x.shape[1] != hx.shape[-2]


def _lstm_gates(
    x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    has_biases: bool,
) -> tuple[torch.Tensor, ...]:
    """One LSTM step: the gates i, f, g, o (PyTorch's order), the new cell and hidden states."""
    w_ih, w_hh, b_ih, b_hh = weights
    gates = x @ w_ih.t() + h @ w_hh.t()
    if has_biases:
        gates = gates + b_ih + b_hh
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c_new = f * c + i * g
    tanh_c = c_new.tanh()
    return i, f, g, o, c_new, tanh_c, o * tanh_c


def _mkldnn_rnn_layer(
    x: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
    hx: torch.Tensor,
    cx: torch.Tensor,
    reverse: bool,
    batch_sizes: Any,
    mode: int,
    hidden_size: int,
    num_layers: int,
    has_biases: bool,
    bidirectional: bool,
    batch_first: bool,
    train: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``mkldnn_rnn_layer`` (what ``nn.LSTM`` runs on the CPU: oneDNN's kernel) of an LSTM,
    step by step: gates = x W_ih^T + h W_hh^T + b_ih + b_hh, i, f, o = sigmoid, g = tanh,
    c = f c + i g, h = o tanh(c); the output, the last hidden and cell states (the kernel's
    fourth result, its workspace for the backward pass, holds bytes, no bounds)."""
    batch_major = _lstm_layout(x, hx, batch_sizes, mode, "aten.mkldnn_rnn_layer")
    steps = x.transpose(0, 1) if batch_major else x
    h, c = hx, cx
    outputs: list[torch.Tensor] = []
    order = range(steps.shape[0] - 1, -1, -1) if reverse else range(steps.shape[0])
    for t in order:
        _, _, _, _, c, _, h = _lstm_gates(steps[t], h, c, (w_ih, w_hh, b_ih, b_hh), has_biases)
        outputs.append(h)
    if reverse:
        outputs.reverse()
    output = torch.stack(outputs)
    return (output.transpose(0, 1) if batch_major else output), h, c


def _mkldnn_rnn_layer_backward(
    x: torch.Tensor,
    w_ih: torch.Tensor,
    w_hh: torch.Tensor,
    b_ih: torch.Tensor,
    b_hh: torch.Tensor,
    hx: torch.Tensor,
    cx: torch.Tensor,
    output: torch.Tensor,
    hy: torch.Tensor,
    cy: torch.Tensor,
    grad_output: torch.Tensor | None,
    grad_hy: torch.Tensor | None,
    grad_cy: torch.Tensor | None,
    reverse: bool,
    mode: int,
    hidden_size: int,
    num_layers: int,
    has_biases: bool,
    train: bool,
    bidirectional: bool,
    batch_sizes: Any,
    batch_first: bool,
    workspace: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """``mkldnn_rnn_layer_backward`` of an LSTM, by backpropagation through time over the
    recomputed steps: with dh = dO_t + dh', do = dh tanh(c), dc = dc' + dh o (1 - tanh(c)^2),
    di = dc g, df = dc c_prev, dg = dc i, the gates' pre-activation gradients
    (sigmoid' = s (1 - s), tanh' = 1 - t^2) give dx_t = dG W_ih, dh_prev = dG W_hh,
    dc_prev = dc f; the weights' gradients are one product over all steps (dG^T X, dG^T H: any
    order of its sums), the biases' the sum of dG over all steps."""
    batch_major = _lstm_layout(x, hx, batch_sizes, mode, "aten.mkldnn_rnn_layer_backward")
    steps = x.transpose(0, 1) if batch_major else x
    count = steps.shape[0]
    order = list(range(count - 1, -1, -1) if reverse else range(count))
    weights = (w_ih, w_hh, b_ih, b_hh)
    h, c = hx, cx
    saved = {}
    for t in order:
        gates = _lstm_gates(steps[t], h, c, weights, has_biases)
        saved[t] = (h, c, *gates[:4], gates[5])
        c, h = gates[4], gates[6]
    upstream = None
    if grad_output is not None:
        upstream = grad_output.transpose(0, 1) if batch_major else grad_output
    dh_next = grad_hy if grad_hy is not None else torch.zeros_like(hx)
    dc_next = grad_cy if grad_cy is not None else torch.zeros_like(cx)
    one = torch.ones((), dtype=x.dtype)
    grad_steps: dict[int, torch.Tensor] = {}
    grad_gates: dict[int, torch.Tensor] = {}
    for t in reversed(order):
        _, c_prev, i, f, g, o, tanh_c = saved[t]
        dh = dh_next if upstream is None else upstream[t] + dh_next
        do = dh * tanh_c
        dc = dc_next + dh * o * (one - tanh_c * tanh_c)
        pre = torch.cat(
            [
                dc * g * i * (one - i),
                dc * c_prev * f * (one - f),
                dc * i * (one - g * g),
                do * o * (one - o),
            ],
            -1,
        )
        grad_gates[t] = pre
        grad_steps[t] = pre @ w_ih
        dh_next = pre @ w_hh
        dc_next = dc * f
    every = torch.cat([grad_gates[t] for t in range(count)], 0)
    grad_w_ih = every.t() @ torch.cat([steps[t] for t in range(count)], 0)
    grad_w_hh = every.t() @ torch.cat([saved[t][0] for t in range(count)], 0)
    grad_bias = every.sum(0) if has_biases else torch.zeros_like(b_ih)
    grad_x = torch.stack([grad_steps[t] for t in range(count)])
    grad_x = grad_x.transpose(0, 1) if batch_major else grad_x
    return grad_x, grad_w_ih, grad_w_hh, grad_bias, grad_bias.clone(), dh_next, dc_next


def _layer_norm_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    normalized_shape: list[int],
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    output_mask: list[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``native_layer_norm_backward`` as ATen's CPU kernel (``LayerNormBackwardKernelImplInternal``,
    ``layer_norm_backward_frame``) computes it, in float32 for float16 and bfloat16 (opmath).
    The input's gradient in the kernel's form: per row, with g = dy w, ds = sum g x,
    db = sum g, a = rstd and s = 1 / n, b' = (db mean - ds) a^3 s, c' = -b' mean - db a s and
    dx = a g + b' x + c' (its cancellation for rows far from 0 included), rounded once. The
    weight's and bias's gradients: ``at::parallel_for`` hands each of ``torch.get_num_threads()``
    threads a contiguous block of rows, which it adds row after row into its own buffer in the
    tensor's format (each row's terms dy (a x + b), b = -a mean, and dy computed in opmath, each
    sum rounded to the format); the buffers are then summed in opmath in thread order and
    rounded once. In float32 and float64 the buffers hold opmath itself, so the gradients are
    sums in some order: bounded as sums in any order, without the loop over rows."""
    opmath = _opmath(x.dtype)
    size = math.prod(normalized_shape)
    rows, values = grad.reshape(-1, size).to(opmath), x.reshape(-1, size).to(opmath)
    scale = rstd.reshape(-1, 1).to(opmath)
    centre = mean.reshape(-1, 1).to(opmath)
    grad_x = None
    if output_mask[0]:
        scaled = rows * weight.reshape(1, size).to(opmath) if weight is not None else rows
        ds = (scaled * values).sum(-1, keepdim=True)
        db = scaled.sum(-1, keepdim=True)
        slope = (db * centre - ds) * scale * scale * scale * (1.0 / size)
        offset = -slope * centre - db * scale * (1.0 / size)
        grad_x = (scale * scaled + slope * values + offset).to(x.dtype).reshape(x.shape)
    count = rows.shape[0]
    threads = max(min(torch.get_num_threads(), count), 1)
    chunk = -(-count // threads)
    blocks = [range(start, min(start + chunk, count)) for start in range(0, count, chunk)]
    shift = -(scale * centre)

    def reduced(term: Callable[[int], torch.Tensor]) -> torch.Tensor:
        total = torch.zeros(size, dtype=opmath, device=x.device)
        for block in blocks:
            buffer = torch.zeros(size, dtype=x.dtype, device=x.device)
            for i in block:
                buffer = (buffer.to(opmath) + term(i)).to(x.dtype)
            total = total + buffer.to(opmath)
        return total.to(x.dtype).reshape(normalized_shape)

    grad_weight = grad_bias = None
    if x.dtype not in _REDUCED:  # buffers in opmath itself: one sum, in any order
        if output_mask[1] and weight is not None:
            grad_weight = (rows * (scale * values + shift)).sum(0).reshape(normalized_shape)
        if output_mask[2] and bias is not None:
            grad_bias = rows.sum(0).reshape(normalized_shape)
        return grad_x, grad_weight, grad_bias
    if output_mask[1] and weight is not None:
        grad_weight = reduced(lambda i: rows[i] * (scale[i] * values[i] + shift[i]))
    if output_mask[2] and bias is not None:
        grad_bias = reduced(lambda i: rows[i])
    return grad_x, grad_weight, grad_bias


def _attention_backward(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    logsumexp: torch.Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    attn_mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward of scaled dot-product attention through the math path: with P the
    attention weights as the kernel recomputes them, exp(S - lse) from the scores S and the
    log-sum-exp ``lse`` the forward pass saved (its own rounding included), dV = P^T dO,
    dS = P (dO V^T - rowsum(dO O)), dQ = dS K s, dK = dS^T Q s; key and value heads shared by several query heads (grouped-query attention) get the sum
    over their group."""
    if dropout_p:
        raise UnsupportedOperation(
            "aten._scaled_dot_product_attention_backward",
            how="attention with dropout has no rule yet",
        )
    s = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[-3] // k.shape[-3]
    kk = k.repeat_interleave(group, -3) if group > 1 else k
    vv = v.repeat_interleave(group, -3) if group > 1 else v
    scores = (q @ kk.transpose(-2, -1)) * s
    if is_causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    # the kernel recomputes the weights from the forward pass's log-sum-exp (float32), not by
    # a softmax; in the operands' own format, the cast's outward rounding holds both P and its
    # rounding
    p = torch.exp(scores - logsumexp.unsqueeze(-1)).to(scores.dtype)
    grad_v = p.transpose(-2, -1) @ grad
    dp = grad @ vv.transpose(-2, -1)
    ds = p * (dp - (grad * out).sum(-1, keepdim=True))
    grad_q = (ds @ kk) * s
    grad_k = (ds.transpose(-2, -1) @ q) * s
    if group > 1:
        shape = (*k.shape[:-3], k.shape[-3], group, *k.shape[-2:])
        grad_k = grad_k.reshape(shape).sum(-3)
        grad_v = grad_v.reshape(shape).sum(-3)
    return grad_q, grad_k, grad_v


def _lse(logsumexp: torch.Tensor, rows: int) -> torch.Tensor:
    """A CUDA kernel's saved log-sum-exp as (..., rows): cuDNN's has a trailing dimension of
    one, the memory-efficient kernel's rows are padded to a multiple of 32."""
    if logsumexp.dim() == 4:
        logsumexp = logsumexp.flatten(-2)
    return logsumexp[..., :rows]


def _cuda_attention_backward(name: str) -> Callable[..., tuple[torch.Tensor | None, ...]]:
    """CUDA's fused attention backward kernel ``aten.<name>`` (flash, memory-efficient or
    cuDNN) as :func:`_attention_backward`, its arguments read by the names of the kernel's
    schema, from the kernel's saved log-sum-exp (:func:`_lse`); an output the math path does
    not give (the memory-efficient kernel's mask gradient) is None, and asking for the mask's
    gradient (``grad_input_mask[3]``) is refused."""
    kernel = getattr(torch.ops.aten, name).default
    names = [argument.name for argument in kernel._schema.arguments]
    outputs = len(kernel._schema.returns)

    def backward(*args: Any, **kwargs: Any) -> tuple[torch.Tensor | None, ...]:
        bound = {**dict(zip(names, args, strict=False)), **kwargs}
        mask = bound.get("grad_input_mask")
        if mask is not None and len(mask) > 3 and mask[3]:
            raise UnsupportedOperation(
                f"aten.{name}", how="the gradient of an attention mask has no rule yet"
            )
        q = bound["query"]
        grads = _attention_backward(
            bound["grad_out"] if "grad_out" in bound else bound["grad_out_"],
            q,
            bound["key"],
            bound["value"],
            bound["out"],
            _lse(bound["logsumexp"], q.shape[-2]),
            bound.get("dropout_p", 0.0),
            bool(bound.get("is_causal", False)),
            bound.get("attn_bias"),
            bound.get("scale"),
        )
        return (*grads, *([None] * (outputs - 3)))

    return backward


def _opmath(dtype: torch.dtype) -> torch.dtype:
    """The format ATen computes a float16 or bfloat16 kernel in: float32 (divisors such as
    17 * 17 are not bfloat16 numbers)."""
    return torch.float32 if dtype in _REDUCED else dtype


def _pair(value: Any, default: Any = None) -> tuple[int, int]:
    """A pooling argument as (height, width): one number for both, or two."""
    items = list(value) if value else list(default)
    return (int(items[0]), int(items[0])) if len(items) == 1 else (int(items[0]), int(items[1]))


def _pool_windows(
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> tuple[torch.Tensor, tuple[int, int]]:
    """ATen's average-pooling geometry (``AvgPoolKernel.cpp``): each window's divisor (the
    override; or the window clipped to the padded input, with ``count_include_pad``; or to the
    input itself), as a float64 tensor of the output's spatial shape, and how many zeros the
    padded input needs past its bottom and right ends for the last (``ceil_mode``) windows."""
    divisors, extra = [], []
    for dim in range(2):
        length, k, s, p = size[dim], kernel[dim], stride[dim], padding[dim]
        out = (length + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= length + p:
            out -= 1
        starts = [o * s - p for o in range(out)]
        ends = [min(a + k, length + p) for a in starts]
        padded = [e - a for a, e in zip(starts, ends, strict=True)]
        inside = [min(e, length) - max(a, 0) for a, e in zip(starts, ends, strict=True)]
        divisors.append(padded if count_include_pad else inside)
        extra.append(max(0, (out - 1) * s + k - (length + 2 * p)))
    if divisor_override:
        grid = torch.full((len(divisors[0]), len(divisors[1])), float(divisor_override))
    else:
        grid = torch.tensor(divisors[0], dtype=torch.float64)[:, None] * torch.tensor(
            divisors[1], dtype=torch.float64
        )
    return grid, (extra[0], extra[1])


def _avg_pool2d(
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int] | None = None,
    padding: Any = (0, 0),
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> torch.Tensor:
    """``avg_pool2d``: the sum of each window of the input padded with zeros (windows as a
    view), divided by its divisor (:func:`_pool_windows`), as ATen divides it."""
    k, s, p = _pair(kernel), _pair(stride, kernel), _pair(padding, (0,))
    size = (x.shape[-2], x.shape[-1])
    divisors, extra = _pool_windows(size, k, s, p, ceil_mode, count_include_pad, divisor_override)
    padded = torch.nn.functional.pad(x, (p[1], p[1] + extra[1], p[0], p[0] + extra[0]))
    sums = padded.unfold(-2, k[0], s[0]).unfold(-2, k[1], s[1]).sum((-2, -1))
    return (sums / divisors.to(sums.device, _opmath(sums.dtype))).to(sums.dtype)


def _avg_pool2d_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> torch.Tensor:
    """``avg_pool2d_backward`` in the order of ATen's CPU kernel (``cpu_avg_pool_backward``):
    each window's share ``grad / divisor`` (rounded to the gradient's format) added into the
    gradient of the padded input, window after window in row-major order, each addition
    rounded to that format (float16 and bfloat16 kernels accumulate in it); as one strided
    addition per position in the kernel, last position first, which adds each input's shares
    in the kernel's order. The padding is then cut away."""
    k, s, p = _pair(kernel), _pair(stride, kernel), _pair(padding, (0,))
    size = (x.shape[-2], x.shape[-1])
    divisors, extra = _pool_windows(size, k, s, p, ceil_mode, count_include_pad, divisor_override)
    rows, columns = grad.shape[-2], grad.shape[-1]
    shares = (grad / divisors.to(grad.device, _opmath(grad.dtype))).to(grad.dtype)
    padded = [size[d] + 2 * p[d] + extra[d] for d in range(2)]
    spread = torch.zeros(*grad.shape[:-2], *padded, dtype=grad.dtype, device=grad.device)
    for dh in reversed(range(k[0])):
        for dw in reversed(range(k[1])):
            window = spread[
                ...,
                dh : dh + (rows - 1) * s[0] + 1 : s[0],
                dw : dw + (columns - 1) * s[1] + 1 : s[1],
            ]
            window.add_(shares)
    return spread[..., p[0] : p[0] + size[0], p[1] : p[1] + size[1]]


def _max_pool2d_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    kernel: list[int],
    stride: list[int],
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    indices: torch.Tensor,
) -> torch.Tensor:
    """``max_pool2d_with_indices_backward``: each output's gradient added into the input
    position its window took the maximum from (``indices``, flat over the input's height and
    width), a scatter-add (the form of torch._decomp's decomposition in PyTorch 2.13; 2.11 has
    none). Inputs taken by several overlapping windows sum their gradients."""
    flat = torch.zeros(
        *x.shape[:-2], x.shape[-2] * x.shape[-1], dtype=grad.dtype, device=grad.device
    )
    gathered = flat.scatter_add(-1, indices.flatten(-2), grad.flatten(-2))
    return gathered.view(x.shape)


#: decompositions written here, in operations that have rules, used before torch._decomp's
_OWN: dict[str, Callable[..., Any]] = {
    "aten.var_mean": _var_mean,
    "aten.native_batch_norm": _batch_norm_training,
    "aten._cdist_forward": _cdist,
    "aten._cdist_backward": _cdist_backward,
    "aten.mse_loss_backward": _mse_loss_backward,
    "aten.native_layer_norm_backward": _layer_norm_backward,
    "aten.mkldnn_rnn_layer": _mkldnn_rnn_layer,
    "aten.mkldnn_rnn_layer_backward": _mkldnn_rnn_layer_backward,
    "aten.convolution_backward": _convolution_backward,
    "aten._scaled_dot_product_flash_attention_for_cpu_backward": _attention_backward,
    **{
        f"aten.{name}": _cuda_attention_backward(name)
        for name in (
            "_scaled_dot_product_flash_attention_backward",
            "_scaled_dot_product_efficient_attention_backward",
            "_scaled_dot_product_cudnn_attention_backward",
        )
        if hasattr(torch.ops.aten, name)  # the cuDNN kernels are newer than PyTorch 2.3
    },
    "aten.avg_pool2d": _avg_pool2d,
    "aten.avg_pool2d_backward": _avg_pool2d_backward,
    "aten.max_pool2d_with_indices_backward": _max_pool2d_backward,
}


def _decomposition(func: torch._ops.OpOverload) -> Callable[..., Any] | None:
    """The decomposition tracking may bound ``func`` by: its own (:data:`_OWN`; the CUDA
    attention backward kernels, tagged as seeded for their dropout, which those refuse), else
    torch._decomp's for a kernel that neither mutates its arguments nor draws random numbers."""
    if func._schema.is_mutable:
        return None
    own = _OWN.get(func._schema.name.replace("::", "."))
    if own is not None:
        return own
    if torch.Tag.nondeterministic_seeded in func.tags:
        return None
    from torch._decomp import decomposition_table

    found: Callable[..., Any] | None = decomposition_table.get(func)
    return found


def _widened(value: Any) -> Any:
    """Float16 and bfloat16 tensors as float32 (tracked casts: exact), inside lists too."""
    if isinstance(value, torch.Tensor) and value.dtype in _REDUCED:
        return value.float()
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(v) for v in value)
    return value


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def decomposition_rule(
    call: OpCall, reentered: Callable[[], Any], rule: Callable[[RuleContext], Any] | None = None
) -> Callable[[RuleContext], Any] | None:
    """``rule``, falling back on the decomposition (module docstring) for the variants it
    refuses (``batch_norm`` in training mode, say); without a rule, a rule bounding ``call`` by
    its decomposition, or None when it has none the tracker may use. ``reentered`` is the
    tracker's context manager that makes it see the operations run while it handles one.
    With a rule, the decompositions are looked up only once it refuses."""
    if rule is None:
        decomposition = _decomposition(call.func)
        return None if decomposition is None else _by_decomposition(call, reentered, decomposition)
    own = rule

    def with_fallback(ctx: RuleContext) -> Any:
        try:
            return own(ctx)
        except UnsupportedOperation as refused:
            decomposition = _decomposition(call.func)
            if decomposition is None:
                raise
            try:
                return _by_decomposition(call, reentered, decomposition)(ctx)
            except UnsupportedOperation:
                raise refused from None  # the rule's own refusal says more

    return with_fallback


def _by_decomposition(
    call: OpCall, reentered: Callable[[], Any], decomposition: Callable[..., Any]
) -> Callable[[RuleContext], Any]:

    def rule(ctx: RuleContext) -> list[Interval | None]:
        operands = _tensors(list(call.args)) + _tensors(list(call.kwargs.values()))
        versions = [version_of(t) for t in operands]
        reduced = any(t.dtype in _REDUCED for t in operands)
        attempts = [(True, False), (False, False), (False, True)] if reduced else [(False, False)]
        for widen, in_format in attempts:
            with accumulating_in_format() if in_format else contextlib.nullcontext():
                results = _replica_bounds(ctx, call, reentered, decomposition, widen)
            if [version_of(t) for t in operands] != versions:
                raise InternalError(f"the decomposition of {call.name} modified an operand")
            if results is not None:
                return results
        raise UnsupportedOperation(
            call.name,
            where=call.location or None,
            how="its decomposition (torch._decomp) was bounded, but the kernel's value lies "
            "outside those bounds; it needs a rule of its own",
        )

    return rule


def _paired(out: Any, replica: Any) -> list[tuple[torch.Tensor, Any]]:
    """The kernel's result tensors, each with the decomposition's result in its position: a
    kernel may return None where its output mask says so (``native_batch_norm_backward`` of
    an input that needs no gradient returns (None, grad_weight, grad_bias)) while the
    decomposition computes every result, so tuples are paired by position, not by order of
    their tensors (which gave the weight's gradient the input's)."""
    positional = (
        isinstance(out, (tuple, list))
        and isinstance(replica, (tuple, list))
        and len(out) == len(replica)
        and all(t is None or isinstance(t, torch.Tensor) for t in out)
    )
    if positional:
        return [(r, c) for r, c in zip(out, replica, strict=True) if r is not None]
    return list(zip(_tensors(out), _tensors(replica), strict=False))


def _replica_bounds(
    ctx: RuleContext,
    call: OpCall,
    reentered: Callable[[], Any],
    decomposition: Callable[..., Any],
    widen: bool,
) -> list[Interval | None] | None:
    """The enclosures of the decomposition's results, or None if one misses the kernel's value.
    ``widen``: on float32 copies of float16 and bfloat16 operands (ATen's opmath), tighter;
    else in the operands' own formats, where every step's enclosure is rounded outward onto
    the narrow format and so also holds the same steps computed in float32."""
    with reentered():
        args = _widened(call.args) if widen else call.args
        kwargs = {k: _widened(v) for k, v in call.kwargs.items()} if widen else call.kwargs
        replica = decomposition(*args, **kwargs)
    results: list[Interval | None] = []
    for real, copy in _paired(ctx.out, replica):
        if not isinstance(copy, torch.Tensor):
            return None
        if dtype_format(real.dtype) is None or real.numel() == 0:
            results.append(None)
            continue
        enclosure = STORE.read(copy)
        if enclosure is None:
            enclosure = Interval.point(float64_values(copy))
        enclosure = enclosure.to_format(ctx.fmt)
        value = ctx.values(real)
        if enclosure.shape != value.shape or (
            not ctx.observed
            and not contains(
                np.broadcast_to(enclosure.lo, value.shape),
                np.broadcast_to(enclosure.hi, value.shape),
                value,
            ).all()
        ):
            return None
        results.append(enclosure)
    return results
