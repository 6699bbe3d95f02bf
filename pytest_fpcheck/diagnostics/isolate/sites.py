"""Operation sites, as :func:`~pytest_fpcheck.isolate` names them (CIEL section 3.1, the
"simplified AST" of a PyTorch program: modules, statements, operations). No torch import.

A site is a *static* place in the program, like CIEL's source expressions: the ``nn.Module``
path it runs in, the ATen operation, and the Python call that reached it (the user's source
line, and the frames between that line and the dispatcher, which tell apart two operations one
library call makes). Every execution of that place is the same site: the iterations of a loop,
the calls of a function from one line, the trials of a dual-delta test. ``index`` numbers a
module's sites in the order they first ran.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...tracking.core.interpose import describe_location

__all__ = ["Site", "describe_sites", "hierarchy_path"]


@dataclass(frozen=True)
class Site:
    """One operation site: ``aten.sub #4 at model.py:14 in Net.blocks.3.norm``."""

    #: the ATen operation (overload packet), e.g. ``"aten.sub"``
    op: str
    #: the ``nn.Module`` path it ran in (``""`` outside any module)
    module_path: str
    #: its place among the sites of ``module_path``, in the order they first ran (from 0)
    index: int
    #: the user's ``(file, line)`` that reached it, when one was found
    source: tuple[str, int] | None
    #: the format the program computes it in (its floating output's dtype), e.g. ``"float16"``
    dtype: str

    @property
    def location(self) -> str:
        """``model.py:14 in Net.blocks.3.norm`` (file, line and module path, as far as known)."""
        return describe_location(self.source, self.module_path)

    def __str__(self) -> str:
        location = self.location
        head = f"{self.op} #{self.index}"
        if not location:
            return head
        return f"{head} {location}" if location.startswith("in ") else f"{head} at {location}"


def hierarchy_path(site: Site) -> tuple[str, ...]:
    """The site's place in the program's hierarchy: module path components, then its line."""
    parts = tuple(site.module_path.split(".")) if site.module_path else ()
    line = f"{os.path.basename(site.source[0])}:{site.source[1]}" if site.source else "?"
    return (*parts, line)


def describe_sites(ids: frozenset[int], sites: list[Site], *, limit: int = 4) -> str:
    """A short account of a set of sites: whole module subtrees by name, other sites one by one,
    e.g. ``Net.blocks.0 (12 sites), Net.blocks.1 (12 sites), aten.mul #0 at m.py:3 in Net``."""
    if not ids:
        return "no site"
    if len(ids) == len(sites):
        return f"every site ({len(sites)})"
    subtree: dict[str, int] = {}
    for site in sites:
        parts = site.module_path.split(".") if site.module_path else []
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            subtree[prefix] = subtree.get(prefix, 0) + 1
    chosen: dict[str, int] = {}
    covered: dict[str, int] = {}
    for i in sorted(ids):
        parts = sites[i].module_path.split(".") if sites[i].module_path else []
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            covered[prefix] = covered.get(prefix, 0) + 1
    items: list[str] = []
    for i in sorted(ids):
        parts = sites[i].module_path.split(".") if sites[i].module_path else []
        whole = next(
            (
                ".".join(parts[:depth])
                for depth in range(1, len(parts) + 1)
                if covered[".".join(parts[:depth])] == subtree[".".join(parts[:depth])]
            ),
            None,
        )
        if whole is None or subtree[whole] == 1:
            items.append(str(sites[i]))
        elif whole not in chosen:
            chosen[whole] = subtree[whole]
            count = subtree[whole]
            items.append(f"{whole} ({count} site{'s' if count != 1 else ''})")
    text = ", ".join(items[:limit])
    if len(items) > limit:
        text += f" and {len(items) - limit} more"
    return f"{len(ids)} site{'s' if len(ids) != 1 else ''}: {text}"
