"""glibc's allocator keeps freed arrays' memory once tracking begins (``allocator.py``): a
tracked step's temporaries no longer fault their pages in afresh, and ``FPCHECK_MALLOC=system``
leaves the allocator alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pytest_fpcheck import allocator

pytestmark = pytest.mark.skipif(not allocator._glibc(), reason="the thresholds are glibc's")

# arrays of 2 to 24 MiB made and freed as a tracked operation's temporaries are: glibc's own
# thresholds return part of them to the system after each cycle
CYCLES = """
    import resource
    import numpy as np

    def cycle():
        arrays = [np.ones(n) for n in (1 << 18, 3 << 18, 1 << 20, 3 << 20) for _ in range(2)]
        del arrays

    cycle()
    cycle()
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        cycle()
    print(set_here, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / 10)
"""


def run(prologue: str, malloc: str | None) -> tuple[str, float]:
    env = {k: v for k, v in os.environ.items() if k != allocator.MALLOC_ENV}
    if malloc is not None:
        env[allocator.MALLOC_ENV] = malloc
    code = textwrap.dedent(prologue) + textwrap.dedent(CYCLES)
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    set_here, faults = result.stdout.split()
    return set_here, float(faults)


def test_a_tracked_block_keeps_freed_memory_for_the_next_operation():
    tracked = """
        import torch
        import pytest_fpcheck as fp
        from pytest_fpcheck import allocator
        with fp.track():
            torch.ones(3) * 2
        set_here = allocator._DONE == [True]
    """
    set_here, faults = run(tracked, None)
    assert set_here == "True"
    assert faults < 50, faults
    # the same process without the thresholds: each cycle faults its arrays in again
    set_here, faults = run(tracked, "system")
    assert set_here == "False"
    assert faults > 500, faults


def test_a_stochastic_run_keeps_freed_memory_too():
    stochastic = """
        import torch
        import pytest_fpcheck as fp
        from pytest_fpcheck import allocator
        fp.stochastic_bounds(lambda x: x * 3, torch.ones(4), samples=2, seed=0)
        set_here = allocator._DONE == [True]
    """
    assert run(stochastic, None)[0] == "True"


def test_nothing_is_set_before_tracking_begins():
    untouched = """
        import pytest_fpcheck as fp
        from pytest_fpcheck import allocator
        set_here = bool(allocator._DONE)
    """
    assert run(untouched, None)[0] == "False"
