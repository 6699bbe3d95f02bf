"""dual_delta's trials on an executor: the same result as in this process, on a thread pool (with
the default oracle) and on a process pool (picklable implementations; the built-in oracles and a
user's metric pickle with them), and a bad executor refused with its message."""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import pickle
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck.dualdelta import dual_delta
from pytest_fpcheck.dualdelta.metrics import resolve_metric
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.oracle import resolve_oracle


def normals(rng: np.random.Generator) -> tuple[Any, ...]:
    return (rng.standard_normal(256, dtype=np.float32),)


def test_a_thread_pool_gives_the_in_process_result() -> None:
    reordered = functools.partial(np.add.reduce, axis=0)
    here = dual_delta(np.sum, reordered, inputs=normals, n=30, seed=4)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        threaded = dual_delta(np.sum, reordered, inputs=normals, n=30, seed=4, executor=pool)
    assert here.to_dict() == threaded.to_dict()


def test_a_process_pool_gives_the_in_process_result() -> None:
    oracle = functools.partial(np.sum, dtype=np.float64)
    reference = functools.partial(np.add.reduce, dtype=np.float32)
    here = dual_delta(np.sum, reference, inputs=normals, oracle=oracle, n=16, seed=5)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        spread = dual_delta(
            np.sum, reference, inputs=normals, oracle=oracle, n=16, seed=5, executor=pool
        )
    np.testing.assert_array_equal(here.delta_custom, spread.delta_custom)
    np.testing.assert_array_equal(here.delta_reference, spread.delta_reference)
    assert np.all(here.delta_custom > 0)


def largest_difference(y: np.ndarray, oracle: np.ndarray) -> float:
    return float(np.max(np.abs(y - oracle)))


def test_the_default_oracle_runs_on_a_process_pool() -> None:
    # the built-in oracles were closures, which a process pool cannot pickle: with the
    # default oracle every trial failed in the pool's feeder thread
    reference = functools.partial(np.add.reduce, axis=0)
    here = dual_delta(np.sum, reference, inputs=normals, n=6, seed=7)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        spread = dual_delta(np.sum, reference, inputs=normals, n=6, seed=7, executor=pool)
    np.testing.assert_array_equal(here.delta_custom, spread.delta_custom)
    np.testing.assert_array_equal(here.delta_reference, spread.delta_reference)


@pytest.mark.parametrize("name", ["fp64", "mpmath", "arb"])
def test_the_built_in_oracles_and_a_users_metric_pickle(name: str) -> None:
    if name == "arb":
        pytest.importorskip("flint")
    oracle = resolve_oracle(name, np.sum)
    copy = pickle.loads(pickle.dumps(oracle))
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(copy(x)), np.asarray(oracle(x)))
    assert copy.__name__ == oracle.__name__
    metric = pickle.loads(pickle.dumps(resolve_metric(largest_difference)))
    assert metric.function(np.ones(3), np.zeros(3), None) == 1.0


def test_a_bad_executor_is_refused() -> None:
    message = (
        "executor=4 (type int) is not valid: expected a concurrent.futures.Executor (a "
        "ThreadPoolExecutor, a ProcessPoolExecutor, a dask client's get_executor()) or None to "
        "run the trials in this process."
    )
    with pytest.raises(InvalidArgument) as raised:
        dual_delta(np.sum, np.sum, inputs=normals, n=4, executor=4)  # type: ignore[arg-type]
    assert str(raised.value) == message
