"""The Arb oracle and fp.exact_reference: exact conversions, the model zoo's operations against
mpmath at 100 digits, the precision rule (doubling, the error naming the operation), the mpmath
fallback, the exact reference's bounds and its call-out of a wrong float64 reference, and every
bad-argument path with its message."""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.errors import InvalidArgument, UnsupportedOperation
from pytest_fpcheck.oracle import resolve_oracle

flint = pytest.importorskip("flint")
torch = pytest.importorskip("torch")
F = torch.nn.functional

from pytest_fpcheck.oracle import arb_balls as balls  # noqa: E402 -- needs flint
from pytest_fpcheck.oracle.arb_eval import arb_oracle  # noqa: E402

arb = flint.arb


def test_nearest_rounds_subnormal_midpoints_correctly() -> None:
    # float(arb) flushes 3 * 2**-1075 to 0; the nearest float64 (a tie, to even) is 2**-1073
    values = np.array([arb(2) ** -1075 * 3, arb(2) ** -1076, arb(-1) / 3], dtype=object)
    with balls.working_precision(200):
        out = balls.nearest(values / 1)
    assert out.tolist() == [2.0**-1073, 0.0, -1 / 3]


def test_enclosure_rounds_outward_to_neighbouring_floats() -> None:
    with balls.working_precision(117):
        third = balls.to_balls(np.array([1.0, 2.0**-1074, 1e308])) / 3
        lo, hi = balls.enclosure(third * np.array([1, 1, 30], dtype=object))
    assert 1 / 3 in (lo[0], hi[0])
    assert np.nextafter(lo[0], 1) == hi[0]
    assert (lo[1], hi[1]) == (0.0, 2.0**-1074)
    assert (lo[2], hi[2]) == (np.finfo(np.float64).max, np.inf)


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            total = sum(
                Fraction(float(a[i, k])) * Fraction(float(b[k, j])) for k in range(a.shape[1])
            )
            out[i, j] = float(total)
    return out


def test_numpy_sum_and_matmul_are_exact_where_float64_cancels() -> None:
    x = np.array([1.0, 1e-20, -1.0])
    assert arb_oracle(np.sum)(x) == 1e-20
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 7)).astype(np.float16)
    b = rng.standard_normal((7, 3)).astype(np.float16)

    def reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x.astype(np.float32) @ y.astype(np.float32)).astype(np.float16)

    np.testing.assert_array_equal(arb_oracle(reference)(a, b), exact_matmul(a, b))


def test_torch_blocked_low_precision_matmul_is_exact() -> None:
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(6, 12, generator=gen).half()
    b = torch.randn(12, 5, generator=gen).half()

    def blocked(x: Any, y: Any) -> Any:
        acc = torch.zeros(x.shape[0], y.shape[1], dtype=torch.float16)
        for start in range(0, x.shape[1], 4):
            acc += (x[:, start : start + 4].float() @ y[start : start + 4].float()).half()
        return acc

    out = arb_oracle(blocked)(a, b)
    np.testing.assert_array_equal(out, exact_matmul(a.double().numpy(), b.double().numpy()))


def mp(values: Any) -> list[Any]:
    return [mpmath.mpf(float(v)) for v in np.asarray(values, dtype=np.float64).ravel()]


def softmax_mp(row: list[Any]) -> list[Any]:
    exps = [mpmath.exp(v) for v in row]
    return [e / mpmath.fsum(exps) for e in exps]


def layer_norm_mp(row: list[Any]) -> list[Any]:
    mean = mpmath.fsum(row) / len(row)
    var = mpmath.fsum((v - mean) ** 2 for v in row) / len(row)
    return [(v - mean) / mpmath.sqrt(var + mpmath.mpf(1e-5)) for v in row]


def gelu_tanh_mp(v: Any) -> Any:
    inner = mpmath.sqrt(2 / mpmath.pi) * (v + mpmath.mpf("0.044715") * v**3)
    return v * (1 + mpmath.tanh(inner)) / 2


