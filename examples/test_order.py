"""Revealing accumulation orders with FPRev: the orders this machine's NumPy and PyTorch use for
sum, dot, GEMV and GEMM (docs/order.md shows the output of ``pytest examples/test_order.py -s``).

``fp.order`` is ``pytest_fpcheck.diagnostics.order``; ``fp.reveal_order``, ``fp.assert_same_order``
and ``fp.SummationTree`` are the same functions, exported at the package root.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_fpcheck.diagnostics import order

torch = pytest.importorskip("torch")

# Under ``pytest --fpcheck`` these tests run untracked: FPRev calls the library on masked inputs
# (14,094 calls of torch.sum for n = 4096) and needs their outputs, not round-off bounds. The
# revealed orders still reach the run report.
pytestmark = pytest.mark.fpcheck(enabled=False)

CASES = {
    "numpy.sum": order.sum_of(np.sum),
    "numpy.dot": order.dot_of(np.dot),
    "torch.sum": order.sum_of(torch.sum),
    "torch.dot": order.dot_of(torch.dot),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("n", [64, 256, 4096])
def test_vector_orders(name: str, n: int) -> None:
    impl = CASES[name]
    tree = order.reveal_order(impl, n)
    print(f"\n{name}, n={n}, float32:\n{tree.to_text(max_lines=10)}")
    assert tree.verify(impl)  # the revealed order reproduces the library bit for bit


@pytest.mark.parametrize("library", ["numpy", "torch"])
@pytest.mark.parametrize("shape", [(1, 256, 64), (64, 256, 64)])
def test_matrix_orders(library: str, shape: tuple[int, int, int]) -> None:
    """GEMV (m = 1) and GEMM: how output element (0, 0) accumulates its k products."""
    matmul = np.matmul if library == "numpy" else torch.matmul
    m, k, n = shape
    impl = order.matmul_of(matmul, m, k, n)
    tree = order.reveal_order(impl, k)
    print(f"\n{library}.matmul, ({m}x{k}) @ ({k}x{n}), element (0, 0):\n{tree.to_text()}")
    assert tree.verify(impl)


def test_openblas_dot_adds_short_tails_in_float64() -> None:
    """The order is revealed, but replaying it in float32 does not reproduce numpy.dot below 32
    terms: OpenBLAS adds what its 32-wide kernel leaves over in double precision."""
    impl = order.dot_of(np.dot)
    tree = order.reveal_order(impl, 16)
    print(f"\nnumpy.dot, n=16, float32:\n{tree.to_text()}")
    assert not tree.verify(impl)
    assert tree.verify(impl, accumulator="float64")


def test_numpy_and_torch_sum_float32_differently() -> None:
    with pytest.raises(order.OrderMismatch) as mismatch:
        order.assert_same_order(order.sum_of(np.sum), order.sum_of(torch.sum), 64)
    print(f"\n{mismatch.value}")


def test_half_precision_sums_accumulate_in_float32() -> None:
    """torch.sum of bfloat16 adds in float32 (the accumulator must be named so the masks are
    chosen for it); 700 terms is beyond what bfloat16 counts exactly, FPRev section 8.1.2."""
    impl = order.sum_of(torch.sum, accumulator="float32")
    tree = order.reveal_order(impl, 700, dtype="bfloat16")
    print(f"\ntorch.sum, n=700, bfloat16:\n{tree.to_text(max_lines=8)}")
    assert tree.verify(impl, accumulator="float32")
    assert not tree.verify(impl)  # adding in bfloat16 in the same order would round differently


def test_an_exactly_rounded_sum_is_one_fused_node() -> None:
    tree = order.reveal_order(order.sum_of(math.fsum), 8, dtype="float64")
    print(f"\nmath.fsum: {tree.to_nested()} (fan-out {tree.fanout()})")
    assert tree.fanout() == 8
    assert tree.verify(order.sum_of(math.fsum))


def test_error_factor_of_the_revealed_order() -> None:
    n = 4096
    u = 2.0**-24
    tree = order.reveal_order(order.sum_of(np.sum), n)
    sequential = order.SummationTree(n, [[0, 1], *([n + i, i + 2] for i in range(n - 2))])
    print(
        f"\nnumpy.sum of {n} float32: depth {tree.depth()}, error factor "
        f"{tree.error_factor(u):.3e}; sequential: depth {sequential.depth()}, "
        f"{sequential.error_factor(u):.3e}"
    )
    assert tree.error_factor(u) < sequential.error_factor(u) / 100
