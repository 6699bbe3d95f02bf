"""Compiled kernels (``interval/jit.py``): the cache lives in the user's cache folder (overridable,
never the package's), follows every compiled source (no stale inlined helper), is shared safely
by processes, and a kernel's NumPy twin answers while the compiled kernel loads."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pytest_fpcheck
from pytest_fpcheck.interval import jit as J

PACKAGE = Path(pytest_fpcheck.__file__).resolve().parent


def run(code: str, env: dict[str, str], cwd: Path | None = None) -> str:
    environment = {k: v for k, v in os.environ.items() if k not in (J.CACHE_ENV, J.MODE_ENV)}
    environment.update(env)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def numba_files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc")}


def test_cache_root_prefers_the_override_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv(J.CACHE_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert J.cache_root() == tmp_path / "mine"
    monkeypatch.delenv(J.CACHE_ENV)
    assert J.cache_root() == tmp_path / "xdg" / "pytest-fpcheck"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert J.cache_root() == tmp_path / "home" / ".cache" / "pytest-fpcheck"


def test_cache_folder_names_python_numba_and_the_source_digest(monkeypatch, tmp_path):
    import numba

    monkeypatch.setenv(J.CACHE_ENV, str(tmp_path))
    version = f"py{sys.version_info[0]}{sys.version_info[1]}-numba{numba.__version__}"
    assert J.cache_dir() == tmp_path / "numba" / f"{version}-{J.source_digest()[:16]}"


KERNELS = """
    import numpy as np
    from pytest_fpcheck import formats
    from pytest_fpcheck.interval.kernels import summary
    from pytest_fpcheck.interval.rounding import up_to
    print(summary(np.array([0.0]), np.array([2.0]))[0])
    print(up_to(np.array([1.0 / 3.0]), formats.format_of("float16"))[0])
