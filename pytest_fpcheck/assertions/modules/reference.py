"""The reference run of a module comparison: one plain run of the reference model with forward
hooks on every module (RENDER section III-C: the layers' inputs and outputs, recorded once).

Each module call is recorded in execution order (the order calls begin) with its path, its
class, the call that made it (its *parent*: the innermost module call running when it began),
copies of its positional and keyword inputs taken before it runs and of its output taken when
it returns (so that in-place changes made later, a residual ``x += ...`` or a cache update, do
not reach the record). A tensor handed on unchanged (the same object, not written since: its
version counter) is copied once: calls that shared a tensor in the run share one copy in the
record (the query, key and value projections of one hidden state; a layer's output and the
next layer's input), as they shared it in the run, and their replays can share its cast. The
run bypasses every tracking mode: the reference is not tracked. With ``inner=False`` (a
comparison of leaf modules only) the calls that have children are recorded without their
inputs and outputs, which nothing replays.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...adapters.torch import internal
from .structure import map_tensors

__all__ = ["RecordedCall", "record_calls"]


@dataclass
class RecordedCall:
    """One module call of the reference run (module docstring). ``occurrence`` counts the
    calls of the same path before this one; ``frame`` lists the indices of the calls made
    directly inside this one, in order."""

    index: int
    path: str
    module_class: str
    occurrence: int
    parent: int | None
    depth: int
    leaf: bool
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: Any = None
    frame: list[int] = field(default_factory=list)


def _copier() -> Callable[[torch.Tensor], torch.Tensor]:
    """A copy of each tensor value (module docstring): the same object at the same version
    gives the copy made before. The run's tensors are held weakly (a dead tensor's id may be
    reused by another, which the weak reference tells apart)."""
    copies: dict[int, tuple[weakref.ref[torch.Tensor], int, torch.Tensor]] = {}

    def copy_of(t: torch.Tensor) -> torch.Tensor:
        kept = copies.get(id(t))
        if kept is not None and kept[0]() is t and kept[1] == t._version:
            return kept[2]
        copied = t.detach().clone()
        copies[id(t)] = (weakref.ref(t), t._version, copied)
        return copied

    return copy_of


def record_calls(
    model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], *, inner: bool = True
) -> list[RecordedCall]:
    """Run ``model(*args, **kwargs)`` once, untracked and without gradients, and return its
    module calls (``inner``: module docstring)."""
    calls: list[RecordedCall] = []
    stack: list[RecordedCall] = []
    seen: Counter[str] = Counter()
    handles = []
    copy_of = _copier()

    def hooks(path: str, module: torch.nn.Module) -> None:
        leaf = next(iter(module.children()), None) is None
        kept = leaf or inner

        def before(_: torch.nn.Module, a: tuple[Any, ...], k: dict[str, Any]) -> None:
            parent = stack[-1] if stack else None
            call = RecordedCall(
                index=len(calls),
                path=path,
                module_class=type(module).__name__,
                occurrence=seen[path],
                parent=parent.index if parent is not None else None,
                depth=len(stack),
                leaf=leaf,
                args=map_tensors(a, copy_of) if kept else (),
                kwargs=map_tensors(k, copy_of) if kept else {},
            )
            seen[path] += 1
            if parent is not None:
                parent.frame.append(call.index)
            calls.append(call)
            stack.append(call)

        def after(_: torch.nn.Module, a: tuple[Any, ...], k: dict[str, Any], output: Any) -> None:
            call = stack.pop()
            if kept:
                call.output = map_tensors(output, copy_of)

        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True, always_call=True))

    for path, module in model.named_modules():
        hooks(path, module)
    try:
        with torch.no_grad(), internal():
            model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return calls
