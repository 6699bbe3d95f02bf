"""dual_delta's trials on an executor: the same result as in this process, on a thread pool (with
the default oracle) and on a process pool (picklable implementations and oracle), and a bad
executor refused with its message."""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck.dualdelta import dual_delta
from pytest_fpcheck.errors import InvalidArgument


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


def test_a_bad_executor_is_refused() -> None:
    message = (
        "executor=4 (type int) is not valid: expected a concurrent.futures.Executor (a "
        "ThreadPoolExecutor, a ProcessPoolExecutor, a dask client's get_executor()) or None to "
        "run the trials in this process."
    )
    with pytest.raises(InvalidArgument) as raised:
        dual_delta(np.sum, np.sum, inputs=normals, n=4, executor=4)  # type: ignore[arg-type]
    assert str(raised.value) == message
