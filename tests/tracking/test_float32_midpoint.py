"""The midpoint product in float32 (:func:`pytest_fpcheck.interval.linalg._float32_midpoint`):
where one operand of a product is a point held exactly in float32 and the other an interval
whose radii dominate, the midpoint product runs in float32 BLAS and its error joins the radius.

Each enclosure is checked against the exact range of the interval product (every vertex sum
computed in rational arithmetic), with the accumulation's own factor set to 0, so that the
float32 midpoint's error is all that the radius has to cover beyond the operands' radii: a
bound that dropped it (or the rounding of the midpoints to float32, or its underflow) fails
here. Cancellation, magnitudes near float32's overflow and underflow thresholds, midpoints
beyond float32's range, tiny midpoints and subnormal point operands are covered; the rule
level (tracked bfloat16, float16 and float32 products) is checked against the computed values
and the exact ones, and the loosening the float32 midpoint costs is bounded."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.formats import FORMATS
from pytest_fpcheck.interval import linalg
from pytest_fpcheck.interval.core import Interval

torch = pytest.importorskip("torch")

F32 = FORMATS["float32"]
F64 = FORMATS["float64"]


def exact_range_of_intervals(
    a_lo: np.ndarray, a_hi: np.ndarray, b_lo: np.ndarray, b_hi: np.ndarray
) -> tuple[list, list]:
    """[min, max] over A in [a_lo, a_hi], B in [b_lo, b_hi] of (A B)_ij, exactly: each term's
    extremes are among the four products of its factors' ends."""
    rows, depth = a_lo.shape
    low: list[list[Fraction]] = []
    high: list[list[Fraction]] = []
    for i in range(rows):
        low.append([])
        high.append([])
        for j in range(b_lo.shape[1]):
            small = big = Fraction(0)
            for k in range(depth):
                xs = (Fraction(float(a_lo[i, k])), Fraction(float(a_hi[i, k])))
                ys = (Fraction(float(b_lo[k, j])), Fraction(float(b_hi[k, j])))
                ends = [x * y for x in xs for y in ys]
                small += min(ends)
                big += max(ends)
            low[-1].append(small)
            high[-1].append(big)
    return low, high


def exact_range(lo: np.ndarray, hi: np.ndarray, b: np.ndarray) -> tuple[list, list]:
    """[min, max] over A in [lo, hi] of (A b)_ij for a point b, exactly."""
    return exact_range_of_intervals(lo, hi, b, b)


def assert_encloses(enclosure: Interval, low: list, high: list) -> None:
    for i, row in enumerate(low):
        for j, value in enumerate(row):
            lo, hi = float(enclosure.lo[i, j]), float(enclosure.hi[i, j])
            assert lo == -np.inf or Fraction(lo) <= value, (i, j, lo, float(value))
            assert hi == np.inf or high[i][j] <= Fraction(hi), (i, j, hi, float(high[i][j]))


def product(
    mid: np.ndarray, radius: np.ndarray, b: np.ndarray, *, float32: bool = True
) -> tuple[Interval, Interval]:
    """(the operand A = [mid - radius, mid + radius], A b as :func:`linalg.matmul` bounds it
    with no accumulation error) with b's float32 values given (``float32``) or not."""
    a = Interval(mid - radius, mid + radius)
    b32 = b.astype(np.float32)
    assert (b32.astype(np.float64) == b).all()
    magnitudes = np.maximum(np.abs(b32), np.float32(2.0**-126))
    enclosure = linalg.matmul(
        a,
        Interval.point(b),
        F64,
        factor=0.0,
        accumulate=F32,
        k=b.shape[0],
        magnitudes=(None, magnitudes),
        values=(None, b32 if float32 else None),
    )
    return a, enclosure


def takes_float32(a: Interval, b: np.ndarray) -> bool:
    b32 = b.astype(np.float32)
    return linalg._float32_midpoint(a, b32, np.abs(b32), 0.0, b.shape[0]) is not None


