"""The text of an isolation: :meth:`Isolation.report` and the note the pytest plugin appends to a
failure message (CIEL section 3.2: the culprit sites, and the configurations that found them).
Pure functions of the plain findings (:mod:`.findings`, imported downward: the result class that
calls them is not imported here), one layout:

    isolate (CIEL): <outcome headline>
      agreement: <what agrees means, with the tolerances>
      plain run: <error it left>
      with the culprit sites enhanced: <error it left>
    culprit sites (1-minimal: ...):
      <site> [<dtype>]
    configurations run: <n>
      <number> <stage> <resolved?> <error it left>
          enhanced <which sites>
    notes: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .findings import Findings

__all__ = ["headline", "isolation_note", "report_text"]


def headline(isolation: Findings) -> str:
    """One sentence: what the isolation found."""
    total = len(isolation.program_sites)
    enhance = isolation.enhance
    if isolation.outcome == "consistent":
        return "isolate (CIEL): the plain run already agrees: there is no inconsistency to isolate"
    if isolation.outcome == "unresolved":
        if total == 0:
            return (
                "isolate (CIEL): the program ran no operation site narrower than "
                f"{enhance}: precision cannot be the cause"
            )
        return (
            f"isolate (CIEL): with all {total} operation sites in {enhance} the inconsistency "
            "remains: its cause is not precision (a bug in the program, or in the reference)"
        )
    k = len(isolation.sites)
    together = " together" if k > 1 else ""
    return (
        f"isolate (CIEL): {k} of {total} operation site{'s' if total != 1 else ''}, in {enhance}, "
        f"resolve the inconsistency{together}"
    )


def _sites_lines(isolation: Findings) -> list[str]:
    if len(isolation.sites) > 1:
        head = (
            "culprit sites (1-minimal: leaving any one of them as written leaves the "
            "inconsistency):"
        )
    else:
        head = "culprit site:"
    return [head, *(f"  {site} [{site.dtype}]" for site in isolation.sites)]


def report_text(isolation: Findings) -> str:
    """The full report: headline, criterion, errors, sites, every configuration, notes."""
    lines = [headline(isolation), f"  agreement: {isolation.criterion}"]
    lines.append(f"  plain run: {isolation.plain.detail}")
    if isolation.fixed is not None:
        lines.append(f"  with the culprit sites enhanced: {isolation.fixed.detail}")
    if isolation.sites:
        lines.extend(_sites_lines(isolation))
    if isolation.configurations:
        lines.append(f"configurations run: {isolation.searches}")
        for c in isolation.configurations:
            state = "resolved" if c.resolved else "unresolved"
            lines.append(f"  {c.number:>3} {c.stage:<13} {state:<10} {c.detail}")
            lines.append(f"        enhanced {c.description}")
    if isolation.notes:
        lines.append("notes:")
        lines.extend(f"  {note}" for note in isolation.notes)
    return "\n".join(lines)


def isolation_note(isolation: Findings) -> str:
    """The block ``--fpcheck-isolate`` appends to a failure message: the headline, the sites
    and the number of configurations (``Isolation.report()`` has each one)."""
    lines = [f"{headline(isolation)} ({isolation.searches} configurations run)"]
    if isolation.sites:
        lines.extend(_sites_lines(isolation))
        lines.append(
            "(fp.isolate(fn, *args, reference=...) reports every configuration, and its "
            ".enhanced(fn) runs fn with just these sites enhanced, to confirm the fix)"
        )
    lines.extend(f"note: {note}" for note in isolation.notes)
    return "\n".join(lines)
