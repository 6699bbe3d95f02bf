"""Budgets of issue 10 (the run report), and the docs' screenshot.

``collect``: collecting report data adds at most 2% to ``pytest examples --fpcheck``. One run of
the examples in a subprocess with a probe plugin (``-p``) that times, inside that same run, every
piece of report work: the per-test sink, turning verdicts and published results into records and
adding them, the appearances' records, the terminal tables and the report's end of session. The
figure is their sum over the run's wall time (a ratio within one run, so machine load hits both
sides alike). ``--report PATH`` also times writing the report (not part of the budget). Then the
cost of one revealed tree's record (its text), the dearest record to make.

``html``: an HTML report of 10,000 verdicts (1% bugs), each from its own test (1% of them
failed, with a traceback and captured output), is under 5 MB and opens and filters in headless
Chromium in under 2 s (issue 23). The records have every field the plugin writes: a verdict's
worst element, offenders, allclose, provenance sites, and a bug's plot points. It times
rendering the page in Python, opening it (navigation start until the script has inflated the
data and drawn every table; the median of ``--repeats`` loads), then each filter as the script
applies it (a word, a status, and clearing them, which shows all 10,000 rows again) and a sort
by a column, each with the style recalculation and layout it forces.

``screenshot REPORT.html PNG``: a screenshot of a report's first screen, for the docs
(``docs/img/report.png`` is taken from ``pytest examples --fpcheck --fpcheck-report=...``).

Run: ``python benchmarks/bench_report.py collect|html|screenshot ...`` (needs Chromium,
chromedriver and selenium for ``html`` and ``screenshot``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_fpcheck.report import RunReport

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
"""Times the report work of a pytest-fpcheck run from inside it (bench_report.py collect)."""
import atexit, functools, json, os, time

import pytest_fpcheck.plugin as plugin
import pytest_fpcheck.report.model as model
import pytest_fpcheck.report.records as records
import pytest_fpcheck.assertions.sink as sink
import pytest_fpcheck.report.terminal as terminal

SPENT = {}
START = time.perf_counter()


def timed(owner, name, label):
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[label] = SPENT.get(label, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)


class TimedContext:
    def __init__(self, inner):
        self.inner = inner

    def __enter__(self):
        start = time.perf_counter()
        value = self.inner.__enter__()
        SPENT["sink"] = SPENT.get("sink", 0.0) + time.perf_counter() - start
        return value

    def __exit__(self, *exc):
        start = time.perf_counter()
        try:
            return self.inner.__exit__(*exc)
        finally:
            SPENT["sink"] = SPENT.get("sink", 0.0) + time.perf_counter() - start


_collecting = sink.collecting
sink.collecting = lambda: TimedContext(_collecting())
timed(plugin, "_add_results", "records")  # verdict.to_dict(), published results, add
timed(records, "appearance_record", "appearances")
timed(model.RunReport, "add_appearance", "appearances")
timed(terminal, "sections", "terminal")
timed(model.RunReport, "part", "end of session")
timed(model.RunReport, "write", "writing the report")


@atexit.register
def dump():
    SPENT["wall"] = time.perf_counter() - START
    with open(os.environ["FPCHECK_BENCH_OUT"], "w") as out:
        json.dump(SPENT, out)
'''


def collect(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "fpcheck_report_probe.py").write_text(PROBE)
        out = Path(folder, "spent.json")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")])),
            "FPCHECK_BENCH_OUT": str(out),
        }
        command = [sys.executable, "-m", "pytest", "examples", "--fpcheck", "-q", "-n", "0",
                   "-p", "no:cacheprovider", "-p", "fpcheck_report_probe"]  # fmt: skip
        if args.report:
            command.append(f"--fpcheck-report={args.report}")
        run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        print(run.stdout.strip().splitlines()[-1])
        spent = json.loads(out.read_text())
    wall = spent.pop("wall")
    written = spent.pop("writing the report", None)
    total = sum(spent.values())
    print(f"pytest examples --fpcheck: {wall:.1f} s of wall time (the probe's process)")
    for label, seconds in sorted(spent.items()):
        print(f"  {label:<15} {seconds * 1e3:9.2f} ms")
    print(f"report data: {total * 1e3:.1f} ms = {100 * total / wall:.4f}% of the run (budget 2%)")
    if written is not None:
        print(f"writing {args.report}: {written * 1e3:.1f} ms (not part of the budget)")
    tree_records()


def tree_records() -> None:
    """The record of a revealed tree renders its text: the dearest record to make. Its cost for
    the sizes the order examples reveal (median of 5), for when reveal_order publishes."""
    import numpy as np

    import pytest_fpcheck as fp
    from pytest_fpcheck.report.records import tree_record

    for n in (64, 256, 4096):
        tree = fp.reveal_order(fp.order.sum_of(np.sum), n)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            tree_record(tree, impl="np.sum", algorithm="fprev")
            times.append(time.perf_counter() - start)
        print(f"tree record, np.sum over n = {n:>4}: {statistics.median(times) * 1e3:6.2f} ms")


TRACEBACK = (
    """    def test_kernel(dtype, shape):
        out = kernel(x, w)
