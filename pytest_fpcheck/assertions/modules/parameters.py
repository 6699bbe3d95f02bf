"""Parameters the custom model stores rounded: the reference's weights cast to a narrower format
are seeded with the cast's enclosure, like the inputs (RENDER section III-C-1: a layer is
judged from the reference's values, so that only its own code is judged).

A model under test is often a copy of the reference in a narrower format (a bfloat16 model made
from a float32 one). Its weights then differ from the reference's by the rounding of that copy,
which no operation of the module made: judged as exact values, the rounding of an ``x * w + b``
or of a normalisation's scale falls outside an enclosure that hugs the module's own rounding,
and a correct module is called a bug. The rule, for each floating parameter and buffer of
``custom`` with one of the same name and shape in ``reference``:

* its elements equal to the reference's value cast to the custom tensor's dtype the way replay
  casts inputs (:func:`.replay.cast_to`: ``Tensor.to``, round to nearest, a format's extreme
  finite values standing for the custom format's) are seeded with the enclosure tracking gives
  that cast (the same rule, ``aten._to_copy``, that bounds the inputs): it holds the reference's
  value and the rounded one;
* other elements (a weight that differs by more than its rounding: a bug in the weights, or a
  copy rounded another way) stay exact values, so that their difference still counts;
* a tensor the cast leaves unchanged (the reference holds the custom values, e.g.
  ``reference=torch.float64``), and one that tracking already holds bounds for (it was computed
  under tracking), are left as they are.

The seeds are written into the bounds store for the comparison and removed afterwards: after
:func:`seeded` the parameters are exact values again, as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

from ...adapters.torch import tensor_to_float64
from ...interval.bounds import Provenance
from ...interval.core import Interval
from ...tracking.core.store import STORE
from ...tracking.track import bounds_of, track
from .replay import cast_to

__all__ = ["rounded_parameters", "seeded"]


def _named_floating(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The floating parameters and buffers by qualified name, each tensor once under its
    first name (as ``named_parameters`` and ``named_buffers`` give them), in one walk of the
    modules."""
    named: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for path, child in module.named_modules():
        prefix = f"{path}." if path else ""
        for members in (child._parameters, child._buffers):
            for name, t in members.items():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    if t.is_floating_point():
                        named[prefix + name] = t
    return named


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _rounded_copy(mine: torch.Tensor, theirs: torch.Tensor) -> bool:
    """Whether ``theirs`` (the reference's) is not held exactly by ``mine``'s dtype, so that
    ``mine`` may be its rounded copy (a cheap, untracked test first)."""
    if mine.shape != theirs.shape or mine.dtype == theirs.dtype:
        return False
    there = theirs.detach().to(mine.device)
    if torch.equal(mine.detach().to(torch.float64), there.to(torch.float64)):
        return False  # the same values: nothing was rounded (a reference=torch.float64 copy)
    back = cast_to(mine.dtype)(there).to(there.dtype)
    return not torch.equal(back, there)


def rounded_parameters(
    custom: torch.nn.Module, reference: torch.nn.Module
) -> dict[str, tuple[torch.Tensor, Interval, Provenance]]:
    """The parameters and buffers of ``custom`` to seed (module docstring), by name: the tensor,
    its enclosure (the cast's where it is the reference's rounded copy, its own value elsewhere)
    and where the width came from."""
    theirs = _named_floating(reference)
    with torch.no_grad():
        pairs = [
            (name, mine, theirs[name])
            for name, mine in _named_floating(custom).items()
            if name in theirs and _rounded_copy(mine, theirs[name]) and not STORE.has_record(mine)
        ]
    seeds: dict[str, tuple[torch.Tensor, Interval, Provenance]] = {}
    if not pairs:
        return seeds
    with torch.no_grad(), track():
        casts = [
            (name, mine, other, cast_to(mine.dtype)(other.detach().to(mine.device)))
            for name, mine, other in pairs
        ]
    for name, mine, other, cast in casts:
        bounds = bounds_of(cast)
        same = (cast == mine.detach()).cpu().numpy()
        if bounds is None or not same.any():
            continue
        value = tensor_to_float64(mine.detach(), argument=name)
        lo = np.where(same, bounds.lo, value)
        hi = np.where(same, bounds.hi, value)
        widening = float(np.max(hi - lo, initial=0.0)) / 2
        site = (
            f"parameter {name}: the reference's {_name(other.dtype)} value stored in "
            f"{_name(mine.dtype)}"
        )
        seeds[name] = (mine, Interval(lo, hi), Provenance(((site, widening),)))
    return seeds


@contextlib.contextmanager
def seeded(custom: torch.nn.Module, reference: torch.nn.Module) -> Iterator[tuple[str, ...]]:
    """Seed ``custom``'s rounded parameters (:func:`rounded_parameters`) for the ``with`` block
    and forget them after it; yields the names seeded."""
    seeds = rounded_parameters(custom, reference)
    try:
        for name, (tensor, interval, provenance) in seeds.items():
            STORE.write(
                tensor.detach(),
                interval,
                provenance=provenance,
                mode="rigorous",
                notes=(f"{name}: the reference's value rounded to {_name(tensor.dtype)}",),
            )
        yield tuple(seeds)
    finally:
        for tensor, _, _ in seeds.values():
            STORE.forget(tensor.detach())
