"""The kinds of entry a run report holds, and how each is shown (API section 8).

A report entry is one result of a test: a round-off verdict (RENDER, section III-A), a
module-by-module comparison (API section 9), a dual-delta comparison (Dual-Delta paper, section 4), a non-finite appearance (GPU-FPX, section
3.2), an isolation (CIEL, section 3), probed matrix-multiply features (FTTN) or a revealed
summation tree (FPRev, section 4). Each :class:`Kind` says which record fields it needs, how an
entry ranks (0: shown first: bugs, worse implementations, appearances), the value its table is
filtered and counted by (its *status*), and its table columns. The terminal summary, the JSON
counts and the HTML page are all drawn from these descriptions, so a new kind is one more
:class:`Kind` here. ``docs/report-schema.md`` documents every record field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KINDS",
    "TESTS",
    "Column",
    "Kind",
    "kind_named",
    "loose_warning",
    "number",
    "shape_text",
    "verdict_status",
    "verdict_warning",
]

Record = Mapping[str, Any]


def number(value: Any, spec: str = ".3g") -> str:
    """A float formatted by ``spec``; an int in full; "-" for a missing value, the text of a
    non-finite one ("inf", "nan": JSON writes them as strings), ``str`` for anything else."""
    if value is None:
        return "-"
    if not isinstance(value, float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return format(value, spec)


def shape_text(shape: Any) -> str:
    """``[16, 8]`` as ``16x8``; a scalar's ``[]`` as ``scalar``."""
    if not isinstance(shape, (list, tuple)):
        return "-" if shape is None else str(shape)
    return "x".join(str(extent) for extent in shape) if shape else "scalar"


def _field(name: str) -> Callable[[Record], str]:
    return lambda record: number(record.get(name))


def _yes_no(name: str) -> Callable[[Record], str]:
    def text(record: Record) -> str:
        value = record.get(name)
        return "-" if value is None else ("yes" if value else "no")

    return text


@dataclass(frozen=True)
class Column:
    """One table column: its header, how a record's cell reads, its terminal width.

    ``show`` is "always" (terminal and HTML), "wide" (the terminal under ``-v``, and HTML) or
    "html" (the HTML page only)."""

    header: str
    value: Callable[[Record], str]
    width: int
    right: bool = False
    show: str = "always"


@dataclass(frozen=True)
class Kind:
    """One kind of report entry (module docstring).

    ``key`` is its JSON key, ``noun`` what one entry is called (``add_verdict`` adds to
    ``verdicts``);
    ``required`` the record fields it cannot be shown without; ``texts`` the fields the HTML page
    shows as preformatted text; ``hidden`` fields it leaves out of the HTML details (long
    arrays); ``first`` the fields its HTML details list first (a dual-delta's figure);
    ``subline`` an optional indented line below each terminal row; ``warning`` a text that
    marks an entry whose status reads better than it is (a loose round-off enclosure), or ""."""

    key: str
    noun: str
    title: str
    required: tuple[str, ...]
    status: Callable[[Record], str]
    rank: Callable[[Record], int]
    columns: tuple[Column, ...]
    note: str = ""
    subline: Callable[[Record], str] | None = None
    warning: Callable[[Record], str] | None = None
    texts: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    first: tuple[str, ...] = ()


# -- verdicts ------------------------------------------------------------------------------------

_VERDICT_RANK = {
    "bug": 0,
    "inconclusive": 1,
    "close": 2,
    "roundoff": 3,
    "expected-bug": 4,
    "exact": 5,
}


def verdict_status(record: Record) -> str:
    """The verdict's kind, except that a bug the test caught (``pytest.raises`` around the
    check: the record's ``caught``) is an ``expected-bug``."""
    kind = str(record["kind"])
    return "expected-bug" if kind == "bug" and record.get("caught") else kind


