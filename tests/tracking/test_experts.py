"""A mixture of experts' routing (``rules/experts.py``) against mpmath: ``histc``'s counts hold
the exact counts and the kernel's, on exact inputs at and beside the bins' edges and on inputs
known only to an enclosure; ``_grouped_mm``'s four layouts hold the exact products (60 digits)
and the kernel's values, with subnormal, overflowing and cancelling rows, in float32, bfloat16
and float16."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

mpmath.mp.dps = 60
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def exact_counts(values: np.ndarray, bins: int, low: float, high: float) -> np.ndarray:
    """histc in exact arithmetic: bin floor((x - min) bins / (max - min)), x == max in the
    last, x outside [min, max] (and NaN) in none."""
    counts = np.zeros(bins)
    for x in values.reshape(-1):
        if math.isnan(x) or not low <= x <= high:
            continue
        position = (mpmath.mpf(x) - low) * bins / (mpmath.mpf(high) - low)
        counts[min(int(mpmath.floor(position)), bins - 1)] += 1
    return counts


def edges_and_neighbours(dtype: torch.dtype, bins: int, low: float, high: float) -> torch.Tensor:
    edges = torch.linspace(low, high, bins + 1, dtype=torch.float64).to(dtype)
    below = torch.nextafter(edges, torch.tensor(-math.inf, dtype=dtype))
    above = torch.nextafter(edges, torch.tensor(math.inf, dtype=dtype))
    tiny = torch.tensor([torch.finfo(dtype).tiny / 4, -torch.finfo(dtype).tiny / 4, math.nan])
    return torch.cat([edges, below, above, tiny.to(dtype)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("bins", "low", "high"), [(4, 0.0, 3.0), (7, -1.0, 2.5), (3, 0.0, 1e-3)])
def test_histc_on_exact_inputs_at_and_beside_the_edges(
    dtype: torch.dtype, bins: int, low: float, high: float
) -> None:
    x = edges_and_neighbours(dtype, bins, low, high)
    with fp.track(strict=True):
        counts = torch.histc(x, bins, low, high)
    bounds = fp.bounds_of(counts)
    assert bounds.contains(counts).all()
    exact = exact_counts(x.double().numpy(), bins, low, high)
    assert ((bounds.lo <= exact) & (exact <= bounds.hi)).all(), (bounds.lo, bounds.hi, exact)
    assert bounds.lo.sum() <= exact.sum() <= bounds.hi.sum()


def test_histc_of_expert_numbers_is_exact() -> None:
    """Mixtral's routing: expert numbers 0..E-1 counted in E bins of [0, E-1]: exact counts,
    no enclosure wider than a point."""
    experts = torch.tensor([3, 0, 1, 1, 2, 3, 3, 0, 2, 1], dtype=torch.float32)
    with fp.track(strict=True):
        counts = torch.histc(experts, bins=4, min=0, max=3)
    bounds = fp.bounds_of(counts)
    assert bounds is None or (bounds.lo == bounds.hi).all()
    assert counts.tolist() == [2, 3, 2, 3]


@pytest.mark.parametrize("dtype", DTYPES)
def test_histc_of_values_known_to_an_enclosure(dtype: torch.dtype) -> None:
    """Values computed under tracking straddle the edges: each count is enclosed by the
    elements certainly and possibly in its bin, the kernel's count and the exact one (of the
    exact values the enclosures hold) inside."""
    torch.manual_seed(3)
    exact = torch.cat([torch.linspace(-0.2, 3.2, 61), torch.tensor([0.75, 1.5, 2.25, 3.0])])
    x = exact.to(dtype)
    with fp.track(strict=True):
        y = (x * 3.0) / 3.0  # the exact value x, inside an enclosure a few units wide
        counts = torch.histc(y, 4, 0, 3)
    bounds = fp.bounds_of(counts)
    assert bounds.contains(counts).all()
    truth = exact_counts(x.double().numpy(), 4, 0.0, 3.0)
    assert ((bounds.lo <= truth) & (truth <= bounds.hi)).all()
    assert (bounds.lo < bounds.hi).any()  # the edges are uncertain here


def test_histc_over_the_datas_own_range_is_refused_naming_it() -> None:
    with fp.track(strict=True), pytest.raises(fp.UnsupportedOperation, match="min == max"):
        torch.histc(torch.rand(8) * 2, bins=4)


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]), dtype=object)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = mpmath.fsum(
                mpmath.mpf(x) * mpmath.mpf(y) for x, y in zip(a[i], b[:, j], strict=True)
            )
    return out


def assert_encloses(bounds: fp.Bounds, exact: np.ndarray, index: tuple[object, ...]) -> None:
    lo, hi = bounds.lo[index], bounds.hi[index]
    assert lo.shape == exact.shape
    for position in np.ndindex(exact.shape):
        value = exact[position]
        assert mpmath.mpf(lo[position]) <= value <= mpmath.mpf(hi[position]), (
            position,
            lo[position],
            value,
            hi[position],
        )


def operand(dtype: torch.dtype, *shape: int, seed: int) -> torch.Tensor:
    """Normal entries, with a subnormal row, a row near the format's overflow and a pair of
    rows whose products cancel."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=generator, dtype=torch.float64)
    info = torch.finfo(dtype)
    flat = x.view(-1, shape[-1])
    flat[0] *= info.smallest_normal / 8
    flat[1] *= math.sqrt(info.max) / 2
    flat[3] = -flat[2]
    return x.to(dtype)


