"""Small models for the stochastic-arithmetic tests, importable by worker processes (a process
pool pickles them by reference to this module)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

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


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention (``heads`` heads, written out: projections,
    scaled scores, softmax, weighted values) and a GELU MLP, each added to the residual."""

    def __init__(self, width: int, heads: int, generator: torch.Generator) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(width)
        self.norm2 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)
        with torch.no_grad():
            for linear in (self.qkv, self.out, self.up, self.down):
                fan_in = linear.weight.shape[1]
                linear.weight.copy_(
                    torch.randn(linear.weight.shape, generator=generator) / fan_in**0.5
                )
                linear.bias.copy_(torch.randn(linear.bias.shape, generator=generator) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        shape = (batch, length, self.heads, width // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(width // self.heads)
        attention = scores.softmax(-1) @ v
        x = x + self.out(attention.transpose(1, 2).reshape(batch, length, width))
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


class Transformer(torch.nn.Module):
    """``depth`` blocks; ``bug`` scales the output of block ``bug_layer`` by ``1 + bug``."""

    def __init__(self, width: int = 32, heads: int = 4, depth: int = 4, *, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.blocks = torch.nn.ModuleList(Block(width, heads, generator) for _ in range(depth))
        self.bug = 0.0
        self.bug_layer = depth // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, block in enumerate(self.blocks):
            x = block(x)
            if index == self.bug_layer and self.bug:
                x = x * (1 + self.bug)
        return x


def run_in(model: torch.nn.Module) -> Callable[[torch.dtype, torch.Tensor], torch.Tensor]:
    """``run(dtype, x)``: ``model`` (copied once per dtype) on ``x`` converted to ``dtype``."""
    copies: dict[torch.dtype, torch.nn.Module] = {}

    def run(dtype: torch.dtype, x: torch.Tensor) -> torch.Tensor:
        if dtype not in copies:
            copies[dtype] = copy.deepcopy(model).to(dtype).requires_grad_(False)
        copies[dtype].bug = model.bug  # type: ignore[union-attr]
        return copies[dtype](x.to(dtype))  # type: ignore[no-any-return]

    return run


#: (module, draw(seed, offset) -> an input whose rows have mean ``offset``): normalisations with
#: weights in [0.5, 1.5] and biases in [-0.5, 0.5]; batch norm in evaluation, its running means
#: in [offset - 0.5, offset + 0.5] (outputs near 0 where an input is near its mean)
Normalisation = tuple[torch.nn.Module, Callable[[int, float], torch.Tensor]]


def _affine_parameters(module: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        module.weight.copy_(0.5 + torch.rand(module.weight.shape, generator=generator))
        module.bias.copy_(torch.rand(module.bias.shape, generator=generator) - 0.5)


def _input(*shape: int) -> Callable[[int, float], torch.Tensor]:
    def draw(seed: int, offset: float) -> torch.Tensor:
        return offset + torch.randn(*shape, generator=torch.Generator().manual_seed(100 + seed))

    return draw


def layer_norm(offset: float = 3.0) -> Normalisation:
    module = torch.nn.LayerNorm(64)
    _affine_parameters(module, 1)
    return module, _input(32, 64)


def group_norm(offset: float = 3.0) -> Normalisation:
    module = torch.nn.GroupNorm(4, 16)
    _affine_parameters(module, 2)
    return module, _input(8, 16, 5, 5)


def batch_norm(offset: float = 3.0) -> Normalisation:
    module = torch.nn.BatchNorm2d(16).eval()
    _affine_parameters(module, 3)
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        module.running_mean.copy_(offset - 0.5 + torch.rand(16, generator=generator))
        module.running_var.copy_(0.5 + 1.5 * torch.rand(16, generator=generator))
    return module, _input(8, 16, 5, 5)


def batch_norm_training(offset: float = 3.0) -> Normalisation:
    """Statistics of the batch, summed in double by ATen's CPU kernel for float32."""
    module = torch.nn.BatchNorm2d(16).train()
    _affine_parameters(module, 5)
    return module, _input(8, 16, 5, 5)


def batch_norm_channels_last(offset: float = 3.0) -> Normalisation:
    """Channels-last inputs: the kernel's other path, which sums in float32."""
    module, draw = batch_norm_training(offset)

    def channels_last(seed: int, offset: float) -> torch.Tensor:
        return draw(seed, offset).contiguous(memory_format=torch.channels_last)

    return module, channels_last


def batch_norm_1d(offset: float = 3.0) -> Normalisation:
    """``(N, C)`` inputs take the channels-last path too."""
    module = torch.nn.BatchNorm1d(16).train()
    _affine_parameters(module, 6)
    return module, _input(512, 16)


NORMALISATIONS: dict[str, Callable[[float], Normalisation]] = {
    "layer norm": layer_norm,
    "group norm": group_norm,
    "batch norm (evaluation)": batch_norm,
    "batch norm (training)": batch_norm_training,
    "batch norm (training, channels last)": batch_norm_channels_last,
    "batch norm 1d (training)": batch_norm_1d,
}
