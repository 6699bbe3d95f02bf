"""Facts of each floating-point format, and exact rounding onto its grid.

One table (:data:`FORMATS`) holds, for float64, float32, tfloat32, float16, bfloat16,
float8_e4m3fn and float8_e5m2: the precision ``p`` (significand bits, the implicit bit
included), ``emin``/``emax``, the unit round-off ``u = 2**-p``, machine epsilon ``2**(1-p)``, the
smallest normal and subnormal numbers, the largest finite number and whether the format has
infinities and NaNs. The definitions follow RENDER section II-A (floating-point representation)
and IEEE 754-2019 section 3.

Every helper below works in float64 and is exact: the grids of all these formats are subsets of
float64's, so scaling by powers of two and rounding to an integer (``rint``, ``trunc``, ``floor``,
``ceil``) computes the correctly rounded value without double rounding. That rule is written once,
in :func:`quantize`, with IEEE 754's overflow rule beside it (:func:`overflow_limits`):
:func:`round_to` runs them on NumPy arrays, and :mod:`pytest_fpcheck.interval.rounding` compiles
the same two functions with Numba into the scalar rounder that the interval engine and the
emulators call (this module itself imports only NumPy). The *ordinal* of a grid
value is its sign times its magnitude bit pattern (exponent field followed by the fraction), the
integer the strategies draw and :func:`next_up` steps.

Also here, because both the strategies and the order revealer need it: the masks and units of
FPRev's masked all-one arrays for each format (FPRev sections 3.2 and 8.1).
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .errors import InvalidArgument

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

__all__ = [
    "FORMATS",
    "MODE_CODES",
    "ROUNDING_MODES",
    "Format",
    "format_of",
    "from_ordinal",
    "is_on_grid",
    "mask_and_unit",
    "next_down",
    "next_up",
    "numpy_dtype",
    "ordinal",
    "overflow_limits",
    "quantize",
    "round_to",
    "ulp",
]

RoundingMode = Literal["nearest-even", "toward-zero", "up", "down"]
ROUNDING_MODES: tuple[str, ...] = ("nearest-even", "toward-zero", "up", "down")
#: the code of each rounding mode in :func:`quantize` and the compiled rounders
MODE_CODES: dict[str, int] = {"nearest-even": 0, "toward-zero": 1, "down": 2, "up": 3}


@dataclass(frozen=True)
class Format:
    """The facts of one binary floating-point format.

    ``fraction_bits`` counts the stored significand bits; the precision ``p`` adds the implicit
    leading bit. ``storage`` is False for tfloat32, a compute mode whose values live in float32.
    """

    name: str
    exponent_bits: int
    fraction_bits: int
    emax: int
    max_finite: float
    has_inf: bool
    has_nan: bool
    storage: bool
    aliases: tuple[str, ...] = ()

    @property
    def bits(self) -> int:
        """Storage width in bits (32 for tfloat32, which is stored in float32)."""
        return 32 if not self.storage else 1 + self.exponent_bits + self.fraction_bits

    @property
    def precision(self) -> int:
        """p: significand bits including the implicit one."""
        return self.fraction_bits + 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number: 1 - bias, bias = 2**(exponent_bits-1) - 1."""
        return 2 - (1 << (self.exponent_bits - 1))

    @property
    def unit_roundoff(self) -> float:
        """u = 2**-p, the relative error bound of round-to-nearest."""
        return math.ldexp(1.0, -self.precision)

    @property
    def eps(self) -> float:
        """Machine epsilon 2**(1-p): the gap between 1 and the next larger number."""
        return math.ldexp(1.0, 1 - self.precision)

    @property
    def smallest_normal(self) -> float:
        """2**emin."""
        return math.ldexp(1.0, self.emin)

    @property
    def smallest_subnormal(self) -> float:
        """2**(emin - p + 1), the spacing of the subnormal range."""
        return math.ldexp(1.0, self.emin - self.precision + 1)

    @functools.cached_property
    def max_ordinal(self) -> int:
        """Ordinal of the largest finite number."""
        top: int = ordinal(self.max_finite, self).item()
        return top

    def __str__(self) -> str:
        return self.name


