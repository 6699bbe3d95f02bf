"""Budget of issue 18: README command 1's pytest run (the examples under ``--fpcheck``, writing
the HTML report) takes at most 90 s on 2 cores.

Runs the pytest half of the README's first command exactly as written (taken from the README's
first ``bash`` block), in a subprocess, in the repository root, with a probe plugin (``-p``)
that times each test's setup, call and teardown: wall time and the process' CPU time (user +
system, all threads). Prints the run's wall and CPU time, the slowest tests, and the load
average before and after: on a shared machine the wall times grow with the load, the CPU times
much less, so both are recorded.

``--cold`` gives the compiled kernels an empty cache folder (``FPCHECK_CACHE_DIR``), as on a
machine where pytest-fpcheck never ran: the interval kernels are compiled on first use; without
it the kernels compiled by earlier runs are loaded from the user's cache
(:func:`pytest_fpcheck.interval.jit.cache_dir`).

Run: ``python benchmarks/bench_examples.py [--cold] [--slowest 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
"""Times every test of a pytest run from inside it (bench_examples.py)."""
import json, os, time

import pytest

SPENT = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        return (yield)
    finally:
        SPENT[item.nodeid] = (time.perf_counter() - wall, time.process_time() - cpu)


def pytest_unconfigure(config):
    with open(os.environ["FPCHECK_BENCH_OUT"], "w") as out:
        json.dump({"tests": SPENT, "cpu": time.process_time()}, out)
'''


def readme_pytest_command() -> list[str]:
    """The pytest half of the README's first command (after its ``pip install ... &&``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```bash\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    if block is None:
        raise SystemExit("README.md has no ```bash block")
    command = block.group(1).strip().split("&&")[-1]
    return shlex.split(command)


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", action="store_true", help="an empty kernel cache")
    parser.add_argument("--slowest", type=int, default=5, help="how many tests to list")
    args = parser.parse_args()

    command = readme_pytest_command()
    if command[:3] != ["python", "-m", "pytest"]:
        raise SystemExit(f"the README's first command does not run python -m pytest: {command}")
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "fpcheck_examples_probe.py").write_text(PROBE)
        out = Path(folder, "spent.json")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [folder, os.environ.get("PYTHONPATH")])),
            "FPCHECK_BENCH_OUT": str(out),
        }
        if args.cold:
            env["FPCHECK_CACHE_DIR"] = str(Path(folder, "kernel-cache"))
        full = [sys.executable, *command[1:], "-p", "fpcheck_examples_probe"]
        print(f"{platform.node()}: {os.cpu_count()} cores, {platform.processor() or 'cpu'}")
        print(
            f"+ {shlex.join(command)} (cwd {ROOT}, {'cold' if args.cold else 'warm'} kernel cache)"
        )
        print(f"before: {load()}")
        start = time.perf_counter()
        run = subprocess.run(full, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        print(f"after:  {load()}")
        print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr)
        spent = json.loads(out.read_text())
    tests = spent["tests"]
    print(
        f"exit code {run.returncode}; wall {wall:.1f} s for the whole command, "
        f"{sum(w for w, _ in tests.values()):.1f} s in tests; CPU {spent['cpu']:.1f} s"
    )
    print(f"slowest {args.slowest} tests (wall s, CPU s):")
    for test, (seconds, cpu) in sorted(tests.items(), key=lambda item: -item[1][0])[: args.slowest]:
        print(f"  {seconds:7.2f} {cpu:7.2f}  {test}")
    sys.exit(run.returncode)


if __name__ == "__main__":
    main()
