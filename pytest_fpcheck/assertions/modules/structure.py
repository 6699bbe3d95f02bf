"""Walking what modules take and return: tensors nested in tuples, lists, dicts, dataclass
outputs (Hugging Face's ``ModelOutput``) and plain objects that hold tensors (a key/value cache).

The rules: containers are rebuilt with their own type; a dataclass is rebuilt from its fields;
any other object (a cache) is deep-copied and the tensors it holds, through its attributes and
the containers they hold, are replaced in the copy; modules, types and functions are passed on
as they are. Only floating tensors are judged (:func:`floating_leaves`): integer tensors, other
objects' tensors and non-tensor values are carried along unjudged.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["floating_leaves", "map_tensors"]

_DEPTH = 8  # how deep an object's attributes are searched for tensors


def _passed_on(value: Any) -> bool:
    return isinstance(value, (torch.nn.Module, type)) or callable(value)


def map_tensors(value: Any, leaf: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``value`` with every tensor ``t`` in it replaced by ``leaf(t)`` (module docstring)."""
    return _map(value, leaf, set(), 0)


def _map(
    value: Any, leaf: Callable[[torch.Tensor], torch.Tensor], seen: set[int], depth: int
) -> Any:
    if isinstance(value, torch.Tensor):
        return leaf(value)
    if isinstance(
        value, (str, bytes, int, float, complex, bool, type(None), torch.dtype, torch.device)
    ):
        return value
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_map(v, leaf, seen, depth) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, leaf, seen, depth) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: _map(getattr(value, f.name), leaf, seen, depth)
            for f in dataclasses.fields(value)
            if f.init
        }
        return type(value)(**fields)
    if isinstance(value, dict):
        return type(value)((k, _map(v, leaf, seen, depth)) for k, v in value.items())
    if _passed_on(value) or depth > _DEPTH:
        return value
    copied = copy.copy(value)
    attributes = getattr(copied, "__dict__", None)
    if isinstance(attributes, dict) and id(value) not in seen:
        seen.add(id(value))
        for name, item in list(attributes.items()):
            attributes[name] = _map(item, leaf, seen, depth + 1)
    return copied


def floating_leaves(value: Any, label: str) -> list[tuple[str, torch.Tensor]]:
    """The floating tensors in ``value`` with their labels (``output[0]``,
    ``output.last_hidden_state``, ``kwargs['hidden_states']``), in a fixed order. Objects that
    are not containers or dataclasses are not searched (a cache is state, not a result)."""
    if isinstance(value, torch.Tensor):
        return [(label, value)] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [pair for i, v in enumerate(value) for pair in floating_leaves(v, f"{label}[{i}]")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            pair
            for f in dataclasses.fields(value)
            for pair in floating_leaves(getattr(value, f.name), f"{label}.{f.name}")
        ]
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in floating_leaves(v, f"{label}[{k!r}]")]
    return []
