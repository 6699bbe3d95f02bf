"""What the samples of one ``stochastic_bounds`` call share: functions of a model's parameters.

A model's parameters are the same in every randomly rounded run (only results are rounded), so
their float32 copies (the widening of bfloat16 and float16 operands) and the row norms of the
accumulation model are computed once per call, not once per sample and use: 16 copies of a
1024 x 1024 bfloat16 weight, and its norms, become one. Only parameters (``torch.nn.Parameter``)
and views of them, and the copies made of them here, are kept, keyed by the parameter's
identity, its version counter (an in-place change makes a new entry) and the view's geometry;
the entry holds the parameter, so the identity cannot be reused while it is kept. A write
through ``.data`` moves no version counter: an operation that writes into a parameter's memory
drops its entries (:meth:`Memo.forget`). Activations are never kept: the memo holds no more
than one copy of the parameters per purpose.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["Memo"]

_Key = tuple[object, ...]


class Memo:
    """Values computed from parameters, for the samples of one call (one thread at a time)."""

    def __init__(self) -> None:
        self._entries: dict[_Key, tuple[torch.Tensor, torch.Tensor]] = {}
        #: copies made here, by identity: views of them are keyed like views of parameters
        self._copies: dict[int, torch.Tensor] = {}
        #: the storages (by address) of the owners of the entries
        self._storages: set[int] = set()

    def forget(self, written: torch.Tensor) -> None:
        """Drop the entries of a parameter whose memory ``written`` shares (an operation wrote
        into it, perhaps through ``.data``, which keeps its own version counter)."""
        if written.is_sparse or written.layout != torch.strided:
            return
        address = written.untyped_storage().data_ptr()
        if address not in self._storages:
            return
        self._storages.discard(address)
        for key, (owner, _) in list(self._entries.items()):
            if owner.untyped_storage().data_ptr() == address:
                del self._entries[key]

    def _owner(self, t: torch.Tensor) -> torch.Tensor | None:
        base = t if t._base is None else t._base
        # issubclass: Parameter's isinstance goes through a metaclass hook, ten times slower
        if issubclass(type(base), torch.nn.Parameter) or self._copies.get(id(base)) is base:
            return None if base.is_inference() else base
        return None

    def get(
        self, purpose: str, t: torch.Tensor, compute: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """``compute(t)``, remembered under ``purpose`` when ``t`` is a parameter, a view of one,
        or a view of a copy this memo made (``purpose == "widened"`` registers its results as
        such copies)."""
        owner = self._owner(t)
        if owner is None:
            return compute(t)
        key = (purpose, id(owner), owner._version, t.storage_offset(), t.shape, t.stride(), t.dtype)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is owner:
            return entry[1]
        value = compute(t)
        self._entries[key] = (owner, value)
        self._storages.add(owner.untyped_storage().data_ptr())
        if purpose == "widened":
            self._copies[id(value)] = value
        return value
