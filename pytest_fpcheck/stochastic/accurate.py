"""Accurate wide formulations of functions whose ATen kernels cancel: GELU, its gradient, log-softmax.

Rule: a stochastic run computes each operation in a wider format and rounds the result at
random (:mod:`pytest_fpcheck.stochastic.mode`), so that the samples centre on the exact result.
That fails where the kernel's own formula cancels in the wider format, so that its result
carries a relative error far above the wide format's unit roundoff. For these operations the
wide result comes from an algebraically identical formula without the cancellation:

* ``gelu(x)`` is ``x/2 (1 + erf(x/sqrt 2))`` in ATen: for ``x = -4.75`` in float32,
  ``1 + erf`` loses 4% (the random programs' float16 GELU whose samples centred 3.5 units in the
  last place away from the exact value). Here ``x/2 erfc(-x/sqrt 2)``, accurate to a few units
  of the wide format wherever ``erfc`` is.
* ``gelu(x, approximate="tanh")`` is ``x/2 (1 + tanh(u))`` with ``u = sqrt(2/pi) (x + 0.044715
  x^3)``: for ``x = -6`` in float32, ``tanh(u)`` rounds to ``-1`` and the result to ``0``, while
  the exact ``-8.4e-11`` is a normal bfloat16 number. Here ``x sigmoid(2 u)`` (``(1 + tanh u) /
  2 = sigmoid(2 u)``).
* their gradients (``gelu_backward``) likewise: ``Phi(x) + x phi(x)`` with ``Phi`` from ``erfc``,
  and ``s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)`` with ``s = sigmoid(2 u)`` (``1 -
  tanh(u)^2 = 4 s (1 - s)``; the second term 0 where ``s (1 - s)`` is, so that ``x^2``
  overflowing for ``|x| > 1.8e19`` in float32 makes no ``0 * inf``).
* ``log_softmax(x)`` is ``(x - m) - log(sum exp(x - m))`` in ATen (``m`` the maximum): the
  largest element's log-probability ``-log(1 + e)``, ``e`` the sum of the others' ``exp``, is
  ``0`` once ``e`` is below the wide format's unit roundoff, while the exact ``-e`` is a normal
  number of every format. Here ``(x - m) - log1p(e)``, with ``e`` summed without the maximum's
  own term (one of them where several elements tie).

Non-finite operands give non-finite results, as in the kernels (which give NaN or an infinity
there, kernel by kernel); a stochastic run gives such an element the whole line either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["ACCURATE"]

_SQRT_HALF = math.sqrt(0.5)
_BETA = math.sqrt(2.0 / math.pi)  # d u / d x at 0, the tanh approximation's scale
_KAPPA = 0.044715
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class _Formula:
    """An operation's accurate formula, called as the operation is (its schema for the callers
    that read it)."""

    def __init__(self, op: torch._ops.OpOverload, formula: Callable[..., torch.Tensor]) -> None:
        self._schema = op._schema
        self.formula = formula
        self.__name__ = f"accurate {op}"

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.formula(*args, **kwargs)


def _tanh_argument(x: torch.Tensor) -> torch.Tensor:
    return 2.0 * _BETA * (x + _KAPPA * x * x * x)


def _gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    if approximate == "tanh":
        return torch.sigmoid(_tanh_argument(x)).mul_(x)
    return torch.erfc(x * -_SQRT_HALF).mul_(x).mul_(0.5)


def _gelu_backward(grad: torch.Tensor, x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    if approximate == "tanh":
        s = torch.sigmoid(_tanh_argument(x))
        spread = s * (1.0 - s)
        slope = 2.0 * _BETA * (1.0 + 3.0 * _KAPPA * x * x)
        # where the sigmoid saturates its derivative wins over the polynomial (x^2 may overflow)
        term = torch.where(spread == 0.0, 0.0, x * spread * slope)
        return grad * (s + term)
    density = torch.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return grad * (0.5 * torch.erfc(-_SQRT_HALF * x) + x * density)


def _log_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    if x.numel() == 0:
        empty: torch.Tensor = torch.ops.aten._log_softmax.default(x, dim, half_to_float)
        return empty
    if x.dim() == 0:
        return x - x  # log_softmax of one element: 0 (NaN for a non-finite one, as ATen)
    shifted = x - torch.amax(x, dim, keepdim=True)
    others = torch.exp(shifted).scatter(dim, torch.argmax(shifted, dim, keepdim=True), 0.0)
    return shifted - torch.log1p(others.sum(dim, keepdim=True))


#: the accurate formula of each operation, called in place of the operation on wide operands
ACCURATE: dict[Any, _Formula] = {
    torch.ops.aten.gelu.default: _Formula(torch.ops.aten.gelu.default, _gelu),
    torch.ops.aten.gelu_backward.default: _Formula(
        torch.ops.aten.gelu_backward.default, _gelu_backward
    ),
    torch.ops.aten._log_softmax.default: _Formula(
        torch.ops.aten._log_softmax.default, _log_softmax
    ),
}
