"""The resolution of a verdict and the "inconclusive" kind (issue 20, part 1; API section 9).

The invariant: a "roundoff" verdict never comes from an enclosure that could not have rejected a
factor of 2. Planted on deep models (where enclosures blow up) ``2 * reference`` is never called
round-off; shallow correct code still is.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.assertions.resolution import (
    DEFAULT_MAX_RESOLUTION,
    Resolution,
    run_default,
)
from pytest_fpcheck.assertions.summary import _median_twin, median_of
from pytest_fpcheck.interval.bounds import Bounds

from .models import Block

torch = pytest.importorskip("torch")

F64 = fp.format_of("float64")


def bounds(lo: list[float], hi: list[float], value: list[float]) -> Bounds:
    return Bounds(np.array(lo), np.array(hi), np.array(value), np.float64, F64)


def resolution_of(value, lo, hi, other=None) -> Resolution | None:
    """The resolution a verdict states for ``value`` in ``[lo, hi]`` (two-sided: against
    ``other``'s value in its enclosure)."""
    own = Bounds(np.asarray(lo), np.asarray(hi), np.asarray(value), np.float64, F64)
    if other is None:
        return fp.classify(own.value, own.value, bounds=own).resolved
    theirs = Bounds(*(np.asarray(x) for x in (other[1], other[2], other[0])), np.float64, F64)
    return fp.classify(own.value, theirs.value, bounds=own, expected_bounds=theirs).resolved


def test_resolution_is_the_median_relative_reach_to_the_farther_end() -> None:
    # reaches 0.1 (of 1), 0.3 (of 2: the farther end), 0 (exact): 0.1, 0.15, 0
    b = bounds([0.9, 1.7, 3.0], [1.05, 2.1, 3.0], [1.0, 2.0, 3.0])
    resolved = resolution_of(b.value, b.lo, b.hi)
    assert resolved is not None
    assert resolved.median == pytest.approx(0.1)
    assert (resolved.factor2, resolved.unbounded, resolved.judged) == (1.0, 0, 3)


def test_zero_values_unbounded_enclosures_and_non_finite_values() -> None:
    value = np.array([0.0, 0.0, 1.0, np.inf, np.nan])
    lo = np.array([0.0, -0.5, -np.inf, np.inf, -np.inf])
    hi = np.array([0.0, 0.5, 2.0, np.inf, np.inf])
    resolved = resolution_of(value, lo, hi)
    assert resolved is not None
    # judged: the three finite values; an exact zero flags anything, a zero with a reach and
    # an unbounded enclosure flag nothing
    assert (resolved.median, resolved.factor2, resolved.unbounded, resolved.judged) == (
        np.inf,
        pytest.approx(1 / 3),
        1,
        3,
    )
    assert resolution_of(np.array([np.nan]), np.array([-np.inf]), np.array([np.inf])) is None


def test_two_sided_reaches_add_up() -> None:
    a = bounds([0.99], [1.01], [1.0])
    e = bounds([0.98], [1.0], [0.99])
    resolved = resolution_of(a.value, a.lo, a.hi, other=(e.value, e.lo, e.hi))
    assert resolved is not None
    assert resolved.median == pytest.approx(0.02)


def test_inconclusive_message_is_pinned() -> None:
    actual = np.array([1.0, 2.0])
    wide = bounds([0.5, 1.5], [1.5, 2.5], [1.0, 2.0])
    verdict = fp.classify(actual, np.array([1.2, 1.9]), bounds=wide)
    assert verdict.kind == "inconclusive"
    assert not verdict.passed
    assert verdict.resolution == pytest.approx(0.375)
    assert verdict.report().splitlines() == [
        "fpcheck verdict 'inconclusive': inconclusive: no element is outside the round-off enclosure of actual, but the enclosure is too wide to tell round-off from a bug.",
        "0 / 2 (0%) expected elements outside the round-off enclosure of actual",
        "enclosure: median radius 1.69e+15 ULP (float64)",
        "resolution: 0.375 relative (the median element flags a deviation of that size); 50% of the elements would reject a factor of 2",
        "why inconclusive: the enclosure's resolution 0.375 is worse than max_resolution=0.1: it could not tell a relative error of 0.1 from round-off on half of the elements",
        "widest provenance: no operation widened it (exact inputs and exact operations)",
        'next: judge the model module by module on the reference\'s inputs, where enclosures stay narrow: fp.compare_modules(model, torch.float64, *inputs) names the first module that is a bug (docs/roundoff.md); or bound this run only, which is narrower: fp.track(mode="a_posteriori"); or accept this verdict with accept_inconclusive=True',
        "plain allclose (rtol=1e-07, atol=1e-07): would have failed, 2 / 2 (100%) mismatched; greatest absolute difference 0.2 at (0,), greatest relative difference 0.166667 at (0,)",
    ]
    record = verdict.to_dict()
    assert (record["kind"], record["resolution"], record["max_resolution"]) == (
        "inconclusive",
        pytest.approx(0.375),
        0.1,
    )
    assert record["factor2_fraction"] == 0.5  # 0.5 / 1 cannot reject a factor of 2, 0.5 / 2 can
    assert record["inconclusive_reason"].startswith("the enclosure's resolution 0.375")
    # a threshold the enclosure meets makes it a round-off verdict; a bug stays a bug
    assert fp.classify(actual, np.array([1.2, 1.9]), bounds=wide, max_resolution=0.4).kind == (
        "roundoff"
    )
    assert fp.classify(actual, np.array([1.6, 1.9]), bounds=wide).kind == "bug"


def test_an_unbounded_enclosure_on_a_finite_value_is_inconclusive() -> None:
    actual = np.array([1.0, 2.0, 3.0])
    b = bounds([0.999, -np.inf, 2.999], [1.001, 2.001, 3.001], [1.0, 2.0, 3.0])
    verdict = fp.classify(actual, actual + 0.0005, bounds=b)
    assert verdict.kind == "inconclusive"
    assert verdict.reason == (
        "1 / 3 finite values of actual have an unbounded enclosure: there the bounds cannot "
        "tell any value from round-off"
    )


def test_assert_roundoff_close_fails_on_inconclusive_unless_accepted() -> None:
    actual = np.array([1.0, 2.0])
    wide = bounds([0.5, 1.5], [1.5, 2.5], [1.0, 2.0])
    with pytest.raises(fp.InconclusiveVerdict, match=r"^fpcheck verdict 'inconclusive'") as info:
        fp.assert_roundoff_close(actual, np.array([1.2, 1.9]), bounds=wide)
    assert info.value.verdict.kind == "inconclusive"
    assert not isinstance(info.value, fp.RoundoffMismatch)  # no proof of a bug
    accepted = fp.assert_roundoff_close(
        actual, np.array([1.2, 1.9]), bounds=wide, accept_inconclusive=True
    )
    assert accepted.kind == "inconclusive"
    with pytest.raises(fp.InconclusiveVerdict, match=r"^layer 2\nfpcheck verdict"):
        fp.assert_roundoff_close(actual, np.array([1.2, 1.9]), bounds=wide, msg="layer 2")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_resolution": 0.5},
            "max_resolution=0.5 (type float) is not valid: expected a relative deviation strictly between 0 and 0.5 (above it a 'roundoff' verdict could come from an enclosure that cannot reject a factor of 2).",
        ),
        (
            {"max_resolution": 0},
            "max_resolution=0 (type int) is not valid: expected a relative deviation strictly between 0 and 0.5",
        ),
        (
            {"max_resolution": True},
            "max_resolution=True (type bool) is not valid: expected a relative deviation",
        ),
        (
            {"accept_inconclusive": "yes"},
            "accept_inconclusive='yes' (type str) is not valid: expected True or False.",
        ),
    ],
)
def test_bad_thresholds_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(fp.InvalidArgument, match=re.escape(message)):
        fp.assert_roundoff_close(np.ones(2), np.ones(2), **kwargs)


