"""The array adapters: ``as_float64`` gives an exact float64 copy, whatever the tensor's format,
layout or autograd state (a verdict may write into what it gets, the caller's tensor never
changes)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_fpcheck.adapters import as_float64

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(12, dtype=torch.float64).reshape(3, 4) / 7,  # no conversion needed
        lambda: (torch.arange(12, dtype=torch.float64).reshape(4, 3) / 7).t(),  # a view
        lambda: torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7,
        lambda: torch.arange(12, dtype=torch.bfloat16).reshape(3, 4) / 7,
        lambda: (torch.arange(12, dtype=torch.float64) / 7).requires_grad_(),
        lambda: torch.tensor(1 / 7, dtype=torch.float64),  # 0-d
    ],
    ids=["float64", "float64-view", "float32", "bfloat16", "requires-grad", "0-d"],
)
def test_as_float64_is_an_exact_copy(make) -> None:
    tensor = make()
    before = tensor.detach().clone()
    array = as_float64(tensor, argument="actual")
    assert array.dtype == np.float64
    assert array.shape == tuple(tensor.shape)
    assert np.array_equal(array, before.double().numpy())  # exactly the values
    array[...] = 99.0
    assert torch.equal(tensor.detach(), before)  # the tensor did not change