@pytest.mark.parametrize("jit_mode", ["", "eager"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_of_rows_per_expert(
    dtype: torch.dtype, jit_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2-d times 3-d: rows offs[g-1]:offs[g] times expert g's weights; rows past offs[-1] are
    never written (the whole line). ``FPCHECK_JIT=eager``: the compiled kernels, not their
    NumPy twins, bound the expert without rows (an empty product)."""
    monkeypatch.setenv("FPCHECK_JIT", jit_mode)
    a, b = operand(dtype, 12, 16, seed=0), operand(dtype, 3, 16, 8, seed=1)
    offs = torch.tensor([4, 4, 10], dtype=torch.int32)  # an expert without tokens
    with fp.track(strict=True):
        out = torch._grouped_mm(a, b, offs)
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()  # the rows never written hold anything, NaN too
    starts = [0, 4, 4]
    for g, (s, e) in enumerate(zip(starts, offs.tolist(), strict=True)):
        exact = exact_matmul(a[s:e].double().numpy(), b[g].double().numpy())
        assert_encloses(bounds, exact, (slice(s, e),))
    assert np.isneginf(bounds.lo[10:]).all()
    assert np.isposinf(bounds.hi[10:]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_of_the_weights_gradient_and_batched(dtype: torch.dtype) -> None:
    """2-d times 2-d (the shared dimension cut per expert: the weights' gradient), 3-d times
    2-d (columns per group) and 3-d times 3-d (one product per group)."""
    a, b = operand(dtype, 16, 12, seed=2), operand(dtype, 12, 8, seed=3)
    offs = torch.tensor([5, 5, 12], dtype=torch.int32)
    a3, b3 = operand(dtype, 3, 6, 16, seed=4), operand(dtype, 3, 16, 8, seed=5)
    wide = operand(dtype, 16, 24, seed=6)
    column_offs = torch.tensor([8, 16, 24], dtype=torch.int32)
    with fp.track(strict=True):
        per_group = torch._grouped_mm(a.t().contiguous().t(), b, offs)
        batched = torch._grouped_mm(a3, b3)
        columns = torch._grouped_mm(a3, wide, column_offs)
    bounds = fp.bounds_of(per_group)
    assert bounds.contains(per_group).all()
    for g, (s, e) in enumerate(zip([0, 5, 5], offs.tolist(), strict=True)):
        if e == s:
            assert (bounds.lo[g] == 0).all()
            assert (bounds.hi[g] == 0).all()
            continue
        exact = exact_matmul(a[:, s:e].double().numpy(), b[s:e].double().numpy())
        assert_encloses(bounds, exact, (g,))
    bounds = fp.bounds_of(batched)
    assert bounds.contains(batched).all()
    for g in range(3):
        assert_encloses(bounds, exact_matmul(a3[g].double().numpy(), b3[g].double().numpy()), (g,))
    bounds = fp.bounds_of(columns)
    assert bounds.contains(columns).all()
    for g, (s, e) in enumerate(zip([0, 8, 16], column_offs.tolist(), strict=True)):
        exact = exact_matmul(a3[g].double().numpy(), wide[:, s:e].double().numpy())
        assert_encloses(bounds, exact, (slice(None), slice(s, e)))
