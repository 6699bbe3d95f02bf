"""The fp64 oracle: inputs promoted to float64; PyTorch references kept in float64 throughout,
their own down-casts included; lossy operations refused with a message."""

from __future__ import annotations

import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from pytest_fpcheck.errors import InvalidArgument, UnsupportedOperation, describe_value
from pytest_fpcheck.oracle import fp64_oracle, resolve_oracle

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
)
def test_numpy_inputs_reach_the_reference_as_float64(dtype: Any) -> None:
    seen: list[np.dtype[Any]] = []

    def reference(x: np.ndarray, scale: np.generic) -> np.ndarray:
        seen.extend([x.dtype, np.asarray(scale).dtype])
        return x * scale

    x = np.array([0.1, 0.2, 0.3]).astype(dtype)
    out = fp64_oracle(reference)(x, dtype(3.0))
    assert seen == [np.dtype(np.float64), np.dtype(np.float64)]
    np.testing.assert_array_equal(out, x.astype(np.float64) * 3.0)


def test_integer_arguments_pass_unchanged() -> None:
    out = fp64_oracle(lambda x, k: x[:k].sum())(np.ones(4, np.float16), 2)
    assert out == 2.0


def test_a_numpy_reference_that_casts_internally_is_refused() -> None:
    def reference(a: np.ndarray) -> np.ndarray:
        return (a.astype(np.float32) * 3).astype(np.float16)

    message = (
        f"reference={describe_value(reference)} (type function) is not valid: expected a function that "
        "computes in its inputs' precision: called by the fp64 oracle on float64 inputs it "
        "returned float16, so it casts internally. NumPy gives no hook to undo a cast inside a "
        "function: use a PyTorch reference (the fp64 oracle intercepts its casts) or pass "
        "oracle=<callable> computing the result in float64."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fp64_oracle(reference)(np.ones(3, np.float16))


def fp16_matmul_with_casts(a: Any, b: Any) -> Any:
    """A reference written for float16: up-cast, multiply in float32, round to float16."""
    return (a.float() @ b.float()).half()


def test_torch_casts_inside_the_reference_stay_float64() -> None:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(16, 64, generator=gen).half()
    b = torch.randn(64, 16, generator=gen).half()
    out = fp64_oracle(fp16_matmul_with_casts)(a, b)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, a.double() @ b.double(), rtol=0, atol=0)
    # Without the oracle the same function rounds to float16:
    assert not torch.equal(fp16_matmul_with_casts(a, b).double(), a.double() @ b.double())


def test_torch_factories_reductions_and_literals_are_float64() -> None:
    def reference(x: Any) -> Any:
        acc = torch.zeros(x.shape, dtype=torch.float16)
        acc += x
        plain = torch.zeros(3)
        assert plain.dtype == torch.float64
        return acc.sum(dtype=torch.float32) + torch.tensor(0.1) + torch.arange(3.0).sum()

    x = torch.full((4,), 1 / 3, dtype=torch.float16)
    out = fp64_oracle(reference)(x)
    assert out.dtype == torch.float64
    assert out.item() == x.double().sum().item() + 0.1 + 3.0


def test_softmax_fused_upcast_is_kept_in_float64() -> None:
    x = torch.linspace(-1, 1, 7).half()
    out = fp64_oracle(lambda t: torch.softmax(t, dim=0, dtype=torch.float32))(x)
    torch.testing.assert_close(out, torch.softmax(x.double(), dim=0), rtol=0, atol=0)


def test_bfloat16_and_complex_inputs_are_promoted() -> None:
    seen: list[Any] = []

    def reference(x: Any, z: Any) -> Any:
        seen.extend([x.dtype, z.dtype])
        return x * 2

    fp64_oracle(reference)(
        torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.complex64)
    )
    assert seen == [torch.float64, torch.complex128]


def test_default_dtype_is_restored_even_after_an_error() -> None:
    before = torch.get_default_dtype()

    def failing(x: Any) -> Any:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fp64_oracle(failing)(torch.ones(2))
    assert torch.get_default_dtype() == before


def test_bit_reinterpretation_is_refused() -> None:
    message = (
        "the fp64 oracle cannot evaluate operation 'aten.view.dtype': Tensor.view(torch.int16) "
        "reinterprets the bits of a torch.float64 tensor, which has no meaning once the values "
        "are promoted. Pass oracle=<callable> that computes the reference result in high "
        "precision."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        fp64_oracle(lambda x: x.view(torch.int16))(torch.ones(4, dtype=torch.float16))


def test_writing_into_a_low_precision_buffer_from_outside_is_refused() -> None:
    buffer = torch.zeros(2, 2, dtype=torch.float16)

    def reference(a: Any) -> Any:
        buffer.copy_(a @ a)
        return buffer

    message = (
        "the fp64 oracle cannot evaluate operation 'aten.copy_.default': it writes into a "
        "torch.float16 tensor of shape (2, 2) created outside the oracle, and a promoted copy "
        "would not be seen by its owner. Create the buffer inside the reference (e.g. "
        "torch.zeros_like(x)), or pass oracle=<callable>."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        fp64_oracle(reference)(torch.eye(2, dtype=torch.float16))


def test_resolve_oracle_names_and_callables() -> None:
    def exact(x: Any) -> Any:
        return x

    assert resolve_oracle(exact, exact) is exact
    assert resolve_oracle("fp64", exact).__name__ == "fp64(exact)"
    assert resolve_oracle("mpmath", exact).__name__ == "mpmath(exact, dps=40)"
    message = (
        "oracle='fp32' (type str) is not valid: expected 'fp64', 'mpmath', 'arb' or a callable "
        "oracle(*args) returning the exact result."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        resolve_oracle("fp32", exact)
