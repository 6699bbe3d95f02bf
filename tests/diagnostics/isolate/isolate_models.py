"""Generated float32 models with planted precision culprits, for the isolation tests and the
benchmark: dozens to hundreds of correct sites (``x * w + b`` in nested modules), and culprits
of two kinds: a round trip through bfloat16 (one site: the narrowing cast) and a cancellation
``(x + 1e5) - 1e5`` (two sites that only resolve the inconsistency together)."""

from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass

import torch

#: the tolerance the planted culprits exceed 5 to 20 times and the correct sites stay 100 times
#: below
TOL = 1e-4


class Affine(torch.nn.Module):
    def __init__(self, width: int, generator: torch.Generator) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(1 + 0.01 * torch.randn(width, generator=generator))
        self.b = torch.nn.Parameter(0.01 * torch.randn(width, generator=generator))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w + self.b


class RoundTrip(torch.nn.Module):
    """A stray round trip through bfloat16 (the reference, in float64, has none)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            return x
        return x.to(torch.bfloat16).to(x.dtype)


class Cancel(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + 1e5) - 1e5


@dataclass(frozen=True)
class Planted:
    model: torch.nn.Module
    x: torch.Tensor
    #: (module path, op) of every culprit site
    culprits: frozenset[tuple[str, str]]
    sites: int

    def reference(self) -> torch.Tensor:
        """The model's result computed in float64 (no bfloat16 round trip)."""
        exact = copy.deepcopy(self.model).double()
        return exact(self.x.double())

    def budget(self) -> int:
        k, n = len(self.culprits), self.sites
        return 2 * k * math.ceil(math.log2(n)) + 2 * k + 2


def planted_model(sites: int, casts: int, cancels: int, seed: int, width: int = 8) -> Planted:
    """A model of about ``sites`` operation sites (two per Affine layer, in groups of up to 6
    layers) with ``casts`` bfloat16 round trips and ``cancels`` cancellations at random places."""
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    layers = (sites - casts - 2 * cancels) // 2
    kinds = ["affine"] * layers + ["cast"] * casts + ["cancel"] * cancels
    rng.shuffle(kinds)
    groups: list[torch.nn.Sequential] = []
    culprits: set[tuple[str, str]] = set()
    current: list[torch.nn.Module] = []
    for kind in kinds:
        if len(current) == rng.randint(3, 6):
            groups.append(torch.nn.Sequential(*current))
            current = []
        path = f"Sequential.{len(groups)}.{len(current)}"
        if kind == "affine":
            current.append(Affine(width, generator))
        elif kind == "cast":
            current.append(RoundTrip())
            culprits.add((path, "aten._to_copy"))
        else:
            current.append(Cancel())
            culprits |= {(path, "aten.add"), (path, "aten.sub")}
    groups.append(torch.nn.Sequential(*current))
    model = torch.nn.Sequential(*groups)
    x = torch.rand(width, generator=generator) + 0.5
    count = 2 * layers + casts + 2 * cancels
    return Planted(model.requires_grad_(False), x, frozenset(culprits), count)
