"""Element-wise backward kernels of activations (what ``loss.backward()`` runs for sigmoid,
tanh and ReLU). ATen's float16 kernels round some intermediates to float16 (measured:
``1 - y`` in ``sigmoid_backward``), its bfloat16 ones to float32: every step's enclosure is
rounded outward onto the tensor's own format, the coarser grid, which holds the step computed
in float32 too (every float16 or bfloat16 number is a float32 one).

* **sigmoid_backward** ``g (1 - y) y``: ``1 - y`` rounded outward onto that format,
  then the exact product of the three factors enclosed in float64 and widened by two roundings
  in any order onto it (gamma_2(u) relative; Higham, lemma 3.1), plus two smallest
  subnormals absolute, the first one's scaled by the largest factor.
* **tanh_backward** ``g (1 - y * y)``: each step rounded outward onto it (a
  fused ``1 - y * y`` rounds an exact value this already encloses).
* **threshold_backward** ``x <= threshold ? 0 : g``: a selection, exact; where the comparison is
  undecided by ``x``'s enclosure, the hull of both branches.
* **gelu_backward** ``g * GELU'(x)``, both forms: the exact range of GELU's derivative over
  ``x``'s enclosure (a function with one minimum and one maximum), widened by a bound of ATen's
  evaluation error in the compute format, times ``g``, then the kernel's last rounding
  (:func:`_gelu_backward`; RENDER III-B, as the forward rule ``aten.gelu``).
* **silu_backward** ``g * SiLU'(x)`` in bfloat16 and float16: the same construction for
  SiLU's derivative ``s (1 + x (1 - s))`` (one minimum, one maximum) with a proven bound of the
  kernel's error and its two roundings, in one compiled pass (:func:`_silu_backward`).

Log-softmax's and ``nll_loss``'s backward kernels have their rules beside their forward ones
(:mod:`.softmax`, :mod:`.losses`), layer norm's in :mod:`.normalisation_backward`, an
embedding's in :mod:`.scatter`; other backward kernels (softmax, slicing) are bounded through
their decompositions (:mod:`..decompose`).
"""

from __future__ import annotations

import math

import numpy as np

from .... import formats as F
from ....formats import FORMATS, Format
from ....interval import elementwise as ew
from ....interval.core import Interval, gamma
from ....interval.kernels import (
    gelu_erf_derivative_bounds,
    silu_backward_bounds,
    tanh_backward_bounds,
)
from ....interval.rounding import down, up
from ..context import RuleContext
from ._common import (
    F64,
    Array,
    erf64,
    raise_unsupported,
    rounded_twice,
    rule,
    sign_of,
)

__all__: list[str] = []

_ONE = Interval.point(np.asarray(1.0))


@rule("aten.sigmoid_backward")
def _sigmoid_backward(ctx: RuleContext) -> Interval:
    narrow = ctx.fmt
    g, y = ctx.operand(ctx.args[0], narrow), ctx.operand(ctx.args[1], narrow)
    complement = ew.sub(_ONE, y, narrow)
    exact = ew.mul(ew.mul(g, complement, F64, operand_bits=64), y, F64, operand_bits=64)
    # the first product's underflow is scaled by the third factor, whichever it is
    largest = np.maximum(np.maximum(g.magnitude(), complement.magnitude()), y.magnitude())
    sign = sign_of(g) * sign_of(complement) * sign_of(y)
    return rounded_twice(exact, narrow, 2.0 + largest, sign)


@rule("aten.tanh_backward")
def _tanh_backward(ctx: RuleContext) -> Interval:
    compute = ctx.fmt
    g, y = ctx.operand(ctx.args[0], compute), ctx.operand(ctx.args[1], compute)
    if compute.name in ("float32", "float64"):  # the same steps in one compiled pass
        return Interval(*tanh_backward_bounds(g.lo, g.hi, y.lo, y.hi, compute))
    size = ew.absolute(y)  # y y is a square: never negative
    square = ew.mul(size, size, compute, operand_bits=64)
    return ew.mul(g, ew.sub(_ONE, square, compute), compute, operand_bits=64).to_format(ctx.fmt)


@rule("aten.threshold_backward")
def _threshold_backward(ctx: RuleContext) -> Interval:
    grad, x, threshold = ctx.args[0], ctx.args[1], float(ctx.args[2])
    g, a = ctx.operand(grad), ctx.interval(x)
    value = ctx.values(x) <= threshold
    decided = (a.hi <= threshold) | (a.lo > threshold)
    zero = Interval.point(np.zeros(()))
    return ew.where(value, decided, zero, g)