def _standard_max(exponent_bits: int, fraction_bits: int) -> float:
    emax = 2 ** (exponent_bits - 1) - 1
    return math.ldexp(2.0 - math.ldexp(1.0, -fraction_bits), emax)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("float64", 11, 52, 1023, sys.float_info.max, True, True, True, ("double", "f8")),
        Format("float32", 8, 23, 127, _standard_max(8, 23), True, True, True, ("float", "f4")),
        Format("tfloat32", 8, 10, 127, _standard_max(8, 10), True, True, False, ("tf32",)),
        Format("float16", 5, 10, 15, 65504.0, True, True, True, ("half", "f2")),
        Format("bfloat16", 8, 7, 127, _standard_max(8, 7), True, True, True, ("bf16",)),
        # OCP FP8 E4M3 "fn": no infinities; the all-ones pattern S.1111.111 is the only NaN, so
        # the largest finite value is 1.110b * 2**8 = 448.
        Format("float8_e4m3fn", 4, 3, 8, 448.0, False, True, True, ("e4m3", "fp8_e4m3")),
        Format("float8_e5m2", 5, 2, 15, 57344.0, True, True, True, ("e5m2", "fp8_e5m2")),
    )
}
_BY_ALIAS: dict[str, Format] = {a: f for f in FORMATS.values() for a in (f.name, *f.aliases)}
_VALID_NAMES = ", ".join(repr(name) for name in FORMATS)


def format_of(x: Any, *, argument: str = "dtype") -> Format:
    """The :class:`Format` named by ``x``: a Format, a name or alias, a NumPy / ml_dtypes /
    PyTorch dtype, an array or tensor (by its dtype), or a Python float (float64).

    Deciding whether ``x`` is a torch dtype looks at ``type(x).__module__`` and never imports
    torch: the check is free.
    """
    if isinstance(x, Format):
        return x
    if isinstance(x, str):
        found = _BY_ALIAS.get(x.removeprefix("torch."))
        if found is None:
            raise InvalidArgument(argument, x, f"one of {_VALID_NAMES}")
        return found
    if isinstance(x, float):
        return FORMATS["float64"]
    if type(x).__module__.startswith("torch"):  # torch.dtype, or a tensor (by its dtype)
        name = str(getattr(x, "dtype", x)).removeprefix("torch.")
        if name in FORMATS:
            return FORMATS[name]
        raise InvalidArgument(argument, x, f"a floating dtype, one of {_VALID_NAMES}")
    dtype = x if isinstance(x, type) else getattr(x, "dtype", x)
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise InvalidArgument(
            argument, x, f"a floating format name, dtype or array; one of {_VALID_NAMES}"
        ) from None
    if name in FORMATS:
        return FORMATS[name]
    raise InvalidArgument(argument, x, f"a floating dtype, one of {_VALID_NAMES}")


def numpy_dtype(fmt: Format | str) -> np.dtype[Any]:
    """The NumPy dtype that stores ``fmt`` (ml_dtypes for bfloat16 and the float8 formats;
    float32 for the tfloat32 compute mode)."""
    fmt = format_of(fmt)
    if fmt.name == "tfloat32":
        return np.dtype(np.float32)
    if fmt.name in ("float64", "float32", "float16"):
        return np.dtype(fmt.name)
    import ml_dtypes

    dtype: np.dtype[Any] = np.dtype(getattr(ml_dtypes, fmt.name))
    return dtype


def _float64(x: ArrayLike, argument: str) -> NDArray[np.float64]:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub" and arr.dtype.name not in FORMATS:
        raise InvalidArgument(argument, x, "real numbers (a float, an array or a nested list)")
    return arr.astype(np.float64)


