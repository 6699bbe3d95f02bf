"""Softmax of float16 and bfloat16 tensors (issue 20, part 3): the kernels compute in float32 from
end to end, so the rule's allowance is float32's and the rounding into the tensor's format is the
enclosure's outward rounding. Checked against mpmath (exact) and against what PyTorch computes, on
rows with cancellation, huge and tiny scores (exponentials underflowing in float32, float16
results in the subnormal range), -inf entries, long rows, the last and an inner dimension, and
interval inputs; and tight: on point inputs the radius is at most about one unit in the last
place of the tensor's format."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")

REDUCED = [torch.bfloat16, torch.float16]


def _exact_softmax(rows: np.ndarray) -> np.ndarray:
    """softmax of each row in mpmath at 50 digits, as float64 intervals [down, up] around it."""
    mpmath.mp.dps = 50
    lo, hi = np.empty(rows.shape), np.empty(rows.shape)
    for i, row in enumerate(rows):
        values = [mpmath.mpf(float(v)) for v in row]
        top = max(values)
        weights = [
            mpmath.mpf(0) if v == -mpmath.inf or v - top < -100_000 else mpmath.exp(v - top)
            for v in values
        ]
        total = mpmath.fsum(weights)
        for j, w in enumerate(weights):
            p = w / total
            nearest = float(p)
            lo[i, j] = np.nextafter(nearest, -np.inf) if mpmath.mpf(nearest) > p else nearest
            hi[i, j] = np.nextafter(nearest, np.inf) if mpmath.mpf(nearest) < p else nearest
    return lo, hi


def _rows(dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Rows of varied character, each 40 wide."""
    g = torch.Generator().manual_seed(seed)
    top = 60_000.0 if dtype == torch.float16 else 1e30
    rows = [
        torch.randn(40, generator=g),  # ordinary
        30 * torch.randn(40, generator=g),  # most exponentials far below 1
        200 * torch.randn(40, generator=g),  # float32 exponentials underflow
        1000 + torch.randn(40, generator=g),  # large and close: cancellation in x - max
        torch.full((40,), 3.0),  # ties
        torch.where(torch.rand(40, generator=g) < 0.5, -torch.inf, torch.randn(40, generator=g)),
        torch.linspace(-top, top, 40),  # the whole range
        torch.linspace(-20, 0, 40),  # float16 results down to its subnormals
    ]
    return torch.stack(rows).to(dtype)


def _check(x: torch.Tensor, y: torch.Tensor, dim: int) -> fp.Bounds:
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains(y).all(), "computed value outside its enclosure"
    rows = x.double().movedim(dim, -1).reshape(-1, x.shape[dim]).numpy()
    down, up = _exact_softmax(rows)
    lo = np.moveaxis(bounds.lo, dim, -1).reshape(down.shape)
    hi = np.moveaxis(bounds.hi, dim, -1).reshape(up.shape)
    outside = (lo > down) | (up > hi)
    assert not outside.any(), (np.argwhere(outside)[:5], lo[outside][:5], down[outside][:5])
    return bounds


@pytest.mark.parametrize("dtype", REDUCED)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_rows_are_enclosed_against_mpmath_and_torch(dtype: torch.dtype, seed: int) -> None:
    x = _rows(dtype, seed)
    with fp.track():
        y = torch.softmax(x, -1)
    _check(x, y, -1)


@pytest.mark.parametrize("dtype", REDUCED)
def test_an_inner_dimension_and_a_long_row(dtype: torch.dtype) -> None:
    x = _rows(dtype, 3).t().contiguous()  # softmax over dim 0: ATen's _vec_softmax
    with fp.track():
        y = torch.softmax(x, 0)
    _check(x, y, 0)
    g = torch.Generator().manual_seed(4)
    long_rows = (torch.randn(3, 3000, generator=g) * torch.tensor([[0.1], [3.0], [50.0]])).to(dtype)
    with fp.track():
        z = torch.softmax(long_rows, -1)
    _check(long_rows, z, -1)


@pytest.mark.parametrize("dtype", REDUCED)
def test_interval_inputs_are_enclosed(dtype: torch.dtype) -> None:
    """A tracked input (a product, rounded to the tensor's format) reaches softmax as an
    interval; every value in it, and the one torch computed, give results inside."""
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(6, 30, generator=g).to(dtype), (3 * torch.randn(30, generator=g)).to(dtype)
    with fp.track():
        x = a * b
        y = torch.softmax(x, -1)
    xb = fp.bounds_of(x)
    assert fp.bounds_of(y).contains(y).all()
    bounds = fp.bounds_of(y)
    for corner in (xb.lo, xb.hi, (a.double() * b.double()).numpy()):
        down, up = _exact_softmax(corner)
        assert ((bounds.lo <= down) & (up <= bounds.hi)).all()