@rule("aten.softshrink_backward", "aten.hardshrink_backward")
def _shrink_backward(ctx: RuleContext) -> Interval:
    """``-lambd <= x <= lambd ? 0 : grad`` (both kernels): a selection, decided where x's
    enclosure lies within or beyond the band for every value the kernel may hold lambd as (the
    number itself, or rounded to the tensor's or the compute format), the hull of 0 and the
    gradient where it is not."""
    grad, x, lambd = ctx.args[0], ctx.args[1], float(ctx.args[2])
    g, a = ctx.operand(grad), ctx.interval(x)
    candidates = [lambd, *(float(F.round_to(np.asarray(lambd), f)) for f in (ctx.fmt, ctx.compute))]
    narrow, wide = min(candidates), max(candidates)
    inside = (a.lo >= -narrow) & (a.hi <= narrow)
    outside = (a.lo > wide) | (a.hi < -wide)
    values = ctx.values(x)
    value = (values >= -narrow) & (values <= narrow)
    zero = Interval.point(np.zeros(()))
    return ew.where(value, inside | outside, zero, g)


_SQRT1_2, _INV_SQRT_2PI = math.sqrt(0.5), 1.0 / math.sqrt(2.0 * math.pi)
_TANH_BETA, _TANH_KAPPA = math.sqrt(2.0 / math.pi), 0.044715
#: (abscissa, value) of the minimum and of the maximum of GELU's derivative, the values rounded
#: outward (mpmath, 40 digits): erf form at -+sqrt 2, +-(1/2 + sqrt(2) phi(sqrt 2) - ...)
#: = -0.12890414518515478634 and 1.12890414518515478634; tanh form (kappa = 0.044715, the
#: only zeros of its second derivative) at -+1.41850400879082835555, -0.12899306865877176546
#: and 1.12899306865877176546
_EXTREMA = {
    "none": ((-1.4142135623730951, -0.12890414518515482), (1.4142135623730951, 1.128904145185155)),
    "tanh": ((-1.4185040087908284, -0.1289930686587718), (1.4185040087908284, 1.128993068658772)),
    # SiLU's derivative s (1 + x (1 - s)): its own derivative s (1 - s) (2 - x tanh(x / 2))
    # vanishes where x tanh(x / 2) = 2, +-2.39935728051546766783, and D(-x) = 1 - D(x)
    "silu": ((-2.3993572805154675, -0.09983932012886691), (2.3993572805154675, 1.099839320128867)),
}
#: sup over z >= 0 of z^k exp(-z^2 / 2) (k = 1, 2, 3: at z = sqrt k), rounded up past the
#: factor (1 + k u) that exp(-z^2 (1 - u) / 2) adds
_PEAKS = (1.0, 0.6066, 0.7358, 1.1597)
#: the abscissa of the largest value of z sech^2(z) (2 z tanh z = 1), and that value rounded up
_SECH_PEAK = (0.7717, 0.4478)
_EVALUATION_SLACK = 2.0**-44


def _erf_ends(x: Array) -> tuple[Array, Array]:
    """(erf(x / sqrt 2), exp(-x x / 2)) in float64: erf64 (SLEEF, a few float64 ULPs) and
    NumPy's exp, from which the erf form's derivative Phi(x) + x phi(x) is evaluated
    (:func:`~pytest_fpcheck.interval.kernels.gelu_erf_derivative_bounds`: within
    :data:`_EVALUATION_SLACK`, exp, erf and four roundings, each term at most 1 in size)."""
    with np.errstate(all="ignore"):
        return erf64(x * _SQRT1_2), np.exp(-0.5 * (x * x))


def _derivative_tanh(x: Array) -> tuple[Array, Array]:
    """(the tanh form's derivative in float64, a bound of that evaluation's error):
    (1 + tanh v) / 2 + x sech^2(v) beta (1 + 3 kappa x^2) / 2, v = beta (x + kappa x^3); the
    second term is 0 where sech^2 underflows (its exact value is then below 2**-900)."""
    with np.errstate(all="ignore"):
        v = _TANH_BETA * (x + _TANH_KAPPA * (x * x * x))
        sech2 = 1.0 / np.cosh(v) ** 2
        slope = _TANH_BETA * (1.0 + 3.0 * _TANH_KAPPA * (x * x))
        second = np.where(sech2 > 0, 0.5 * x * sech2 * slope, 0.0)
        value: Array = 0.5 * (1.0 + np.tanh(v)) + second
    return value, _EVALUATION_SLACK * (1.0 + np.abs(second))


