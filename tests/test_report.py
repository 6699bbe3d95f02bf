"""The run report: the model (tests, entries, checks, xdist parts, JSON and its schema), the
terminal tables, the records made from result objects, the points of a verdict's plot, the
per-test sink and the HTML page."""

from __future__ import annotations

import base64
import json
import re
import threading
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import numpy as np
import pytest

from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.report import KINDS, SCHEMA, RunReport
from pytest_fpcheck.report.html import INLINE_DETAILS, render
from pytest_fpcheck.report.records import (
    isolation_record,
    probe_record,
    record_of,
    tree_record,
)
from pytest_fpcheck.report.sink import collecting, publish
from pytest_fpcheck.report.terminal import ROW_LIMIT, section_lines, sections

REPORT_SCHEMA = json.loads((Path(__file__).parents[1] / "docs/report-schema.json").read_text())
ENVIRONMENT = {"versions": {"numpy": "2.0"}, "torch": {}, "triton": {"TRITON_INTERPRET": "1"}}
SETTINGS = {"enabled": True, "seed": 0}


def verdict(kind: str = "roundoff", **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "kind": kind,
        "outside": 0 if kind != "bug" else 4,
        "total": 128,
        "shape": [16, 8],
        "dtype": "float16",
        "two_sided": False,
        "fallback": False,
        "worst_index": [3, 1],
        "worst_excess": {"absolute": 0.5, "radii": float("inf"), "ulps": 2097152.0},
        "tightness_ulps": 0.5,
        "provenance": "aten.mm at model.py:3 (+0.0312)",
        "notes": [],
        "allclose_passed": False,
    }
    record.update(changes)
    return record


def dual_delta(accuracy: str = "equivalent", plot: str | None = None) -> dict[str, Any]:
    return {
        "custom": "naive_sum",
        "reference": "exact_sum",
        "oracle": "fp64",
        "metric": "max_hybrid",
        "n": 60,
        "seed": 1,
        "alpha": 0.01,
        "accuracy": accuracy,
        "stability": "equivalent",
        "accuracy_test": "wilcoxon",
        "stats": {
            "custom": {"mean": 1e-7, "max": 4e-7},
            "reference": {"mean": 2e-8, "max": 6e-8},
        },
        "mean_ratio": {"estimate": 5.0, "low": 4.1, "high": 6.2, "confidence": 0.95},
        "tests": {"wilcoxon": {"name": "Wilcoxon signed-rank", "statistic": 12.0, "pvalue": 1e-9}},
        "delta_custom": [1e-7] * 60,
        "delta_reference": [2e-8] * 60,
        "plot": plot,
    }


APPEARANCE = {
    "kind": "nan",
    "op": "aten.sqrt",
    "dtype": "float32",
    "count": 1,
    "calls": 1,
    "location": "test_nf.py:6",
    "module_path": "",
    "source_line": "y = torch.sqrt(x)",
    "summary": "NaN appeared in aten.sqrt at test_nf.py:6 [FP32]: 1 value in 1 call",
}
ISOLATION = {
    "sites": [
        {"op": "aten.exp", "location": "model.py:9 in Block.act", "source_line": "e = x.exp()"}
    ],
    "searches": 7,
    "enhance": "float64",
    "report": "1 site makes fn agree with the reference:\n  aten.exp at model.py:9",
}
PROBE = {
    "in_dtype": "float16",
    "out_dtype": "float32",
    "products_exact": True,
    "block_width": 4,
    "extra_bits": 3,
    "rounding": "toward-zero",
    "subnormal_inputs": True,
    "subnormal_outputs": False,
    "summary": "fused 4-term adds, 3 extra bits, truncation",
    "order": "sum of x[0:8] (8 terms): 2 blocks of 4 fused",
}
TREE = {"n": 4, "fanout": 2, "depth": 2, "dtype": "float32", "text": "pairwise over 4 terms"}


