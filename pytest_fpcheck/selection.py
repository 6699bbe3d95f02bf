"""Which tests ``pytest --fpcheck`` runs inside ``fp.track()`` (issue 17: a test that cannot ask
for a verdict pays only for the non-finite watch).

The rule (``--fpcheck-track``): ``always`` tracks every test; ``auto``, the default, tracks a test
that can reach the verdict API, read off its sources: the fpcheck fixture among its fixtures, or
the word ``fpcheck`` in its module, a ``conftest.py`` between it and the rootdir, or a module under
the rootdir that its module takes names from. Each file is read once per run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .settings import Settings

__all__ = ["why_not_tracked"]

#: what, in a test's source, says that it can ask for a verdict (the package, its fixture, its
#: marker and its options all carry the name)
_VERDICT_WORD = "fpcheck"
#: test module -> whether it can ask for a verdict; other source file -> whether it names fpcheck
_NAMES_KEY = pytest.StashKey[dict[Path, bool]]()


def why_not_tracked(item: pytest.Item, settings: Settings) -> str | None:
    """None when ``--fpcheck`` runs the test inside ``fp.track()``, else why not.

    ``--fpcheck-track=always`` (or ``@pytest.mark.fpcheck(track="always")``) tracks every test.
    ``auto``, the default, tracks a test that can ask for a verdict: one that uses the fpcheck
    fixture, or whose module, a ``conftest.py`` between it and the rootdir, or a module under the
    rootdir that its module imports from names ``fpcheck`` (imports pytest_fpcheck, uses the
    fixture, the marker or the options). Any other test cannot reach the verdict API (short of
    importing it by a computed name), so it pays only for the non-finite watch."""
    if settings.track == "always" or _VERDICT_WORD in getattr(item, "fixturenames", ()):
        return None
    known = item.config.stash.setdefault(_NAMES_KEY, {})
    module = Path(item.path)
    if module not in known:  # the same for every test of the module
        known[module] = any(_names_fpcheck(known, path) for path in _sources(item))
    if known[module]:
        return None
    return (
        "pytest --fpcheck did not track this test: neither its module, a conftest.py above it "
        "nor a module it imports from names fpcheck (--fpcheck-track=auto); mark it "
        "@pytest.mark.fpcheck(track='always') or run with --fpcheck-track=always for bounds"
    )


def _sources(item: pytest.Item) -> list[Path]:
    """The test's module, the conftest.py files from its directory up to the rootdir, and the
    files under the rootdir of the modules its module's names come from."""
    rootdir = item.config.rootpath
    paths = [Path(item.path)]
    folder = Path(item.path).parent
    while True:
        paths.append(folder / "conftest.py")
        if folder == rootdir or folder.parent == folder or not folder.is_relative_to(rootdir):
            break
        folder = folder.parent
    module = getattr(item, "module", None)
    names = set()
    for value in list(vars(module).values()) if module is not None else ():
        try:
            name = value.__name__ if isinstance(value, type(sys)) else value.__module__
        except Exception:  # objects without a module, or whose attribute access raises
            continue
        if isinstance(name, str):
            names.add(name)
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and Path(file).is_relative_to(rootdir):
            paths.append(Path(file))
    return paths


def _names_fpcheck(known: dict[Path, bool], path: Path) -> bool:
    if path not in known:
        try:
            known[path] = _VERDICT_WORD in path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            known[path] = False
    return known[path]
