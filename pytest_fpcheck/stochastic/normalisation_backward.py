"""A layer norm's gradient in a stochastic run: ATen's CPU kernel's formula, each step rounded.

Rule: ``native_layer_norm_backward`` computes, per row of ``N`` elements with its saved
``mean`` and ``a = rstd`` (ATen's ``layer_norm_backward_frame``; the form checked against
torch 2.13.0's float32 kernel on an x86-64 CPU with fused multiply-adds, docs/performance.md,
"Normalisations"):

* ``ds = sum(dy * g * x)``, ``db = sum(dy * g)`` over the row;
* ``b = (db * mean - ds) * a * a * a / N`` and ``c = fma(-b, mean, -(db * a / N))``;
* ``dx = fma(b, x, a * dy * g) + c``;
* ``dg = sum over rows of dy * fma(a, x, -a * mean)``, ``db_ = sum over rows of dy``, each
  thread's share of the rows added one after another into its buffer, then the buffers
  (:func:`~.normalisation.rows_summed`).

Where ``x`` is far from 0 against its spread (a row of mean 3), ``b * x`` and ``c`` are large
and cancel, and ``dx``'s error is their roundings', not one rounding of ``dx``: run wider and
rounded once, the plain gradient lay outside its interval at 111 of 40,960 elements of a
float32 layer norm with rows of mean 3. So the mode runs the formula in torch operations,
re-entered, each rounded at random as any other (:mod:`.normalisation` says how, and why the
fused multiply-adds are ``addcmul``); the row sums with their accumulation term (pairwise, as
the kernel's vectorised reductions), the sums over rows as each thread's chain of additions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .normalisation import (
    _accumulator,
    _arguments,
    _converted,
    _dtype,
    _result_dtypes,
    _tiny,
    rows_summed,
)

__all__ = ["layer_norm_backward"]


def layer_norm_backward(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[[], Any]:
    names = ("grad_out", "input", "normalized_shape", "mean", "rstd", "weight", "bias")
    dy, x, shape, mean, rstd, weight, bias = _arguments(func, args, kwargs, names)
    (mask,) = _arguments(func, args, kwargs, ("output_mask",))
    shape = tuple(int(n) for n in shape)
    ones_of = (1,) * len(shape)
    key = (func, dy.dtype, x.dtype, mean.dtype, rstd.dtype, _dtype(weight), _dtype(bias))
    dtypes = _result_dtypes(
        func,
        lambda: (
            torch.ones((1, *shape), dtype=dy.dtype, device=x.device),
            torch.ones((1, *shape), dtype=x.dtype, device=x.device),
            shape,
            torch.zeros((1, *ones_of), dtype=mean.dtype, device=x.device),
            torch.ones((1, *ones_of), dtype=rstd.dtype, device=x.device),
            _tiny(weight, shape),
            _tiny(bias, shape),
            [True, weight is not None, bias is not None],
        ),
        key,
    )

    def run() -> tuple[torch.Tensor | None, ...]:
        g, xa = _accumulator(dy), _accumulator(x)
        m, a = _accumulator(mean), _accumulator(rstd)
        w = None if weight is None else _accumulator(weight)
        dims = list(range(x.dim() - len(shape), x.dim()))
        count = math.prod(shape)
        rows = x.numel() // max(count, 1)
        scale = float(torch.tensor(1.0 / count, dtype=a.dtype))  # the kernel's 1 / N
        results: list[torch.Tensor | None] = [None, None, None]
        if mask[0]:
            dyw = g if w is None else g * w
            ds = (dyw * xa).sum(dims, keepdim=True)
            db = dyw.sum(dims, keepdim=True)
            b = ((db * m - ds) * a * a * a) * scale
            c = torch.addcmul(-((db * a) * scale), b, m, value=-1)
            term = a * g if w is None else (a * g) * w
            results[0] = _converted(torch.addcmul(term, b, xa) + c, dtypes[0])
        if mask[1] and weight is not None:
            normalised = torch.addcmul(-(a * m), a, xa)
            summed = rows_summed((g * normalised).reshape(rows, count))
            results[1] = _converted(summed.reshape(shape), dtypes[1])
        if mask[2] and bias is not None:
            summed = rows_summed(g.reshape(rows, count))
            results[2] = _converted(summed.reshape(shape), dtypes[2])
        return tuple(results)

    return run
