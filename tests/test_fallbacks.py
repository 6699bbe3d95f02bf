"""Every kernel's NumPy twin (``interval/fallbacks.py``) gives the compiled kernel's bits, on
adversarial inputs: NaN, infinities, signed zeros, float64 subnormals, each format's smallest
and largest numbers and their neighbours, values on and off each grid, random magnitudes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_fpcheck import formats as F
from pytest_fpcheck.interval import rounding
from pytest_fpcheck.interval.kernels import base, composite, format_args, linalg

FORMATS = ["float64", "float32", "tfloat32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"]


def adversarial(seed: int = 0, size: int = 3000) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _adversarial(seed, size)


def _adversarial(seed: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.0**-1074 * 3]
    values += [np.finfo(np.float64).max, -np.finfo(np.float64).max, 2.0**-1022, -(2.0**-1022)]
    for name in FORMATS:
        fmt = F.format_of(name)
        for edge in (fmt.max_finite, fmt.smallest_normal, fmt.smallest_subnormal, 1.0, 1 / 3):
            values += [edge, -edge, *np.nextafter(edge, [-math.inf, math.inf])]
            values += [-x for x in np.nextafter(edge, [-math.inf, math.inf])]
        values += [fmt.max_finite * 1.0000001, fmt.max_finite * 2]
    random = rng.standard_normal(size) * 2.0 ** rng.integers(-1080, 1030, size)
    grid = F.round_to(rng.standard_normal(size) * 2.0 ** rng.integers(-30, 30, size), "float16")
    values_array = np.array(values, dtype=np.float64)
    return np.concatenate([values_array, -values_array, random, grid])


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(a.view(np.int64) == b.view(np.int64)))


def compiled_and_twin(kernel, *args):
    """(the compiled kernel's result, the twin's result) of one call."""
    return kernel.dispatcher(*args), kernel.fallback(*args)


def written_alike(
    kernel, args, size: int, *, summarised: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Run a kernel that writes two arrays of ``size`` (after ``args``) compiled and as its
    twin, assert the same bits and the same result (with ``summarised``: the summary of the
    arrays written, ``kernels.base._summary``'s), and return the compiled kernel's arrays."""
    out = [np.empty(size) for _ in range(4)]
    returned = kernel.dispatcher(*args, out[0], out[1])
    assert returned == kernel.fallback(*args, out[2], out[3])
    assert same_bits(out[0], out[2])
    assert same_bits(out[1], out[3])
    if summarised:
        assert returned == base._summary.dispatcher(out[0], out[1])
    return out[0], out[1]


@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_step_all(direction):
    x = adversarial()
    compiled, twin = compiled_and_twin(rounding._step_all, x, direction)
    assert same_bits(compiled, twin)


@pytest.mark.parametrize(("name", "up"), list(itertools.product(FORMATS[1:], [False, True])))
def test_round_all(name, up):
    fmt = F.format_of(name)
    x = adversarial()
    args = (x, fmt.precision, fmt.emin, fmt.max_finite, fmt.has_inf, up)
    compiled, twin = compiled_and_twin(rounding._round_all, *args)
    assert same_bits(compiled, twin)


def test_summary():
    x = adversarial()
    rng = np.random.default_rng(1)
    y = x[rng.permutation(x.size)]
    pairs = [
        (np.minimum(x, y), np.maximum(x, y)),
        (x, y),  # some widths negative or NaN
        (x, x),
        (np.minimum(x, y)[:0], np.maximum(x, y)[:0]),
        (np.full(3, -math.inf), np.full(3, math.inf)),
    ]
    for lo, hi in pairs:
        compiled, twin = compiled_and_twin(base._summary, lo, hi)
        assert same_bits(compiled[0], twin[0])
        assert compiled[1] == twin[1]


def test_join_computed():
    lo, hi = ends(3)
    value = adversarial(4)[np.random.default_rng(5).permutation(lo.size)]
    for low, high in [(lo, hi), (lo, lo), (value, value)]:  # an enclosure, points, the value
        outputs = [np.empty(lo.size) for _ in range(4)]
        compiled = base._join_computed.dispatcher(low, high, value, *outputs[:2])
        twin = base._join_computed.fallback(low, high, value, *outputs[2:])
        assert compiled[0] == twin[0]
        assert compiled[2] == twin[2]
        assert same_bits(compiled[1], twin[1])
        assert same_bits(outputs[0], outputs[2])
        assert same_bits(outputs[1], outputs[3])


