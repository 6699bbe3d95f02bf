"""Running a dual-delta test: Algorithm 1 of the Dual-Delta paper (section 3.1).

For trial i = 0 .. n-1: draw the inputs x_i, call custom(*x_i), reference(*x_i) and
oracle(*x_i) in that order, and record Delta_c[i] = metric(custom, oracle) and Delta_r[i] =
metric(reference, oracle). Then analyse the two samples
(:func:`~pytest_fpcheck.dualdelta.statistics.analyse`).

The implementations must not modify their arguments: all three see the same objects. An
exception raised by one of them propagates unchanged, with a note naming the trial and seed.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import DualDeltaFailure, InvalidArgument
from ..formats import FORMATS
from ..oracle import resolve_oracle
from .inputs import INPUTS_EXPECTED, input_source, is_strategy
from .metrics import Metric, as_float64, measure, output_format, resolve_metric
from .result import DualDeltaResult
from .statistics import analyse

__all__ = ["assert_dual_delta", "dual_delta"]

_FLOAT64 = FORMATS["float64"]


def _name(function: Any) -> str:
    return str(getattr(function, "__qualname__", None) or getattr(function, "__name__", function))


def _check_arguments(
    custom: Any, reference: Any, inputs: Any, n: Any, seed: Any, alpha: Any, executor: Any
) -> None:
    if not callable(custom):
        raise InvalidArgument("custom", custom, "a callable custom(*args) returning its output")
    if not callable(reference):
        raise InvalidArgument(
            "reference", reference, "a callable reference(*args) returning its output"
        )
    if not (callable(inputs) or is_strategy(inputs)):
        raise InvalidArgument("inputs", inputs, INPUTS_EXPECTED)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 2:
        raise InvalidArgument("n", n, "an int >= 2 (the number of trials)")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise InvalidArgument("seed", seed, "an int >= 0")
    if (
        not isinstance(alpha, (int, float, np.floating))
        or isinstance(alpha, bool)
        or not 0.0 < float(alpha) < 1.0
    ):
        raise InvalidArgument("alpha", alpha, "a number in the open interval (0, 1)")
    if executor is not None and not isinstance(executor, concurrent.futures.Executor):
        raise InvalidArgument(
            "executor",
            executor,
            "a concurrent.futures.Executor (a ThreadPoolExecutor, a ProcessPoolExecutor, a dask "
            "client's get_executor()) or None to run the trials in this process",
        )


def _call(
    function: Callable[..., Any], args: tuple[Any, ...], role: str, trial: int, seed: int
) -> Any:
    try:
        return function(*args)
    except Exception as error:
        add_note = getattr(error, "add_note", None)  # Python >= 3.11
        if add_note is not None:
            add_note(f"raised by the {role} on dual-delta trial {trial} (seed={seed})")
        raise


def _trial(
    custom: Callable[..., Any],
    reference: Callable[..., Any],
    oracle: Callable[..., Any],
    metric: Metric,
    args: tuple[Any, ...],
    trial: int,
    seed: int,
) -> tuple[float, float]:
    """(Delta_c, Delta_r) of one trial."""
    y_custom = _call(custom, args, "custom implementation", trial, seed)
    y_reference = _call(reference, args, "reference implementation", trial, seed)
    y_oracle = _call(oracle, args, "oracle", trial, seed)
    fmt = output_format(y_custom) if metric.needs_format else _FLOAT64
    exact = as_float64(y_oracle, f"oracle output on trial {trial}")
    delta_custom = measure(
        metric, as_float64(y_custom, f"custom output on trial {trial}"), exact, fmt, "custom", trial
    )
    delta_reference = measure(
        metric,
        as_float64(y_reference, f"reference output on trial {trial}"),
        exact,
        fmt,
        "reference",
        trial,
    )
    return delta_custom, delta_reference


def _run_trials(
    custom: Callable[..., Any],
    reference: Callable[..., Any],
    oracle: Callable[..., Any],
    metric: Metric,
    source: Any,
    seed: int,
    executor: concurrent.futures.Executor | None,
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], np.ndarray[Any, np.dtype[np.float64]]]:
    """The trials in order, in this process or on ``executor`` (inputs are drawn here, in
    order, so the result does not depend on where the trials run)."""
    jobs = (
        (custom, reference, oracle, metric, args, trial, seed) for trial, args in enumerate(source)
    )
    if executor is None:
        pairs = [_trial(*job) for job in jobs]
    else:
        futures = [executor.submit(_trial, *job) for job in jobs]
        pairs = [future.result() for future in futures]
    delta_custom = np.array([pair[0] for pair in pairs], dtype=np.float64)
    delta_reference = np.array([pair[1] for pair in pairs], dtype=np.float64)
    return delta_custom, delta_reference


def dual_delta(
    custom: Callable[..., Any],
    reference: Callable[..., Any],
    *,
    inputs: Any,
    oracle: str | Callable[..., Any] = "fp64",
    metric: str | Callable[..., Any] = "max_hybrid",
    n: int = 1000,
    seed: int = 0,
    alpha: float = 0.01,
    executor: concurrent.futures.Executor | None = None,
) -> DualDeltaResult:
    """Measure the errors of ``custom`` and ``reference`` against ``oracle`` on ``n`` inputs
    and compare the two samples (API.md section 2; Dual-Delta paper, Algorithm 1 and section 4).

    ``inputs``: a callable ``inputs(rng) -> tuple`` or a hypothesis strategy of tuples
    (:mod:`~pytest_fpcheck.dualdelta.inputs`). ``oracle``: ``"fp64"``, ``"mpmath"``, ``"arb"``
    (ball arithmetic where python-flint is installed, mpmath otherwise) or a callable
    (:mod:`pytest_fpcheck.oracle`). ``metric``: ``"max_hybrid"``, ``"rel_norm"``,
    ``"max_abs"``, ``"max_ulp"`` or a callable (:mod:`~pytest_fpcheck.dualdelta.metrics`).
    The verdicts follow the rule of :mod:`~pytest_fpcheck.dualdelta.statistics` at ``alpha``.
    ``executor`` (any ``concurrent.futures.Executor``, a dask client's included) runs the
    trials; the inputs are still drawn here, in order, so the result is the same. With a
    process pool the implementations, the oracle and the metric must be picklable
    (module-level functions or partials of them; the built-in oracles pickle wherever
    ``reference`` does).
    """
    _check_arguments(custom, reference, inputs, n, seed, alpha, executor)
    n, seed, alpha = int(n), int(seed), float(alpha)
    resolved_oracle = resolve_oracle(oracle, reference)
    resolved_metric = resolve_metric(metric)
    source = input_source(inputs, n, seed)
    delta_custom, delta_reference = _run_trials(
        custom, reference, resolved_oracle, resolved_metric, source, seed, executor
    )
    analysis = analyse(delta_custom, delta_reference, alpha=alpha, seed=seed)
    result = DualDeltaResult(
        delta_custom=delta_custom,
        delta_reference=delta_reference,
        stats=analysis.stats,
        tests=analysis.tests,
        mean_ratio=analysis.mean_ratio,
        accuracy=analysis.accuracy,
        stability=analysis.stability,
        accuracy_test=analysis.accuracy_test,
        alpha=alpha,
        seed=seed,
        oracle=oracle if isinstance(oracle, str) else _name(oracle),
        metric=resolved_metric.name,
        custom=_name(custom),
        reference=_name(reference),
    )
    from ..assertions.sink import publish

    publish("dual_deltas", result)
    return result


def assert_dual_delta(
    custom: Callable[..., Any],
    reference: Callable[..., Any],
    *,
    inputs: Any,
    oracle: str | Callable[..., Any] = "fp64",
    metric: str | Callable[..., Any] = "max_hybrid",
    n: int = 1000,
    seed: int = 0,
    alpha: float = 0.01,
    executor: concurrent.futures.Executor | None = None,
) -> DualDeltaResult:
    """:func:`dual_delta`, raising :class:`~pytest_fpcheck.errors.DualDeltaFailure` (with the
    summary table) when ``custom`` is significantly less accurate or less stable than
    ``reference``; otherwise the result. For equally accurate and stable implementations the
    probability of a failure is at most ``alpha``."""
    __tracebackhide__ = True
    result = dual_delta(
        custom,
        reference,
        inputs=inputs,
        oracle=oracle,
        metric=metric,
        n=n,
        seed=seed,
        alpha=alpha,
        executor=executor,
    )
    if result.failed:
        raise DualDeltaFailure(result.failure_message(), result)
    return result
