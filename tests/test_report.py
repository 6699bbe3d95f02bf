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

import pytest_fpcheck as fp
from pytest_fpcheck.assertions.sink import KEYS, collecting, publish
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.report import KINDS, SCHEMA, RunReport, read_document
from pytest_fpcheck.report.html import (
    INLINE_DETAILS,
    embedded,
    findings_fragment,
    findings_summary,
    render,
)
from pytest_fpcheck.report.points import POINTS, element_points
from pytest_fpcheck.report.records import (
    isolation_record,
    probe_record,
    provenance_sites,
    record_of,
    tree_record,
    verdict_record,
)
from pytest_fpcheck.report.scatter import scatter_svg
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


def _call(index: int, name: str, depth: int, kind: str, outside: int) -> dict[str, Any]:
    return {
        "index": index,
        "name": name,
        "module_class": name.rsplit(".", 1)[-1].title(),
        "depth": depth,
        "leaf": depth > 0,
        "kind": kind,
        "outside": outside,
        "total": 64,
        "resolution": 0.01,
        "widest": "aten.mm at model.py:3",
        "problems": [],
        "unjudged": None,
    }


MODULES = {
    "kind": "bug",
    "reference": "torch.float64",
    "isolate": True,
    "leaves_only": False,
    "max_resolution": 0.1,
    "counts": {"exact": 0, "roundoff": 1, "close": 0, "inconclusive": 0, "bug": 2},
    "first_bug": "Block.norm",
    "calls": [
        _call(0, "Block", 0, "bug", 60),
        _call(1, "Block.norm", 1, "bug", 60),
        _call(2, "Block.fc", 1, "roundoff", 0),
    ],
}


GAP = {
    "op": "aten.pow.Scalar",
    "reason": "no rule",
    "count": 3,
    "site": "aten.pow at rotary.py:12 in Rotary",
    "file": "/src/rotary.py",
    "line": 12,
    "message": "no interval rule for operation 'aten.pow.Scalar' at rotary.py:12 in Rotary",
}


def full_report() -> RunReport:
    report = RunReport()
    report.add_verdict("t.py::test_half", verdict("roundoff"))
    report.add_verdict("t.py::test_bug", verdict("bug"))
    report.add_dual_delta("t.py::test_dd", dual_delta("custom_less_accurate"))
    report.add_appearance("t.py::test_nan", APPEARANCE)
    report.add_isolation("t.py::test_iso", ISOLATION)
    report.add_probe("t.py::test_probe", PROBE)
    report.add_tree("t.py::test_tree", TREE)
    report.add("modules", "t.py::test_modules", MODULES)
    report.add("gaps", "t.py::test_gap", GAP)
    return report


# -- the model ---------------------------------------------------------------------------------


def test_each_add_method_fills_its_kind_with_the_test_id() -> None:
    report = full_report()
    assert [kind.key for kind in KINDS] == list(report.entries)
    assert {key: [e["test"] for e in entries] for key, entries in report.entries.items()} == {
        "verdicts": ["t.py::test_half", "t.py::test_bug"],
        "modules": ["t.py::test_modules"],
        "appearances": ["t.py::test_nan"],
        "gaps": ["t.py::test_gap"],
        "dual_deltas": ["t.py::test_dd"],
        "isolations": ["t.py::test_iso"],
        "probes": ["t.py::test_probe"],
        "trees": ["t.py::test_tree"],
    }
    assert report.entries["trees"][0] == {"test": "t.py::test_tree", **TREE}
    assert len(report) == 9


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
            "kind='bugs' (type str) is not valid: expected one of verdicts, modules, appearances, "
            "gaps, dual_deltas, isolations, probes, trees.",
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
        "modules": {"bug": 1},
        "appearances": {"nan": 1},
        "gaps": {"no rule": 1},
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
            "(verdicts, modules, appearances, gaps, dual_deltas, isolations, probes, trees).",
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
        "roundoff             0 / 128 bfloat16            128  t.py::test_m",
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
        ("modules", MODULES),
        ("dual_deltas", dual_delta()),
        ("appearances", {**APPEARANCE, "source_line": "y = " + "z" * 200}),
        ("gaps", GAP),
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