def _derivative_range(a: Interval) -> tuple[Array, Array]:
    """[min, max] of the tanh form's GELU derivative over ``a`` (float64, rounded outward):
    the hull of its end values, and of its minimum (maximum) where ``a`` holds that abscissa
    (the erf form's is computed so in one compiled pass:
    :func:`~pytest_fpcheck.interval.kernels.gelu_erf_derivative_bounds`)."""
    f_lo, slack_lo = _derivative_tanh(a.lo)
    f_hi, slack_hi = (f_lo, slack_lo) if a.is_point else _derivative_tanh(a.hi)
    with np.errstate(invalid="ignore"):
        low, high = (
            np.minimum(f_lo - slack_lo, f_hi - slack_hi),
            np.maximum(f_lo + slack_lo, f_hi + slack_hi),
        )
    if not a.is_point:
        (x_min, f_min), (x_max, f_max) = _EXTREMA["tanh"]
        # the abscissas are known to about 1e-16; the margin keeps the tests on the safe side
        holds = (a.lo <= x_min + 1e-6) & (x_min - 1e-6 <= a.hi)
        if holds.any():
            low = np.where(holds, np.minimum(low, f_min), low)
        holds = (a.lo <= x_max + 1e-6) & (x_max - 1e-6 <= a.hi)
        if holds.any():
            high = np.where(holds, np.maximum(high, f_max), high)
    return down(low), up(high)


def _erf_form_constants(c: Format) -> tuple[float, ...]:
    """The scalars of a bound of |s - GELU'(x)| for the kernel's value s of the derivative in
    the compute format ``c`` (u its unit round-off, s its smallest subnormal), erf form, which
    :func:`~pytest_fpcheck.interval.kernels.gelu_erf_derivative_bounds` evaluates per element
    with x's magnitude m and the derivative's largest magnitude L over the enclosure:
    cdf = 0.5 (1 + erf(x alpha)), pdf = beta exp(x x (-0.5)), s = cdf + x pdf, with the
    constants alpha, beta rounded onto ``c`` (gamma_3 relative for beta, computed as float
    products in the reduced kernels), each step rounded to nearest, fused or not.

    * cdf: erf errs by ``k`` ULPs of its exact value (at most u each: |erf| < 1) plus its
      absolute allowance (:data:`ULP_ERRORS`,
      :data:`ABSOLUTE_ERRORS`); x alpha carries gamma_3 relative, which moves erf by at most
      (2 / sqrt pi) sup |y| exp(-y^2) gamma_3 <= 0.49 gamma_3 (plus one subnormal); 1 + erf
      rounds by 2 u; the halving is exact (1 + erf is 0 or at least 2**-53).
    * x pdf: x x (-0.5) = q (1 + delta) (plus a subnormal), so exp(-q') differs from exp(-q)
      by at most (u q + s) exp(-q (1 - u) + s); exp errs by ``k`` ULPs; the product with beta
      by gamma_4 relative, with x by u, each plus half a subnormal; factors of x^k exp(-x^2/2)
      are bounded by their largest values (:data:`_PEAKS`):
      x_exp = (u / 2) h3 + s h1 + k (2 u h1 + s m) bounds x |exp' - exp|, and
      x_pdf = (1 + u) (beta' (1 + g4) x_exp + beta' g4 h1 + m s / 2) + u beta' h1 + s / 2.
    * the sum: u of its magnitude, at most L plus the errors above:
      cdf + x_pdf + u (L + cdf + x_pdf).

    Returned in the order the kernel reads them after its own constants: (u/2) h3 + s h1,
    2 u h1, k, s, beta' (1 + g4), beta' g4 h1, u, u beta' h1, cdf."""
    u, s, eps = c.unit_roundoff, c.smallest_subnormal, 2 * c.unit_roundoff
    k_erf, k_exp = ew.ULP_ERRORS["erf"], ew.ULP_ERRORS["exp"]
    a_eps, a_tiny = ew.ABSOLUTE_ERRORS.get("erf", (0.0, 0.0))
    # |erf| < 1: an ULP of the exact value is at most u
    erf_error = k_erf * u + a_eps * eps + a_tiny * c.smallest_normal
    cdf = 0.5 * (erf_error + 0.49 * gamma(3, u) + s + u * (2.0 + erf_error))
    _, h1, _, h3 = _PEAKS
    g4 = gamma(4, u)
    return (
        (u / 2) * h3 + s * h1,
        2 * u * h1,
        float(k_exp),
        s,
        _INV_SQRT_2PI * (1 + g4),
        _INV_SQRT_2PI * g4 * h1,
        u,
        u * _INV_SQRT_2PI * h1,
        cdf,
    )


