"""Triton kernels for the stochastic-arithmetic calibration (tests/stochastic/test_triton.py and
benchmarks/bench_stochastic.py): the fused softmax and blocked matmul of the examples
(examples/test_triton_kernels.py), a layer norm and a row prefix sum (``tl.cumsum``), each as ``run(dtype, x)`` with its float64
PyTorch reference (``reference(torch.float64, x)``), as tests/stochastic/calibration.py's
``verdict_trial`` takes them. (The matmul runs in float16: triton 3.9's interpreter multiplies
bfloat16 bit patterns in ``tl.dot``.)"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """The fused softmax of the examples, ``ROWS`` rows per program (one program for the
    calibration's inputs: the interpreter's cost is per operation, not per element)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    offsets = rows[:, None] * n_cols + cols[None, :]
    mask = (cols < n_cols)[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    z = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(z)
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_kernel(  # type: ignore[no-untyped-def]
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :])
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def layer_norm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr
):  # type: ignore[no-untyped-def]
    """A layer norm of ``ROWS`` rows per program: statistics in float32, affine transform."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    offsets = rows[:, None] * n_cols + cols[None, :]
    mask = (cols < n_cols)[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centred = tl.where(mask, x - mean[:, None], 0.0)
    variance = tl.sum(centred * centred, axis=1) / n_cols
    rstd = 1 / tl.sqrt(variance + eps)
    w = tl.load(w_ptr + cols, mask=cols < n_cols).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cols < n_cols).to(tl.float32)
    y = centred * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """Prefix sums of ``ROWS`` rows per program (``tl.cumsum`` in the input's format, as
    triton computes it for floating types)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    offsets = rows[:, None] * n_cols + cols[None, :]
    mask = (cols < n_cols)[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.cumsum(x, axis=1), mask=mask)


