"""fp.order adapters for NumPy (ml_dtypes included) and plain Python callables: the orders they
reveal reproduce the implementation bit for bit, and bad arguments are named."""

from __future__ import annotations

import functools
import math
import re
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck.diagnostics.order import (
    OrderRevealError,
    SummationTree,
    dot_of,
    matmul_of,
    reveal_order,
    sum_of,
)
from pytest_fpcheck.errors import InvalidArgument

from .test_trees import sequential


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("n", [5, 64, 1000])
def test_numpy_sum(dtype: str, n: int) -> None:
    impl = sum_of(np.sum)
    tree = reveal_order(impl, n, dtype=dtype)
    assert tree.verify(impl, accumulator="float32" if dtype == "float16" else None)
    if n <= 64:
        assert reveal_order(impl, n, dtype=dtype, algorithm="basic") == tree


def test_numpy_dot_gemv_gemm() -> None:
    for impl, n in [
        (dot_of(np.dot), 256),
        (dot_of(np.dot, masked="y"), 33),
        (matmul_of(np.matmul, 1, 100, 7, col=3), 100),
        (matmul_of(np.matmul, 5, 64, 6, row=4, col=5, masked="b"), 64),
    ]:
        tree = reveal_order(impl, n)
        assert tree.verify(impl), impl


def test_ml_dtypes_sums_are_sequential() -> None:
    """ml_dtypes' add loop has no pairwise summation: NumPy reduces it one term at a time."""
    for dtype, n in [("bfloat16", 40), ("float8_e4m3fn", 40), ("float8_e5m2", 30)]:
        impl = sum_of(np.sum)
        tree = reveal_order(impl, n, dtype=dtype)
        assert tree == sequential(n)
        assert tree.verify(impl)


def test_float8_dot_scales_both_operands() -> None:
    """FPRev section 8.1.1: float8 masks cannot swamp unit products in float32; scaling both
    operands squares the range."""

    def dot32(a: Any, b: Any) -> Any:
        return np.dot(a.astype(np.float32), b.astype(np.float32))

    tree = reveal_order(dot_of(dot32, backend="numpy"), 64, dtype="float8_e4m3fn")
    plain = dot_of(dot32, backend="numpy", scale=False)
    assert tree == reveal_order(dot_of(np.dot, backend="numpy"), 64, dtype="float32")
    assert tree.verify(plain, accumulator="float32", output="float32")
    unscaled = dot_of(dot32, backend="numpy", scale=False, accumulator="float32")
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "n=64 (type int) is not valid: expected at most 2 for float8_e4m3fn summed in float32."
        ),
    ):
        reveal_order(unscaled, 64, dtype="float8_e4m3fn")


def test_python_callables_get_lists() -> None:
    assert reveal_order(sum_of(sum), 30, dtype="float64") == sequential(30)
    fsum = reveal_order(sum_of(math.fsum), 30, dtype="float64")
    assert fsum == SummationTree.from_nested(tuple(range(30)))
    assert fsum.fanout() == 30
    dot = dot_of(lambda a, b: sum(p * q for p, q in zip(a, b, strict=True)), backend="python")
    assert reveal_order(dot, 12, dtype="float64") == sequential(12)


def _my_sum(x: Any) -> Any:
    total = x.dtype.type(0)
    for value in x:
        total = total + value
    return total


def test_a_partial_and_a_tensor_method_take_their_functions_backend() -> None:
    """A ``functools.partial`` names the module ``functools`` and a method descriptor
    ``builtins``: both were sent Python lists and failed inside torch (a hunt); they take the
    backend of the function they wrap."""
    torch = pytest.importorskip("torch")
    for fn in (functools.partial(torch.sum, dim=0), torch.Tensor.sum):
        impl = sum_of(fn)
        assert reveal_order(impl, 16, dtype="float32") == reveal_order(
            sum_of(torch.sum), 16, dtype="float32"
        )
    impl = sum_of(functools.partial(np.sum, dtype=np.float64))
    assert repr(impl) == "sum_of(partial(numpy.sum, dtype=<class 'numpy.float64'>))"
    assert reveal_order(impl, 16, dtype="float64") == reveal_order(
        sum_of(np.sum), 16, dtype="float64"
    )