def quantize(x: NDArray[np.float64], precision: int, emin: int, mode: int) -> NDArray[np.float64]:
    """``x`` rounded to ``precision`` significant bits with the exponent clamped below at
    ``emin``, by the mode of code ``mode`` (:data:`MODE_CODES`: 0 nearest-even, 1 toward zero,
    2 down, 3 up); no overflow rule (:func:`overflow_limits` is the caller's), and an infinity
    or NaN comes back unchanged.

    The rule: with E = max(floor(log2|x|), emin) the quantum is q = 2**(E-p+1); x/q is rounded
    to an integer and multiplied back. E is read from the exponent field of the float64 pattern
    (a float64 subnormal, field 0, is below every format's emin); both scalings are by a power of
    two and exact (x/q < 2**p), and a result of zero keeps the sign of ``x``. The same code runs element-wise
    on a NumPy float64 array and, compiled by Numba, on one float64 scalar.
    """
    biased = (np.float64(x).view(np.int64) >> 52) & 0x7FF
    quantum = np.ldexp(1.0, np.maximum(biased - 1023, emin) - (precision - 1))
    scaled = x / quantum
    if mode == 0:
        integral = np.rint(scaled)
    elif mode == 1:
        integral = np.trunc(scaled)
    elif mode == 2:
        integral = np.floor(scaled)
    else:
        integral = np.ceil(scaled)
    rounded: NDArray[np.float64] = integral * quantum
    return rounded


def overflow_limits(mode: int, big: float, overflow: float) -> tuple[float, float]:
    """(what a rounded value above ``big`` becomes, what one below ``-big`` becomes) in the mode
    of code ``mode``, by IEEE 754 section 7.4: nearest-even and the direction away from zero give
    ``overflow`` (an infinity, or NaN for a format without infinities) of the value's sign, the
    other directions the largest finite number ``big``. Compiled by Numba as it stands."""
    above = big if mode == 1 or mode == 2 else overflow
    below = -big if mode == 1 or mode == 3 else -overflow
    return above, below


def _exponent(ax: NDArray[np.float64], fmt: Format) -> NDArray[np.int64]:
    """floor(log2(|ax|)) clamped below at emin, exactly (via frexp, which ignores the sign;
    zero gives emin)."""
    _, e = np.frexp(ax)
    exponent: NDArray[np.int64] = np.where(
        ax == 0, fmt.emin, np.maximum(e.astype(np.int64) - 1, fmt.emin)
    )
    return exponent


def round_to(x: ArrayLike, fmt: Format | str, mode: str = "nearest-even") -> NDArray[np.float64]:
    """``x`` rounded onto ``fmt``'s grid by ``mode``, returned exactly as float64.

    The rule: with E = max(floor(log2|x|), emin) the quantum is q = 2**(E-p+1); x/q is rounded
    to an integer (half-even, toward zero, floor or ceil) and multiplied back. Both scalings are
    by powers of two and exact. Results beyond the largest finite number follow IEEE 754 section
    7.4: nearest-even and the direction away from zero overflow to infinity (to NaN in a format
    without infinities), the other directions give the largest finite number. NaN stays NaN; an
    infinity stays infinite (NaN in a format without infinities).
    """
    fmt = format_of(fmt, argument="fmt")
    if mode not in ROUNDING_MODES:
        raise InvalidArgument("mode", mode, f"one of {', '.join(map(repr, ROUNDING_MODES))}")
    xs = _float64(x, "x")
    if fmt.name == "float64":
        return xs.copy()
    code = MODE_CODES[mode]
    big = fmt.max_finite
    with np.errstate(invalid="ignore", over="ignore"):
        y = quantize(xs, fmt.precision, fmt.emin, code)
        above, below = overflow_limits(code, big, math.inf if fmt.has_inf else math.nan)
        y = np.where(y > big, above, y)
        y = np.where(y < -big, below, y)
        nonfinite = xs if fmt.has_inf else np.where(np.isinf(xs), np.nan, xs)
        result: NDArray[np.float64] = np.where(np.isfinite(xs), y, nonfinite)
    return result


