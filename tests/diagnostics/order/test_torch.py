"""fp.order adapters for PyTorch tensors on the CPU: revealed orders reproduce torch bit for bit
(the CUDA path differs only by the ``device`` the tensors are copied to)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_fpcheck.diagnostics.order import dot_of, matmul_of, reveal_order, sum_of
from pytest_fpcheck.errors import InvalidArgument

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n", [8, 100, 1024])
def test_torch_sum_float32(n: int) -> None:
    impl = sum_of(torch.sum)
    tree = reveal_order(impl, n)
    assert tree.verify(impl)
    if n <= 100:
        assert reveal_order(impl, n, algorithm="basic") == tree


@pytest.mark.parametrize(("dtype", "n"), [("float16", 300), ("bfloat16", 700)])
def test_torch_sum_of_half_formats_accumulates_in_float32(dtype: str, n: int) -> None:
    """bfloat16 beyond 258 terms needs FPRev's accumulator mitigation (section 8.1.2)."""
    impl = sum_of(torch.sum, accumulator="float32")
    tree = reveal_order(impl, n, dtype=dtype)
    assert tree.verify(impl, accumulator="float32")
    assert not tree.verify(impl)  # the order alone, in the input format, is not enough


def test_torch_dot_gemv_gemm() -> None:
    for impl, n in [
        (dot_of(torch.dot), 256),
        (matmul_of(torch.matmul, 1, 96, 5, col=4), 96),
        (matmul_of(torch.mm, 4, 64, 4, row=3, col=1, masked="b"), 64),
        (matmul_of(torch.matmul, 8, 64, 8), 64),
    ]:
        tree = reveal_order(impl, n)
        assert tree.verify(impl), impl


def test_float8_products_through_float32() -> None:
    def dot32(a: Any, b: Any) -> Any:
        return torch.dot(a.float(), b.float())

    tree = reveal_order(dot_of(dot32, backend="torch"), 64, dtype="float8_e5m2")
    assert tree == reveal_order(dot_of(torch.dot), 64)
    assert tree.verify(
        dot_of(dot32, backend="torch", scale=False), accumulator="float32", output="float32"
    )


def test_device_and_results() -> None:
    assert reveal_order(sum_of(torch.sum, device="cpu"), 16) == reveal_order(sum_of(torch.sum), 16)
    with pytest.raises(
        InvalidArgument,
        match=re.escape("is not valid: expected a one-element tensor holding the sum."),
    ):
        reveal_order(sum_of(lambda t: t[:2], backend="torch"), 4)
