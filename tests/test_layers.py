"""The package's architecture as a checked contract (STYLE principle 16): no import cycle inside
``pytest_fpcheck`` and no import from a lower layer into a higher one.

:data:`LAYERS` is the one statement of the layer order, lowest first; a module may import from
its own layer and the layers below it. The chain runs leaves -> adapters -> interval -> tracking
-> assertions; strategies, oracle, dual-delta, the diagnostics, the emulators and stochastic
arithmetic sit beside it (above the chain, which never imports them: no engine module knows a
diagnostic) and below the pytest layer (plugin, options, fixture, markers, selection, settings,
environment, report, and the package root that re-exports everything), which none of them imports.

Imports are read with :mod:`ast` from the source, so nothing is imported to check them. Every
import counts, for the layers and for the cycles alike: at module level, inside a function (a
lazy import is still a dependency, only a later one) and under ``if TYPE_CHECKING:`` (an
annotation naming another module's type ties the two modules together all the same, even though
it never runs). Two modules that know each other, lazily or for types only, are what "results
carry their data" rules out: a result hands plain values to the module that formats or draws
them, which never names the result's class.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "pytest_fpcheck"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: lowest first; each entry names top-level modules or subpackages of the package ("" is the
#: package root, ``pytest_fpcheck/__init__.py``)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "formats", "allocator"),
    ("adapters",),
    ("interval",),
    ("tracking",),
    ("assertions",),
    ("strategies", "oracle", "dualdelta", "diagnostics", "emulate", "stochastic"),
    (
        "plugin",
        "options",
        "fixture",
        "markers",
        "selection",
        "settings",
        "environment",
        "importhook",
        "report",
        "",
    ),
)


@dataclass(frozen=True)
class Import:
    """One import statement's edge: the importing module, the imported module, the line."""

    source: str
    target: str
    line: int


def module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, package: str, known: set[str]) -> list[str]:
    """The package's modules an import statement loads (a ``from X import name`` where
    ``X.name`` is a submodule loads that submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    if module.split(".")[0] != PACKAGE:
        return []
    submodules = [f"{module}.{alias.name}" for alias in node.names]
    found = [name for name in submodules if name in known]
    return found or [module]


def imports(known: dict[str, Path]) -> list[Import]:
    """Every import of a package module by a package module, at any depth of the source."""
    edges: list[Import] = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.extend(
                    Import(name, target, node.lineno)
                    for target in _targets(node, package, set(known))
                    if target != name
                )
    return edges


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the top-level module or subpackage holding ``module``."""
    part = module.split(".")[1] if "." in module else ""
    for index, names in enumerate(LAYERS):
        if part in names:
            return index
    raise AssertionError(f"{module} is in no layer: add {part!r} to LAYERS in {__file__}")


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_is_in_a_layer() -> None:
    for module in modules():
        layer_of(module)


def test_no_import_goes_from_a_lower_layer_to_a_higher_one() -> None:
    violations = [
        f"{edge.source} (line {edge.line}) imports {edge.target}: layer {LAYERS[layer_of(edge.source)]}"
        f" -> {LAYERS[layer_of(edge.target)]}"
        for edge in imports(modules())
        if layer_of(edge.target) > layer_of(edge.source)
    ]
    assert not violations, "\n".join(violations)


def test_no_import_cycle() -> None:
    found = cycles(imports(modules()))
    assert not found, "\n".join(" <-> ".join(component) for component in found)


def test_the_checks_see_what_they_check() -> None:
    """The graph holds the imports inside functions and under ``TYPE_CHECKING`` and those of
    ``from . import module``; the cycle search finds a cycle of three and nothing in a chain."""
    pairs = {(edge.source, edge.target) for edge in imports(modules())}
    # inside a method: a result imports its plotting (and matplotlib) only to plot
    assert (f"{PACKAGE}.dualdelta.result", f"{PACKAGE}.dualdelta.plots") in pairs
    # under TYPE_CHECKING: the emulators name the summation tree's type in annotations
    assert (f"{PACKAGE}.emulate.models", f"{PACKAGE}.diagnostics.order") in pairs
    # ``from . import messages``
    assert (f"{PACKAGE}.assertions.verdict", f"{PACKAGE}.assertions.messages") in pairs
    assert cycles([Import("a", "b", 1), Import("b", "c", 2), Import("c", "a", 3)]) == [
        ["a", "b", "c"]
    ]
    assert cycles([Import("a", "b", 1), Import("b", "c", 2)]) == []
    assert layer_of(f"{PACKAGE}.interval.rounding") < layer_of(f"{PACKAGE}.assertions.messages")