def test_float32_magnitudes():
    """max(|x|, 2**-126) and the subnormal scan, on float32 values (NaN, infinities, signed
    zeros, subnormals, 2**-126's neighbours) and on arrays with and without a subnormal."""
    with np.errstate(over="ignore"):
        x = adversarial(6).astype(np.float32)
    x = np.concatenate([x, np.nextafter(np.float32(2.0**-126), np.float32([0, 1]))])
    normal = x[(np.abs(x) >= 2.0**-126) | (x == 0) | np.isnan(x)]
    for values, expected in [(x, True), (normal, False)]:
        outputs = [np.empty(values.size, dtype=np.float32) for _ in range(2)]
        bits = values.view(np.uint32)
        compiled = linalg._magnitudes.dispatcher(values, bits, 2.0**-126, outputs[0])
        twin = linalg._magnitudes.fallback(values, bits, 2.0**-126, outputs[1])
        assert compiled == twin == expected
        assert bool(np.all(outputs[0].view(np.uint32) == outputs[1].view(np.uint32)))


@pytest.mark.parametrize("layout", [(40, 170, 1), (3, 120, 17), (1, 6, 900)])
def test_sum_ends(layout):
    """The sums over the middle axis (rows in registers, columns in memory), the magnitudes'
    sum and the least and most ends, on adversarial ends with NaN, infinities, signed zeros
    and subnormals (sums that overflow, inf - inf), on clean ends, and on a point."""
    lo, hi = ends(9)
    size = int(np.prod(layout))
    lo, hi = np.resize(lo, size).reshape(layout), np.resize(hi, size).reshape(layout)
    rng = np.random.default_rng(10)
    clean_lo = rng.standard_normal(layout)
    clean_hi = clean_lo + np.abs(rng.standard_normal(layout))
    for low, high in [(lo, hi), (clean_lo, clean_hi), (clean_lo, clean_lo), (lo, lo)]:
        outputs = [np.empty((5, layout[0], layout[2])) for _ in range(2)]
        linalg._sum_ends.dispatcher(low, high, outputs[0])
        linalg._sum_ends.fallback(low, high, outputs[1])
        assert same_bits(outputs[0], outputs[1])
    # what they are: NumPy's sums (to their rounding), minimum and maximum
    out = np.empty((5, layout[0], layout[2]))
    linalg._sum_ends.dispatcher(clean_lo, clean_hi, out)
    magnitudes = np.maximum(np.abs(clean_lo), np.abs(clean_hi))
    for got, expected in zip(out[:3], (clean_lo, clean_hi, magnitudes), strict=True):
        assert np.allclose(got, expected.sum(axis=1), rtol=1e-12, atol=0)
    assert np.array_equal(out[3], clean_lo.min(axis=1))
    assert np.array_equal(out[4], clean_hi.max(axis=1))


