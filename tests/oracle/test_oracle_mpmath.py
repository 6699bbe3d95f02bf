"""The mpmath oracle: each supported operation carried out by mpmath at dps digits, casts
ignored, the result rounded once to float64; unsupported operations refused by name."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest

from pytest_fpcheck.errors import InvalidArgument, UnsupportedOperation, describe_value
from pytest_fpcheck.oracle import mpmath_oracle

torch = pytest.importorskip("torch")

CANCELLING = [1.0, 1e-20, -1.0]


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The correctly rounded product of two float arrays, by exact rational arithmetic."""
    rows, inner = a.shape
    cols = b.shape[1]
    out = np.empty((rows, cols))
    for i in range(rows):
        for j in range(cols):
            total = sum(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) for k in range(inner))
            out[i, j] = float(total)
    return out


def test_numpy_sum_is_exact_where_float64_cancels() -> None:
    x = np.array(CANCELLING)
    assert np.sum(x) == 0.0
    assert mpmath_oracle(np.sum)(x) == 1e-20


def test_numpy_casts_are_ignored_and_matmul_is_correctly_rounded() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float16)
    b = rng.standard_normal((7, 3)).astype(np.float16)

    def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float32) @ y.astype(np.float32)).astype(np.float16)

    np.testing.assert_array_equal(mpmath_oracle(reference)(a, b), exact_matmul(a, b))


@pytest.mark.parametrize(
    ("ufunc", "function"),
    [(np.exp, mpmath.exp), (np.log, mpmath.log), (np.sqrt, mpmath.sqrt), (np.tanh, mpmath.tanh)],
)
def test_numpy_elementary_functions_are_correctly_rounded(ufunc: Any, function: Any) -> None:
    x = np.array([0.1, 0.7, 2.5, 11.0])
    with mpmath.workdps(60):
        expected = np.array([float(function(mpmath.mpf(v))) for v in x])
    np.testing.assert_array_equal(mpmath_oracle(lambda v: ufunc(v) * 1.0)(x), expected)


def test_numpy_mean_max_and_in_place_accumulation() -> None:
    x = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])

    def reference(v: np.ndarray) -> np.ndarray:
        acc = np.zeros_like(v[0])
        for row in v:
            acc += row * 3
        return acc.mean() + v.max() + np.maximum(v, 0.25).sum()

    with mpmath.workdps(60):
        rows = [[mpmath.mpf(float(e)) for e in r] for r in x]
        acc = [3 * rows[0][j] + 3 * rows[1][j] for j in range(3)]
        clipped = sum(max(e, mpmath.mpf(0.25)) for r in rows for e in r)
        expected = float(sum(acc) / 3 + mpmath.mpf(0.6) + clipped)
    assert mpmath_oracle(reference)(x) == expected


def test_dps_sets_the_precision() -> None:
    def reference(x: np.ndarray) -> Any:
        return (x + 2.0**-100) - x

    x = np.array([1.0])
    assert mpmath_oracle(reference, dps=40)(x)[0] == 2.0**-100
    assert mpmath_oracle(reference, dps=20)(x)[0] == 0.0