"""


def test_kernels_cache_in_the_override_folder_never_in_the_package(tmp_path):
    before = numba_files(PACKAGE)
    out = run(KERNELS, {J.CACHE_ENV: str(tmp_path), J.MODE_ENV: "eager"})
    assert out.split() == ["1.0", "0.33349609375"]
    written = numba_files(tmp_path)
    assert {p.parent.parent for p in written} == {tmp_path / "numba"}
    names = {p.name for p in written}
    assert any(n.startswith("pytest_fpcheck.interval.kernels.base._summary-") for n in names)
    assert any(n.startswith("pytest_fpcheck.interval.rounding._round_all-") for n in names)
    assert numba_files(PACKAGE) == before
    # a second process loads them from there instead of compiling
    loaded = run(
        KERNELS
        + """
    from pytest_fpcheck.interval.kernels import base
    print(sum(base._summary.dispatcher.stats.cache_hits.values()))
    """,
        {J.CACHE_ENV: str(tmp_path), J.MODE_ENV: "eager"},
    )
    assert loaded.split()[-1] == "1"


def package_copy(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "pytest_fpcheck", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_read_only_package_runs_its_kernels(tmp_path):
    root = package_copy(tmp_path)
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        out = run(
            KERNELS,
            {
                J.CACHE_ENV: str(tmp_path / "cache"),
                J.MODE_ENV: "eager",
                "PYTHONPATH": str(root),
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            cwd=tmp_path,
        )
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    assert out.split() == ["1.0", "0.33349609375"]
    assert numba_files(tmp_path / "cache")
    assert not numba_files(root)


def test_an_edited_inlined_helper_in_another_file_is_never_run_stale(tmp_path):
    # base._summary inlines rounding._from_bits: Numba alone keys the cache by base.py only
    root = package_copy(tmp_path)
    env = {J.CACHE_ENV: str(tmp_path / "cache"), J.MODE_ENV: "eager", "PYTHONPATH": str(root)}
    code = """
        import numpy as np
        from pytest_fpcheck.interval.kernels import summary
        print(summary(np.array([0.0]), np.array([2.0]))[0])
    """
    assert run(code, env, cwd=tmp_path).split() == ["1.0"]
    rounding = root / "pytest_fpcheck" / "interval" / "rounding.py"
    text = rounding.read_text()
    original = "    return np.int64(b).view(np.float64)\n"
    assert text.count(original) == 1
    rounding.write_text(text.replace(original, "    return np.int64(b).view(np.float64) * 2.0\n"))
    assert run(code, env, cwd=tmp_path).split() == ["2.0"]
    assert len(list((tmp_path / "cache" / "numba").iterdir())) == 2


def test_a_cached_kernel_outside_the_digested_sources_is_refused():
    def kernel(x: float) -> float:  # pragma: no cover - never compiled
        return x

    with pytest.raises(RuntimeError, match="source_digest\\(\\) does not read its file"):
        J.jit(cache=True)(kernel)


def test_numba_ir_inlining_is_refused_for_llvm_inlining():
    # inline="always" copied every helper's IR at each call site: 45 s to compile a sum onto
    # float32, against 6 s with forceinline=True at the same speed
    with pytest.raises(ValueError, match=r"jit\(inline='always'\).*forceinline=True"):
        J.jit(inline="always")


def test_settings_of_one_kernel_get_data_files_of_their_own(tmp_path):
    # two settings (closures) of one kernel share an index; each data file is named after its
    # key, so processes saving different settings at once never write to the same file
    code = """
        import numpy as np
        from pytest_fpcheck import formats
        from pytest_fpcheck.interval.kernels import mul_bounds
        x = np.array([1.0, 3.0]); f = formats.format_of("float16")
        print(mul_bounds(x, x, x, x, {step}, f)[1][1])
    """
    env = {J.CACHE_ENV: str(tmp_path), J.MODE_ENV: "eager"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code.format(step=step))],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            text=True,
        )
        for step in (False, True)
    ]
    outputs = [p.communicate()[0].split() for p in processes]
    assert outputs == [["9.0"], ["9.0078125"]]
    data = [p for p in numba_files(tmp_path) if "_mul_bounds.locals.kernel" in p.name]
    assert len([p for p in data if p.suffix == ".nbc"]) == 2
    # whatever the index kept, each setting loads its own code
    again = [run(code.format(step=step), env).split() for step in (False, True)]
    assert again == [["9.0"], ["9.0078125"]]


def test_a_kernel_answers_with_its_twin_until_it_is_compiled(monkeypatch):
    monkeypatch.delenv(J.MODE_ENV, raising=False)
    monkeypatch.setattr(J, "_TWINS", J._TwinTime())
    calls = []

    def twin(x: np.ndarray, out: np.ndarray) -> None:
        calls.append(x.size)
        out[:] = x * 2.0

    def double(x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
        for i in range(x.size):
            out[i] = x[i] * 2.0

    kernel = J.jit(fallback=twin)(double)
    x, out = np.arange(3.0), np.empty(3)
    kernel(x, out)  # small work: the twin answers, nothing is compiled
    J.wait_for_kernels()
    assert calls == [3]
    assert out.tolist() == [0.0, 2.0, 4.0]
    assert not kernel.ready
    J._TWINS.seconds = J.WARM_UP_SECONDS  # the twins have run long enough: warm up
    kernel(x, out)
    assert calls == [3, 3]
    J.wait_for_kernels()
    assert kernel.ready
    kernel(x + 1, out)
    assert calls == [3, 3]
    assert out.tolist() == [2.0, 4.0, 6.0]


def test_a_twin_called_on_a_large_array_begins_the_warm_up(monkeypatch):
    monkeypatch.delenv(J.MODE_ENV, raising=False)
    monkeypatch.setattr(J, "_TWINS", J._TwinTime())

    def double(x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
        for i in range(x.size):
            out[i] = x[i] * 2.0

    kernel = J.jit(fallback=lambda x, out: np.multiply(x, 2.0, out=out))(double)
    x = np.ones(J.WARM_UP_SIZE + 1)
    kernel(x, np.empty_like(x))
    J.wait_for_kernels()
    assert kernel.ready


def test_the_readme_tour_imports_no_numba_and_compiles_nothing(tmp_path):
    out = run(
        """
        import sys
        import torch
        import pytest_fpcheck as fp
        torch.manual_seed(0)
        x = torch.randn(64, 256, dtype=torch.float16)
        w = torch.randn(256, 32, dtype=torch.float16)
        with fp.track():
            y = torch.nn.functional.gelu(x @ w)
        reference = torch.nn.functional.gelu(x.double() @ w.double())
        fp.assert_roundoff_close(y, reference)
        print(fp.bounds_of(y))
        print("numba" in sys.modules, "torch._dynamo" in sys.modules)
        """,
        {J.CACHE_ENV: str(tmp_path)},
    )
    assert out.splitlines() == [
        "Bounds(shape=(64, 32), format=float16, mode=rigorous, max radius=0.0157)",
        "False False",
    ]
    assert not numba_files(tmp_path)


def test_eager_mode_and_large_arrays_wait_for_the_compiled_kernel(monkeypatch):
    def twin(x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - must not run
        raise AssertionError("the twin ran")

    def double(x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
        for i in range(x.size):
            out[i] = x[i] * 2.0

    monkeypatch.setenv(J.MODE_ENV, "eager")
    kernel = J.jit(fallback=twin)(double)
    out = np.empty(2)
    kernel(np.ones(2), out)
    assert out.tolist() == [2.0, 2.0]
    monkeypatch.delenv(J.MODE_ENV)
    large = J.jit(fallback=twin)(double)
    x = np.ones(J.FALLBACK_LIMIT + 1)
    large(x, np.empty_like(x))


def test_standins_type_as_the_arguments_do():
    from numba import typeof

    a = np.ones((3, 4))
    values = [
        a,
        a.T,
        a[:, ::2],
        np.ones(5, dtype=np.float32),
        np.ones(0),
        np.float64(2.0),
        3,
        True,
        (1.0, 2, False),
    ]
    readonly = np.ones(3)
    readonly.flags.writeable = False
    values.append(readonly)
    for value in values:
        assert typeof(J._standin(value)) == typeof(value)