def ends(seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = adversarial(seed)
    y = x[np.random.default_rng(seed + 7).permutation(x.size)]
    with np.errstate(invalid="ignore"):
        return np.fmin(x, y), np.fmax(x, y)


@pytest.mark.parametrize(
    ("name", "has_addend", "rad_dtype"),
    list(itertools.product(FORMATS, [False, True], [np.float64, np.float32])),
)
def test_matmul_epilogue(name, has_addend, rad_dtype):
    fmt = F.format_of(name)
    mid, other = ends(2)
    with np.errstate(all="ignore"):
        rad = np.abs(other).astype(rad_dtype)
    size = mid.size - mid.size % 7
    mid, rad = mid[:size], rad[:size]
    addend_mid, addend_rad = (
        (ends(3)[0][:7], np.abs(ends(4)[1][:7]))
        if has_addend
        else (
            np.zeros(0),
            np.zeros(0),
        )
    )
    for c in [(3.0, 1.0 + 2.0**-20, 2.0**-1074, 1e300), (1.0, 1.0, 0.0, math.inf)]:
        kernel = linalg._epilogue(has_addend, name == "float32")
        args = (mid, rad, addend_mid, addend_rad, c, format_args(fmt))
        written_alike(kernel, args, size, summarised=True)


@pytest.mark.parametrize(
    ("has_addend", "rad_dtype"), list(itertools.product([False, True], [np.float64, np.float32]))
)
def test_matmul_epilogue_onto_float64_with_usual_elements_alone(has_addend, rad_dtype):
    """The epilogue's branch-free pass onto float64 alone (every element usual: finite
    midpoints of both signs, radii from 0 to large, tiny ones below 2**-1000); the same bits
    as the twin."""
    rng = np.random.default_rng(3)
    size = 7 * 400
    mid = rng.standard_normal(size) * 2.0 ** rng.integers(-60, 60, size)
    rad = (np.abs(rng.standard_normal(size)) * 2.0 ** rng.integers(-1070, 40, size)).astype(
        rad_dtype
    )
    rad[::9] = 0
    addend = (rng.standard_normal(7), np.abs(rng.standard_normal(7))) if has_addend else None
    addend_mid, addend_rad = addend if addend is not None else (np.zeros(0), np.zeros(0))
    kernel = linalg._epilogue(has_addend, False)
    c = (3.0, 1.0 + 2.0**-20, 2.0**-1074, 1e300)
    args = (mid, rad, addend_mid, addend_rad, c, format_args(F.format_of("float64")))
    low, high = written_alike(kernel, args, size, summarised=True)
    assert np.all(np.isfinite(low))
    assert np.all(np.isfinite(high))


@pytest.mark.parametrize(
    ("name", "has_addend", "usual"),
    list(itertools.product(["float32", "bfloat16", "float16"], [False, True], [False, True])),
)
def test_matmul_epilogue_with_nearest_rounding_is_the_epilogue_then_nearest(
    name, has_addend, usual
):
    """The epilogue fused with nearest rounding (``_epilogue_nearest``) gives the bits of the
    epilogue onto float64 followed by ``rounding.nearest`` (its twin is those two steps), on
    adversarial elements and on usual ones alone (the branch-free pass with nothing left for
    the general one), with a float64 and a float32 midpoint."""
    fmt = F.format_of(name)
    rng = np.random.default_rng(5)
    if usual:
        size = 7 * 400
        mid = rng.standard_normal(size) * 2.0 ** rng.integers(-20, 20, size)
        rad = np.abs(mid) * 2.0 ** rng.integers(-40, -2, size)
    else:
        mid, other = ends(6)
        size = mid.size - mid.size % 7
        with np.errstate(all="ignore"):
            mid, rad = mid[:size], np.abs(other[:size])
    addend_mid, addend_rad = (
        (rng.standard_normal(7), np.abs(rng.standard_normal(7)) * 2.0**-30)
        if has_addend
        else (np.zeros(0), np.zeros(0))
    )
    n = rounding.nearest_args(fmt)
    f64 = format_args(F.format_of("float64"))
    kernel = linalg._epilogue_nearest(has_addend, name == "float32")
    for mid_dtype in (np.float64, np.float32):
        with np.errstate(all="ignore"):
            m = mid.astype(mid_dtype)
        for c in [(1.0, 1.0 + 2.0**-20, 2.0**-1074, 1e300), (3.0, 1.0, 0.0, math.inf)]:
            args = (m, rad, addend_mid, addend_rad, c, f64, n)
            low, high = written_alike(kernel, args, size, summarised=True)
            # the twin is the two steps: check that against the public functions too
            lo64, hi64, _ = linalg.matmul_epilogue(
                m, rad, (addend_mid, addend_rad) if has_addend else None, *c, F.format_of("float64")
            )
            expected = rounding.nearest(lo64, hi64, fmt)
            assert same_bits(low, expected[0])
            assert same_bits(high, expected[1])
            fused = linalg.matmul_epilogue(
                m, rad, (addend_mid, addend_rad) if has_addend else None, *c, fmt, nearest=True
            )
            assert same_bits(fused[0], low)
            assert same_bits(fused[1], high)
            assert fused[2] == base.summary(low, high)


@pytest.mark.parametrize("point", [False, True])
def test_gelu_erf_bounds_onto_float64_with_usual_elements_alone(point):
    """GELU's branch-free pass onto float64 alone (every element usual: finite values, the
    minimum inside some intervals, ends of both signs); the same bits as the twin."""
    from scipy.special import erf

    rng = np.random.default_rng(4)
    lo = rng.standard_normal(3000) * 2.0 ** rng.integers(-20, 8, 3000)
    hi = lo if point else lo + np.abs(rng.standard_normal(3000))
    erf_lo = erf(lo * math.sqrt(0.5))
    erf_hi = erf_lo if point else erf(hi * math.sqrt(0.5))
    compute = F.format_of("bfloat16")
    c = (-0.7517916, -0.1699712, compute.unit_roundoff, 4 * compute.smallest_normal)
    kernel = composite._hull_bounds(point, False, True)
    args = (lo, hi, erf_lo, erf_hi, c, format_args(F.format_of("float64")))
    low, high = written_alike(kernel, args, lo.size)
    assert np.all(np.isfinite(low))
    assert np.all(np.isfinite(high))


@pytest.mark.parametrize(
    ("name", "point", "gelu"), list(itertools.product(FORMATS, [False, True], [True, False]))
)
def test_hull_bounds(name, point, gelu):
    """A unimodal function's enclosure from values at the ends: GELU's from erf(x / sqrt 2)
    with its allowance (``gelu``), SiLU's from its values with an allowance per |f|; on
    adversarial ends and values (NaN, infinities, zeros, subnormals), the minimum held or not."""
    from scipy.special import erf

    from pytest_fpcheck.tracking.torch.rules import composite as rules

    fmt = F.format_of(name)
    lo, hi = ends(5 if gelu else 7)
    if point:
        hi = lo
    with np.errstate(all="ignore"):
        v_lo = erf(lo * math.sqrt(0.5)) if gelu else rules._silu(lo)
        v_hi = v_lo if point else (erf(hi * math.sqrt(0.5)) if gelu else rules._silu(hi))
    compute = F.format_of("float32")
    u = compute.unit_roundoff
    minima = [(-0.7517916, -0.1699712) if gelu else rules._SILU_MINIMUM, (0.0, 0.0)]
    for minimum in minima:
        allowance = (u, 4 * compute.smallest_normal) if gelu else (6.5 * u, 2.0**-114)
        c = (*minimum, *allowance)
        kernel = composite._hull_bounds(point, name == "float32", gelu)
        out = [np.empty(lo.size) for _ in range(4)]
        args = (lo, hi, v_lo, v_hi, c, format_args(fmt))
        kernel.dispatcher(*args, out[0], out[1])
        kernel.fallback(*args, out[2], out[3])
        assert same_bits(out[0], out[2])
        assert same_bits(out[1], out[3])


SHAPES = [
    ((6, 35), (6, 35)),
    ((6, 35), (35,)),
    ((35,), (6, 35)),
    ((6, 35), (1,)),
    ((1,), (6, 35)),
    ((1,), (1,)),
]


def operand(seed: int, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, int]:
    lo, hi = ends(seed)
    size = int(np.prod(shape))
    start = (seed * 37) % (lo.size - size)
    return lo[start : start + size].copy(), hi[start : start + size].copy(), size


@pytest.mark.parametrize(
    ("name", "switch", "shapes"),
    list(itertools.product(FORMATS, [False, True], SHAPES)),
)
def test_add_and_mul_bounds(name, switch, shapes):
    from pytest_fpcheck.interval.kernels import elementwise

    fmt = F.format_of(name)
    a_lo, a_hi, a_period = operand(6, shapes[0])
    b_lo, b_hi, b_period = operand(8, shapes[1])
    size = max(a_period, b_period)
    for factory in (elementwise._add_bounds, elementwise._mul_bounds):
        kernel = factory(switch, name == "float32")
        for b_ends in ((b_lo, b_hi), (b_lo, b_lo)):  # an interval, a point
            args = (a_lo, a_hi, a_period, *b_ends[:1], b_ends[1], b_period, format_args(fmt))
            written_alike(kernel, args, size, summarised=True)


@pytest.mark.parametrize(
    ("kind", "switch", "shapes"), list(itertools.product(["add", "mul"], [False, True], SHAPES))
)
def test_sums_and_products_onto_float64_with_usual_elements_alone(kind, switch, shapes):
    """The branch-free pass of a sum or product onto float64 alone (no element needs the
    general path after it): finite ends whose results are finite, exact and inexact, zero sums
    among them, and results next to overflow; the same bits as the twin. (The adversarial
    cases above run it in company: with elements that take the general path.)"""
    from pytest_fpcheck.interval.kernels import elementwise

    rng = np.random.default_rng(11)
    size = max(int(np.prod(shape)) for shape in shapes)
    values = rng.standard_normal(size) * 2.0 ** rng.integers(-500, 500, size)
    values[::5] = F.round_to(rng.standard_normal(values[::5].size), "bfloat16")
    ends = []
    for shape in shapes:
        n = int(np.prod(shape))
        lo = values[:n].copy()
        hi = np.nextafter(lo, np.inf) + np.abs(lo) * 2.0**-30
        ends += [lo, hi, n]
    if kind == "add":
        half = min(ends[2], ends[5]) // 2
        ends[3][:half] = -ends[0][:half]  # zero sums, exact
        ends[4][:3] = ends[3][:3]
        ends[3][-1] = ends[4][-1] = np.finfo(np.float64).max / 2  # a sum next to overflow
        ends[0][-1] = ends[1][-1] = np.finfo(np.float64).max / 2
    else:
        ends[3][-1] = ends[4][-1] = 2.0**500  # a product next to overflow
        ends[0][-1] = ends[1][-1] = 2.0**523
    kernel = (elementwise._add_bounds if kind == "add" else elementwise._mul_bounds)(switch, False)
    args = (*ends, format_args(F.format_of("float64")))
    low, high = written_alike(kernel, args, size, summarised=True)
    assert np.all(np.isfinite(low))
    assert np.all(np.isfinite(high))


@pytest.mark.parametrize(
    ("name", "n", "magnitude"), list(itertools.product(FORMATS, [2, 3], [False, True]))
)
def test_power_bounds(name, n, magnitude):
    """Each end's chain of products, of x or of |x| (``magnitude``), on adversarial ends and on
    clean ones (zeros among them), intervals and points; with
    ``magnitude`` the bits of the chain over :func:`ew.absolute`'s ends, what the rule took
    before the kernel took |x| itself."""
    from pytest_fpcheck.interval import elementwise as ew
    from pytest_fpcheck.interval.core import Interval
    from pytest_fpcheck.interval.kernels import elementwise

    fmt = F.format_of(name)
    rng = np.random.default_rng(12)
    clean = rng.standard_normal(500) * 2.0 ** rng.integers(-20, 20, 500)
    clean[::7] = 0.0
    for lo, hi in (ends(9), (clean, clean + np.abs(rng.standard_normal(500)))):
        kernel = elementwise._power_bounds(name == "float32", n, magnitude)
        for x_hi, point in ((hi, False), (lo, True)):  # an interval, a point
            out = [np.empty(lo.size) for _ in range(4)]
            args = (lo, x_hi, point, format_args(fmt))
            kernel.dispatcher(*args, out[0], out[1])
            kernel.fallback(*args, out[2], out[3])
            assert same_bits(out[0], out[2])
            assert same_bits(out[1], out[3])
            if magnitude:
                with np.errstate(invalid="ignore"):
                    size = ew.absolute(Interval(lo, x_hi) if not point else Interval.point(lo))
                reference = elementwise.power_bounds(size.lo, size.hi, n, fmt)
                assert same_bits(out[0], reference[0])
                assert same_bits(out[1], reference[1])


@pytest.mark.parametrize(("name", "increasing"), list(itertools.product(FORMATS, [False, True])))
def test_library_bounds(name, increasing):
    """A library function's enclosure from its values at the ends: adversarial values (NaN,
    infinities, overflow of the allowance) as ends, an interval and a point, allowances from
    none to a float32 unit."""
    from pytest_fpcheck.interval.kernels import elementwise

    fmt = F.format_of(name)
    lo, hi = ends(10)
    kernel = elementwise._library_bounds(increasing, name == "float32")
    for c in ((0.0, 0.0), (2.0**-49, 5e-324), (2.0**-23, 2.0**-126)):
        for f_hi in (hi, lo):  # an interval, a point
            written_alike(kernel, (lo, f_hi, c, format_args(fmt)), lo.size)


@pytest.mark.parametrize(
    ("name", "product", "switch", "shapes"),
    list(
        itertools.product(["float32", "bfloat16", "float16"], [False, True], [False, True], SHAPES)
    ),
)
def test_sums_and_products_rounded_to_nearest(name, product, switch, shapes):
    """A sum's or product's kernel with nearest rounding in its pass gives the twin's bits,
    and those of the two steps it fuses: the kernel onto float64, then ``rounding.nearest``;
    adversarial ends, and ends usual to both steps (a branch-free pass alone)."""
    from pytest_fpcheck.interval.kernels import elementwise

    fmt, f64 = F.format_of(name), F.format_of("float64")
    kernel = elementwise._nearest_bounds(product, switch, name == "float32")
    rng = np.random.default_rng(12)
    a_lo, a_hi, a_period = operand(6, shapes[0])
    b_lo, b_hi, b_period = operand(8, shapes[1])
    usual = [rng.standard_normal(n) for n in (a_period, b_period)]
    usual[0][::3] = 0.0  # zeros are usual too
    cases = [
        (a_lo, a_hi, b_lo, b_hi),
        (a_lo, a_hi, b_lo, b_lo),  # a point
        (usual[0], usual[0] + 2.0**-30, usual[1], usual[1] + 2.0**-20),
    ]
    size = max(a_period, b_period)
    for x_lo, x_hi, y_lo, y_hi in cases:
        args = (
            x_lo,
            x_hi,
            a_period,
            y_lo,
            y_hi,
            b_period,
            format_args(f64),
            rounding.nearest_args(fmt),
        )
        low, high = written_alike(kernel, args, size, summarised=True)
        steps = [np.empty(size), np.empty(size)]
        factory = elementwise._mul_bounds if product else elementwise._add_bounds
        factory(switch, False).dispatcher(*args[:6], format_args(f64), *steps)
        expected = rounding.nearest(*steps, fmt)
        assert same_bits(low, expected[0])
        assert same_bits(high, expected[1])


@pytest.mark.parametrize(("name", "shapes"), list(itertools.product(FORMATS, SHAPES)))
def test_div_bounds(name, shapes):
    """A quotient's kernel gives its twin's bits: adversarial ends (zeros of both signs,
    infinities, NaN, subnormals) as dividends and divisors, intervals and points."""
    from pytest_fpcheck.interval.kernels import elementwise

    fmt = F.format_of(name)
    a_lo, a_hi, a_period = operand(6, shapes[0])
    b_lo, b_hi, b_period = operand(8, shapes[1])
    kernel = elementwise._div_bounds(name == "float32")
    size = max(a_period, b_period)
    for b_ends in ((b_lo, b_hi), (b_lo, b_lo), (np.abs(b_lo) + 1e-300, np.abs(b_hi) + 1)):
        args = (a_lo, a_hi, a_period, b_ends[0], b_ends[1], b_period, format_args(fmt))
        written_alike(kernel, args, size)
    if shapes[1] == (1,):  # by one number: each special value as the divisor
        for y in adversarial(2)[:120]:
            divisor = np.array([y])
            args = (a_lo, a_hi, a_period, divisor, divisor, 1, format_args(fmt))
            written_alike(kernel, args, size)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((4, 5, 6), (0, 2)), ((4, 5, 6), (1,)), ((3, 4), (0,)), ((2, 0, 3), (0, 2)), ((5,), ())],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_ends_over_any_axes(shape, axes, keepdims):
    """``sum_ends`` over axes that form one block (read in place) and that do not (moved last),
    a transposed operand, an empty kept axis: NumPy's sums, least and most, in NumPy's shape."""
    rng = np.random.default_rng(13)
    lo = rng.standard_normal(shape)
    hi = lo + np.abs(rng.standard_normal(shape))
    for low, high in ((lo, hi), (lo.T, hi.T)):
        got = linalg.sum_ends(low, high, axes, keepdims)
        magnitudes = np.maximum(np.abs(low), np.abs(high))
        wanted = [np.sum(v, axis=axes, keepdims=keepdims) for v in (low, high, magnitudes)]
        for ours, theirs in zip(got[:3], wanted, strict=True):
            assert ours.shape == theirs.shape
            assert np.allclose(ours, theirs, rtol=1e-12, atol=0)
        if low.size:
            assert np.array_equal(got[3], np.min(low, axis=axes, keepdims=keepdims))
            assert np.array_equal(got[4], np.max(high, axis=axes, keepdims=keepdims))


