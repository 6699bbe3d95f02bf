"""The subscription interface between the instrumentation and those who listen to it.

The engines (the PyTorch dispatch mode, the instrumented Triton interpreter) know only this
module: whoever wants to hear about a kernel launch subscribes here for the ``with`` block it
opens, on its thread, and the instrumentation asks for the innermost subscriber of each role.
Three roles:

* :class:`LaunchBounder` (a tracker): a kernel launched while one is subscribed has its bounds
  computed in the subscriber's ``mode`` and recorded in the side store; the subscriber is told
  once the launch is bounded (:meth:`~LaunchBounder.kernel_bounded`);
* :class:`OperationWatcher` (the non-finite watch): each computing operation of a launched
  kernel is shown to it with its float64 input and output values
  (:meth:`~OperationWatcher.kernel_operation`);
* :class:`OperationRounder` (a stochastic-arithmetic run): each floating result of a launched
  kernel that rounds is handed to it as a float64 value computed in a wider format, and the
  kernel goes on with what it returns (:meth:`~OperationRounder.kernel_rounded`).

Subscriptions are per thread (like dispatch modes) and nest: the innermost subscriber of a role
(:func:`bounder`, :func:`watcher`, :func:`rounder`) is the one the instrumentation uses, as the
innermost dispatch mode of a kind decides. A rounder hides the subscribers opened before it on
its thread: a randomly rounded run is not seen by the tracking or watching blocks around it
(whose dispatch modes it disables too), while blocks opened inside it are.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "LaunchBounder",
    "OperationRounder",
    "OperationWatcher",
    "bounder",
    "rounder",
    "subscribe",
    "unsubscribe",
    "watcher",
]


@runtime_checkable
class LaunchBounder(Protocol):
    """What a tracker is to the instrumentation: kernels launched under it are bounded."""

    #: "rigorous" or "probabilistic": how the launch's sums are bounded
    mode: str
    #: a launch tracking cannot bound raises (True), or runs plainly as a gap (False)
    strict: bool

    def kernel_bounded(self) -> None:
        """One launch was bounded and its outputs' bounds recorded."""

    def kernel_gap(
        self,
        kernel: str,
        source: tuple[str, int] | None,
        error: Exception,
        written: list[Any],
    ) -> None:
        """A launch at the user's ``source`` line could not be bounded (``error``, an
        ``UnsupportedOperation``) and ran plainly; the tensors in ``written`` (what it changed)
        have no bounds."""


@runtime_checkable
class OperationWatcher(Protocol):
    """What a watch is to the instrumentation: it sees each computing kernel operation."""

    def kernel_operation(
        self,
        op: str,
        source: tuple[str, int] | None,
        dtype: str,
        smallest_normal: float,
        inputs: list[np.ndarray],
        output: np.ndarray,
        divisions_by_zero: int = 0,
    ) -> None:
        """Operation ``op`` (``kernel.operation``) at the user's ``source`` line produced
        ``output`` in ``dtype`` (whose smallest normal is ``smallest_normal``) from ``inputs``,
        dividing a finite dividend by zero ``divisions_by_zero`` times."""


@runtime_checkable
class OperationRounder(Protocol):
    """What a stochastic-arithmetic run is to the instrumentation: it rounds kernel results."""

    def kernel_rounded(
        self,
        op: str,
        wide: np.ndarray,
        format_name: str,
        operands: tuple[np.ndarray, ...],
        axis: int | None = None,
    ) -> np.ndarray:
        """The result of operation ``op`` (``kernel.operation``) in the format named
        ``format_name`` (a :data:`pytest_fpcheck.formats.FORMATS` key), given ``wide``, its
        value computed in float64 from the float64 ``operands``: float64 values on that
        format's grid, of ``wide``'s shape. For ``kernel.dot`` the operands are ``(a, b,
        addend)``; for ``kernel.sum``, the summed values and the reduction's ``axis`` (None:
        all); for ``kernel.cumsum`` and ``kernel.cumprod``, the scanned values and the scan's
        ``axis`` (``wide``: the exact prefix sums or products, a sequential scan to round)."""


class _Subscribers(threading.local):
    def __init__(self) -> None:
        self.stack: list[object] = []


_SUBSCRIBERS = _Subscribers()


def subscribe(subscriber: LaunchBounder | OperationWatcher) -> None:
    """Make ``subscriber`` the innermost one of its roles on this thread (until
    :func:`unsubscribe`)."""
    _SUBSCRIBERS.stack.append(subscriber)


def unsubscribe(subscriber: LaunchBounder | OperationWatcher) -> None:
    """End the innermost subscription of ``subscriber`` on this thread."""
    stack = _SUBSCRIBERS.stack
    for position in range(len(stack) - 1, -1, -1):
        if stack[position] is subscriber:
            del stack[position]
            return


def _innermost(role: type[Any]) -> Any:
    for subscriber in reversed(_SUBSCRIBERS.stack):
        if isinstance(subscriber, role):
            return subscriber
        if isinstance(subscriber, OperationRounder):
            return None  # what was opened before a rounder does not see its runs
    return None


def bounder() -> LaunchBounder | None:
    """The innermost :class:`LaunchBounder` subscribed on this thread, or None."""
    found: LaunchBounder | None = _innermost(LaunchBounder)
    return found


def watcher() -> OperationWatcher | None:
    """The innermost :class:`OperationWatcher` subscribed on this thread, or None."""
    found: OperationWatcher | None = _innermost(OperationWatcher)
    return found


def rounder() -> OperationRounder | None:
    """The innermost :class:`OperationRounder` subscribed on this thread, or None."""
    found: OperationRounder | None = _innermost(OperationRounder)
    return found