def _gelu_erf_derivative(x: Interval, c: Format) -> Interval:
    """The erf form's derivative over ``x``'s enclosure, widened by the kernel's error in
    ``c`` (:func:`_erf_form_constants`), the whole line where it may be NaN: one compiled pass
    after erf and exp at each end (:func:`_erf_ends`)."""
    erf_lo, exp_lo = _erf_ends(x.lo)
    erf_hi, exp_hi = (erf_lo, exp_lo) if x.is_point else _erf_ends(x.hi)
    (x_min, f_min), (x_max, f_max) = _EXTREMA["none"]
    constants = (
        _INV_SQRT_2PI,
        _EVALUATION_SLACK,
        # the abscissas are known to about 1e-16; the margin keeps the tests on the safe side
        x_min - 1e-6,
        x_min + 1e-6,
        f_min,
        x_max - 1e-6,
        x_max + 1e-6,
        f_max,
        *_erf_form_constants(c),
        c.max_finite,
    )
    lo, hi = gelu_erf_derivative_bounds(
        x.lo, x.hi, x.is_point, (erf_lo, erf_hi), (exp_lo, exp_hi), constants
    )
    return Interval(lo, hi)


def _tanh_form_error(c: Format, smallest: Array, magnitude: Array, largest: Array) -> Array:
    """As :func:`_erf_form_constants` for the tanh form, evaluated here per element, x ranging over magnitudes [``smallest``,
    ``magnitude``]: ATen computes t = tanh(beta (x + kappa x x x)), left = 0.5 (1 + t),
    T = 1 - t t, I = beta (1 + 3 kappa x x), s = left + (0.5 x) T I.

    * tanh's argument carries gamma_7 relative (plus four subnormals), which moves tanh by at
      most gamma_7 sup |v| sech^2(|v| (1 - gamma_7)) over the arguments v the enclosure gives
      (at most 0.4478 gamma_7 / (1 - gamma_7)); tanh errs by ``k`` ULPs of its exact value (at
      most u each: |tanh| < 1; an argument that overflowed to an infinity gives +-1 exactly,
      C99 Annex F.9.2.6): e_t in all.
    * left: (e_t + u (2 + e_t)) / 2. T: e_t (2 + e_t) from t, u (1 + e_t)^2 + s / 2 for t t,
      u (1 + e_t (2 + e_t) + 2 u) for 1 - t t. I: gamma_8 relative, plus a subnormal.
    * 0.5 x T I: the first-order terms x/2 (T e_I + I e_T + e_T e_I) with the largest x, the
      largest T (sech^2 of the smallest argument) and the largest I, gamma_2 of the product's
      size for its two roundings, and the subnormals of each rounding scaled by what follows.
    * the sum: u of its magnitude."""
    u, s = c.unit_roundoff, c.smallest_subnormal
    g7 = gamma(7, u)
    with np.errstate(all="ignore"):
        v_low = _TANH_BETA * (smallest + _TANH_KAPPA * smallest**3)
        v_high = _TANH_BETA * (magnitude + _TANH_KAPPA * magnitude**3)
        peak = _SECH_PEAK[0] / (1 - g7)
        w = np.clip(peak, v_low, v_high)
        damped = np.where(
            (v_low <= peak) & (peak <= v_high),
            _SECH_PEAK[1] / (1 - g7),
            w / np.cosh(w * (1 - g7)) ** 2,
        )
        e_t = g7 * damped + 4 * s + ew.ULP_ERRORS["tanh"] * u  # |tanh| < 1: an ULP <= u
        left = 0.5 * (e_t + u * (2.0 + e_t))
        e_big_t = (
            e_t * (2.0 + e_t) + u * (1.0 + e_t) ** 2 + s / 2 + u * (1.0 + e_t * (2.0 + e_t) + 2 * u)
        )
        big_t = 1.0 / np.cosh(v_low) ** 2
        big_i = _TANH_BETA * (1.0 + 3.0 * _TANH_KAPPA * magnitude * magnitude)
        e_big_i = gamma(8, u) * big_i + s
        half_x = magnitude / 2
        size = (half_x + s / 2) * (big_t + e_big_t) * (big_i + e_big_i)
        right = (
            half_x * (big_t * e_big_i + big_i * e_big_t + e_big_t * e_big_i)
            + (s / 2) * (big_t + e_big_t) * (big_i + e_big_i)
            + gamma(2, u) * size
            + (s / 2) * (big_i + e_big_i + 1.0)
        )
        total: Array = left + right + u * (largest + left + right)
    return total


