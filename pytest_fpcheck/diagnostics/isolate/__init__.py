"""``fp.isolate``: the operation sites whose precision causes an inconsistency (CIEL: Miao, Laguna,
Rubio-González, "Expression Isolation of Compiler-Induced Numerical Inconsistencies in
Heterogeneous Code").

When a low-precision program disagrees with its reference, CIEL raises the precision of code
regions in a hierarchical bisection until the smallest set of regions whose enhancement makes
the program agree is left (section 3.2). Here the program is ``fn(*args)``, a region is a set
of operation *sites* (:mod:`.sites`: ``nn.Module`` path, operation, Python call and
source line), and enhancement runs a site in float64 with its result cast back to the program's
dtype (:mod:`.enhance`, section 3.3).

The steps (:mod:`.search`): a plain run, which records the sites (if it agrees there
is nothing to isolate); the whole program enhanced (if that still disagrees, the cause is not
precision: a bug, reported as such); bisection over the sites in program order, splitting at
module boundaries before statement boundaries before operations, which finds sites that only
resolve the inconsistency together one after the other; and a 1-minimality check. The result
says which sites, what each configuration left, and :meth:`Isolation.enhanced` runs a function
with just those sites enhanced, to confirm the fix.

Every run starts from the same state of torch's random number generators, so a program that
draws random numbers is run on the same draws each time; anything else ``fn`` depends on must
not change between calls.

For the pytest plugin (``--fpcheck-isolate``): :func:`isolate_test_call` isolates the sites that
make a failing test fail, :func:`isolation_note` is the text appended to its failure message,
and :func:`failing_dual_delta` turns a dual-delta re-run into a call that fails like the test.

The modules, each importing only those listed before it:

* ``sites``: what a site is, its hierarchy path and its description;
* ``compare``: what "agrees with the reference" means, and the error a run leaves;
* ``search``: the hierarchical bisection and 1-minimality check, over numbered sites;
* ``enhance``: the dispatch mode that records sites and runs chosen ones enhanced;
* ``findings``: what an isolation found, as plain data; ``text``: its report, laid out;
* ``result``: :class:`Isolation`, the findings and the means to re-run the fix;
* ``run``: :func:`isolate`, :func:`isolate_test_call` and :func:`failing_dual_delta`.
"""

from __future__ import annotations

from .enhance import ENHANCE
from .findings import OUTCOMES, Configuration
from .result import Isolation
from .run import failing_dual_delta, isolate, isolate_test_call
from .sites import Site
from .text import isolation_note

__all__ = [
    "ENHANCE",
    "OUTCOMES",
    "Configuration",
    "Isolation",
    "Site",
    "failing_dual_delta",
    "isolate",
    "isolate_test_call",
    "isolation_note",
]
