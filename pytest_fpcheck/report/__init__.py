"""The run report (API section 8): one model of what a run found (:mod:`.model`), its kinds
(:mod:`.kinds`), the records made from result objects (:mod:`.records`), a verdict's plot points
(:mod:`.points`), each test's outcome (:mod:`.outcomes`), the terminal summary
(:mod:`.terminal`) and the HTML page (:mod:`.html`: the page and its data; :mod:`.details` and
:mod:`.verdict_parts`: each entry's details; :mod:`.markup`: the small HTML builders they share;
:mod:`.scatter`: a verdict's plot; ``static/``: the page's style and script).
"""

from __future__ import annotations

from .kinds import KINDS, Kind
from .model import SCHEMA, SCHEMA_NAME, SCHEMA_VERSION, RunReport, read_document

__all__ = ["KINDS", "SCHEMA", "SCHEMA_NAME", "SCHEMA_VERSION", "Kind", "RunReport", "read_document"]
