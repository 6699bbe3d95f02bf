"""Kernels of the softmax rules (:mod:`pytest_fpcheck.tracking.torch.rules.softmax`): the
enclosure of each row's softmax (:func:`softmax_bounds`) and log-softmax
(:func:`log_softmax_bounds`), one compiled pass per row, and of log-softmax's gradient from its
rows' sums (:func:`log_softmax_backward_bounds`), one pass.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...formats import Format
from ..jit import jit
from ..rounding import _select, next_down, next_up, steps_out
from .base import (
    format_args,
    outward,
    outward_step,
)
from .elementwise import (
    library_element,
    library_usual,
    product_element,
    sum_element,
    usual_ends,
)

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = ["log_softmax_backward_bounds", "log_softmax_bounds", "softmax_bounds"]


#: where NumPy's exponentials are taken from: exp(-701) is a normal float64 number (an argument
#: below -708 gives a subnormal result, which NumPy's SIMD exp computes ten times slower), and
#: no kernel reads an exponential below -700 (:func:`_widened`)
_EXP_FLOOR = -701.0

#: exp of any argument at most this is 0 in float64 (under half its smallest subnormal number)
_EXP_ZERO = -746.0


@jit(cache=True, forceinline=True)
def _widened(raw: float, d: float, upward: bool) -> float:  # pragma: no cover - compiled
    """exp(d) for d <= 0 from ``raw``, libm's or NumPy's ``exp(d)``, widened by its evaluation
    error ((|d| + 8) 2**-51 relative: the rounding of d and exp's 8 ULPs, what
    :mod:`..elementwise` allows NumPy's float64 functions); below d = -700 (a result
    under 2**-1009) 0 as a lower and 2**-1000 as an upper end, which keeps subnormal arithmetic
    out of the kernel."""
    if d < -700.0:
        return 2.0**-1000 if upward else 0.0
    finite = d if math.isfinite(d) else 0.0
    if upward:
        return raw * (1.0 + (abs(finite) + 8.0) * 2.0**-51)
    return raw * (1.0 - (abs(finite) + 8.0) * 2.0**-51)


@jit(cache=True, forceinline=True)
def _widened_sums(
    lo: np.ndarray,
    hi: np.ndarray,
    top: float,
    e_lo: np.ndarray,
    e_hi: np.ndarray,
    raw_lo: np.ndarray,
    raw_hi: np.ndarray,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """Fill ``e_lo`` and ``e_hi`` with a row's exponentials exp(x - top) at its lower ends
    ``lo`` widened down and at its upper ends ``hi`` widened up (:func:`_widened`) from
    ``raw_lo`` and ``raw_hi``, exp's values before the widening (kept for the other widening
    of each, without a second exp), and return their sums (S_hi, S_lo), widened by the sums' float64 error: at
    most (n - 1) 2**-53 relatively."""
    n = e_lo.size
    margin = 2.0**-40 + (n + 2) * 2.0**-52
    total_hi = 0.0
    total_lo = 0.0
    for j in range(n):
        e_lo[j] = _widened(raw_lo[j], lo[j] - top, False)
        e_hi[j] = _widened(raw_hi[j], hi[j] - top, True)
        total_hi += e_hi[j]
        total_lo += e_lo[j]
    return total_hi * (1.0 + margin), max(total_lo * (1.0 - margin), 0.0)


@jit(cache=True, forceinline=True)
def _softmax_rows_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    top_of: np.ndarray,
    raw_lo: np.ndarray,
    raw_hi: np.ndarray,
    c: tuple[float, float, float, float, float],
    safe: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    kappa, absolute, factor, u, tiny = c
    rows, n = lo.shape
    e_lo, e_hi = np.empty(n), np.empty(n)
    for row in range(rows):
        top = top_of[row]
        undefined = False  # some end is NaN
        may_be_nan = False  # some element may be +inf, or every one -inf
        every_lower_neginf = True
        every_upper_neginf = True
        for j in range(n):
            h = hi[row, j]
            undefined |= (h != h) | (lo[row, j] != lo[row, j])
            may_be_nan |= h == math.inf
            every_lower_neginf &= lo[row, j] == -math.inf
            every_upper_neginf &= h == -math.inf
        may_be_nan = may_be_nan or every_lower_neginf
        total_hi, total_lo = _widened_sums(
            lo[row], hi[row], top, e_lo, e_hi, raw_lo[row], raw_hi[row]
        )
        for j in range(n):
            if safe and every_upper_neginf:
                out_lo[row, j], out_hi[row, j] = 0.0, 0.0
                continue
            if may_be_nan:
                out_lo[row, j], out_hi[row, j] = -math.inf, math.inf
                continue
            low = e_lo[j] / (e_lo[j] + (total_hi - e_hi[j]) * (1.0 + 2.0**-40))
            high = min(e_hi[j] / (e_hi[j] + max(total_lo - e_lo[j], 0.0) * (1.0 - 2.0**-40)), 1.0)
            lower = (low * (1.0 - kappa) - absolute) / factor
            upper = high * (1.0 + kappa) * factor + absolute * factor
            # the shift's rounding as a relative error: |x - m| <= top - lo, and
            # exp(d (1 + delta)) = exp(d) exp(d delta), |d delta| <= u (top - lo)
            reach = u * (top - lo[row, j])
            if reach < 2.0**-10 and not undefined:
                grow = next_up(reach * (1.0 + 2.0**-9))  # >= expm1(reach) >= -expm1(-reach)
                lower = max(lower, (low * (1.0 - kappa) * (1.0 - grow) - tiny) / factor)
                upper = min(upper, (high * (1.0 + kappa) * (1.0 + grow) + tiny) * factor)
            down_end, up_end = outward_step(lower, upper, fa, fast32)
            # rounding is monotone and 0 lies on every grid: clipping after it is the same
            out_lo[row, j], out_hi[row, j] = max(down_end, 0.0), up_end


@functools.cache
def _softmax_rows(safe: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(cache=True, error_model="numpy")
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        top: np.ndarray,
        raw_lo: np.ndarray,
        raw_hi: np.ndarray,
        c: tuple[float, float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _softmax_rows_loop(lo, hi, top, raw_lo, raw_hi, c, safe, fa, fast32, out_lo, out_hi)

    return kernel


def softmax_bounds(
    lo: Array,
    hi: Array,
    axis: int,
    kappa: float,
    absolute: float,
    factor: float,
    safe: bool,
    fmt: Format,
    shift_roundoff: float,
    tiny: float,
) -> tuple[Array, Array]:
    """The softmax enclosure of ``rules.softmax._softmax`` along ``axis``, one compiled pass per
    row after NumPy's exp(x - top) at both ends (top the row's largest upper end; 0 where that
    is not finite or an end is NaN), widened by their evaluation error (:func:`_widened`): e
    those exponentials, the exact range
    [e_lo / (e_lo + S_hi - e_hi), e_hi / (e_hi + S_lo - e_lo)], then
    [(low (1 - kappa) - absolute) / factor, high (1 + kappa) factor + absolute factor], each end
    replaced by the tighter [(low (1 - kappa) (1 - g) - tiny) / factor,
    (high (1 + kappa) (1 + g) + tiny) factor] where g = expm1(``shift_roundoff`` (top - lo)) is
    small (the rounding of the shift x - m taken relatively: m <= top and x >= lo, so
    |x - m| <= top - lo, and exp(d (1 + delta)) = exp(d) exp(d delta)), stepped outward, clipped
    below at 0 and rounded onto ``fmt``; the whole line in rows that may be NaN (an upper end
    +inf, or every lower end -inf), and 0 in rows of -inf when ``safe``."""
    return _by_rows(
        _softmax_rows(safe, fmt.name == "float32"),
        lo,
        hi,
        axis,
        (kappa, absolute, factor, shift_roundoff, tiny),
        fmt,
        exponentials=True,
    )


@jit(cache=True, forceinline=True)
def _evaluation(end: float, d: float, log_s: float) -> float:  # pragma: no cover - compiled
    """What this float64 evaluation of an end ``d - log(own + rest)`` may err by, either way it
    is evaluated: directly, the sum's rounding moves the logarithm by at most 2**-52 (its
    argument's relative error), log errs by 8 ULPs of |log(...)| <= |d| + |end|, the
    subtraction by half an ULP of |end|; through the sums' logarithm ``log_s`` and
    :func:`_log1p_series`, log by 8 ULPs of log_s, the two subtractions by half an ULP of
    |d| + log_s and of |end|, the series by a few units of 2**-59. 2**-48 of their total and
    2**-50 cover them."""
    return 2.0**-48 * (abs(end) + abs(d) + log_s) + 2.0**-50


#: the largest |v| whose log1p(v) :func:`_log1p_series` gives
_SERIES_REACH = 2.0**-6


def _series_reach(u: float) -> float:
    """How far :func:`_log_softmax_ends` takes the series for a kernel of unit round-off ``u``:
    the largest power of two r <= :data:`_SERIES_REACH` with r**4 <= u, so that the series'
    remainder (0.254 r**4) stays below a quarter of u, what the kernel's own rounding of the
    end already costs."""
    reach = _SERIES_REACH
    while reach**4 > u and reach > 2.0**-30:
        reach /= 2
    return reach


@jit(cache=True, forceinline=True)
def _log1p_series(v: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """(P, R) with log1p(v) in [P - R, P + R] for |v| <= :data:`_SERIES_REACH`, without a
    division: P = v - v**2 / 2 + v**3 / 3, the series' first three terms, and R = 0.254 |v|**4,
    at least |v|**4 / (4 (1 - |v|)) <= (16 / 63) |v|**4 (by more than its own rounding), which
    is at least the sum of the other terms' magnitudes |v|**k / k (k >= 4). Their float64
    evaluation errs by a few units of 2**-53 |v|, within :func:`_evaluation`'s constant."""
    a = v * v
    return v - a * (0.5 - v * (1.0 / 3.0)), 0.254 * (a * a)


