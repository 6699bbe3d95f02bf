"""A Triton kernel (interpreted) inside stochastic_bounds runs as it is: its values are those of a
plain launch (the interpreter's host copies and ``set_`` are storage operations, not roundings);
the operations around it are rounded at random."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from pytest_fpcheck.stochastic.run import stochastic_bounds  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="Triton kernels run on the CPU interpreted"
)


@triton.jit
def affine_exp(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask)
    tl.store(out_ptr + i, tl.exp(x) * 1.1 + 0.3, mask=mask)


def launch(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    affine_exp[(1,)](x, out, x.numel(), BLOCK=64)
    return out


def test_a_kernel_runs_as_it_is_and_the_operations_around_it_are_rounded() -> None:
    x = torch.randn(50, generator=torch.Generator().manual_seed(0))
    kernel = stochastic_bounds(launch, x, samples=4, seed=1)
    assert np.array_equal(kernel.estimate.mean, launch(x).double().numpy())
    assert np.all(kernel.estimate.std == 0)
    around = stochastic_bounds(lambda t: launch(t) * 1.7 + 1, x, samples=8, seed=1)
    expected = (launch(x).double() * 1.7 + 1).numpy()
    assert np.all(around.contains(expected))
    assert np.any(around.estimate.std > 0)
