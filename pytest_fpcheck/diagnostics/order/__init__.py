"""Revealing accumulation orders: FPRev (Xie et al., "Revealing Floating-Point Accumulation Orders
in Software/Hardware Implementations"), exported as ``fp.order``.

``fp.reveal_order(impl, n)`` finds the summation tree of ``impl`` from its results on *masked
all-one* inputs (section 4.1: one ``+M``, one ``-M``, units elsewhere), with the paper's three
algorithms: ``"naive"`` (section 3.3: search the trees, checked on random inputs; small ``n``
only), ``"basic"`` (BasicFPRev, section 4: all ``n(n-1)/2`` pairs, joined with a union-find) and
``"fprev"`` (section 5: queries on demand, multiway nodes for fused multi-term sums, and the
accumulator mitigation of section 8.1.2).

``impl(x)`` gets a NumPy array of the format's dtype and returns the sum. The adapters build
``impl`` for the common shapes::

    fp.reveal_order(fp.order.sum_of(numpy.sum), 1024)
    fp.reveal_order(fp.order.dot_of(torch.dot), 256)
    fp.reveal_order(fp.order.matmul_of(torch.matmul, 4, 256, 4), 256)

``fp.assert_same_order(impl_a, impl_b, n)`` fails with :class:`OrderMismatch` (an
``AssertionError``) showing the first subtree where the orders differ.

The modules, each importing only those listed before it:

* ``errors``: the exceptions a revelation raises;
* ``inputs``: conversion of results to floats, random inputs of a format;
* ``replay``: a tree's additions level by level, vectorised over rows (``SummationTree.replay``);
* ``text``: readable text of a tree (FPRev section 6's wording), over a small structural view;
* ``tree``: :class:`SummationTree` (FPRev section 3.2), its error factor and verification;
* ``query``: masks and units per format (section 8.1) and the counting of masked queries;
* ``algorithms``: NaiveSol, BasicFPRev and FPRev (sections 3.3, 4 and 5);
* ``adapters``: ``sum_of``, ``dot_of``, ``matmul_of`` (NumPy, PyTorch, Triton callables);
* ``reveal``: the entry points, :func:`reveal_order` and :func:`assert_same_order`.
"""

from __future__ import annotations

from .adapters import OrderImpl, dot_of, matmul_of, sum_of
from .errors import NondeterministicOrder, OrderMismatch, OrderRevealError
from .reveal import ALGORITHMS, assert_same_order, reveal_order
from .tree import Mismatch, SummationTree

__all__ = [
    "ALGORITHMS",
    "Mismatch",
    "NondeterministicOrder",
    "OrderImpl",
    "OrderMismatch",
    "OrderRevealError",
    "SummationTree",
    "assert_same_order",
    "dot_of",
    "matmul_of",
    "reveal_order",
    "sum_of",
]
