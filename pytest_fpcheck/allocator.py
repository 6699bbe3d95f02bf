"""The C allocator's settings for tracked and stochastic runs: freed arrays' memory is kept for
the next operation, not returned to the system and faulted in afresh.

Every tracked operation allocates float64 arrays of its tensors' size (often megabytes) and frees
them before the next. glibc's malloc serves an allocation above its mmap threshold (128 KiB at
first, raised to the size of each freed mmapped block, up to 32 MiB) by a fresh ``mmap``, and
returns the heap's free top to the system above its trim threshold (twice the mmap threshold):
each such array's pages are then faulted in again, about 2.3 microseconds per 4 KiB page on the
2-core machine of ``docs/performance.md``. A tracked step of GPT-2 (``benchmarks/bench_zoo.py``'s
128-wide one-layer model) took 3,000 to 14,000 page faults and 193 to 225 ms of CPU time; with
the two thresholds fixed at 32 MiB and 256 MiB, 0 to 500 faults and 177 to 188 ms. Fixing either
alone is worse than neither (the other then stays at its static default).

:func:`keep_freed_memory` fixes both (glibc's ``mallopt``), once per process, when the first
tracked block or stochastic run begins, where the C library is glibc. The cost: the process
keeps up to 256 MiB of freed memory at its heap's top instead of returning it, and serves
allocations up to 32 MiB from its heap. ``FPCHECK_MALLOC=system`` leaves the allocator as it is.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["MALLOC_ENV", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

#: the environment variable that, set to ``system``, leaves the C allocator's settings alone
MALLOC_ENV = "FPCHECK_MALLOC"
#: allocations above this many bytes get memory of their own (glibc's largest dynamic value)
MMAP_THRESHOLD = 32 << 20
#: free memory at the heap's top beyond this many bytes is returned to the system
TRIM_THRESHOLD = 256 << 20
# glibc's <malloc.h> parameter numbers
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

_DONE: list[bool] = []


def keep_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`)
    the first time it is called in a process; True where they are set (now or before), False
    where the C library is not glibc, ``mallopt`` refused, or ``FPCHECK_MALLOC=system``."""
    if not _DONE:
        _DONE.append(_set_thresholds())
    return _DONE[0]


def _set_thresholds() -> bool:
    if os.environ.get(MALLOC_ENV, "") == "system" or not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - a glibc process always has it
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # the mmap threshold first: setting either turns off glibc's dynamic adjustment of both
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def _glibc() -> bool:
    """Whether the C library is glibc (its own answer; elsewhere confstr has no such name)."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # no confstr, or no such name here
        return False
    return (version or "").startswith("glibc")
