"""The model zoo (issue 19): small configurations with random weights, no downloads, each a
builder returning ``(model, batch, loss_fn)`` so that tests and benchmarks run the same code.

Hugging Face ``transformers`` models (GPT-2, Llama with grouped-query attention and rotary
embeddings, BERT, T5, ViT, Mixtral as the mixture of experts) and three written here: a
ResNet-18-style network and a ConvNeXt block (convolutions, batch norm, pooling; torchvision's
wheels do not load with the CPU build of torch the tests pin) and a nanoGPT-style model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["MODELS", "SCALABLE", "build", "loss_of", "scaled"]

Batch = dict[str, torch.Tensor]
Builder = Callable[[], tuple[nn.Module, Batch]]

SEQ, BATCH, VOCAB = 8, 2, 64


def _tokens(generator: torch.Generator) -> Batch:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    return {"input_ids": ids, "labels": ids.clone()}


# --- written here ---------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with batch norm, a projected shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet-18's layout (stem, four stages of two basic blocks, pooling, a classifier) at
    tiny widths."""

    def __init__(self, width: int = 4, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        layers, cin = [], width
        for stage, stride in enumerate((1, 2, 2, 2)):
            cout = width * 2**stage
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(pixel_values))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ConvNeXtBlock(nn.Module):
    """ConvNeXt's block: a 7x7 depth-wise convolution, layer norm, an inverted MLP with GELU,
    layer scale and the residual; then average pooling and a classifier."""

    def __init__(self, dim: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 2, 2)
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))
        self.pool = nn.AvgPool2d(2)
        self.head = nn.Linear(dim, classes)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.stem(pixel_values)
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.gamma * self.down(F.gelu(self.up(self.norm(y))))
        x = self.pool(x + y.permute(0, 3, 1, 2))
        return self.head(x.mean((2, 3)))


class NanoGPT(nn.Module):
    """nanoGPT's model at a tiny size: token and position embeddings, pre-norm blocks of causal
    self-attention (scaled_dot_product_attention) and a GELU MLP, tied output weights."""

    def __init__(self, vocab: int = VOCAB, dim: int = 16, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(SEQ, dim)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                {
                    "ln_1": nn.LayerNorm(dim),
                    "attn": nn.Linear(dim, 3 * dim),
                    "proj": nn.Linear(dim, dim),
                    "ln_2": nn.LayerNorm(dim),
                    "fc": nn.Linear(dim, 4 * dim),
                    "out": nn.Linear(4 * dim, dim),
                }
            )
            for _ in range(layers)
        )
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        b, t = input_ids.shape
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))
        for block in self.blocks:
            q, k, v = block["attn"](block["ln_1"](x)).split(x.shape[-1], dim=2)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + block["proj"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + block["out"](F.gelu(block["fc"](block["ln_2"](x))))
        return self.lm_head(self.ln_f(x))


def _images(generator: torch.Generator, size: int = 16) -> Batch:
    return {
        "pixel_values": torch.randn(BATCH, 3, size, size, generator=generator),
        "labels": torch.randint(0, 5, (BATCH,), generator=generator),
    }


# --- transformers ---------------------------------------------------------------------------

_SMALL = {"hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2}


def _gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=16, n_layer=2, n_head=2)
    return GPT2LMHeadModel(config)


def _llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        intermediate_size=32,
        num_key_value_heads=1,
        max_position_embeddings=SEQ,
        **{**_SMALL, "num_attention_heads": 2},
    )
    return LlamaForCausalLM(config)


def _bert() -> nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=VOCAB, intermediate_size=32, max_position_embeddings=SEQ, **_SMALL
    )
    return BertForMaskedLM(config)


def _t5() -> nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=VOCAB,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        decoder_start_token_id=0,
    )
    return T5ForConditionalGeneration(config)


def _vit() -> nn.Module:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=16, patch_size=8, num_channels=3, intermediate_size=32, num_labels=5, **_SMALL
    )
    return ViTForImageClassification(config)


def _mixtral() -> nn.Module:
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(
        vocab_size=VOCAB,
        intermediate_size=16,
        num_key_value_heads=1,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=SEQ,
        **_SMALL,
    )
    return MixtralForCausalLM(config)


#: name -> (model constructor, batch maker, whether the model computes its own loss)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[torch.Generator], Batch], bool]] = {
    "resnet": (ResNet, _images, False),
    "convnext": (ConvNeXtBlock, _images, False),
    "nanogpt": (NanoGPT, _tokens, False),
    "gpt2": (_gpt2, _tokens, True),
    "llama": (_llama, _tokens, True),
    "bert": (_bert, _tokens, True),
    "t5": (_t5, _tokens, True),
    "vit": (_vit, _images, True),
    "mixtral": (_mixtral, _tokens, True),
}


def build(name: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> tuple[nn.Module, Batch]:
    """The model ``name`` with seeded random weights in ``dtype``, and a seeded batch."""
    make, batch_of, _ = MODELS[name]
    torch.manual_seed(seed)
    model = make()
    if hasattr(model, "config"):
        model.config._attn_implementation = "sdpa"
    model = model.to(dtype)
    batch = batch_of(torch.Generator().manual_seed(seed))
    if "pixel_values" in batch:
        batch["pixel_values"] = batch["pixel_values"].to(dtype)
    return model, batch


def loss_of(name: str, model: nn.Module, batch: Batch) -> torch.Tensor:
    """The model's training loss on ``batch`` (cross-entropy)."""
    _, _, own_loss = MODELS[name]
    if own_loss:
        out: Any = model(**batch)
        return out.loss
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs)
    if logits.dim() == 3:
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())
    return F.cross_entropy(logits, batch["labels"])


#: the models :func:`scaled` widens
SCALABLE = ("nanogpt", "gpt2", "llama", "bert")


def scaled(
    name: str, *, hidden: int, seq: int, batch: int, layers: int, vocab: int
) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """The zoo model ``name`` at a realistic size: width ``hidden`` (heads of 64, MLPs four
    times as wide), ``layers`` blocks, ``batch`` sequences of ``seq`` tokens from ``vocab``;
    seeded random weights and tokens."""
    torch.manual_seed(0)
    heads = max(hidden // 64, 1)
    model: nn.Module
    if name == "nanogpt":
        nano = NanoGPT(vocab=vocab, dim=hidden, heads=heads, layers=layers)
        nano.wpe = nn.Embedding(seq, hidden)  # the zoo's is sized for its own 8 tokens
        for module in nano.modules():  # nanoGPT's initialisation: with PyTorch's N(0, 1)
            # embeddings the tied logits grow with the width, the softmax saturates and the
            # gradients are subnormal (a benchmark of the FPU's microcode assists)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        model = nano
    elif name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=vocab, n_positions=seq, n_embd=hidden, n_layer=layers, n_head=heads
            )
        )
    elif name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=vocab,
                hidden_size=hidden,
                intermediate_size=4 * hidden,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                num_key_value_heads=max(heads // 2, 1),
                max_position_embeddings=seq,
            )
        )
    elif name == "bert":
        from transformers import BertConfig, BertForMaskedLM

        model = BertForMaskedLM(
            BertConfig(
                vocab_size=vocab,
                hidden_size=hidden,
                num_hidden_layers=layers,
                num_attention_heads=heads,
                intermediate_size=4 * hidden,
                max_position_embeddings=seq,
            )
        )
    else:
        raise ValueError(f"name={name!r}: scaled widens {', '.join(SCALABLE)}")
    if hasattr(model, "config"):
        model.config._attn_implementation = "sdpa"
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "labels": ids.clone()}