@jit(cache=True, forceinline=True)
def _upper_cap(u: float, log_f: float, per_log_s: float, tiny: float) -> float:
    """What no computed log-softmax exceeds, whatever its operands: the kernel computes
    (x - m) - log(S) with x - m <= 0 (m the row's maximum: its rounding keeps the sign) and S
    at least 1 (the maximum's own term), so the computed sum is at least 1 - (its relative
    error), whose |log| is at most ``log_f``; log errs by at most ``per_log_s`` of that and
    ``tiny``, so the computed logarithm is at least -(log_f (1 + per_log_s) + tiny), and the
    final subtraction, rounded to nearest, at most that bound times (1 + u). 8u more covers
    this float64 evaluation. Without it an element whose own exponential and the others' lower
    ones all underflow (rows of enclosures thousands wide) had the upper end +inf where the
    exact values are at most 0."""
    return (log_f * (1.0 + per_log_s) + tiny) * (1.0 + 8.0 * u)


@jit(cache=True, forceinline=True)
def _log_softmax_ends(
    x_lo: float,
    x_hi: float,
    top: float,
    own: tuple[float, float, float, float],
    sums: tuple[float, float, float, float, float],
    c: tuple[float, float, float, float, float, float],
) -> tuple[float, float, bool, bool]:  # pragma: no cover - compiled
    """One element's log-softmax ends before the outward rounding (:func:`log_softmax_bounds`
    states them), without a branch, through the row's sums' logarithms and
    :func:`_log1p_series`, and whether each end is usual: its shift finite and its series'
    argument within the reach (:func:`_series_reach`), for the upper end also the lower sum
    positive and at least the element's lower exponential, or else its own sum 0 (the end is
    then the cap, as the logarithm of that sum gives it). With ``own`` = (exp at lo and hi
    before the widening, the widened e_lo and e_hi), ``sums`` = (S_lo, 1 / S_hi, 1 / S_lo,
    log S_hi, log S_lo), ``c`` = (u, the row's shift gap, its constant term, the reach, the
    cap on upper ends (:func:`_upper_cap`), log_s): the lower end's sum own_lo + S_hi - e_hi is
    S_hi (1 + v) with v = (own_lo - e_hi) / S_hi, whose log is at most log S_hi + P + R; the
    upper end's own_hi + S_lo - e_lo is S_lo (1 + w), w = (own_hi - e_lo) / S_lo, whose log is
    at least log S_lo + P - R. v and w are computed with the sums' reciprocals: three
    roundings, 2**-51 of |v| <= 2**-57, within :func:`_evaluation`'s constant."""
    raw_lo, raw_hi, e_lo, e_hi = own
    total_lo, inverse_hi, inverse_lo, log_hi, log_lo = sums
    u, shift_gap, common, reach, cap, log_s = c
    d_lo, d_hi = x_lo - top, x_hi - top
    own_lo, own_hi = _widened(raw_lo, d_lo, True), _widened(raw_hi, d_hi, False)
    v, w = (own_lo - e_hi) * inverse_hi, (own_hi - e_lo) * inverse_lo
    p_v, r_v = _log1p_series(v)
    p_w, r_w = _log1p_series(w)
    lower = _lower_end(d_lo, log_hi + (p_v + r_v), u, shift_gap, common, log_s)
    upper = _upper_end(d_hi, log_lo + (p_w - r_w), u, shift_gap, common, log_s, cap)
    # the upper end's own sum 0 (every exponential it takes underflowed): its logarithm -inf,
    # the end +inf, at most the cap
    vanishes = own_hi + max(total_lo - e_lo, 0.0) == 0
    upper = _select(vanishes, cap, upper)
    usual_lo = (abs(d_lo) < math.inf) & (abs(v) <= reach)
    series_hi = (total_lo > 0) & (total_lo >= e_lo) & (abs(w) <= reach)
    usual_hi = (abs(d_hi) < math.inf) & (series_hi | vanishes)
    return lower, upper, usual_lo, usual_hi