def _on_grid(dtype: torch.dtype, *shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Normal numbers times ``scale``, rounded to ``dtype`` and held in float32 (exactly)."""
    values = scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return values.to(dtype).to(torch.float32)


def softmax(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """Row softmax of ``x`` (a multiple of 16 rows of at most 128) in ``dtype``, statistics in
    float32."""
    x = x.to(dtype)
    y = torch.empty_like(x)
    softmax_kernel[(x.shape[0] // 16,)](x, y, x.shape[1], ROWS=16, BLOCK=128)
    return y


def softmax_reference(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.to(dtype), dim=-1)


def softmax_converting(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """:func:`softmax` of ``3 x`` converted to ``dtype`` inside the function: against the float64
    softmax of ``3 x``, the input's rounding is part of the error (and of the samples)."""
    return softmax(dtype, 3 * x)


def softmax_converting_reference(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    return softmax_reference(dtype, 3 * x)


_B = _on_grid(torch.float16, 64, 32, seed=7, scale=1 / 8)


def matmul(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """``x @ B`` (``x`` of shape (32, 64), ``B`` fixed) in ``dtype``, float32 accumulator."""
    a, b = x.to(dtype), _B.to(dtype)
    c = torch.empty(a.shape[0], b.shape[1], dtype=dtype)
    matmul_kernel[(a.shape[0] // 16, b.shape[1] // 16)](
        a, b, c, a.shape[0], b.shape[1], a.shape[1], BLOCK_M=16, BLOCK_N=16, BLOCK_K=16
    )
    return c


def matmul_reference(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    return x.to(dtype) @ _B.to(dtype)


_W = (1 + _on_grid(torch.float32, 96, seed=8, scale=1 / 4)).to(torch.bfloat16).float()
_BIAS = _on_grid(torch.bfloat16, 96, seed=9, scale=1 / 4)


def layer_norm(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """Layer norm of the rows of ``x`` (a multiple of 16 rows, 96 wide) with a fixed affine
    transform, in ``dtype``."""
    x, w, b = x.to(dtype), _W.to(dtype), _BIAS.to(dtype)
    y = torch.empty_like(x)
    layer_norm_kernel[(x.shape[0] // 16,)](x, w, b, y, x.shape[1], 1e-5, ROWS=16, BLOCK=128)
    return y


def layer_norm_reference(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(
        x.to(dtype), (x.shape[-1],), _W.to(dtype), _BIAS.to(dtype), 1e-5
    )


_W_OFF_GRID = 1 + _on_grid(torch.float32, 96, seed=8, scale=1 / 4)


def layer_norm_converting(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """:func:`layer_norm` with a float32 weight off ``dtype``'s grid, converted inside the
    function (the reference keeps it in float64)."""
    x, w, b = x.to(dtype), _W_OFF_GRID.to(dtype), _BIAS.to(dtype)
    y = torch.empty_like(x)
    layer_norm_kernel[(x.shape[0] // 16,)](x, w, b, y, x.shape[1], 1e-5, ROWS=16, BLOCK=128)
    return y


def layer_norm_converting_reference(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(
        x.to(dtype), (x.shape[-1],), _W_OFF_GRID.to(dtype), _BIAS.to(dtype), 1e-5
    )


def cumsum(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    """Row prefix sums of ``x`` (a multiple of 16 rows of at most 128) in ``dtype``."""
    x = x.to(dtype)
    y = torch.empty_like(x)
    cumsum_kernel[(x.shape[0] // 16,)](x, y, x.shape[1], ROWS=16, BLOCK=128)
    return y


def cumsum_reference(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x.to(dtype), dim=-1)


Run = Callable[[torch.dtype, torch.Tensor], torch.Tensor]
Draw = Callable[[int], torch.Tensor]

#: name -> (run, reference, draw(seed) -> the input, already on the kernel format's grid, dtype):
#: as the examples use the kernels (examples/test_triton_kernels.py), inputs and parameters are
#: given in the kernel's format and the reference starts from them, so the error is the
#: kernel's own
KERNELS: dict[str, tuple[Run, Run, Draw, torch.dtype]] = {
    "softmax, 16x100, float16": (
        softmax,
        softmax_reference,
        lambda seed: _on_grid(torch.float16, 16, 100, seed=seed, scale=3.0),
        torch.float16,
    ),
    "matmul, 32x64 @ 64x32, float16": (
        matmul,
        matmul_reference,
        lambda seed: _on_grid(torch.float16, 32, 64, seed=seed),
        torch.float16,
    ),
    "layer norm, 16x96, bfloat16": (
        layer_norm,
        layer_norm_reference,
        lambda seed: _on_grid(torch.bfloat16, 16, 96, seed=seed),
        torch.bfloat16,
    ),
    "cumsum, 16x128, float32": (
        cumsum,
        cumsum_reference,
        lambda seed: _on_grid(torch.float32, 16, 128, seed=seed),
        torch.float32,
    ),
    "cumsum, 16x128, float16": (
        cumsum,
        cumsum_reference,
        lambda seed: _on_grid(torch.float16, 16, 128, seed=seed),
        torch.float16,
    ),
}

#: inputs or parameters off the kernel format's grid, converted inside the function, against
#: the float64 reference of the unconverted values (benchmarks/bench_stochastic.py reports them
#: apart): the conversion's rounding is part of the error and of the samples
CONVERTING: dict[str, tuple[Run, Run, Draw, torch.dtype]] = {
    "softmax, 16x100, float16, input converted inside fn": (
        softmax_converting,
        softmax_converting_reference,
        lambda seed: torch.randn(16, 100, generator=torch.Generator().manual_seed(seed)),
        torch.float16,
    ),
    "layer norm, 16x96, bfloat16, weight converted inside fn": (
        layer_norm_converting,
        layer_norm_converting_reference,
        lambda seed: _on_grid(torch.bfloat16, 16, 96, seed=seed),
        torch.bfloat16,
    ),
}
