"""Deterministic draws from a strategy, for tests that look at many values at once."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st


def draw_values(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """Up to ``count`` values of ``strategy``, deterministically (a fixed derandomized run)."""
    seen: list[Any] = []

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        seen.append(value)

    collect()
    return seen