def test_verdict_record_holds_the_numbers_of_the_failure_message() -> None:
    from pytest_fpcheck.assertions.verdict import classify

    fallback = verdict_record(classify(np.array([1.0, 2.0], np.float32), np.array([1.0, 2.5])))
    element = {"index": [1], "actual": 2.0, "expected": 2.5, "lo": None, "hi": None}
    assert (fallback["worst"], fallback["offenders"]) == (element, [element])
    assert fallback["allclose"] == {
        "rtol": 1.3e-06,
        "atol": 1e-05,
        "mismatched": 1,
        "total": 2,
        "greatest_absolute": 0.5,
        "greatest_absolute_index": [1],
        "greatest_relative": 0.2,
        "greatest_relative_index": [1],
    }
    actual, expected, bounds = _bounded_bug()
    record = verdict_record(classify(actual, expected, bounds=bounds), caught=True)
    assert record["worst"] == {
        "index": [10],
        "actual": 11.0,
        "expected": 12.0,
        "lo": 11.0 - 11 * 2.0**-20,
        "hi": 11.0 + 11 * 2.0**-20,
    }
    assert [o["index"] for o in record["offenders"]] == [[10], [50]]
    assert record["caught"] is True
    report = RunReport()
    report.add_verdict("t.py::x", record)
    jsonschema.validate(report.to_dict(environment={}, settings={}), REPORT_SCHEMA)


def _bounded_bug() -> tuple[Any, Any, Any]:
    """100 float32 values with enclosures of relative radius 2**-20; expected differs by 1 at
    elements 10 and 50."""
    from pytest_fpcheck.formats import FORMATS
    from pytest_fpcheck.interval.bounds import Bounds

    actual = np.arange(1, 101, dtype=np.float32)
    expected = actual.astype(np.float64)
    expected[[10, 50]] += 1
    wide = actual.astype(np.float64) * 2.0**-20
    value = actual.astype(np.float64)
    bounds = Bounds(value - wide, value + wide, value, np.float32, FORMATS["float32"])
    return actual, expected, bounds


def test_element_points_mark_the_elements_outside_and_keep_the_worst() -> None:
    from pytest_fpcheck.assertions.verdict import classify

    actual, expected, bounds = _bounded_bug()
    result = classify(actual, expected, bounds=bounds)
    points = element_points(result, actual, expected, bounds)
    assert points is not None
    assert len(points) == POINTS
    assert [p for p in points if p[2]] == [[1.05e-05, 1.0, 1], [4.86e-05, 1.0, 1]]
    inside = [p for p in points if not p[2]]
    assert all(p[1] == 0.0 and p[0] > 0 for p in inside)
    tight = classify(actual, actual.astype(np.float64), bounds=bounds)
    assert element_points(tight, actual, actual.astype(np.float64), bounds) is None  # exact
    assert element_points(classify(actual, expected), actual, expected) is None  # no bounds


def test_provenance_sites_parse_the_provenance_text() -> None:
    text = "aten.mm at model.py:3 in MLP.0 (+0.0312); aten.add in Block (+2); tl.dot somewhere"
    sites = provenance_sites(text, {"model.py": "pkg/model.py"}.get)
    assert sites == [
        {
            "site": "aten.mm at model.py:3 in MLP.0",
            "op": "aten.mm",
            "file": "model.py",
            "line": 3,
            "path": "pkg/model.py",
            "module": "MLP.0",
            "widening": 0.0312,
        },
        {"site": "aten.add in Block", "op": "aten.add", "module": "Block", "widening": 2.0},
        {"site": "tl.dot somewhere"},
    ]
    assert provenance_sites("no operation widened it (exact inputs and exact operations)") == []


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


