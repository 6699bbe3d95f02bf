"""Which precision matmuls accumulate in, per device and flag (no GPU needed: the policy only
reads the flags and the device type)."""

from __future__ import annotations

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.core.policy import compute_format, matmul_precision  # noqa: E402

F = fp.formats.FORMATS
CUDA = torch.device("cuda")


def test_cpu_accumulates_half_formats_in_float32_and_rounds_to_nearest() -> None:
    for name in ("float16", "bfloat16"):
        precision = matmul_precision(F[name], torch.device("cpu"))
        assert (precision.inputs, precision.accumulate.name, precision.faithful) == (
            None,
            "float32",
            False,
        )
    assert compute_format(F["bfloat16"]).name == "float32"
    assert compute_format(F["float64"]).name == "float64"


def test_cuda_reduced_precision_reduction_widens_the_bound() -> None:
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_fp16_reduced_precision_reduction
    try:
        matmul.allow_fp16_reduced_precision_reduction = True
        assert matmul_precision(F["float16"], CUDA).accumulate.name == "float16"
        matmul.allow_fp16_reduced_precision_reduction = False
        assert matmul_precision(F["float16"], CUDA).accumulate.name == "float32"
        assert matmul_precision(F["float16"], CUDA).faithful
    finally:
        matmul.allow_fp16_reduced_precision_reduction = saved


def test_cuda_tf32_rounds_float32_inputs() -> None:
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_tf32
    try:
        matmul.allow_tf32 = True
        assert matmul_precision(F["float32"], CUDA).inputs.name == "tfloat32"
        matmul.allow_tf32 = False
        precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            assert matmul_precision(F["float32"], CUDA).inputs is None
        finally:
            torch.set_float32_matmul_precision(precision)
    finally:
        matmul.allow_tf32 = saved
