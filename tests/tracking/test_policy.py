"""Which precision matmuls accumulate in, per device and flag (no GPU needed: the policy only
reads the flags and the device type)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.core.policy import (  # noqa: E402
    compute_format,
    convolution_precision,
    matmul_precision,
)

from .cpu_kernels import replaced_cpu_kernels  # noqa: E402

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


def _conv1d_in_float16(x: torch.Tensor, w: torch.Tensor, order: list[int]) -> torch.Tensor:
    """A valid 1-d convolution of float16 tensors with every product and partial sum rounded
    to float16, the terms added in ``order`` (what a CPU kernel that accumulates in the
    tensor's format may compute)."""
    batch, _, length = x.shape
    out_channels, in_channels, width = w.shape
    terms = [(c, j) for c in range(in_channels) for j in range(width)]
    out = torch.zeros(batch, out_channels, length - width + 1, dtype=torch.float16)
    for b in range(batch):
        for o in range(out_channels):
            for t in range(length - width + 1):
                total = torch.zeros((), dtype=torch.float16)
                for index in order:
                    c, j = terms[index]
                    total = total + x[b, c, t + j] * w[o, c, j]  # each op rounded to float16
                out[b, o, t] = total
    return out


def test_accumulating_in_format_bounds_a_kernel_that_rounds_its_partial_sums() -> None:
    """Under ``accumulating_in_format`` a float16 CPU convolution's enclosure holds a
    convolution computed entirely in float16, in any order; the float32 model (the default)
    does not hold it: the wider model is needed, and only it is wide enough."""
    from pytest_fpcheck.tracking.core.policy import accumulating_in_format

    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 6, 12, generator=generator).to(torch.float16)
    w = torch.randn(3, 6, 5, generator=generator).to(torch.float16)
    k = 6 * 5
    orders = [list(range(k)), list(reversed(range(k)))]
    orders += [torch.randperm(k, generator=generator).tolist() for _ in range(3)]
    emulated = [_conv1d_in_float16(x, w, order) for order in orders]

    assert matmul_precision(F["float16"], torch.device("cpu")).accumulate.name == "float32"
    with accumulating_in_format():
        assert matmul_precision(F["float16"], torch.device("cpu")).accumulate.name == "float16"
        assert matmul_precision(F["float32"], torch.device("cpu")).accumulate.name == "float32"
        with fp.track(strict=True):
            wide = torch.nn.functional.conv1d(x, w)
    assert matmul_precision(F["float16"], torch.device("cpu")).accumulate.name == "float32"
    for value in emulated:
        assert fp.bounds_of(wide).contains(value).all()

    with fp.track(strict=True):
        tight = torch.nn.functional.conv1d(x, w)
    outside = sum(int((~fp.bounds_of(tight).contains(value)).sum()) for value in emulated)
    assert outside > 0


@pytest.fixture
def onednn_precision() -> Iterator[None]:
    """Put back oneDNN's float32 precisions and the float32 matmul precision after a test."""
    mkldnn = torch.backends.mkldnn
    saved = (mkldnn.matmul.fp32_precision, mkldnn.conv.fp32_precision)
    precision = torch.get_float32_matmul_precision()
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        mkldnn.matmul.fp32_precision, mkldnn.conv.fp32_precision = saved


def test_cpu_float32_products_follow_onednns_precision(onednn_precision: None) -> None:
    cpu = torch.device("cpu")
    assert matmul_precision(F["float32"], cpu).inputs is None
    assert convolution_precision(F["float32"], cpu).inputs is None
    torch.set_float32_matmul_precision("medium")
    assert matmul_precision(F["float32"], cpu).inputs.name == "bfloat16"
    torch.set_float32_matmul_precision("high")
    assert matmul_precision(F["float32"], cpu).inputs.name == "tfloat32"
    assert convolution_precision(F["float32"], cpu).inputs is None
    torch.backends.mkldnn.conv.fp32_precision = "bf16"
    assert convolution_precision(F["float32"], cpu).inputs.name == "bfloat16"
    # float16 and bfloat16 products are not affected
    assert matmul_precision(F["bfloat16"], cpu).inputs is None


def _mm_of_bfloat16_inputs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A float32 matmul from inputs rounded to bfloat16 (what oneDNN may compute under
    fp32_precision "bf16"), accumulated exactly and rounded once."""
    x = a.to(torch.bfloat16).double().numpy()
    y = b.to(torch.bfloat16).double().numpy()
    return torch.from_numpy(x @ y).to(a.dtype)


def test_a_kernel_using_bfloat16_inputs_is_enclosed_when_onednn_may(
    onednn_precision: None,
) -> None:
    """Under ``set_float32_matmul_precision("medium")`` the enclosure holds a float32 product
    computed from bfloat16-rounded inputs (registered as ATen's CPU mm for the test); with the
    default precision it would not (a kernel may not do it then)."""
    generator = torch.Generator().manual_seed(5)
    a = torch.randn(16, 64, generator=generator)
    b = torch.randn(64, 16, generator=generator)
    with replaced_cpu_kernels(mm=_mm_of_bfloat16_inputs):
        with fp.track(strict=True):
            tight = a @ b
            assert not fp.bounds_of(tight).contains(tight).all()
        # read after the block, bounds that miss the values are refused, never returned
        with pytest.raises(fp.StaleBoundsError):
            fp.bounds_of(tight)
        torch.set_float32_matmul_precision("medium")
        with fp.track(strict=True):
            out = a @ b
    bounds = fp.bounds_of(out)
    assert bounds.contains(out).all()
    assert bounds.contains(a.double() @ b.double()).all()
