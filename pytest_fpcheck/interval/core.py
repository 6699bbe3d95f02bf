"""The interval type, and the a-priori error constants the rules use (RENDER section II-B, II-C).

An :class:`Interval` is a pair of float64 arrays ``lo <= hi`` of one shape. A *point* interval
(an exact input) shares one array for both ends, which rules test with :attr:`Interval.is_point`
to skip work that a zero radius makes pointless (e.g. the radius products of a matmul). The
*whole line* at every element (:meth:`Interval.whole`: a backward pass after an unbounded loss
writes nothing else) has read-only ends shared by every such enclosure of as many elements, so
that none fills two arrays of infinities of its own (:func:`is_whole_line` recognises them).

Error constants (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1
and 3.4): ``gamma(n, u) = n u / (1 - n u)`` bounds the relative error of ``n`` roundings
(+inf once ``n u >= 1``); it holds for any order of a sum or dot product (equation (1) of
RENDER). The probabilistic variant (Higham and Mary, "A new approach to probabilistic rounding
error analysis", SIAM J. Sci. Comput. 41(5), 2019, Theorem 2.4) is
``exp(lam sqrt(n) u + n u^2 / (1 - u)) - 1``, valid with probability at least
``1 - 2 exp(-lam^2 (1 - u)^2 / 2)`` when rounding errors are independent and mean zero.
Every constant is computed in float64 and rounded up.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..formats import Format
from .rounding import down, down_to, nearest, up, up_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["PROBABILISTIC_LAMBDA", "Interval", "gamma", "gamma_probabilistic", "is_whole_line"]

#: lambda of the probabilistic bound: each bounded sum fails with probability <= 3.1e-8.
PROBABILISTIC_LAMBDA = 6.0

#: the shared ends of whole-line enclosures by length, the most recently used last
_WHOLE_LINE: dict[int, tuple[Array, Array]] = {}
#: how many lengths keep their ends (an evicted pair stays valid where it is held; only
#: :func:`is_whole_line` no longer recognises it, which costs a pass, never a wrong answer)
_WHOLE_LINE_LENGTHS = 8
#: tracking is per thread; the shared ends are not
_WHOLE_LINE_LOCK = threading.Lock()


def _whole_line_ends(length: int) -> tuple[Array, Array]:
    """Read-only flat arrays of ``length`` minus and plus infinities, made once per length."""
    with _WHOLE_LINE_LOCK:
        ends = _WHOLE_LINE.pop(length, None)
        if ends is None:
            ends = (np.full(length, -np.inf), np.full(length, np.inf))
            for end in ends:
                end.flags.writeable = False
        _WHOLE_LINE[length] = ends
        while len(_WHOLE_LINE) > _WHOLE_LINE_LENGTHS:
            del _WHOLE_LINE[next(iter(_WHOLE_LINE))]
        return ends


def is_whole_line(lo: Array, hi: Array) -> bool:
    """Whether ``lo`` and ``hi`` are views of the shared ends :meth:`Interval.whole` makes (then
    every element is the whole line; False says nothing)."""
    low = lo if lo.base is None else lo.base
    ends = _WHOLE_LINE.get(low.size)
    if ends is None or low is not ends[0]:
        return False
    return (hi if hi.base is None else hi.base) is ends[1]


def _round_up(value: float) -> float:
    return math.nextafter(value, math.inf)


def gamma(n: int, u: float) -> float:
    """gamma_n = n u / (1 - n u), rounded up; +inf when n u >= 1; 0 for n <= 0."""
    if n <= 0:
        return 0.0
    nu = _round_up(n * u)
    if nu >= 1.0:
        return math.inf
    return _round_up(nu / math.nextafter(1.0 - nu, 0.0))


def gamma_probabilistic(n: int, u: float, lam: float = PROBABILISTIC_LAMBDA) -> float:
    """Higham and Mary's probabilistic gamma~_n(lam), rounded up (never above gamma_n)."""
    if n <= 0:
        return 0.0
    exponent = _round_up(lam * math.sqrt(n) * u + n * u * u / (1.0 - u))
    return min(_round_up(math.expm1(exponent) * (1 + 2**-50)), gamma(n, u))


@dataclass(frozen=True, eq=False)
class Interval:
    """Element-wise enclosure ``[lo, hi]`` of an array of real numbers. ``summary``: (largest
    radius, some element is the whole line) of these ends, where the kernel that wrote them
    took it in the same pass (:func:`.kernels.summary` gives the same), so that the tracker's
    record need not read them again; None where nobody took it."""

    lo: Array
    hi: Array
    summary: tuple[float, bool] | None = field(default=None, kw_only=True)

    @classmethod
    def point(cls, value: Array) -> Interval:
        """The exact value itself: ``lo`` and ``hi`` are one array."""
        return cls(value, value)

    @classmethod
    def whole(cls, shape: tuple[int, ...]) -> Interval:
        """The whole line ``[-inf, +inf]`` at every element of ``shape``: read-only views of the
        ends shared by every whole-line enclosure of as many elements (module docstring)."""
        low, high = _whole_line_ends(math.prod(shape))
        return cls(low.reshape(shape), high.reshape(shape))

    @property
    def is_point(self) -> bool:
        return self.lo is self.hi

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.lo.shape)

    def map(self, view: object) -> Interval:
        """Apply an exact, value-preserving rearrangement (a callable on arrays) to both ends."""
        assert callable(view)
        if self.is_point:
            return Interval.point(view(self.lo))
        return Interval(view(self.lo), view(self.hi))

    def hull(self, other: Interval) -> Interval:
        """The smallest interval containing both (element-wise, broadcast)."""
        return Interval(np.minimum(self.lo, other.lo), np.maximum(self.hi, other.hi))

    def magnitude(self) -> Array:
        """max(|lo|, |hi|): an upper bound of |x| over the interval."""
        if self.is_point:
            mag: Array = np.abs(self.lo)
            return mag
        bound: Array = np.maximum(np.abs(self.lo), np.abs(self.hi))
        return bound

    def mid_rad(self) -> tuple[Array, Array]:
        """(mid, rad) with [mid - rad, mid + rad] containing [lo, hi] exactly (rad rounded up);
        an infinite endpoint gives rad = inf."""
        if self.is_point:
            return self.lo, np.zeros_like(self.lo)
        with np.errstate(invalid="ignore", over="ignore"):
            mid = self.lo * 0.5 + self.hi * 0.5
            mid = np.where(np.isfinite(mid), mid, 0.0)
            rad = up(np.maximum(self.hi - mid, mid - self.lo))
        return mid, rad

    def to_format(self, fmt: Format) -> Interval:
        """Outward rounding onto ``fmt``'s grid: encloses any faithful rounding of the values."""
        if fmt.name == "float64":
            return self
        return Interval(down_to(self.lo, fmt), up_to(self.hi, fmt))

    def to_nearest(self, fmt: Format) -> Interval:
        """The enclosure of a result the run rounds to nearest onto ``fmt`` (through float32 or
        float64 or not) from a value of this interval, which also holds the exact value: the
        hull of the interval and its nearest roundings, :func:`.rounding.nearest` (which states
        the rule and why it is sound). Outward rounding for formats other than float32,
        float16 and bfloat16."""
        if fmt.name == "float64":
            return self
        lo, hi = nearest(self.lo, self.hi, fmt)
        return Interval(lo, hi)

    def widen(self, radius: Array | float) -> Interval:
        """[lo - radius, hi + radius], rounded outward."""
        with np.errstate(invalid="ignore"):
            return Interval(down(self.lo - radius), up(self.hi + radius))
