"""``track(mode="a_posteriori")``: enclosures of this run (Higham section 3.3). They hold the
exact value, the computed value and a float64 run of the same operations (the random programs
of test_soundness.py check all three); here, what that buys and what it must still reject."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")


def _mlp(dtype: torch.dtype, seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)
    ).to(dtype)
    return model, torch.randn(16, 64).to(dtype)


def _float64_run(model: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    import copy

    wide = copy.deepcopy(model).double()
    with torch.no_grad():
        return wide(x.double()).numpy()


def _tracked(model: torch.nn.Module, x: torch.Tensor, mode: str) -> tuple[torch.Tensor, fp.Bounds]:
    with torch.no_grad(), fp.track(mode=mode, strict=True):
        out = model(x)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    return out, bounds


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_holds_the_computed_and_the_float64_values(dtype: torch.dtype) -> None:
    model, x = _mlp(dtype)
    out, bounds = _tracked(model, x, "a_posteriori")
    assert bounds.mode == "a_posteriori"
    assert bounds.contains(out).all()
    assert bounds.contains(_float64_run(model, x)).all()


def test_float32_radius_is_the_round_off_that_happened() -> None:
    """A float32 MLP on a point input: the any-order bound is thousands of times the actual
    error (gamma_256 over sums of 256 terms); this run's bound is a few times it."""
    model, x = _mlp(torch.float32)
    reference = _float64_run(model, x)
    ratios = {}
    for mode in ("rigorous", "a_posteriori"):
        out, bounds = _tracked(model, x, mode)
        error = np.abs(out.double().numpy() - reference)
        ratios[mode] = np.median(bounds.radius) / np.median(error)
    assert ratios["rigorous"] > 500
    assert ratios["a_posteriori"] < 16


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_16u_error_is_caught_and_the_correct_model_passes(dtype: torch.dtype) -> None:
    """Judged against the float64 run: the correct model is round-off; its output times
    1 + 16u (u the format's unit round-off) is a bug."""
    model, x = _mlp(dtype)
    reference = torch.from_numpy(_float64_run(model, x))
    u = torch.finfo(dtype).eps / 2
    with torch.no_grad(), fp.track(mode="a_posteriori"):
        out = model(x)
        planted = model(x) * (1 + 16 * u)
    assert fp.classify(out, reference).kind == "roundoff"
    verdict = fp.classify(planted, reference)
    assert verdict.kind == "bug"
    assert verdict.outside > verdict.total // 4


def test_a_computed_nan_gets_the_whole_line() -> None:
    """float16 overflows to inf and inf - inf is NaN, while the exact values are finite: the
    enclosure of the NaN elements is the whole line (so the NaN lies in it)."""
    x = torch.tensor([60000.0, 1.0], dtype=torch.float16)
    with fp.track(mode="a_posteriori"):
        big = x * 2
        out = big - big
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert torch.isnan(out[0])
    assert bounds.lo[0] == -np.inf
    assert bounds.hi[0] == np.inf
    assert -1e-15 < bounds.lo[1] <= 0.0 <= bounds.hi[1] < 1e-15


def test_an_exact_step_adds_only_float64_round_off() -> None:
    """Nothing rounded in the run (x * 3 is exact in float32 here): the enclosure is the
    float64 evaluation's, a few units of float64's round-off wide, not float32's; a step that
    rounds (x / 3) is as wide as its rounding."""
    x = torch.tensor([1.5, -2.0, 0.25])
    with fp.track(mode="a_posteriori"):
        exact_step = (x * 3).neg()
        rounded_step = x / 3
    bounds = fp.bounds_of(exact_step)
    assert bounds is not None
    assert (bounds.radius <= 4 * 2.0**-53 * np.abs(bounds.value)).all()
    assert bounds.contains(-np.array([4.5, -6.0, 0.75])).all()
    rounded = fp.bounds_of(rounded_step)
    assert rounded is not None
    exact = np.array([1.5, -2.0, 0.25]) / 3
    error = np.abs(rounded.value - exact)
    assert rounded.contains(exact).all()
    assert (rounded.radius <= error + 4 * 2.0**-53 * np.abs(exact)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_attention_is_joined_to_the_math_path(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 4, 8, 16).to(dtype) for _ in range(3))
    with torch.no_grad(), fp.track(mode="a_posteriori", strict=True):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    wide = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True
    )
    assert bounds.contains(out).all()
    assert bounds.contains(wide).all()
    # the resolution of this run: a few units of the format's round-off, not hundreds
    u = torch.finfo(dtype).eps / 2
    relative = np.median(bounds.radius / np.maximum(np.abs(bounds.value), 1e-30))
    assert relative < 16 * u