@pytest.mark.parametrize("dps", [16, 40.0, True])
def test_bad_dps_is_refused(dps: Any) -> None:
    message = (
        f"dps={dps!r} (type {type(dps).__name__}) is not valid: expected an int >= 17 (decimal "
        "digits; float64 itself holds about 16)."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        mpmath_oracle(np.sum, dps=dps)


def test_numpy_unsupported_ufunc_is_named() -> None:
    message = (
        "the mpmath oracle cannot evaluate operation 'numpy.sinh': it has no mpmath rule "
        "(supported: absolute, add, cos, divide, equal, exp, expm1, greater, greater_equal, "
        "less, less_equal, log, log1p, matmul, maximum, minimum, multiply, negative, not_equal, "
        "positive, power, sin, sqrt, square, subtract, tanh). Pass oracle='fp64' or "
        "oracle=<callable>."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        mpmath_oracle(np.sinh)(np.ones(2))


def test_numpy_function_without_object_support_is_named() -> None:
    with pytest.raises(
        UnsupportedOperation,
        match=re.escape(
            "the mpmath oracle cannot evaluate operation 'numpy.linalg.inv': it does not work "
            "on arrays of mpmath numbers ("
        ),
    ):
        mpmath_oracle(np.linalg.inv)(np.eye(2))


def test_numpy_write_into_a_float_array_is_refused() -> None:
    def reference(x: np.ndarray) -> np.ndarray:
        acc = np.zeros(x.shape)
        acc += x
        return acc

    message = (
        "the mpmath oracle cannot evaluate operation 'numpy.add(out=...)': it would write "
        "mpmath values into a float64 array and round them. Create the array from the inputs "
        "(np.zeros_like(x)) inside the reference."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        mpmath_oracle(reference)(np.ones(2))


def blocked_fp16_matmul(a: Any, b: Any) -> Any:
    """Block products in float32 rounded to float16, accumulated in place in float16."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16)
    for start in range(0, a.shape[1], 4):
        acc += (a[:, start : start + 4].float() @ b[start : start + 4].float()).half()
    return acc


def test_torch_blocked_low_precision_matmul_is_exact() -> None:
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(6, 12, generator=gen).half()
    b = torch.randn(12, 5, generator=gen).half()
    out = mpmath_oracle(blocked_fp16_matmul)(a, b)
    np.testing.assert_array_equal(out, exact_matmul(a.double().numpy(), b.double().numpy()))
    assert not np.array_equal(blocked_fp16_matmul(a, b).double().numpy(), out)


def test_torch_reductions_views_and_elementary_functions() -> None:
    x = torch.tensor([[1.0, 1e-20, -1.0], [0.5, 0.25, 0.125]], dtype=torch.float64)

    def reference(t: Any) -> Any:
        rows = torch.stack([t[0], t.T[:, 1]]).flip(0)
        return torch.exp(rows.sum(dim=1)) + torch.sqrt(t.abs()).mean() - torch.tanh(t[1, 2])

    with mpmath.workdps(60):
        m = [[mpmath.mpf(float(v)) for v in row] for row in x.tolist()]
        sums = [m[1][0] + m[1][1] + m[1][2], m[0][0] + m[0][1] + m[0][2]]
        mean_sqrt = sum(mpmath.sqrt(abs(v)) for row in m for v in row) / 6
        expected = [float(mpmath.exp(s) + mean_sqrt - mpmath.tanh(m[1][2])) for s in sums]
    np.testing.assert_array_equal(mpmath_oracle(reference)(x), expected)


def test_torch_unsupported_operation_is_named() -> None:
    with pytest.raises(
        UnsupportedOperation,
        match=re.escape(
            "the mpmath oracle cannot evaluate operation 'aten._softmax.default': it has no "
            "mpmath rule (arithmetic supported: abs, add, add_, addmm, bmm, copy_, div, div_, "
            "exp, fill_, log, maximum, mean, minimum, mm, mul, mul_, neg, pow, relu, rsub, sqrt, "
            "sub, sub_, sum, tanh, zero_; data movement and floating conversions are exact). "
            "Pass oracle='fp64' or oracle=<callable>."
        ),
    ):
        mpmath_oracle(lambda t: torch.softmax(t, dim=0))(torch.ones(3))


def test_torch_write_through_an_alias_is_refused() -> None:
    def reference(t: Any) -> Any:
        row = t[0]
        t.mul_(2)
        return row

    message = (
        "the mpmath oracle cannot evaluate operation 'aten.mul_.Tensor': it writes into a "
        "tensor that is a view or has a live view, whose mpmath values would go stale. Write "
        "into a fresh tensor (x = x + y, torch.cat, torch.stack) instead."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        mpmath_oracle(reference)(torch.ones(2, 2))


def test_torch_conversion_to_integers_is_refused() -> None:
    message = (
        "the mpmath oracle cannot evaluate operation 'aten._to_copy.default': it converts "
        "floating values to torch.int64, which has no mpmath rule. Pass oracle='fp64' or "
        "oracle=<callable>."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        mpmath_oracle(lambda t: t.long())(torch.ones(2))


def test_torch_reference_must_return_one_tensor() -> None:
    def reference(t: Any) -> Any:
        return t.sum(), t

    message = (
        f"reference={describe_value(reference)} (type function) is not valid: expected a "
        "function returning one tensor: the mpmath oracle returns that tensor's mpmath values, "
        "and this one returned (tensor(2.), tensor([1., 1.]))."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        mpmath_oracle(reference)(torch.ones(2))
