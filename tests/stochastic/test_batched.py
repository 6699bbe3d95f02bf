"""The samples of a call run together as one batch (pytest_fpcheck/stochastic/batched.py): the
same samples, bit for bit, as the samples run one at a time; and what a batch cannot run falls
back to one sample at a time, without having changed anything."""

from __future__ import annotations

import concurrent.futures
import copy
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from pytest_fpcheck.stochastic import run as run_module  # noqa: E402
from pytest_fpcheck.stochastic.batched import Unbatchable  # noqa: E402
from pytest_fpcheck.stochastic.memo import Memo  # noqa: E402
from pytest_fpcheck.stochastic.rounding import BatchRandom, Pools, SampleRandom  # noqa: E402
from pytest_fpcheck.stochastic.run import sample, sample_batch, stochastic_bounds  # noqa: E402

from .models import MLP, Transformer, mlp_in, run_in  # noqa: E402


def _alone(fn: Callable[..., Any], args: tuple[Any, ...], seed: int, count: int) -> list[Any]:
    return [sample(fn, args, {}, seed, index, count, Memo()) for index in range(count)]


def _assert_identical(batch: list[Any], alone: list[Any]) -> None:
    assert len(batch) == len(alone)
    for index, (b, a) in enumerate(zip(batch, alone, strict=True)):
        assert b.structure == a.structure
        assert b.dtypes == a.dtypes
        assert b.ops == a.ops
        assert b.formats == a.formats
        assert b.overflowed == a.overflowed, index
        for got, expected in zip(b.values, a.values, strict=True):
            assert got.shape == expected.shape
            # bit for bit, NaNs in the same places
            assert np.array_equal(got, expected, equal_nan=True), (
                index,
                int((got != expected).sum()),
            )


def test_take_gives_each_row_what_its_sample_draws_alone() -> None:
    """Every kind of pool, stratified or not, with a count that divides no modulus (12)."""
    like = torch.empty(12, 5, 7)
    batch = BatchRandom(Pools.shared(), 31, 12)
    alone = [SampleRandom(Pools.shared(), 31, index, 12) for index in range(12)]
    for kind in ("uniform", "bits16", "normal", "bits13", "step", "bits29", "uniform"):
        rows = batch.take(kind, like)
        assert rows.shape == like.shape
        for index, draw in enumerate(alone):
            assert torch.equal(rows[index], draw.take(kind, like[0])), (kind, index)
    # one row's own rounding (a float16 subnormal only it has) moves it apart from the others
    assert torch.equal(
        batch.row(4).take("uniform", like[0, 0]), alone[4].take("uniform", like[0, 0])
    )
    for kind in ("bits16", "uniform", "normal"):
        rows = batch.take(kind, like)
        for index, draw in enumerate(alone):
            assert torch.equal(rows[index], draw.take(kind, like[0])), (kind, index)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("count", [16, 5])
def test_a_batch_gives_the_samples_run_alone_bit_for_bit_on_an_mlp(
    dtype: torch.dtype, count: int
) -> None:
    run = run_in(MLP(width=64, depth=4))
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        run(dtype, x)  # the model's copy in dtype, made once outside the runs
        batch = sample_batch(run, (dtype, x), {}, 11, count, Memo())
        alone = _alone(run, (dtype, x), 11, count)
    _assert_identical(batch, alone)
    assert np.std([b.values[0] for b in batch], axis=0).max() > 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_batch_gives_the_samples_run_alone_bit_for_bit_on_a_transformer(
    dtype: torch.dtype,
) -> None:
    """Attention (products of two batches, softmax, reshapes and transposes), layer norms,
    with gradients enabled (the parameters require them: no backward pass runs)."""
    model = Transformer(width=32, heads=4, depth=2)
    run = run_in(model)
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(3))
    run(dtype, x)
    batch = sample_batch(run, (dtype, x), {}, 5, 16, Memo())
    _assert_identical(batch, _alone(run, (dtype, x), 5, 16))


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> Any:
    """Scaled dot-product attention as models call it in evaluation (the fused CPU kernel,
    tagged as drawing random numbers for its dropout, here 0): causal, masked, and grouped
    (two key/value heads for four query heads), in bfloat16 and in float32."""
    h = q.to(torch.bfloat16)
    causal = F.scaled_dot_product_attention(
        h, k.to(torch.bfloat16), v.to(torch.bfloat16), is_causal=True
    )
    masked = F.scaled_dot_product_attention(q * 1.25, k, v, attn_mask=mask)
    grouped = F.scaled_dot_product_attention(
        h, k[:, :2].to(torch.bfloat16), v[:, :2].to(torch.bfloat16), enable_gqa=True
    )
    dropped = F.dropout(masked, p=0.5, training=False)  # evaluation: draws nothing
    return causal.float() + grouped.float(), dropped