ROWS: dict[str, tuple[Callable[[Any], Any], Callable[[list[Any]], list[Any]]]] = {
    "softmax": (lambda t: F.softmax(t, -1), softmax_mp),
    "log_softmax": (
        lambda t: F.log_softmax(t, -1),
        lambda r: [mpmath.log(v) for v in softmax_mp(r)],
    ),
    "layer_norm": (lambda t: F.layer_norm(t, (t.shape[-1],)), layer_norm_mp),
    "rms_norm": (
        lambda t: F.rms_norm(t, (t.shape[-1],), eps=1e-6),
        lambda r: [
            v / mpmath.sqrt(mpmath.fsum(u * u for u in r) / len(r) + mpmath.mpf(1e-6)) for v in r
        ],
    ),
    "gelu": (F.gelu, lambda r: [v * (1 + mpmath.erf(v / mpmath.sqrt(2))) / 2 for v in r]),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), lambda r: [gelu_tanh_mp(v) for v in r]),
    "silu": (F.silu, lambda r: [v / (1 + mpmath.exp(-v)) for v in r]),
    "var": (
        lambda t: t.var(-1, keepdim=True),
        lambda r: [mpmath.fsum((v - mpmath.fsum(r) / len(r)) ** 2 for v in r) / (len(r) - 1)],
    ),
    "amax_plus_mean": (
        lambda t: t.amax(-1, keepdim=True) + t.mean(-1, keepdim=True),
        lambda r: [max(r) + mpmath.fsum(r) / len(r)],
    ),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_operations_match_mpmath_at_100_digits(name: str) -> None:
    function, exact = ROWS[name]
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float32) * 3
    with mpmath.workdps(100):
        expected = [[float(v) for v in exact(mp(row))] for row in x.double()]
    np.testing.assert_array_equal(arb_oracle(function)(x), np.array(expected))


def test_attention_convolution_and_embedding_match_mpmath_at_100_digits() -> None:
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 4, 3, generator=gen) for _ in range(3))
    weight = torch.randn(2, 3, 2, generator=gen)
    table = torch.randn(5, 3, generator=gen)
    ids = torch.tensor([4, 0, 4])

    def reference(q: Any, k: Any, v: Any, weight: Any, table: Any) -> Any:
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0]  # (4, 3)
        convolved = F.conv1d(attended.T[None], weight, padding=1)[0]  # (2, 5)
        return convolved @ F.embedding(ids, table)[:, :2].repeat(2, 1)[:5]

    with mpmath.workdps(100):
        Q, K, V = ([mp(r) for r in t[0].double()] for t in (q, k, v))
        root = mpmath.mpf(math.sqrt(1 / math.sqrt(3)))  # ATen scales q and k by this float
        att = []
        for i in range(4):
            scores = [
                mpmath.fsum(a * root * b * root for a, b in zip(Q[i], K[j], strict=True))
                for j in range(i + 1)
            ]
            weights = softmax_mp(scores)
            att.append([mpmath.fsum(w * V[j][c] for j, w in enumerate(weights)) for c in range(3)])
        W = weight.double().numpy()
        conv = [
            [
                mpmath.fsum(
                    mpmath.mpf(float(W[o, c, t])) * att[p + t - 1][c]
                    for c in range(3)
                    for t in range(2)
                    if 0 <= p + t - 1 < 4
                )
                for p in range(5)
            ]
            for o in range(2)
        ]
        emb = table.double().numpy()[ids.numpy()][:, :2]
        right = np.concatenate([emb, emb])[:5]
        expected = [
            [
                float(mpmath.fsum(conv[o][p] * mpmath.mpf(float(right[p, c])) for p in range(5)))
                for c in range(2)
            ]
            for o in range(2)
        ]
    np.testing.assert_array_equal(arb_oracle(reference)(q, k, v, weight, table), np.array(expected))


def test_precision_doubles_until_the_result_is_narrow() -> None:
    x = torch.tensor([1.0, -3.0], dtype=torch.float64)
    bounds = fp.exact_reference(lambda t: (t + 2.0**-200) - t, x)
    assert bounds.value.tolist() == [2.0**-200, 2.0**-200]
    assert bounds.notes[0].startswith(
        "the exact result of <lambda>: Arb ball arithmetic at 234 bits"
    )
    assert arb_oracle(lambda t: (t + 2.0**-200) - t)(x).tolist() == [2.0**-200] * 2


