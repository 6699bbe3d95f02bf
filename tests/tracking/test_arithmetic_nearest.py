"""Element-wise arithmetic on the CPU, enclosed as rounded to nearest (``Interval.to_nearest``):
the computed value and the exact one (``fractions``: the Python numbers as the doubles they are)
lie in the enclosure, for add and sub with ``alpha``, Python numbers, broadcast, 0-d and mixed
dtype operands, in bfloat16, float16 and float32, on moderate, cancelling and subnormal values.
``torch.add(a, b, alpha=3)`` in bfloat16 rounds 3 b to bfloat16 before the sum: this test found
its values a ULP outside a rule that took the product in float32. Conversions (``.to``,
``copy_``) between the floating formats hold the value before and after."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck import formats as F

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


def _cast_sources(dtype: str) -> torch.Tensor:
    """Values of ``dtype`` that stress a conversion to nearest: ties between float16 and
    bfloat16 neighbours and their float32/float64 neighbours (where a double rounding through
    float32 differs from a direct one), subnormals, values past float16's overflow threshold."""
    rng = np.random.default_rng(len(dtype))
    base = rng.standard_normal(200) * 2.0 ** rng.integers(-20, 14, 200)
    ties = []
    for fmt in ("bfloat16", "float16"):
        low = F.round_to(base, fmt, "down")
        high = F.next_up(low, fmt)
        tie = (low + high) / 2
        ties += [tie, tie + (high - low) * 2.0**-20, tie - (high - low) * 2.0**-20]
        ties += [np.nextafter(tie, np.inf), np.nextafter(tie, -np.inf)]
    extremes = [65504.0, 65520.0, 65519.99, 1e5, 3e38, 6e-8, 3e-8, 1e-40, 2.0**-149, 0.0, -0.0]
    values = np.concatenate([base, *ties, extremes, -np.array(extremes)])
    return torch.tensor(values, dtype=torch.float64).to(getattr(torch, dtype))


CONVERSIONS = [
    (source, target)
    for source in ("float64", "float32", "float16", "bfloat16")
    for target in ("float32", "float16", "bfloat16")
    if source != target
]


@pytest.mark.parametrize(("source", "target"), CONVERSIONS)
def test_a_conversion_lies_in_the_nearest_enclosure_of_its_source(source: str, target: str) -> None:
    """x.to(target) of a tracked x: the value before (exact for the cast) and after lie in the
    enclosure, for .to() and copy_()."""
    x = _cast_sources(source)
    for convert in (
        lambda v: v.to(getattr(torch, target)),
        lambda v: torch.empty(v.shape, dtype=getattr(torch, target)).copy_(v),
    ):
        with fp.track():
            tracked = x * 1  # a tracked source, with a recorded enclosure
            y = convert(tracked)
            bounds = fp.bounds_of(y)
        value = y.double().numpy()
        exact = tracked.double().numpy()
        with np.errstate(invalid="ignore"):
            assert bounds.contains(value).all(), (source, target)
            assert ((bounds.lo <= exact) & (exact <= bounds.hi)).all(), (source, target)