def full_report() -> RunReport:
    report = RunReport()
    report.add_verdict("t.py::test_half", verdict("roundoff"))
    report.add_verdict("t.py::test_bug", verdict("bug"))
    report.add_dual_delta("t.py::test_dd", dual_delta("custom_less_accurate"))
    report.add_appearance("t.py::test_nan", APPEARANCE)
    report.add_isolation("t.py::test_iso", ISOLATION)
    report.add_probe("t.py::test_probe", PROBE)
    report.add_tree("t.py::test_tree", TREE)
    return report


# -- the model ---------------------------------------------------------------------------------


def test_each_add_method_fills_its_kind_with_the_test_id() -> None:
    report = full_report()
    assert [kind.key for kind in KINDS] == list(report.entries)
    assert {key: [e["test"] for e in entries] for key, entries in report.entries.items()} == {
        "verdicts": ["t.py::test_half", "t.py::test_bug"],
        "appearances": ["t.py::test_nan"],
        "dual_deltas": ["t.py::test_dd"],
        "isolations": ["t.py::test_iso"],
        "probes": ["t.py::test_probe"],
        "trees": ["t.py::test_tree"],
    }
    assert report.entries["trees"][0] == {"test": "t.py::test_tree", **TREE}
    assert len(report) == 7


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda r: r.add_tree("t.py::x", {"n": 4, "depth": 2}),
            "record={'n': 4, 'depth': 2} (type dict) is not valid: expected a tree record: a dict "
            "with the fields n, fanout, depth, text (docs/report-schema.md); missing: fanout, text.",
        ),
        (
            lambda r: r.add_verdict("t.py::x", [("kind", "bug")]),
            "record=[('kind', 'bug')] (type list) is not valid: expected a verdict record: a dict "
            "with the fields kind, outside, total, dtype (docs/report-schema.md).",
        ),
        (
            lambda r: r.add_probe("t.py::x", {**PROBE, "test": "other"}),
            "expected a probe record: a dict with the fields in_dtype, block_width, extra_bits, "
            "rounding (docs/report-schema.md), without a 'test' field (the test id is passed apart).",
        ),
        (
            lambda r: r.add_appearance("", APPEARANCE),
            "test_id='' (type str) is not valid: expected a pytest node id (a non-empty str).",
        ),
        (
            lambda r: r.add("bugs", "t.py::x", {}),
            "kind='bugs' (type str) is not valid: expected one of verdicts, appearances, "
            "dual_deltas, isolations, probes, trees.",
        ),
    ],
)
def test_bad_records_are_refused_where_they_are_made(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call(RunReport())


def test_json_document_schema_counts_and_non_finite_numbers() -> None:
    document = json.loads(full_report().to_json(environment=ENVIRONMENT, settings=SETTINGS))
    assert document["schema"] == SCHEMA == {"name": "pytest-fpcheck-report", "version": 3}
    assert set(document["run"]) == {"created", "python", "platform", "workers"}
    jsonschema.validate(document, REPORT_SCHEMA)
    assert document["environment"] == ENVIRONMENT
    assert document["settings"] == SETTINGS
    assert document["counts"] == {
        "verdicts": {"bug": 1, "roundoff": 1},
        "appearances": {"nan": 1},
        "dual_deltas": {"custom_less_accurate": 1},
        "isolations": {"isolated": 1},
        "probes": {"toward-zero": 1},
        "trees": {"float32": 1},
    }
    bug, roundoff = document["verdicts"]  # sorted by test id
    assert (bug["test"], roundoff["test"]) == ("t.py::test_bug", "t.py::test_half")
    assert bug["worst_excess"]["radii"] == "inf"


def test_written_entries_are_sorted_by_test_keeping_each_tests_own_order() -> None:
    report = RunReport()
    report.add_tree("b.py::t", {**TREE, "n": 1})
    report.add_tree("a.py::t", {**TREE, "n": 2})
    report.add_tree("b.py::t", {**TREE, "n": 3})
    trees = report.to_dict(environment={}, settings={})["trees"]
    assert [(t["test"], t["n"]) for t in trees] == [("a.py::t", 2), ("b.py::t", 1), ("b.py::t", 3)]


def test_worker_parts_merge_into_the_same_entries_as_one_process() -> None:
    serial = full_report()
    first, second = RunReport(), RunReport()
    for key, entries in serial.entries.items():
        for number, entry in enumerate(entries):
            target = first if number % 2 == 0 else second
            target.add(key, entry["test"], {k: v for k, v in entry.items() if k != "test"})
    controller = RunReport()
    controller.merge(second.part())
    controller.merge(first.part())
    assert controller.workers == 2
    merged = controller.to_dict(environment={}, settings={})
    alone = serial.to_dict(environment={}, settings={})
    for key in ("run", "counts"):
        merged.pop(key), alone.pop(key)
    assert json.dumps(merged, sort_keys=True) == json.dumps(alone, sort_keys=True)


def test_a_part_holds_plain_values_that_execnet_can_carry() -> None:
    report = RunReport()
    report.add_verdict(
        "t.py::x",
        verdict(tightness_ulps=np.float32(0.5), shape=np.array([2, 3]), outside=np.int64(0)),
    )
    entry = report.part()["verdicts"][0]
    assert (entry["tightness_ulps"], entry["shape"], entry["outside"]) == (0.5, [2, 3], 0)
    assert type(entry["outside"]) is int
    assert entry["worst_excess"]["radii"] == float("inf")
    assert report.part().keys() == {"verdicts"}  # empty kinds are not sent


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (
            {"bugs": []},
            "part={'bugs': []} (type dict) is not valid: expected a dict of entry lists by kind "
            "(verdicts, appearances, dual_deltas, isolations, probes, trees).",
        ),
        (
            {"trees": [TREE]},
            "part['trees']={'n': 4, 'fanout': 2, 'depth': 2, 'dtype': 'float32', 'text': 'pairwise over ... "
            "(type dict) is not valid: expected entries with a 'test' field.",
        ),
        (
            {"trees": [{"test": "a.py::t", "n": 4}]},
            "missing: fanout, depth, text.",
        ),
    ],
)
def test_a_malformed_part_is_refused(part: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        RunReport().merge(part)


def test_write_picks_the_format_from_the_suffix(tmp_path: Path) -> None:
    report = full_report()
    report.write(tmp_path / "run.json", environment=ENVIRONMENT, settings=SETTINGS)
    report.write(tmp_path / "run.html", environment=ENVIRONMENT, settings=SETTINGS)
    assert json.loads((tmp_path / "run.json").read_text())["counts"]["trees"] == {"float32": 1}
    assert (tmp_path / "run.html").read_text().startswith("<!DOCTYPE html>")


# -- the terminal tables -----------------------------------------------------------------------


def test_verdict_table_bugs_first_with_counts() -> None:
    report = RunReport()
    report.add_verdict("t.py::test_a", verdict("roundoff"))
    report.add_verdict("t.py::test_b", verdict("exact", tightness_ulps=None))
    report.add_verdict("t.py::test_z", verdict("bug", tightness_ulps=0.0))
    [(title, lines)] = sections(report.entries, width=100, wide=False)
    assert title == "round-off verdicts"
    assert lines == [
        "verdict              outside dtype            radius  test",
        "bug                  4 / 128 float16               0  t.py::test_z",
        "roundoff             0 / 128 float16             0.5  t.py::test_a",
        "exact                0 / 128 float16               -  t.py::test_b",
        "radius: median radius of the round-off enclosure, in ULPs of the result's format",
        "3 verdicts: 1 bug, 1 roundoff, 1 exact",
    ]


def test_a_caught_bug_is_an_expected_bug_and_a_loose_enclosure_is_flagged() -> None:
    report = RunReport()
    report.add_verdict("t.py::test_y", verdict("bug", caught=True))
    report.add_verdict("t.py::test_l", verdict("roundoff", dtype="bfloat16", tightness_ulps=1.03e5))
    report.add_verdict("t.py::test_m", verdict("roundoff", dtype="bfloat16", tightness_ulps=127.9))
    [(_, lines)] = sections(report.entries, width=100, wide=False)
    assert lines[1:-2] == [
        "roundoff             0 / 128 bfloat16       1.03e+05  t.py::test_l",
        "    loose enclosure: median radius 1.03e+05 ULP >= 2**7 of bfloat16: a factor-2 error would pass",
        "roundoff             0 / 128 bfloat16          128  t.py::test_m",
        "expected-bug         4 / 128 float16             0.5  t.py::test_y",
    ]
    assert report.counts()["verdicts"] == {"roundoff": 2, "expected-bug": 1}


def test_wide_tables_add_columns() -> None:
    report = RunReport()
    report.add_verdict("t.py::test_a", verdict("bug"))
    lines = section_lines(KINDS[0], report.entries["verdicts"], width=160, wide=True)
    assert lines[:2] == [
        "verdict              outside dtype            radius          shape worst ULP allclose  test",
        "bug                  4 / 128 float16             0.5           16x8   2.1e+06 failed    t.py::test_a",
    ]


def test_every_kind_fits_100_columns_and_cuts_long_ids_from_the_left() -> None:
    report = RunReport()
    long_id = "tests/kernels/test_attention.py::test_flash_attention[" + "x" * 120 + "-tail]"
    for kind, record in [
        ("verdicts", verdict("bug")),
        ("dual_deltas", dual_delta()),
        ("appearances", {**APPEARANCE, "source_line": "y = " + "z" * 200}),
        ("isolations", ISOLATION),
        ("probes", PROBE),
        ("trees", TREE),
    ]:
        report.add(kind, long_id, record)
    found = sections(report.entries, width=100, wide=False)
    assert [title for title, _ in found] == [kind.title for kind in KINDS]
    for _, lines in found:
        assert max(len(line) for line in lines) <= 100
        assert any("  ...xxx" in line and line.endswith("x-tail]") for line in lines)
    wide = sections(report.entries, width=160, wide=True)
    assert max(len(line) for _, lines in wide for line in lines) <= 160


def test_sublines_name_the_site() -> None:
    report = RunReport()
    report.add_appearance("t.py::test_nan", APPEARANCE)
    report.add_isolation("t.py::test_iso", {**ISOLATION, "sites": ISOLATION["sites"] * 3})
    report.add_isolation("t.py::test_none", {**ISOLATION, "sites": []})
    lines = dict(sections(report.entries, width=100, wide=False))
    assert lines["non-finite values that appeared"] == [
        "kind  op                        values  test",
        "NaN   aten.sqrt                      1  t.py::test_nan",
        "    at test_nf.py:6: y = torch.sqrt(x)",
        "1 appearance: 1 nan",
    ]
    assert lines["isolated causes"] == [
        "sites searches enhance   test",
        "    0        7 float64   t.py::test_none",
        "    no site isolated",
        "    3        7 float64   t.py::test_iso",
        "    cause: aten.exp at model.py:9 in Block.act (+2 more)",
        "2 isolations: 1 not isolated, 1 isolated",
    ]


def test_long_tables_are_cut_without_v_but_keep_every_bug() -> None:
    report = RunReport()
    for i in range(ROW_LIMIT + 5):
        report.add_verdict(f"t.py::test_ok[{i:02d}]", verdict("roundoff"))
    for i in range(3):
        report.add_verdict(f"t.py::test_bug[{i}]", verdict("bug"))
    lines = section_lines(KINDS[0], report.entries["verdicts"], width=100, wide=False)
    rows = lines[1 : 1 + ROW_LIMIT]
    assert [row.split()[0] for row in rows[:3]] == ["bug"] * 3
    assert lines[1 + ROW_LIMIT] == "... and 8 more (-v lists every one)"
    assert lines[-1] == "28 verdicts: 3 bug, 25 roundoff"
    wide = section_lines(KINDS[0], report.entries["verdicts"], width=160, wide=True)
    assert len(wide) == 1 + 28 + 2


# -- records from result objects ---------------------------------------------------------------


def test_tree_record_from_a_summation_tree() -> None:
    from pytest_fpcheck.diagnostics.order import SummationTree

    tree = SummationTree.from_nested((((0, 1), 2), 3), dtype="float16")
    record = tree_record(tree, impl="np.sum", algorithm="fprev")
    assert record == {
        "n": 4,
        "fanout": 2,
        "depth": 3,
        "dtype": "float16",
        "text": tree.to_text(),
        "impl": "np.sum",
        "algorithm": "fprev",
    }
    RunReport().add_tree("t.py::x", record)


def test_appearance_record_from_a_watch_event() -> None:
    pytest.importorskip("torch")
    from pytest_fpcheck.diagnostics.nonfinite.events import Event

    event = Event(
        "aten.div", "Block.attn", None, "float16", "inf", 0, count=3, calls=1, appeared=True
    )
    record = record_of("appearances", event)
    assert record == {
        "kind": "inf",
        "op": "aten.div",
        "dtype": "float16",
        "count": 3,
        "calls": 1,
        "location": event.location,
        "module_path": "Block.attn",
        "source_line": "",
        "summary": event.summary(),
    }


def test_isolation_and_probe_records_read_the_api_attributes() -> None:
    site = SimpleNamespace(
        op="aten.exp", module_path="Block", location="model.py:9", source_line="e"
    )
    isolation = SimpleNamespace(sites=[site], searches=[{}, {}, {}], report=lambda: "text")
    assert isolation_record(isolation, enhance="float64") == {
        "sites": [
            {
                "op": "aten.exp",
                "module_path": "Block",
                "location": "model.py:9",
                "source_line": "e",
                "text": str(site),
            }
        ],
        "searches": 3,
        "report": "text",
        "enhance": "float64",
    }
    from pytest_fpcheck.diagnostics.order import SummationTree

    order = SummationTree.from_nested((0, 1, 2, 3))
    features = SimpleNamespace(
        products_exact=True,
        block_width=4,
        extra_bits=3,
        rounding=None,
        subnormal_inputs=True,
        subnormal_outputs=True,
        order=order,
        summary=lambda: "summary text",
    )
    record = probe_record(features, in_dtype="float16", out_dtype="float32")
    assert record["rounding"] is None
    assert (record["order"], record["summary"]) == (order.to_text(), "summary text")
    report = RunReport()
    report.add_probe("t.py::x", record)
    assert report.counts()["probes"] == {"undecided": 1}


def test_record_of_takes_a_mapping_as_the_record_and_adds_the_context() -> None:
    assert record_of("trees", TREE, {"impl": "sum"}) == {**TREE, "impl": "sum"}
    with pytest.raises(InvalidArgument, match=re.escape("kind='tree' (type str) is not valid")):
        record_of("tree", TREE)
    with pytest.raises(
        InvalidArgument, match=re.escape("expected an object with a to_dict() method.")
    ):
        record_of("verdicts", object())


# -- the sink ----------------------------------------------------------------------------------


def test_publish_reaches_the_collectors_of_this_thread_only() -> None:
    publish("trees", "before")  # no collector: dropped
    with collecting() as outer:
        publish("trees", "a", impl="sum")
        with collecting() as inner:
            publish("probes", "b")
            other = threading.Thread(target=publish, args=("trees", "elsewhere"))
            other.start()
            other.join()
        publish("trees", "c")
    assert [(p.kind, p.result, p.context) for p in outer] == [
        ("trees", "a", {"impl": "sum"}),
        ("probes", "b", {}),
        ("trees", "c", {}),
    ]
    assert [p.result for p in inner] == ["b"]


def test_publish_refuses_an_unknown_kind() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "kind='order' (type str) is not valid: expected one of verdicts, appearances, "
            "dual_deltas, isolations, probes, trees."
        ),
    ):
        publish("order", None)


