"""Budget (issue 18): the first ``fp.track()`` block of a fresh process costs at most 0.5 s beyond
the plain run, with an empty kernel cache (cold, as right after install) and a filled one (warm),
on the README's tour (a 64x256 by 256x32 float16 matmul and GELU).

Each measurement is a fresh interpreter: it imports torch and ``pytest_fpcheck`` and makes the
tour's inputs (not timed), then times its first block: the plain ``gelu(x @ w)``, or the same
inside ``with fp.track():`` (the attribute ``fp.track`` included: that imports the tracker).
"Beyond the plain run" is the median tracked block minus the median plain one, over alternating
runs. Cold runs get a fresh, empty ``FPCHECK_CACHE_DIR`` each; warm runs share one that a run in
``FPCHECK_JIT=eager`` mode (every kernel compiled, no twins) has filled. Wall time and the
process' CPU time are printed (the CPU time is the steadier figure on a shared machine), and the
load average before and after. ``--eager`` adds the same block with ``FPCHECK_JIT=eager``, cold
and warm: what the block cost when it waited for the compiled kernels.

Run: ``python benchmarks/bench_first_block.py [--runs 5] [--eager]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

BUDGET_S = 0.5

PROGRAM = textwrap.dedent(
    """
    import json, sys, time
    import torch
    import pytest_fpcheck as fp

    torch.manual_seed(0)
    x = torch.randn(64, 256, dtype=torch.float16)
    w = torch.randn(256, 32, dtype=torch.float16)
    wall, cpu = time.perf_counter(), time.process_time()
    if sys.argv[1] == "plain":
        y = torch.nn.functional.gelu(x @ w)
    else:
        with fp.track():
            y = torch.nn.functional.gelu(x @ w)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"wall": wall, "cpu": cpu, "numba": "numba" in sys.modules}))
    """
)


def measure(kind: str, cache: Path, eager: bool = False) -> dict[str, float]:
    env = {**os.environ, "FPCHECK_CACHE_DIR": str(cache)}
    env.pop("FPCHECK_JIT", None)
    if eager:
        env["FPCHECK_JIT"] = "eager"
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, kind],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    measured: dict[str, float] = json.loads(result.stdout.splitlines()[-1])
    return measured


def summary(name: str, runs: list[dict[str, float]], plain: dict[str, float] | None) -> str:
    wall = statistics.median(r["wall"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    text = f"{name:34s} median wall {wall:7.3f} s, CPU {cpu:7.3f} s"
    if plain is not None:
        beyond = wall - plain["wall"]
        verdict = "within" if beyond <= BUDGET_S else "OVER"
        text += (
            f"; beyond plain: wall {beyond:+.3f} s, CPU {cpu - plain['cpu']:+.3f} s"
            f" ({verdict} the {BUDGET_S} s budget)"
        )
    if any(r.get("numba") for r in runs):
        text += " [Numba imported]"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--eager", action="store_true", help="also FPCHECK_JIT=eager, 1 run each")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        warm = root / "warm"
        measure("tracked", warm, eager=True)  # fill the cache: every kernel of the tour compiled
        plain, cold, warmed = [], [], []
        for run in range(args.runs):
            plain.append(measure("plain", root / "unused"))
            cold.append(measure("tracked", root / f"cold{run}"))
            warmed.append(measure("tracked", warm))
        base = {
            "wall": statistics.median(r["wall"] for r in plain),
            "cpu": statistics.median(r["cpu"] for r in plain),
        }
        print(f"runs: {args.runs} of each, alternating")
        print(summary("plain gelu(x @ w)", plain, None))
        print(summary("first fp.track() block, cold", cold, base))
        print(summary("first fp.track() block, warm", warmed, base))
        if args.eager:
            eager_cold = [measure("tracked", root / "eager-cold", eager=True)]
            eager_warm = [measure("tracked", warm, eager=True)]
            print(summary("FPCHECK_JIT=eager, cold (1 run)", eager_cold, base))
            print(summary("FPCHECK_JIT=eager, warm (1 run)", eager_warm, base))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
