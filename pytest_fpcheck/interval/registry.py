"""The registry of interval rules: operation name -> rule.

A rule receives a context describing one operation (its arguments, their enclosures, its
result and the precision it computes in; see :class:`pytest_fpcheck.tracking.torch.context.RuleContext`)
and returns the enclosure of each floating result: an :class:`~pytest_fpcheck.interval.Interval`,
a tuple of them (None for a result it does not bound), or None when the operation produces no
floating result.

Names are PyTorch operator overloads (``aten.add.Tensor``) or overload packets (``aten.add``);
the lookup tries the overload, then the packet, then, for an in-place (``aten.add_``) or
``out=`` variant, the functional packet. Triton instructions use the ``triton.`` namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument

__all__ = ["lookup", "register_rule", "registered"]

Rule = Callable[[Any], Any]
_RULES: dict[str, Rule] = {}


def register_rule(name: str, rule: Rule, *, replace: bool = False) -> Rule:
    """Register ``rule`` for the operation ``name``; returns the rule (usable as a decorator
    through ``functools.partial``). Registering a name twice needs ``replace=True``."""
    if not isinstance(name, str) or name.count(".") < 1:
        raise InvalidArgument("name", name, "an operator name like 'aten.add' or 'aten.add.Tensor'")
    if not callable(rule):
        raise InvalidArgument("rule", rule, "a callable taking the rule context")
    if name in _RULES and not replace:
        raise InvalidArgument(
            "name", name, "an operation without a rule", hint="Pass replace=True to override it."
        )
    _RULES[name] = rule
    return rule


def lookup(overload: str, packet: str) -> Rule | None:
    """The rule for an overload name and its packet name, or None."""
    for name in (overload, packet):
        if name in _RULES:
            return _RULES[name]
    if packet.endswith("_"):
        return _RULES.get(packet[:-1])
    return None


def registered() -> list[str]:
    """Every name that has a rule, sorted."""
    return sorted(_RULES)
