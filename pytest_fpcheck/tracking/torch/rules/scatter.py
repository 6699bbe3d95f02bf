"""Accumulating scatters: ``scatter_add`` (``index_add``'s and max-pooling's backward reach it).

Element ``i`` of the result is ``self[i]`` plus the ``m_i`` source elements the index sends
there, added in the tensor's format in an order the kernel chooses. The bound holds for every
order (Higham, *Accuracy and Stability*, section 4.2): the exact sums of the lower and of the
upper ends (accumulated in float64, with their own gamma_m(2**-53) allowance), widened by
gamma_m(u) times the sum of the magnitudes plus m smallest subnormals, rounded outward onto the
result format.
"""

from __future__ import annotations

import numpy as np
import torch

from ....adapters.torch import internal
from ....interval import elementwise as ew
from ....interval.core import Interval
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import as_tensor, rule

__all__: list[str] = []

_U64 = 2.0**-53


def _gamma(m: np.ndarray, u: float) -> np.ndarray:
    nu = m * u
    with np.errstate(divide="ignore", invalid="ignore"):
        result: np.ndarray = np.where(nu < 1, up(nu / down(1 - nu)), np.inf)
    return result


@rule("aten.scatter_add")
def _scatter_add(ctx: RuleContext) -> Interval:
    target, dim, index, source = (
        ctx.arg(0, "self"),
        ctx.arg(1, "dim"),
        ctx.arg(2, "index"),
        ctx.arg(3, "src"),
    )
    a, b = ctx.operand(target), ctx.operand(source)
    with internal(), torch.no_grad():

        def scatter(into: np.ndarray, values: np.ndarray) -> np.ndarray:
            base = as_tensor(np.broadcast_to(into, tuple(target.shape)).copy())
            added = as_tensor(np.broadcast_to(values, tuple(source.shape)).copy())
            out: np.ndarray = base.scatter_add(dim, index.cpu(), added).numpy()
            return out

        lo = scatter(a.lo, b.lo)
        hi = lo if a.is_point and b.is_point else scatter(a.hi, b.hi)
        total = scatter(a.magnitude(), b.magnitude())
        count = scatter(np.zeros(()), np.ones(()))
    fmt = ctx.fmt
    with np.errstate(invalid="ignore", over="ignore"):
        spread = up(
            _gamma(count, fmt.unit_roundoff) * total
            + _gamma(count + 1, _U64) * total
            + count * fmt.smallest_subnormal
        )
        spread = np.where(count == 0, 0.0, spread)
        enclosure = Interval(down(lo - spread), up(hi + spread))
    return ew.everything_where_nan(enclosure).to_format(fmt)
