"""What a matrix multiply does with its bits: ``fp.probe_matmul`` (FTTN, paper 004 sections 5 and
6.1), the accumulation order by FPRev and every other feature by targeted probes.

The modules, each importing only those listed before it:

* ``features``: :class:`MatmulFeatures`, the report, and how it is read from the models left;
* ``library``: the candidate models of a fused multi-term adder and the library of probes;
* ``calls``: calls of the matmul under probe, counted, and its result format;
* ``reveal``: the order of element [0, 0], by the block test and FPRev's masked queries;
* ``matmul``: :func:`probe_matmul` and :func:`probe_torch_matmul`, the adaptive probing.
"""

from __future__ import annotations

from .features import MAX_CALLS, PROBE_SHAPE, MatmulFeatures
from .matmul import probe_matmul, probe_torch_matmul

__all__ = ["MAX_CALLS", "PROBE_SHAPE", "MatmulFeatures", "probe_matmul", "probe_torch_matmul"]
