"""Layer norm's backward kernel bounded by its own rule
(``tracking/torch/rules/normalisation_backward.py``), against mpmath: rows up to 70 wide (the
kernel's vectorised sums), rows offset far from 0 (the gradient's cancellation), tiny rows
(underflow), gradients and values near float32's overflow threshold, with and without a
weight, each output alone or all three. The exact gradients and the values the kernel computed
lie in the enclosures, under rigorous and a posteriori tracking; the rule bounds them itself
(the decomposition is never asked)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.torch import decompose  # noqa: E402

from .programs import exact_to_float  # noqa: E402

mpmath.mp.dps = 60
aten = torch.ops.aten
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
EPS = 1e-5


def exact_gradients(
    dy: np.ndarray, x: np.ndarray, w: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dx, dw, db) of a layer norm over the last dimension, exactly (mpmath)."""
    rows, n = x.shape
    dx = np.empty((rows, n), dtype=object)
    hat = np.empty((rows, n), dtype=object)
    for i in range(rows):
        row = [mpmath.mpf(float(v)) for v in x[i]]
        mean = mpmath.fsum(row) / n
        var = mpmath.fsum((v - mean) ** 2 for v in row) / n
        rstd = 1 / mpmath.sqrt(var + mpmath.mpf(EPS))
        hat[i] = [(v - mean) * rstd for v in row]
        g = [mpmath.mpf(float(dy[i, j])) * (1 if w is None else float(w[j])) for j in range(n)]
        g_mean = mpmath.fsum(g) / n
        gh_mean = mpmath.fsum(a * b for a, b in zip(g, hat[i], strict=True)) / n
        dx[i] = [rstd * (gj - g_mean - h * gh_mean) for gj, h in zip(g, hat[i], strict=True)]
    dw = np.array(
        [
            mpmath.fsum(mpmath.mpf(float(dy[i, j])) * hat[i, j] for i in range(rows))
            for j in range(n)
        ],
        dtype=object,
    )
    db = np.array(
        [mpmath.fsum(mpmath.mpf(float(dy[i, j])) for i in range(rows)) for j in range(n)],
        dtype=object,
    )
    return dx, dw, db


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[str, torch.Tensor, torch.Tensor, torch.Tensor | None, list[bool]]:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    rows, n = draw(st.integers(1, 4)), draw(st.integers(1, 70))
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    scale = draw(st.sampled_from([1.0, 1e-3, 1e-20, 300.0, 1e18]))
    offset = draw(st.sampled_from([0.0, 0.0, 100.0, -3000.0]))
    x = (torch.randn(rows, n, generator=generator, dtype=torch.float64) * scale + offset).to(
        DTYPES[dtype]
    )
    dy = (
        torch.randn(rows, n, generator=generator, dtype=torch.float64)
        * draw(st.sampled_from([1.0, 1e-4, 50.0, 1e37]))
    ).to(DTYPES[dtype])
    weight = None
    if draw(st.booleans()):
        weight = (torch.randn(n, generator=generator, dtype=torch.float64) + 0.5).to(DTYPES[dtype])
    mask = draw(st.sampled_from([[True, True, True], [True, False, False], [False, True, True]]))
    if weight is None:
        mask = [True, False, False]
    return dtype, x, dy, weight, mask


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("the decomposition was asked: the rule refused")


@pytest.mark.parametrize("mode", ["rigorous", "a_posteriori"])
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=cases())
def test_exact_and_computed_gradients_lie_in_the_enclosures(
    case: tuple[str, torch.Tensor, torch.Tensor, torch.Tensor | None, list[bool]],
    mode: str,
) -> None:
    dtype, x, dy, weight, mask = case
    n = x.shape[-1]
    bias = None if weight is None else torch.zeros(n, dtype=x.dtype)
    # the rule itself for every output of float32, and for the input's gradient of every
    # format; the parameters' gradients of float16/bfloat16 in their kernel's thread blocks
    # are the decomposition's outside a posteriori tracking
    rule_only = dtype == "float32" or mode == "a_posteriori" or not (mask[1] or mask[2])
    with pytest.MonkeyPatch.context() as patch, fp.track(mode=mode, strict=True):
        # the statistics tracked too: their enclosures hold the exact mean and 1 / std
        _, mean, rstd = aten.native_layer_norm(x, [n], weight, bias, EPS)
        if rule_only:
            patch.setattr(decompose, "_replica_bounds", _refuse)
            outs = aten.native_layer_norm_backward(dy, x, [n], mean, rstd, weight, bias, mask)
        else:
            try:
                outs = aten.native_layer_norm_backward(dy, x, [n], mean, rstd, weight, bias, mask)
            except fp.UnsupportedOperation:
                # the decomposition found the kernel's value outside its enclosure (values
                # near overflow): refused, never wrongly bounded
                return
    exact = exact_gradients(dy.double().numpy(), x.double().numpy(), weight)
    for position, (out, value) in enumerate(zip(outs, exact, strict=True)):
        if not mask[position] or out is None:
            continue
        bounds = fp.bounds_of(out)
        assert bounds is not None
        computed = out.double().numpy()
        assert bounds.contains(out).all(), (position, computed, bounds.lo, bounds.hi)
        down, up = exact_to_float(value)
        whole = np.isneginf(bounds.lo) & np.isposinf(bounds.hi)
        inside = ((bounds.lo <= down) & (up <= bounds.hi)) | whole
        assert inside.all(), (position, down[~inside], bounds.lo[~inside], bounds.hi[~inside])


