"""Scaled dot-product attention under tracking computes what a plain run computes (issue 17): the
fused CPU kernel's values, bit for bit, in every format; the math path's enclosure, recorded
beside them, contains the fused kernel's result (no element left without bounds) and the exact
attention (mpmath), with causal and explicit masks and grouped-query heads."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
pytest.importorskip("mpmath")
F = torch.nn.functional

from .test_attention_gqa import _mpmath_attention  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _operands(dtype: torch.dtype, seed: int, heads: int, groups: int, length: int):
    generator = torch.Generator().manual_seed(seed)
    q = (2 * torch.randn(2, heads, length, 8, generator=generator)).to(dtype)
    k = (2 * torch.randn(2, groups, length + 1, 8, generator=generator)).to(dtype)
    v = torch.randn(2, groups, length + 1, 8, generator=generator).to(dtype)
    return q, k, v


def _mpmath_masked(q, k, v, mask: np.ndarray) -> np.ndarray:
    """softmax(q k^T / sqrt(d) + mask) v in mpmath (an additive float mask, -inf or finite)."""
    import mpmath

    mpmath.mp.dps = 60
    batch, heads, length, depth = q.shape
    groups, source = k.shape[1], k.shape[2]
    out = np.empty((batch, heads, length, depth))
    for b in range(batch):
        for h in range(heads):
            g = h // (heads // groups)
            for i in range(length):
                keep = [j for j in range(source) if np.isfinite(mask[i, j])]
                scores = [
                    mpmath.fsum(mpmath.mpf(q[b, h, i, e]) * k[b, g, j, e] for e in range(depth))
                    / mpmath.sqrt(depth)
                    + mask[i, j]
                    for j in keep
                ]
                top = max(scores)
                weights = [mpmath.exp(s - top) for s in scores]
                total = mpmath.fsum(weights)
                for e in range(depth):
                    out[b, h, i, e] = float(
                        mpmath.fsum(w * v[b, g, j, e] for w, j in zip(weights, keep, strict=True))
                        / total
                    )
    return out


def _check(out: torch.Tensor, plain: torch.Tensor, exact: np.ndarray) -> None:
    assert torch.equal(out, plain)  # the fused kernel's values, bit for bit
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert np.isfinite(bounds.lo).all()
    assert np.isfinite(bounds.hi).all()  # no element of the kernel outside the enclosure
    assert not any("lie outside" in note for note in bounds.notes)
    assert bounds.contains(out).all()
    inside = bounds.contains(exact)
    assert inside.all(), np.argwhere(~inside)[:5]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("heads", "groups"), [(4, 4), (4, 2)], ids=["mha", "gqa"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_fused_kernel_computes_and_the_math_path_encloses(
    dtype: torch.dtype, causal: bool, heads: int, groups: int, seed: int
) -> None:
    q, k, v = _operands(dtype, seed, heads, groups, length=5)
    gqa = heads != groups
    plain = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    with fp.track(strict=True):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    exact = _mpmath_attention(*(t.double().numpy() for t in (q, k, v)), causal)
    _check(out, plain, exact)


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_explicit_mask_and_scale(dtype: torch.dtype) -> None:
    q, k, v = _operands(dtype, 2, 2, 2, length=4)
    keep = torch.rand(4, 5, generator=torch.Generator().manual_seed(3)) > 0.4
    keep[:, 0] = True
    mask = torch.zeros(4, 5).masked_fill(~keep, float("-inf")).to(dtype)
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=8**-0.5)
    with fp.track(strict=True):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=8**-0.5)
    exact = _mpmath_masked(*(t.double().numpy() for t in (q, k, v)), mask.double().numpy())
    _check(out, plain, exact)


def test_attention_with_dropout_draws_what_a_plain_run_draws() -> None:
    """With dropout ATen takes the math path on the CPU (the fused kernel refuses dropout): its
    dropout is an operation of its own, bounded with the mask it drew."""
    q, k, v = _operands(torch.float32, 4, 2, 2, length=4)
    torch.manual_seed(5)
    plain = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    state = torch.get_rng_state()
    torch.manual_seed(5)
    with fp.track(strict=True):
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    assert torch.equal(out, plain)
    assert torch.equal(torch.get_rng_state(), state)
    assert np.isfinite(fp.bounds_of(out).hi).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_weights_that_underflow_the_format_are_enclosed(dtype: torch.dtype) -> None:
    """Scores spread over tens of units: most weights exp(s - max) fall below the format's
    normal range (float16's subnormals start at 6e-5), where rounding is absolute, not
    relative."""
    q, k, v = _operands(dtype, 5, 2, 2, length=6)
    q = (q.float() * 6).to(dtype)
    plain = F.scaled_dot_product_attention(q, k, v)
    with fp.track(strict=True):
        out = F.scaled_dot_product_attention(q, k, v)
    exact = _mpmath_attention(*(t.double().numpy() for t in (q, k, v)), False)
    _check(out, plain, exact)
