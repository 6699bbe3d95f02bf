"""Element-wise interval rules (RENDER section III-B-1, "arithmetic error estimation").

Each rule encloses the exact result over the input box in float64, then rounds outward onto the
result format: any faithful rounding of the exact result, including a double rounding through a
finer compute format (PyTorch computes float16 and bfloat16 in float32), lies in the enclosure.

* Correctly rounded operations (add, sub, mul, div, sqrt) need nothing else. Sums carry an
  exactness test (Knuth's TwoSum) so that an exact float64 result is not widened; products of
  operands of at most 26 significant bits are exact in float64.
* Library functions (exp, log, tanh, erf, ...) have a documented error of ``k`` ULPs in the
  format that evaluates them (:data:`ULP_ERRORS`); their float64 evaluation here carries an
  allowance of 2**-49 relative (8 float64 ULPs) before that.
* Where the result may be NaN (inf - inf, 0 * inf, 0 / 0, inf / inf, the log or square root
  of a negative) the element's enclosure is the whole line ``[-inf, +inf]``: that is how an
  enclosure says "may be NaN" (:func:`pytest_fpcheck.interval.bounds.contains`). Propagating
  such elements through later operations is the tracker's job.
* max/min/clamp use the interval max/min, which equals RENDER's dynamic rule when the
  comparison is decided by the intervals and is the hull of both branches when it is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..formats import Format
from .core import Interval
from .kernels import add_bounds, div_bounds, library_bounds, mul_bounds
from .rounding import down, up

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]
    Bool = NDArray[np.bool_]

__all__ = [
    "ABSOLUTE_ERRORS",
    "ULP_ERRORS",
    "absolute",
    "add",
    "clamp",
    "div",
    "library_allowance",
    "library_function",
    "maximum",
    "minimum",
    "mul",
    "negate",
    "sqrt",
    "sub",
    "where",
]

#: Maximum error, in ULPs of the format that evaluates it, of each library function. The
#: default is the largest of: glibc's "Known Maximum Errors in Math Functions" (x86_64, float
#: and double), SLEEF's u10 functions used by PyTorch's vectorized CPU kernels (1.0 ULP), and
#: the CUDA C Programming Guide, appendix "Mathematical Functions" (single precision: expf 2,
#: exp2f 2, expm1f 1, logf 1, log2f 1, log1pf 1, tanhf 2, erff 2, rsqrtf 2, sinf/cosf 2,
#: powf 4, log10f 2, sinhf 3, coshf 2, asinhf 3). Edit it (``pytest_fpcheck.interval.ULP_ERRORS[name] = k``) for other libraries.
#: Some implementations are accurate in absolute, not relative, terms: :data:`ABSOLUTE_ERRORS`.
ULP_ERRORS: dict[str, float] = {
    "exp": 2.0,
    "exp2": 2.0,
    "expm1": 2.0,
    "log": 2.0,
    "log2": 2.0,
    "log1p": 2.0,
    "tanh": 2.0,
    "erf": 2.0,
    "rsqrt": 2.0,
    "sin": 2.0,
    "cos": 2.0,
    "pow": 4.0,
    "log10": 2.0,
    "sinh": 3.0,
    "cosh": 2.0,
    "asinh": 3.0,
}

#: Absolute error allowances added to the ULP error, as (multiple of the evaluating format's
#: machine epsilon, multiple of its smallest normal number). ATen's vectorized CPU ``erf`` is a
#: polynomial approximation of the Abramowitz and Stegun 7.1.26 kind, accurate to about 1.5e-7
#: absolutely (not relatively: it returns zero for tiny arguments): 4 eps. ATen's ``sigmoid``
#: is 1 / (1 + exp(-x)), whose exp overflows below x = -88 (float32) and returns 0 where the
#: result is below 1 / max_finite: 4 smallest normals.
ABSOLUTE_ERRORS: dict[str, tuple[float, float]] = {"erf": (4.0, 0.0), "sigmoid": (0.0, 4.0)}

_F64_SLACK = 2.0**-49
_EXACT_PRODUCT_BITS = 26


def everything_where_nan(interval: Interval) -> Interval:
    """``interval``, with the whole line wherever an endpoint is NaN."""
    if interval.is_point:
        return interval
    return _everything_where_nan(interval.lo, interval.hi)


def _everything_where_nan(lo: Array, hi: Array, also: Bool | None = None) -> Interval:
    """[lo, hi], with the whole line wherever an endpoint is NaN or ``also`` is set."""
    nan = np.isnan(lo) | np.isnan(hi)
    if also is not None:
        nan = nan | also
    if nan.any():
        lo = np.where(nan, -np.inf, lo)
        hi = np.where(nan, np.inf, hi)
    return Interval(lo, hi)


def add(a: Interval, b: Interval, fmt: Format, *, nearest: bool = False) -> Interval:
    """[a.lo + b.lo, a.hi + b.hi], exact sums kept, inexact ones stepped outward; the whole
    line where inf + (-inf) is possible (one compiled pass: :func:`.kernels.add_bounds`).
    ``nearest``: the run rounds the sum to nearest (:meth:`.core.Interval.to_nearest`), else
    outward rounding onto ``fmt`` (any faithful rounding)."""
    lo, hi, summary = add_bounds(a.lo, a.hi, b.lo, b.hi, False, fmt, nearest)
    return Interval(lo, hi, summary=summary)


def negate(a: Interval) -> Interval:
    """-[lo, hi] = [-hi, -lo], exact."""
    if a.is_point:
        return Interval.point(-a.lo)
    return Interval(-a.hi, -a.lo)


def sub(a: Interval, b: Interval, fmt: Format, *, nearest: bool = False) -> Interval:
    """a + (-b) (``nearest`` as for :func:`add`)."""
    lo, hi, summary = add_bounds(a.lo, a.hi, b.lo, b.hi, True, fmt, nearest)
    return Interval(lo, hi, summary=summary)


def absolute(a: Interval) -> Interval:
    """|x| over [lo, hi]: [0, max(|lo|, |hi|)] when the interval spans zero, exact."""
    if a.is_point:
        return Interval.point(np.abs(a.lo))
    lo_abs, hi_abs = np.abs(a.lo), np.abs(a.hi)
    spans = (a.lo < 0) & (a.hi > 0)
    lo = np.where(spans, 0.0, np.minimum(lo_abs, hi_abs))
    return Interval(lo, np.maximum(lo_abs, hi_abs))


def mul(
    a: Interval, b: Interval, fmt: Format, *, operand_bits: int = 53, nearest: bool = False
) -> Interval:
    """The interval product (RENDER section II-C). ``operand_bits``, the most significant bits
    any operand endpoint has, decides whether float64 products are exact (<= 26 bits each;
    a tensor's recorded ends have at most 26, :func:`.rounding.nearest`). One compiled pass:
    :func:`.kernels.mul_bounds`. ``nearest`` as for :func:`add`."""
    lo, hi, summary = mul_bounds(
        a.lo,
        a.hi,
        b.lo,
        b.hi,
        operand_bits > _EXACT_PRODUCT_BITS,
        fmt,
        nearest,
    )
    exact = a.is_point and b.is_point and operand_bits <= _EXACT_PRODUCT_BITS
    if exact and fmt.name == "float64" and bool(np.all(lo == hi)):
        return Interval.point(lo)  # exact products of exact values
    return Interval(lo, hi, summary=summary)


def div(a: Interval, b: Interval, fmt: Format) -> Interval:
    """a / b; a divisor interval containing zero (of either sign) gives [-inf, +inf]. Where
    the operands' signs decide the quotient's, a zero end stays at zero (0 / b is exactly 0,
    an underflowing quotient keeps its sign): stepped below zero, the root of Adam's
    bias-corrected second moment (NAdam's ``v / bc2``) was NaN for a zero gradient. One
    compiled pass: :func:`.kernels.div_bounds`."""
    lo, hi = div_bounds(a.lo, a.hi, b.lo, b.hi, fmt)
    return Interval(lo, hi)


def sqrt(a: Interval, fmt: Format) -> Interval:
    """Correctly rounded square root; a negative lower end may give NaN: the whole line. The
    lower end stays at or above 0 (the root of 0 is 0, of -0 is -0, equal to 0): stepping it
    below zero would make Adam's denominator, the root of a zero second moment, hold
    negative numbers."""
    with np.errstate(invalid="ignore"):
        lo, hi = np.sqrt(a.lo), np.sqrt(a.hi)
    lo = np.where(a.lo < 0, np.nan, np.where(a.lo >= 0, np.maximum(down(lo), 0.0), down(lo)))
    return _everything_where_nan(lo, up(hi)).to_format(fmt)


def library_function(
    function: Callable[[Array], Array],
    a: Interval,
    fmt: Format,
    compute: Format,
    ulps: float,
    *,
    increasing: bool = True,
    absolute: tuple[float, float] = (0.0, 0.0),
    relative: float = 0.0,
) -> Interval:
    """A monotone library function evaluated in ``compute`` with at most ``ulps`` ULPs of
    error, then rounded to ``fmt``.

    The rule: f's exact range over [lo, hi] is [f(lo), f(hi)] (swapped if decreasing), from a
    float64 evaluation widened by 2**-49 relative; the library's result is within
    ulps * (2**(1-p) * M + tiny) of the exact one, M = the range's largest magnitude, tiny the
    smallest subnormal of ``compute``, plus ``absolute`` = (a, b) as a eps + b smallest normal of
    ``compute``, plus ``relative`` M (for intermediates rounded to a narrower format); the
    stored result is that rounded to ``fmt``.
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        f_lo = function(a.lo)
        f_hi = f_lo if a.is_point else function(a.hi)
    lo, hi = library_bounds(
        f_lo, f_hi, increasing, *library_allowance(compute, ulps, absolute, relative), fmt
    )
    return Interval(lo, hi)


def library_allowance(
    compute: Format,
    ulps: float,
    absolute: tuple[float, float] = (0.0, 0.0),
    relative: float = 0.0,
) -> tuple[float, float]:
    """(per magnitude, constant) of :func:`library_function`'s allowance, ``per magnitude * M
    + constant``: the constant terms' float64 sum stepped up, at least their exact sum."""
    constant = math.nextafter(
        ulps * compute.smallest_subnormal
        + absolute[0] * compute.eps
        + absolute[1] * compute.smallest_normal,
        math.inf,
    )
    return _F64_SLACK + ulps * compute.eps + relative, constant


def maximum(a: Interval, b: Interval) -> Interval:
    """Interval max: [max(a.lo, b.lo), max(a.hi, b.hi)], exact."""
    if a.is_point and b.is_point:
        return Interval.point(np.maximum(a.lo, b.lo))
    return _everything_where_nan(np.maximum(a.lo, b.lo), np.maximum(a.hi, b.hi))


def minimum(a: Interval, b: Interval) -> Interval:
    """Interval min: [min(a.lo, b.lo), min(a.hi, b.hi)], exact."""
    if a.is_point and b.is_point:
        return Interval.point(np.minimum(a.lo, b.lo))
    return _everything_where_nan(np.minimum(a.lo, b.lo), np.minimum(a.hi, b.hi))


def clamp(a: Interval, low: Interval | None, high: Interval | None) -> Interval:
    """min(max(a, low), high), with the interval max and min."""
    if low is not None:
        a = maximum(a, low)
    if high is not None:
        a = minimum(a, high)
    return a


def where(condition: Bool, decided: Bool, a: Interval, b: Interval) -> Interval:
    """``condition ? a : b`` element-wise. Where the condition is decided by the intervals of
    what it compared, the taken branch's interval; where it is not, the hull of both."""
    shape = np.broadcast_shapes(condition.shape, a.shape, b.shape)
    taken_lo = np.where(condition, a.lo, b.lo)
    taken_hi = np.where(condition, a.hi, b.hi)
    if decided.all():
        if a.is_point and b.is_point:
            return Interval.point(np.broadcast_to(taken_lo, shape).copy())
        return Interval(taken_lo, taken_hi)
    hull_lo, hull_hi = np.minimum(a.lo, b.lo), np.maximum(a.hi, b.hi)
    return Interval(np.where(decided, taken_lo, hull_lo), np.where(decided, taken_hi, hull_hi))
