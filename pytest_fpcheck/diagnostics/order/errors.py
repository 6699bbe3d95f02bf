"""The failures of order revelation (FPRev): what the masked queries cannot explain, and a mismatch
between two revealed orders."""

from __future__ import annotations

from ...errors import FPCheckError

__all__ = ["NondeterministicOrder", "OrderMismatch", "OrderRevealError"]


class OrderRevealError(FPCheckError):
    """The implementation's answers to the masked all-one queries (FPRev section 4.1) cannot be
    explained by one fixed summation tree: a result that is not a whole number of units, a count out
    of range, or answers that contradict each other. The message names the query and the likely
    cause (a mean instead of a sum, compensated summation, a data-dependent order, an accumulator
    the masks cannot swamp)."""


class NondeterministicOrder(OrderRevealError):
    """The same masked input, queried twice, gave two different results: the order is not fixed
    (FPRev section 3.2 puts such implementations out of scope)."""


class OrderMismatch(FPCheckError, AssertionError):
    """Two implementations accumulate in different orders; the message shows the first subtree
    where they differ. ``tree_a`` and ``tree_b`` hold the two revealed trees."""

    def __init__(self, message: str, tree_a: object = None, tree_b: object = None) -> None:
        super().__init__(message)
        self.tree_a = tree_a
        self.tree_b = tree_b