def loose_warning(record: Record) -> str:
    """A warning for a passing verdict whose enclosure is too wide to reject a factor-2 error:
    "" when there is none.

    With ``p`` the precision of the result's format, ``|x| < 2**p ulp(x)``; a median radius of
    ``r >= 2**(p - 1)`` ULPs is then at least ``|x| / 2`` at the median element, so its
    enclosure holds ``x / 2`` (and more): a green verdict there says little."""
    from ..formats import FORMATS

    radius = record.get("tightness_ulps")
    fmt = FORMATS.get(str(record.get("dtype")))
    if record.get("kind") != "roundoff" or fmt is None:
        return ""
    if not isinstance(radius, (int, float)) or not radius >= 2.0 ** (fmt.precision - 1):
        return ""
    return (
        f"loose enclosure: median radius {number(radius)} ULP >= 2**{fmt.precision - 1} of "
        f"{fmt.name}: a factor-2 error would pass"
    )


def verdict_warning(record: Record) -> str:
    """What a reader of a verdict must be warned of: why it is inconclusive (API section 9), or
    a loose enclosure (:func:`loose_warning`); "" for neither."""
    if record.get("kind") == "inconclusive":
        reason = record.get("inconclusive_reason")
        return f"inconclusive: {reason}" if reason else "inconclusive: the enclosure could not tell"
    return loose_warning(record)


def _outside(record: Record) -> str:
    return f"{record.get('outside', '?')} / {record.get('total', '?')}"


def _worst_ulps(record: Record) -> str:
    excess = record.get("worst_excess")
    return number(excess.get("ulps")) if isinstance(excess, Mapping) else "-"


def _allclose(record: Record) -> str:
    passed = record.get("allclose_passed")
    return "-" if passed is None else ("passed" if passed else "failed")


VERDICTS = Kind(
    key="verdicts",
    noun="verdict",
    title="round-off verdicts",
    required=("kind", "outside", "total", "dtype"),
    status=verdict_status,
    rank=lambda r: _VERDICT_RANK.get(verdict_status(r), 9),
    columns=(
        Column("verdict", verdict_status, 12),
        Column("outside", _outside, 15, right=True),
        Column("dtype", lambda r: str(r["dtype"]), 14),
        Column("radius", _field("tightness_ulps"), 8, right=True),
        Column("shape", lambda r: shape_text(r.get("shape")), 14, right=True, show="wide"),
        Column("worst ULP", _worst_ulps, 9, right=True, show="wide"),
        Column("allclose", _allclose, 8, show="wide"),
    ),
    note="radius: median radius of the round-off enclosure, in ULPs of the result's format",
    subline=verdict_warning,
    warning=verdict_warning,
    texts=("provenance",),
)

# -- module-by-module comparisons -----------------------------------------------------------------


MODULES = Kind(
    key="modules",
    noun="module comparison",
    title="module-by-module comparisons",
    required=("kind", "calls"),
    status=verdict_status,
    rank=lambda r: _VERDICT_RANK.get(verdict_status(r), 9),
    columns=(
        Column("verdict", verdict_status, 12),
        Column("calls", lambda r: str(len(r["calls"])), 5, right=True),
        Column("first bug", lambda r: str(r.get("first_bug") or "-"), 28),
        Column("reference", lambda r: str(r.get("reference", "-")), 16, show="wide"),
    ),
    note="calls: module calls judged, each on the reference's inputs (fp.compare_modules)",
    subline=verdict_warning,
    warning=verdict_warning,
)

# -- dual-delta comparisons ------------------------------------------------------------------------


def _dual_delta_failed(record: Record) -> bool:
    return (
        record.get("accuracy") == "custom_less_accurate"
        or record.get("stability") == "custom_less_stable"
    )


def _mean_ratio(record: Record) -> str:
    ratio = record.get("mean_ratio")
    return number(ratio.get("estimate"), ".4g") if isinstance(ratio, Mapping) else "-"


DUAL_DELTAS = Kind(
    key="dual_deltas",
    noun="dual_delta",
    title="dual-delta comparisons",
    required=("accuracy", "stability", "n"),
    status=lambda r: str(r["accuracy"]),
    rank=lambda r: 0 if _dual_delta_failed(r) else 1,
    columns=(
        Column("accuracy", lambda r: str(r["accuracy"]), 21),
        Column("stability", lambda r: str(r["stability"]), 19),
        Column("ratio", _mean_ratio, 9, right=True),
        Column("n", _field("n"), 6, right=True),
        Column("metric", lambda r: str(r.get("metric", "-")), 10, show="wide"),
        Column("oracle", lambda r: str(r.get("oracle", "-")), 8, show="wide"),
        Column("custom", lambda r: str(r.get("custom", "-")), 20, show="wide"),
    ),
    note="ratio: mean error of custom / mean error of reference, against the oracle",
    hidden=("delta_custom", "delta_reference"),
    first=("plot", "accuracy", "stability", "mean_ratio", "stats", "tests"),
)

