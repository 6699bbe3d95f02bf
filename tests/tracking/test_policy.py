"""Which precision matmuls accumulate in, per device and flag (no GPU needed: the policy only
reads the flags and the device type)."""

from __future__ import annotations

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.core.policy import (  # noqa: E402
    compute_format,
    convolution_precision,
    matmul_precision,
)

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


def test_cuda_convolutions_follow_cudnns_own_tf32_flag() -> None:
    # cuDNN rounds float32 convolution inputs to TF32 under torch.backends.cudnn.allow_tf32
    # (on by default) even where the matmul flags forbid TF32: a convolution bounded by the
    # matmul model alone assumed float32 inputs there
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    saved = cudnn.allow_tf32, matmul.allow_tf32, torch.get_float32_matmul_precision()
    try:
        matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        assert matmul_precision(F["float32"], CUDA).inputs is None
        cudnn.allow_tf32 = True
        assert convolution_precision(F["float32"], CUDA).inputs.name == "tfloat32"
        assert convolution_precision(F["float32"], CUDA, allow_tf32=False).inputs is None
        cudnn.allow_tf32 = False
        assert convolution_precision(F["float32"], CUDA).inputs is None
        assert convolution_precision(F["float32"], CUDA, allow_tf32=True).inputs.name == "tfloat32"
        cudnn.allow_tf32 = True
        cpu = convolution_precision(F["float32"], torch.device("cpu"))
        assert (cpu.inputs, cpu.faithful) == (None, False)
        assert convolution_precision(F["float16"], CUDA) == matmul_precision(F["float16"], CUDA)
    finally:
        cudnn.allow_tf32, matmul.allow_tf32 = saved[0], saved[1]
        torch.set_float32_matmul_precision(saved[2])