def test_division_by_a_ball_containing_zero_is_named_at_the_precision_cap() -> None:
    message = (
        "the arb oracle cannot make the result of operation 'aten.div.Tensor' narrow: finite "
        "operands gave a ball that is not finite (a division by a ball containing 0?) (at 256 "
        "bits of working precision). Pass oracle='fp64' or oracle=<callable>, or rewrite the "
        "reference so that it does not divide by (or take a logarithm of) a quantity that is 0 "
        "for these inputs."
    )
    reference = lambda t: t / ((t + 2.0**-300) - t)  # noqa: E731
    with pytest.raises(balls.OraclePrecisionError, match=re.escape(message)):
        arb_oracle(reference, max_bits=256)(torch.ones(2, dtype=torch.float64))
    assert arb_oracle(reference)(torch.ones(1, dtype=torch.float64)).tolist() == [2.0**300]


def test_an_exact_division_by_zero_is_named_at_once() -> None:
    message = (
        "the arb oracle cannot make the result of operation 'numpy.divide' narrow: its "
        "exact result is not a finite real number for these inputs (at 117 bits of working "
        "precision)."
    )
    with pytest.raises(balls.OraclePrecisionError, match=re.escape(message)):
        arb_oracle(lambda x: 1.0 / (x - x))(np.ones(3))


def test_a_result_that_cannot_be_narrowed_is_named() -> None:
    message = (
        "the arb oracle cannot make the result of operation 'the result of <lambda>' narrow: 1 "
        "ball(s) still have a relative radius above 8.67e-19 (at 128 bits of working precision)"
    )
    with pytest.raises(balls.OraclePrecisionError, match=re.escape(message)):
        arb_oracle(lambda x: np.exp(x) - np.exp(x), max_bits=128)(np.array([1.5]))


def test_overlapping_comparisons_ask_for_more_precision() -> None:
    def reference(x: np.ndarray) -> Any:
        tiny = (x + 2.0**-150) - x  # [0 +/- 2**-116] at the first precision
        return np.where(tiny > 0, x, -x) * 1.0

    assert arb_oracle(reference)(np.array([2.0])).tolist() == [2.0]


def test_an_operation_arb_lacks_falls_back_to_mpmath() -> None:
    x = np.array([1.0, 3.0, 2.0])
    oracle = arb_oracle(lambda v: np.maximum.accumulate(v) * 1.0)
    assert oracle(x).tolist() == [1.0, 3.0, 3.0]


def test_an_operation_both_lack_shows_the_arb_error() -> None:
    message = (
        "the arb oracle cannot evaluate operation 'numpy.arctan2': it has no arb rule (supported: "
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        arb_oracle(lambda v: np.arctan2(v, v))(np.ones(2))


def test_torch_unsupported_operation_is_named() -> None:
    message = (
        "the arb oracle cannot evaluate operation 'aten.cumsum.default': it has no arb rule "
        "(arithmetic supported: _log_softmax, _safe_softmax, "
        "_scaled_dot_product_flash_attention_for_cpu, _softmax, abs, add, add_, addmm, "
        "amax, amin, atan, baddbmm, bmm, clamp, clamp_max, clamp_min, convolution, copy_, cos, "
        "cosh, div, div_, dot, erf, erfc, exp, expm1, fill_, gelu, log, log1p, masked_fill, max, "
        "maximum, mean, min, minimum, mm, mul, mul_, mv, native_layer_norm, neg, pow, reciprocal, "
        "relu, rsqrt, rsub, sigmoid, silu, sin, sinh, sqrt, std, sub, sub_, sum, tan, tanh, tril, "
        "triu, var, where, zero_; data movement and floating conversions are exact). Pass "
        "oracle='fp64' or oracle=<callable>."
    )
    with pytest.raises(UnsupportedOperation, match=re.escape(message)):
        arb_oracle(lambda t: torch.cumsum(t, 0) * torch.arange(3.0).sin())(torch.ones(3))


def test_resolve_oracle_names_arb_and_falls_back_without_python_flint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reference(x: Any) -> Any:
        return x

    assert resolve_oracle("arb", reference).__name__ == "arb(reference)"
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "flint" else real(name, *a)
    )
    assert resolve_oracle("arb", reference).__name__ == "mpmath(reference, dps=40)"
    message = (
        "fp.exact_reference evaluates in Arb ball arithmetic, which needs python-flint: pip "
        "install 'pytest-fpcheck[arb]'"
    )
    with pytest.raises(ModuleNotFoundError, match=re.escape(message)):
        fp.exact_reference(reference, torch.ones(1))


