"""The long soundness campaign of the instrumented Triton interpreter (issue 4: zero violations).

Random element-wise kernels (chains of up to six of the 26 operations of
``tests/tracking/triton_programs.py``, in float32, float16 and bfloat16, with float8 casts) on
inputs mixing ordinary values with subnormals, huge values and cancelling pairs. For each program
the exact value (mpmath) must lie in the stored bounds, and so must the interpreter's value where
triton's interpreter computes correctly (not bfloat16 arithmetic, not float8 underflow: see
docs/triton.md). CI runs a 60-program slice (tests/tracking/test_triton_soundness.py). Run:
``python benchmarks/triton_soundness_campaign.py --programs 20000 [--seed 1]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import mpmath
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "tracking"))

from triton_programs import OPS, chain_kernel, codes, exact_chain

import pytest_fpcheck as fp

CORNERS = np.array(
    [0.0, -0.0, 1.0, -1.0, 1e-40, -3e-41, 1.2e-38, 6e-8, 3e38, -3.3e38, 65504.0, 1e-5,
     1.0000001, 0.9999999, 2.0**-24, 88.7, -103.0, 3.14159265, 1e10]
)  # fmt: skip
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: casts the interpreter performs with its own bit manipulation (``_convert_float``)
_CONVERTED = ("to_bf16", "to_f8e5", "to_f8e4")
N = 8


def draw(rng: np.random.Generator) -> torch.Tensor:
    values = np.where(rng.random(N) < 0.3, rng.choice(CORNERS, N), rng.normal(0, 10, N))
    return torch.tensor(values, dtype=torch.float32)


def check(rng: np.random.Generator) -> str | None:
    """One random program; a description of the violation, or None."""
    names = [OPS[i] for i in rng.integers(0, len(OPS), rng.integers(1, 7))]
    dtype = DTYPES[rng.integers(0, len(DTYPES))]
    x, y = draw(rng).to(dtype), draw(rng).to(dtype)
    if rng.random() < 0.2:
        y = -x  # cancellation
    out = torch.empty_like(x)
    trusted = dtype != torch.bfloat16 and not any(n in _CONVERTED for n in names)
    try:
        with np.errstate(all="ignore"), fp.track():
            chain_kernel[(1,)](x, y, out, N, OPS=codes(names), BLOCK=N)
    except fp.UnsupportedOperation as error:
        if trusted or "computed them wrongly" not in str(error):
            return f"{names} {dtype}: {error}"
    bounds = fp.bounds_of(out)
    assert bounds is not None
    for i in range(N):
        exact = exact_chain(names, float(x[i]), float(y[i]))
        if exact is not None and not mpmath.mpf(bounds.lo[i]) <= exact <= mpmath.mpf(bounds.hi[i]):
            return f"{names} {dtype} x={float(x[i])!r} y={float(y[i])!r}: exact {exact} outside"
    if trusted and not bounds.contains(out.double().numpy()).all():
        return f"{names} {dtype} x={x.tolist()} y={y.tolist()}: computed value outside"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    violations = []
    start = time.perf_counter()
    for count in range(1, args.programs + 1):
        found = check(rng)
        if found is not None:
            violations.append(found)
            print("VIOLATION", found, flush=True)
        if count % 1000 == 0:
            rate = count / (time.perf_counter() - start)
            print(
                f"{count} programs, {len(violations)} violations, {rate:.0f} programs/s", flush=True
            )
    print(f"checked {args.programs} programs: {len(violations)} violations")


if __name__ == "__main__":
    main()