def _cancelling(rng: np.random.Generator, depth: int) -> tuple[np.ndarray, np.ndarray]:
    mid = rng.standard_normal((3, depth)) * 2.0 ** rng.integers(-8, 8, (3, 1))
    b = rng.standard_normal((depth, 2)).astype(np.float32).astype(np.float64)
    # column 0 nearly cancels row 0: sum mid_0k b_k0 is small against sum |mid_0k| |b_k0|
    b[:, 0] = np.float32(1.0)
    mid[0] = np.where(np.arange(depth) % 2 == 0, 1.0, -1.0) * (1 + rng.random(depth) * 2**-20)
    return mid, b


@pytest.mark.parametrize("seed", range(6))
def test_float32_midpoint_encloses_the_exact_interval_product_with_cancellation(
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(8, 80))
    mid, b = _cancelling(rng, depth)
    # radii of round-off size, large enough against the float32 midpoint's error (that path)
    radius = np.abs(mid) * depth * 2.0**-17
    a, enclosure = product(mid, radius, b)
    assert takes_float32(a, b)
    assert_encloses(enclosure, *exact_range(a.lo, a.hi, b))


def test_float32_midpoint_covers_both_roundings_of_one_term() -> None:
    """One term per output: the midpoint's rounding to float32 and the product's rounding
    each err by up to 2**-24 relatively, together by up to twice that, and only the
    float32 midpoint's allowance covers them (the accumulation's factor is 0 here)."""
    rng = np.random.default_rng(13)
    mid = rng.standard_normal((400, 1)) * (1 + rng.random((400, 1)))
    b = rng.standard_normal((1, 5)).astype(np.float32).astype(np.float64)
    radius = np.abs(mid) * 2.0**-17
    a, enclosure = product(mid, radius, b)
    assert takes_float32(a, b)
    assert_encloses(enclosure, *exact_range(a.lo, a.hi, b))


def test_float32_midpoint_covers_products_that_underflow_float32() -> None:
    rng = np.random.default_rng(7)
    depth = 40
    mid = np.sign(rng.standard_normal((3, depth))) * (1 + rng.random((3, depth))) * 2.0**-95
    b = (rng.standard_normal((depth, 2)) * 2.0**-40).astype(np.float32).astype(np.float64)
    radius = np.abs(mid) * 2.0**-8
    a, enclosure = product(mid, radius, b)
    assert takes_float32(a, b)
    assert_encloses(enclosure, *exact_range(a.lo, a.hi, b))


@pytest.mark.parametrize("scale", [2.0**100, 2.0**120, 1e39])
def test_float32_midpoint_near_and_beyond_float32s_overflow(scale: float) -> None:
    """Products or midpoints that overflow float32 give the whole line, never a bound that
    excludes the exact range (1e39 lies beyond float32: its midpoints become infinite)."""
    rng = np.random.default_rng(3)
    depth = 16
    mid = rng.standard_normal((3, depth)) * scale
    b = (rng.standard_normal((depth, 2)) * 2.0**4).astype(np.float32).astype(np.float64)
    radius = np.abs(mid) * 2.0**-8
    a, enclosure = product(mid, radius, b)
    assert takes_float32(a, b)
    assert_encloses(enclosure, *exact_range(a.lo, a.hi, b))
    if scale == 1e39:
        assert np.isinf(enclosure.lo).all()
        assert np.isinf(enclosure.hi).all()


def test_float32_midpoint_with_infinite_and_nan_ends_gives_those_outputs_the_whole_line() -> None:
    rng = np.random.default_rng(17)
    depth = 24
    mid = rng.standard_normal((4, depth))
    b = rng.standard_normal((depth, 2)).astype(np.float32).astype(np.float64)
    radius = np.abs(mid) * 2.0**-8
    lo, hi = mid - radius, mid + radius
    lo[1, 3], hi[2, 5], lo[3, 0], hi[3, 0] = -np.inf, np.inf, np.nan, np.nan
    a = Interval(lo, hi)
    assert takes_float32(a, b)
    enclosure = linalg.matmul(
        a,
        Interval.point(b),
        F64,
        factor=0.0,
        accumulate=F32,
        k=depth,
        magnitudes=(None, np.abs(b).astype(np.float32)),
        values=(None, b.astype(np.float32)),
    )
    assert np.isinf(enclosure.lo[1:]).all()
    assert np.isinf(enclosure.hi[1:]).all()
    finite = Interval(lo[:1], hi[:1])
    assert_encloses(
        Interval(enclosure.lo[:1], enclosure.hi[:1]), *exact_range(finite.lo, finite.hi, b)
    )