@jit(cache=True, forceinline=True)
def _lower_end(
    d: float, log_sum: float, u: float, shift_gap: float, common: float, log_s: float
) -> float:  # pragma: no cover - compiled
    """d - ``log_sum`` moved down by the kernel's rounding (u (|d| + the row's shift gap) +
    ``common`` + u |end|) and this evaluation's error (:func:`_evaluation`)."""
    low = d - log_sum
    return low - (u * (abs(d) + shift_gap) + common + u * abs(low) + _evaluation(low, d, log_s))


@jit(cache=True, forceinline=True)
def _upper_end(
    d: float, log_sum: float, u: float, shift_gap: float, common: float, log_s: float, cap: float
) -> float:  # pragma: no cover - compiled
    """d - ``log_sum`` moved up as :func:`_lower_end` moves it down, at most ``cap``
    (:func:`_upper_cap`; NaN stays NaN)."""
    high = d - log_sum
    upper = high + (u * (abs(d) + shift_gap) + common + u * abs(high) + _evaluation(high, d, log_s))
    return cap if upper > cap else upper


@jit(cache=True, forceinline=True)
def _log_softmax_rows_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    top_of: np.ndarray,
    raw_lo: np.ndarray,
    raw_hi: np.ndarray,
    c: tuple[float, float, float, float, float],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out: tuple[np.ndarray, np.ndarray],
    general: tuple[np.ndarray, np.ndarray],
) -> int:  # pragma: no cover - compiled
    """Each row's ends in one branch-free pass by the series (:func:`_log_softmax_ends`),
    which also flags each end that is not usual in ``general`` = (each element's flags: 1 the
    lower end, 2 the upper end; each row's (S_lo, S_hi, shift gap, constant term, log_s));
    returns how many elements have such an end."""
    u, log_f, per_log_s, tiny, reach = c
    cap = _upper_cap(u, log_f, per_log_s, tiny)
    out_lo, out_hi = out
    missed_at, row_terms = general
    rows, n = lo.shape
    e_lo, e_hi = np.empty(n), np.empty(n)
    missed = 0
    for row in range(rows):
        top = top_of[row]
        lowest_max = -math.inf
        undefined = False  # some end is NaN
        may_be_nan = False  # some element may be +inf, or every one -inf
        every_lower_neginf = True
        for j in range(n):
            h, low_end = hi[row, j], lo[row, j]
            if h != h or low_end != low_end:
                undefined = True
            if low_end > lowest_max:
                lowest_max = low_end
            if h == math.inf:
                may_be_nan = True
            if low_end != -math.inf:
                every_lower_neginf = False
        if undefined or may_be_nan or every_lower_neginf:
            for j in range(n):
                out_lo[row, j], out_hi[row, j] = -math.inf, math.inf
                missed_at[row, j] = 0
            continue
        # the row's maximum m lies between its largest lower end and top
        shift_gap = top - lowest_max if math.isfinite(lowest_max) else 0.0
        total_hi, total_lo = _widened_sums(
            lo[row], hi[row], top, e_lo, e_hi, raw_lo[row], raw_hi[row]
        )
        log_hi = math.log(total_hi)
        # the series' own: log S_lo and 1 / S_lo exactly as S_lo is (a floor would move the
        # upper ends down: unsound); a zero S_lo gives NaN arguments, which are not usual
        series_lo = math.log(total_lo) if total_lo > 0 else -math.inf
        inverse_lo = 1.0 / total_lo if total_lo > 0 else math.nan
        # the scale of the logarithms' errors, finite where S_lo is 0 (the lower ends' series
        # takes log S_hi alone there)
        log_s = max(abs(log_hi), abs(series_lo) if total_lo > 0 else -math.log(1e-300))
        common = log_f + per_log_s * log_s + tiny
        terms = row_terms[row]
        terms[0], terms[1], terms[2], terms[3], terms[4] = (
            total_lo,
            total_hi,
            shift_gap,
            common,
            log_s,
        )
        sums = (total_lo, 1.0 / total_hi, inverse_lo, log_hi, series_lo)
        # on the row's views, indices unsigned: numba then skips its negative-index wraparound
        x_lo, x_hi, own_lo, own_hi = lo[row], hi[row], raw_lo[row], raw_hi[row]
        row_lo, row_hi, row_missed = out_lo[row], out_hi[row], missed_at[row]
        for k in range(n):
            i = np.uint64(k)
            own = (own_lo[i], own_hi[i], e_lo[i], e_hi[i])
            lower, upper, usual_lo, usual_hi = _log_softmax_ends(
                x_lo[i], x_hi[i], top, own, sums, (u, shift_gap, common, reach, cap, log_s)
            )
            below, above, _ = steps_out(lower, upper)
            row_lo[i], row_hi[i] = outward(below, above, fa, fast32)
            # steps_out's own condition, end by end: a nonzero finite pattern
            usual_lo &= (lower != 0) & (abs(lower) < math.inf)
            usual_hi &= (upper != 0) & (abs(upper) < math.inf)
            flags = np.uint8(not usual_lo) | (np.uint8(not usual_hi) << np.uint8(1))
            row_missed[i] = flags
            missed += flags != 0
    return missed


