"""The compiled interval kernels: how long their first call compiles, and how fast they run.

``--section compile``: each kernel's first call in a fresh process with an empty kernel cache
(``FPCHECK_CACHE_DIR`` a new temporary folder, ``FPCHECK_JIT=eager``), wall time of that call.
This is what a newcomer's first run and a CI run after an edit under ``interval/`` pay.

``--section speed``: nanoseconds per element of interval sums and products of 2**18 elements
(best of ``--repeats`` calls, after a warm-up call), per format and rounding: outward (the rules
that round each step onto the compute format) and to nearest (the tracker's arithmetic).

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_kernels.py --section compile``; to compare two
trees, run the same script with ``PYTHONPATH`` pointing at the other tree's root.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

#: (label, code run in a fresh process: its last statement is the timed first call)
COMPILE_CASES = {
    "float32 sum, outward": "E.add_bounds(x, x, y, y, False, F.format_of('float32'))",
    "float64 stepped product, nearest onto bfloat16": (
        "E.mul_bounds(x, x, y, y, True, F.format_of('bfloat16'), True)"
    ),
    "log-softmax, float32": (
        "S.log_softmax_bounds(m, m, 1, 2.0**-24, 0.0, 0.0, 0.0, F.format_of('float32'))"
    ),
}

_PRELUDE = """
import numpy as np, time
from pytest_fpcheck import formats as F
from pytest_fpcheck.interval.kernels import elementwise as E, softmax as S
x = np.linspace(-3.0, 3.0, 1000); y = np.linspace(1.0, 2.0, 1000); m = x.reshape(10, 100)
start = time.perf_counter()
{call}
print(time.perf_counter() - start)
"""


def compile_times() -> dict[str, float]:
    times = {}
    for label, call in COMPILE_CASES.items():
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, FPCHECK_CACHE_DIR=cache, FPCHECK_JIT="eager")
            result = subprocess.run(
                [sys.executable, "-c", _PRELUDE.format(call=call)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
        times[label] = float(result.stdout.split()[-1])
        print(f"{label:50s} {times[label]:7.1f} s", flush=True)
    return times


def speeds(repeats: int) -> dict[str, float]:
    import numpy as np

    from pytest_fpcheck import formats as F
    from pytest_fpcheck.interval.kernels import elementwise as E

    n = 1 << 18
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    x_hi, y_hi = np.nextafter(x, np.inf), np.nextafter(y, np.inf)
    results = {}
    for name in ("float64", "float32", "bfloat16"):
        fmt = F.format_of(name)
        for nearest in (False, True):
            cases = {
                "sum": lambda: E.add_bounds(x, x_hi, y, y_hi, False, fmt, nearest),  # noqa: B023
                "stepped product": lambda: E.mul_bounds(x, x_hi, y, y_hi, True, fmt, nearest),  # noqa: B023
            }
            for kind, call in cases.items():
                call()
                best = float("inf")
                for _ in range(repeats):
                    start = time.perf_counter()
                    call()
                    best = min(best, time.perf_counter() - start)
                label = f"{kind} onto {name}, {'nearest' if nearest else 'outward'}"
                results[label] = best / n * 1e9
                print(f"{label:50s} {results[label]:7.2f} ns/element", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=("compile", "speed"), required=True)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    if args.section == "compile":
        compile_times()
    else:
        os.environ["FPCHECK_JIT"] = "eager"
        speeds(args.repeats)


if __name__ == "__main__":
    main()
