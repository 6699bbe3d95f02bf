"""A Triton reduction kernel run by the interpreter on CPU tensors is, to fp.order, a function of
torch tensors: its order is revealed like any other."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: run kernels on the CPU

import pytest

from pytest_fpcheck.diagnostics.order import reveal_order, sum_of

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def block_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(x, axis=0))


@triton.jit
def lane_sum_kernel(x_ptr, out_ptr, n, LANES: tl.constexpr):  # type: ignore[no-untyped-def]
    lanes = tl.zeros([LANES], dtype=tl.float32)
    for start in range(0, n, LANES):
        offsets = start + tl.arange(0, LANES)
        lanes += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(lanes, axis=0))


def launch(kernel, **meta):  # type: ignore[no-untyped-def]
    def run(x):  # type: ignore[no-untyped-def]
        out = torch.empty(1, dtype=x.dtype)
        kernel[(1,)](x, out, x.numel(), **meta)
        return out

    return run


def test_tl_sum_of_one_block() -> None:
    impl = sum_of(launch(block_sum_kernel, BLOCK=32), backend="torch")
    tree = reveal_order(impl, 20)
    assert tree.verify(impl)
    assert reveal_order(impl, 12, algorithm="basic") == reveal_order(impl, 12)


def test_lanes_accumulated_in_a_loop() -> None:
    impl = sum_of(launch(lane_sum_kernel, LANES=4), backend="torch")
    tree = reveal_order(impl, 32)
    assert tree.verify(impl)
    clusters = {tuple(tree.leaves(v).tolist()) for v in range(tree.n, tree.root + 1)}
    for lane in range(4):  # lane l adds x[l], x[l+4], ... in order
        terms = list(range(lane, 32, 4))
        assert all(tuple(terms[:k]) in clusters for k in range(2, len(terms) + 1))
