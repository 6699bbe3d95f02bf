"""Normalisations in a stochastic run: their statistics rounded, then the kernel's affine map.

Rule: ATen's CPU kernels of layer norm, group norm and batch norm compute, per row (group,
channel), a mean and a reciprocal standard deviation ``rstd = 1 / sqrt(var + eps)`` in their
accumulation format (float32 for float32, bfloat16 and float16 inputs; float64 for float64),
then each output from its input with those statistics folded in. The forms, each checked bit
for bit against torch 2.13's float32 kernels (batch norm in training too) on an x86-64 CPU
with fused multiply-adds (docs/performance.md, "Normalisations"), ``fma`` one rounding:

* layer norm: ``fma((x - mean) * rstd, w, b)``;
* group norm and batch norm: ``fma(x, s, fma(-s, mean, b))`` with ``s = rstd * w`` per
  channel (batch norm in evaluation reads the running statistics, in training the batch's).

Where an output is near 0 (``x`` near its row's mean) the rounding of ``mean``, shared by the
row, dominates its error: about ``u |mean| rstd``, where one rounding of the exact result gives
``u |y|``, far less. A stochastic run that computed the normalisation in a wider format and
rounded its output once (what every other operation gets, :mod:`.mode`) had samples centred on
the exact result with the spread of that one rounding: on a float32 ``LayerNorm`` of rows with
mean 3 the estimated standard deviation was 0.27 of the actual error's, and the plain run lay
outside its interval at 23% of the elements.

So the mode runs these operations as the kernel's formula in torch operations, re-entered, so
that it rounds each of them at random as any other (CESTAC's rule: every floating operation's
result rounded; Monte Carlo arithmetic's random rounding, the GPU-FPX/FTTN paper's section 7):

* the mean with its accumulation's term (:mod:`.accumulation`), the variance as the mean of
  the centred squares (ATen's Welford moments round differently, but the variance only scales
  the output, ``y (1 + O(u))``), ``rsqrt``;
* each fused multiply-add as ``addcmul``, which the mode computes wider and rounds once, as the
  kernel does (modelled as a product and a sum, each rounded at random, the samples of a batch
  norm's outputs near 0 lay on the coarse grid of the terms, and 16 of them agreed at times by
  chance: a spread of zero beside an exact value a grid step away);
* the output converted to its own format (a stochastic rounding for half precisions), and the
  statistics a kernel also returns (layer and group norm's ``mean`` and ``rstd``) the rounded
  ones the samples used, converted to the dtype the kernel gives them (batch norm's empty ones
  empty);
* a value many outputs share, whose rounding the 16 samples may all make alike, with a
  Gaussian term too (:mod:`.shared`): a batch norm's per-channel scale and shift in
  evaluation, a training batch's mean and ``rstd`` where the kernel rounds them onto a
  narrower format before normalising with them.

Layer norm's backward kernel runs by its formula too (:mod:`.normalisation_backward`); group
and batch norm's are computed wider and rounded once.

A half-precision batch norm in evaluation keeps the mode's general rule (computed in float32,
rounded once onto its format): its output's own rounding dominates the float32 roundings
inside (0 false Type-II verdicts in 200 seeds, the spread 1.46 of the actual, with either).
Half-precision layer and group norms do not: computed in float32 and rounded once, the float32
kernel's own error near an output of 0, the same in every sample, put their float64 references
outside (up to 5 false Type-II verdicts in 200 seeds; none with the formula, whose roundings
cost GPT-2 and BERT in bfloat16 0.7 and 1.0 plain runs more per sample; computed in float64
and rounded once, none either, at a cost no lower; docs/performance.md, "Normalisations").

Batch norm in training takes its statistics from the batch, as ATen's CPU kernel computes
them: in double for a float32 input on the contiguous path (each statistic then rounded once
onto float32), in float32 one element after another on the channels-last path (channels-last
inputs and every ``(N, C)`` input: 13 units of float32 measured on a mean of 4,096 terms on
one thread; each thread's share summed as :func:`rows_summed` says), in float32 for half
precisions; then the same affine map, and the running statistics updated in the statistics'
format and rounded onto their own (in a batch of samples, a write into the module's running
statistics, which every sample shares, hands the call to the samples run one at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..adapters.torch import batch_norm_channels_last
from .shared import shared_rounding

__all__: list[str] = []  # substitutes.py registers them

#: (overload, operand dtypes) -> the dtypes of the kernel's results
_DTYPES: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _converted(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` converted to ``dtype`` by ``_to_copy``, the conversion the mode rounds at random
    where it narrows (``Tensor.to``, run from within a handler, reaches the mode as
    ``aten.to``, an alias it passes unrounded)."""
    if x.dtype == dtype:
        return x
    converted: torch.Tensor = torch.ops.aten._to_copy.default(x, dtype=dtype)
    return converted


