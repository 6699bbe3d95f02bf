"""Budget of issue 7 (the non-finite watch, GPU-FPX).

* Time: watched run / plain run at most 1.3x (median of ``--repeats`` runs each).
* Memory: peak RSS of a process running the model watched vs plain (separate processes), and
  the number of events (0 expected: the model is clean).

Model: a 4-layer 1024-wide MLP with GELU (batch 256) in float32 and bfloat16, with every kind
watched. Run: ``python benchmarks/bench_nonfinite.py [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from pytest_fpcheck.diagnostics.nonfinite import watch_nonfinite

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def mlp(dtype: torch.dtype) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    return torch.nn.Sequential(*layers[:-1]).to(dtype).eval(), torch.randn(256, 1024).to(dtype)


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_rss_mib(dtype: str, watched: bool) -> float:
    """Peak RSS of a fresh process that builds the model and runs it once."""
    code = (
        "import resource, torch, sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "from bench_nonfinite import mlp, DTYPES\n"
        "from pytest_fpcheck.diagnostics.nonfinite import watch_nonfinite\n"
        f"model, x = mlp(DTYPES[{dtype!r}])\n"
        "with torch.no_grad():\n"
        f"    if {watched}:\n"
        "        with watch_nonfinite() as w:\n"
        "            model(x)\n"
        "    else:\n"
        "        model(x)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return int(out.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("| dtype | plain (ms) | watched (ms) | ratio | events | peak RSS plain / watched (MiB) |")
    print("|---|---|---|---|---|---|")
    for name, dtype in DTYPES.items():
        model, x = mlp(dtype)

        def plain(model: torch.nn.Module = model, x: torch.Tensor = x) -> object:
            with torch.no_grad():
                return model(x)

        def watched(model: torch.nn.Module = model, x: torch.Tensor = x) -> object:
            with torch.no_grad(), watch_nonfinite() as watch:
                model(x)
            return watch

        t_plain = median_seconds(plain, options.repeats)
        t_watched = median_seconds(watched, options.repeats)
        watch = watched()
        events = len(watch.events)
        rss = (peak_rss_mib(name, False), peak_rss_mib(name, True))
        print(
            f"| {name} | {t_plain * 1e3:.1f} | {t_watched * 1e3:.1f} | "
            f"{t_watched / t_plain:.2f}x | {events} | {rss[0]:.0f} / {rss[1]:.0f} |"
        )
    print(
        f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