def test_the_sink_knows_the_reports_kinds() -> None:
    assert tuple(kind.key for kind in KINDS) == KEYS


def test_a_collector_describes_the_arrays_of_each_verdict_as_it_is_made() -> None:
    from pytest_fpcheck.assertions.record import collecting as collecting_verdicts

    actual, expected, bounds = _bounded_bug()
    with collecting_verdicts(element_points) as made, pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(actual, expected, bounds=bounds)
    [result] = made
    assert made.elements[id(result)] == element_points(result, actual, expected, bounds)
    with collecting_verdicts() as plain:
        fp.assert_roundoff_close(actual, actual.astype(np.float64), bounds=bounds)
    assert (len(plain), plain.elements) == (1, {})


def test_publish_refuses_an_unknown_kind() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "kind='order' (type str) is not valid: expected one of verdicts, modules, appearances, "
            "gaps, dual_deltas, isolations, probes, trees."
        ),
    ):
        publish("order", None)


# -- the HTML page -----------------------------------------------------------------------------


class _Page(HTMLParser):
    """The ids, links, resource addresses and section order of a page, and its data."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.sources: list[str] = []
        self.feed(text)
        self.document = embedded(text)
        self.data: dict[str, Any] = embedded(text, "fpcheck-view")
        details = "".join(
            block for kind in self.data.values() for block in kind["details"].values()
        )
        self.feed(details)  # the blocks the script inserts

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if named.get("id"):
            self.ids.append(str(named["id"]))
        if tag == "a" and named.get("href"):
            self.links.append(str(named["href"]))
        if tag in ("img", "script", "link", "iframe") and (named.get("src") or named.get("href")):
            self.sources.append(str(named.get("src") or named.get("href")))

    def rows(self) -> dict[str, list[list[Any]]]:
        return {key: kind["rows"] for key, kind in self.data.items()}

    def anchors(self) -> list[str]:
        """Where each row's link goes."""
        return [f"{key}-{row[2]}" for key, rows in self.rows().items() for row in rows]

    def sections(self) -> list[str]:
        return [i for i in self.ids if i in {"tests", "environment", *(k.key for k in KINDS)}]


def page_of(report: RunReport, folder: Path | None = None, **run: Any) -> tuple[str, _Page]:
    document = json.loads(report.to_json(environment=ENVIRONMENT, settings=SETTINGS, run=run))
    text = render(document, folder)
    return text, _Page(text)


def details_of(page: _Page, key: str, test: str) -> str:
    [block] = [
        page.data[key]["details"][f"{key}-{row[2]}"] for row in page.rows()[key] if row[3] == test
    ]
    return block


def test_page_is_self_contained_and_every_row_links_to_its_details(tmp_path: Path) -> None:
    png = bytes.fromhex("89504e470d0a1a0a") + b"figure bytes"
    (tmp_path / "dd.png").write_bytes(png)
    report = full_report()
    report.add_dual_delta("t.py::test_dd2", dual_delta(plot=str(tmp_path / "dd.png")))
    report.add_test("t.py::test_bug", {"outcome": "passed", "duration": 0.5})
    text, page = page_of(report)
    assert {key: len(rows) for key, rows in page.rows().items()} == {
        "tests": 1,
        "verdicts": 2,
        "modules": 1,
        "appearances": 1,
        "gaps": 1,
        "dual_deltas": 2,
        "isolations": 1,
        "probes": 1,
        "trees": 1,
    }
    assert page.sources == ["data:image/png;base64," + base64.b64encode(png).decode()]
    assert "http://" not in text
    assert "https://" not in text
    assert all(anchor in page.ids for anchor in page.anchors())
    internal = [link[1:] for link in page.links if link.startswith("#")]
    assert all(anchor in page.ids for anchor in internal)
    assert "no figure (matplotlib is not installed)" in details_of(
        page, "dual_deltas", "t.py::test_dd"
    )
    jsonschema.validate(page.document, REPORT_SCHEMA)