def test_the_run_default_threshold() -> None:
    actual = np.array([1.0, 2.0])
    b = bounds([0.8, 1.6], [1.2, 2.4], [1.0, 2.0])  # resolution 0.2
    assert fp.classify(actual, actual, bounds=b, max_resolution=0.3).kind == "exact"
    assert fp.classify(actual, actual * 1.01, bounds=b).kind == "inconclusive"
    with run_default(0.3):
        assert fp.classify(actual, actual * 1.01, bounds=b).kind == "roundoff"
        assert fp.classify(actual, actual * 1.01, bounds=b).max_resolution == 0.3
    assert fp.classify(actual, actual * 1.01, bounds=b).max_resolution == DEFAULT_MAX_RESOLUTION
    with (
        pytest.raises(fp.InvalidArgument, match=re.escape("fpcheck_max_resolution=1.0")),
        run_default(1.0),
    ):
        pass


# -- the invariant on deep models ----------------------------------------------------------


def deep_mlp(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(6):
        layers += [torch.nn.Linear(256, 256), torch.nn.GELU()]
    return torch.nn.Sequential(*layers).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_factor_of_2_on_a_deep_model_is_never_roundoff(dtype: torch.dtype) -> None:
    model = deep_mlp(dtype)
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1)).to(dtype)
    with fp.track():
        out = model(x)
    reference = torch.nn.Sequential(*[m for m in model]).double()(x.double())
    for threshold in (0.01, 0.1, 0.49):
        for planted in (2 * reference, reference / 2):
            verdict = fp.classify(out, planted, max_resolution=threshold)
            assert verdict.kind in ("bug", "inconclusive"), (threshold, verdict.report())
    # the enclosure of six bfloat16 layers is too wide for any verdict: the correct output is
    # inconclusive too, and the message says so
    if dtype == torch.bfloat16:
        honest = fp.classify(out, reference)
        assert honest.kind == "inconclusive"
        assert honest.resolution is not None
        assert honest.resolution > 1


