"""What this machine's matmuls do with their bits (FTTN, paper 004 sections 5-6.1): probe NumPy's
and PyTorch's CPU matmuls, then replay the paper's non-portability example on emulated matrix
units (docs/matmul.md shows the output of ``pytest examples/test_matmul_probe.py -s``).

``fp.probe_matmul`` is ``pytest_fpcheck.diagnostics.probe.probe_matmul``; ``fp.emulate`` is
``pytest_fpcheck.emulate``.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_fpcheck import emulate
from pytest_fpcheck.diagnostics.probe import MAX_CALLS, probe_matmul, probe_torch_matmul


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_numpy_matmul_features(dtype: str) -> None:
    features = probe_matmul(np.matmul, in_dtype=dtype)
    print(f"\nnumpy.matmul\n{features.summary()}")
    assert features.calls <= MAX_CALLS
    assert features.order is not None


# some probes overflow a narrow result format on purpose (is the accumulator wider?)
@pytest.mark.fpcheck(allow=["aten.mm at *"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_cpu_matmul_features(dtype: str) -> None:
    pytest.importorskip("torch")
    features = probe_torch_matmul("cpu", dtype)
    print(f"\ntorch.matmul on the CPU\n{features.header()}")
    assert features.calls <= MAX_CALLS


def trailing_update(k: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Paper 004 section 6.1, one row and column of it: D = C - A B with C = 2**20,
    A[0] = 2**10, A[j] = 2**-2 (odd j) or 2**-3 (even j), B[0] = 2**10, B[j] = 2**-3, in
    float16; A B is accumulated in float32, then subtracted from C."""
    a = np.where(np.arange(k) % 2 == 1, 2.0**-2, 2.0**-3)
    a[0] = 2.0**10
    b = np.full(k, 2.0**-3)
    b[0] = 2.0**10
    return a[None, :].astype(np.float16), b[:, None].astype(np.float16), 2.0**20


def test_the_same_update_on_different_hardware_models() -> None:
    k = 1024
    a, b, c = trailing_update(k)
    exact = c - float((a.astype(np.float64) @ b.astype(np.float64))[0, 0])
    products = {
        "IEEE fused multiply-adds (CPU)": emulate.ieee_matmul(a, b, out_dtype="float32"),
        "4-term blocks, no extra bits, toward zero": emulate.fused_matmul(
            a, b, width=4, extra_bits=0, rounding="toward-zero", out_dtype="float32"
        ),
        "8-term blocks, no extra bits, toward zero": emulate.fused_matmul(
            a, b, width=8, extra_bits=0, rounding="toward-zero", out_dtype="float32"
        ),
        "16-term blocks, 3 extra bits, toward zero": emulate.fused_matmul(
            a, b, width=16, extra_bits=3, rounding="toward-zero", out_dtype="float32"
        ),
    }
    print(f"\nD = C - A B over k = {k} (exact: {exact})")
    results = {}
    for name, ab in products.items():
        results[name] = float(np.float32(c) - ab[0, 0])
        print(f"  {name:<45} {results[name]}")
    assert results["IEEE fused multiply-adds (CPU)"] == 0.0  # every small product swamped
    assert results["16-term blocks, 3 extra bits, toward zero"] < 0.0  # kept by the extra bits