_WIDE = (torch.float32, torch.float64)

#: a training batch norm's statistics are computed in ATen's accumulation type on the CPU
_STATISTICS = {
    torch.float32: torch.float64,
    torch.bfloat16: torch.float32,
    torch.float16: torch.float32,
}


def _accumulator(x: torch.Tensor) -> torch.Tensor:
    """``x`` in the kernel's accumulation format (a widening: exact, not rounded)."""
    return x if x.dtype in _WIDE else _converted(x, torch.float32)


def rows_summed(rows: torch.Tensor) -> torch.Tensor:
    """The sum of a ``(K, C)`` tensor's rows, as ATen's CPU kernels sum rows into one buffer
    per thread (``parallel_for`` over the rows: ``T = torch.get_num_threads()`` contiguous
    chunks, each added one row after another) and then the buffers: a batched product of each
    chunk by a row of ones (whose accumulation term is the sequential one, of the chunk's
    length) and a sum of the ``T`` partial sums. With one chain of ``K`` additions on two
    threads the estimated spread was about three times the actual. (``torch.bmm``: ``@``
    would reach the mode as the composite ``aten.matmul``, which it does not know as a
    product.)"""
    count, columns = rows.shape
    threads = max(1, min(torch.get_num_threads(), count))
    chunk = -(-count // threads)
    if chunk * threads != count:  # the last chunk padded with zeros (exact additions)
        padding = torch.zeros(chunk * threads - count, columns, dtype=rows.dtype)
        rows = torch.cat([rows, padding.to(rows.device)])
    ones = torch.ones(threads, 1, chunk, dtype=rows.dtype, device=rows.device)
    partial = torch.bmm(ones, rows.reshape(threads, chunk, columns))
    if threads == 1:  # one buffer: no addition of buffers, nothing more to round
        return partial.reshape(columns)
    summed: torch.Tensor = partial.sum(0).reshape(columns)
    return summed


def _moments(a: torch.Tensor, dims: list[int], eps: float) -> tuple[torch.Tensor, ...]:
    """The mean of ``a`` over ``dims`` (kept as dimensions of 1), ``a`` centred on it, and the
    reciprocal standard deviation ``1 / sqrt(var + eps)`` of the biased variance (one
    ``rsqrt`` where the kernels round a square root and a division: an operation fewer to
    round, for a relative error of ``rstd`` of a unit round-off or so less)."""
    mean = a.mean(dims, keepdim=True)
    centred = a - mean
    variance = (centred * centred).mean(dims, keepdim=True)
    return mean, centred, torch.rsqrt(variance + eps)


def _result_dtypes(
    func: torch._ops.OpOverload, tiny: Callable[[], tuple[Any, ...]], key: tuple[Any, ...]
) -> tuple[Any, ...]:
    """The dtypes of the kernel's results for operands of these dtypes (None for a result it
    leaves undefined), learnt once from the kernel on ``tiny()``'s small tensors of the same
    dtypes (the rules of mixed precision are the kernel's: a bfloat16 input with float32
    parameters has float32 statistics)."""
    dtypes = _DTYPES.get(key)
    if dtypes is None:
        dtypes = tuple(None if t is None else t.dtype for t in func(*tiny()))
        _DTYPES[key] = dtypes
    return dtypes


def _tiny(t: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor | None:
    return None if t is None else torch.ones(shape, dtype=t.dtype, device=t.device)


def _dtype(t: torch.Tensor | None) -> torch.dtype | None:
    return None if t is None else t.dtype


def _layer_norm(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[], Any]:
    x, shape, weight, bias, eps = _arguments(
        func, args, kwargs, ("input", "normalized_shape", "weight", "bias", "eps")
    )
    shape = tuple(int(n) for n in shape)
    key = (func, x.dtype, _dtype(weight), _dtype(bias))
    dtypes = _result_dtypes(
        func,
        lambda: (
            torch.ones((1, *shape), dtype=x.dtype, device=x.device),
            shape,
            _tiny(weight, shape),
            _tiny(bias, shape),
            float(eps),
        ),
        key,
    )

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dims = list(range(x.dim() - len(shape), x.dim()))
        mean, centred, rstd = _moments(_accumulator(x), dims, eps)
        y = centred * rstd
        if weight is not None and bias is not None:
            y = torch.addcmul(bias, y, weight)  # one rounding: the kernel's fused multiply-add
        elif weight is not None:
            y = y * weight
        elif bias is not None:
            y = y + bias
        return (
            _converted(y, dtypes[0]),
            _converted(mean, dtypes[1]),
            _converted(rstd, dtypes[2]),
        )

    return run


def _shared(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t``, which every sample computes from the same operands or which many outputs share,
    rounded onto ``dtype`` with a Gaussian term of that rounding's size first
    (:mod:`.shared`)."""
    u = torch.finfo(dtype).eps / 2  # the unit round-off
    return _converted(shared_rounding(t, u), dtype)


def _affine(
    a: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    shared: bool = False,
) -> torch.Tensor:
    """``a * s + (b - s * mean)``, ``s = rstd * w``, per channel (dimension 1 of ``a``;
    ``mean`` and ``rstd`` of shape ``(N or 1, C)``), each ``p * q + r`` one rounding (the
    kernels' fused multiply-adds: ``addcmul``, which the mode computes wider and rounds
    once). ``shared``: the statistics are the same in every sample (batch norm's running
    ones), and the scale's and the shift's roundings take :func:`_shared`'s term too (an
    output that cancels against ``b`` inherits the scale's error whole)."""
    scale = rstd if weight is None else rstd * weight
    if shared:
        scale = _shared(scale, scale.dtype)
    shift = -(scale * mean) if bias is None else torch.addcmul(bias, scale, mean, value=-1)
    if shared:
        shift = _shared(shift, shift.dtype)
    trailing = (1,) * (a.dim() - 2)
    return torch.addcmul(
        shift.reshape(*shift.shape, *trailing), a, scale.reshape(*scale.shape, *trailing)
    )


def _group_norm(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[], Any]:
    x, weight, bias, n, c, _, group, eps = _arguments(
        func, args, kwargs, ("input", "weight", "bias", "N", "C", "HxW", "group", "eps")
    )
    n, c, group = int(n), int(c), int(group)
    key = (func, x.dtype, _dtype(weight), _dtype(bias))
    dtypes = _result_dtypes(
        func,
        lambda: (
            torch.ones((1, c, 1), dtype=x.dtype, device=x.device),
            _tiny(weight, (c,)),
            _tiny(bias, (c,)),
            1,
            c,
            1,
            group,
            float(eps),
        ),
        key,
    )

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a = _accumulator(x).reshape(n, c, -1)
        mean, _, rstd = _moments(a.reshape(n, group, -1), [2], eps)
        per_channel = c // group
        y = _affine(
            a,
            mean.expand(n, group, per_channel).reshape(n, c),
            rstd.expand(n, group, per_channel).reshape(n, c),
            weight,
            bias,
        ).reshape(x.shape)
        return (
            _converted(y, dtypes[0]),
            _converted(mean.reshape(n, group), dtypes[1]),
            _converted(rstd.reshape(n, group), dtypes[2]),
        )

    return run


def _batch_norm(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[], Any] | None:
    """Batch norm, in evaluation (the running statistics, the same in every sample) or in
    training: the batch's mean and ``1 / sqrt(sum((x - mean)**2) / n + eps)`` per channel,
    and the running statistics updated as ATen's ``batch_norm_cpu_update_stats_template``
    does, ``running + momentum * (new - running)`` written ``(1 - momentum) * running +
    momentum * new`` with the unbiased variance."""
    names = tuple(a.name for a in func._schema.arguments if not a.kwarg_only)
    values = dict(zip(names, _arguments(func, args, kwargs, names), strict=True))
    x = values["input"]
    mean, variance = values.get("running_mean"), values.get("running_var")
    training = bool(values.get("training", False))
    if x.dim() < 2 or (not training and (mean is None or variance is None)):
        return None
    if not training and x.dtype not in _WIDE:
        return None  # the output's own rounding dominates (module docstring)
    weight, bias, eps = values["weight"], values["bias"], float(values["eps"])
    momentum = float(values["momentum"])
    c = x.shape[1]
    key = (func, training, *(_dtype(v) for v in values.values() if isinstance(v, torch.Tensor)))

    def tiny() -> tuple[Any, ...]:
        shapes = {"input": (2, c)}
        return tuple(
            torch.ones(shapes.get(name, (c,)), dtype=v.dtype, device=x.device)
            if isinstance(v, torch.Tensor)
            else v
            for name, v in values.items()
        )

    dtypes = _result_dtypes(func, tiny, key)

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a = _accumulator(x)
        if not training:
            assert mean is not None
            assert variance is not None
            rstd = torch.rsqrt(_accumulator(variance) + eps)
            y = _affine(
                a, _accumulator(mean).unsqueeze(0), rstd.unsqueeze(0), weight, bias, shared=True
            )
            empty = (torch.empty(0, dtype=d, device=x.device) for d in dtypes[1:])
            return (_converted(y, dtypes[0]), *empty)  # type: ignore[return-value]
        count = x.numel() // c
        if batch_norm_channels_last(x) and x.dtype == torch.float32:
            # sums of each channel's elements in float32, one after another in each thread's
            # share (13 units of float32 measured on a mean of 4,096 on one thread)
            rows = a.movedim(1, -1).reshape(count, c)
            wide, batch_mean = a, rows_summed(rows) / count
            centred = rows - batch_mean
            squares = rows_summed(centred * centred)
        else:
            # in ATen's accumulation type: double for float32 (each statistic rounded once
            # onto float32), float for bfloat16 and float16
            wide = _converted(x, _STATISTICS.get(x.dtype, x.dtype))
            dims = [0, *range(2, x.dim())]
            batch_mean = wide.mean(dims, keepdim=True)
            centred = wide - batch_mean
            squares = (centred * centred).sum(dims)
            batch_mean = batch_mean.reshape(c)
        rstd = torch.rsqrt(squares / count + eps)
        if mean is not None and variance is not None:
            for running, new in ((mean, batch_mean), (variance, squares / (count - 1))):
                updated = torch.add(
                    _converted(running, wide.dtype) * (1 - momentum), new, alpha=momentum
                )
                running.copy_(updated)
        # the kernel normalises with the statistics it returns, in their own dtype (bfloat16
        # for a bfloat16 module: the mean rounded onto bfloat16 is most of its outputs' error)
        if batch_mean.dtype != dtypes[1]:
            batch_mean = _shared(batch_mean, dtypes[1])
        if rstd.dtype != dtypes[2]:
            rstd = _shared(rstd, dtypes[2])
        y = _affine(
            a,
            _converted(batch_mean, a.dtype).unsqueeze(0),
            _converted(rstd, a.dtype).unsqueeze(0),
            weight,
            bias,
        )
        return _converted(y, dtypes[0]), batch_mean, rstd

    return run


def _arguments(
    func: torch._ops.OpOverload,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    names: tuple[str, ...],
) -> tuple[Any, ...]:
    """The values of the named arguments of a call (positional or keyword)."""
    schema = {argument.name: i for i, argument in enumerate(func._schema.arguments)}
    values = []
    for name in names:
        position = schema[name]
        if position < len(args):
            values.append(args[position])
        else:
            default = func._schema.arguments[position].default_value
            values.append(kwargs.get(name, default))
    return tuple(values)
