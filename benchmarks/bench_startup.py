"""Budget (issue 2): loading the plugin adds at most 50 ms to ``pytest --collect-only -q`` on an
empty test file, compared with ``-p no:fpcheck`` in the same run (median of at least 10 runs).

Run: ``python benchmarks/bench_startup.py [--runs 21]``. The two variants alternate so that drift
in the machine's speed affects both alike.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_MS = 50.0


def time_once(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        check=False,
        capture_output=True,
    )
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "test_empty.py").write_text("")
        (cwd / "pytest.ini").write_text("[pytest]\n")
        time_once([], cwd)  # warm the file-system caches
        with_plugin, without = [], []
        for _ in range(runs):
            with_plugin.append(time_once([], cwd))
            without.append(time_once(["-p", "no:fpcheck"], cwd))
    median_with, median_without = statistics.median(with_plugin), statistics.median(without)
    added = median_with - median_without
    print(f"runs: {runs} each, alternating")
    print(f"pytest --collect-only -q, plugin loaded:   median {median_with:7.1f} ms")
    print(f"pytest --collect-only -q, -p no:fpcheck:   median {median_without:7.1f} ms")
    print(
        f"added by the plugin: {added:+.1f} ms (budget {BUDGET_MS:.0f} ms): "
        f"{'within' if added <= BUDGET_MS else 'OVER'} budget"
    )


if __name__ == "__main__":
    main()
