"""``pytest --fpcheck`` on a suite nobody here wrote (issue 17): outcomes, slowdown, peak memory.

Downloads a real PyTorch project's source distribution from the package index (pinned:
einops 0.8.1, whose sdist ships its tests; ``EINOPS_TEST_BACKENDS=torch`` runs them on PyTorch
tensors and layers), unpacks it into a work directory and runs its tests three ways, each in a
fresh process:

* ``plain``: ``pytest`` with fpcheck loaded but off;
* ``fpcheck``: ``pytest --fpcheck`` (``--fpcheck-track=auto``: a test that cannot ask for a
  verdict runs under the non-finite watch only);
* ``tracked``: ``pytest --fpcheck --fpcheck-track=always`` (every test inside ``fp.track()``).

It reports, against the plain run, each test whose outcome changed (budget 0), the wall-clock
ratio (budget: 1.3x for ``fpcheck``, 3x for ``tracked``) and the peak resident memory ratio
(budget 3x; the child's ``ru_maxrss``), and the gaps the tracked run listed. The exit status is
1 when a budget is exceeded. ``--slice`` runs one test file (``test_ops.py``), for a quick look.

    python benchmarks/foreign_suite.py [--slice] [--work DIR] [--json OUT]

Needs network access to the package index (``pip download``) unless ``--work`` already holds
the unpacked sdist. Results are recorded in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

PACKAGE, VERSION = "einops", "0.8.1"
SOURCE = f"{PACKAGE}-{VERSION}"
TESTS = "einops/tests"
SLICE = "einops/tests/test_ops.py"
BUDGETS = {"fpcheck": (1.3, 3.0), "tracked": (3.0, 3.0)}  # (wall, memory) against plain
MODES = {
    "plain": [],
    "fpcheck": ["--fpcheck"],
    "tracked": ["--fpcheck", "--fpcheck-track=always"],
}


def fetch(work: Path) -> Path:
    """The unpacked sdist under ``work`` (downloaded with pip when missing)."""
    source = work / SOURCE
    if source.is_dir():
        return source
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"{PACKAGE}=={VERSION}", "-d", str(work)],
        check=True,
    )  # fmt: skip
    with tarfile.open(work / f"{SOURCE}.tar.gz") as archive:
        archive.extractall(work, filter="data")
    return source


def run(source: Path, mode: str, target: str, out: Path) -> dict[str, object]:
    """One pytest run in a fresh process: outcomes by test id, wall time, peak RSS (MiB)."""
    junit = out / f"{mode}.xml"
    report = out / f"{mode}.json"
    command = [
        sys.executable, "-m", "pytest", target, "-q", "-p", "no:cacheprovider",
        "-p", "no:xdist", "-p", "no:randomly", f"--junit-xml={junit}", *MODES[mode],
    ]  # fmt: skip
    if mode != "plain":
        command.append(f"--fpcheck-report={report}")
    env = {**os.environ, "EINOPS_TEST_BACKENDS": "torch"}
    started = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=source, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        found = {child.tag for child in case}
        outcome = next((o for o in ("failure", "error", "skipped") if o in found), "passed")
        outcomes[test] = outcome
    gaps: list[dict[str, object]] = []
    if report.is_file():
        gaps = json.loads(report.read_text())["gaps"]
    return {"wall_s": wall, "peak_mib": usage.ru_maxrss / 1024, "outcomes": outcomes, "gaps": gaps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slice", action="store_true", help=f"run {SLICE} only")
    parser.add_argument("--work", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="fpcheck-foreign-"))
    work.mkdir(parents=True, exist_ok=True)
    source = fetch(work)
    target = SLICE if args.slice else TESTS
    results = {mode: run(source, mode, target, work) for mode in MODES}
    plain = results["plain"]
    failed = False
    print(f"{PACKAGE} {VERSION}: {target}, {len(plain['outcomes'])} tests")  # type: ignore[arg-type]
    print(f"{'mode':8} {'wall s':>8} {'x':>6} {'peak MiB':>9} {'x':>6} changed outcomes")
    figures: dict[str, object] = {"package": f"{PACKAGE}=={VERSION}", "target": target}
    for mode, result in results.items():
        wall = result["wall_s"] / plain["wall_s"]  # type: ignore[operator]
        memory = result["peak_mib"] / plain["peak_mib"]  # type: ignore[operator]
        changed = {
            test: (plain["outcomes"].get(test), outcome)  # type: ignore[union-attr]
            for test, outcome in result["outcomes"].items()  # type: ignore[union-attr]
            if plain["outcomes"].get(test) != outcome  # type: ignore[union-attr]
        }
        print(
            f"{mode:8} {result['wall_s']:8.1f} {wall:6.2f} {result['peak_mib']:9.0f} "
            f"{memory:6.2f} {len(changed)}"
        )
        for test, (before, after) in changed.items():
            print(f"    {test}: {before} -> {after}")
        if mode in BUDGETS:
            wall_budget, memory_budget = BUDGETS[mode]
            failed |= bool(changed) or wall > wall_budget or memory > memory_budget
        figures[mode] = {
            "wall_s": round(result["wall_s"], 2),  # type: ignore[call-overload]
            "wall_ratio": round(wall, 3),
            "peak_mib": round(result["peak_mib"], 1),  # type: ignore[call-overload]
            "memory_ratio": round(memory, 3),
            "changed": changed,
            "gaps": len(result["gaps"]),  # type: ignore[arg-type]
        }
    gaps: dict[str, int] = {}
    for gap in results["tracked"]["gaps"]:  # type: ignore[union-attr]
        key = f"{gap['reason']}: {gap['op']}"
        gaps[key] = gaps.get(key, 0) + int(gap["count"])
    if gaps:
        print("gaps of the tracked run (operation: calls over all tests):")
        for key, count in sorted(gaps.items(), key=lambda item: -item[1]):
            print(f"    {key}: {count}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print("within budget" if not failed else "OVER BUDGET")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