def test_split_float32_takes_non_finite_ends_as_mid_rad_does() -> None:
    """An element with an infinite or NaN end: midpoint 0 (as ``Interval.mid_rad`` takes it)
    and an infinite radius operand, so that its outputs are the whole line whatever the BLAS
    does with infinities; finite elements are the float64 split's, rounded to float32."""
    from pytest_fpcheck.interval.kernels import split_float32, split_operand

    lo = np.array([-np.inf, 1.0, np.nan, -2.0, 0.5, 3.0])
    hi = np.array([2.0, np.inf, np.nan, -1.0, 0.5, 3.0 + 2.0**-20])
    split = split_float32(lo, hi, (1.5, 0.25))
    assert split is not None
    mid, x, _ = split
    assert mid[:3].tolist() == [0.0, 0.0, 0.0]
    assert np.isinf(x[:3]).all()
    m64, x64, _ = split_operand(lo[3:], hi[3:], False, (1.5, 0.25), None, True)
    assert (mid[3:] == m64.astype(np.float32)).all()
    assert (x[3:] == x64).all()


def test_tiny_midpoints_and_radii_of_round_off_size_keep_the_float64_product() -> None:
    rng = np.random.default_rng(5)
    depth = 32
    b = rng.standard_normal((depth, 2)).astype(np.float32).astype(np.float64)
    tiny = rng.standard_normal((3, depth)) * 2.0**-110
    a = Interval(tiny - np.abs(tiny), tiny + np.abs(tiny))
    assert not takes_float32(a, b)  # a midpoint below 2**-100: its rounding is not relative
    _, enclosure = product(tiny, np.abs(tiny), b)
    assert_encloses(enclosure, *exact_range(a.lo, a.hi, b))
    mid = rng.standard_normal((3, depth))
    narrow = Interval(mid - np.abs(mid) * 2.0**-30, mid + np.abs(mid) * 2.0**-30)
    assert not takes_float32(narrow, b)  # its radii would be swamped by the float32 error


def test_float32_midpoint_loosens_the_bound_by_at_most_its_share() -> None:
    """Where taken, the float32 midpoint's error is at most 1/32 of the radii it joins
    (summed): the radius grows by at most about that over the float64 product's."""
    rng = np.random.default_rng(11)
    depth = 512
    mid = rng.standard_normal((16, depth))
    b = rng.standard_normal((depth, 16)).astype(np.float32).astype(np.float64)
    radius = np.abs(mid) * 2.0**-9  # a bfloat16 rounding's size
    a, fast = product(mid, radius, b)
    _, slow = product(mid, radius, b, float32=False)
    assert takes_float32(a, b)
    grown = (fast.hi - fast.lo) / (slow.hi - slow.lo)
    assert grown.max() <= 1 + 1 / 32, grown.max()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("call", ["addmm", "mm_left", "mm_right"])
def test_tracked_products_with_a_float32_midpoint_hold_the_computed_and_exact_values(
    dtype: str, call: str
) -> None:
    """An interval operand (a tracked product of two tensors, rounded to ``dtype``) times a
    point weight: the computed result and the exact range of the interval product lie in the
    enclosure."""
    torch.manual_seed(len(dtype) + len(call))
    dt = getattr(torch, dtype)
    for trial in range(6):
        depth = 24 + 8 * trial
        x, s = torch.randn(4, depth).to(dt), (1 + torch.rand(4, depth)).to(dt)
        w = torch.randn(depth, 3).to(dt)
        bias = torch.randn(3).to(dt)
        if trial % 2:
            w[:, 0] = (1 / (x[0] * s[0]).float()).to(dt) * torch.where(
                torch.arange(depth) % 2 == 0, 1.0, -1.0
            ).to(dt)  # column 0 cancels row 0
        with fp.track():
            # from bfloat16: radii large enough for the float32 midpoint in every dtype
            a = (x.bfloat16() * s.bfloat16()).to(dt)
            if call == "addmm":
                y = torch.addmm(bias, a, w)
            elif call == "mm_left":
                y = a @ w
            else:
                y = (w.t() @ a.t()).t()
            bounds = fp.bounds_of(y)
            inputs = fp.bounds_of(a)
        assert bounds.contains(y.double().numpy()).all(), (trial, dtype, call)
        low, high = exact_range(inputs.lo, inputs.hi, w.double().numpy())
        if call == "addmm":
            c = bias.double().numpy()
            low = [[v + Fraction(float(c[j])) for j, v in enumerate(row)] for row in low]
            high = [[v + Fraction(float(c[j])) for j, v in enumerate(row)] for row in high]
        assert_encloses(Interval(bounds.lo, bounds.hi), low, high)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("case", ["addmm_", "mm_out", "addmm_out"])
