"""Values exchanged with an implementation under test: turning its result into a float, and the
random inputs on which a summation tree is checked against it (FPRev section 3.3 checks candidate
orders "through randomized testing").
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidArgument
from ...formats import FORMATS, Format, round_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["random_inputs", "same_float", "to_float"]


def to_float(value: Any, *, what: str = "impl(x)") -> float:
    """The Python float held by a scalar result: a Python number, a NumPy (or ml_dtypes) scalar or
    one-element array, or a one-element PyTorch tensor (on any device; ``.item()`` copies it to
    the host). Every format's values are float64 numbers, so the conversion is exact.

    Whether ``value`` is a tensor is decided by ``type(value).__module__``: torch is never
    imported to ask.
    """
    if type(value) is float:
        return value
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, np.generic) and (value.dtype.kind in "fiu" or value.dtype.name in FORMATS):
        return float(value)  # NumPy and ml_dtypes scalars
    if type(value).__module__.startswith("torch") and "torch" in sys.modules:
        if value.numel() != 1:
            raise InvalidArgument(what, value, "a one-element tensor holding the sum")
        return float(value.item())
    arr = np.asarray(value) if not isinstance(value, bool) else np.asarray(None)
    if arr.size != 1 or not (arr.dtype.kind in "fiu" or arr.dtype.name in FORMATS):
        raise InvalidArgument(what, value, "a floating-point scalar holding the sum")
    return float(arr.reshape(()).astype(np.float64))


def same_float(a: float, b: float) -> bool:
    """Bit-for-bit equality of two results read as float64: NaN equals NaN, +0 differs from -0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def random_inputs(
    fmt: Format, n: int, trials: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """``trials`` rows of ``n`` values on ``fmt``'s grid whose sum depends on the order of
    summation, returned as float64.

    The rule: random sign, a significand uniform in [1, 2), and a binary exponent uniform in a
    window whose width is drawn per row from 0, 1, 2, 4, 8 and 16 binades (narrow windows make
    every addition round, wide ones make small terms vanish), ending at ``emax - ceil(log2 n) -
    2`` so that no partial sum overflows, and starting at least ``p`` binades above ``emin`` so
    that the values stay normal.
    """
    top = min(fmt.emax - math.ceil(math.log2(max(n, 2))) - 2, 24)
    floor = fmt.emin + fmt.precision
    widths = rng.choice(np.array([0, 1, 2, 4, 8, 16]), size=(trials, 1))
    bottom = np.maximum(top - widths, floor)
    exponent = np.minimum(bottom + rng.integers(0, 17, size=(trials, n)) % (widths + 1), top)
    significand = rng.uniform(1.0, 2.0, size=(trials, n))
    sign = rng.choice(np.array([-1.0, 1.0]), size=(trials, n))
    return round_to(sign * np.ldexp(significand, exponent), fmt)