def test_a_factor_of_2_on_a_transformer_block_is_never_roundoff() -> None:
    torch.manual_seed(0)
    block = Block().to(torch.bfloat16).eval()
    x = torch.randn(2, 16, 64).to(torch.bfloat16)
    with torch.no_grad():
        with fp.track():
            out = block(x)
        reference = Block().double().eval()
        reference.load_state_dict({k: v.double() for k, v in block.state_dict().items()})
        expected = reference(x.double())
    for planted in (2 * expected, expected / 2, expected):
        assert fp.classify(out, planted).kind in ("bug", "inconclusive")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_shallow_correct_code_is_still_roundoff(dtype: torch.dtype) -> None:
    """The README tour: one matmul and a GELU."""
    torch.manual_seed(0)
    x = torch.randn(64, 256, dtype=dtype)
    w = torch.randn(256, 32, dtype=dtype)
    with fp.track():
        y = torch.nn.functional.gelu(x @ w)
    reference = torch.nn.functional.gelu(x.double() @ w.double())
    verdict = fp.assert_roundoff_close(y, reference)
    assert verdict.kind == "roundoff"
    assert verdict.resolution is not None
    assert verdict.resolution < 0.05
    assert fp.classify(y, 2 * reference).kind == "bug"


def _orders(size: int) -> list[np.ndarray]:
    """Values to take the median of: random magnitudes with infinities and ties, and the
    orders that defeat a naive pivot (sorted, reversed, all equal, organ pipe, sawtooth)."""
    rng = np.random.default_rng(size)
    values = rng.standard_normal(size) * 10.0 ** rng.integers(-300, 300, size)
    values[rng.random(size) < 0.2] = np.inf
    values[rng.random(size) < 0.1] = values[0]  # ties
    ramp = np.arange(size, dtype=np.float64)
    pipe = np.concatenate([ramp[: size // 2], ramp[size // 2 :][::-1]])
    return [values, np.sort(values), ramp[::-1].copy(), np.ones(size), pipe, ramp % 7]


@pytest.mark.parametrize("size", [1, 2, 3, 8, 101, 2048, 20001])
def test_median_of_is_numpys_median(size: int) -> None:
    for values in _orders(size):
        with np.errstate(over="ignore", invalid="ignore"):
            expected = np.median(values)
        for median in (median_of.dispatcher, _median_twin):  # compiled, and the twin
            got = median(values.copy())
            assert got == expected or (np.isnan(got) and np.isnan(expected))
            assert isinstance(got, float)