def test_a_batch_gives_the_samples_run_alone_bit_for_bit_through_fused_attention(
    caplog: pytest.LogCaptureFixture,
) -> None:
    generator = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 4, 24, 16, generator=generator) for _ in range(3))
    mask = torch.randn(24, 24, generator=generator) > -1
    args = (q, k, v, mask)
    batch = sample_batch(_attention, args, {}, 3, 16, Memo())
    _assert_identical(batch, _alone(_attention, args, 3, 16))
    assert np.std([b.values[0] for b in batch], axis=0).max() > 0
    # and a call runs it as one batch
    with caplog.at_level(logging.DEBUG, logger="pytest_fpcheck.stochastic"):
        stochastic_bounds(_attention, *args, samples=4, seed=1)
    assert "one at a time" not in caplog.text


def _mixed(t: torch.Tensor, weight: torch.Tensor, buffer: torch.Tensor) -> tuple[Any, ...]:
    """Conversions of batches and of shared values, in-place operations on batches, a write
    of a batch into a batch made like it, exact operations, float16 subnormals only some samples
    reach, an integer result and one no rounding reaches."""
    h = t.to(torch.bfloat16)  # a batch from here on
    w = weight.to(torch.bfloat16)  # a shared value rounded: a batch too
    y = (h @ w.T).float()
    y.mul_(1.5).add_(0.25)
    fresh = torch.zeros_like(y[:3])
    fresh[1].copy_(y[0])
    tiny = (h[0].float() * 6.1e-5).to(torch.float16)  # near float16's smallest normal
    counts = (y > 0).sum(dim=0)
    scaled = buffer * 2  # shared, exact: no rounding
    return y.exp().sum(-1), fresh.relu() + 1, tiny.float().exp(), counts.float(), scaled


def test_a_batch_gives_the_samples_run_alone_on_mixed_operations() -> None:
    t = 1 + torch.rand(4, 16, generator=torch.Generator().manual_seed(4)) / 64
    weight = torch.randn(16, 16, generator=torch.Generator().manual_seed(5))
    buffer = torch.arange(4.0)
    args = (t, weight, buffer)
    batch = sample_batch(_mixed, args, {}, 9, 16, Memo())
    _assert_identical(batch, _alone(_mixed, args, 9, 16))
    assert torch.equal(buffer, torch.arange(4.0))  # read, never written
    # some samples rounded a value into float16's subnormals and others did not
    tiny = np.stack([b.values[2] for b in batch])
    assert (tiny.std(axis=0) > 0).any()


def test_each_sample_of_a_batch_keeps_its_own_overflow() -> None:
    """65504 (float16's largest) times a number that rounds up in some samples only."""

    def near(v: torch.Tensor) -> torch.Tensor:
        return v.to(torch.float16) * torch.tensor(1.0, dtype=torch.float16) * 1.0004

    x = torch.full((8,), 65504.0 * 0.9998)
    batch = sample_batch(near, (x,), {}, 3, 16, Memo())
    alone = _alone(near, (x,), 3, 16)
    _assert_identical(batch, alone)
    flags = [b.overflowed for b in batch]
    assert any(flag is not None for flag in flags)


