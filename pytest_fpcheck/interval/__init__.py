"""The interval engine: pure (lo, hi) float64 array operations, error models and the rule
registry. Nothing here knows a backend; :mod:`pytest_fpcheck.tracking` feeds it.

* :mod:`.rounding`: outward rounding of endpoints, onto float64 or any format's grid;
* :mod:`.core`: the :class:`Interval` type and the gamma constants;
* :mod:`.elementwise`: arithmetic, library functions (``ULP_ERRORS``), max/min/where;
* :mod:`.linalg`: sums and midpoint-radius matrix products;
* :mod:`.kernels`: the compiled passes behind those rules, one module per rule family;
* :mod:`.fused`: a-priori bounds of fused multi-term matrix hardware (FTTN);
* :mod:`.bounds`: :class:`Bounds`, what users receive;
* :mod:`.registry`: ``register_rule(name, rule)``.
"""

from __future__ import annotations

from .bounds import Bounds, Provenance
from .core import Interval, gamma, gamma_probabilistic
from .elementwise import ABSOLUTE_ERRORS, ULP_ERRORS
from .registry import register_rule, registered

__all__ = [
    "ABSOLUTE_ERRORS",
    "ULP_ERRORS",
    "Bounds",
    "Interval",
    "Provenance",
    "gamma",
    "gamma_probabilistic",
    "register_rule",
    "registered",
]
