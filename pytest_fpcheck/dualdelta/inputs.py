"""Where the inputs of a dual-delta test come from (Dual-Delta paper, section 3.2.1).

``inputs`` is either

* a callable ``inputs(rng) -> tuple of arguments``: trial ``i`` calls it with its own generator
  :func:`trial_rng` ``(seed, i)`` = ``numpy.random.default_rng(SeedSequence(seed, spawn_key=(0,
  i)))``, so a run is reproducible and any single trial can be regenerated on its own; or
* a hypothesis strategy of argument tuples: ``n`` examples are drawn through Hypothesis' public
  API -- a ``@given`` function under ``@seed(seed)`` with ``max_examples=n``, only the generate
  phase, no database and no health checks -- which is reproducible for a given seed and
  strategy. Hypothesis never repeats an example, so a strategy with fewer than ``n`` distinct
  examples is refused; it also favours simple and boundary examples by design. Inside another
  ``@given`` test, Hypothesis' ``nested_given`` health check refuses this unless the outer test
  suppresses it.

Deciding whether ``inputs`` is a strategy looks in ``sys.modules`` and imports nothing: no
strategy can exist before Hypothesis is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import InvalidArgument

__all__ = ["INPUTS_EXPECTED", "input_source", "is_strategy", "trial_rng"]

INPUTS_EXPECTED = (
    "a callable inputs(rng) returning a tuple of arguments, or a hypothesis strategy of "
    "argument tuples"
)
_TRIALS_KEY = 0


def trial_rng(seed: int, trial: int) -> np.random.Generator:
    """The generator trial ``trial`` of a run seeded ``seed`` passes to ``inputs``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_TRIALS_KEY, trial)))


def is_strategy(value: Any) -> bool:
    """Whether ``value`` is a hypothesis ``SearchStrategy`` (free: imports nothing)."""
    strategies = sys.modules.get("hypothesis.strategies")
    return strategies is not None and isinstance(value, strategies.SearchStrategy)


def _checked(arguments: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(arguments, tuple):
        raise InvalidArgument(
            where,
            arguments,
            "a tuple of arguments for custom(*args); wrap a single argument as (x,)",
        )
    return arguments


def _from_callable(inputs: Callable[..., Any], n: int, seed: int) -> Iterator[tuple[Any, ...]]:
    for trial in range(n):
        yield _checked(inputs(trial_rng(seed, trial)), f"inputs(rng) on trial {trial}")


def _draw_examples(strategy: Any, n: int, seed: int) -> list[Any]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    examples: list[Any] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(strategy)
    def collect(example: Any) -> None:
        examples.append(example)

    collect()
    return examples


def input_source(inputs: Any, n: int, seed: int) -> Iterator[tuple[Any, ...]]:
    """The ``n`` argument tuples of a run, in trial order (rules in the module docstring)."""
    if is_strategy(inputs):
        examples = _draw_examples(inputs, n, seed)
        if len(examples) < n:
            raise InvalidArgument(
                "n",
                n,
                f"at most {len(examples)}: hypothesis found only {len(examples)} distinct "
                f"examples of {inputs!r}",
                hint="Lower n or widen the strategy.",
            )
        return (
            _checked(example, f"example {trial} of inputs")
            for trial, example in enumerate(examples)
        )
    if callable(inputs):
        return _from_callable(inputs, n, seed)
    raise InvalidArgument("inputs", inputs, INPUTS_EXPECTED)
