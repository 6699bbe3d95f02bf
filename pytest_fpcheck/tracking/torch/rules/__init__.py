"""The PyTorch rules, one module per family, each registering its rules with one decorator per
operation (:func:`._common.rule`): ``indexing`` (rearrangements, order-preserving selections,
points), ``comparisons``, ``elementwise`` (casts, arithmetic, library functions), ``composite``,
``reductions``, ``softmax``, ``normalisation``, ``linalg`` (matrix products, convolutions) and
``losses``.

Importing this package registers every family: each public module here is imported, so a new
family (backward rules, optimizer updates, ...) is a new module in this folder and nothing else.
Modules whose names start with ``_`` hold shared helpers and register nothing.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _family in pkgutil.iter_modules(__path__):
    if not _family.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_family.name}")