@rule("aten.gelu_backward")
def _gelu_backward(ctx: RuleContext) -> Interval:
    """``grad * GELU'(x)`` as ATen's GeluBackward kernels compute it (CPU: ``Activation.cpp``;
    float16 and bfloat16 in float32): the derivative's exact range over ``x``'s enclosure,
    widened by the kernel's evaluation error in the compute format (erf form: one compiled
    pass, :func:`_gelu_erf_derivative`; tanh form: :func:`_derivative_range`,
    :func:`_tanh_form_error`), a float64 interval product with
    ``grad``'s enclosure (which holds the exact product of the kernel's two factors), then the
    kernel's one rounding onto the compute format and its conversion: nearest on the CPU
    (:meth:`~pytest_fpcheck.interval.core.Interval.to_nearest`), outward elsewhere. The whole
    line where the kernel may compute NaN: an infinite ``x`` (inf * 0), in the tanh form also
    a square ``x x`` that may overflow or a derivative that may overflow the compute format
    (then 0 * inf or inf - inf); the product with ``grad`` takes care of an infinite gradient.
    On bfloat16, zero joins enclosures that reach below float32's smallest normal number (the
    vectorised loop flushes such results). The derivative has one minimum and one maximum (at -+sqrt 2 for the erf form, -+1.41850
    for the tanh form; the tanh form's second derivative is
    sech^2(v) (v' + x v'' / 2 - x tanh(v) v'^2), with one zero on each side of 0)."""
    approximate = str(ctx.arg(2, "approximate", "none"))
    c = ctx.compute
    g, x = ctx.operand(ctx.args[0], c), ctx.operand(ctx.args[1], c)
    nan: Array | None = None
    if approximate == "tanh":
        low, high = _derivative_range(x)
        magnitude = x.magnitude()
        largest = np.maximum(np.abs(low), np.abs(high))
        with np.errstate(all="ignore"):
            smallest = np.where(
                (x.lo <= 0) & (x.hi >= 0), 0.0, np.minimum(np.abs(x.lo), np.abs(x.hi))
            )
            error = _tanh_form_error(c, smallest, magnitude, largest)
            nan = ~(magnitude < math.sqrt(c.max_finite) * (1 - 2.0**-20))
            error = up(error * (1 + 2.0**-20))
            derivative = Interval(down(low - error), up(high + error))
            nan = (
                nan | ~(np.maximum(-derivative.lo, derivative.hi) < c.max_finite) | np.isnan(error)
            )
    else:  # the whole line where NaN is possible, already
        derivative = _gelu_erf_derivative(x, c)
    # the product's ends are never NaN (an undefined product is the whole line); rounded to
    # nearest in the product's own pass (bit for bit the float64 product, then to_nearest)
    if ctx.nearest:
        result = ew.mul(g, derivative, ctx.fmt, operand_bits=64, nearest=True)
    else:
        result = ew.mul(g, derivative, F64, operand_bits=64).to_format(ctx.fmt)
    if nan is not None and nan.any():  # infinite ends: the same after either rounding
        shape = np.broadcast_shapes(result.shape, nan.shape)
        result = Interval(
            np.where(nan, -np.inf, np.broadcast_to(result.lo, shape)),
            np.where(nan, np.inf, np.broadcast_to(result.hi, shape)),
        )
    return _bfloat16_flush(result, ctx.fmt)


def _bfloat16_flush(result: Interval, fmt: Format) -> Interval:
    """On bfloat16, zero joins every enclosure that reaches below float32's smallest normal
    number: the CPU's vectorised bfloat16 loops flush a float32 result below 2**-126 to zero
    (measured for gelu_backward's erf form: g = 1.76e-38, x = 0 gives 0, not 8.8e-39)."""
    if fmt.name != "bfloat16":
        return result
    tiny = FORMATS["float32"].smallest_normal
    reaches = (result.lo < tiny) & (result.hi > -tiny)
    if not reaches.any():
        return result
    return Interval(
        np.where(reaches, np.minimum(result.lo, 0.0), result.lo),
        np.where(reaches, np.maximum(result.hi, 0.0), result.hi),
    )


