"""Verdicts and their messages, pinned whole (one layout for every assertion)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.interval.bounds import Bounds

torch = pytest.importorskip("torch")

F16 = torch.float16


def tracked_tenth() -> torch.Tensor:
    x = torch.tensor([1.0, 2.0, 3.0], dtype=F16)
    with fp.track():
        return x * 0.1


def test_roundoff_where_allclose_fails() -> None:
    y = tracked_tenth()
    expected = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    assert not torch.allclose(y.double(), expected, rtol=1e-4, atol=0)
    verdict = fp.assert_roundoff_close(y, expected, rtol=1e-4, atol=0)
    assert verdict.kind == "roundoff"
    assert (verdict.outside, verdict.total, verdict.worst_index) == (0, 3, None)
    # the enclosure of a product rounded to nearest is the hull of the exact product and the
    # float16 result (interval.rounding.nearest): radii of 0.2, 0.2 and 0.1 ULP here, half the
    # distances |x 0.1 - RN(x 0.1)| (outward rounding gave half a ULP each)
    assert verdict.tightness == pytest.approx(0.2, rel=1e-3)


def test_bug_message_layout_is_pinned() -> None:
    y = tracked_tenth()
    expected = torch.tensor([0.1, 0.2, 0.31], dtype=torch.float64)
    with pytest.raises(fp.RoundoffMismatch) as info:
        fp.assert_roundoff_close(y, expected)
    lines = str(info.value).splitlines()
    assert (
        lines[0]
        == "fpcheck verdict 'bug': Type-II (bug): the difference is more than round-off can explain."
    )
    assert lines[1] == "1 / 3 (33.3%) expected elements outside the round-off enclosure of actual"
    assert (
        lines[2]
        == "worst at index (2,): actual=0.300048828125, expected=0.31, enclosure=[0.29999998211860657, 0.300048828125]"
    )
    assert lines[3] == "  outside by 0.00995117 = 407.5 radii = 40.76 ULP (float16)"
    assert lines[4] == "first offenders:"
    assert (
        lines[5]
        == "  (2,): actual=0.300048828125, expected=0.31, enclosure=[0.29999998211860657, 0.300048828125]"
    )
    # the enclosure of a product rounded to nearest: the exact product (0.3 to 26 bits) and
    # the float16 result, not the grid points around it (interval.rounding.nearest)
    assert lines[6] == "enclosure: median radius 0.2 ULP (float16)"
    assert lines[7] == (
        "resolution: 0.000244 relative (the median element flags a deviation of that size); "
        "100% of the elements would reject a factor of 2"
    )
    assert re.fullmatch(
        r"widest provenance: aten\.mul at test_verdict\.py:\d+ \(\+2\.44e-05\)", lines[8]
    )
    assert lines[9] == (
        "plain allclose (rtol=0.001, atol=1e-05): would have failed, 1 / 3 (33.3%) mismatched; "
        "greatest absolute difference 0.00995117 at (2,), greatest relative difference 0.0321006 at (2,)"
    )
    assert len(lines) == 10
    assert info.value.verdict.kind == "bug"


def test_msg_string_and_callable() -> None:
    y = tracked_tenth()
    expected = torch.tensor([0.1, 0.2, 0.31], dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"^layer 3 output\nfpcheck verdict 'bug'"):
        fp.assert_roundoff_close(y, expected, msg="layer 3 output")
    with pytest.raises(AssertionError, match=r"^\[wrapped\] fpcheck verdict 'bug'"):
        fp.assert_roundoff_close(y, expected, msg=lambda text: "[wrapped] " + text)
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "msg=3 (type int) is not valid: expected a string, a callable taking the generated message, or None."
        ),
    ):
        fp.assert_roundoff_close(y, expected, msg=3)


def test_exact_verdict() -> None:
    y = tracked_tenth()
    assert fp.classify(y, y.clone()).kind == "exact"


def test_fallback_never_says_roundoff() -> None:
    close = fp.assert_roundoff_close(np.array([1.0, 2.0]), np.array([1.0, 2.0000001]))
    assert close.kind == "close"
    assert close.fallback
    with pytest.raises(fp.RoundoffMismatch) as info:
        fp.assert_roundoff_close(np.array([1.0, 2.0]), np.array([1.0, 2.1]))
    assert str(info.value).splitlines() == [
        "fpcheck verdict 'bug': outside rtol/atol; no round-off bounds were recorded for actual, so this is a tolerance failure, not a proof of a bug (compute actual inside fp.track() for a verdict).",
        "1 / 2 (50%) elements outside rtol/atol",
        "worst at index (1,): actual=2.0, expected=2.1",
        "first offenders:",
        "  (1,): actual=2.0, expected=2.1",
        "note: no round-off bounds were recorded for actual: compared with rtol/atol only",
        "plain allclose (rtol=1e-07, atol=1e-07): would have failed, 1 / 2 (50%) mismatched; greatest absolute difference 0.1 at (1,), greatest relative difference 0.047619 at (1,)",
    ]


def test_fallback_uses_torch_default_tolerances_per_dtype() -> None:
    actual = torch.tensor([1.0], dtype=F16)
    assert fp.classify(actual, torch.tensor([1.0009], dtype=F16)).kind == "close"
    assert fp.classify(actual, torch.tensor([1.002], dtype=F16)).kind == "bug"


def test_two_sided_verdict_when_both_sides_are_tracked() -> None:
    x = torch.tensor([1.0, 2.0, 3.0], dtype=F16)
    with fp.track():
        a = x * 0.1
        b = x / 10
    verdict = fp.classify(a, b)
    assert verdict.two_sided
    assert verdict.kind in ("exact", "roundoff")
    with fp.track():
        wrong = x / 9
    verdict = fp.classify(a, wrong)
    assert verdict.kind == "bug"
    assert (
        verdict.report().splitlines()[1]
        == "3 / 3 (100%) elements where the enclosures of actual and expected are disjoint"
    )


def test_explicit_bounds_and_expected_bounds() -> None:
    actual = np.array([1.0, 2.0])
    bounds = Bounds(
        np.array([0.9, 1.9]), np.array([1.1, 2.1]), actual, np.float64, fp.format_of("float64")
    )
    assert fp.classify(actual, np.array([1.05, 1.95]), bounds=bounds).kind == "roundoff"
    assert fp.classify(actual, np.array([1.2, 1.95]), bounds=bounds).kind == "bug"
    # two-sided, the reaches add up: (0.1 + 0.15) / 1 and (0.1 + 0.05) / 2, a median
    # resolution of 0.1625, worse than the default threshold of 0.1
    other = Bounds(
        np.array([1.05, 1.9]),
        np.array([1.3, 2.0]),
        np.array([1.2, 1.95]),
        np.float64,
        fp.format_of("float64"),
    )
    two_sided = fp.classify(actual, np.array([1.2, 1.95]), bounds=bounds, expected_bounds=other)
    assert (two_sided.kind, two_sided.resolution) == ("inconclusive", pytest.approx(0.1625))
    accepted = fp.classify(
        actual, np.array([1.2, 1.95]), bounds=bounds, expected_bounds=other, max_resolution=0.2
    )
    assert accepted.kind == "roundoff"


def test_nan_and_inf_positions_are_compared_first() -> None:
    actual = np.array([1.0, np.nan, np.inf])
    bounds = Bounds(
        np.array([0.95, -np.inf, 1.0]),
        np.array([1.05, np.inf, np.inf]),
        actual,
        np.float64,
        fp.format_of("float64"),
    )
    verdict = fp.classify(actual, np.array([1.0, np.nan, np.inf]), bounds=bounds)
    assert verdict.kind == "bug"  # NaN == NaN only with equal_nan
    assert verdict.outside == 1
    assert (
        fp.classify(actual, np.array([1.0, np.nan, np.inf]), bounds=bounds, equal_nan=True).kind
        == "exact"
    )
    verdict = fp.classify(actual, np.array([1.0, 3.0, 1e300]), bounds=bounds)
    assert verdict.kind == "roundoff"  # a NaN that round-off can produce, an overflow
    verdict = fp.classify(actual, np.array([1.0, 3.0, -np.inf]), bounds=bounds)
    assert verdict.kind == "bug"
    assert verdict.nonfinite_mismatches == 1
    assert "NaN/Inf positions differ at 1 of them" in verdict.report()


def test_actual_outside_its_own_bounds_is_an_internal_error() -> None:
    actual = np.array([1.0, 5.0])
    bounds = Bounds(
        np.array([0.5, 1.0]), np.array([1.5, 2.0]), actual, np.float64, fp.format_of("float64")
    )
    with pytest.raises(
        fp.InternalError,
        match=re.escape(
            "internal error in pytest-fpcheck: the computed actual lies outside the enclosure recorded for it"
        ),
    ):
        fp.classify(actual, actual, bounds=bounds)


def test_zero_dimensional_non_contiguous_and_requires_grad_inputs_work() -> None:
    x = torch.tensor(3.0, dtype=torch.float32)
    with fp.track():
        y = x * 0.1
    assert fp.classify(y, torch.tensor(0.3)).kind in ("exact", "roundoff")
    m = torch.randn(4, 6)
    with fp.track():
        t = (m * 3).t()
    assert not t.is_contiguous()
    assert fp.classify(t, (m.double() * 3).t()).kind in ("exact", "roundoff")
    w = torch.randn(3, requires_grad=True)
    with fp.track():
        z = w * 2
    assert z.requires_grad
    assert fp.classify(z, w.detach() * 2).kind == "exact"


@pytest.mark.parametrize(
    ("actual", "expected", "kwargs", "message"),
    [
        (
            np.ones(3),
            np.ones(4),
            {},
            "expected=<numpy array of shape (4,) and dtype float64> (type ndarray) is not valid: expected an array of shape (3,), the shape of actual. Broadcasting is not applied: compare arrays of one shape.",
        ),
        (
            np.ones(3, np.int64),
            np.ones(3),
            {},
            "actual=<numpy array of shape (3,) and dtype int64> (type ndarray) is not valid: expected a floating array, tensor, float or nested list of floats. Its dtype is int64; compare floating results only.",
        ),
        (
            np.ones(0),
            np.ones(0),
            {},
            "actual=<numpy array of shape (0,) and dtype float64> (type ndarray) is not valid: expected a non-empty array (there is nothing to compare).",
        ),
        (
            np.ones(2, np.complex128),
            np.ones(2),
            {},
            "actual=<numpy array of shape (2,) and dtype complex128> (type ndarray) is not valid: expected a floating array",
        ),
        (
            np.ones(2),
            np.ones(2),
            {"rtol": -1},
            "rtol=-1 (type int) is not valid: expected a non-negative number or None (the dtype's default).",
        ),
        (
            np.ones(2),
            np.ones(2),
            {"bounds": "wide"},
            "bounds='wide' (type str) is not valid: expected a Bounds (from fp.bounds_of, fp.roundoff_bounds or fp.hull).",
        ),
        (
            np.ones(2),
            np.ones(2),
            {"equal_nan": "yes"},
            "equal_nan='yes' (type str) is not valid: expected True or False.",
        ),
    ],
)
def test_bad_arguments_are_named(
    actual: object, expected: object, kwargs: dict, message: str
) -> None:
    with pytest.raises(fp.InvalidArgument, match=re.escape(message)):
        fp.assert_roundoff_close(actual, expected, **kwargs)


def test_torch_integer_and_complex_tensors_are_refused() -> None:
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "actual=<torch array of shape (2,) and dtype torch.int32> (type Tensor) is not valid: expected a floating tensor. Its dtype is torch.int32; compare floating results only."
        ),
    ):
        fp.classify(torch.ones(2, dtype=torch.int32), torch.ones(2))
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape("expected a real floating tensor. Complex tensors are not supported."),
    ):
        fp.classify(torch.ones(2, dtype=torch.complex64), torch.ones(2))


def test_bounds_shape_must_match() -> None:
    bounds = Bounds(np.zeros(3), np.ones(3), np.zeros(3), np.float64, fp.format_of("float64"))
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "is not valid: expected Bounds of shape (2,), the shape of the arrays compared."
        ),
    ):
        fp.classify(np.ones(2), np.ones(2), bounds=bounds)


def test_a_coarser_untracked_reference_is_judged_as_rounded_onto_its_format() -> None:
    # x * 1.7 in bfloat16 is enclosed by the hull of the exact product and its bfloat16
    # rounding; the float32 reference x * 1.7 is that exact product rounded to float32, which
    # lies up to half a float32 ULP outside the hull: judged as it is, about one element in
    # eight was called a bug. The enclosure rounded outward onto float32 holds every faithful
    # float32 rounding of the exact product.
    torch.manual_seed(0)
    x = torch.randn(4096, dtype=torch.bfloat16)
    with fp.track():
        y = x * 1.7
    bounds = fp.bounds_of(y)
    assert bounds is not None
    reference = x.float() * 1.7
    raw_outside = ~(
        (bounds.lo <= reference.double().numpy()) & (reference.double().numpy() <= bounds.hi)
    )
    assert raw_outside.sum() > 0  # the case the rule is for does occur
    verdict = fp.classify(y, reference)
    assert (verdict.kind, verdict.outside) == ("roundoff", 0)
    assert any("stored in float32 and has no bounds of its own" in note for note in verdict.notes)
    # a float64 reference is judged against the enclosure itself, with no note
    exact = fp.classify(y, x.double() * torch.tensor(1.7, dtype=torch.float32).double())
    assert exact.kind == "roundoff"
    assert not any("no bounds of its own" in n for n in exact.notes)
    # the rounding onto float32 hides nothing bigger than a float32 ULP: a reference off by
    # a bfloat16 ULP (2**-7 relatively) is still a bug on every element
    planted = fp.classify(y, reference * (1 + 2.0**-7))
    assert planted.kind == "bug"
    assert planted.outside > 4000
