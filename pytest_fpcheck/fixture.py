"""The ``fpcheck`` fixture: the package's functions bound to one test's settings.

Functions whose behaviour depends on a run setting get it as a default (an explicit keyword still
wins); every other public name of ``pytest_fpcheck`` is reachable unchanged, so
``fpcheck.assert_roundoff_close(...)`` and ``fp.assert_roundoff_close(...)`` are the same call.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest_fpcheck

from .settings import Settings

__all__ = ["FPCheckFixture", "seed_for_test"]


def seed_for_test(run_seed: int, test_id: str) -> int:
    """The seed of one test: CRC-32 of its id mixed with the run seed (stable across runs,
    processes and interpreters, unlike ``hash``)."""
    return (zlib.crc32(test_id.encode()) ^ (run_seed * 0x9E3779B1)) & 0xFFFFFFFF


class FPCheckFixture:
    """What the ``fpcheck`` fixture gives a test."""

    def __init__(self, settings: Settings, test_id: str) -> None:
        self.settings = settings
        self.test_id = test_id
        self.seed = seed_for_test(settings.seed, test_id)

    def _dual_delta_defaults(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            "oracle": self.settings.oracle,
            "n": self.settings.dual_delta_n,
            "alpha": self.settings.alpha,
            "seed": self.seed,
            **kwargs,
        }

    def dual_delta(self, custom: Any, reference: Any, **kwargs: Any) -> Any:
        """``fp.dual_delta`` with the run's oracle, n and alpha and this test's seed as defaults."""
        return pytest_fpcheck.dual_delta(custom, reference, **self._dual_delta_defaults(kwargs))

    def assert_dual_delta(self, custom: Any, reference: Any, **kwargs: Any) -> Any:
        """``fp.assert_dual_delta`` with the same defaults as :meth:`dual_delta`."""
        __tracebackhide__ = True
        return pytest_fpcheck.assert_dual_delta(
            custom, reference, **self._dual_delta_defaults(kwargs)
        )

    def stochastic_bounds(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fp.stochastic_bounds`` with this test's seed as default (the same samples on every
        run of the test; the seed is in the verdict)."""
        kwargs.setdefault("seed", self.seed)
        return pytest_fpcheck.stochastic_bounds(fn, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in pytest_fpcheck.__all__:
            raise AttributeError(f"the fpcheck fixture has no attribute {name!r}")
        return getattr(pytest_fpcheck, name)

    def __repr__(self) -> str:
        return f"<fpcheck fixture for {self.test_id} seed={self.seed} {self.settings}>"