@pytest.mark.parametrize(
    "overwrite",
    [lambda t: t.fill_(0.5), lambda t: t.zero_(), lambda t: t.bernoulli_(0.5)],
    ids=["fill_", "zero_", "bernoulli_"],
)
def test_an_overwritten_buffer_is_what_was_written(overwrite) -> None:
    """Fills and random draws write exact values: their enclosure is those values, not a hull
    with what the buffer held before (uninitialised memory may hold NaN or 1e30: a dropout's
    mask buffer from torch.empty_like did, and widened a whole BERT to the line)."""
    buffer = torch.tensor([1e30, float("nan"), -3.0])
    with fp.track(mode="a_posteriori"):
        overwrite(buffer)
        out = buffer * 2
    bounds = fp.bounds_of(buffer)
    assert bounds is None or (bounds.lo == bounds.hi).all()
    scaled = fp.bounds_of(out)
    assert scaled is None or (scaled.radius < 1e-15).all()


def test_a_nan_end_is_the_whole_line_not_dropped() -> None:
    """Joining keeps what an enclosure does not know: a rule's NaN end (an undefined bound)
    becomes the whole line, as a computed NaN does, and is never replaced by the computed
    value alone."""
    from pytest_fpcheck.interval.core import Interval
    from pytest_fpcheck.tracking.torch.mode import _joined

    computed = torch.tensor([1.0, 2.0, float("nan")])
    rule = Interval(np.array([np.nan, 1.5, 0.0]), np.array([1.5, np.nan, 1.0]))
    joined, summaries = _joined([computed], rule)
    assert (joined.lo == -np.inf).all()
    assert (joined.hi == np.inf).all()
    assert summaries == [(np.inf, True)]  # the store's summary of the joined enclosure


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_the_join_is_the_hull_with_the_computed_values_in_any_layout(layout: str) -> None:
    """The compiled join gives, element for element, the hull of the rule's enclosure and the
    computed value (the whole line where either is NaN), whatever the layouts of the enclosure
    and of the computed tensor, and the summary the store would compute of it; a point
    enclosure equal to the computed values (NaN matching NaN) stays as it is."""
    from pytest_fpcheck.interval.core import Interval
    from pytest_fpcheck.interval.kernels import summary
    from pytest_fpcheck.tracking.torch.mode import _joined

    rng = np.random.default_rng(0)
    computed = torch.tensor(rng.standard_normal((6, 5)), dtype=torch.float32)
    computed[1, 2] = float("nan")
    lo = computed.double().numpy() - rng.random((6, 5)) * 1e-6
    hi = computed.double().numpy() + rng.random((6, 5)) * 1e-6
    lo[0, :] += 1e-3  # the computed value below the rule's enclosure: the hull reaches it
    hi[3, 1] = np.nan
    if layout == "transposed":
        computed = computed.t().contiguous().t()
    if layout == "broadcast":
        lo, hi = lo[:1].copy(), hi[:1].copy()
    joined, summaries = _joined([computed], Interval(lo, hi))
    value = computed.double().numpy()
    with np.errstate(invalid="ignore"):
        low, high = np.minimum(np.broadcast_to(lo, value.shape), value), np.maximum(hi, value)
    undefined = np.isnan(low) | np.isnan(high)
    low[undefined], high[undefined] = -np.inf, np.inf
    assert np.array_equal(joined.lo, low)
    assert np.array_equal(joined.hi, high)
    assert summaries == [summary(np.ascontiguousarray(low), np.ascontiguousarray(high))]
    point = Interval.point(value.copy())
    kept, summaries = _joined([computed], point)
    assert kept is point
    assert summaries == [None]