def test_results_come_first_the_environment_last_and_empty_sections_are_left_out() -> None:
    report = RunReport()
    report.add_verdict("t.py::test_a", verdict())
    report.add_test("t.py::test_a", {"outcome": "passed", "duration": 0.5})
    text, page = page_of(report)
    assert page.sections() == ["tests", "verdicts", "environment"]
    assert "Non-finite values that appeared" not in text
    assert "<th>TRITON_INTERPRET</th><td>1</td>" in text  # the environment keeps its keys
    _, empty = page_of(RunReport())
    assert empty.sections() == ["environment"]
    assert empty.data == {}


def test_rows_are_sorted_bugs_first_with_their_cells() -> None:
    _, page = page_of(full_report())
    bug, roundoff = page.rows()["verdicts"]
    # status, mark (0: rank 0, 2: a warning, 1: else), index of the entry, test id, the columns
    head = ["bug", 0, 0, "t.py::test_bug"]
    assert bug == [*head, "bug", "4 / 128", "float16", "0.5", "16x8", "2.1e+06", "failed"]
    assert roundoff[:5] == ["roundoff", 1, 1, "t.py::test_half", "roundoff"]
    assert page.data["verdicts"]["right"] == [False, True, False, True, True, True, False]


def test_totals_count_tests_by_outcome_and_a_caught_bug_makes_an_expected_bug() -> None:
    report = RunReport()
    outcomes = {"a": "passed", "b": "failed", "c": "skipped", "d": "passed", "e": "xfailed"}
    for name, outcome in outcomes.items():
        report.add_test(f"t.py::test_{name}", {"outcome": outcome, "duration": 0.25})
    report.add_verdict("t.py::test_d", verdict("bug", caught=True))
    report.add_verdict("t.py::test_b", verdict("bug"))
    document = json.loads(report.to_json(environment={}, settings={}))
    jsonschema.validate(document, REPORT_SCHEMA)
    assert document["totals"] == {
        "tests": 5,
        "failed": 1,
        "error": 0,
        "xpassed": 0,
        "expected-bug": 1,
        "passed": 1,
        "xfailed": 1,
        "skipped": 1,
    }
    by_test = {test["test"]: test for test in document["tests"]}
    assert by_test["t.py::test_d"]["outcome"] == "expected-bug"
    assert by_test["t.py::test_d"]["findings"] == {"verdicts": {"expected-bug": 1}}
    assert by_test["t.py::test_b"]["findings"] == {"verdicts": {"bug": 1}}
    assert "findings" not in by_test["t.py::test_a"]
    text, page = page_of(report)
    assert '<span class="status s-expected-bug">1 expected-bug</span>' in text
    assert [row[1] for row in page.rows()["tests"]] == [0, 1, 1, 1, 1]  # the failure marked
    assert "The test caught it (<code>pytest.raises</code>)" in details_of(
        page, "verdicts", "t.py::test_d"
    )


def test_a_test_with_a_bad_outcome_is_refused() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "record['outcome']='broken' (type str) is not valid: expected one of failed, error, "
            "xpassed, expected-bug, passed, xfailed, skipped."
        ),
    ):
        RunReport().add_test("t.py::x", {"outcome": "broken", "duration": 0.0})
    with pytest.raises(InvalidArgument, match=re.escape("missing: duration.")):
        RunReport().add_test("t.py::x", {"outcome": "passed"})