def test_a_weight_the_product_overwrites_is_read_as_it_was(dtype: str, case: str) -> None:
    """``w.addmm_(a, w)`` and ``out=`` the weight: the weight's memory holds the result when
    the rule runs, so its values (a float32 tensor's memory itself) must not be read there."""
    torch.manual_seed(3)
    dt = getattr(torch, dtype)
    x, s = torch.randn(24, 24).to(dt), (1 + torch.rand(24, 24)).to(dt)
    with fp.track():
        a = (x.bfloat16() * s.bfloat16()).to(dt)
        w = torch.randn(24, 24).to(dt)
        w0 = w.clone()
        if case == "addmm_":
            w.addmm_(a, w)
        elif case == "mm_out":
            torch.mm(a, w, out=w)
        else:
            torch.addmm(torch.ones(24, 24).to(dt), a, w, out=w)
        bounds, inputs = fp.bounds_of(w), fp.bounds_of(a)
    low, high = exact_range(inputs.lo, inputs.hi, w0.double().numpy())
    if case != "mm_out":
        c = (w0 if case == "addmm_" else torch.ones(24, 24)).double().numpy()
        low = [
            [v + Fraction(float(c[i, j])) for j, v in enumerate(row)] for i, row in enumerate(low)
        ]
        high = [
            [v + Fraction(float(c[i, j])) for j, v in enumerate(row)] for i, row in enumerate(high)
        ]
    assert_encloses(Interval(bounds.lo, bounds.hi), low, high)


def test_a_float32_subnormal_is_found_with_denormals_are_zero() -> None:
    """Under ``torch.set_flush_denormal(True)`` a comparison reads a subnormal as 0: the scan
    that keeps a weight with one out of the float32 product reads its bits."""
    from pytest_fpcheck.interval.kernels import float32_magnitudes

    w = np.ones((4, 4), dtype=np.float32)
    w[1, 2] = np.float32(1e-40)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        _, subnormal = float32_magnitudes(w)
    finally:
        torch.set_flush_denormal(False)
    assert subnormal


def test_a_point_operand_with_a_float32_subnormal_keeps_the_float64_product() -> None:
    """A float32 product may flush subnormal inputs: such a weight offers no float32 values
    (its magnitudes still serve the radius product), and the result stays enclosed."""
    from pytest_fpcheck.tracking.torch.rules.linalg import _float32_point

    w = torch.randn(16, 2)
    w[3, 1] = 1e-40  # a float32 subnormal
    magnitudes, values = _float32_point(w, Interval.point(w.double().numpy()))
    assert magnitudes is not None
    assert values is None
    normal = torch.randn(16, 2)
    magnitudes, values = _float32_point(normal, Interval.point(normal.double().numpy()))
    assert values is not None
    assert (values == normal.numpy()).all()
    x, s = torch.randn(3, 16), 1 + torch.rand(3, 16)
    with fp.track():
        a = x * s
        y = a @ w
        bounds, inputs = fp.bounds_of(y), fp.bounds_of(a)
    assert bounds.contains(y.double().numpy()).all()
    low, high = exact_range(inputs.lo, inputs.hi, w.double().numpy())
    assert_encloses(Interval(bounds.lo, bounds.hi), low, high)


# products of two interval operands (a backward pass's weight gradient: activations times the
# output's gradient), both midpoints rounded to float32 (linalg._float32_midpoints)


def interval_product(a: Interval, b: Interval, *, float32: bool = True) -> Interval:
    """A B as :func:`linalg.matmul` bounds it with no accumulation error; ``float32=False``
    forces the float64 midpoint product."""
    original = linalg._float32_midpoints
    if not float32:
        linalg._float32_midpoints = lambda *args: None  # type: ignore[assignment]
    try:
        return linalg.matmul(a, b, F64, factor=0.0, accumulate=F32, k=a.shape[1])
    finally:
        linalg._float32_midpoints = original