@pytest.mark.parametrize("dtype", REDUCED)
def test_point_inputs_give_about_one_unit_in_the_last_place(dtype: torch.dtype) -> None:
    """The float32 allowance is far below the tensor format's spacing: the enclosure is the one
    or two grid points around the float32 result, never the old bfloat16-wide absolute term
    (0.4 u, 1.6e-3 for bfloat16, whatever the value)."""
    g = torch.Generator().manual_seed(6)
    x = (3 * torch.randn(64, 32, generator=g)).to(dtype)
    with fp.track():
        y = torch.softmax(x, -1)
    bounds = fp.bounds_of(y)
    spacing = fp.formats.ulp(y.double().numpy(), str(dtype).removeprefix("torch."))
    assert (bounds.hi - bounds.lo <= 2 * spacing).all()


@pytest.mark.parametrize(
    ("spread", "gamma_n", "u"),
    [(3e-6, 7.6e-6, 2.0**-24), (0.05, 0.14, 2.0**-8), (0.3, 0.5, 2.0**-8), (0.0, 0.0, 2.0**-53)],
)
def test_the_quotient_factor_covers_both_sides_exactly(
    spread: float, gamma_n: float, u: float
) -> None:
    """The sum may be as low as S (1 - s)(1 - gamma) and the quotient's two roundings as large
    as (1 + u)^2: the factor covers 1 / ((1 - s)(1 - gamma)), which exceeds the first-order
    (1 + s)(1 + gamma) by a second-order term (mpmath, 50 digits)."""
    from pytest_fpcheck.tracking.torch.rules.softmax import _quotient_factor

    mpmath.mp.dps = 50
    factor = mpmath.mpf(_quotient_factor(spread, gamma_n, u))
    s, g, r = (mpmath.mpf(v) for v in (spread, gamma_n, u))
    assert factor >= (1 + r) ** 2 / ((1 - s) * (1 - g))
    assert factor >= (1 + s) * (1 + g) / (1 - r) ** 2
    if gamma_n > 0.1:
        assert (1 + s) * (1 + g) * (1 + r) ** 2 < (1 + r) ** 2 / ((1 - s) * (1 - g))
    # (1 - s)(1 - gamma) may be 0, or gamma infinite: no bound
    assert _quotient_factor(1.0, 0.5, u) == _quotient_factor(0.0, np.inf, u) == 2.0**1000


@pytest.mark.parametrize("dtype", REDUCED)
def test_safe_softmax_and_a_transposed_last_dimension(dtype: torch.dtype) -> None:
    """ATen makes the input contiguous, so a transposed tensor's last dimension takes the
    float32 kernel too; ``_safe_softmax`` (attention's math path) is softmax with all -inf rows
    set to 0."""
    x = _rows(dtype, 7)
    with fp.track():
        y = torch.ops.aten._safe_softmax(x, -1)
        _check(x, y, -1)
    g = torch.Generator().manual_seed(8)
    z = (3 * torch.randn(6, 40, 5, generator=g)).to(dtype).transpose(1, 2)
    with fp.track():
        w = torch.softmax(z, -1)
        _check(z, w, -1)


def _exact_log_softmax(rows: np.ndarray) -> np.ndarray:
    """log-softmax of each row in mpmath at 50 digits (float64, to nearest: the checks below
    allow its half ULP by comparing against the enclosure widened one float64 step)."""
    mpmath.mp.dps = 50
    out = np.empty(rows.shape)
    for i, row in enumerate(rows):
        values = [mpmath.mpf(float(v)) for v in row]
        top = max(values)
        total = mpmath.fsum(
            mpmath.mpf(0) if v == -mpmath.inf else mpmath.exp(v - top) for v in values
        )
        for j, v in enumerate(values):
            out[i, j] = -np.inf if v == -mpmath.inf else float(v - top - mpmath.log(total))
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, *REDUCED])
@pytest.mark.parametrize("dim", [-1, 0])
def test_log_softmax_encloses_the_exact_and_the_computed_values(
    dtype: torch.dtype, dim: int
) -> None:
    """The compiled pass per row (interval/kernels/softmax.py) on rows of every character, the
    last and an inner dimension, and interval inputs; rows that may be NaN are the whole line."""
    x = _rows(dtype, seed=3)
    with fp.track():
        scaled = x * 1.25  # an interval input where the product rounds
        y = torch.log_softmax(scaled, dim)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    computed = y.double().numpy()
    whole = np.isneginf(bounds.lo) & np.isposinf(bounds.hi)
    inside = (bounds.lo <= computed) & (computed <= bounds.hi)
    assert (inside | (np.isnan(computed) & whole)).all()  # NaN: only in the whole line
    # the exact log-softmax of the tensor the kernel read (the computed scaled values)
    rows = scaled.double().numpy()
    exact = _exact_log_softmax(rows if dim == -1 else rows.T)
    exact = exact if dim == -1 else exact.T
    lo, hi = np.nextafter(bounds.lo, -np.inf), np.nextafter(bounds.hi, np.inf)
    assert (((lo <= exact) & (exact <= hi)) | np.isnan(computed)).all()
    # a finite result is bounded (no vacuous enclosure on ordinary rows)
    assert np.isfinite(bounds.hi[computed > -1e30]).mean() > 0.5