def test_a_failed_tests_details_hold_its_traceback_output_and_findings(tmp_path: Path) -> None:
    report = RunReport()
    report.add_verdict("tests/t.py::test_b", verdict("bug"))
    record = {
        "outcome": "failed",
        "duration": 0.125,
        "when": "call",
        "traceback": "def test_b():\n>   assert 1 == 2\nE   assert 1 == 2",
        "output": [{"name": "Captured stdout call", "text": "printed <here>"}],
        "location": {"path": "tests/t.py", "line": 7},
    }
    report.add_test("tests/t.py::test_b", record)
    _, page = page_of(report, tmp_path / "out", rootdir=str(tmp_path))
    block = details_of(page, "tests", "tests/t.py::test_b")
    assert '<span class="status s-failed">failed</span> in 0.125 s' in block
    assert 'defined at <a href="../tests/t.py#L7" title="tests/t.py">tests/t.py:7</a>' in block
    assert "<h4>Traceback</h4><pre>def test_b():\n&gt;   assert 1 == 2" in block
    assert "<h4>Captured stdout call</h4><pre>printed &lt;here&gt;</pre>" in block
    assert (
        '<li><a href="#verdicts-0">verdict</a>: <span class="status s-bug">bug</span></li>' in block
    )


BUG_DETAILS = {
    "worst": {"index": [3, 1], "actual": 65.125, "expected": 130.2, "lo": 65.0, "hi": 65.1875},
    "worst_excess": {"absolute": 65.0125, "radii": 693.5, "ulps": 1040.2},
    "offenders": [
        {"index": [3, 1], "actual": 65.125, "expected": 130.2, "lo": 65.0, "hi": 65.1875},
        {"index": [4, 0], "actual": 1.0, "expected": 2.0, "lo": 0.99951171875, "hi": 1.0},
    ],
    "allclose": {
        "rtol": 0.001,
        "atol": 1e-05,
        "mismatched": 4,
        "total": 128,
        "greatest_absolute": 65.075,
        "greatest_absolute_index": [3, 1],
        "greatest_relative": 0.5,
        "greatest_relative_index": [4, 0],
    },
    "provenance": "aten.mm at model.py:3 in MLP.0 (+0.0312); aten.gelu at other.py:9 (+0.001)",
    "provenance_sites": [
        {
            "site": "aten.mm at model.py:3 in MLP.0",
            "op": "aten.mm",
            "file": "model.py",
            "line": 3,
            "path": "pkg/model.py",
            "module": "MLP.0",
            "widening": 0.0312,
        },
        {
            "site": "aten.gelu at other.py:9",
            "op": "aten.gelu",
            "file": "other.py",
            "line": 9,
            "path": None,
            "widening": 0.001,
        },
    ],
    "notes": ["copy_ is exact"] * 7 + ["TF32 is off"],
    "points": [[0.0625, 65.0, 1], [0.001, 0.0, 0], [0.002, 0.001, 0]],
}


def test_a_verdicts_details_say_its_numbers_in_words(tmp_path: Path) -> None:
    report = RunReport()
    report.add_verdict("t.py::test_bug", verdict("bug", **BUG_DETAILS))
    _, page = page_of(report, tmp_path, rootdir=str(tmp_path))
    block = details_of(page, "verdicts", "t.py::test_bug")
    jsonschema.validate(page.document, REPORT_SCHEMA)
    assert (
        "A bug (Type-II): at 4 of 128 elements (3.12%), the expected value lies outside the "
        "enclosure of actual." in block
    )
    worst = block[block.index("<h4>Worst element</h4>") : block.index("<h4>First offenders")]
    assert (
        "<td>[3, 1]</td><td>65.125</td><td>130.2</td><td>[65.0, 65.1875]</td><td>65.07</td>"
        "<td>65.01</td><td>693.5</td><td>1040</td>" in worst
    )
    assert "<td>[4, 0]</td><td>1.0</td><td>2.0</td><td>[0.99951171875, 1.0]</td>" in block
    assert "Plain allclose with rtol=0.001, atol=1e-05: " in block
    assert (
        "(failed at 4 of 128 elements (3.12%)); greatest absolute difference 65.08 at [3, 1]"
        in block
    )
    assert (
        '<td><code>aten.mm</code></td><td><a href="pkg/model.py#L3" title="pkg/model.py">'
        "pkg/model.py:3</a></td><td>MLP.0</td>" in block
    )
    assert "<td><code>aten.gelu</code></td><td>other.py:9</td>" in block  # not found: no link
    assert "<li>copy_ is exact <b>(&times;7)</b></li><li>TF32 is off</li>" in block
    assert block.count("<svg") == 1
    assert "tightness_ulps" not in block
    assert "Median radius of the enclosure: 0.5 ULP of float16." in block
    assert "Other fields" not in block  # every field of Verdict.to_dict() has its part