# -- non-finite appearances ----------------------------------------------------------------------

_NONFINITE_NAMES = {"nan": "NaN", "inf": "Inf", "div0": "div0", "subnormal": "subn"}


def _where(record: Record) -> str:
    location = record.get("location")
    source = record.get("source_line")
    if location and source:
        return f"at {location}: {source}"
    return f"at {location}" if location else str(source or "")


APPEARANCES = Kind(
    key="appearances",
    noun="appearance",
    title="non-finite values that appeared",
    required=("kind", "summary"),
    status=lambda r: str(r["kind"]),
    rank=lambda r: 1 if r.get("watch") == "test" else 0,  # the test watched for it itself
    columns=(
        Column("kind", lambda r: _NONFINITE_NAMES.get(str(r["kind"]), str(r["kind"])), 5),
        Column("op", lambda r: str(r.get("op", "-")), 24),
        Column("values", _field("count"), 7, right=True),
        Column("dtype", lambda r: str(r.get("dtype", "-")), 9, show="wide"),
        Column("calls", _field("calls"), 6, right=True, show="wide"),
        Column("location", lambda r: str(r.get("location", "-")), 0, show="html"),
        Column("source line", lambda r: str(r.get("source_line", "")), 0, show="html"),
    ),
    subline=_where,
)

# -- gaps of tracking -----------------------------------------------------------------------------


def _first_line(record: Record) -> str:
    file, line = record.get("file"), record.get("line")
    if not file:
        return "-"
    return f"{str(file).replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


GAPS = Kind(
    key="gaps",
    noun="gap",
    title="operations tracking could not bound (their results have no bounds)",
    required=("op", "reason", "count"),
    status=lambda r: str(r["reason"]),
    rank=lambda r: 0 if r["reason"] == "internal failure" else 1,
    columns=(
        Column("reason", lambda r: str(r["reason"]), 16),
        Column("op", lambda r: str(r["op"]), 36),
        Column("calls", _field("count"), 6, right=True),
        Column("first line", _first_line, 24),
    ),
    note="a verdict on what such an operation produced, or on what is computed from it, is "
    "inconclusive; --fpcheck-strict raises instead",
    subline=lambda r: str(r.get("message", "")).splitlines()[0] if r.get("message") else "",
    texts=("message", "traceback"),
)

# -- isolations ------------------------------------------------------------------------------------


def _site_text(site: Any) -> str:
    """``op at location`` when the site record has them, else its ``text``."""
    if not isinstance(site, Mapping):
        return str(site)
    if "op" in site:
        location = site.get("location")
        return f"{site['op']} at {location}" if location else str(site["op"])
    return str(site.get("text", "?"))


def _first_site(record: Record) -> str:
    sites = record["sites"]
    if not sites:
        return "no site isolated"
    more = f" (+{len(sites) - 1} more)" if len(sites) > 1 else ""
    return f"cause: {_site_text(sites[0])}{more}"


ISOLATIONS = Kind(
    key="isolations",
    noun="isolation",
    title="isolated causes",
    required=("sites", "searches"),
    status=lambda r: "isolated" if r["sites"] else "not isolated",
    rank=lambda r: 1 if r["sites"] else 0,
    columns=(
        Column("sites", lambda r: str(len(r["sites"])), 5, right=True),
        Column("searches", _field("searches"), 8, right=True),
        Column("enhance", lambda r: str(r.get("enhance", "-")), 8),
        Column(
            "first site", lambda r: _site_text(r["sites"][0]) if r["sites"] else "-", 0, show="html"
        ),
    ),
    subline=_first_site,
    texts=("report",),
)

