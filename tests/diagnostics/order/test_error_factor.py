"""SummationTree.error_factor: |fl(sum) - sum| <= gamma_h * sum |x_i| with h the most roundings on
a root-leaf path (Higham, Accuracy and Stability of Numerical Algorithms, section 4.2), checked
against exact rational sums."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_fpcheck.diagnostics.order import SummationTree
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.formats import FORMATS, numpy_dtype

from .test_reveal import trees
from .test_trees import fused_chain, pairwise, sequential


def gamma(h: int, u: float) -> Fraction:
    hu = h * Fraction(u)
    return hu / (1 - hu)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 1000, 4097])
@pytest.mark.parametrize("u", [2.0**-24, 2.0**-11, 2.0**-53])
def test_sequential_and_pairwise_factors(n: int, u: float) -> None:
    cases = [(sequential(n), n - 1), (pairwise(n), math.ceil(math.log2(n)))]
    for tree, h in cases[1:] if (n - 1) * u >= 1 else cases:
        factor = tree.error_factor(u)
        assert Fraction(factor) >= gamma(h, u)
        assert factor == pytest.approx(float(gamma(h, u)), rel=2.0**-52)


def test_a_fused_node_counts_as_one_rounding() -> None:
    tree = fused_chain(16, 4)  # four fused 5-term adds: x[0:4] go through four roundings
    assert tree.error_factor(2.0**-24) == sequential(5).error_factor(2.0**-24)
    assert tree.error_factor(2.0**-24) < sequential(16).error_factor(2.0**-24)


def exact_error(tree: SummationTree, x: np.ndarray) -> tuple[Fraction, Fraction]:
    """(|replayed sum - exact sum|, sum |x_i|), exactly."""
    values = [Fraction(float(v)) for v in x.astype(np.float64)]
    computed = Fraction(tree.replay(x))
    return abs(computed - sum(values, Fraction(0))), sum((abs(v) for v in values), Fraction(0))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    st.sampled_from(["float16", "bfloat16", "float32"]).flatmap(
        lambda dtype: trees(max_n=40, dtype=dtype)
    ),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["mixed", "positive", "close"]),
)
def test_the_bound_holds_against_exact_sums(tree: SummationTree, seed: int, kind: str) -> None:
    fmt = FORMATS[tree.dtype]
    rng = np.random.default_rng(seed)
    exponents = {"mixed": (-8, 8), "positive": (0, 4), "close": (0, 1)}[kind]
    x = rng.uniform(1, 2, tree.n) * 2.0 ** rng.integers(*exponents, tree.n)
    if kind == "mixed":
        x *= rng.choice([-1.0, 1.0], tree.n)
    x = x.astype(numpy_dtype(fmt))
    error, magnitude = exact_error(tree, x)
    assert error <= Fraction(tree.error_factor(fmt.unit_roundoff)) * magnitude


def test_the_bound_is_tight_to_one_rounding() -> None:
    """Adding 2**-11 to 1 in float16 is a tie that rounds back to 1: with k such terms added in
    sequence the error is k*u, more than gamma_{k-1} allows."""
    k = 12
    x = np.array([1.0] + [2.0**-11] * k, dtype=np.float16)
    tree = sequential(k + 1, "float16")
    error, magnitude = exact_error(tree, x)
    u = 2.0**-11
    assert error == k * Fraction(u)
    assert error <= Fraction(tree.error_factor(u)) * magnitude
    assert error > gamma(k - 1, u) * magnitude


@pytest.mark.parametrize(
    ("u", "message"),
    [
        (0.0, "u=0.0 (type float) is not valid: expected a unit round-off in (0, 1), e.g. 2**-24 "),
        (1.5, "u=1.5 (type float) is not valid: expected a unit round-off in (0, 1)"),
        ("2**-24", "u='2**-24' (type str) is not valid: expected a unit round-off in (0, 1)"),
        (True, "u=True (type bool) is not valid: expected a unit round-off in (0, 1)"),
        (
            0.01,
            "u=0.01 (type float) is not valid: expected u < 1/999: the tree has a path of 999 "
            "roundings and gamma_h needs h*u < 1.",
        ),
    ],
)
def test_invalid_unit_roundoff(u: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        sequential(1000).error_factor(u)  # type: ignore[arg-type]