@rule("aten.silu_backward")
def _silu_backward(ctx: RuleContext) -> Interval:
    """``grad * SiLU'(x)`` as ATen's SiluBackward kernel computes it (CPU: ``Activation.cpp``;
    float16 and bfloat16 in float32): ``dy * s * (1 + x * (1 - s))``, s = 1 / (1 + exp(-x)),
    each step rounded to nearest in the compute format, fused or not. In one compiled pass
    (:func:`~pytest_fpcheck.interval.kernels.silu_backward_bounds`): the exact range of
    SiLU's derivative D over ``x``'s enclosure (one minimum and one maximum,
    :data:`_EXTREMA`), widened by the bound below of the kernel's error, a float64 interval
    product with ``grad``'s enclosure, then the kernel's two roundings of the products
    ``(dy * s') * q'`` in the compute format (gamma_2 relative; the first one's underflow
    scaled by |q'| <= 1.01 (1 + |x|)), then the conversion to the result's format (nearest on
    the CPU). The whole line where ``x`` may be infinite (the kernel's inf * 0). On bfloat16,
    zero joins enclosures that reach below float32's smallest normal number, as for
    ``gelu_backward``. Float64 kernels are refused, and bounded through their decomposition:
    this pass's evaluation of D carries 2**-44 (1 + |x|), more than float64's round-off. In
    bfloat16 and float16, whose decompositions round each step onto the narrow format, the
    rule's enclosures are 7 and 9 times narrower; in float32 somewhat (median widths 8.2
    against 10.1 u |g|), and the pass is faster than the decomposition.

    The kernel's error |s' q' - D(x)| (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., section 2.2: |delta| <= u per rounding, plus eta, half the smallest
    subnormal), with S >= s, C >= 1 - s and M >= |x| over the enclosure (s at its upper end,
    1 - s at its lower end); the bound grows with each:

    * s': exp errs by k ULPs, e' = e (1 + d), |d| <= 2 k u (plus k subnormals where it
      underflows); 1 + e' = (1 + e)(1 + d (1 - s)), so with the sum's and the quotient's
      roundings s' = s (1 + theta), |theta| <= e_s = (1 + u) / ((1 - 2 k u C)(1 - u)) - 1,
      and |s' - s| <= d_s = S e_s + (k + 1) 2 eta. Where exp(-x) overflows (x below -log of
      the largest finite number), s' = 0 against s <= e**x: the kernel's value 0 lies within
      e**x (1 + |x|) <= 2**(emin + 12) of D(x).
    * t' = 1 - s': 0 <= s' <= 1, so |t' - (1 - s)| <= tau = d_s + u (C + d_s) + eta.
    * p' = x t': |p' - x (1 - s)| <= d_p = M tau + u M (C + tau) + eta.
    * q' = 1 + p': |q' - (1 + x (1 - s))| <= d_q = d_p + u (1 + M C + d_p) + eta.
    * s' q' - D = (s' - s)(1 + x (1 - s)) + s' (q' - (1 + x (1 - s))), s' <= S + d_s: at most
      d_s (1 + M C) + (S + d_s) d_q, plus the overflow's 2**(emin + 12)."""
    c = ctx.compute
    if ctx.fmt.name == "float64":
        raise_unsupported(ctx, "float64 (its decomposition bounds it, tighter there)")
    g, x = ctx.operand(ctx.args[0], c), ctx.operand(ctx.args[1], c)
    u, tiny = c.unit_roundoff, c.smallest_subnormal
    constants = (
        u,
        tiny / 2,
        ew.ULP_ERRORS["exp"],
        math.ldexp(1.0, c.emin + 12),
        gamma(2, u),
        tiny,
    )
    extrema = _EXTREMA["silu"]
    lo, hi = silu_backward_bounds(g.lo, g.hi, x.lo, x.hi, x.is_point, extrema, constants, c)
    result = Interval(lo, hi)
    if ctx.fmt.name != c.name:
        result = result.to_nearest(ctx.fmt) if ctx.nearest else result.to_format(ctx.fmt)
    return _bfloat16_flush(result, ctx.fmt)