>       fp.assert_roundoff_close(out, reference(x, w))
E       pytest_fpcheck.errors.RoundoffMismatch: fpcheck verdict 'bug': Type-II (bug)
E       12 / 2048 (0.586%) elements outside the enclosure of actual
E       worst at index (3, 17): actual=65.125, expected=130.2, enclosure=[65.0, 65.1875]
"""
    * 4
)


def _element(rng: random.Random, rows: int, cols: int) -> dict[str, Any]:
    actual = rng.uniform(-100, 100)
    return {
        "index": [rng.randrange(rows), rng.randrange(cols)],
        "actual": actual,
        "expected": actual * rng.uniform(1.001, 2),
        "lo": actual - 0.0625,
        "hi": actual + 0.0625,
    }


def synthetic_report(count: int, seed: int = 0) -> RunReport:
    """``count`` verdicts with the fields the plugin writes, 1% of them bugs (with plot points),
    each from its own test; a bug's test fails unless it caught the bug (every other one)."""
    rng = random.Random(seed)
    report = RunReport()
    dtypes = ["float16", "bfloat16", "float32", "tfloat32", "float8_e4m3fn"]
    for i in range(count):
        bug = i % 100 == 7
        caught = bug and i % 200 == 7
        rows, cols = rng.choice([1, 16, 64, 256]), rng.choice([8, 32, 128])
        total = rows * cols
        outside = rng.randint(1, total) if bug else 0
        test = (
            f"tests/kernels/test_module_{i // 500:02d}.py::test_kernel_{i % 500}"
            f"[{rng.choice(dtypes)}-{rows}x{cols}]"
        )
        record: dict[str, Any] = {
            "kind": "bug" if bug else rng.choice(["roundoff", "roundoff", "exact", "close"]),
            "outside": outside,
            "total": total,
            "shape": [rows, cols],
            "dtype": rng.choice(dtypes),
            "two_sided": False,
            "fallback": False,
            "worst_index": [rng.randrange(rows), rng.randrange(cols)] if bug else None,
            "worst_excess": {"absolute": 0.01, "radii": 3.5, "ulps": rng.uniform(1, 1e6)}
            if bug
            else None,
            "tightness_ulps": rng.uniform(0.5, 2000),
            "provenance": "aten.mm at model.py:12 in MLP.0 (+0.0312); aten.gelu at model.py:13 (+0.001)",
            "provenance_sites": [
                {"site": "aten.mm at model.py:12 in MLP.0", "op": "aten.mm", "file": "model.py",
                 "line": 12, "path": "src/model.py", "module": "MLP.0", "widening": 0.0312},
                {"site": "aten.gelu at model.py:13", "op": "aten.gelu", "file": "model.py",
                 "line": 13, "path": "src/model.py", "widening": 0.001},
            ],
            "notes": [],
            "allclose_passed": not bug and rng.random() < 0.5,
            "allclose": {"rtol": 1e-3, "atol": 1e-5, "mismatched": outside, "total": total,
                         "greatest_absolute": 0.5, "greatest_absolute_index": [0, 1],
                         "greatest_relative": 0.01, "greatest_relative_index": [0, 1]},
        }  # fmt: skip
        if bug:
            record["worst"] = _element(rng, rows, cols)
            record["offenders"] = [_element(rng, rows, cols) for _ in range(min(outside, 5))]
            record["points"] = [
                [float(f"{rng.uniform(1e-4, 1e-1):.3g}"), float(f"{rng.uniform(0, 2):.3g}"), k % 2]
                for k in range(48)
            ]
        if caught:
            record["caught"] = True
        report.add_verdict(test, record)
        failed = bug and not caught
        outcome: dict[str, Any] = {
            "outcome": "failed" if failed else "passed",
            "duration": rng.uniform(0.001, 2),
            "location": {"path": test.split("::")[0], "line": 10 + i % 500},
        }
        if failed:
            outcome.update(
                when="call",
                traceback=TRACEBACK,
                output=[{"name": "Captured stdout call", "text": "loss 0.25\n" * 20}],
            )
        report.add_test(test, outcome)
    return report


