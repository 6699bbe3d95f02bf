"""Budget of issue 7 (the non-finite watch, GPU-FPX).

* Time: watched run / plain run at most 1.3x (medians of ``--repeats`` alternated runs).
* Memory: peak RSS of a process running the model watched vs plain (separate processes), and
  the number of events (0 expected: the model is clean).

Model: a 4-layer 1024-wide MLP with GELU (batch 256) in float32 and bfloat16, with every kind
watched; the same MLP with ReLU shows the slower subnormal test that exact zeros need, and a NaN
in one input row the worst case (every output exceptional: counted, inputs scanned, flows kept). Run: ``python benchmarks/bench_nonfinite.py [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from pytest_fpcheck.diagnostics.nonfinite import Watch, watch_nonfinite

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


ACTIVATIONS = {"gelu": torch.nn.GELU, "relu": torch.nn.ReLU}


def mlp(dtype: torch.dtype, activation: str = "gelu") -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), ACTIVATIONS[activation]()]
    return torch.nn.Sequential(*layers[:-1]).to(dtype).eval(), torch.randn(256, 1024).to(dtype)


def median_seconds(
    runs: tuple[Callable[[], object], Callable[[], object]], repeats: int
) -> tuple[float, float]:
    """Median times of two runs, alternated so that a change in machine load hits both."""
    times: tuple[list[float], list[float]] = ([], [])
    for run in runs:
        run()  # warm-up
    for _ in range(repeats):
        for run, kept in zip(runs, times, strict=True):
            start = time.perf_counter()
            run()
            kept.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def peak_rss_mib(dtype: str, activation: str, poisoned: bool, watched: bool) -> float:
    """Peak RSS of a fresh process that builds the model and runs it once."""
    code = (
        "import resource, torch, sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "from bench_nonfinite import mlp, poison, DTYPES\n"
        "from pytest_fpcheck.diagnostics.nonfinite import Watch, watch_nonfinite\n"
        f"model, x = mlp(DTYPES[{dtype!r}], {activation!r})\n"
        f"x = poison(x) if {poisoned} else x\n"
        "with torch.no_grad():\n"
        f"    if {watched}:\n"
        "        with watch_nonfinite() as w:\n"
        "            model(x)\n"
        "    else:\n"
        "        model(x)\n"
        # VmHWM: ru_maxrss keeps the parent's peak across fork and exec on Linux
        "import os\n"
        "status = '/proc/self/status'\n"
        "lines = open(status).read().splitlines() if os.path.exists(status) else []\n"
        "hwm = [int(line.split()[1]) for line in lines if line.startswith('VmHWM:')]\n"
        "print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return int(out.split()[-1]) / 1024


def poison(x: torch.Tensor) -> torch.Tensor:
    """``x`` with a NaN in its first row: every output then takes the counting path."""
    x = x.clone()
    x[0, 0] = float("nan")
    return x


#: (activation, dtype, NaN in the input)
CASES = [
    *((activation, dtype, False) for activation in ACTIVATIONS for dtype in DTYPES),
    ("gelu", "float32", True),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(
        "| model | dtype | plain (ms) | watched (ms) | ratio | events "
        "| peak RSS plain / watched (MiB) |"
    )
    print("|---|---|---|---|---|---|---|")
    for activation, name, poisoned in CASES:
        model, x = mlp(DTYPES[name], activation)
        x = poison(x) if poisoned else x

        def plain(model: torch.nn.Module = model, x: torch.Tensor = x) -> object:
            with torch.no_grad():
                return model(x)

        def watched(model: torch.nn.Module = model, x: torch.Tensor = x) -> Watch:
            with torch.no_grad(), watch_nonfinite() as watch:
                model(x)
            return watch

        t_plain, t_watched = median_seconds((plain, watched), options.repeats)
        events = len(watched().events)
        rss = [peak_rss_mib(name, activation, poisoned, w) for w in (False, True)]
        label = f"MLP {activation}" + (", NaN in input row 0" if poisoned else "")
        print(
            f"| {label} | {name} | {t_plain * 1e3:.1f} | {t_watched * 1e3:.1f} | "
            f"{t_watched / t_plain:.2f}x | {events} | {rss[0]:.0f} / {rss[1]:.0f} |"
        )


if __name__ == "__main__":
    main()