# -- probed matrix-multiply features ---------------------------------------------------------------

PROBES = Kind(
    key="probes",
    noun="probe",
    title="matrix-multiply features",
    required=("in_dtype", "block_width", "extra_bits", "rounding"),
    status=lambda r: str(r["rounding"] or "undecided"),
    rank=lambda r: 1,
    columns=(
        Column("in", lambda r: str(r["in_dtype"]), 9),
        Column("out", lambda r: str(r.get("out_dtype") or "-"), 9),
        Column("width", _field("block_width"), 5, right=True),
        Column("extra", _field("extra_bits"), 5, right=True),
        Column("rounding", lambda r: str(r["rounding"] or "undecided"), 13),
        Column("exact products", _yes_no("products_exact"), 14, show="wide"),
        Column("subnormal in", _yes_no("subnormal_inputs"), 12, show="wide"),
        Column("subnormal out", _yes_no("subnormal_outputs"), 13, show="wide"),
    ),
    note="width: terms fused per addition; extra: extra bits of the accumulator's alignment",
    texts=("summary", "order"),
)

# -- revealed summation trees ----------------------------------------------------------------------

TREES = Kind(
    key="trees",
    noun="tree",
    title="revealed summation orders",
    required=("n", "fanout", "depth", "text"),
    status=lambda r: str(r.get("dtype", "-")),
    rank=lambda r: 1,
    columns=(
        Column("n", _field("n"), 6, right=True),
        Column("fanout", _field("fanout"), 6, right=True),
        Column("depth", _field("depth"), 5, right=True),
        Column("dtype", lambda r: str(r.get("dtype", "-")), 13),
        Column("impl", lambda r: str(r.get("impl", "-")), 20, show="wide"),
        Column("algorithm", lambda r: str(r.get("algorithm", "-")), 9, show="wide"),
    ),
    note="fanout: largest number of terms added by one node (2: plain additions)",
    texts=("text",),
    hidden=("dot",),
)

#: every kind, in the order the summary and the page show them: bugs and appearances first
KINDS: tuple[Kind, ...] = (
    VERDICTS,
    MODULES,
    APPEARANCES,
    GAPS,
    DUAL_DELTAS,
    ISOLATIONS,
    PROBES,
    TREES,
)
_BY_KEY = {kind.key: kind for kind in KINDS}


# -- the tests of the run ---------------------------------------------------------------------------

#: test outcomes, most severe first: pytest's, and ``expected-bug`` for a passed test whose
#: round-off check raised inside ``pytest.raises``
OUTCOMES = ("failed", "error", "xpassed", "expected-bug", "passed", "xfailed", "skipped")


_OUTCOME_RANK = {outcome: max(0, OUTCOMES.index(outcome) - 1) for outcome in OUTCOMES}


def _findings(record: Record) -> str:
    """``2 verdicts (1 bug), 1 appearance``: what fpcheck found in the test."""
    found = record.get("findings")
    if not isinstance(found, Mapping):
        return ""
    parts = []
    for kind in KINDS:
        by_status = found.get(kind.key)
        if not by_status:
            continue
        total = sum(by_status.values())
        noun = kind.noun.replace("_", "-") + ("" if total == 1 else "s")
        detail = ", ".join(f"{count} {status}" for status, count in by_status.items())
        parts.append(f"{total} {noun} ({detail})")
    return "; ".join(parts)


#: the run's tests: not a kind of result (the terminal has pytest's own summary), but shown
#: in the HTML page as a kind is, first
TESTS = Kind(
    key="tests",
    noun="test",
    title="tests",
    required=("outcome", "duration"),
    status=lambda r: str(r["outcome"]),
    rank=lambda r: _OUTCOME_RANK.get(str(r["outcome"]), 9),
    columns=(
        Column("outcome", lambda r: str(r["outcome"]), 12),
        Column("duration (s)", lambda r: number(r.get("duration"), ".3f"), 10, right=True),
        Column("fpcheck findings", _findings, 0),
    ),
    texts=("traceback",),
)


def kind_named(key: str) -> Kind | None:
    """The kind whose JSON key is ``key``, or None."""
    return _BY_KEY.get(key)
