"""Bounds that stay finite at a realistic width (issue 19): Hugging Face's GPT-2 and Llama at
width 256, one block, float32. Their enclosures are far too wide to judge anything (worst-case
propagation), but the loss and every gradient must stay bounded so that each backward rule does
its arithmetic on finite operands. They were the whole line through two rules that gave away
more than their own models allow: log-softmax's upper ends where the exponentials underflow
(GPT-2's logits are tens of thousands wide here), and an RMSNorm's mean of squares taken below 0
by its sum's allowance (Llama)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=512, n_positions=32, n_embd=256, n_layer=1, n_head=4
        )
        return transformers.GPT2LMHeadModel(config)
    config = transformers.LlamaConfig(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return transformers.LlamaForCausalLM(config)


def _finite(bounds: fp.Bounds | None) -> bool:
    assert bounds is not None
    return bool(np.isfinite(bounds.lo).all() and np.isfinite(bounds.hi).all())


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_wide_model_keeps_its_loss_and_gradients_bounded(name: str) -> None:
    model = _model(name)
    tokens = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(1))
    with fp.track():
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        loss_bounds = fp.bounds_of(loss)
        gradients = {n: fp.bounds_of(p.grad) for n, p in model.named_parameters()}
    assert _finite(loss_bounds)
    assert loss_bounds.contains(loss.detach().double().numpy()).all()
    unbounded = [n for n, b in gradients.items() if b is not None and not _finite(b)]
    assert not unbounded
    tracked = [n for n, b in gradients.items() if b is not None]
    assert len(tracked) >= len(gradients) // 2
