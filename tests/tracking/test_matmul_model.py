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
