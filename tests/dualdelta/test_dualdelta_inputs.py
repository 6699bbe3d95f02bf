"""Input sources: a callable inputs(rng) with one reproducible generator per trial, or n
reproducible draws of a hypothesis strategy."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from pytest_fpcheck.dualdelta.inputs import input_source, trial_rng
from pytest_fpcheck.errors import InvalidArgument


def uniform_pair(rng: np.random.Generator) -> tuple[Any, ...]:
    return (rng.random(3), rng.random())


def test_callable_inputs_are_reproducible_per_trial() -> None:
    first = list(input_source(uniform_pair, 5, seed=7))
    again = list(input_source(uniform_pair, 5, seed=7))
    other = list(input_source(uniform_pair, 5, seed=8))
    assert len(first) == 5
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(first[0][0], other[0][0])
    # Trial 3 regenerates on its own:
    np.testing.assert_array_equal(uniform_pair(trial_rng(7, 3))[0], first[3][0])
    # Trials do not share a stream:
    assert not np.array_equal(first[0][0], first[1][0])


def test_callable_returning_a_non_tuple_is_refused() -> None:
    source = input_source(lambda rng: [rng.random(), 2.0], 3, seed=0)
    first = trial_rng(0, 0).random()
    message = (
        f"inputs(rng) on trial 0=[{first!r}, 2.0] (type list) is not valid: expected a tuple "
        "of arguments for custom(*args); wrap a single argument as (x,)."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        next(source)


def test_strategy_draws_are_reproducible_for_a_seed() -> None:
    strategy = st.tuples(st.floats(-1, 1), st.integers(0, 100))
    first = list(input_source(strategy, 50, seed=3))
    assert len(first) == 50
    assert first == list(input_source(strategy, 50, seed=3))
    assert first != list(input_source(strategy, 50, seed=4))
    assert all(isinstance(args, tuple) and len(args) == 2 for args in first)


def test_strategy_with_too_few_examples_is_refused() -> None:
    strategy = st.tuples(st.sampled_from([1.0, 2.0, 3.0]))
    message = (
        "n=10 (type int) is not valid: expected at most 3: hypothesis found only 3 distinct "
        "examples of tuples(sampled_from([1.0, 2.0, 3.0])). Lower n or widen the strategy."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        input_source(strategy, 10, seed=0)


def test_strategy_of_non_tuples_is_refused() -> None:
    source = input_source(st.just(1.5), 1, seed=0)
    message = (
        "example 0 of inputs=1.5 (type float) is not valid: expected a tuple of arguments for "
        "custom(*args); wrap a single argument as (x,)."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        next(source)


def test_neither_callable_nor_strategy_is_refused() -> None:
    message = (
        "inputs=[1.0, 2.0] (type list) is not valid: expected a callable inputs(rng) returning "
        "a tuple of arguments, or a hypothesis strategy of argument tuples."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        input_source([1.0, 2.0], 2, seed=0)