# -- the HTML page -----------------------------------------------------------------------------


class _Page(HTMLParser):
    """The ids, links and resource addresses of a page, and the script's data."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.sources: list[str] = []
        self.data: dict[str, Any] = {}
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if named.get("id"):
            self.ids.add(str(named["id"]))
        if tag == "a" and named.get("href"):
            self.links.append(str(named["href"]))
        if tag in ("img", "script", "link", "iframe") and (named.get("src") or named.get("href")):
            self.sources.append(str(named.get("src") or named.get("href")))
        self._in_data = named.get("id") == "fpcheck-data"

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data = json.loads(data)
            self._in_data = False

    def rows(self) -> dict[str, list[list[Any]]]:
        return {key: kind["rows"] for key, kind in self.data.items()}

    def anchors(self) -> list[str]:
        """Where each row's link goes."""
        return [f"{key}-{row[2]}" for key, rows in self.rows().items() for row in rows]


def page_of(report: RunReport) -> tuple[str, _Page]:
    document = json.loads(report.to_json(environment=ENVIRONMENT, settings=SETTINGS))
    text = render(document)
    page = _Page()
    page.feed(text)
    return text, page


def test_page_is_self_contained_and_every_row_links_to_its_details(tmp_path: Path) -> None:
    png = bytes.fromhex("89504e470d0a1a0a") + b"figure bytes"
    (tmp_path / "dd.png").write_bytes(png)
    report = full_report()
    report.add_dual_delta("t.py::test_dd2", dual_delta(plot=str(tmp_path / "dd.png")))
    text, page = page_of(report)
    assert {key: len(rows) for key, rows in page.rows().items()} == {
        "verdicts": 2,
        "appearances": 1,
        "dual_deltas": 2,
        "isolations": 1,
        "probes": 1,
        "trees": 1,
    }
    assert page.sources == ["data:image/png;base64," + base64.b64encode(png).decode()]
    assert "http://" not in text
    assert "https://" not in text
    assert all(anchor in page.ids for anchor in page.anchors())
    assert "no figure (matplotlib is not installed)" in text  # the first comparison has no plot