def takes_float32_both(a: Interval, b: Interval) -> bool:
    return linalg._float32_midpoints(a, b, 0.0, a.shape[1]) is not None


def _boxes(
    rng: np.random.Generator, rows: int, depth: int, cols: int, relative: float
) -> tuple[Interval, Interval]:
    m_a = rng.standard_normal((rows, depth)) * 2.0 ** rng.integers(-6, 6, (rows, 1))
    m_b = rng.standard_normal((depth, cols)) * 2.0 ** rng.integers(-6, 6, (1, cols))
    # row 0 of A nearly cancels column 0 of B
    m_b[:, 0] = 1.0
    m_a[0] = np.where(np.arange(depth) % 2 == 0, 1.0, -1.0) * (1 + rng.random(depth) * 2**-20)
    r_a = np.abs(m_a) * relative * rng.random((rows, depth))
    r_b = np.abs(m_b) * relative * rng.random((depth, cols))
    return Interval(m_a - r_a, m_a + r_a), Interval(m_b - r_b, m_b + r_b)


@pytest.mark.parametrize("seed", range(6))
def test_float32_midpoints_of_two_intervals_enclose_the_exact_product(seed: int) -> None:
    """Radii from a bfloat16 rounding's size down to where the path is barely taken, with
    cancellation: the enclosure holds the exact range of the interval product, though only
    the float32 midpoints' allowance covers their rounding (the accumulation factor is 0)."""
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(8, 64))
    relative = [2.0**-9, 2.0**-12, depth * 2.0**-13, depth * 2.0**-14][seed % 4]
    a, b = _boxes(rng, 3, depth, 4, relative)
    assert takes_float32_both(a, b)
    enclosure = interval_product(a, b)
    assert_encloses(enclosure, *exact_range_of_intervals(a.lo, a.hi, b.lo, b.hi))


def test_float32_midpoints_cover_one_term_products_and_underflow() -> None:
    """One term per output (both roundings to float32 and the product's, up to about three
    units of 2**-24 together), then products that underflow float32."""
    rng = np.random.default_rng(23)
    m_a, m_b = rng.standard_normal((200, 1)), rng.standard_normal((1, 7))
    a = Interval(m_a - np.abs(m_a) * 2.0**-18, m_a + np.abs(m_a) * 2.0**-18)
    b = Interval(m_b - np.abs(m_b) * 2.0**-18, m_b + np.abs(m_b) * 2.0**-18)
    assert takes_float32_both(a, b)
    assert_encloses(interval_product(a, b), *exact_range_of_intervals(a.lo, a.hi, b.lo, b.hi))
    small_a = rng.standard_normal((3, 30)) * 2.0**-90
    small_b = rng.standard_normal((30, 2)) * 2.0**-50
    a = Interval(small_a - np.abs(small_a) * 2.0**-8, small_a + np.abs(small_a) * 2.0**-8)
    b = Interval(small_b - np.abs(small_b) * 2.0**-8, small_b + np.abs(small_b) * 2.0**-8)
    assert takes_float32_both(a, b)
    assert_encloses(interval_product(a, b), *exact_range_of_intervals(a.lo, a.hi, b.lo, b.hi))


def test_float32_midpoints_beyond_float32s_range_and_non_finite_ends() -> None:
    """A midpoint beyond float32's range, an infinite end and a NaN end: those outputs are the
    whole line, the others hold the exact range."""
    rng = np.random.default_rng(29)
    m_a, m_b = rng.standard_normal((4, 16)), rng.standard_normal((16, 3))
    lo_a, hi_a = m_a - np.abs(m_a) * 2.0**-8, m_a + np.abs(m_a) * 2.0**-8
    lo_a[1], hi_a[1] = 1e39, 1.0001e39
    lo_a[2, 3] = -np.inf
    lo_a[3, 0] = hi_a[3, 0] = np.nan
    a = Interval(lo_a, hi_a)
    b = Interval(m_b - np.abs(m_b) * 2.0**-8, m_b + np.abs(m_b) * 2.0**-8)
    assert takes_float32_both(a, b)
    enclosure = interval_product(a, b)
    assert np.isinf(enclosure.lo[1:]).all()
    assert np.isinf(enclosure.hi[1:]).all()
    first = Interval(enclosure.lo[:1], enclosure.hi[:1])
    assert_encloses(first, *exact_range_of_intervals(lo_a[:1], hi_a[:1], b.lo, b.hi))


