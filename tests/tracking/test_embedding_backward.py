"""``aten.embedding_dense_backward``'s and ``aten.index_add``'s own rules and ``scatter_add``'s
(rules/scatter.py), proven against mpmath: the kernel's value and the exact sums lie in the enclosure, for gradients on each
format's grid (subnormals, values near overflow whose partial sums overflow, cancellation),
repeated indices and ``padding_idx``; and where a partial sum may overflow the element is the
whole line."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from .programs import assert_encloses, grid_values  # noqa: E402

aten = torch.ops.aten
GRIDS = {
    torch.float32: "float32",
    torch.bfloat16: "bfloat16",
    torch.float16: "float16",
    torch.float64: "float32",
}


@st.composite
def embedding_cases(draw: st.DrawFn):
    dtype = draw(st.sampled_from(sorted(GRIDS, key=str)))
    rows, width = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    num_weights = draw(st.integers(1, 5))
    indices = draw(st.lists(st.integers(0, num_weights - 1), min_size=rows, max_size=rows))
    padding = draw(st.sampled_from([-1, 0, num_weights - 1]))
    grad = draw(grid_values(GRIDS[dtype], (rows, width)))
    return dtype, np.array(indices), num_weights, padding, grad


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(embedding_cases())
def test_embedding_dense_backward_holds_the_kernel_and_the_exact_sums(case) -> None:
    dtype, indices, num_weights, padding, grad = case
    g = torch.tensor(grad).to(dtype)
    index = torch.tensor(indices)
    with fp.track(strict=True):
        out = aten.embedding_dense_backward(g, index, num_weights, padding, False)
    values = g.double().numpy()
    exact = np.full((num_weights, grad.shape[1]), mpmath.mpf(0), dtype=object)
    for k in range(num_weights):
        chosen = values[(indices == k) & (indices != padding)]
        exact[k] = [mpmath.fsum(mpmath.mpf(float(v)) for v in column) for column in chosen.T]
    bounds = fp.bounds_of(out)
    if bounds is None:  # nothing rounded: exact and untracked
        assert np.array_equal(out.double().numpy(), exact.astype(float))
        return
    assert_encloses(bounds, out, exact, case)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_partial_sum_that_may_overflow_gives_the_whole_line(dtype: torch.dtype) -> None:
    """Three terms of the format's largest magnitude, the last cancelling: the exact sum is
    finite and the kernel's is infinite (its first partial sum overflows). The element is the
    whole line for both scatters (a partial sum may overflow) (``scatter_add`` gave the exact sum's neighbours and missed
    the kernel's infinity)."""
    big = torch.finfo(dtype).max
    source = torch.tensor([big, big, -big], dtype=dtype)
    with fp.track(strict=True):
        terms = source * 1
        scattered = torch.zeros(1, dtype=dtype).scatter_add(0, torch.tensor([0, 0, 0]), terms)
        embedded = aten.embedding_dense_backward(
            terms.reshape(3, 1), torch.tensor([0, 0, 0]), 2, -1, False
        )
    # float16's scatter_add accumulates in float32 and rounds once: no infinity there
    assert torch.isinf(embedded[0, 0])
    assert torch.isinf(scattered[0]) or dtype == torch.float16
    for out in (scattered, embedded):
        bounds = fp.bounds_of(out)
        assert bounds is not None
        assert bounds.contains(out).all()
        assert np.isneginf(bounds.lo.reshape(-1)[0])
        assert np.isposinf(bounds.hi.reshape(-1)[0])


def test_an_embeddings_gradient_is_a_rule_and_tight() -> None:
    """No decomposition any more; over 512 tokens of a 64-word vocabulary the float32 rows'
    enclosures are within gamma_m of their sums' magnitudes (m the word's count)."""
    from pytest_fpcheck.interval.registry import lookup

    name = "aten.embedding_dense_backward"
    assert lookup(f"{name}.default", name) is not None
    torch.manual_seed(0)
    g = torch.randn(512, 8)
    index = torch.randint(0, 64, (512,))
    with fp.track(strict=True):
        out = aten.embedding_dense_backward(g, index, 64, -1, False)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out).all()
    counts = np.bincount(index.numpy(), minlength=64)[:, None]
    magnitude = np.zeros((64, 8))
    np.add.at(magnitude, index.numpy(), np.abs(g.numpy()))
    allowed = 2 * (counts + 1) * 2.0**-24 * magnitude + 2.0**-20 * np.abs(out.numpy())
    assert ((bounds.hi - bounds.lo) <= allowed).all()


