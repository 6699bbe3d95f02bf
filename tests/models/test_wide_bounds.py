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
pytest.importorskip("transformers")

from .zoo import loss_of, scaled  # noqa: E402


def _finite(bounds: fp.Bounds | None) -> bool:
    assert bounds is not None
    return bool(np.isfinite(bounds.lo).all() and np.isfinite(bounds.hi).all())


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_a_wide_model_keeps_its_loss_and_gradients_bounded(name: str) -> None:
    model, batch = scaled(name, hidden=256, seq=32, batch=2, layers=1, vocab=512)
    with fp.track():
        loss = loss_of(name, model, batch)
        loss.backward()
        loss_bounds = fp.bounds_of(loss)
        gradients = {n: fp.bounds_of(p.grad) for n, p in model.named_parameters()}
    assert _finite(loss_bounds)
    assert loss_bounds.contains(loss.detach().double().numpy()).all()
    unbounded = [n for n, b in gradients.items() if b is not None and not _finite(b)]
    assert not unbounded
    tracked = [n for n, b in gradients.items() if b is not None]
    assert len(tracked) >= len(gradients) // 2
