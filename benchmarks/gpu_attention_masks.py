"""Stochastic bounds of attention with a boolean mask on a GPU, for the device machine a session
may be lent (docs/gpu.md, "Stochastic bounds on CUDA"). CI never has a GPU.

In a stochastic run, attention off the CPU runs ATen's math path (stochastic/attention.py),
which adds its mask to the scores: a boolean mask must be made additive first. For bfloat16 and
float16, ``--seeds`` seeds each, a random boolean mask and a causal one: the verdict on the
exact attention of the same (rounded) operands, which must be round-off.

Run (on the device machine): ``python benchmarks/gpu_attention_masks.py [--device cuda]``;
``--device cpu`` runs it here (the CPU keeps its fused kernel in stochastic runs).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest_fpcheck as fp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seeds", type=int, default=10)
    options = parser.parse_args()
    verdicts: Counter[tuple[str, str, str]] = Counter()
    for dtype in (torch.bfloat16, torch.float16):
        for seed in range(options.seeds):
            generator = torch.Generator().manual_seed(seed)
            q, k, v = (
                torch.randn(2, 4, 33, 16, generator=generator, dtype=torch.float64)
                for _ in range(3)
            )
            keep = torch.rand(33, 33, generator=generator) > 0.4
            keep[:, 0] = True  # no row masked whole
            for mask, causal in ((keep, False), (None, True)):

                def attend(
                    q: torch.Tensor,
                    k: torch.Tensor,
                    v: torch.Tensor,
                    mask: torch.Tensor | None = mask,
                    causal: bool = causal,
                ) -> torch.Tensor:
                    m = None if mask is None else mask.to(q.device)
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)

                operands = [t.to(dtype).to(options.device) for t in (q, k, v)]
                bounds = fp.stochastic_bounds(attend, *operands, samples=16, seed=seed)
                exact = attend(*(t.to(dtype).double() for t in (q, k, v)))
                kind = fp.classify(attend(*operands).cpu(), exact, bounds=bounds).kind
                what = "boolean mask" if mask is not None else "causal"
                verdicts[(str(dtype).removeprefix("torch."), what, kind)] += 1
    for key, count in sorted(verdicts.items()):
        print(*key, count)


if __name__ == "__main__":
    main()