def test_the_rule_is_tight_on_a_well_conditioned_row() -> None:
    """What the rule could reject: on moderate float32 rows (statistics tracked from the
    forward kernel) the input's gradient is enclosed within some hundreds of unit round-offs
    of its magnitude, so a gradient off by 1e-4 relative (1 / std scaled wrongly) lies
    outside."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 64, generator=generator)
    dy = torch.randn(8, 64, generator=generator)
    with fp.track(strict=True):
        _, mean, rstd = aten.native_layer_norm(x, [64], None, None, EPS)
        dx, _, _ = aten.native_layer_norm_backward(
            dy, x, [64], mean, rstd, None, None, [True, False, False]
        )
    bounds = fp.bounds_of(dx)
    radius = (bounds.hi - bounds.lo) / 2
    assert np.median(radius / np.abs(dx.double().numpy())) < 1000 * 2.0**-24
    wrong = aten.native_layer_norm_backward(
        dy, x, [64], mean, rstd * (1 + 1e-4), None, None, [True, False, False]
    )[0]
    assert not bounds.contains(wrong).all()


def _rule_only_backward(*args: object) -> tuple[torch.Tensor, ...]:
    with pytest.MonkeyPatch.context() as patch, fp.track(strict=True):
        patch.setattr(decompose, "_replica_bounds", _refuse)
        return tuple(aten.native_layer_norm_backward(*args))


def test_products_that_overflow_while_their_sums_cancel_are_the_whole_line() -> None:
    """dy w = inf in the kernel, so db = inf - inf = NaN and every dx is NaN, while the sums'
    enclosures cancel to about 6e37: the row is the whole line (found in review)."""
    x = torch.tensor([[10.0, 10.0, -10.0, -10.0]])
    dy = torch.tensor([[3e38, -3e38, 3e38, -3e38]])
    w = torch.full((4,), 2.0)
    with fp.track(strict=True):
        _, mean, rstd = aten.native_layer_norm(x, [4], w, None, EPS)
    dx, _, _ = _rule_only_backward(dy, x, [4], mean, rstd, w, None, [True, False, False])
    assert dx.isnan().all()
    assert fp.bounds_of(dx).contains(dx).all()


def test_column_sums_whose_running_buffer_overflows_are_the_whole_line() -> None:
    """Rows of dy 3e38, 3e38, -3e38: the kernel's buffer reaches inf before the last row
    cancels it; the exact column sums are finite."""
    x = torch.tensor([[1.0, -1.0]] * 3)
    dy = torch.tensor([[3e38, 1.0], [3e38, 1.0], [-3e38, 1.0]])
    w, bias = torch.ones(2), torch.zeros(2)
    with fp.track(strict=True):
        _, mean, rstd = aten.native_layer_norm(x, [2], w, bias, EPS)
    _, dw, db = _rule_only_backward(dy, x, [2], mean, rstd, w, bias, [False, True, True])
    assert dw[0].isinf()
    assert db[0].isinf()
    for grad in (dw, db):
        bounds = fp.bounds_of(grad)
        assert bounds.contains(grad).all()
        assert np.isfinite(bounds.lo[1])
        assert np.isfinite(bounds.hi[1])


def test_weight_terms_whose_intermediates_overflow_are_the_whole_line() -> None:
    """rstd x and rstd mean overflow (1e20 times 1e19) while rstd (x - mean) is 0: the kernel
    computes dy (rstd x - rstd mean) = -inf; statistics given as plain tensors."""
    x = torch.full((1, 2), 1e19)
    dy = torch.ones(1, 2)
    mean, rstd = torch.full((1, 1), 1e19), torch.full((1, 1), 1e20)
    w, bias = torch.ones(2), torch.zeros(2)
    _, dw, _ = _rule_only_backward(dy, x, [2], mean, rstd, w, bias, [False, True, False])
    assert not dw.isfinite().all()
    assert fp.bounds_of(dw).contains(dw).all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("weighted", [False, True])
def test_a_gradient_along_the_input_whose_terms_cancel(dtype: str, weighted: bool) -> None:
    """dy = x / w (g = dy w = x, up to dy's rounding to bfloat16): the exact input gradient
    is a x-hat eps / (var + eps) plus what that rounding adds, far below its three terms
    a dy w, b x and c, which the kernel adds in float32 and which cancel: the kernel's value
    is its rounding of those terms (units of 2**-24 of them), not of the result. The
    enclosure holds it and the exact value: the kernel's roundings of the terms are in it,
    not only the result's."""
    generator = torch.Generator().manual_seed(3)
    torch_dtype = DTYPES[dtype]
    x = (torch.randn(6, 64, generator=generator) * 1000 + 50).to(torch_dtype)
    w = (torch.rand(64, generator=generator) + 0.5).to(torch_dtype) if weighted else None
    dy = (x.float() / w.float()).to(torch_dtype) if w is not None else x.clone()
    args = [dy, x, [64]]
    with fp.track(strict=True):
        _, mean, rstd = aten.native_layer_norm(x, [64], w, None, EPS)
    dx, _, _ = _rule_only_backward(*args, mean, rstd, w, None, [True, False, False])
    exact = exact_gradients(dy.double().numpy(), x.double().numpy(), w)[0]
    bounds = fp.bounds_of(dx)
    computed = dx.double().numpy()
    assert bounds.contains(dx).all(), (computed, bounds.lo, bounds.hi)
    down, up = exact_to_float(exact)
    assert ((bounds.lo <= down) & (up <= bounds.hi)).all()
    # the terms cancel: the result is far below them, and the kernel's value is off the exact
    terms = float(np.abs(rstd.double().numpy()).max() * np.abs(x.double().numpy()).max())
    assert np.abs(down).max() < terms * (2.0**-7 if weighted and dtype == "bfloat16" else 1e-6)
    assert not np.allclose(computed, down.astype(float), rtol=1e-3, atol=0)


def test_the_usual_elements_bound_holds_every_float32_evaluation_of_three_cancelling_terms() -> (
    None
):
    """``_input_grad_usual`` on point operands two of whose terms a dy w, b x and c cancel to
    far below them: float32 evaluations of ((a dy) w + b x) + c as the kernel forms them (each operation
    rounded, or the first product fused into its sum, or dy w first, or c added to b x first)
    lie in its enclosure, and its exact value too; the terms' own roundings are what the
    enclosure must hold (the result's one unit would not)."""
    import numba

    from pytest_fpcheck.interval.kernels import layer_norm_backward as lnb

    @numba.njit
    def bound(a, dy, w, b, x, c, big, tiny):  # type: ignore[no-untyped-def]
        return lnb._input_grad_usual(dy, dy, x, x, (w, w), (a, a, b, b, c, c, big, tiny))

    rng = np.random.default_rng(7)
    f32 = np.float32
    big, tiny = float(np.finfo(np.float32).max), 2.0**-149 * 8
    caught = 0
    for case in range(3000):
        a, dy, w, x = (
            float(f32(v)) for v in rng.standard_normal(4) * [1, 10, 1, 10] + [2, 0, 1, 0]
        )
        near = 1 + rng.standard_normal() * 2.0**-20
        small = float(f32(rng.standard_normal() * 2.0 ** rng.integers(-30, 0)))
        if case % 3 == 0:  # a dy w against b x, c small
            b, c = float(f32(-a * dy * w / x * near)), small
        elif case % 3 == 1:  # b x against c, a dy w small
            dy = small
            b = float(f32(rng.standard_normal()))
            c = float(f32(-b * x * near))
        else:  # a dy w against c
            b, c = small, float(f32(-a * dy * w * near))
        lo, hi, usual = bound(a, dy, w, b, x, c, big, tiny)
        if not usual:
            continue
        fa, fdy, fw, fb, fx, fc = (f32(v) for v in (a, dy, w, b, x, c))
        fused = f32(float(f32(fa * fdy)) * float(fw) + float(f32(fb * fx)))
        evaluations = [
            (f32(f32(fa * fdy) * fw) + f32(fb * fx)) + fc,
            fused + fc,
            (f32(fa * f32(fdy * fw)) + f32(fb * fx)) + fc,
            f32(f32(fa * fdy) * fw) + (f32(fb * fx) + fc),
        ]
        exact = mpmath.mpf(a) * dy * w + mpmath.mpf(b) * x + c
        assert lo <= float(exact) <= hi
        for value in evaluations:
            assert lo <= float(value) <= hi, (a, dy, w, b, x, c, value, lo, hi)
        caught += float(evaluations[0]) != float(f32(float(exact)))
    assert caught > 1000  # the evaluations' errors are the terms', not the result's