def is_on_grid(x: ArrayLike, fmt: Format | str) -> NDArray[np.bool_]:
    """Element-wise: is ``x`` exactly representable in ``fmt`` (NaN and, where the format has
    them, infinities count as representable)?"""
    fmt = format_of(fmt, argument="fmt")
    xs = _float64(x, "x")
    rounded = round_to(xs, fmt)
    same: NDArray[np.bool_] = (rounded == xs) | (np.isnan(xs) & fmt.has_nan)
    return same


def ordinal(x: ArrayLike, fmt: Format | str) -> NDArray[np.int64]:
    """Sign times the magnitude bit pattern of the grid value ``x`` (both zeros give 0).

    The rule: |x| = m * 2**(E-p+1) with E = max(floor(log2|x|), emin) has ordinal
    (E - emin) * 2**(p-1) + m, which counts the grid points between 0 and |x|. ``x`` must be
    finite and on the grid.
    """
    fmt = format_of(fmt, argument="fmt")
    xs = _float64(x, "x")
    if not np.all(np.isfinite(xs)) or not np.all(round_to(xs, fmt) == xs):
        raise InvalidArgument("x", x, f"finite values on the {fmt.name} grid")
    p = fmt.precision
    ax = np.abs(xs)
    e = _exponent(ax, fmt)
    m = np.ldexp(ax, -(e - p + 1)).astype(np.int64)
    normal = ax >= fmt.smallest_normal
    mag = np.where(normal, (e - fmt.emin) * (1 << (p - 1)) + m, m)
    result: NDArray[np.int64] = np.where(xs < 0, -mag, mag)
    return result


def from_ordinal(k: ArrayLike, fmt: Format | str) -> NDArray[np.float64]:
    """The grid value whose :func:`ordinal` is ``k`` (the inverse map; 0 gives +0.0)."""
    fmt = format_of(fmt, argument="fmt")
    ks = np.asarray(k, dtype=np.int64)
    limit = fmt.max_ordinal
    if np.any(np.abs(ks) > limit):
        raise InvalidArgument("k", k, f"ordinals in [-{limit}, {limit}] for {fmt.name}")
    p = fmt.precision
    half = 1 << (p - 1)
    mag = np.abs(ks)
    binade = mag // half
    normal_m = half + mag % half
    e = fmt.emin + binade - 1
    value = np.where(
        binade == 0,
        np.ldexp(mag.astype(np.float64), fmt.emin - p + 1),
        np.ldexp(normal_m.astype(np.float64), (e - p + 1).astype(np.int64)),
    )
    result: NDArray[np.float64] = np.where(ks < 0, -value, value)
    return result


def ulp(x: ArrayLike, fmt: Format | str) -> NDArray[np.float64]:
    """The unit in the last place at ``x``: 2**(max(floor(log2|x|), emin) - p + 1).

    This is the gap between |x| and the next larger grid number (for a power of two the gap
    below is half of it). ulp(0) is the smallest subnormal; a non-finite ``x`` gives NaN.
    """
    fmt = format_of(fmt, argument="fmt")
    xs = _float64(x, "x")
    with np.errstate(invalid="ignore"):
        # frexp takes the sign and non-finite values as they are (the latter become NaN below)
        e = _exponent(xs, fmt)
        result: NDArray[np.float64] = np.where(
            np.isfinite(xs), np.ldexp(1.0, e - fmt.precision + 1), np.nan
        )
    return result


def next_up(x: ArrayLike, fmt: Format | str) -> NDArray[np.float64]:
    """The smallest ``fmt`` number greater than ``x`` (IEEE 754 nextUp).

    Past the largest finite number comes +inf (NaN in a format without infinities); nextUp of
    -inf is the most negative finite number; NaN stays NaN. ``x`` need not be on the grid.
    """
    fmt = format_of(fmt, argument="fmt")
    return _step(_float64(x, "x"), fmt, +1)


