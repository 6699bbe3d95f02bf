"""How wide the loss's enclosure of a training step is, by tracking mode (issue 19, issue 20).

The zoo's token models (nanoGPT, GPT-2, Llama, BERT) at ``--hidden`` width (``tests/models/zoo.py``'s
``scaled``: heads of 64, MLPs four times as wide, random weights), in training mode, float32: the
forward pass and ``loss.backward()`` under ``fp.track(mode=...)`` for each mode; printed: the
loss, its enclosure, its relative radius, and the median relative radius of the first
parameter gradient that has bounds. Where the loss's enclosure is the whole line, so is every
gradient's.

Run: ``python benchmarks/bench_loss_bounds.py --hidden 64 [--models nanogpt,bert] [--seq 32]
[--batch 2] [--modes rigorous,a_posteriori]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


import pytest_fpcheck as fp  # noqa: E402
from tests.models.zoo import SCALABLE, loss_of, scaled  # noqa: E402


def relative_radius(bounds: fp.Bounds) -> float:
    """Median over the elements of radius / |value| (infinite where unbounded)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = bounds.radius / np.abs(bounds.value)
    return float(np.median(np.where(np.isnan(relative), np.inf, relative)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SCALABLE))
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--modes", default="rigorous,a_posteriori")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    print(
        f"# hidden {args.hidden}, {args.layers} layers, seq {args.seq}, batch {args.batch}, "
        f"vocab {args.vocab}, float32, training mode"
    )
    print(
        f"{'model':8s} {'mode':13s} {'loss':>9s}  enclosure                  loss rel.  grad rel."
    )
    sizes = {key: getattr(args, key) for key in ("hidden", "seq", "batch", "layers", "vocab")}
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            model, batch = scaled(name, **sizes)
            model.train()
            with fp.track(mode=mode):
                loss = loss_of(name, model, batch)
                bounds = fp.bounds_of(loss)
                loss.backward()
            assert bounds is not None
            gradient = next(
                g
                for g in (fp.bounds_of(p.grad) for p in model.parameters() if p.grad is not None)
                if g is not None
            )
            enclosure = f"[{bounds.lo.item():.6g}, {bounds.hi.item():.6g}]"
            print(
                f"{name:8s} {mode:13s} {loss.item():9.5f}  {enclosure:25s} "
                f"{relative_radius(bounds):9.3g}  {relative_radius(gradient):9.3g}",
                flush=True,
            )


if __name__ == "__main__":
    main()