def chromium() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


FILTER = """
const bar = document.querySelector('.filters[data-table="table-' + arguments[2] + '"]');
const field = bar.querySelector(arguments[0]);
const start = performance.now();
field.value = arguments[1];
field.dispatchEvent(new Event(arguments[0] === '.q' ? 'input' : 'change', {bubbles: true}));
document.body.offsetHeight;  // the style and layout the filter forces
return [performance.now() - start, bar.querySelector('.shown').textContent];
"""
SORT = """
const head = document.querySelector('#table-' + arguments[0] + ' thead th:nth-child(' + arguments[1] + ')');
const start = performance.now();
head.click();
document.body.offsetHeight;
return performance.now() - start;
"""
READY = """
const done = arguments[arguments.length - 1];
(function wait() {
  if (document.body && document.body.dataset.ready === 'yes') done(performance.now());
  else setTimeout(wait, 5);
})();
"""


def html(args: argparse.Namespace) -> None:
    report = synthetic_report(args.verdicts)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder, "run.html")
        report.write(page, environment={}, settings={}, run={"rootdir": folder})
        rendered = time.perf_counter() - start
        size = page.stat().st_size
        print(f"{args.verdicts} verdicts and tests: page {size / 1e6:.2f} MB (budget 5 MB), "
              f"rendered and written in {rendered:.2f} s")  # fmt: skip
        driver = chromium()
        try:
            driver.set_script_timeout(30)
            loads, filters, sorts = [], {}, {}
            steps = [("verdicts", ".q", "bug"), ("verdicts", ".q", ""), ("verdicts", ".s", "bug"),
                     ("verdicts", ".s", ""), ("verdicts", ".q", "module_03 float16"),
                     ("tests", ".s", "failed"), ("tests", ".s", "")]  # fmt: skip
            for _ in range(args.repeats):
                driver.get(page.as_uri())  # returns after the load event
                loads.append(driver.execute_async_script(READY) / 1e3)
                for table, field, value in steps:
                    ms, shown = driver.execute_script(FILTER, field, value, table)
                    filters.setdefault((table, field, value, shown), []).append(ms / 1e3)
                for table, column in (("verdicts", 6), ("tests", 3)):
                    ms = driver.execute_script(SORT, table, column)
                    sorts.setdefault((table, column), []).append(ms / 1e3)
            errors = driver.get_log("browser")
        finally:
            driver.quit()
    load = statistics.median(loads)
    print(f"open: {load:.3f} s (median of {args.repeats}; navigation start to the tables drawn)")
    worst = 0.0
    for (table, field, value, shown), seconds in filters.items():
        what = "words" if field == ".q" else "status"
        median = statistics.median(seconds)
        worst = max(worst, median)
        print(f"filter {table} {what} {value!r:<20} -> {shown:<26} {median * 1e3:7.1f} ms")
    for (table, column), seconds in sorts.items():
        median = statistics.median(seconds)
        worst = max(worst, median)
        print(f"sort {table} by column {column}: {median * 1e3:7.1f} ms")
    print(f"open + slowest filter or sort: {load + worst:.3f} s (budget 2 s)")
    print(f"browser console errors: {len(errors)}")


def screenshot(args: argparse.Namespace) -> None:
    driver = chromium()
    try:
        driver.set_window_size(args.width, args.height)
        driver.get(Path(args.report).resolve().as_uri())
        driver.save_screenshot(args.png)
    finally:
        driver.quit()
    print(f"wrote {args.png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("collect", help="report work as a share of pytest examples --fpcheck")
    one.add_argument("--report", help="also write this report (.json or .html) and time it")
    two = commands.add_parser("html", help="size, open and filter a 10,000-verdict page")
    two.add_argument("--verdicts", type=int, default=10_000)
    two.add_argument("--repeats", type=int, default=5)
    three = commands.add_parser("screenshot", help="a screenshot of a report page")
    three.add_argument("report")
    three.add_argument("png")
    three.add_argument("--width", type=int, default=1280)
    three.add_argument("--height", type=int, default=860)
    args = parser.parse_args()
    {"collect": collect, "html": html, "screenshot": screenshot}[args.command](args)


if __name__ == "__main__":
    main()