def test_loose_and_inconclusive_verdicts_carry_a_warning_and_every_field_shows() -> None:
    report = RunReport()
    report.add_verdict(
        "t.py::test_loose", verdict("roundoff", dtype="bfloat16", tightness_ulps=1.03e5)
    )
    reason = "the median resolution 3.2 is worse than max_resolution = 0.1"
    report.add_verdict(
        "t.py::test_wide",
        verdict("inconclusive", outside=0, resolution=3.2, inconclusive_reason=reason),
    )
    report.add_verdict("t.py::test_new", verdict("a-later-kind", outside=0, speed=2.5))
    _, page = page_of(report)
    rows = {row[3]: row for row in page.rows()["verdicts"]}
    assert [row[3] for row in page.rows()["verdicts"]][:2] == [
        "t.py::test_wide",
        "t.py::test_loose",
    ]
    assert (rows["t.py::test_loose"][1], rows["t.py::test_wide"][1]) == (2, 2)
    warnings = page.data["verdicts"]["warnings"]
    assert warnings[str(rows["t.py::test_loose"][2])].startswith(
        "loose enclosure: median radius 1.03e+05 ULP"
    )
    assert warnings[str(rows["t.py::test_wide"][2])] == f"inconclusive: {reason}"
    loose = details_of(page, "verdicts", "t.py::test_loose")
    assert '<div class="warning">&#9888; loose enclosure' in loose
    wide = details_of(page, "verdicts", "t.py::test_wide")
    assert "Inconclusive: at the 128 elements (16x8) of float16, the enclosure is too wide" in wide
    assert f'<div class="warning">&#9888; inconclusive: {reason}</div>' in wide
    assert "<th>resolution (smallest relative deviation it would flag)</th><td>3.2</td>" in wide
    new = details_of(page, "verdicts", "t.py::test_new")  # the default parts, every field
    assert "a-later-kind: 0 of 128 elements outside." in new
    assert "<h4>Other fields</h4><table><tr><th>speed</th><td>2.5</td></tr></table>" in new


def test_a_module_comparison_lists_its_calls_the_first_bug_highlighted() -> None:
    report = RunReport()
    report.add("modules", "t.py::test_modules", MODULES)
    [(title, lines)] = sections(report.entries, width=100, wide=False)
    assert (title, lines[:2]) == (
        "module-by-module comparisons",
        [
            "verdict      calls first bug                     test",
            "bug              3 Block.norm                    t.py::test_modules",
        ],
    )
    assert lines[-1] == "1 module comparison: 1 bug"
    _, page = page_of(report)
    block = details_of(page, "modules", "t.py::test_modules")
    jsonschema.validate(page.document, REPORT_SCHEMA)
    assert (
        "3 module calls judged against torch.float64: 1 roundoff, 2 bug. The first bug (the "
        "earliest with no bug nested in it): <b>Block.norm</b>." in block
    )
    assert block.count('<tr class="first-bug">') == 1
    assert (
        '<tr class="first-bug"><td>1</td><td><span style="padding-left:1em">Block.norm</span>'
        '</td><td>Norm</td><td><span class="status s-bug">bug</span></td><td>60 / 64</td>' in block
    )


