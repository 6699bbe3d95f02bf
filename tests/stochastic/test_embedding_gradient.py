"""An embedding's gradient adds each token's gradient rows into its row of the weight's, one
after another (``embedding_dense_backward``): an accumulation, with the sequential model's
term per row (pytest_fpcheck/stochastic/accumulation.py). Before, it was computed wider and
rounded once: with 512 tokens over 10 rows, the estimated spread was 0.33 of the actual
error's and the plain gradient lay outside its interval at 81 of 3,200 elements (20 seeds)."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402


def _gradient(embedding: Any, ids: Any, dy: Any) -> Any:
    embedding = copy.deepcopy(embedding)
    embedding(ids).backward(dy)
    return embedding.weight.grad


@pytest.mark.parametrize("by_frequency", [False, True])
def test_an_embeddings_gradient_carries_its_accumulation(by_frequency: bool) -> None:
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(10, 16, scale_grad_by_freq=by_frequency)
    ratios = []
    for seed in range(6):
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 10, (512,), generator=generator)
        dy = 1 + torch.randn(512, 16, generator=generator)
        plain = _gradient(embedding, ids, dy)
        expected = _gradient(copy.deepcopy(embedding).double(), ids, dy.double())
        bounds = fp.stochastic_bounds(_gradient, embedding, ids, dy, seed=seed)
        values = plain.double().numpy()
        assert ((values >= bounds.lo) & (values <= bounds.hi)).all(), seed
        assert fp.classify(plain, expected, bounds=bounds).kind == "roundoff", seed
        error = math.sqrt(float(np.mean(np.square(values - expected.numpy()))))
        ratios.append(math.sqrt(float(np.mean(np.square(bounds.estimate.std)))) / error)
    assert 1.0 <= float(np.median(ratios)) <= 2.0, ratios
