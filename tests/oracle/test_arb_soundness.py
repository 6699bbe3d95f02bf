"""Soundness of the Arb balls: every ball contains the exact result, across the corner-case
strategies of ``pytest_fpcheck.strategies`` (subnormals, values near overflow whose products
leave float64's range, cancelling pairs).

The balls are computed at a low working precision (53 bits), where their radii are wide enough
for containment to say something. The ground truth: exact rational arithmetic (``Fraction``) for
the arithmetic operations, sums and products (exact, whatever the dynamic range), and mpmath at
100 decimal digits for the transcendental functions and the model-zoo operations. The ball's
ends are compared exactly (as fractions). A modest number of examples keeps CI fast; the
property is the same at any count.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_fpcheck import strategies as fst

flint = pytest.importorskip("flint")
torch = pytest.importorskip("torch")
F = torch.nn.functional

from pytest_fpcheck.oracle import arb_balls as balls  # noqa: E402 -- needs flint
from pytest_fpcheck.oracle.arb_numpy import to_ball_array  # noqa: E402
from pytest_fpcheck.oracle.arb_torch import ArbMode  # noqa: E402

PREC = 53
EXAMPLES = settings(max_examples=40, deadline=None)

finite = st.one_of(
    fst.floats_on_grid("float64"), fst.corner_values("float64").filter(math.isfinite)
)
huge = fst.floats_on_grid("float64", min_value=1e300, max_value=1.7976931348623157e308)
subnormal = fst.floats_on_grid("float64", min_value=-(2.0**-1022), max_value=2.0**-1022)
operands = st.one_of(finite, huge, subnormal)
cancelling = (
    st.tuples(operands, st.sampled_from([0.0, 2.0**-52, 2.0**-30, 1e-10]))
    .map(lambda pair: (pair[0], -pair[0] * (1 + pair[1])))
    .filter(lambda pair: math.isfinite(pair[1]))
)


def fraction_of_point(point: Any) -> Fraction:
    mantissa, exponent = (int(part) for part in point.man_exp())
    return Fraction(mantissa) * Fraction(2) ** exponent


def assert_contains(ball: Any, exact: Fraction | Any) -> None:
    if isinstance(exact, mpmath.mpf):
        sign, mantissa, exponent, _ = exact._mpf_
        exact = (-1) ** sign * Fraction(int(mantissa)) * Fraction(2) ** int(exponent)
    lower, upper = fraction_of_point(ball.lower()), fraction_of_point(ball.upper())
    assert lower <= exact <= upper, f"{ball} does not contain {float(exact)!r}"


def at_low_precision(function: Callable[[], Any]) -> Any:
    try:
        with balls.working_precision(PREC):
            return np.asarray(function(), dtype=object)
    except balls.Imprecise:
        assume(False)  # a ball containing 0 at this precision: nothing to check
        raise AssertionError("unreachable") from None


ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


@EXAMPLES
@given(st.one_of(st.tuples(operands, operands), cancelling), st.sampled_from(sorted(ARITHMETIC)))
def test_arithmetic_balls_contain_the_exact_result(pair: tuple[float, float], op: str) -> None:
    a, b = pair
    assume(not (op == "/" and b == 0.0))
    result = at_low_precision(
        lambda: ARITHMETIC[op](to_ball_array(np.array([a])), to_ball_array(np.array([b])))
    )
    assert_contains(result[0], ARITHMETIC[op](Fraction(a), Fraction(b)))


FUNCTIONS: dict[str, tuple[Any, Callable[[Any], Any], Any]] = {
    "exp": (np.exp, mpmath.exp, fst.floats_on_grid("float64", min_value=-1e4, max_value=1e4)),
    "expm1": (np.expm1, mpmath.expm1, fst.floats_on_grid("float64", min_value=-1e4, max_value=1e4)),
    "log": (np.log, mpmath.log, fst.floats_on_grid("float64", min_value=2.0**-1074)),
    "log1p": (np.log1p, mpmath.log1p, fst.floats_on_grid("float64", min_value=-0.9999)),
    "sqrt": (np.sqrt, mpmath.sqrt, fst.floats_on_grid("float64", min_value=0.0)),
    "tanh": (np.tanh, mpmath.tanh, finite),
    "sin": (np.sin, mpmath.sin, fst.floats_on_grid("float64", min_value=-1e6, max_value=1e6)),
    "cos": (np.cos, mpmath.cos, fst.floats_on_grid("float64", min_value=-1e6, max_value=1e6)),
    "arctan": (np.arctan, mpmath.atan, finite),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_balls_contain_mpmath_at_100_digits(name: str) -> None:
    ufunc, exact, values = FUNCTIONS[name]

    @EXAMPLES
    @given(values)
    def check(x: float) -> None:
        result = at_low_precision(lambda: ufunc(to_ball_array(np.array([x]))))
        with mpmath.workdps(100):
            assert_contains(result[0], exact(mpmath.mpf(x)))

    check()


def exact_array(values: Any) -> np.ndarray:
    return np.vectorize(Fraction, otypes=[object])(np.asarray(values, dtype=np.float64))


matrices = fst.arrays(
    "float64",
    (3, 4),
    elements=st.one_of(fst.floats_on_grid("float64"), huge, subnormal),
    corner_fraction=0.2,
)


@EXAMPLES
@given(matrices, matrices, st.booleans())
def test_matmul_and_sum_balls_contain_the_exact_result(
    a: np.ndarray, b: np.ndarray, cancel: bool
) -> None:
    b = b.T.copy()
    if cancel:  # a's last columns mirror its first, b's rows likewise: each dot product cancels
        with np.errstate(over="ignore"):
            a = np.concatenate([a[:, :2], -a[:, :2] * (1 + 2.0**-40)], axis=1)
        b[2:] = b[:2]
    assume(np.isfinite(a).all() and np.isfinite(b).all())
    product = at_low_precision(lambda: to_ball_array(a) @ to_ball_array(b))
    sums = at_low_precision(lambda: np.sum(to_ball_array(a), axis=1))
    exact = exact_array(a) @ exact_array(b)
    for ball, value in zip(product.ravel(), exact.ravel(), strict=True):
        assert_contains(ball, value)
    for ball, row in zip(sums.ravel(), exact_array(a), strict=True):
        assert_contains(ball, sum(row, Fraction(0)))


def softmax_mp(row: list[Any]) -> list[Any]:
    exps = [mpmath.exp(v) for v in row]
    return [e / mpmath.fsum(exps) for e in exps]


def layer_norm_mp(row: list[Any]) -> list[Any]:
    mean = mpmath.fsum(row) / len(row)
    var = mpmath.fsum((v - mean) ** 2 for v in row) / len(row)
    return [(v - mean) / mpmath.sqrt(var + mpmath.mpf(1e-5)) for v in row]


MODEL_OPERATIONS: dict[str, tuple[Callable[[Any], Any], Callable[[list[Any]], list[Any]]]] = {
    "softmax": (lambda t: F.softmax(t, -1), softmax_mp),
    "layer_norm": (lambda t: F.layer_norm(t, (t.shape[-1],)), layer_norm_mp),
    "gelu": (F.gelu, lambda r: [v * (1 + mpmath.erf(v / mpmath.sqrt(2))) / 2 for v in r]),
    "silu": (F.silu, lambda r: [v / (1 + mpmath.exp(-v)) for v in r]),
    "sigmoid": (torch.sigmoid, lambda r: [1 / (1 + mpmath.exp(-v)) for v in r]),
}
rows = fst.arrays(
    "float32",
    (2, 5),
    elements=fst.floats_on_grid("float32", min_value=-30.0, max_value=30.0),
    corner_fraction=0.3,
)


@pytest.mark.parametrize("name", sorted(MODEL_OPERATIONS))
def test_model_operation_balls_contain_mpmath_at_100_digits(name: str) -> None:
    function, exact = MODEL_OPERATIONS[name]

    @EXAMPLES
    @given(rows)
    def check(x: np.ndarray) -> None:
        def evaluate() -> Any:
            mode = ArbMode()
            with mode:
                out = function(torch.from_numpy(x).double())
            return mode.values_of(out)

        result = at_low_precision(evaluate)
        with mpmath.workdps(100):
            for ball_row, row in zip(result, x.astype(np.float64), strict=True):
                expected = exact([mpmath.mpf(float(v)) for v in row])
                for ball, value in zip(ball_row, expected, strict=True):
                    assert_contains(ball, value)

    check()


@EXAMPLES
@given(st.tuples(operands, operands).filter(lambda pair: pair[1] != 0.0))
def test_enclosure_ends_are_the_nearest_floats_outside_the_ball(pair: tuple[float, float]) -> None:
    a, b = pair
    quotient = at_low_precision(lambda: to_ball_array(np.array([a])) / b)
    lo, hi = balls.enclosure(quotient)
    lower = fraction_of_point(quotient[0].lower())
    upper = fraction_of_point(quotient[0].upper())
    largest = np.finfo(np.float64).max
    if math.isfinite(lo[0]):
        assert Fraction(lo[0]) <= lower
        with np.errstate(over="ignore"):
            up = np.nextafter(lo[0], np.inf)
        assert lo[0] == largest or not math.isfinite(up) or Fraction(up) > lower
    if math.isfinite(hi[0]):
        assert upper <= Fraction(hi[0])
        with np.errstate(over="ignore"):
            down = np.nextafter(hi[0], -np.inf)
        assert hi[0] == -largest or not math.isfinite(down) or Fraction(down) < upper