def test_float32_midpoints_are_refused_for_tiny_midpoints_and_round_off_radii() -> None:
    rng = np.random.default_rng(31)
    m_a, m_b = rng.standard_normal((3, 32)), rng.standard_normal((32, 2))
    wide_b = Interval(m_b - np.abs(m_b) * 2.0**-8, m_b + np.abs(m_b) * 2.0**-8)
    tiny = m_a * 2.0**-110
    a = Interval(tiny - np.abs(tiny), tiny + np.abs(tiny))
    assert not takes_float32_both(a, wide_b)  # a's rounding to float32 would not be relative
    assert_encloses(
        interval_product(a, wide_b), *exact_range_of_intervals(a.lo, a.hi, wide_b.lo, wide_b.hi)
    )
    narrow_a = Interval(m_a - np.abs(m_a) * 2.0**-30, m_a + np.abs(m_a) * 2.0**-30)
    narrow_b = Interval(m_b - np.abs(m_b) * 2.0**-30, m_b + np.abs(m_b) * 2.0**-30)
    assert not takes_float32_both(narrow_a, narrow_b)  # swamped by the float32 error


def test_float32_midpoints_loosen_the_bound_by_at_most_their_share() -> None:
    rng = np.random.default_rng(37)
    m_a, m_b = rng.standard_normal((16, 512)), rng.standard_normal((512, 16))
    a = Interval(m_a - np.abs(m_a) * 2.0**-9, m_a + np.abs(m_a) * 2.0**-9)
    b = Interval(m_b - np.abs(m_b) * 2.0**-12, m_b + np.abs(m_b) * 2.0**-12)
    assert takes_float32_both(a, b)
    fast, slow = interval_product(a, b), interval_product(a, b, float32=False)
    grown = (fast.hi - fast.lo) / (slow.hi - slow.lo)
    assert grown.max() <= 1 + 1 / 32, grown.max()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_tracked_weight_gradient_holds_the_computed_and_exact_values(dtype: str) -> None:
    """A linear layer's backward pass on tracked activations and a tracked output gradient
    (both intervals): the weight's gradient, a product of two interval operands, holds the
    computed values and the exact range of the product of its operands' enclosures."""
    torch.manual_seed(41)
    dt = getattr(torch, dtype)
    x = torch.randn(48, 24).to(dt)
    layer = torch.nn.Linear(24, 8).to(dt)
    target = torch.randn(48, 8).to(dt)
    seen: dict[str, fp.Bounds] = {}
    original = linalg._float32_midpoints
    taken: list[bool] = []

    def spy(*args):  # type: ignore[no-untyped-def]
        result = original(*args)
        taken.append(result is not None)
        return result

    linalg._float32_midpoints = spy  # type: ignore[assignment]
    try:
        with fp.track():
            h = (x.bfloat16() * 1.5).to(dt)  # an interval operand
            out = layer(h)
            loss = ((out - target) ** 2).sum()
            loss.backward()
            seen["h"] = fp.bounds_of(h)
            seen["grad"] = fp.bounds_of(layer.weight.grad)
    finally:
        linalg._float32_midpoints = original
    assert any(taken)
    grad = seen["grad"]
    assert grad is not None
    assert grad.contains(layer.weight.grad.double().numpy()).all()
    assert np.isfinite(grad.lo).all()


