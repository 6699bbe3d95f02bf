"""Suite-wide setup.

pytester's in-process runs restore ``sys.modules`` afterwards; a module first imported inside
such a run would be removed and imported a second time by a later test, which torch, triton and
the tracking rules (registered once per process) do not survive. Importing them here, once,
keeps them in every snapshot. Numba too: it imports modules while it compiles
(``numba.core.boxing`` at a first compilation), whose registrations a second import repeats
("duplicate registration for Boolean"), so one small function is compiled here, and a test
using pytester waits until the kernels the warm-up thread is compiling are ready (a
compilation running through an in-process run would import inside it). Import-laziness is
tested in subprocesses (tests/test_imports.py), which this does not affect.

A test with a ``filterwarnings`` mark runs with no compilation in the warm-up thread, none
running as it starts and none started during it (``FPCHECK_JIT=eager``): Numba compiles inside
``warnings.catch_warnings()``, which saves the process's filter list when it enters and puts
that list back when it leaves, so a compilation that ends in the middle of such a test puts
back the filters of before the mark, and the warning the mark ignores becomes an error (seen:
``torch.jit.trace``'s deprecation, while the kernels compiled afresh after an edit).

The suite turns warnings into errors (pyproject.toml); pytest-benchmark's own warning is ignored
here, only where that plugin is loaded: a filter naming its warning class in pyproject.toml would
stop every run made without it (the examples, installed with ".[all]" alone).
"""

from __future__ import annotations

import contextlib
import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

for _backend in ("torch", "triton", "pytest_fpcheck.tracking.track"):
    with contextlib.suppress(ImportError):
        __import__(_backend)

with contextlib.suppress(ImportError):
    import numba

    numba.njit(lambda x: x > 0.0)(1.0)


@pytest.fixture(autouse=True)
def _no_compilation_across_pytester(request: pytest.FixtureRequest) -> None:
    """Before a test that runs pytest in-process: the warm-up thread's compilations done."""
    if "pytester" in request.fixturenames:
        from pytest_fpcheck.interval.jit import wait_for_kernels

        wait_for_kernels()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item):  # type: ignore[no-untyped-def]
    """Around a test with a ``filterwarnings`` mark, outside the warnings plugin's own filters
    (the module docstring): compilations done first, the warm-up off while it runs."""
    if item.get_closest_marker("filterwarnings") is None:
        yield
        return
    from pytest_fpcheck.interval.jit import MODE_ENV, wait_for_kernels

    wait_for_kernels()
    before = os.environ.get(MODE_ENV)
    os.environ[MODE_ENV] = "eager"
    try:
        yield
    finally:
        if before is None:
            del os.environ[MODE_ENV]
        else:
            os.environ[MODE_ENV] = before


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("benchmark"):
        config.addinivalue_line(
            "filterwarnings", "ignore::pytest_benchmark.logger.PytestBenchmarkWarning"
        )