def test_dual_delta_with_the_arb_oracle() -> None:
    def inputs(rng: np.random.Generator) -> tuple[Any, ...]:
        return (torch.from_numpy(rng.standard_normal(64, dtype=np.float32)),)

    result = fp.dual_delta(
        lambda x: x.sum(), lambda x: x.double().sum().float(), inputs=inputs, oracle="arb", n=20
    )
    assert result.oracle == "arb"
    assert result.delta_reference.max() <= 2.0**-24
    assert result.delta_custom.max() > 0


def test_exact_reference_bounds_enclose_the_exact_result_and_call_out_float64() -> None:
    def reference(t: Any) -> Any:
        return (1 - torch.cos(t)) / (t * t)

    x = torch.tensor([1e-8, 1e-3, 1.0], dtype=torch.float64)
    bounds = fp.exact_reference(reference, x)
    assert isinstance(bounds, fp.Bounds)
    assert bounds.mode == "exact"
    assert bounds.dtype == np.float64
    with mpmath.workdps(100):
        exact = [(1 - mpmath.cos(v)) / v**2 for v in mp(x)]
    for lo, hi, value, e in zip(bounds.lo, bounds.hi, bounds.value, exact, strict=True):
        assert mpmath.mpf(lo) <= e <= mpmath.mpf(hi)
        assert value == float(e)
        assert hi <= np.nextafter(np.nextafter(lo, np.inf), np.inf)  # at most 2 ULPs wide
    assert bounds.notes[1] == (
        "the float64 evaluation of reference is off by more than 2**-26 (relative) at 1 / 3 "
        "elements; worst at index (0,): 0.0 against the exact 0.5 (relative error 1): a float64 "
        "reference is wrong there"
    )


