"""The rounding of an accumulation (sum, mean, matrix products, convolution), as one Gaussian term.

An accumulation of ``K`` terms ``t_k`` rounds each partial sum ``s_k``. Under stochastic
rounding each of these errors has mean 0 and variance ``g**2 f (1 - f)``; averaged over the
fractional position and over a binade this is ``KAPPA u**2 s_k**2`` with ``u = 2**-p`` of the
accumulator's format (``E[(g/s)**2] = 4 u**2 E[1/t**2]`` for ``|s| = t 2**e``, ``t`` in
``[1, 2)``: ``2.16 u**2`` for a log-uniform ``t``, divided by 6). The errors are independent, so
the result's variance is ``KAPPA u**2 sum_k s_k**2``. For terms in random order, ``s_k`` is
``(k/K) S`` plus a bridge of variance ``k (K - k) / K**2 Q`` (``S`` the sum, ``Q = sum t_k**2``),
and

    Var = KAPPA u**2 K (S**2 / 3 + Q / 6).

That is the sequential order of a GEMM's inner loop (each output element accumulated along
``k`` in one register lane): the model of matrix products and convolutions (``addbmm`` as the
one product of its batches joined, ``P k`` terms). Sums and means
(``torch.sum`` is a cascade on CPUs, a tree on GPUs) are pairwise: level ``l`` holds ``K / 2**l``
partial sums of ``2**l`` terms, whose squares add up to about ``2**l / K S**2 + Q``, so over the
``log2 K`` levels

    Var = KAPPA u**2 (2 S**2 + (log2 K - 2) Q),

``K / log2 K`` times less than the sequential order's for positive terms. ``benchmarks/bench_stochastic.py`` measures the
model against an addition-level emulation (one stochastic rounding per addition in the
accumulator's format) for several lengths, orders, formats and term distributions
(docs/performance.md).

An embedding's gradient (``embedding_dense_backward``) takes the sequential model per row of
the weight: its token's gradient rows added one after another, ``K`` the token's count.

``Q`` is exact for sums, means and dot products. For matrix products it is estimated from the
row and column norms, ``Q_ij = |a_i|**2 |b_j|**2 / K`` (exact on average for terms whose
magnitudes are unrelated; a product dominated by few terms has a larger ``Q``, which the
``S**2`` term then mostly carries), and for convolutions from the mean squares of the input and
the weight. It costs ``O(MK + KN)``, never a second product.

The accumulator is float32 for bfloat16, float16 and float32 results (what CPU and GPU kernels
use) and float64 for float64 results.

Triton kernels (:func:`kernel_sigma`, on the interpreter's float64 values): ``tl.sum`` takes the
pairwise model, ``tl.dot(a, b, acc)`` the sequential one started from the addend ``d`` (the
accumulator a blocked matmul carries from one K-block to the next): its partial sums are
``d + (k/K) S`` plus the bridge, so ``sum_k s_k**2 = K (d**2 + d S + S**2 / 3) + K Q / 6``, which
over the blocks of a loop adds up to the sequential model of the whole product. Both in the
accumulator's format, which is the result's (the addend's type for a dot; the summed type, after
``tl.sum``'s own widening cast of half precisions, for a sum).

Prefix sums and products of Triton kernels (``tl.cumsum``, ``tl.cumprod``,
:func:`kernel_scan_noise`) are sequential along their axis, as the interpreter computes them
(``numpy.cumsum``) and as each thread of a compiled scan does (a GPU then combines the threads'
partials in a tree, with fewer roundings: the sequential model is the larger). Output ``k`` is
the rounding of addition ``k``, ``s_k = o_(k-1) + t_k``, and carries the errors of the
additions before it: the result is ``SR(S_k + D_(k-1))`` with ``S_k`` the exact prefix,
``D_(k-1) = sum_(j<k) e_j`` and ``e_j`` independent Gaussian terms of the variance of addition
``j``'s stochastic rounding, ``q_j**2 f_j (1 - f_j)`` for the gap ``q_j`` and the fractional
position ``f_j`` of ``S_j`` on the format's grid (zero where a prefix is on the grid, so that a
scan whose additions are exact, such as a count, stays exact), and the last rounding is the
stochastic rounding of the result itself. Each output's variance is that of the addition-level
emulation; two outputs share the errors of the additions before the first of them (the
emulation: up to and including it). Products: the same with relative errors,
``P_k (1 + sum_(j<k) e_j / P_j)``. ``benchmarks/bench_stochastic.py --section scan`` measures the
model against the addition-level emulation (docs/performance.md). A float64 scan takes
``KAPPA u**2 S_j**2`` (its fractional positions are not known in float64).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .memo import Memo

__all__ = [
    "ACCUMULATIONS",
    "KAPPA",
    "PRODUCTS",
    "SCANS",
    "accumulation_sigma",
    "kernel_scan_noise",
    "kernel_sigma",
    "product_scales",
    "product_terms",
]

#: the average variance of one stochastic rounding of ``s``, in units of ``u**2 s**2``
KAPPA = 0.36


def _variance(u: float, k: float, total: torch.Tensor, squares: torch.Tensor) -> torch.Tensor:
    scale = KAPPA * u * u * k
    return torch.add(total.square().mul_(scale / 3), squares, alpha=scale / 6)


def _pairwise_variance(
    u: float, k: int, total: torch.Tensor, squares: torch.Tensor
) -> torch.Tensor:
    levels = max(math.ceil(math.log2(k)) - 2, 0) if k > 1 else 0
    return (KAPPA * u * u) * (2 * total.square() + levels * squares)


def _sum_sigma(
    args: tuple[Any, ...], kwargs: dict[str, Any], total: torch.Tensor, u: float, mean: bool
) -> torch.Tensor:
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = bool(args[2] if len(args) > 2 else kwargs.get("keepdim", False))
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(x.dim()))
    elif isinstance(dims, int):
        dims = [dims]
    count = math.prod(x.shape[d] for d in dims) if x.dim() else 1
    squares = x.to(total.dtype).square().sum(dim=dims, keepdim=keepdim) if x.dim() else x.square()
    if mean:
        # the sum's error, divided by the count
        return _pairwise_variance(u, count, total * count, squares).sqrt() / max(count, 1)
    return _pairwise_variance(u, count, total, squares).sqrt()


def _squares(a: torch.Tensor) -> torch.Tensor:
    """The squared norms of the rows (the last dimension), in float32 (float64 for float64).
    ``vector_norm``, not squares then ``sum``: a sum whose result is one element splits a long
    row among threads, so a sample's ``(1, K)`` row and the batch's ``(S, 1, K)`` rows were
    added in different orders (different last bits, the batch no longer the samples run
    alone); the norm reduces each row alike."""
    dtype = torch.float64 if a.dtype == torch.float64 else torch.float32
    norms: torch.Tensor = torch.linalg.vector_norm(a, dim=-1, dtype=dtype)
    return norms.square()


def _row_squares(a: torch.Tensor, memo: Memo) -> torch.Tensor:
    """The squared norms of the rows (its last dimension); once per call for a parameter
    (:class:`~pytest_fpcheck.stochastic.memo.Memo`)."""
    return memo.get("row squares", a, _squares)


def _column_squares(b: torch.Tensor, memo: Memo) -> torch.Tensor:
    """The squared norms of the columns (its second-to-last dimension), as :func:`_row_squares`,
    on a contiguous copy of the transpose: ``vector_norm`` over a strided dimension took more
    than twice as long as the copy and a contiguous norm (78 against 29 microseconds on
    16 x 64 x 32; a weight's ``.t()`` view is contiguous once transposed back, no copy)."""
    return memo.get("column squares", b, lambda t: _squares(t.transpose(-1, -2).contiguous()))


def _product_sigma(
    a: torch.Tensor,
    b: torch.Tensor,
    total: torch.Tensor,
    u: float,
    memo: Memo,
    scale: float = 1.0,
) -> torch.Tensor:
    """``a @ b`` (matrices, batches of them, or a matrix and a vector): the sequential model
    with ``Q_ij = |a_i|**2 |b_j|**2 / K``, in four operations on the result's shape. Only
    element-wise operations and row norms, which give each sample the same bits whether the
    samples run one at a time or as one batch (:mod:`pytest_fpcheck.stochastic.batched`; a fused
    ``addr``, one operation less, is decomposed under ``vmap`` and rounds differently)."""
    k = a.shape[-1]
    base = KAPPA * u * u * k
    cross = base * scale * scale / (6 * k)
    rows = _row_squares(a, memo).to(total.dtype)
    variance = total.square().mul_(base / 3)
    if b.dim() == 1:
        return variance.add_(rows, alpha=cross * float(_row_squares(b, memo))).sqrt_()
    columns = _column_squares(b, memo).to(total.dtype)
    return torch.addcmul(variance, rows.unsqueeze(-1), columns.unsqueeze(-2), value=cross).sqrt_()


def _batches_joined(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``addbmm``'s ``sum_p a[p] @ b[p]`` as the one product it is, ``(n, P k) @ (P k, m)``
    (the kernel adds each batch's product into the result in turn: one sequential accumulation
    of ``P k`` terms per element)."""
    batches, n, k = a.shape[-3:]
    joined_a = a.transpose(-3, -2).reshape(*a.shape[:-3], n, batches * k)
    return joined_a, b.reshape(*b.shape[:-3], batches * k, b.shape[-1])


def _alpha(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    return float(kwargs.get("alpha", 1.0))


#: matrix products whose Gaussian term a compiled pass adds from their operands' norms
#: (:func:`~pytest_fpcheck.stochastic.rounding.add_product_noise`): the positions of ``a`` and
#: ``b`` among the arguments, and whether the product is scaled by ``alpha``
PRODUCTS: dict[str, tuple[int, int, bool]] = {
    "aten.mm": (0, 1, False),
    "aten.bmm": (0, 1, False),
    "aten.addmm": (1, 2, True),
    "aten.baddbmm": (1, 2, True),
}


def product_terms(
    packet: str, args: tuple[Any, ...], memo: Memo
) -> tuple[torch.Tensor, torch.Tensor]:
    """The squared norms of the rows of ``a`` and of the columns of ``b`` in ``packet``'s
    ``a @ b`` (in float32, or float64 for float64 operands; a parameter's once per call)."""
    first, second, _ = PRODUCTS[packet]
    a, b = args[first], args[second]
    return _row_squares(a, memo), _column_squares(b, memo)


def product_scales(
    packet: str, args: tuple[Any, ...], kwargs: dict[str, Any], u: float
) -> tuple[float, float]:
    """``(KAPPA u**2 K / 3, KAPPA u**2 alpha**2 / 6)``: the sequential model's variance of
    ``packet``'s element ``(i, j)`` is the first times ``total**2`` plus the second times
    ``|a_i|**2 |b_j|**2`` (``Q_ij K``, module docstring)."""
    first, _, scaled = PRODUCTS[packet]
    k = args[first].shape[-1]
    scale = _alpha(args, kwargs) if scaled else 1.0
    base = KAPPA * u * u
    return base * k / 3, base * scale * scale / 6


def _convolution_sigma(
    args: tuple[Any, ...], kwargs: dict[str, Any], total: torch.Tensor, u: float, memo: Memo
) -> torch.Tensor:
    x, weight = args[0], args[1]
    groups = int(args[8]) if len(args) > 8 else int(kwargs.get("groups", 1))
    transposed = bool(args[6]) if len(args) > 6 else False
    per_output = weight.shape[0] // groups if transposed else weight.shape[1]
    k = per_output * math.prod(weight.shape[2:])
    batch_dims = tuple(range(1, x.dim()))
    x_squares = x.to(total.dtype).square().mean(dim=batch_dims)
    w_squares = weight.to(total.dtype).square().mean()
    squares = (x_squares * w_squares * k).view(-1, *([1] * (total.dim() - 1)))
    return _variance(u, k, total, squares).sqrt()


def _embedding_sigma(
    args: tuple[Any, ...], kwargs: dict[str, Any], total: torch.Tensor, u: float
) -> torch.Tensor:
    """An embedding's gradient adds each token's gradient row into its row of the weight's,
    one after another (ATen's ``embedding_dense_backward``): the sequential model per weight
    row, ``K`` the token's count and ``Q`` the sum of its terms' squares (the kernel itself,
    run on the squared gradient; divided by ``K**2`` under ``scale_grad_by_freq``, whose
    terms are divided by ``K``)."""
    grad, indices, count, padding, by_frequency = args[:5]
    wide = grad.to(total.dtype)
    squares = torch.ops.aten.embedding_dense_backward(wide * wide, indices, count, padding, False)
    counts = torch.bincount(indices.reshape(-1), minlength=int(count))[: int(count)]
    k = counts.to(total.dtype).reshape(-1, *([1] * (total.dim() - 1)))
    if by_frequency:
        squares = squares / k.clamp(min=1).square()
    scale = KAPPA * u * u
    variance: torch.Tensor = scale * k * (total.square() / 3 + squares / 6)
    return variance.sqrt()


Sigma = Callable[[tuple[Any, ...], dict[str, Any], torch.Tensor, float, Memo], torch.Tensor]

#: packet name -> standard deviation of the accumulation's rounding, from the (wide) arguments,
#: the (wide) result, the accumulator's unit round-off and the call's memo
ACCUMULATIONS: dict[str, Sigma] = {
    "aten.sum": lambda args, kwargs, total, u, memo: _sum_sigma(args, kwargs, total, u, mean=False),
    "aten.mean": lambda args, kwargs, total, u, memo: _sum_sigma(args, kwargs, total, u, mean=True),
    "aten.mm": lambda args, kwargs, total, u, memo: _product_sigma(
        args[0], args[1], total, u, memo
    ),
    "aten.bmm": lambda args, kwargs, total, u, memo: _product_sigma(
        args[0], args[1], total, u, memo
    ),
    "aten.mv": lambda args, kwargs, total, u, memo: _product_sigma(
        args[0], args[1], total, u, memo
    ),
    "aten.addmm": lambda args, kwargs, total, u, memo: _product_sigma(
        args[1], args[2], total, u, memo, _alpha(args, kwargs)
    ),
    "aten.baddbmm": lambda args, kwargs, total, u, memo: _product_sigma(
        args[1], args[2], total, u, memo, _alpha(args, kwargs)
    ),
    "aten.addmv": lambda args, kwargs, total, u, memo: _product_sigma(
        args[1], args[2], total, u, memo, _alpha(args, kwargs)
    ),
    "aten.addbmm": lambda args, kwargs, total, u, memo: _product_sigma(
        *_batches_joined(args[1], args[2]), total, u, memo, _alpha(args, kwargs)
    ),
    "aten.dot": lambda args, kwargs, total, u, memo: _variance(
        u,
        args[0].numel(),
        total,
        (args[0].to(total.dtype) * args[1].to(total.dtype)).square().sum(),
    ).sqrt(),
    "aten.convolution": _convolution_sigma,
    "aten.embedding_dense_backward": lambda args, kwargs, total, u, memo: _embedding_sigma(
        args, kwargs, total, u
    ),
    # a rounding every sample makes of the same value (.shared): one rounding onto a format of
    # unit round-off args[1], as a Gaussian term
    "fpcheck.shared_rounding": lambda args, kwargs, total, u, memo: (
        total.abs() * (math.sqrt(KAPPA) * float(args[1]))
    ),
}


def accumulation_sigma(
    packet: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    total: torch.Tensor,
    u: float,
    memo: Memo,
) -> torch.Tensor | None:
    """The standard deviation of ``packet``'s accumulation rounding per element of ``total``,
    or None when ``packet`` is no accumulation."""
    rule = ACCUMULATIONS.get(packet)
    if rule is None:
        return None
    sigma: torch.Tensor = rule(args, kwargs, total, u, memo)
    return sigma.to(total.dtype)


def _kernel_dot_variance(a: np.ndarray, b: np.ndarray, addend: np.ndarray, u: float) -> np.ndarray:
    k = a.shape[-1]
    product = np.matmul(a, b)
    rows = np.square(a).sum(-1)
    columns = np.square(b).sum(-2)
    squares = rows[..., :, None] * columns[..., None, :] / max(k, 1)
    partial = addend * addend + addend * product + product * product / 3
    variance: np.ndarray = KAPPA * u * u * k * (partial + squares / 6)
    return variance


def _kernel_sum_variance(
    x: np.ndarray, axis: int | None, total: np.ndarray, u: float
) -> np.ndarray:
    count = x.size if axis is None else x.shape[axis]
    levels = max(math.ceil(math.log2(count)) - 2, 0) if count > 1 else 0
    squares = np.square(x).sum(axis=axis)
    variance: np.ndarray = (KAPPA * u * u) * (
        2 * np.square(total) + levels * np.reshape(squares, np.shape(total))
    )
    return variance


def kernel_sigma(
    kind: str, operands: tuple[np.ndarray, ...], axis: int | None, total: np.ndarray, u: float
) -> np.ndarray | None:
    """The standard deviation of a Triton kernel accumulation's rounding per element of
    ``total`` (float64 NumPy, see the module docstring), or None when ``kind`` (the builder
    operation's name: ``dot``, ``sum``) is no accumulation."""
    with np.errstate(all="ignore"):
        if kind == "dot":
            a, b, addend = operands[:3]
            variance = _kernel_dot_variance(a, b, np.broadcast_to(addend, np.shape(total)), u)
        elif kind == "sum":
            variance = _kernel_sum_variance(operands[0], axis, total, u)
        else:
            return None
        sigma: np.ndarray = np.sqrt(np.reshape(variance, np.shape(total)))
    return sigma


#: the prefix operations of Triton kernels rounded by :func:`kernel_scan_noise`
SCANS = frozenset({"cumsum", "cumprod"})


def _step_variance(x: np.ndarray, precision: int, emin: int) -> np.ndarray:
    """The variance ``q**2 f (1 - f)`` of a stochastic rounding of each ``x`` (float64) onto the
    grid of ``precision`` bits and least exponent ``emin``: ``q`` the gap at ``x``, ``f`` its
    fractional position (0 on the grid and for non-finite values)."""
    biased = (x.view(np.int64) >> 52) & 0x7FF
    quantum = np.ldexp(1.0, np.maximum(biased - 1023, emin) - (precision - 1))
    scaled = np.abs(x) / quantum
    fraction = scaled - np.floor(scaled)
    variance: np.ndarray = np.where(
        np.isfinite(x), np.square(quantum) * fraction * (1 - fraction), 0.0
    )
    return variance


def kernel_scan_noise(
    kind: str,
    wide: np.ndarray,
    axis: int,
    precision: int,
    emin: int,
    u: float,
    normal: np.ndarray,
) -> np.ndarray:
    """The accumulated error ``D_(k-1)`` (``P_k D_(k-1)`` for products) to add to each exact
    prefix ``wide`` (float64) of a ``tl.cumsum`` (``kind == "cumsum"``) or ``tl.cumprod`` along
    ``axis``, computed in the format of ``precision`` bits and least exponent ``emin`` (``u``:
    its unit round-off; float64: ``precision == 53``), from standard normal numbers ``normal``
    of ``wide``'s shape (see the module docstring)."""
    with np.errstate(all="ignore"):
        if precision >= 53:
            variance = KAPPA * u * u * np.square(wide)
        else:
            variance = _step_variance(np.ascontiguousarray(wide), precision, emin)
        if kind == "cumprod":
            variance = np.where(wide != 0, variance / np.square(wide), 0.0)
        steps = np.sqrt(variance) * normal
        # the first prefix is a term (no addition); D_(k-1) leaves out addition k, whose
        # rounding is the result's own
        index = [slice(None)] * wide.ndim
        index[axis] = slice(0, 1)
        steps[tuple(index)] = 0.0
        accumulated = np.cumsum(steps, axis=axis) - steps
        accumulated = np.where(np.isfinite(accumulated), accumulated, 0.0)
        if kind == "cumprod":
            accumulated = np.where(np.isfinite(wide), wide * accumulated, 0.0)
    noise: np.ndarray = accumulated
    return noise
