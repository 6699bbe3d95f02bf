"""``nn.LSTM`` on the CPU (oneDNN's ``mkldnn_rnn_layer`` and its backward), bounded through the
step-by-step decompositions of tracking/torch/decompose.py: the values are those of an untracked
run, bit for bit, and a float64 evaluation of the same LSTM (its error is far below the
enclosures' radii) lies in every enclosure, with saturating gates (1 - tanh^2 cancels), tiny
inputs, both directions, two layers and either layout, in float32 and bfloat16 (a float16 LSTM
and a packed sequence run ATen's own cell, not oneDNN's kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

DTYPES = [torch.float32, torch.bfloat16]


def hard_inputs(dtype: torch.dtype, batch_first: bool) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, 4, generator=generator)
    x[:, 0] *= 30  # saturating gates
    x[0, 1] *= 1e-30 if dtype != torch.float16 else 1e-6  # tiny
    x = x.transpose(0, 1) if batch_first else x
    return x.to(dtype).requires_grad_()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("batch_first", "bidirectional", "layers"), [(True, False, 1), (False, True, 2)]
)
def test_lstm_forward_and_backward_are_enclosed(
    dtype: torch.dtype, batch_first: bool, bidirectional: bool, layers: int
) -> None:
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(
        4, 5, batch_first=batch_first, bidirectional=bidirectional, num_layers=layers
    ).to(dtype)
    x = hard_inputs(dtype, batch_first)
    parameters = [x, *lstm.parameters()]

    def run() -> tuple[torch.Tensor, ...]:
        y, (h, c) = lstm(x)
        loss = (y * torch.linspace(-1, 1, y.shape[-1], dtype=dtype)).sum() + h.sum() + c.sum()
        return (y, h, c, *torch.autograd.grad(loss, parameters))

    plain = run()
    with fp.track(strict=True):
        tracked = run()
    wide = torch.nn.LSTM(
        4, 5, batch_first=batch_first, bidirectional=bidirectional, num_layers=layers
    ).double()
    wide.load_state_dict({name: v.double() for name, v in lstm.state_dict().items()})
    xd = x.detach().double().requires_grad_()
    y, (h, c) = wide(xd)
    loss = (y * torch.linspace(-1, 1, y.shape[-1], dtype=torch.float64)).sum() + h.sum() + c.sum()
    reference = (y, h, c, *torch.autograd.grad(loss, [xd, *wide.parameters()]))
    for value, before, exact in zip(tracked, plain, reference, strict=True):
        assert torch.equal(value, before)
        bounds = fp.bounds_of(value)
        assert bounds.contains(value.detach()).all()
        assert bounds.contains(exact.detach()).all()
        assert np.isfinite(bounds.radius).all()