def test_many_entries_keep_their_details_in_the_data() -> None:
    report = RunReport()
    for i in range(INLINE_DETAILS + 1):
        report.add_verdict(f"t.py::test[{i}]", verdict())
    _, page = page_of(report)
    details = page.data["verdicts"]["details"]
    assert sorted(details) == sorted(page.anchors())
    _, _, index, test, *_ = page.rows()["verdicts"][7]
    block = details[f"verdicts-{index}"]
    assert block.startswith(f'<details class="entry" id="verdicts-{index}">')
    assert f"</span> {test}</summary>" in block


def test_page_shows_texts_and_statistics_under_labels() -> None:
    text, page = page_of(full_report())
    assert "<pre>pairwise over 4 terms</pre>" in details_of(page, "trees", "t.py::test_tree")
    isolation = details_of(page, "isolations", "t.py::test_iso")
    assert (
        "<pre>1 site makes fn agree with the reference:\n  aten.exp at model.py:9</pre>"
        in isolation
    )
    assert "<th>configurations searched</th><td>7</td>" in isolation
    # statistics as a table: one row per side, one column per statistic
    dd = details_of(page, "dual_deltas", "t.py::test_dd")
    assert "<tr><th></th><th>mean</th><th>max</th></tr><tr><th>custom</th><td>1e-07</td>" in dd
    assert "delta_custom" not in dd  # the per-trial errors are left out
    assert '<option value="custom_less_accurate">' in text


def test_page_escapes_what_tests_put_in_their_ids_and_records() -> None:
    report = RunReport()
    report.add_verdict("t.py::test[</script><b>]", verdict("bug", provenance="a<b", notes=["<i>"]))
    text, page = page_of(report)
    assert "</script><b>" not in text
    assert page.rows()["verdicts"][0][3] == "t.py::test[</script><b>]"
    block = page.data["verdicts"]["details"]["verdicts-0"]
    assert "a&lt;b" in block
    assert "<li>&lt;i&gt;</li>" in block
    assert "<b>]" not in block


def test_the_plot_puts_each_element_by_its_radius_and_error() -> None:
    svg = scatter_svg([[1e-3, 1e-1, 1], [1e-3, 1e-4, 0], [1e-2, 0.0, 0]], total=10)
    assert svg.startswith('<svg class="plot"')
    assert "3 of 10 elements" in svg
    assert svg.count("l6 6m0 -6l-6 6") == 1  # one cross: the element outside
    assert svg.count("h0") == 2  # two dots
    assert ">1e-4<" in svg  # the decades of both axes
    assert ">1e-1<" in svg
    assert scatter_svg([[0.0, 0.0, 0]]) == ""


def test_read_document_reads_both_formats(tmp_path: Path) -> None:
    report = full_report()
    for name in ("run.json", "run.html"):
        report.write(tmp_path / name, environment=ENVIRONMENT, settings=SETTINGS)
        document = read_document(tmp_path / name)
        jsonschema.validate(document, REPORT_SCHEMA)
        assert document["counts"]["verdicts"] == {"bug": 1, "roundoff": 1}
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "element='other' (type str) is not valid: expected the id of a data element"
        ),
    ):
        embedded("<html></html>", "other")


def test_pytest_html_gets_a_summary_and_a_fragment() -> None:
    found = [
        ("verdicts", verdict("bug", **BUG_DETAILS)),
        ("verdicts", verdict("roundoff", dtype="bfloat16", tightness_ulps=1.03e5)),
        ("appearances", APPEARANCE),
    ]
    assert findings_summary(found) == "2 verdicts: 1 bug, 1 roundoff; 1 appearance: 1 nan"
    fragment = findings_fragment(found)
    assert "worst at [3, 1]: actual=65.125, expected=130.2, enclosure=[65.0, 65.1875]" in fragment
    assert "&#9888; loose enclosure: median radius 1.03e+05 ULP" in fragment
    assert "<td>aten.sqrt</td>" in fragment