def test_log_softmax_rows_that_may_be_nan_are_the_whole_line() -> None:
    x = torch.tensor([[0.0, 1.0, 2.0], [-torch.inf, -torch.inf, -torch.inf], [0.0, torch.inf, 1.0]])
    with fp.track():
        y = torch.log_softmax(x * 1.0, -1)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert np.isfinite(bounds.lo[0]).all()
    assert np.isfinite(bounds.hi[0]).all()
    for row in (1, 2):
        assert np.isneginf(bounds.lo[row]).all()
        assert np.isposinf(bounds.hi[row]).all()


def _exact_log_softmax_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each element's exact range of log-softmax over interval rows, in mpmath at 50 digits:
    x_j - log(exp(x_j) + rest) increases in x_j and decreases in the rest, so its least value
    takes x_j at lo and the others at hi, its greatest x_j at hi and the others at lo."""
    mpmath.mp.dps = 50
    least, most = np.empty(lo.shape), np.empty(lo.shape)

    def exp(v: float) -> mpmath.mpf:
        return mpmath.mpf(0) if v == -np.inf else mpmath.exp(mpmath.mpf(float(v)))

    for i in range(lo.shape[0]):
        e_lo, e_hi = [exp(v) for v in lo[i]], [exp(v) for v in hi[i]]
        s_lo, s_hi = mpmath.fsum(e_lo), mpmath.fsum(e_hi)
        for j in range(lo.shape[1]):
            low = (
                -mpmath.inf
                if lo[i, j] == -np.inf
                else mpmath.mpf(float(lo[i, j])) - mpmath.log(e_lo[j] + s_hi - e_hi[j])
            )
            least[i, j] = float(low)
            most[i, j] = float(mpmath.mpf(float(hi[i, j])) - mpmath.log(e_hi[j] + s_lo - e_lo[j]))
    return least, most


@pytest.mark.parametrize(("name", "u"), [("float32", 2.0**-24), ("float64", 2.0**-53)])
def test_log_softmax_kernel_encloses_the_exact_range_over_intervals(name: str, u: float) -> None:
    """The kernel (``kernels.log_softmax_bounds``) with the kernel-rounding allowances of a
    format, on interval rows whose widths cross the reach of its series (a dominant element
    moved by 0.0155 puts v at about 2**-6), rows without a dominant element, lower ends at
    -inf and wide intervals (the path through each end's own logarithm): it holds each
    element's exact range, and exceeds it by little more than the rounding it charges."""
    from pytest_fpcheck import formats as F
    from pytest_fpcheck.interval.kernels import log_softmax_bounds

    rng = np.random.default_rng(11)
    widths = np.array([0.0, 1e-12, 1e-6, 1e-3, 0.01, 0.0155, 0.016, 0.02, 0.1, 1.0])
    rows = []
    for kind in range(120):
        x = 2.0 * rng.standard_normal(12)
        if kind % 3 == 0:
            x[rng.integers(12)] += 15.0  # a dominant element: its probability near 1
        if kind % 10 == 9:
            x[rng.integers(12)] = -np.inf
        rows.append(x)
    lo = np.array(rows)
    hi = lo + rng.choice(widths, lo.shape)
    # a row whose lower sum is below 1e-300: one lower end at -697 from the top, the others
    # beyond -700 (their exponentials taken as 0)
    tiny_row = np.full(12, -800.0)
    tiny_row[0] = 0.0
    tiny_lo = tiny_row.copy()
    tiny_lo[0] = -697.0
    lo, hi = np.vstack([lo, tiny_lo]), np.vstack([hi, tiny_row])
    fmt = F.format_of(name)
    log_f, per_log_s, tiny = 4 * u, 4 * u, fmt.smallest_subnormal
    b_lo, b_hi = log_softmax_bounds(lo, hi, 1, u, log_f, per_log_s, tiny, fmt)
    least, most = _exact_log_softmax_range(lo, hi)
    assert (b_lo <= least).all()
    assert (most <= b_hi).all()
    # tight: beyond the exact range by at most the charged rounding (the kernel's u terms,
    # log_f, per_log_s |log S| <= 4u (|top| + 4), a step of the result) and 2**-37 (the
    # float64 evaluation's slack: the sums' margin of 2**-40 on each side, exp's widening)
    top = hi.max(axis=1, keepdims=True)
    finite = np.isfinite(lo)
    finite[-1] = False  # the last row's exponentials below exp(-700) are taken as 0: loose
    charged = 2 * u * (np.abs(hi - top) + top - lo.max(axis=1, keepdims=True)) + 2 * u * np.abs(
        most
    )
    allowed = charged + 2 * log_f + 8 * u * (np.abs(top) + 8) + 2.0**-37
    allowed += 2 * np.spacing(np.abs(most).astype(fmt.name if name == "float32" else "f8"))
    with np.errstate(invalid="ignore"):  # inf - inf where a lower end is -inf
        excess = (b_hi - b_lo) - (most - least)
    assert (excess[finite] <= allowed[finite]).all(), np.max(excess[finite] - allowed[finite])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_log_softmax_upper_ends_stay_bounded_where_exponentials_underflow(
    dtype: torch.dtype,
) -> None:
    """Rows of enclosures thousands wide (a model's logits after worst-case propagation): an
    element's own exponential at its upper end and the others' at their lower ends all
    underflow, so the formula's upper end is x - log(0). Log-softmax never exceeds 0, nor does
    the kernel's (x - m) - log(S) beyond its rounding: the upper ends are at most a few units
    of the kernel's log allowance, and still hold the exact range (mpmath) and what PyTorch
    computes at points drawn from the enclosures, their ends included."""
    rng = np.random.default_rng(21)
    centre = torch.from_numpy(rng.standard_normal((6, 48))).to(dtype)
    lo = centre.double() - torch.from_numpy(rng.uniform(0, 1, (6, 48))) * torch.tensor(
        [[30.0], [1e3], [1e4], [3e4], [1e5], [2e5]], dtype=torch.float64
    )
    hi = centre.double() + torch.from_numpy(rng.uniform(0, 1, (6, 48))) * torch.tensor(
        [[30.0], [1e3], [1e4], [3e4], [1e5], [2e5]], dtype=torch.float64
    )
    lo, hi = lo.to(dtype).double(), hi.to(dtype).double()  # ends the tensor's format holds
    with fp.track(assume={centre: fp.hull(lo, hi)}):
        y = torch.log_softmax(centre, -1)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert np.isfinite(bounds.hi).all()
    # against +inf for most elements of the wide rows before; bfloat16's kernel may keep its
    # sum in bfloat16, whose allowance over 48 terms is about a third
    assert bounds.hi.max() <= (0.5 if dtype == torch.bfloat16 else 1e-3)
    least, most = _exact_log_softmax_range(lo.numpy(), hi.numpy())
    assert (bounds.lo <= least).all()
    assert (most <= bounds.hi).all()
    # PyTorch's own log-softmax at points of the enclosures: each element at its upper end with
    # the others at their lower ends (the exact range's top), and random points
    points = [torch.where(torch.eye(48, dtype=torch.bool)[j], hi, lo) for j in range(0, 48, 7)]
    points += [lo + (hi - lo) * torch.from_numpy(rng.uniform(0, 1, (6, 48))) for _ in range(8)]
    for point in points:
        computed = torch.log_softmax(point.to(dtype), -1).double().numpy()
        assert ((bounds.lo <= computed) & (computed <= bounds.hi)).all()


def test_log1p_series_encloses_log1p_within_its_reach() -> None:
    """The series the log-softmax kernel takes for log(S (1 + v)): log1p(v) lies in
    [P - R, P + R] (mpmath at 50 digits) up to the kernel's evaluation constant 2**-50, for v
    across its reach, both signs, down to subnormal magnitudes; and R is small (the series is
    worth taking: at most 0.26 v**4)."""
    from pytest_fpcheck.interval.kernels.softmax import _SERIES_REACH, _log1p_series

    mpmath.mp.dps = 50
    rng = np.random.default_rng(12)
    magnitudes = np.concatenate(
        [
            [_SERIES_REACH, np.nextafter(_SERIES_REACH, 0), 2.0**-7, 2.0**-14, 5e-324, 0.0],
            _SERIES_REACH * rng.random(400),
            2.0 ** rng.uniform(-60, -6, 200),
        ]
    )
    for v in np.concatenate([magnitudes, -magnitudes]):
        p, r = _log1p_series(float(v))
        exact = mpmath.log1p(mpmath.mpf(float(v)))
        assert mpmath.mpf(p) - r - 2.0**-50 <= exact <= mpmath.mpf(p) + r + 2.0**-50, v
        assert r <= 0.26 * v**4