def test_rows_are_sorted_bugs_first_with_their_cells() -> None:
    _, page = page_of(full_report())
    bug, roundoff = page.rows()["verdicts"]
    # status, rank 0?, index of the entry, test id, then the columns
    head = ["bug", True, 0, "t.py::test_bug"]
    assert bug == [*head, "bug", "4 / 128", "float16", "0.5", "16x8", "2.1e+06", "failed"]
    assert roundoff[:5] == ["roundoff", False, 1, "t.py::test_half", "roundoff"]
    assert page.data["verdicts"]["right"] == [False, True, False, True, True, True, False]


def test_many_entries_keep_their_details_in_the_data() -> None:
    report = RunReport()
    for i in range(INLINE_DETAILS + 1):
        report.add_verdict(f"t.py::test[{i}]", verdict())
    _, page = page_of(report)
    details = page.data["verdicts"]["details"]
    assert sorted(details) == sorted(page.anchors())
    assert not any(anchor in page.ids for anchor in page.anchors())
    _, _, index, test, *_ = page.rows()["verdicts"][7]
    block = details[f"verdicts-{index}"]
    assert block.startswith(f'<details class="entry" id="verdicts-{index}">')
    assert f"</span> {test}</summary>" in block


def test_page_shows_the_environment_texts_and_statistics() -> None:
    text, _ = page_of(full_report())
    assert "<th>TRITON_INTERPRET</th><td>1</td>" in text
    assert "<pre>pairwise over 4 terms</pre>" in text
    assert "<pre>1 site makes fn agree with the reference:\n  aten.exp at model.py:9</pre>" in text
    # statistics as a table: one row per side, one column per statistic
    assert "<tr><th></th><th>mean</th><th>max</th></tr><tr><th>custom</th><td>1e-07</td>" in text
    assert "delta_custom" not in text  # the per-trial errors are left out
    assert '<option value="custom_less_accurate">' in text


def test_page_escapes_what_tests_put_in_their_ids_and_records() -> None:
    report = RunReport()
    for _ in range(INLINE_DETAILS + 1):  # the details go into the script's data
        report.add_verdict("t.py::test[</script><b>]", verdict("bug", provenance="a<b"))
    text, page = page_of(report)
    assert "</script><b>" not in text
    assert "<b>" not in text
    assert page.rows()["verdicts"][0][3] == "t.py::test[</script><b>]"
    assert "<pre>a&lt;b</pre>" in page.data["verdicts"]["details"]["verdicts-0"]


def test_an_empty_kind_says_so() -> None:
    text, page = page_of(RunReport())
    assert text.count("none in this run") == len(KINDS)
    assert page.data == {}
