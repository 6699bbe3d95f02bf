"""Small models for the stochastic-arithmetic tests, importable by worker processes (a process
pool pickles them by reference to this module)."""

from __future__ import annotations

import torch


class MLP(torch.nn.Module):
    """``depth`` linear layers with GELU between them; ``bug`` scales the output of layer
    ``bug_layer`` by ``1 + bug`` (a planted error of relative size ``bug``)."""

    def __init__(self, width: int = 64, depth: int = 4, *, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        with torch.no_grad():
            for layer in self.layers:
                layer.weight.copy_(torch.randn(width, width, generator=generator) / width**0.5)
                layer.bias.copy_(torch.randn(width, generator=generator) * 0.1)
        self.bug = 0.0
        self.bug_layer = depth // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index == self.bug_layer and self.bug:
                x = x * (1 + self.bug)
            if index < len(self.layers) - 1:
                x = torch.nn.functional.gelu(x)
        return x


def mlp_in(dtype: torch.dtype, x: torch.Tensor, model: MLP) -> torch.Tensor:
    """``model`` run in ``dtype`` on ``x`` (a copy of the model converted to ``dtype``)."""
    copy = MLP(model.layers[0].in_features, len(model.layers))
    copy.load_state_dict(model.state_dict())
    copy.bug, copy.bug_layer = model.bug, model.bug_layer
    return copy.to(dtype)(x.to(dtype))
