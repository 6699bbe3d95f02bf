"""The case study of the Dual-Delta paper (section 5), reproduced on the CPU.

The paper compares a GPU fp16 matmul (custom) with a CPU one (reference) against an fp64 oracle:
equivalent at 128x128x128, far less accurate at 128x4096x128 because of cuBLAS' reduced-precision
split-K reduction, and equivalent again once that reduction is done in fp32. Here the GPU kernel
is modelled by :func:`split_k_matmul`: K is cut into chunks of ``SPLIT_K``; each chunk's product is
accumulated in fp32 and rounded to fp16, and the chunk partials are then summed in fp16 (the
defect) or, with the fix, kept and summed in fp32 and rounded once. With K <= SPLIT_K there is a
single chunk, as a real split-K kernel does not split short reductions.

Run as a test: ``python -m pytest examples/test_dual_delta.py -p no:cacheprovider``. Run as a
script to print the three tables and redraw the figures of docs/dual-delta.md:
``python examples/test_dual_delta.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

# Under ``pytest --fpcheck`` these tests run untracked: a trial needs the outputs, not their
# round-off bounds, and tracking the 420 trials' matmuls would take minutes instead of seconds.
# Their comparisons still reach the run report.
pytestmark = pytest.mark.fpcheck(enabled=False)

SPLIT_K = 256
N_SQUARE = 300  # trials at 128x128x128: about 2 ms each
N_LONG = 60  # trials at 128x4096x128: about 35 ms each


def split_k_matmul(a: Any, b: Any, reduce_dtype: Any) -> Any:
    """fp16 GEMM with split-K: chunk products in fp32, rounded to ``reduce_dtype`` and summed in
    ``reduce_dtype`` chunk after chunk, the total rounded to fp16."""
    partials = [
        (a[:, start : start + SPLIT_K].float() @ b[start : start + SPLIT_K].float()).to(
            reduce_dtype
        )
        for start in range(0, a.shape[1], SPLIT_K)
    ]
    total = partials[0]
    for partial in partials[1:]:
        total = total + partial
    return total.half()


def matmul_fp16_reduction(a: Any, b: Any) -> Any:
    """The custom kernel: split-K partials reduced in fp16."""
    return split_k_matmul(a, b, torch.float16)


def matmul_fp32_reduction(a: Any, b: Any) -> Any:
    """The fixed kernel: split-K partials reduced in fp32."""
    return split_k_matmul(a, b, torch.float32)


def reference_matmul(a: Any, b: Any) -> Any:
    """The reference: one fp32 accumulation over all of K, rounded once to fp16."""
    return (a.float() @ b.float()).half()


def fp16_matrices(m: int, k: int, n: int) -> Callable[[np.random.Generator], tuple[Any, Any]]:
    """Inputs: an m x k and a k x n matrix of standard normals rounded to fp16."""

    def inputs(rng: np.random.Generator) -> tuple[Any, Any]:
        a = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32)).half()
        b = torch.from_numpy(rng.standard_normal((k, n), dtype=np.float32)).half()
        return a, b

    return inputs


def test_square_matmul_is_equivalent() -> None:
    result = fp.assert_dual_delta(
        matmul_fp16_reduction, reference_matmul, inputs=fp16_matrices(128, 128, 128), n=N_SQUARE
    )
    assert (result.accuracy, result.stability) == ("equivalent", "equivalent")


def test_long_reduction_in_fp16_is_less_accurate() -> None:
    with pytest.raises(fp.DualDeltaFailure) as failure:
        fp.assert_dual_delta(
            matmul_fp16_reduction, reference_matmul, inputs=fp16_matrices(128, 4096, 128), n=N_LONG
        )
    result = failure.value.result
    assert result.accuracy == "custom_less_accurate"
    assert result.mean_ratio.low > 10


def test_fp32_reduction_restores_equivalence() -> None:
    result = fp.assert_dual_delta(
        matmul_fp32_reduction, reference_matmul, inputs=fp16_matrices(128, 4096, 128), n=N_LONG
    )
    assert (result.accuracy, result.stability) == ("equivalent", "equivalent")


def main(image_dir: Path) -> None:
    """Print the three summaries and draw the three figures of the docs page."""
    cases = [
        ("square", matmul_fp16_reduction, (128, 128, 128), N_SQUARE),
        ("long", matmul_fp16_reduction, (128, 4096, 128), N_LONG),
        ("fixed", matmul_fp32_reduction, (128, 4096, 128), N_LONG),
    ]
    for name, custom, shape, n in cases:
        result = fp.dual_delta(custom, reference_matmul, inputs=fp16_matrices(*shape), n=n)
        print(f"--- {name}: {'x'.join(map(str, shape))}\n{result.summary()}\n")
        result.plot(image_dir / f"dual-delta-{name}.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "docs" / "img")
