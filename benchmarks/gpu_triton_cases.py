"""The example Triton kernels (``examples/test_triton_kernels.py``) as seeded cases that run on
any device: compiled for a GPU by ``gpu_checks.py --sections triton``, and through the
instrumented interpreter by ``gpu_triton_bounds.py``, which checks that every value the compiled
kernel stored lies in the interpreter's enclosure (the bounds claim to cover the GPU's
arithmetic: TF32 and float16 ``tl.dot`` on tensor cores, its ``exp``, atomics in any order).

Whether a kernel is compiled or interpreted is decided when ``triton.jit`` runs: import this
module after setting (or not setting) ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import test_triton_kernels as K

Inputs = dict[str, torch.Tensor]


def _matmul(precision: str, split_k: int, dtype: torch.dtype) -> Callable[[Inputs], torch.Tensor]:
    def run(t: Inputs) -> torch.Tensor:
        a, b = t["a"], t["b"]
        (m, k), n = a.shape, b.shape[1]
        c = torch.zeros(m, n, dtype=dtype, device=a.device)
        grid = (triton.cdiv(m, 16), triton.cdiv(n, 16), split_k)
        K.matmul_kernel[grid](
            a, b, c, m, n, k, *a.stride(), *b.stride(),
            BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, PRECISION=precision, SPLIT_K=split_k,
        )  # fmt: skip
        return c

    return run


def _softmax(t: Inputs) -> torch.Tensor:
    x = t["x"]
    y = torch.empty_like(x)
    K.softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=128)
    return y


def _attention(t: Inputs) -> torch.Tensor:
    q, k, v = t["q"], t["k"], t["v"]
    seq, d = q.shape
    out = torch.empty_like(q)
    K.attention_kernel[(seq // 16,)](q, k, v, out, seq, d**-0.5, D=d, BLOCK_M=16, BLOCK_N=16)
    return out


def _gaussian(generator: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return scale * torch.randn(*shape, generator=generator)


#: name -> (inputs from a seed, the launch); every input is made on the CPU, then moved
CASES: dict[str, tuple[Callable[[torch.Generator], Inputs], Callable[[Inputs], torch.Tensor]]] = {
    "matmul float32 ieee": (
        lambda g: {"a": _gaussian(g, 64, 256), "b": _gaussian(g, 256, 64)},
        _matmul("ieee", 1, torch.float32),
    ),
    "matmul float32 tf32": (
        lambda g: {"a": _gaussian(g, 64, 256), "b": _gaussian(g, 256, 64)},
        _matmul("tf32", 1, torch.float32),
    ),
    "matmul float32 split-K 4 (atomics)": (
        lambda g: {"a": _gaussian(g, 32, 256), "b": _gaussian(g, 256, 32)},
        _matmul("ieee", 4, torch.float32),
    ),
    "matmul float16": (
        lambda g: {"a": _gaussian(g, 64, 256).half(), "b": _gaussian(g, 256, 64).half()},
        _matmul("ieee", 1, torch.float16),
    ),
    "softmax float16": (lambda g: {"x": _gaussian(g, 16, 100, scale=3.0).half()}, _softmax),
    "flash attention float16": (
        lambda g: {name: _gaussian(g, 64, 16).half() for name in "qkv"},
        _attention,
    ),
}


def inputs_of(name: str, seed: int) -> Inputs:
    """The seeded inputs of case ``name`` (on the CPU)."""
    make, _ = CASES[name]
    return make(torch.Generator().manual_seed(seed))


def launch(name: str, inputs: Inputs) -> torch.Tensor:
    """Case ``name``'s kernel on ``inputs`` (on their device), its output."""
    _, run = CASES[name]
    return run(inputs)
