"""Values of a format drawn as uniformly random bit patterns, with Hypothesis-friendly shrinking.

A format's finite values, ordered, are numbered by :func:`~pytest_fpcheck.formats.ordinal`: sign
times the magnitude bit pattern (exponent field, then fraction). Drawing a uniformly random
integer and mapping it through :func:`~pytest_fpcheck.formats.from_ordinal` is therefore drawing
a uniformly random bit pattern: every binade is as likely as the encoding makes it, subnormals
included. This module adds what a strategy needs on top of that:

* **Positions.** Both zeros are values (-0.0 < 0.0 when bounding, as in Hypothesis), so a value
  gets a *position* q: q >= 0 holds +magnitude number q, q <= -1 holds -magnitude number
  (-q - 1); q = -1 is -0.0. Without subnormals the magnitude numbers skip the ordinals
  1 .. 2**(p-1) - 1 (the subnormal range), analytically rather than by filtering. The allowed
  values are one interval of positions [low, high].
* **Uniform draws.** The random integer u comes from bytes (Hypothesis draws each byte
  uniformly), with 8 bits more than the interval needs, so ``u mod count`` is uniform to within
  a relative 2**-8. (Hypothesis' own integer distribution is concentrated near 0, which would
  make almost every float32 or float64 draw subnormal.)
* **Shrinking toward 0.0.** Residue r = 0 is the allowed position nearest 0 (the *target*);
  r = 1, 2, 3, 4, ... alternate above and below it, then run on along the longer side. Bytes
  shrink toward 0, so a failing value shrinks toward the target, through values of smaller
  magnitude.
* **Corners and specials.** With a two-byte selector, a draw is replaced by one of the allowed
  corner values (``corner_values``) with probability ``corner_rate``, and by NaN or an infinity
  (where allowed) with probability ``special_rate``. The selector shrinks toward 0, which keeps
  the plain bit pattern.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from ..formats import Format, from_ordinal, ordinal

__all__ = ["GridSampler", "magnitude", "position_bounds", "position_of"]

# struct code, bytes, left shift of the ordinal: where a format's bit pattern is a struct one.
_BIT_LAYOUTS = {
    "float64": (">d", 8, 0),
    "float32": (">f", 4, 0),
    "float16": (">e", 2, 0),
    "bfloat16": (">f", 4, 16),
    "tfloat32": (">f", 4, 13),
}
SELECTOR_BYTES = 2
SELECTOR_LEVELS = 1 << (8 * SELECTOR_BYTES)
_HEADROOM_BITS = 8


def _magnitude_number(k: int, skip: int, *, upward: bool) -> int:
    """The magnitude number of ordinal ``k``; a skipped subnormal ordinal goes to the nearest
    allowed magnitude upward (the smallest normal) or downward (zero)."""
    if skip == 0 or k == 0:
        return k
    if k <= skip:
        return 1 if upward else 0
    return k - skip


def position_of(value: float, fmt: Format, skip: int) -> int | None:
    """The position of the finite grid value ``value``, or None for a skipped subnormal."""
    k = abs(int(ordinal(value, fmt)))
    if 0 < k <= skip:
        return None
    magnitude = _magnitude_number(k, skip, upward=True)
    return -magnitude - 1 if math.copysign(1.0, value) < 0 else magnitude


def position_bounds(
    fmt: Format, min_value: float | None, max_value: float | None, *, allow_subnormal: bool
) -> tuple[int, int, int]:
    """(low, high, skip): the interval of positions of the finite values in
    [min_value, max_value] (None: unbounded), and the count of skipped subnormal ordinals.

    Each bound moves inward to the nearest allowed position; ``low > high`` means no value
    qualifies.
    """
    skip = 0 if allow_subnormal else (1 << (fmt.precision - 1)) - 1
    top = _magnitude_number(fmt.max_ordinal, skip, upward=False)
    low, high = -top - 1, top
    if min_value is not None:
        k = abs(int(ordinal(min_value, fmt)))
        if math.copysign(1.0, min_value) < 0:
            low = -_magnitude_number(k, skip, upward=False) - 1
        else:
            low = _magnitude_number(k, skip, upward=True)
    if max_value is not None:
        k = abs(int(ordinal(max_value, fmt)))
        if math.copysign(1.0, max_value) < 0:
            high = -_magnitude_number(k, skip, upward=True) - 1
        else:
            high = _magnitude_number(k, skip, upward=False)
    return low, high, skip


@cache
def _magnitude_table(fmt: Format) -> tuple[float, ...]:
    """Every non-negative value of ``fmt`` in ordinal order, from formats.from_ordinal."""
    return tuple(from_ordinal(np.arange(fmt.max_ordinal + 1), fmt).tolist())


def magnitude(k: int, fmt: Format) -> float:
    """The value of ordinal ``k`` >= 0, as formats.from_ordinal gives it, but fast.

    The ordinal is the magnitude's bit pattern. float16, float32 and float64 are unpacked by
    ``struct``; bfloat16 and tfloat32 are float32 with the low 16 or 13 fraction bits zero, so
    their pattern shifted left is a float32 pattern; the float8 formats (at most 127 values)
    use a table.
    """
    layout = _BIT_LAYOUTS.get(fmt.name)
    if layout is None:
        return _magnitude_table(fmt)[k]
    code, width, shift = layout
    value: float = struct.unpack(code, (k << shift).to_bytes(width, "big"))[0]
    return value


@dataclass(frozen=True, repr=False)
class GridSampler:
    """Decodes random bytes into a value of ``fmt`` at positions [low, high] (module
    docstring). ``corners`` and ``specials`` must already be restricted to the allowed values.
    ``label`` is its repr: the call that made it, shown in the strategy's repr.
    """

    fmt: Format
    low: int
    high: int
    skip: int
    corners: tuple[float, ...]
    specials: tuple[float, ...]
    corner_rate: float
    special_rate: float
    label: str
    _ordinal_bytes: int = field(init=False, repr=False)
    _corner_from: int = field(init=False, repr=False)
    _special_from: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        bits = (self.high - self.low + 1).bit_length() + _HEADROOM_BITS
        corner_levels = round(self.corner_rate * SELECTOR_LEVELS) if self.corners else 0
        special_levels = round(self.special_rate * SELECTOR_LEVELS) if self.specials else 0
        corner_from = SELECTOR_LEVELS - corner_levels
        object.__setattr__(self, "_ordinal_bytes", -(-bits // 8))
        object.__setattr__(self, "_corner_from", corner_from)
        object.__setattr__(self, "_special_from", max(0, corner_from - special_levels))

    @property
    def selects(self) -> bool:
        """Whether draws carry a selector (some corner or special value can replace them)."""
        return self._special_from < SELECTOR_LEVELS

    @property
    def bytes_per_value(self) -> int:
        """Random bytes one value consumes: the selector (if any), then the integer u."""
        return self._ordinal_bytes + (SELECTOR_BYTES if self.selects else 0)

    def position(self, u: int) -> int:
        """The residue of ``u`` mapped onto [low, high], zig-zagging away from the target."""
        target = min(max(0, self.low), self.high)
        above, below = self.high - target, target - self.low
        paired = min(above, below)
        r = u % (self.high - self.low + 1)
        if r <= 2 * paired:
            return target + (r + 1) // 2 if r % 2 else target - r // 2
        return target + r - paired if above > below else target - r + paired

    def value_at(self, position: int) -> float:
        """The value at ``position``: a signed magnitude number, skipping subnormals if asked."""
        number = position if position >= 0 else -position - 1
        value = magnitude(number + self.skip if number else 0, self.fmt)
        return -value if position < 0 else value

    def __repr__(self) -> str:
        return self.label

    def __call__(self, blob: bytes) -> float:
        """The value ``blob`` (``bytes_per_value`` random bytes) decodes to."""
        head = SELECTOR_BYTES if self.selects else 0
        u = int.from_bytes(blob[head:], "big")
        if head:
            selector = int.from_bytes(blob[:head], "big")
            if selector >= self._corner_from:
                return self.corners[u % len(self.corners)]
            if selector >= self._special_from:
                return self.specials[u % len(self.specials)]
        return self.value_at(self.position(u))
