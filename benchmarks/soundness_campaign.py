"""The long soundness campaign of the PyTorch bounds engine (issue 3: at least 100,000 random
programs, zero violations). CI runs a 300-program slice (tests/tracking/test_soundness.py).

Run: ``python benchmarks/soundness_campaign.py --programs 100000 [--seed 1] [--mode
a_posteriori] [--require OP] [--device cuda] [--seconds S] [--matmul-precision high]``. ``--device cuda`` runs the
programs on a GPU (the CUDA models of ``tracking/core/policy.py``: cuBLAS's reduced-precision
split-K, tensor cores); ``--seconds`` stops after that long (a campaign sized to a lease of the
device machine). Prints progress
and, at the end, the number of programs checked, the number with an exact value (the others
are undefined, e.g. log of zero), and every violation found (there must be none).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from hypothesis import HealthCheck, Phase, given, seed, settings

from pytest_fpcheck.errors import UnsupportedOperation
from tests.tracking.programs import programs
from tests.tracking.test_soundness import check_program


class _TimeUp(Exception):
    """``--seconds`` have passed."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--programs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument(
        "--require",
        default=None,
        metavar="OP",
        help="every program holds this operation (tests/tracking/programs.py), e.g. "
        "layer_norm_backward: a campaign aimed at one rule",
    )
    parser.add_argument(
        "--mode",
        default="rigorous",
        choices=("rigorous", "a_posteriori"),
        help="the tracking mode (a posteriori also checks the float64 run of each program)",
    )
    parser.add_argument("--device", default="cpu", help="where the programs run: cpu, cuda")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="stop after this long (the programs so far count)",
    )
    parser.add_argument(
        "--matmul-precision",
        default="highest",
        choices=("highest", "high", "medium"),
        help="torch.set_float32_matmul_precision: TF32 (high) or bfloat16 (medium) inputs to "
        "float32 matmuls where the hardware has them",
    )
    options = parser.parse_args()
    torch.set_float32_matmul_precision(options.matmul_precision)
    violations: list[str] = []
    refused = Counter[str]()
    count = 0
    start = time.perf_counter()

    @seed(options.seed)
    @settings(
        max_examples=options.programs,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs(max_steps=options.max_steps, require=options.require))
    def campaign(program: object) -> None:
        nonlocal count
        if options.seconds is not None and time.perf_counter() - start > options.seconds:
            raise _TimeUp
        count += 1
        try:
            check_program(program, options.mode, options.device)
        except UnsupportedOperation as error:  # a refusal names its operation: no bound given
            refused[error.op] += 1
        except AssertionError as error:
            violations.append(repr(error)[:2000])
            print("VIOLATION", violations[-1], flush=True)
        if count % 1000 == 0:
            rate = count / (time.perf_counter() - start)
            print(
                f"{count} programs, {len(violations)} violations, {rate:.0f} programs/s", flush=True
            )

    with contextlib.suppress(_TimeUp):
        campaign()
    elapsed = time.perf_counter() - start
    print(
        f"checked {count} programs on {options.device} in {elapsed:.0f} s (seed {options.seed}, "
        f"{options.mode}): "
        f"{len(violations)} violations"
        + (f"; refused (no rule on this device): {dict(refused)}" if refused else "")
    )
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