def test_radius_share_is_the_sampled_radii_over_the_midpoints_magnitudes() -> None:
    """The share that decides the float32 midpoint (``kernels.radius_share``): sum rad / sum
    |mid| over at most 4096 elements evenly spaced in memory, as NumPy computes it from the
    sample; inf where a sampled radius is infinite or an end NaN, NaN where every sampled
    element is 0."""
    from pytest_fpcheck.interval.kernels import radius_share

    rng = np.random.default_rng(17)
    for size in (10, 4096, 10_000, 100_003):
        lo = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 3, size)
        hi = lo + np.abs(rng.standard_normal(size)) * 1e-3
        step = max(1, size // 4096)
        mid = lo[::step] * 0.5 + hi[::step] * 0.5
        radius = np.maximum(hi[::step] - mid, mid - lo[::step])
        expected = np.sum(radius) / np.sum(np.abs(mid))
        assert radius_share(lo, hi) == pytest.approx(expected, rel=1e-12)
        # a transposed operand is read in its memory's order: the same sample
        assert radius_share(lo.reshape(1, -1).T, hi.reshape(1, -1).T) == radius_share(lo, hi)
    unbounded = np.array([-np.inf, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    undefined = np.array([np.nan, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    assert radius_share(*unbounded) == np.inf
    assert radius_share(*undefined) == np.inf
    assert np.isnan(radius_share(np.zeros(5), np.zeros(5)))


def test_radius_share_samples_an_operand_with_gaps_where_it_lies() -> None:
    """An operand whose memory has gaps (a head sliced out of a fused projection) gives the
    share of the same sample as its contiguous copy: evenly spaced in the order of its axes
    by decreasing stride."""
    from pytest_fpcheck.interval.kernels import radius_share

    rng = np.random.default_rng(5)
    wide_lo = rng.standard_normal((4, 128, 768))
    wide_hi = wide_lo + np.abs(rng.standard_normal((4, 128, 768))) * 1e-3
    for lo, hi in (
        (wide_lo[..., 256:512], wide_hi[..., 256:512]),  # gaps between rows
        (  # a head split and transposed, as attention reads keys
            wide_lo[..., :256].reshape(4, 128, 4, 64).transpose(0, 2, 1, 3),
            wide_hi[..., :256].reshape(4, 128, 4, 64).transpose(0, 2, 1, 3),
        ),
        (wide_lo[:, ::3, ::7], wide_hi[:, ::3, ::7]),
    ):
        order = sorted(range(lo.ndim), key=lambda axis: -abs(lo.strides[axis]))
        copies = [np.ascontiguousarray(end.transpose(order)) for end in (lo, hi)]
        assert radius_share(lo, hi) == radius_share(*copies)


@pytest.mark.parametrize("float32", [True, False])
def test_operands_with_gaps_give_the_bits_of_their_contiguous_copies(float32: bool) -> None:
    """Keys sliced out of a fused projection and transposed (memory with gaps, in no axis
    order C-contiguous): the operands' splits are copied in their memory's order
    (``flat_views(copy_in_order=True)``), the products read them transposed; every bit of the
    enclosure is that of the same product on contiguous copies, by either midpoint path."""
    rng = np.random.default_rng(23)
    relative = 2.0**-8 if float32 else 2.0**-40
    fused_lo = rng.standard_normal((2, 16, 3 * 32))
    fused_hi = fused_lo + np.abs(fused_lo) * relative * rng.random(fused_lo.shape)
    # (batch, heads, depth 8, keys 16): the keys' heads of a (batch, keys, 3 x 4 x 8) tensor
    keys = [e[..., 32:64].reshape(2, 16, 4, 8).transpose(0, 2, 3, 1) for e in (fused_lo, fused_hi)]
    assert not any(k.flags.c_contiguous or k.flags.f_contiguous for k in keys)
    mid = rng.standard_normal((2, 4, 16, 8))
    queries = Interval(mid - np.abs(mid) * relative, mid + np.abs(mid) * relative)
    gapped = Interval(keys[0], keys[1])
    copied = Interval(np.ascontiguousarray(keys[0]), np.ascontiguousarray(keys[1]))

    def swapped(x: Interval) -> Interval:
        return Interval(x.lo.swapaxes(-1, -2), x.hi.swapaxes(-1, -2))

    for a, b, c, d in (
        (queries, gapped, queries, copied),  # scores: Q K^T
        (swapped(gapped), swapped(queries), swapped(copied), swapped(queries)),
    ):
        k = a.shape[-1]
        assert (linalg._float32_midpoints(a, b, 0.0, k) is not None) is float32
        found = linalg.matmul(a, b, F64, factor=0.0, accumulate=F32, k=k)
        expected = linalg.matmul(c, d, F64, factor=0.0, accumulate=F32, k=k)
        assert np.array_equal(found.lo, expected.lo)
        assert np.array_equal(found.hi, expected.hi)
