"""Budgets of issue 10 (the run report), and the docs' screenshot.

``collect``: collecting report data adds at most 2% to ``pytest examples --fpcheck``. One run of
the examples in a subprocess with a probe plugin (``-p``) that times, inside that same run, every
piece of report work: the per-test sink, turning verdicts and published results into records and
adding them, the appearances' records, the terminal tables and the report's end of session. The
figure is their sum over the run's wall time (a ratio within one run, so machine load hits both
sides alike). ``--report PATH`` also times writing the report (not part of the budget). Then the
cost of one revealed tree's record (its text), the dearest record to make.

``html``: an HTML report of 10,000 verdicts (1% bugs) opens and filters in headless Chromium in
under 2 s. It times rendering the page in Python, loading it (navigation start to the end of the
load event, as the browser measures it; the median of ``--repeats`` loads), then each filter as
the script applies it (a word, a status, and clearing them, which shows all 10,000 rows again),
each with the style recalculation and layout it forces.

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
import pytest_fpcheck.report.sink as sink
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


def synthetic_report(count: int, seed: int = 0) -> RunReport:
    """``count`` verdicts with the fields Verdict.to_dict() gives, 1% of them bugs."""
    rng = random.Random(seed)
    report = RunReport()
    dtypes = ["float16", "bfloat16", "float32", "tfloat32", "float8_e4m3fn"]
    for i in range(count):
        bug = i % 100 == 7
        rows, cols = rng.choice([1, 16, 64, 256]), rng.choice([8, 32, 128])
        total = rows * cols
        outside = rng.randint(1, total) if bug else 0
        ulps = rng.uniform(1, 1e6) if bug else None
        report.add_verdict(
            f"tests/kernels/test_module_{i // 500:02d}.py::test_kernel_{i % 500}"
            f"[{rng.choice(dtypes)}-{rows}x{cols}]",
            {
                "kind": "bug" if bug else rng.choice(["roundoff", "roundoff", "exact", "close"]),
                "outside": outside,
                "total": total,
                "shape": [rows, cols],
                "dtype": rng.choice(dtypes),
                "two_sided": False,
                "fallback": False,
                "worst_index": [rng.randrange(rows), rng.randrange(cols)] if bug else None,
                "worst_excess": {"absolute": 0.01, "radii": 3.5, "ulps": ulps} if bug else None,
                "tightness_ulps": rng.uniform(0.5, 2000),
                "provenance": "aten.mm at model.py:12 (+0.0312); aten.gelu at model.py:13",
                "notes": [],
                "allclose_passed": rng.random() < 0.5,
            },
        )
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
const bar = document.querySelector('.filters[data-table="table-verdicts"]');
const field = bar.querySelector(arguments[0]);
const start = performance.now();
field.value = arguments[1];
field.dispatchEvent(new Event(arguments[0] === '.q' ? 'input' : 'change', {bubbles: true}));
document.body.offsetHeight;  // the style and layout the filter forces
return [performance.now() - start, bar.querySelector('.shown').textContent];
"""
LOADED = """
const n = performance.getEntriesByType('navigation')[0];
return n.loadEventEnd - n.startTime;
"""


def html(args: argparse.Namespace) -> None:
    report = synthetic_report(args.verdicts)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder, "run.html")
        report.write(page, environment={}, settings={})
        rendered = time.perf_counter() - start
        print(f"{args.verdicts} verdicts: page {page.stat().st_size / 1e6:.1f} MB, "
              f"rendered and written in {rendered:.2f} s")  # fmt: skip
        driver = chromium()
        try:
            loads, walls, filters = [], [], {}
            steps = [(".q", "bug"), (".q", ""), (".s", "bug"), (".s", ""),
                     (".q", "module_03 float16")]  # fmt: skip
            for _ in range(args.repeats):
                begin = time.perf_counter()
                driver.get(page.as_uri())
                walls.append(time.perf_counter() - begin)
                loads.append(driver.execute_script(LOADED) / 1e3)
                for field, value in steps:
                    ms, shown = driver.execute_script(FILTER, field, value)
                    filters.setdefault((field, value, shown), []).append(ms / 1e3)
        finally:
            driver.quit()
    load = statistics.median(loads)
    print(f"open: {load:.3f} s (median of {args.repeats}; navigation to load event end), "
          f"driver.get {statistics.median(walls):.3f} s")  # fmt: skip
    worst = 0.0
    for (field, value, shown), seconds in filters.items():
        what = "words" if field == ".q" else "status"
        median = statistics.median(seconds)
        worst = max(worst, median)
        print(f"filter {what} {value!r:<20} -> {shown:<22} {median * 1e3:7.1f} ms")
    print(f"open + slowest filter: {load + worst:.3f} s (budget 2 s)")


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
    two = commands.add_parser("html", help="open and filter a 10,000-verdict page in Chromium")
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