def test_a_function_whose_module_says_nothing_gets_a_numpy_array() -> None:
    """Issue 19: ``sum_of(fn)`` of the user's own function needs no backend (it raised
    ``backend=None`` is not valid)."""
    assert reveal_order(sum_of(_my_sum), 9, dtype="float32") == sequential(9)
    assert reveal_order(sum_of(lambda x: x.sum()), 8, dtype="float64") == reveal_order(
        sum_of(np.sum), 8, dtype="float64"
    )
    dot = dot_of(lambda a, b: _my_sum(a * b))
    assert reveal_order(dot, 7, dtype="float32") == sequential(7)
    impl = matmul_of(lambda a, b: a @ b, 2, 9, 3, row=1, col=2)
    assert reveal_order(impl, 9, dtype="float64") == reveal_order(
        matmul_of(np.matmul, 2, 9, 3, row=1, col=2), 9, dtype="float64"
    )


def test_matmul_of_python_lists() -> None:
    def matmul(a: Any, b: Any) -> Any:
        return [[sum(r[k] * c[k] for k in range(len(r))) for c in zip(*b, strict=True)] for r in a]

    impl = matmul_of(matmul, 2, 9, 3, row=1, col=2, backend="python")
    assert reveal_order(impl, 9, dtype="float64") == sequential(9)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: sum_of(np.sum, backend="jax"),
            "backend='jax' (type str) is not valid: expected one of 'numpy', 'torch', 'python'.",
        ),
        (
            lambda: sum_of(np.sum, device="cuda"),
            "device='cuda' (type str) is not valid: expected None unless backend='torch'.",
        ),
        (lambda: sum_of(3), "fn=3 (type int) is not valid: expected a callable."),
        (
            lambda: dot_of(np.dot, masked="z"),
            "masked='z' (type str) is not valid: expected 'x' (the first operand) or 'y' (the "
            "second).",
        ),
        (
            lambda: matmul_of(np.matmul, 2, 0, 2),
            "k=0 (type int) is not valid: expected an int >= 1.",
        ),
        (
            lambda: matmul_of(np.matmul, 2, 3, 2, row=2),
            "row=2 (type int) is not valid: expected an output row in [0, 2).",
        ),
        (
            lambda: matmul_of(np.matmul, 2, 3, 2, col=-1),
            "col=-1 (type int) is not valid: expected an output column in [0, 2).",
        ),
        (
            lambda: matmul_of(np.matmul, 2, 3, 2, masked="c"),
            "masked='c' (type str) is not valid: expected 'a' (a row of A) or 'b' (a column of B).",
        ),
        (
            lambda: reveal_order(matmul_of(np.matmul, 2, 3, 2), 4),
            "n=4 (type int) is not valid: expected 3, the k of the matmul_of adapter.",
        ),
        (
            lambda: reveal_order(sum_of(np.sum, accumulator="float16"), 4),
            "accumulator='float16' (type str) is not valid: expected a format at least as "
            "precise as float32.",
        ),
        (
            lambda: reveal_order(
                dot_of(np.dot, accumulator="float8_e4m3fn"), 4, dtype="float8_e4m3fn"
            ),
            "accumulator='float8_e4m3fn' (type str) is not valid: expected a format that holds "
            "the scaled products (+-65536.0) of two float8_e4m3fn masks, e.g. 'float32'.",
        ),
    ],
)
def test_invalid_adapter_arguments(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            lambda x: x[:2],
            "<lambda>)=<numpy array of shape (2,) and dtype float32> (type ndarray) is not valid: "
            "expected a floating-point scalar holding the sum.",
        ),
        (
            lambda x: "3",
            "<lambda>)='3' (type str) is not valid: expected a floating-point scalar holding the "
            "sum.",
        ),
    ],
)
def test_invalid_results(result: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        reveal_order(sum_of(result, backend="numpy"), 4)


def test_plain_callables_returning_nothing_useful() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape("impl(x)=True (type bool) is not valid: expected a floating-point scalar"),
    ):
        reveal_order(lambda x: True, 4)
    with pytest.raises(OrderRevealError, match=re.escape("impl(x) returned 4.0 for the masked")):
        reveal_order(lambda x: 4.0, 4)


def test_revealing_a_numpy_order_imports_no_torch() -> None:
    code = (
        "import sys, numpy as np\n"
        "import pytest_fpcheck.diagnostics.order as order\n"
        "order.reveal_order(order.sum_of(np.sum), 64).verify(order.sum_of(np.sum))\n"
        "order.reveal_order(order.dot_of(np.dot), 64)\n"
        "heavy = [m for m in ('torch', 'triton', 'scipy', 'mpmath', 'hypothesis') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
