"""``fp.exact_reference``: an enclosure of a function's mathematically exact result.

The rule is :func:`pytest_fpcheck.oracle.arb_eval.exact_reference`'s (Arb ball arithmetic,
operation by operation, precision raised until every ball is narrow). This module only stands in
front of it so that ``import pytest_fpcheck`` and ``import pytest_fpcheck.oracle`` never import
python-flint, and so that a missing python-flint is reported with the extra that installs it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = ["exact_reference"]


def exact_reference(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """An enclosure of the exact result of ``fn(*args, **kwargs)``: a
    :class:`~pytest_fpcheck.Bounds` of mode ``"exact"`` (a tuple of them when ``fn`` returns a
    tuple). Each operation of ``fn`` is evaluated in Arb ball arithmetic, the inputs taken at
    their exact values. Pass the bounds as ``expected=`` to :func:`~pytest_fpcheck.classify` or
    :func:`~pytest_fpcheck.assert_roundoff_close` to judge a kernel against the exact result
    rather than against a float64 reference. Needs python-flint (``pip install
    'pytest-fpcheck[arb]'``)."""
    if importlib.util.find_spec("flint") is None:
        raise ModuleNotFoundError(
            "fp.exact_reference evaluates in Arb ball arithmetic, which needs python-flint: "
            "pip install 'pytest-fpcheck[arb]'",
            name="flint",
        )
    from .arb_eval import exact_reference as evaluate

    return evaluate(fn, *args, **kwargs)
