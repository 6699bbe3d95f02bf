"""Importing the package or loading the plugin leaves the heavy backends unimported, and the
lazy root exports resolve to the objects they name."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import pytest_fpcheck as fp

HEAVY = ("torch", "triton", "numba", "scipy", "mpmath", "hypothesis", "flint")


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_importing_the_package_imports_no_heavy_backend_nor_numpy() -> None:
    out = run_python(
        f"""
        import sys
        import pytest_fpcheck, pytest_fpcheck.plugin
        print(sorted(m for m in {(*HEAVY, "numpy")!r} if m in sys.modules))
        """
    )
    assert out == "[]"


def test_a_numpy_format_query_imports_no_heavy_backend() -> None:
    out = run_python(
        f"""
        import sys
        import numpy as np
        import pytest_fpcheck as fp
        assert fp.formats.round_to(np.float64(1 + 2**-12), "float16") == 1.0
        assert fp.format_of(np.zeros(2, np.float16)).name == "float16"
        print(sorted(m for m in {HEAVY!r} if m in sys.modules))
        """
    )
    assert out == "[]"


def test_pytest_with_the_plugin_loaded_imports_no_heavy_backend(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        import sys
        def test_nothing_heavy():
            assert [m for m in {HEAVY!r} if m in sys.modules] == []
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "fpcheck", "-p", "no:hypothesispytest", "-p", "no:benchmark"
    )
    result.assert_outcomes(passed=1)


def test_every_name_in_all_resolves() -> None:
    for name in fp.__all__:
        assert getattr(fp, name) is not None, name
    assert sorted(fp.__all__) == sorted(dir(fp))


def test_unknown_root_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'pytest_fpcheck' has no attribute 'nope'"):
        fp.nope  # noqa: B018
