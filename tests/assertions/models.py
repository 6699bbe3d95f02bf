"""Small models for the module-by-module checks (issue 20), built from code and configs (random
weights, nothing downloaded), and the bugs planted in them.

``nanogpt(...)`` is a nanoGPT-style decoder written here; ``gpt2``, ``llama`` and ``bert`` are
tiny Hugging Face models built from configs (2 layers, width 64). :func:`pair` makes the model
under test and its reference: the same weights, the reference in float64. Each ``plant_*``
function plants one bug in the model under test and returns the path of the module whose own
code now holds it (where ``first_bug`` must point).
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WIDTH, HEADS, LAYERS, VOCAB, SEQUENCE = 64, 4, 2, 96, 16


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int = WIDTH, heads: int = HEADS) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.scale_bug = False  # 1/d instead of 1/sqrt(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        scale = 1.0 / d if self.scale_bug else 1.0 / math.sqrt(d)
        scores = (q @ k.transpose(-2, -1)) * scale
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        weights = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, width: int = WIDTH) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width: int = WIDTH, heads: int = HEADS) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)
        self.residual_bug = False  # the attention's residual dropped

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attended = self.attn(self.ln_1(x))
        x = attended if self.residual_bug else x + attended
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    def __init__(
        self, vocab: int = VOCAB, width: int = WIDTH, heads: int = HEADS, layers: int = LAYERS
    ) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(64, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def nanogpt(seed: int = 0, **sizes: int) -> NanoGPT:
    torch.manual_seed(seed)
    return NanoGPT(**sizes).eval()


def gpt2(seed: int = 0) -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(seed)
    config = GPT2Config(
        n_embd=WIDTH,
        n_layer=LAYERS,
        n_head=HEADS,
        vocab_size=VOCAB,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    return GPT2Model(config).eval()


def llama(seed: int = 0) -> nn.Module:
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(seed)
    # grouped-query attention: two key/value heads for four query heads
    config = LlamaConfig(
        hidden_size=WIDTH,
        intermediate_size=2 * WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    return LlamaModel(config).eval()


def bert(seed: int = 0) -> nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(
        hidden_size=WIDTH,
        intermediate_size=2 * WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )
    return BertModel(config).eval()


MODELS: dict[str, Callable[..., nn.Module]] = {
    "nanogpt": nanogpt,
    "gpt2": gpt2,
    "llama": llama,
    "bert": bert,
}


def tokens(seed: int = 0, batch: int = 2, length: int = SEQUENCE) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (batch, length), generator=generator)


def pair(model: nn.Module, dtype: torch.dtype) -> tuple[nn.Module, nn.Module]:
    """(model under test in ``dtype``, its reference): the same weights (the ones rounded to
    ``dtype``), the reference in float64."""
    custom = copy.deepcopy(model).to(dtype).eval()
    return custom, copy.deepcopy(custom).double().eval()


def plant_relative_error(model: nn.Module, path: str, relative: float) -> str:
    """Make the module at ``path`` return its output (the first of a tuple, the first field of
    a ``ModelOutput``) times ``1 + relative`` (its own code: the error is inside that module)."""
    module = model.get_submodule(path)
    forward = type(module).forward

    def scaled(*args: object, **kwargs: object) -> object:
        out = forward(module, *args, **kwargs)
        if isinstance(out, tuple):  # (hidden states, attention weights, ...): the first
            return (out[0] * (1 + relative), *out[1:])
        if isinstance(out, dict):  # a Hugging Face ModelOutput (an OrderedDict): its first field
            first = next(iter(out))
            out[first] = out[first] * (1 + relative)
            return out
        return out * (1 + relative)

    module.forward = scaled  # type: ignore[method-assign]
    return path


def plant_layer_norm_eps(model: nn.Module, path: str, eps: float = 0.1) -> str:
    """A normalisation with eps 0.1 (LayerNorm's ``eps``, an RMSNorm's ``variance_epsilon``)."""
    module = model.get_submodule(path)
    name = "eps" if hasattr(module, "eps") else "variance_epsilon"
    setattr(module, name, eps)
    return path


def plant_attention_scale(model: nn.Module, path: str) -> str:
    """Attention scores scaled by 1/d instead of 1/sqrt(d) (the Hugging Face attentions keep
    the scale in ``scaling``)."""
    module = model.get_submodule(path)
    if isinstance(module, CausalSelfAttention):
        module.scale_bug = True
    else:
        module.scaling = module.scaling**2
    return path


def plant_dropped_residual(model: NanoGPT, block: int = 0) -> str:
    """nanoGPT: the attention's residual connection dropped in one block."""
    model.h[block].residual_bug = True
    return f"h.{block}"
