"""Oracles: the high-precision ground truth of dual-delta testing.

Dual-Delta paper, section 2.1 (Definition 2) and section 3.2.2: an oracle is an implementation
whose error against the exact result is negligible next to the errors of the implementations
under test. :func:`resolve_oracle` turns the ``oracle=`` argument of
:func:`~pytest_fpcheck.dualdelta.dual_delta` into a callable ``oracle(*args)``:

* ``"fp64"`` -- :func:`~pytest_fpcheck.oracle.fp64.fp64_oracle`: the reference re-run with every
  floating input promoted to float64 and, for PyTorch code, every operation carried out in
  float64, its own down-casts included;
* ``"mpmath"`` -- :func:`~pytest_fpcheck.oracle.mpmath_eval.mpmath_oracle`: the reference
  evaluated operation by operation in mpmath at 40 decimal digits (call ``mpmath_oracle(ref,
  dps=...)`` yourself for another precision);
* a callable -- used as it is.

Importing this package imports neither torch nor mpmath: each loads when an oracle first runs
on its kind of input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from .fp64 import fp64_oracle
from .mpmath_eval import DEFAULT_DPS, mpmath_oracle
from .unsupported import UnsupportedOracleOperation

__all__ = [
    "DEFAULT_DPS",
    "ORACLE_NAMES",
    "UnsupportedOracleOperation",
    "fp64_oracle",
    "mpmath_oracle",
    "resolve_oracle",
]

ORACLE_NAMES = ("fp64", "mpmath")


def resolve_oracle(
    oracle: str | Callable[..., Any], reference: Callable[..., Any]
) -> Callable[..., Any]:
    """The callable oracle named by ``oracle`` for ``reference`` (the rules above)."""
    if oracle == "fp64":
        return fp64_oracle(reference)
    if oracle == "mpmath":
        return mpmath_oracle(reference)
    if callable(oracle) and not isinstance(oracle, str):
        return oracle
    raise InvalidArgument(
        "oracle", oracle, "'fp64', 'mpmath' or a callable oracle(*args) returning the exact result"
    )
