"""Kernels of the composite element-wise rules: GELU (erf form) as the hull of a unimodal
function's end values with ATen's evaluation allowance (:func:`gelu_erf_bounds`, the rule
``aten.gelu`` of :mod:`pytest_fpcheck.tracking.torch.rules.composite`), the enclosure of the
erf form's derivative that GELU's gradient multiplies (:func:`gelu_erf_derivative_bounds`,
the rule ``aten.gelu_backward``), SiLU's gradient
``g * SiLU'(x)`` from its derivative's exact range and the kernel's proven error
(:func:`silu_backward_bounds`, the rule ``aten.silu_backward`` of
:mod:`pytest_fpcheck.tracking.torch.rules.backward`), and tanh's gradient ``g (1 - y y)`` as
its three interval operations in one pass (:func:`tanh_backward_bounds`, the rule
``aten.tanh_backward``), and the hull of any unimodal function's end values with an allowance
per unit of the function (:func:`unimodal_bounds`: SiLU, the rule ``aten.silu``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...formats import FORMATS, Format
from .. import fallbacks
from ..jit import jit
from ..rounding import _select, next_down, next_up, steps_out
from .base import (
    empty_like_order,
    flat,
    flat_views,
    format_args,
    outward,
    outward_step,
)
from .elementwise import _product64_usual, product_element, sum_element, usual_ends

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[np.float64]

__all__ = [
    "gelu_erf_bounds",
    "gelu_erf_derivative_bounds",
    "silu_backward_bounds",
    "tanh_backward_bounds",
    "unimodal_bounds",
]


@jit(cache=True, forceinline=True)
def _hull_element(
    a: float,
    b: float,
    v_a: float,
    v_b: float,
    point: bool,
    c: tuple[float, float, float, float],
    gelu: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """The hull's ends of one element of a unimodal function, moved out by the allowance,
    before rounding (NaN where f is NaN at an end): with ``gelu``, f = x (1 + v) / 2 from ``v``
    = erf(x / sqrt 2) at the ends and the allowance |x| u (9 + |x| / 2) + floor (``c`` = (the
    minimum's abscissa and value, u, floor)); else ``v`` = f at the ends and the allowance
    per_f |f| + constant (``c`` = (the minimum's abscissa and value, per_f, constant))."""
    x_min, f_min, k1, k2 = c
    f_a = 0.5 * a * (1.0 + v_a) if gelu else v_a
    if point:
        b, low, high = a, f_a, f_a
    else:
        f_b = 0.5 * b * (1.0 + v_b) if gelu else v_b
        low, high = min(f_a, f_b), max(f_a, f_b)
        holds_minimum = (a <= x_min + 1e-9) & (x_min - 1e-9 <= b)
        low = _select(holds_minimum, min(low, f_min), low)
        undefined = (f_a != f_a) | (f_b != f_b)
        low, high = _select(undefined, math.nan, low), _select(undefined, math.nan, high)
    x_mag = max(abs(a), abs(b))
    f_mag = max(abs(low), abs(high))
    allowance = x_mag * k1 * (9.0 + 0.5 * x_mag) + k2 if gelu else k1 * f_mag + k2
    spread = allowance + 2.0**-48 * (f_mag + x_mag) + 2.0**-1000
    return low - spread, high + spread


@jit(cache=True, forceinline=True)
def _hull_loop(
    lo: np.ndarray,
    hi: np.ndarray,
    v_lo: np.ndarray,
    v_hi: np.ndarray,
    point: bool,
    c: tuple[float, float, float, float],
    gelu: bool,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """:func:`_hull_element` of every element, stepped outward and rounded onto the format, the
    whole line where an end is NaN. Onto float64 (a run that rounds to nearest), the usual
    elements in one branch-free pass that vectorises: both moved ends finite and nonzero, where
    the general path steps each one unit of its pattern out and float64 keeps it; then the
    others."""
    missed = 0
    if fa[0]:
        for n in range(lo.size):
            i = np.uint64(n)  # unsigned: numba then skips its negative-index wraparound
            down_end, up_end = _hull_element(lo[i], hi[i], v_lo[i], v_hi[i], point, c, gelu)
            out_lo[i], out_hi[i], ordinary = steps_out(down_end, up_end)
            missed += not ordinary
        if not missed:
            return
    for n in range(lo.size):
        i = np.uint64(n)
        down_end, up_end = _hull_element(lo[i], hi[i], v_lo[i], v_hi[i], point, c, gelu)
        if missed and steps_out(down_end, up_end)[2]:
            continue  # written by the first pass
        if down_end != down_end or up_end != up_end:
            out_lo[i], out_hi[i] = -math.inf, math.inf
        else:
            out_lo[i], out_hi[i] = outward_step(down_end, up_end, fa, fast32)


@functools.cache
def _hull_bounds(point: bool, fast32: bool, gelu: bool) -> Callable[..., None]:
    """The compiled kernel of :func:`_hull_loop` for these switches (compiled on first use,
    then cached)."""

    @jit(
        cache=True,
        error_model="numpy",
        fallback=functools.partial(fallbacks.hull, point, fast32, gelu),
    )
    def kernel(
        lo: np.ndarray,
        hi: np.ndarray,
        v_lo: np.ndarray,
        v_hi: np.ndarray,
        c: tuple[float, float, float, float],
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        _hull_loop(lo, hi, v_lo, v_hi, point, c, gelu, fa, fast32, out_lo, out_hi)

    return kernel


def _hull(
    lo: Array,
    hi: Array,
    point: bool,
    values: Callable[[np.ndarray], Array],
    c: tuple[float, float, float, float],
    gelu: bool,
    fmt: Format,
) -> tuple[Array, Array]:
    """Run :func:`_hull_bounds` on the flat ends and ``values`` of each (taken once for a
    point), into arrays laid out as ``lo``'s memory is."""
    flats, order, _ = flat_views(lo, hi)
    with np.errstate(all="ignore"):
        v_lo = np.ascontiguousarray(values(flats[0]), dtype=np.float64)
        v_hi = v_lo if point else np.ascontiguousarray(values(flats[1]), dtype=np.float64)
    out_lo, out_hi = empty_like_order(lo.shape, order), empty_like_order(lo.shape, order)
    _hull_bounds(point, fmt.name == "float32", gelu)(
        flats[0], flats[1], v_lo, v_hi, c, format_args(fmt), flat(out_lo), flat(out_hi)
    )
    return out_lo, out_hi


def gelu_erf_bounds(
    lo: Array,
    hi: Array,
    point: bool,
    minimum: tuple[float, float],
    fmt: Format,
    compute: Format,
    erf: Callable[[Array], Array],
) -> tuple[Array, Array]:
    """The enclosure of ATen's erf GELU, x (1 + erf(x / sqrt 2)) / 2, over [lo, hi] (see
    ``rules.composite._gelu``): the hull of the end values (and of the minimum ``minimum`` =
    (abscissa, value) when [lo, hi] holds its abscissa), computed with ``erf`` (a float64 array
    function within a few ULPs, e.g. SLEEF's, vectorised), widened by ATen's evaluation error in
    ``compute``, ``|x| u (9 + |x| / 2) + 4 smallest normals``, and by 2**-48 (|f| + |x|) +
    2**-1000 for the float64 evaluation here, then rounded outward onto ``fmt``; the whole line
    where an end value is NaN."""
    constants = (minimum[0], minimum[1], compute.unit_roundoff, 4 * compute.smallest_normal)
    return _hull(lo, hi, point, lambda x: erf(x * math.sqrt(0.5)), constants, True, fmt)


def unimodal_bounds(
    lo: Array,
    hi: Array,
    point: bool,
    function: Callable[[Array], Array],
    minimum: tuple[float, float],
    allowance: tuple[float, float],
    fmt: Format,
) -> tuple[Array, Array]:
    """The enclosure of a function with one minimum (``minimum`` = (abscissa, value rounded
    down)) that increases away from it on both sides, over [lo, hi] (``point``: one array for
    both): the hull of its end values (``function``, a float64 array function) and of the
    minimum where [lo, hi] holds its abscissa (within 1e-9), widened by the kernel's evaluation
    error ``allowance`` = (per unit of |f|, constant) and by 2**-48 (|f| + |x|) + 2**-1000 for
    the float64 evaluation here, stepped outward and rounded onto ``fmt``; the whole line where
    an end value is NaN. One compiled pass after ``function`` at both ends
    (``rules.composite._unimodal`` states the rule; its NumPy evaluation gives these bits)."""
    c = (minimum[0], minimum[1], allowance[0], allowance[1])
    return _hull(lo, hi, point, function, c, False, fmt)


#: the slack of the float64 evaluation of SiLU's derivative here, per unit of 1 + |x|
_SILU_SLACK = 2.0**-44


@jit(cache=True, forceinline=True)
def _silu_derivative(x: float, e: float) -> tuple[float, float, float]:  # pragma: no cover
    """(D(x) = s (1 + x (1 - s)), s, 1 - s) in float64 from ``e`` = exp(-|x|) within a few
    ULPs: s and 1 - s are 1 / (1 + e) and e / (1 + e), each within a few ULPs relatively, so
    D is within 2**-48 (1 + |x|) of its exact value, inside :data:`_SILU_SLACK`."""
    r = 1.0 / (1.0 + e)
    t = e * r
    s, c = (r, t) if x >= 0 else (t, r)
    return s * (1.0 + x * c), s, c


@jit(cache=True, forceinline=True)
def _silu_error(
    big_s: float, big_c: float, m: float, c: tuple[float, ...]
) -> float:  # pragma: no cover
    """The bound of the kernel's error of ``rules.backward._silu_backward`` for S, C, M (``c``
    holds its constants: u, half the smallest subnormal, exp's ULPs, the overflow floor)."""
    u, eta, k, floor = c[4], c[5], c[6], c[7]
    e_s = (1.0 + u) / ((1.0 - 2.0 * k * u * big_c) * (1.0 - u)) - 1.0
    d_s = big_s * e_s + (k + 1.0) * 2.0 * eta
    tau = d_s + u * (big_c + d_s) + eta
    d_p = m * tau + u * m * (big_c + tau) + eta
    d_q = d_p + u * (1.0 + m * big_c + d_p) + eta
    return d_s * (1.0 + m * big_c) + (big_s + d_s) * d_q + floor


@jit(cache=True, forceinline=True)
def _silu_backward_element(
    g_lo: float,
    g_hi: float,
    a: float,
    b: float,
    e_a: float,
    e_b: float,
    point: bool,
    c: tuple[float, ...],
    f64: tuple[bool, int, float, int, float, bool],
    fc: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """One element of :func:`silu_backward_bounds`."""
    x_min, f_min, x_max, f_max = c[0], c[1], c[2], c[3]
    gamma2, tiny = c[8], c[9]
    d_a, s_a, c_a = _silu_derivative(a, e_a)
    if point:
        b, d_b, s_b = a, d_a, s_a
    else:
        d_b, s_b, _ = _silu_derivative(b, e_b)
    m = max(abs(a), abs(b))
    if not (m < math.inf) or d_a != d_a or d_b != d_b:
        return -math.inf, math.inf  # an infinite x: the kernel's inf * 0
    slack_a, slack_b = _SILU_SLACK * (1.0 + abs(a)), _SILU_SLACK * (1.0 + abs(b))
    low, high = min(d_a - slack_a, d_b - slack_b), max(d_a + slack_a, d_b + slack_b)
    # the abscissas are known to about 1e-16; the margin keeps the tests on the safe side
    if (a <= x_min + 1e-6) & (x_min - 1e-6 <= b):
        low = min(low, f_min)
    if (a <= x_max + 1e-6) & (x_max - 1e-6 <= b):
        high = max(high, f_max)
    low, high = next_down(low), next_up(high)
    # S >= s over [a, b] (s at b), C >= 1 - s (at a)
    big_s, big_c = min(s_b * (1.0 + 2.0**-40), 1.0), min(c_a * (1.0 + 2.0**-40), 1.0)
    error = next_up(_silu_error(big_s, big_c, m, c) * (1.0 + 2.0**-20))
    d_lo, d_hi = next_down(low - error), next_up(high + error)
    sign_g = 1 if g_lo >= 0 else (-1 if g_hi <= 0 else 0)
    sign_d = 1 if d_lo >= 0 else (-1 if d_hi <= 0 else 0)
    p_lo, p_hi = product_element(g_lo, g_hi, d_lo, d_hi, True, f64, False)
    # the kernel's two roundings of (g s') q': gamma_2 relative, and the first one's
    # underflow scaled by |q'| <= 1.01 (1 + |x|)
    radius = gamma2 * max(abs(p_lo), abs(p_hi)) + next_up((2.0 + 1.01 * (1.0 + m)) * tiny)
    if radius == math.inf:
        radius = 0.0
    w_lo, w_hi = next_down(p_lo - radius), next_up(p_hi + radius)
    if w_lo != w_lo or w_hi != w_hi:
        return -math.inf, math.inf
    sign = sign_g * sign_d
    if sign > 0:
        w_lo = max(w_lo, 0.0)
    if sign < 0:
        w_hi = min(w_hi, 0.0)
    return outward(w_lo, w_hi, fc, fast32)


@jit(cache=True, forceinline=True)
def _silu_backward_usual(
    g_lo: float,
    g_hi: float,
    a: float,
    b: float,
    e_a: float,
    e_b: float,
    point: bool,
    c: tuple[float, ...],
    fc: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """:func:`_silu_backward_element` for the usual element, without a branch (so that a loop of
    it vectorises), and whether the element is usual: x's ends finite, and each end the general
    path steps out (the derivative's hull, its widening by the error, the product's widening)
    nonzero and finite, the product's usual (:func:`.elementwise._product64_usual`). There the
    general path takes these steps and no other: the whole line is never given (x finite, every
    step finite), each next_down and next_up moves one unit of a nonzero finite pattern
    (:func:`..rounding.steps_out`), the error bound and the underflow term are positive and
    finite, so their next_up is one unit up, and the radius is finite; the choices between the
    ends and the extrema, and the signs, are selections."""
    x_min, f_min, x_max, f_max = c[0], c[1], c[2], c[3]
    gamma2, tiny = c[8], c[9]
    d_a, s_a, c_a = _silu_derivative(a, e_a)
    if point:
        b, d_b, s_b = a, d_a, s_a
    else:
        d_b, s_b, _ = _silu_derivative(b, e_b)
    usual = (abs(a) < math.inf) & (abs(b) < math.inf)
    m = max(abs(a), abs(b))
    slack_a, slack_b = _SILU_SLACK * (1.0 + abs(a)), _SILU_SLACK * (1.0 + abs(b))
    low, high = min(d_a - slack_a, d_b - slack_b), max(d_a + slack_a, d_b + slack_b)
    low = _select((a <= x_min + 1e-6) & (x_min - 1e-6 <= b), min(low, f_min), low)
    high = _select((a <= x_max + 1e-6) & (x_max - 1e-6 <= b), max(high, f_max), high)
    low, high, hull = steps_out(low, high)
    big_s, big_c = min(s_b * (1.0 + 2.0**-40), 1.0), min(c_a * (1.0 + 2.0**-40), 1.0)
    bound = _silu_error(big_s, big_c, m, c) * (1.0 + 2.0**-20)
    error = steps_out(bound, bound)[1]
    d_lo, d_hi, widened = steps_out(low - error, high + error)
    p_lo, p_hi, product = _product64_usual(g_lo, g_hi, d_lo, d_hi, True)
    underflow = (2.0 + 1.01 * (1.0 + m)) * tiny
    radius = gamma2 * max(abs(p_lo), abs(p_hi)) + steps_out(underflow, underflow)[1]
    w_lo, w_hi, rounded = steps_out(p_lo - radius, p_hi + radius)
    # the general path's signs of g and D (1, -1, or 0 where an interval holds both signs)
    sign_g = int(g_lo >= 0) - int((g_lo < 0) & (g_hi <= 0))
    sign_d = int(d_lo >= 0) - int((d_lo < 0) & (d_hi <= 0))
    sign = sign_g * sign_d
    w_lo = _select(sign > 0, max(w_lo, 0.0), w_lo)
    w_hi = _select(sign < 0, min(w_hi, 0.0), w_hi)
    w_lo, w_hi = outward(w_lo, w_hi, fc, fast32)
    return w_lo, w_hi, usual & hull & widened & product & rounded


@functools.cache
def _silu_backward_bounds(point: bool, fast32: bool) -> Callable[..., None]:
    """The compiled kernel for these switches (compiled on first use, then cached)."""

    @jit(cache=True, error_model="numpy")
    def kernel(
        g_lo: np.ndarray,
        g_hi: np.ndarray,
        x_lo: np.ndarray,
        x_hi: np.ndarray,
        e_lo: np.ndarray,
        e_hi: np.ndarray,
        c: tuple[float, ...],
        f64: tuple[bool, int, float, int, float, bool],
        fc: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        # the usual elements in one branch-free pass that vectorises, then the others by the
        # general path; indices unsigned: numba then skips its negative-index wraparound
        missed = 0
        for n in range(out_lo.size):
            i = np.uint64(n)
            out_lo[i], out_hi[i], usual = _silu_backward_usual(
                g_lo[i], g_hi[i], x_lo[i], x_hi[i], e_lo[i], e_hi[i], point, c, fc, fast32
            )
            missed += not usual
        if not missed:
            return
        for n in range(out_lo.size):
            i = np.uint64(n)
            x = (g_lo[i], g_hi[i], x_lo[i], x_hi[i], e_lo[i], e_hi[i])
            if _silu_backward_usual(x[0], x[1], x[2], x[3], x[4], x[5], point, c, fc, fast32)[2]:
                continue  # written by the first pass
            out_lo[i], out_hi[i] = _silu_backward_element(
                x[0], x[1], x[2], x[3], x[4], x[5], point, c, f64, fc, fast32
            )

    return kernel


def silu_backward_bounds(
    g_lo: Array,
    g_hi: Array,
    x_lo: Array,
    x_hi: Array,
    point: bool,
    extrema: tuple[tuple[float, float], tuple[float, float]],
    constants: tuple[float, float, float, float, float, float],
    compute: Format,
) -> tuple[Array, Array]:
    """The enclosure of ATen's SiluBackward, ``g * s * (1 + x * (1 - s))`` in ``compute``,
    rounded outward onto ``compute`` (the rule ``aten.silu_backward`` states it; ``point``: x
    is a point, ``x_hi is x_lo``), in one pass after NumPy's exp(-|x|) at each end: SiLU's
    derivative D at the ends in float64 (:func:`_silu_derivative`, 2**-44 (1 + |x|) of slack),
    the hull with the minimum and maximum ``extrema`` = ((abscissa, value), (abscissa, value))
    where [x_lo, x_hi] holds their abscissas, stepped out, widened by the kernel's error
    (:func:`_silu_error`, ``constants`` = (u, half the smallest subnormal, exp's ULPs, the
    overflow floor, gamma_2, the smallest subnormal) of ``compute``); the float64 interval
    product with [g_lo, g_hi]; widened by two roundings onto ``compute`` (gamma_2 relative,
    2 + 1.01 (1 + |x|) smallest subnormals),
    kept on the side of zero the factors' signs decide, and rounded outward onto it: the usual
    elements in one branch-free pass (:func:`_silu_backward_usual`), the others by the general
    path (:func:`_silu_backward_element`), with the same bits. The whole
    line where x may be infinite or NaN, or the product undefined."""
    shape = np.broadcast_shapes(np.shape(g_lo), np.shape(x_lo))

    def spread(v: Array) -> np.ndarray:
        return np.ascontiguousarray(np.broadcast_to(v, shape), dtype=np.float64).reshape(-1)

    gl = spread(g_lo)
    gh = gl if g_hi is g_lo else spread(g_hi)
    xl = spread(x_lo)
    xh = xl if point else spread(x_hi)
    with np.errstate(all="ignore"):
        el = np.exp(-np.abs(xl))
        eh = el if point else np.exp(-np.abs(xh))
    c = (extrema[0][0], extrema[0][1], extrema[1][0], extrema[1][1], *constants)
    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        _silu_backward_bounds(point, compute.name == "float32")(
            gl,
            gh,
            xl,
            xh,
            el,
            eh,
            c,
            format_args(FORMATS["float64"]),
            format_args(compute),
            out_lo.reshape(-1),
            out_hi.reshape(-1),
        )
    return out_lo, out_hi


@jit(cache=True, forceinline=True)
def _magnitude_ends(lo: float, hi: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """|x| over [lo, hi] as :func:`..elementwise.absolute` gives it for finite or infinite
    ends (0 where the interval spans zero); NaN ends are the caller's."""
    a, b = abs(lo), abs(hi)
    low = _select((lo < 0) & (hi > 0), 0.0, min(a, b))
    return low, max(a, b)


@jit(cache=True, forceinline=True)
def _tanh_backward_usual(
    g_lo: float, g_hi: float, y_lo: float, y_hi: float, fast32: bool
) -> tuple[float, float, bool]:  # pragma: no cover - compiled
    """g (1 - |y| |y|) by the three operations' usual paths (:func:`..elementwise.usual_ends`:
    the stepped square, the difference from 1, the stepped product), without a branch, and
    whether each step was usual (no end NaN: a NaN y is never usual)."""
    s_lo, s_hi = _magnitude_ends(y_lo, y_hi)
    q_lo, q_hi, first = usual_ends(s_lo, s_hi, s_lo, s_hi, True, True, fast32)
    c_lo, c_hi, second = usual_ends(1.0, 1.0, q_lo, q_hi, False, True, fast32)
    low, high, third = usual_ends(g_lo, g_hi, c_lo, c_hi, True, True, fast32)
    defined = (y_lo == y_lo) & (y_hi == y_hi)
    return low, high, first & second & third & defined


@jit(cache=True, forceinline=True)
def _tanh_backward_element(
    g_lo: float,
    g_hi: float,
    y_lo: float,
    y_hi: float,
    fa: tuple[bool, int, float, int, float, bool],
    fast32: bool,
) -> tuple[float, float]:  # pragma: no cover - compiled
    """g (1 - |y| |y|) by the three operations' general paths
    (:func:`..elementwise.product_element`, :func:`..elementwise.sum_element`); a NaN end of y
    gives the whole line, as the absolute value's NaN does through them."""
    if (y_lo != y_lo) | (y_hi != y_hi):
        return -math.inf, math.inf
    s_lo, s_hi = _magnitude_ends(y_lo, y_hi)
    q_lo, q_hi = product_element(s_lo, s_hi, s_lo, s_hi, True, fa, fast32)
    c_lo, c_hi = sum_element(1.0, 1.0, -q_hi, -q_lo, fa, fast32)
    return product_element(g_lo, g_hi, c_lo, c_hi, True, fa, fast32)


@functools.cache
def _tanh_backward_bounds(fast32: bool) -> Callable[..., None]:
    """The compiled kernel for this switch (compiled on first use, then cached)."""

    @jit(cache=True, error_model="numpy")
    def kernel(
        g_lo: np.ndarray,
        g_hi: np.ndarray,
        y_lo: np.ndarray,
        y_hi: np.ndarray,
        fa: tuple[bool, int, float, int, float, bool],
        out_lo: np.ndarray,
        out_hi: np.ndarray,
    ) -> None:  # pragma: no cover - compiled
        missed = 0
        for n in range(out_lo.size):
            i = np.uint64(n)
            out_lo[i], out_hi[i], usual = _tanh_backward_usual(
                g_lo[i], g_hi[i], y_lo[i], y_hi[i], fast32
            )
            missed += not usual
        if not missed:
            return
        for n in range(out_lo.size):
            i = np.uint64(n)
            x = (g_lo[i], g_hi[i], y_lo[i], y_hi[i])
            if _tanh_backward_usual(x[0], x[1], x[2], x[3], fast32)[2]:
                continue  # written by the first pass
            out_lo[i], out_hi[i] = _tanh_backward_element(x[0], x[1], x[2], x[3], fa, fast32)

    return kernel


def tanh_backward_bounds(
    g_lo: Array, g_hi: Array, y_lo: Array, y_hi: Array, compute: Format
) -> tuple[Array, Array]:
    """The enclosure of ATen's TanhBackward, ``g (1 - y y)``, onto ``compute`` (float32 or
    float64): bit for bit the three interval operations the rule ``aten.tanh_backward``
    states, |y| squared by :func:`..elementwise.mul_bounds` (stepped), 1 minus it by
    :func:`..elementwise.add_bounds` and its product with g (stepped), each rounded outward
    onto ``compute``, in one pass instead of their three passes and three pairs of arrays: the
    usual elements branch-free (:func:`_tanh_backward_usual`), the others by the general paths
    (:func:`_tanh_backward_element`). Operands broadcast to their common shape."""
    if compute.name not in ("float32", "float64"):
        raise ValueError(f"compute={compute.name!r}: tanh_backward_bounds takes float32 or float64")
    shape = np.broadcast_shapes(np.shape(g_lo), np.shape(y_lo))

    def spread(v: Array) -> np.ndarray:
        return np.ascontiguousarray(np.broadcast_to(v, shape), dtype=np.float64).reshape(-1)

    gl = spread(g_lo)
    gh = gl if g_hi is g_lo else spread(g_hi)
    yl = spread(y_lo)
    yh = yl if y_hi is y_lo else spread(y_hi)
    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        _tanh_backward_bounds(compute.name == "float32")(
            gl, gh, yl, yh, format_args(compute), out_lo.reshape(-1), out_hi.reshape(-1)
        )
    return out_lo, out_hi


@jit(cache=True, forceinline=True)
def _largest(a: float, b: float) -> float:  # pragma: no cover - compiled
    """NumPy's maximum of two numbers: NaN where either is."""
    if (a != a) | (b != b):
        return math.nan
    return max(a, b)


@jit(cache=True, forceinline=True)
def _least(a: float, b: float) -> float:  # pragma: no cover - compiled
    """NumPy's minimum of two numbers: NaN where either is."""
    if (a != a) | (b != b):
        return math.nan
    return min(a, b)


@jit(cache=True, error_model="numpy")
def _gelu_erf_derivative(
    x_lo: np.ndarray,
    x_hi: np.ndarray,
    point: bool,
    erf_lo: np.ndarray,
    erf_hi: np.ndarray,
    exp_lo: np.ndarray,
    exp_hi: np.ndarray,
    c: tuple[float, ...],
    out_lo: np.ndarray,
    out_hi: np.ndarray,
) -> None:  # pragma: no cover - compiled
    (
        inverse_sqrt_2pi,
        slack,
        below_min,
        above_min,
        f_min,
        below_max,
        above_max,
        f_max,
        a,
        b,
        k_exp,
        s,
        c1,
        c2,
        u,
        d,
        cdf,
        max_finite,
    ) = c
    for n in range(out_lo.size):
        i = np.uint64(n)
        lo, hi = x_lo[i], x_hi[i]
        f_lo = 0.5 * (1.0 + erf_lo[i]) + lo * (exp_lo[i] * inverse_sqrt_2pi)
        f_hi = 0.5 * (1.0 + erf_hi[i]) + hi * (exp_hi[i] * inverse_sqrt_2pi)
        low, high = _least(f_lo - slack, f_hi - slack), _largest(f_lo + slack, f_hi + slack)
        if not point:
            if (lo <= above_min) & (below_min <= hi):
                low = _least(low, f_min)
            if (lo <= above_max) & (below_max <= hi):
                high = _largest(high, f_max)
        low, high = next_down(low), next_up(high)
        magnitude = abs(lo) if point else _largest(abs(lo), abs(hi))
        largest = _largest(abs(low), abs(high))
        x_exp = a + k_exp * (b + s * magnitude)
        x_pdf = (1.0 + u) * (c1 * x_exp + c2 + magnitude * s / 2)
        x_pdf = x_pdf + d + s / 2
        total = cdf + x_pdf + u * (largest + cdf + x_pdf)
        error = next_up(total * (1 + 2.0**-20))
        d_lo, d_hi = next_down(low - error), next_up(high + error)
        nan = (
            (not (abs(magnitude) < math.inf))
            | (not (_largest(-d_lo, d_hi) < max_finite))
            | (error != error)
        )
        out_lo[i], out_hi[i] = (-math.inf, math.inf) if nan else (d_lo, d_hi)


def gelu_erf_derivative_bounds(
    x_lo: Array,
    x_hi: Array,
    point: bool,
    erf_ends: tuple[Array, Array],
    exp_ends: tuple[Array, Array],
    constants: tuple[float, ...],
) -> tuple[Array, Array]:
    """The enclosure of the erf form's GELU derivative that ATen's GeluBackward computes, over
    [``x_lo``, ``x_hi``] (``point``: one array for both), in one compiled pass: the hull of the
    derivative's end values and of its extrema where the enclosure holds their abscissas,
    widened by the kernel's evaluation error in the compute format, as the rule
    ``aten.gelu_backward`` states it (``constants``: the rule's scalars, its
    ``_erf_form_constants`` among them, in the order the kernel reads them), bit for bit the
    NumPy evaluation it replaced (``tests/tracking/test_gelu_backward_kernel.py`` keeps that
    one as the reference), from the float64 erf(x / sqrt 2) and exp(-x x / 2) at each end
    (``erf_ends``, ``exp_ends``, computed by the caller as the rule does); the whole line
    where the kernel may compute NaN (x infinite or NaN, the derivative beyond the compute
    format)."""
    shape = np.shape(x_lo)

    def flat_of(v: Array) -> np.ndarray:
        return np.ascontiguousarray(v, dtype=np.float64).reshape(-1)

    lo = flat_of(x_lo)
    hi = lo if point else flat_of(x_hi)
    e_lo = flat_of(erf_ends[0])
    e_hi = e_lo if point else flat_of(erf_ends[1])
    p_lo = flat_of(exp_ends[0])
    p_hi = p_lo if point else flat_of(exp_ends[1])
    out_lo, out_hi = np.empty(shape), np.empty(shape)
    if out_lo.size:
        _gelu_erf_derivative(
            lo, hi, point, e_lo, e_hi, p_lo, p_hi, constants, out_lo.reshape(-1), out_hi.reshape(-1)
        )
    return out_lo, out_hi
