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
* ``"arb"`` -- :func:`~pytest_fpcheck.oracle.arb_eval.arb_oracle`: the reference evaluated
  operation by operation in Arb ball arithmetic (python-flint, the ``arb`` extra), its precision
  raised until every result ball's relative radius is below 2**-60, so the oracle's own error is
  proven below that; much faster than mpmath (matrix products are ``arb_mat`` products). Where
  python-flint is not installed, and for a reference using an operation the Arb rules lack,
  ``"arb"`` evaluates with the mpmath oracle instead;
* a callable -- used as it is.

:func:`~pytest_fpcheck.oracle.exact.exact_reference` returns the Arb enclosure of a function's
exact result itself, as bounds to judge a kernel against.

Importing this package imports neither torch, mpmath nor flint: each loads when an oracle first
runs on its kind of input.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from .exact import exact_reference
from .fp64 import fp64_oracle
from .mpmath_eval import DEFAULT_DPS, mpmath_oracle
from .unsupported import UnsupportedOracleOperation

__all__ = [
    "DEFAULT_DPS",
    "ORACLE_NAMES",
    "UnsupportedOracleOperation",
    "exact_reference",
    "fp64_oracle",
    "mpmath_oracle",
    "resolve_oracle",
]

ORACLE_NAMES = ("fp64", "mpmath", "arb")


def resolve_oracle(
    oracle: str | Callable[..., Any], reference: Callable[..., Any]
) -> Callable[..., Any]:
    """The callable oracle named by ``oracle`` for ``reference`` (the rules above)."""
    if oracle == "fp64":
        return fp64_oracle(reference)
    if oracle == "mpmath":
        return mpmath_oracle(reference)
    if oracle == "arb":
        if importlib.util.find_spec("flint") is None:
            return mpmath_oracle(reference)
        from .arb_eval import arb_oracle

        return arb_oracle(reference)
    if callable(oracle) and not isinstance(oracle, str):
        return oracle
    raise InvalidArgument(
        "oracle",
        oracle,
        "'fp64', 'mpmath', 'arb' or a callable oracle(*args) returning the exact result",
    )