@pytest.mark.parametrize("point", [False, True])
def test_row_sums(point):
    """``kernels.scatter._row_sums``: rows added into their indices' rows in order, the
    skipped index left out, magnitudes NaN where an end is."""
    from pytest_fpcheck.interval.kernels import scatter

    rng = np.random.default_rng(11)
    x = adversarial(7, 900)
    lo = rng.permutation(x)[:1200].reshape(-1, 6)
    hi = lo if point else np.maximum(lo, rng.permutation(x)[: lo.size].reshape(lo.shape))
    rows = rng.integers(0, 9, lo.shape[0])
    outs = [[np.zeros((9, 6)), np.zeros((9, 6)), np.zeros((9, 6)), np.zeros((9, 1))]]
    outs.append([o.copy() for o in outs[0]])
    with np.errstate(all="ignore"):
        scatter._row_sums.dispatcher(lo, hi, rows, 3, *outs[0])
        scatter._row_sums.fallback(lo, hi, rows, 3, *outs[1])
    for compiled, twin in zip(*outs, strict=True):
        assert same_bits(compiled, twin)
    assert outs[0][3][3, 0] == 0.0
    assert outs[0][3].sum() == np.count_nonzero(rows != 3)


@pytest.mark.parametrize(("name", "per_row"), list(itertools.product(FORMATS, [False, True])))
def test_accumulated(name, per_row):
    """``kernels.scatter._accumulated``: counts of 0 (the ends as given), of a few terms and of
    more than 1 / u (gamma infinite), magnitudes near overflow, NaN and infinite ends."""
    from pytest_fpcheck.interval.kernels import scatter

    fmt = F.format_of(name)
    rng = np.random.default_rng(13)
    x = adversarial(9, 1000)
    lo = rng.permutation(x)[:1800]
    hi = np.maximum(lo, rng.permutation(x)[:1800])
    with np.errstate(all="ignore"):
        total = np.abs(rng.permutation(x)[:1800]) + np.maximum(np.abs(lo), np.abs(hi))
    counts = np.array([0.0, 1.0, 2.0, 7.0, 1000.0, 2.0**30, 2.0**60])
    count = rng.choice(counts, 300 if per_row else 1800)
    width = 6 if per_row else 1
    c = (fmt.unit_roundoff, fmt.smallest_subnormal, fmt.max_finite)
    kernel = scatter._accumulated(name == "float32")
    with np.errstate(all="ignore"):
        written_alike(kernel, (lo, hi, total, count, width, c, format_args(fmt)), 1800)


def test_a_kernels_summary_counts_each_element_by_the_ends_it_keeps():
    """A product's epilogue writes every element in its branch-free pass, then rewrites those
    that pass cannot step out: where m - r is 0, the pass's one unit down from 0 is a NaN
    pattern, the general path's -2**-1074. The summary it gives counts each element by the
    ends it keeps (small here), not by those its first pass wrote (a NaN: an infinite width)."""
    rng = np.random.default_rng(31)
    size = 4000
    mid = rng.standard_normal(size)
    rad = np.abs(mid) * 2.0**-20
    places = rng.choice(size, 5, replace=False)
    rad[places] = 2.0 ** rng.integers(-20, 20, 5)
    mid[places] = rad[places] * (1 + 2.0**-51)  # m - bump(r) is exactly 0
    kernel = linalg._epilogue(False, False)
    args = (mid, rad, np.zeros(0), np.zeros(0), (1.0, 1.0, 0.0, math.inf))
    low, high = written_alike(
        kernel, (*args, format_args(F.format_of("float64"))), size, summarised=True
    )
    assert (low[places] == -5e-324).all()
    assert np.isfinite(kernel.dispatcher(*args, format_args(F.format_of("float64")), low, high)[0])