def test_exact_reference_of_a_tuple_and_of_numpy_code() -> None:
    x = torch.tensor([0.5, 2.0])
    low, high = fp.exact_reference(lambda t: (t / 3, t * 3), x)
    assert low.contains(np.array([0.5 / 3, 2 / 3])).all()
    assert high.value.tolist() == [1.5, 6.0]
    numpy_bounds = fp.exact_reference(np.sum, np.array([1.0, 1e-20, -1.0]))
    assert numpy_bounds.value == 1e-20
    assert numpy_bounds.notes[1] == (
        "the float64 evaluation of sum is off by more than 2**-26 (relative) at 1 / 1 elements; "
        "worst at index (): 0.0 against the exact 1e-20 (relative error 1): a float64 reference "
        "is wrong there"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: fp.exact_reference(3),
            "fn=3 (type int) is not valid: expected a callable fn(*args, **kwargs) returning its "
            "result.",
        ),
        (
            lambda: arb_oracle(np.sum, rel_radius=1),
            "rel_radius=1 (type int) is not valid: expected a float in (0, 1): the largest "
            "relative radius accepted.",
        ),
        (
            lambda: arb_oracle(np.sum, max_bits=32),
            "max_bits=32 (type int) is not valid: expected an int >= 64 (the highest working "
            "precision, in bits).",
        ),
    ],
)
def test_bad_arguments_are_refused(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


def test_a_function_returning_no_tensor_is_refused() -> None:
    message = (
        "expected a function returning a floating tensor (or a tuple / list of them): its exact "
        "values are returned, and this one returned 'done'."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        fp.exact_reference(lambda t: (t * 2, "done")[1], torch.ones(2))


def test_numpy_reductions_with_initial_or_where_run_in_numpys_loop() -> None:
    x = np.array([1.0, 1e-20, -1.0, 5.0])
    mask = np.array([True, True, True, False])
    assert arb_oracle(lambda v: np.sum(v, where=mask))(x) == 1e-20
    assert arb_oracle(lambda v: np.sum(v, initial=2.0**-80))(x) == 5.0 + 1e-20 + 2.0**-80
    # a masked maximum has no arb rule: the mpmath oracle evaluates it
    assert arb_oracle(lambda v: np.max(v, where=mask, initial=0.0) * 1.0)(x) == 1.0


@pytest.mark.parametrize("mask", ["causal", "additive"])
def test_fused_cpu_attention_matches_mpmath_at_100_digits(mask: str) -> None:
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 1, 3, 2, generator=gen, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(3, 3, generator=gen, dtype=torch.float64)
    bias[0, 1] = bias[2, 0] = -math.inf
    options: dict[str, Any] = {"causal": {"is_causal": True}, "additive": {"attn_mask": bias}}[mask]

    def reference(q: Any, k: Any, v: Any) -> Any:
        out, logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, **options
        )
        return torch.cat([out[0, 0], logsumexp[0, 0, :, None]], dim=1)

    with mpmath.workdps(100):
        Q, K, V = ([mp(row) for row in t[0, 0]] for t in (q, k, v))
        expected = []
        for i in range(3):
            scores = []
            for j in range(3):
                score = mpmath.fsum(a * b for a, b in zip(Q[i], K[j], strict=True)) / mpmath.sqrt(2)
                if (mask == "causal" and j > i) or (mask == "additive" and bias[i, j] == -math.inf):
                    continue
                scores.append(
                    (j, score + (mpmath.mpf(float(bias[i, j])) if mask == "additive" else 0))
                )
            weights = softmax_mp([s for _, s in scores])
            row = [
                mpmath.fsum(w * V[j][c] for (j, _), w in zip(scores, weights, strict=True))
                for c in range(2)
            ]
            row.append(mpmath.log(mpmath.fsum(mpmath.exp(s) for _, s in scores)))
            expected.append([float(e) for e in row])
    np.testing.assert_array_equal(arb_oracle(reference)(q, k, v), np.array(expected))


def test_exact_reference_passes_keyword_arguments_and_integer_tensors() -> None:
    x = torch.tensor([1.0, 2.0, 4.0])
    index = torch.tensor([2, 0])

    def reference(t: Any, picks: Any, *, scale: float) -> Any:
        return t[picks] / scale

    bounds = fp.exact_reference(reference, x, index, scale=3.0)
    assert bounds.value.tolist() == [4 / 3, 1 / 3]
    np.testing.assert_array_equal(bounds.hi, np.nextafter(bounds.lo, np.inf))  # 1 ULP: 4/3


def test_numpy_casts_and_writes_that_would_round_are_refused() -> None:
    def to_integers(x: np.ndarray) -> Any:
        return x.astype(np.int64)

    def into_float_array(x: np.ndarray) -> Any:
        acc = np.zeros(x.shape)
        np.add(acc, x, out=acc)
        return acc

    messages = {
        to_integers: "the arb oracle cannot evaluate operation 'ndarray.astype(int64)': a "
        "conversion of balls to a non-floating dtype has no rule. Pass oracle='fp64' or "
        "oracle=<callable>.",
        into_float_array: "the arb oracle cannot evaluate operation 'numpy.add(out=...)': it would "
        "write balls into a float64 array and round them. Create the array from the inputs "
        "(np.zeros_like(x)) inside the reference.",
    }
    for reference, message in messages.items():
        with pytest.raises(UnsupportedOperation, match=re.escape(message)):
            fp.exact_reference(reference, np.ones(2))
    assert fp.exact_reference(lambda x: x.astype(np.float16) / 3, np.ones(1)).value[0] == 1 / 3


def test_the_run_setting_names_the_arb_oracle_for_dual_delta_markers(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nfpcheck_oracle = arb\nfpcheck_dual_delta_n = 20\n")
    pytester.makepyfile(
        """
        import numpy as np
        import pytest
        import torch

        def inputs(rng):
            return (torch.from_numpy(rng.standard_normal(32, dtype=np.float32)),)

        @pytest.mark.dual_delta(
            custom=lambda x: x.double().sum().float(),
            reference=lambda x: x.sum(),
            inputs=inputs,
        )
        def test_sum(dual_delta_result):
            assert dual_delta_result.oracle == "arb"
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
