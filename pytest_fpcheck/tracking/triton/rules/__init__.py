"""Interval rules for the operations of Triton's interpreter builder (RENDER sections III-B,
IV-A-2), one module per family, each registering its rules in :data:`RULES` with one decorator
per operation (:func:`.base.rule`): ``arithmetic`` (correctly rounded and approximate
element-wise operations), ``comparisons`` (and ``where``), ``casts``, ``movement`` (exact data
movement, integer arithmetic) and ``dot``.

Each rule receives a :class:`KernelOp` (the builder method's name, its argument handles and the
handle the interpreter computed) and attaches the result's enclosure to that handle. A builder
method without a rule that produces a floating value raises ``UnsupportedOperation`` naming it and
the kernel's source line: nothing silently becomes exact.

Importing this package registers every family: each module here is imported, so a new family is
a new module in this folder and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import NAN_PROPAGATING, RULES, KernelOp
from .movement import EXACT_INTEGER_OPS

__all__ = ["EXACT_INTEGER_OPS", "NAN_PROPAGATING", "RULES", "KernelOp"]

for _family in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_family.name}")