def next_down(x: ArrayLike, fmt: Format | str) -> NDArray[np.float64]:
    """The largest ``fmt`` number less than ``x``: ``-next_up(-x)``."""
    fmt = format_of(fmt, argument="fmt")
    return -_step(-_float64(x, "x"), fmt, +1)


def _step(xs: NDArray[np.float64], fmt: Format, direction: int) -> NDArray[np.float64]:
    if fmt.name == "float64":
        stepped: NDArray[np.float64] = np.nextafter(xs, np.inf * direction)
        return stepped
    with np.errstate(invalid="ignore"):
        up = round_to(xs, fmt, "up")
        on_grid = up == xs
        finite = np.isfinite(up) & (np.abs(up) <= fmt.max_finite)
        base = np.where(on_grid & finite, up, 0.0)
        k = ordinal(base, fmt) + 1
        overflow = k > fmt.max_ordinal
        k = np.minimum(k, fmt.max_ordinal)
        after = np.where(overflow, np.inf if fmt.has_inf else np.nan, from_ordinal(k, fmt))
        result: NDArray[np.float64] = np.where(
            on_grid & finite,
            after,
            np.where(np.isneginf(xs), -fmt.max_finite, up),
        )
        result = np.where(np.isnan(xs), np.nan, result)
        if fmt.has_inf:
            result = np.where(np.isposinf(xs), np.inf, result)
        else:
            result = np.where(np.isposinf(xs), np.nan, result)
    return result


# FPRev section 3.2 (masked all-one arrays) and section 8.1 (low-range formats): per format, a
# mask M and a unit (the value of the "ones"). Wide formats use M = 2**100, far from overflow in
# any implementation that merely sums. float16 and the float8 formats cannot hold a mask that
# swamps sums of ones, so their unit is the smallest subnormal and M the largest power of two.
_MASKS: dict[str, tuple[float, float]] = {
    "float64": (2.0**100, 1.0),
    "float32": (2.0**100, 1.0),
    "tfloat32": (2.0**100, 1.0),
    "bfloat16": (2.0**100, 1.0),
    "float16": (2.0**15, 2.0**-24),
    "float8_e5m2": (2.0**15, 2.0**-16),
    "float8_e4m3fn": (2.0**8, 2.0**-9),
}


def mask_and_unit(
    fmt: Format | str, n: int, *, accumulator: Format | str | None = None
) -> tuple[float, float]:
    """(M, unit) for FPRev's masked all-one arrays of length ``n`` in ``fmt``, summed in
    ``accumulator`` (default: ``fmt`` itself).

    The rule (FPRev 3.2, 8.1): every partial sum of units is k * unit with k <= n - 2; it must be
    exact in the accumulator and, to be read back, in ``fmt`` (k <= 2**p for both; the unit at
    least the accumulator's smallest subnormal) and be swamped by both masks: M + s and -M + s
    round back to +-M, which holds for s < ulp_acc(M) / 4 (below a power of two the spacing halves). Raises ``InvalidArgument``
    when no such pair exists for ``n``.
    """
    fmt = format_of(fmt, argument="dtype")
    acc = fmt if accumulator is None else format_of(accumulator, argument="accumulator")
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise InvalidArgument("n", n, "an int >= 2 (one +M, one -M, ones elsewhere)")
    mask, unit = _MASKS[fmt.name]
    if acc.precision < fmt.precision:
        raise InvalidArgument(
            "accumulator", accumulator, f"a format at least as precise as {fmt.name}"
        )
    swamped = float(ulp(mask, acc)) / 4
    # counts must be exact in the accumulator and, to be read back, in the result's format
    limit = min(2**fmt.precision, 2**acc.precision, math.ceil(swamped / unit) - 1) + 2
    if unit < acc.smallest_subnormal or n > limit:
        raise InvalidArgument(
            "n",
            n,
            f"at most {max(limit, 2)} for {fmt.name} summed in {acc.name} "
            f"(mask {mask!r}, unit {unit!r})",
            hint="FPRev section 8.1: the accumulator cannot keep partial sums exact beyond it.",
        )
    return mask, unit
