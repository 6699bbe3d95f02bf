"""The ``"mpmath"`` oracle: the reference evaluated operation by operation in mpmath.

Dual-Delta paper, section 3.2.2: arbitrary precision "eliminates oracle error entirely at the
cost of computational overhead". The rule: every floating input is taken at its exact value,
each supported operation of the reference is carried out by mpmath rounded to ``dps`` decimal
digits (default 40, about 133 bits), and the result is rounded once to float64. The oracle is
slow (a 16x16 matmul costs milliseconds, a 128x128 one seconds): use it for small sizes.

Which backend evaluates the reference follows its inputs: when any argument is a PyTorch tensor,
:mod:`.mpmath_torch` (a dispatch mode over a small set of ATen operations); otherwise
:mod:`.mpmath_numpy` (arrays of mpmath numbers whose ufuncs mpmath evaluates). Each module lists
its supported operations; any other operation raises
:class:`~pytest_fpcheck.oracle.unsupported.UnsupportedOracleOperation`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument
from .promote import contains_torch_tensor, promote_arguments

__all__ = ["DEFAULT_DPS", "mpmath_oracle"]

DEFAULT_DPS = 40
_MIN_DPS = 17


def mpmath_oracle(reference: Callable[..., Any], *, dps: int = DEFAULT_DPS) -> Callable[..., Any]:
    """The mpmath evaluation of ``reference`` at ``dps`` decimal digits: ``oracle(*args)``
    returns the result as a float64 NumPy array (rules in the module docstring)."""
    if not isinstance(dps, int) or isinstance(dps, bool) or dps < _MIN_DPS:
        raise InvalidArgument(
            "dps",
            dps,
            f"an int >= {_MIN_DPS} (decimal digits; float64 itself holds about 16)",
        )
    return _MpmathOracle(reference, dps)


class _MpmathOracle:
    """:func:`mpmath_oracle`'s callable: an instance, not a closure, so that it pickles
    wherever ``reference`` does (trials on a process pool)."""

    def __init__(self, reference: Callable[..., Any], dps: int) -> None:
        self.reference, self.dps = reference, dps
        name = getattr(reference, "__name__", "reference")
        self.__name__ = self.__qualname__ = f"mpmath({name}, dps={dps})"

    def __call__(self, *args: Any) -> Any:
        if contains_torch_tensor(args):
            from . import mpmath_torch

            return mpmath_torch.evaluate(self.reference, promote_arguments(args), self.dps)
        from . import mpmath_numpy

        return mpmath_numpy.evaluate(self.reference, args, self.dps)