def _with_item(t: torch.Tensor) -> torch.Tensor:
    y = t.exp()
    if y.sum().item() > 0:  # data-dependent control flow
        return y * 3
    return y


def _with_dropout(t: torch.Tensor) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)  # the same mask in every run
    mask = torch.rand(t.shape, generator=generator) < 0.5
    return t.exp() * mask


def _with_training_dropout(t: torch.Tensor) -> torch.Tensor:
    with torch.random.fork_rng():
        torch.manual_seed(0)  # the same mask in every run
        return F.dropout(t.exp(), 0.5, training=True)


def _with_backward(t: torch.Tensor) -> torch.Tensor:
    w = torch.ones(t.shape[-1], requires_grad=True)
    (t.exp() * w).sum().backward()
    assert w.grad is not None
    return w.grad


CAPTURED = torch.zeros(4, 8)


def _into_captured(t: torch.Tensor) -> torch.Tensor:
    CAPTURED.copy_(t.exp())  # a value that differs between samples into a shared tensor
    return CAPTURED * 2


MODULE = torch.nn.Linear(8, 8)


def _converting_a_module(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return copy.deepcopy(MODULE).to(torch.bfloat16)(t.to(torch.bfloat16))


REFUSED = {
    "item": (_with_item, "vmap"),
    "dropout": (_with_dropout, "draws random numbers"),
    "training dropout": (_with_training_dropout, "draws random numbers"),
    "backward": (_with_backward, "a backward pass"),
    "captured": (_into_captured, "into a tensor they share"),
    "module": (_converting_a_module, "parameters converted in place"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_a_batch_cannot_run_runs_one_sample_at_a_time(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    fn, reason = REFUSED[name]
    x = torch.linspace(-1, 1, 32).reshape(4, 8)
    CAPTURED.zero_()
    with pytest.raises(Exception, match=reason):
        sample_batch(fn, (x,), {}, 2, 8, Memo())
    # refused before it wrote anything shared
    assert torch.equal(CAPTURED, torch.zeros(4, 8))
    with caplog.at_level(logging.DEBUG, logger="pytest_fpcheck.stochastic"):
        bounds = stochastic_bounds(fn, x, samples=8, seed=2)
    assert "samples run one at a time" in caplog.text
    assert reason in caplog.text
    alone = _alone(fn, (x,), 2, 8)
    values = np.stack([a.values[0] for a in alone])
    assert np.array_equal(bounds.estimate.mean, values.mean(axis=0))
    assert np.array_equal(bounds.estimate.std, values.std(axis=0, ddof=1))


def test_an_error_of_fn_is_raised_by_the_samples_run_alone() -> None:
    def broken(t: torch.Tensor) -> torch.Tensor:
        raise ValueError("fn's own error")

    with pytest.raises(ValueError, match="fn's own error"):
        stochastic_bounds(broken, torch.ones(3), samples=4, seed=1)


def test_a_call_runs_its_samples_as_one_batch_when_it_can(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = run_module.sample

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(run_module, "sample", counted)
    run, x = run_in(MLP()), torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    run(torch.bfloat16, x)  # the model in bfloat16, made outside (no random draws inside)
    with caplog.at_level(logging.DEBUG, logger="pytest_fpcheck.stochastic"):
        stochastic_bounds(run, torch.bfloat16, x, samples=8, seed=3)
    assert calls == []
    assert "one at a time" not in caplog.text


def test_an_executor_runs_the_samples_alone_and_gets_the_batchs_samples() -> None:
    model, x = MLP(), torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    here = stochastic_bounds(mlp_in, torch.float16, x, model, samples=6, seed=8)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        there = stochastic_bounds(mlp_in, torch.float16, x, model, samples=6, seed=8, executor=pool)
    assert np.array_equal(here.estimate.mean, there.estimate.mean)
    assert np.array_equal(here.lo, there.lo)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_batch_gives_the_samples_run_alone_bit_for_bit_on_hugging_face_llama(
    dtype: torch.dtype,
) -> None:
    """Real code: Hugging Face's Llama (rotary embeddings, grouped-query attention through the
    fused attention kernel, RMSNorm, SwiGLU) from a small config, in evaluation."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=32,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.LlamaForCausalLM(config).eval().to(dtype)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))

    def run() -> torch.Tensor:
        with torch.no_grad():
            return model(ids).logits

    batch = sample_batch(run, (), {}, 4, 8, Memo())
    _assert_identical(batch, _alone(run, (), 4, 8))
    assert np.std([b.values[0] for b in batch], axis=0).max() > 0


@pytest.mark.parametrize("threshold", [1, 300])
def test_operations_run_row_by_row_give_the_same_samples(
    threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large operations run sample by sample inside the batch (``batched.ROW_BY_ROW``): every
    operation so (1), or a mixture of both roads (300 elements a sample), bit for bit."""
    from pytest_fpcheck.stochastic import batched

    monkeypatch.setattr(batched, "ROW_BY_ROW", threshold)
    t = 1 + torch.rand(4, 16, generator=torch.Generator().manual_seed(4)) / 64
    weight = torch.randn(16, 16, generator=torch.Generator().manual_seed(5))
    args = (t, weight, torch.arange(4.0))
    _assert_identical(sample_batch(_mixed, args, {}, 9, 16, Memo()), _alone(_mixed, args, 9, 16))
    model = Transformer(width=32, heads=4, depth=1)
    run = run_in(model)
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(3))
    run(torch.bfloat16, x)
    batch = sample_batch(run, (torch.bfloat16, x), {}, 5, 8, Memo())
    _assert_identical(batch, _alone(run, (torch.bfloat16, x), 5, 8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_batch_gives_the_samples_run_alone_on_a_row_longer_than_a_threads_share(
    dtype: torch.dtype,
) -> None:
    """A product of one row of 40,000 (a sum whose result is one element: PyTorch splits it
    among threads, so the accumulation term's norms must not be such a sum, or a sample's
    norm and the batch's are added in different orders). Terms in pairs of opposite signs:
    the product is near 0 and its samples are the accumulation term itself, whose last bit
    then shows."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        generator = torch.Generator().manual_seed(5)
        weight = torch.ones(40_000, 1, dtype=dtype)
        for _ in range(6):
            half = torch.randn(1, 20_000, generator=generator, dtype=dtype)
            x = torch.cat([half, -half], dim=1)

            def fn(x: torch.Tensor) -> torch.Tensor:
                return (x * 1.5) @ weight

            with torch.no_grad():
                batch = sample_batch(fn, (x,), {}, 5, 4, Memo())
                alone = _alone(fn, (x,), 5, 4)
            _assert_identical(batch, alone)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batched", [False, True])
def test_comparisons_and_other_exact_results_are_the_plain_runs(
    dtype: torch.dtype, batched: bool
) -> None:
    """A comparison with a Python float is made in the operand's own format, as in a plain
    run (made on float64 copies, ``x == 0.1`` on float32 compares with the double 0.1), and
    a result a sample makes stays an ordinary tensor (a bfloat16 one can be resized)."""
    x = torch.tensor([0.1, 0.2, 0.3], dtype=dtype)

    def fn(x: torch.Tensor, resize: bool = True) -> torch.Tensor:
        y = (x * 1.0).to(torch.bfloat16)
        if resize:
            y.resize_(6)  # storage of its own, resizable
        return (x == 0.1).float() + (x > 0.1).float() * 10 + 0 * y[:3].float()

    expected = fn(x)
    if batched:
        # a batch cannot resize its rows (each sample's values would shift into the next):
        # it refuses, and the call runs its samples one at a time
        with pytest.raises(Unbatchable, match=r"aten\.resize"):
            sample_batch(fn, (x,), {}, 3, 4, Memo())
        runs = sample_batch(fn, (x, False), {}, 3, 4, Memo())
    else:
        runs = _alone(fn, (x,), 3, 4)
    for run in runs:
        assert run.values[0].tolist() == expected.tolist()
