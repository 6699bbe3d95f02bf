"""track(matmul_model=...): matmul bounds from a fused-summation model of the hardware (issue 9)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")


def operands(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    a = (torch.rand(8, 256, generator=generator) + 0.5).half()
    b = (torch.rand(256, 8, generator=generator) + 0.5).half()
    return a, b


TRUNCATING = {
    "width": 4,
    "extra_bits": 0,
    "rounding": "toward-zero",
    "in_dtype": "float16",
    "out_dtype": "float16",
}  # the emulator accumulates in the result format


def test_a_model_of_truncating_hardware_encloses_what_that_hardware_computes() -> None:
    a, b = operands()
    emulated = fp.emulate.fused_matmul(
        a, b, width=4, extra_bits=0, rounding="toward-zero", out_dtype="float16"
    )
    with fp.track(matmul_model=TRUNCATING):
        c = a @ b
    bounds = fp.bounds_of(c)
    assert bounds is not None
    assert any("fused-summation model" in note for note in bounds.notes)
    assert bounds.contains(np.asarray(emulated, dtype=np.float64)).all()
    assert bounds.contains(a.double().numpy() @ b.double().numpy()).all()
    assert bounds.contains(c.double().numpy()).all()
    with fp.track():  # the generic bound models IEEE accumulation: it excludes such hardware
        generic = fp.bounds_of(a @ b)
    assert generic is not None
    assert not generic.contains(np.asarray(emulated, dtype=np.float64)).any()


def test_a_probed_model_bounds_this_machines_matmul() -> None:
    from pytest_fpcheck.diagnostics.probe import probe_torch_matmul

    features = probe_torch_matmul("cpu", "float16")
    a, b = operands(1)
    with fp.track(matmul_model=features):
        c = a @ b
        other = a.float() @ b.float()  # float32 inputs: no model for them, the generic bound
    bounds, generic = fp.bounds_of(c), fp.bounds_of(other)
    assert bounds is not None
    assert generic is not None
    assert bounds.contains(c.double().numpy()).all()
    assert bounds.contains(a.double().numpy() @ b.double().numpy()).all()
    assert not any("fused-summation model" in note for note in generic.notes)


def test_a_matmul_model_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(fp.InvalidArgument, match=r"matmul_model=.*a MatmulFeatures"):
        fp.track(matmul_model="tensor cores")
    with pytest.raises(fp.InvalidArgument, match="in_dtype and out_dtype"):
        fp.track(matmul_model={"width": 4})


def test_cuda_tensor_core_matmuls_take_the_fused_truncating_bound() -> None:
    """No GPU here: the policy itself. A float16 matmul on CUDA runs on tensor cores, whose
    truncating fused adders err by more than IEEE accumulation; on the CPU it is IEEE."""
    from types import SimpleNamespace

    from pytest_fpcheck.formats import FORMATS
    from pytest_fpcheck.tracking.core.policy import SumBound, dot_factor
    from pytest_fpcheck.tracking.torch.rules.linalg import _matmul_setup

    def context(device: str) -> SimpleNamespace:
        return SimpleNamespace(
            fmt=FORMATS["float16"], device=torch.device(device), sums=SumBound(), note=print
        )

    cuda, accumulator = _matmul_setup(context("cuda"), 256)  # type: ignore[arg-type]
    cpu, _ = _matmul_setup(context("cpu"), 256)  # type: ignore[arg-type]
    fused = dot_factor(256, inputs="fused", accumulator_bits=24, products_exact=True)
    assert cuda >= fused > cpu
    # the emulated truncating hardware's error is inside the fused factor's bound
    a, b = operands(2)
    exact = a.double().numpy() @ b.double().numpy()
    for width in (1, 4, 16, 32):
        emulated = fp.emulate.fused_matmul(
            a, b, width=width, extra_bits=0, rounding="toward-zero", out_dtype="float32"
        )
        magnitude = np.abs(a.double().numpy()) @ np.abs(b.double().numpy())
        assert (np.abs(np.asarray(emulated, dtype=np.float64) - exact) <= fused * magnitude).all()
    assert accumulator.name in ("float32", "float16")
