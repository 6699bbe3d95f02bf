"""Grouped-query attention under tracking (issue 19): ``F.scaled_dot_product_attention(q, k, v,
enable_gqa=True)`` with fewer key/value heads than query heads reaches the fused CPU kernel with
the key/value heads as they are; the attention substitute repeats them as ATen does
(``repeat_interleave`` along the head dimension)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")
F = torch.nn.functional

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _inputs(dtype: torch.dtype, heads: int = 4, groups: int = 2) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    q = (2 * torch.randn(1, heads, 5, 4)).to(dtype)
    k = (2 * torch.randn(1, groups, 6, 4)).to(dtype)
    v = torch.randn(1, groups, 6, 4).to(dtype)
    return q, k, v


def _mpmath_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v with query head h reading key/value head h // (H / G), in
    mpmath at 60 digits (the exact result for these inputs, to far below any radius)."""
    mpmath.mp.dps = 60
    batch, heads, length, depth = q.shape
    groups, source = k.shape[1], k.shape[2]
    scale = 1 / mpmath.sqrt(depth)
    out = np.empty((batch, heads, length, depth))
    for b in range(batch):
        for h in range(heads):
            g = h // (heads // groups)
            for i in range(length):
                keep = [j for j in range(source) if not causal or j <= i]
                scores = [
                    mpmath.fsum(mpmath.mpf(q[b, h, i, e]) * k[b, g, j, e] for e in range(depth))
                    * scale
                    for j in keep
                ]
                top = max(scores)
                weights = [mpmath.exp(s - top) for s in scores]
                total = mpmath.fsum(weights)
                for e in range(depth):
                    value = mpmath.fsum(
                        w * v[b, g, j, e] for w, j in zip(weights, keep, strict=True)
                    )
                    out[b, h, i, e] = float(value / total)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_grouped_query_attention_is_enclosed_against_mpmath(
    dtype: torch.dtype, causal: bool
) -> None:
    q, k, v = _inputs(dtype)
    with fp.track(strict=True):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert out.shape == q.shape
    assert bounds.contains(out).all()
    exact = _mpmath_attention(*(t.double().numpy() for t in (q, k, v)), causal)
    inside = bounds.contains(exact)
    assert inside.all(), np.argwhere(~inside)[:5]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("heads", "groups"), [(4, 2), (6, 3), (4, 1)])
def test_grouped_query_attention_matches_repeated_heads_bit_for_bit(
    dtype: torch.dtype, heads: int, groups: int
) -> None:
    """ATen's grouped heads are repeat_interleave's layout (the plain runs agree bit for bit),
    and the tracked grouped run gives the tracked repeated run's values and bounds exactly."""
    q, k, v = _inputs(dtype, heads, groups)
    repeated = (k.repeat_interleave(heads // groups, 1), v.repeat_interleave(heads // groups, 1))
    plain = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert torch.equal(plain, F.scaled_dot_product_attention(q, *repeated))
    with fp.track(strict=True):
        grouped = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        reference = F.scaled_dot_product_attention(q, *repeated)
    assert torch.equal(grouped, reference)
    ours, theirs = fp.bounds_of(grouped), fp.bounds_of(reference)
    assert np.array_equal(ours.lo, theirs.lo)
    assert np.array_equal(ours.hi, theirs.hi)