@st.composite
def index_add_cases(draw: st.DrawFn):
    dtype = draw(st.sampled_from(sorted(GRIDS, key=str)))
    rows, sources, width = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    index = draw(st.lists(st.integers(0, rows - 1), min_size=sources, max_size=sources))
    target = draw(grid_values(GRIDS[dtype], (rows, width)))
    source = draw(grid_values(GRIDS[dtype], (sources, width)))
    return dtype, np.array(index), target, source, draw(st.booleans())


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(index_add_cases())
def test_index_add_holds_the_kernel_and_the_exact_sums(case) -> None:
    """``index_add`` (in place or not; it had no rule: a hunt through training code found it
    refused): each target row plus the source rows its index sends there."""
    dtype, index, target, source, in_place = case
    t, s = torch.tensor(target).to(dtype), torch.tensor(source).to(dtype)
    with fp.track(strict=True):
        base = t * 1
        out = (
            base.index_add_(0, torch.tensor(index), s)
            if in_place
            else base.index_add(0, torch.tensor(index), s)
        )
    tv, sv = t.double().numpy(), s.double().numpy()
    exact = np.empty(tv.shape, dtype=object)
    for k in range(tv.shape[0]):
        for j in range(tv.shape[1]):
            terms = [tv[k, j], *sv[index == k, j]]
            exact[k, j] = mpmath.fsum(mpmath.mpf(float(v)) for v in terms)
    bounds = fp.bounds_of(out)
    if bounds is None:
        assert np.array_equal(out.double().numpy(), exact.astype(float))
        return
    assert_encloses(bounds, out, exact, case)


def test_what_nothing_is_added_to_keeps_its_value_exactly() -> None:
    """A word no token uses has a gradient of exactly 0 (the kernel's zeros, no addition),
    and a target element no source reaches keeps the target's own enclosure: no rounding
    allowance there (the bound gave each a float32 unit either side), so a kernel that left
    anything else in them is outside."""
    torch.manual_seed(1)
    g = torch.randn(6, 4)
    index = torch.tensor([0, 2, 2, 5, 0, 2])
    with fp.track(strict=True):
        grad = aten.embedding_dense_backward(g * 1.5, index, 7, -1, False)
        target = torch.randn(7, 4) / 3
        added = target.index_add(0, index, g * 1.5)
    unused = [1, 3, 4, 6]
    bounds = fp.bounds_of(grad)
    assert bounds is not None
    assert (bounds.lo[unused] == 0).all()
    assert (bounds.hi[unused] == 0).all()
    assert bounds.contains(grad).all()
    assert (bounds.lo[[0, 2, 5]] < bounds.hi[[0, 2, 5]]).all()
    planted = grad.clone()
    planted[3, 1] = torch.finfo(torch.float32).smallest_normal
    assert not bounds.contains(planted).all()
    reached, kept = fp.bounds_of(added), fp.bounds_of(target)
    assert reached is not None
    assert kept is not None
    assert np.array_equal(reached.lo[unused], kept.lo[unused])
    assert np.array_equal(reached.hi[unused], kept.hi[unused])
    assert reached.contains(added).all()


def test_row_sums_refuses_an_index_outside_the_result() -> None:
    from pytest_fpcheck.interval.kernels import row_sums

    g = np.ones((3, 2))
    with pytest.raises(ValueError, match=r"rows: index 4 is outside \[0, 4\)"):
        row_sums(g, g, np.array([0, 4, 1]), -1, 4)
    with pytest.raises(ValueError, match=r"rows: index -2 is outside"):
        row_sums(g, g, np.array([0, -2, 1]), -1, 4)
    with pytest.raises(ValueError, match="rows: 2 indices for 3 rows"):
        row_sums(g, g, np.array([0, 1]), -1, 4)
    lo, _, _, count = row_sums(g, g, np.array([0, 4, 1]), 4, 4)  # the skipped index may be any
    assert count.reshape(-1).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert lo.sum() == 4.0


def test_accumulated_bounds_refuses_counts_of_another_shape() -> None:
    from pytest_fpcheck.formats import FORMATS
    from pytest_fpcheck.interval.kernels import accumulated_bounds

    ends = np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"count: shape \(2,\); \(3, 2\) or \(3, 1\)"):
        accumulated_bounds(ends, ends, ends, np.zeros(2), FORMATS["float32"])
