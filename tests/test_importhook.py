"""``when_imported``: the callback runs right after the module has loaded, on the block's thread
only, once; a failure of it never reaches the import; the module keeps its own loader; the
finder leaves ``sys.meta_path`` with the block."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_fpcheck.importhook import when_imported

NAME = "fpcheck_late_module"


@pytest.fixture
def module_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    source = tmp_path / f"{NAME}.py"
    source.write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield source
    sys.modules.pop(NAME, None)


def test_the_callback_runs_after_the_module_has_loaded(module_source: Path) -> None:
    seen: list[bool] = []
    before = list(sys.meta_path)
    with when_imported(NAME, lambda: seen.append(sys.modules[NAME].LOADED)) as failures:
        assert seen == []
        module = importlib.import_module(NAME)
        importlib.reload(module)  # once only
    assert seen == [True]
    assert failures == []
    assert sys.meta_path == before
    assert module.__loader__ is module.__spec__.loader
    assert type(module.__loader__).__name__ == "SourceFileLoader"


def test_a_failing_callback_never_reaches_the_import(module_source: Path) -> None:
    def fail() -> None:
        raise RuntimeError("could not open the blocks")

    with when_imported(NAME, fail) as failures:
        module = importlib.import_module(NAME)
    assert module.LOADED
    assert len(failures) == 1
    assert "RuntimeError: could not open the blocks" in failures[0]


def test_other_threads_and_modules_already_imported_fire_nothing(module_source: Path) -> None:
    seen: list[str] = []
    with when_imported(NAME, lambda: seen.append("fired")):
        thread = threading.Thread(target=importlib.import_module, args=(NAME,))
        thread.start()
        thread.join()
    assert NAME in sys.modules
    assert seen == []
    with when_imported(NAME, lambda: seen.append("fired")):
        importlib.import_module(NAME)
    assert seen == []


def test_a_failing_import_fires_nothing(module_source: Path) -> None:
    module_source.write_text("raise ImportError('broken')\n")
    seen: list[str] = []
    with when_imported(NAME, lambda: seen.append("fired")), pytest.raises(ImportError):
        importlib.import_module(NAME)
    assert seen == []


def test_a_spec_found_inside_the_block_answers_as_the_real_loader(module_source: Path) -> None:
    with when_imported(NAME, lambda: None):
        spec = importlib.util.find_spec(NAME)
    assert spec is not None
    assert spec.loader.get_filename(NAME) == str(module_source)
    assert spec.loader.is_package(NAME) is False
