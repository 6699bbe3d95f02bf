"""Element-wise arithmetic on the CPU, enclosed as rounded to nearest (``Interval.to_nearest``):
the computed value and the exact one (``fractions``: the Python numbers as the doubles they are)
lie in the enclosure, for add and sub with ``alpha``, Python numbers, broadcast, 0-d and mixed
dtype operands, in bfloat16, float16 and float32, on moderate, cancelling and subnormal values.
``torch.add(a, b, alpha=3)`` in bfloat16 rounds 3 b to bfloat16 before the sum: this test found
its values a ULP outside a rule that took the product in float32."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

Exact = Callable[[np.ndarray, np.ndarray, int, int], Fraction]


def _elementwise(formula: Callable[[Fraction, Fraction], Fraction]) -> Exact:
    return lambda a, b, i, j: formula(Fraction(a[i, j]), Fraction(b[i, j]))


CASES: dict[str, tuple[Callable[..., object], Exact]] = {
    "add alpha=3": (
        lambda a, b: torch.add(a, b, alpha=3),
        _elementwise(lambda x, y: x + 3 * y),
    ),
    "sub alpha=0.1": (
        lambda a, b: torch.sub(a, b, alpha=0.1),
        _elementwise(lambda x, y: x - Fraction(0.1) * y),
    ),
    "a + 0.1": (lambda a, b: a + 0.1, _elementwise(lambda x, y: x + Fraction(0.1))),
    "0.3 - a": (lambda a, b: 0.3 - a, _elementwise(lambda x, y: Fraction(0.3) - x)),
    "a * 0.1": (lambda a, b: a * 0.1, _elementwise(lambda x, y: x * Fraction(0.1))),
    "a * b (broadcast)": (
        lambda a, b: a * b[:1],
        lambda a, b, i, j: Fraction(a[i, j]) * Fraction(b[0, j]),
    ),
    "a + b[0, 0] (0-d)": (
        lambda a, b: a + b[0, 0],
        lambda a, b, i, j: Fraction(a[i, j]) + Fraction(b[0, 0]),
    ),
    "a + b (float32 b)": (lambda a, b: a + b.float(), _elementwise(lambda x, y: x + y)),
    "a * b (float32 b)": (lambda a, b: a * b.float(), _elementwise(lambda x, y: x * y)),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", list(CASES))
def test_computed_and_exact_values_lie_in_the_nearest_enclosure(name: str, dtype: str) -> None:
    torch.manual_seed(len(name) * 7 + len(dtype))
    dt = getattr(torch, dtype)
    function, exact = CASES[name]
    for trial in range(30):
        a = (4 * torch.randn(3, 4)).to(dt)
        b = torch.randn(3, 4).to(dt)
        if trial % 3 == 0:  # cancellation
            b = (-a / 3 + 1e-3 * torch.randn(3, 4)).to(dt)
        if trial % 5 == 0:  # subnormal
            a = a * (2.0**-20 if dt == torch.float16 else 2.0**-130)
        with fp.track():
            y = function(a, b)
            bounds = fp.bounds_of(y)
        value = y.double().numpy()
        assert bounds.contains(value).all(), (name, dtype, trial)
        a64, b64 = a.double().numpy(), b.double().numpy()
        outside = [
            (i, j)
            for i in range(3)
            for j in range(4)
            if not Fraction(bounds.lo[i, j]) <= exact(a64, b64, i, j) <= Fraction(bounds.hi[i, j])
        ]
        assert not outside, (name, dtype, trial, outside)