@jit(cache=True, forceinline=True)
def _log_softmax_general_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    top_of: np.ndarray,
    raw_lo: np.ndarray,
    raw_hi: np.ndarray,
    u: float,
    cap: float,
    general: tuple[np.ndarray, np.ndarray],
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out: tuple[np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """The ends that ``general`` flags (as :func:`_log_softmax_rows_loop` leaves it), each from
    libm's logarithm of its own sum, own_lo + S_hi - e_hi at the lower end and
    own_hi + max(S_lo - e_lo, 0) at the upper end (x - log(exp(x) + rest) increases in x and
    decreases in the rest: the lower end takes x's own exponential at lo from above, the
    upper end at hi from below), upper ends at most ``cap`` (:func:`_upper_cap`); a NaN end
    becomes the infinity beyond it."""
    missed_at, row_terms = general
    out_lo, out_hi = out
    rows, n = lo.shape
    lower_at, upper_at = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    for row in range(rows):
        top = top_of[row]
        total_lo, total_hi, shift_gap, common, log_s = row_terms[row]
        # the flagged ends' places first: a loop that tests each flag and takes a logarithm
        # is if-converted by LLVM into one that takes every element's (log(0) included, on
        # libm's slow error path)
        lowers = uppers = 0
        for k in range(n):
            flags = missed_at[row, k]
            lower_at[lowers] = k
            lowers += flags & 1
            upper_at[uppers] = k
            uppers += flags >> 1
        for j in range(lowers):
            k = lower_at[j]
            d = lo[row, k] - top
            e_hi = _widened(raw_hi[row, k], hi[row, k] - top, True)
            own_sum = _widened(raw_lo[row, k], d, True) + (total_hi - e_hi)
            lower = _lower_end(d, math.log(own_sum), u, shift_gap, common, log_s)
            lower = -math.inf if lower != lower else next_down(lower)
            out_lo[row, k] = outward(lower, lower, fa, fast32)[0]
        for j in range(uppers):
            k = upper_at[j]
            d = hi[row, k] - top
            e_lo = _widened(raw_lo[row, k], lo[row, k] - top, False)
            own_sum = _widened(raw_hi[row, k], d, False) + max(total_lo - e_lo, 0.0)
            upper = _upper_end(d, math.log(own_sum), u, shift_gap, common, log_s, cap)
            upper = math.inf if upper != upper else next_up(upper)
            out_hi[row, k] = outward(upper, upper, fa, fast32)[1]


@functools.cache
def _log_softmax_rows(fast32: bool) -> Callable[..., None]:
    """The row kernel of :func:`log_softmax_bounds` for this switch: the compiled usual pass,
    then, where some end is not usual, the compiled general pass (compiled on first use, then
    cached)."""

    @jit(cache=True, error_model="numpy")
    def usual(
        lo: np.ndarray,
        hi: np.ndarray,
        top: np.ndarray,
        raw_lo: np.ndarray,
        raw_hi: np.ndarray,
        c: tuple[float, float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out: tuple[np.ndarray, np.ndarray],
        general: tuple[np.ndarray, np.ndarray],
    ) -> int:  # pragma: no cover - compiled
        return _log_softmax_rows_loop(lo, hi, top, raw_lo, raw_hi, c, fa, fast32, out, general)

    @jit(cache=True, error_model="numpy")
    def general_ends(
        lo: np.ndarray,
        hi: np.ndarray,
        top: np.ndarray,
        raw_lo: np.ndarray,
        raw_hi: np.ndarray,
        u: float,
        cap: float,
        general: tuple[np.ndarray, np.ndarray],
        fa: tuple[bool, int, float, int, float, bool],
        out: tuple[np.ndarray, np.ndarray],
    ) -> None:  # pragma: no cover - compiled
        _log_softmax_general_loop(lo, hi, top, raw_lo, raw_hi, u, cap, general, fa, fast32, out)

    def run(
        lo: np.ndarray,
        hi: np.ndarray,
        top: np.ndarray,
        raw_lo: np.ndarray,
        raw_hi: np.ndarray,
        c: tuple[float, float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:
        general = (np.empty(lo.shape, dtype=np.uint8), np.empty((lo.shape[0], 5)))
        out = (out_lo, out_hi)
        if usual(lo, hi, top, raw_lo, raw_hi, c, fa, out, general):
            cap = _upper_cap(*c[:4])
            general_ends(lo, hi, top, raw_lo, raw_hi, c[0], cap, general, fa, out)

    return run


def log_softmax_bounds(
    lo: Array,
    hi: Array,
    axis: int,
    u: float,
    log_f: float,
    per_log_s: float,
    tiny: float,
    fmt: Format,
) -> tuple[Array, Array]:
    """The log-softmax enclosure of ``rules.softmax._log_softmax`` along ``axis``, one compiled
    pass per row after NumPy's exp(x - top) at both ends (top the row's largest upper end):
    with e those exponentials widened by their evaluation error, S_hi and S_lo their sums
    (widened by the sums' float64 error), the exact range
    [(lo - top) - log(E_lo + S_hi - e_hi), (hi - top) - log(E_hi + S_lo - e_lo)] (E_lo the
    exponential at lo widened upward, E_hi the one at hi widened downward: x - log(exp(x) + r)
    increases in x, so its own exponential is taken against the side of each end), each end
    moved out by the kernel's rounding, ``u`` (|x - top| + the row's shift gap, top minus its
    largest lower end) + ``log_f`` + ``per_log_s`` log_s + ``tiny`` + ``u`` |end| (log_s the
    larger |log| of the two sums), and by this evaluation's own error (:func:`_evaluation`),
    stepped outward and rounded onto ``fmt``; the whole line in rows that may be NaN (an end
    NaN or +inf, or every lower end -inf), and an end that came out NaN the infinity beyond
    it. Each logarithm is that of a row's sum and a series (:func:`_log_softmax_ends`) in one
    branch-free pass over the row where the series reaches; elsewhere libm's of the end's own
    sum, for that end alone (:func:`_evaluation` allows 8 ULPs)."""
    return _by_rows(
        _log_softmax_rows(fmt.name == "float32"),
        lo,
        hi,
        axis,
        (u, log_f, per_log_s, tiny, _series_reach(u)),
        fmt,
        exponentials=True,
    )


@jit(cache=True, forceinline=True)
def _log_softmax_backward_usual(
    g_lo: float,
    g_hi: float,
    e_lo: float,
    e_hi: float,
    s_lo: float,
    s_hi: float,
    c: tuple[float, float],
    fast32: bool,
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """One element of :func:`log_softmax_backward_bounds` onto float32 (``fast32``) or float64
    by the usual paths of its three steps, without a branch, and whether each step's element
    is usual (:func:`.elementwise.library_usual`, :func:`.elementwise.usual_ends`): there each
    gives the general path's ends."""
    l_lo, l_hi, usual = library_usual(e_lo, e_hi, c, fast32)
    p_lo, p_hi, product = usual_ends(l_lo, l_hi, s_lo, s_hi, True, True, fast32)
    r_lo, r_hi, difference = usual_ends(g_lo, g_hi, -p_hi, -p_lo, False, False, fast32)
    return r_lo, r_hi, usual & product & difference


@jit(cache=True, forceinline=True)
def _log_softmax_backward_element(
    g_lo: float,
    g_hi: float,
    e_lo: float,
    e_hi: float,
    s_lo: float,
    s_hi: float,
    c: tuple[float, float],
    fc: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """One element of :func:`log_softmax_backward_bounds` onto the compute format ``fc``
    (``fast32``: float32) by the general paths of its three steps."""
    l_lo, l_hi = library_element(e_lo, e_hi, True, c, fc, fast32)
    p_lo, p_hi = product_element(l_lo, l_hi, s_lo, s_hi, True, fc, fast32)
    return sum_element(g_lo, g_hi, -p_hi, -p_lo, fc, fast32)


@functools.cache
def _log_softmax_backward_rows(
    fast32_compute: bool, narrower: bool, fast32: bool
) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached):
    ``narrower``, the result's format is not the compute format."""

    @jit(cache=True, error_model="numpy")
    def kernel(
        g_lo: np.ndarray,
        g_hi: np.ndarray,
        e_lo: np.ndarray,
        e_hi: np.ndarray,
        t_lo: np.ndarray,
        t_hi: np.ndarray,
        c: tuple[float, float],
        fc: tuple[bool, int, float, int, float, bool],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        rows = t_lo.size
        n = g_lo.size // rows
        # onto float32 or float64, the usual elements in one branch-free pass that vectorises
        # (as for sums and products), then the others element by element; indices unsigned:
        # numba then skips its negative-index wraparound
        first = fast32_compute or fc[0]
        missed = 0
        if first:
            for row in range(rows):
                s_lo, s_hi = t_lo[row], t_hi[row]
                for j in range(n):
                    i = np.uint64(row * n + j)
                    r_lo, r_hi, usual = _log_softmax_backward_usual(
                        g_lo[i], g_hi[i], e_lo[i], e_hi[i], s_lo, s_hi, c, fast32_compute
                    )
                    out_lo[i], out_hi[i] = r_lo, r_hi
                    missed += not usual
        if missed or not first:
            for row in range(rows):
                s_lo, s_hi = t_lo[row], t_hi[row]
                for j in range(n):
                    i = np.uint64(row * n + j)
                    x_lo, x_hi, f_lo, f_hi = g_lo[i], g_hi[i], e_lo[i], e_hi[i]
                    if (
                        first
                        and _log_softmax_backward_usual(
                            x_lo, x_hi, f_lo, f_hi, s_lo, s_hi, c, fast32_compute
                        )[2]
                    ):
                        continue  # written by the first pass
                    out_lo[i], out_hi[i] = _log_softmax_backward_element(
                        x_lo, x_hi, f_lo, f_hi, s_lo, s_hi, c, fc, fast32_compute
                    )
        if narrower:
            for k in range(out_lo.size):
                i = np.uint64(k)
                out_lo[i], out_hi[i] = outward(out_lo[i], out_hi[i], fa, fast32)

    return kernel


def log_softmax_backward_bounds(
    g: tuple[Array, Array],
    y: tuple[Array, Array],
    total: tuple[Array, Array],
    axis: int,
    allowance: tuple[float, float],
    compute: Format,
    fmt: Format,
) -> tuple[Array, Array]:
    """The enclosure of ``g - exp(y) * s`` along ``axis`` from the ends of g, of y (of g's
    shape) and of each row's sum s (``total``, its dimension kept), each step as its interval
    operation rounds it onto ``compute``: exp(y) as :func:`.elementwise.library_bounds` with
    ``allowance`` (per magnitude, constant), the product as :func:`.elementwise.mul_bounds`
    (stepped outward), the difference as :func:`.elementwise.add_bounds`; then rounded outward
    onto ``fmt``. Onto float32 or float64, one branch-free pass over the elements where each
    step takes its usual path, then the others by the general paths; the same bits as those
    three operations (exp evaluated by NumPy, as there: 0 at arguments up to
    :data:`_EXP_ZERO`, from :data:`_EXP_FLOOR` up where the allowance's constant term makes
    smaller exponentials give the same ends)."""
    shape = np.shape(g[0])
    if not shape:  # a 0-d tensor: its own one-element row
        shape, axis = (1,), 0

    def rows(end: Array, of: tuple[int, ...]) -> np.ndarray:
        moved = np.moveaxis(np.broadcast_to(np.reshape(end, of), of), axis, -1)
        return np.ascontiguousarray(moved, dtype=np.float64).reshape(-1)

    kept = tuple(1 if i == axis else k for i, k in enumerate(shape))
    n = shape[axis]
    moved_shape = (*(k for i, k in enumerate(shape) if i != axis), n)
    out_lo, out_hi = np.empty(moved_shape), np.empty(moved_shape)
    if out_lo.size:
        # from an allowance of 2**-900 up, the allowance's half unit in the last place is over
        # 2**50 times exp(-701): any exponential below that gives the same widened, stepped
        # ends, and NumPy's exp of an argument below -708 (a subnormal result) is ten times
        # slower than of others
        floored = allowance[1] >= 2.0**-900

        def exponential(end: Array) -> np.ndarray:
            values = rows(end, shape)
            if floored:  # one array of its own, raised and exponentiated in place
                floor: np.ndarray = np.maximum(values, _EXP_FLOOR)
                np.exp(floor, out=floor)
                return floor
            # below :data:`_EXP_ZERO` exp is 0 (NaN kept): NumPy's exp of such arguments
            # takes its slow path, 6 ns per element against 1
            result = np.zeros(values.shape)
            np.exp(values, out=result, where=~(values <= _EXP_ZERO))
            return result

        with np.errstate(all="ignore"):
            e_lo = exponential(y[0])
            exponentials = (e_lo, e_lo if y[1] is y[0] else exponential(y[1]))
        _log_softmax_backward_rows(
            compute.name == "float32", fmt is not compute, fmt.name == "float32"
        )(
            *(rows(end, shape) for end in g),
            *exponentials,
            *(rows(end, kept) for end in total),
            allowance,
            format_args(compute),
            format_args(fmt),
            out_lo.reshape(-1),
            out_hi.reshape(-1),
        )
    original = np.shape(g[0])
    return (
        np.moveaxis(out_lo, -1, axis).reshape(original),
        np.moveaxis(out_hi, -1, axis).reshape(original),
    )


def _by_rows(
    kernel: Callable[..., None],
    lo: Array,
    hi: Array,
    axis: int,
    c: tuple[float, ...],
    fmt: Format,
    exponentials: bool = False,
) -> tuple[Array, Array]:
    """Run a row kernel over ``axis``: the ends moved to rows (contiguous float64, one array
    for a point), with ``exponentials`` each row's top (its largest upper end; 0 where that is
    not finite or an end is NaN) and NumPy's exp(x - top) at the lower and upper ends given
    after them, x - top raised to :data:`_EXP_FLOOR` first (the kernels take no exponential
    below d = -700 from them: :func:`_widened`); the kernel's output moved back."""
    moved_lo, moved_hi = np.moveaxis(lo, axis, -1), np.moveaxis(hi, axis, -1)
    shape = moved_lo.shape
    n = shape[-1] if shape else 1
    rows_lo = np.ascontiguousarray(moved_lo, dtype=np.float64).reshape(-1, n)
    rows_hi = rows_lo if hi is lo else np.ascontiguousarray(moved_hi, dtype=np.float64)
    rows_hi = rows_hi.reshape(-1, n)
    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        row_args: tuple[np.ndarray, ...] = (rows_lo, rows_hi)
        if exponentials:
            with np.errstate(all="ignore"):
                top = np.fmax.reduce(rows_hi, axis=1)
                undefined = np.isnan(rows_lo).any(axis=1) | np.isnan(rows_hi).any(axis=1)
                top[undefined | ~np.isfinite(top)] = 0.0
                # in place: a second array of this size would be fresh memory, whose page
                # faults cost more than the exponentials (measured: docs/performance.md)
                raw_lo = rows_lo - top[:, None]
                np.exp(np.maximum(raw_lo, _EXP_FLOOR, out=raw_lo), out=raw_lo)
                raw_hi = raw_lo
                if rows_hi is not rows_lo:
                    raw_hi = rows_hi - top[:, None]
                    np.exp(np.maximum(raw_hi, _EXP_FLOOR, out=raw_hi), out=raw_hi)
            row_args = (rows_lo, rows_hi, top, raw_lo, raw_hi)
        kernel(
            *row_args,
            c,
            format_args(fmt),
            out_lo.reshape(-1, n),
            out_hi.reshape(-1, n),
        )
    if axis % max(lo.ndim, 1) == lo.ndim - 1 or lo.ndim == 0:
        return out_lo, out_hi
    return np.moveaxis(out_lo, -1, axis), np.moveaxis(out_hi, -1, axis)
