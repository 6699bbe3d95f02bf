"""The run report (API section 8): one model of what a run found (:mod:`.model`), its kinds
(:mod:`.kinds`), the terminal summary (:mod:`.terminal`), the HTML page (:mod:`.html`), the
records made from result objects (:mod:`.records`) and the per-test collection (:mod:`.sink`).
"""

from __future__ import annotations

from .kinds import KINDS, Kind
from .model import SCHEMA, SCHEMA_NAME, SCHEMA_VERSION, RunReport, read_document

__all__ = ["KINDS", "SCHEMA", "SCHEMA_NAME", "SCHEMA_VERSION", "Kind", "RunReport", "read_document"]
