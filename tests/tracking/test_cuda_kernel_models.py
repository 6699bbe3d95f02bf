"""The parts of the CUDA kernels' rules that run on any machine (the kernels themselves need a
GPU: ``benchmarks/gpu_checks.py``, results in docs/gpu.md): the tensor-core model of fused
attention holds the CPU kernel's value and is never tighter than the CPU model; the CUDA
attention backward kernels' adapters give the math path's gradients from each kernel's saved
log-sum-exp layout; max pooling's backward (which PyTorch before 2.12 cannot decompose)."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.torch import attention, decompose  # noqa: E402


def _operands(dtype, seed=0, heads=2, rows=24, depth=8):
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(1, heads, rows, depth, generator=generator) * 2).to(dtype) for _ in range(3)
    ]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_the_tensor_core_model_holds_the_kernel_and_contains_the_cpu_model(dtype, causal) -> None:
    q, k, v = _operands(dtype)
    out, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
    radii = {}
    for device in ("CPU", "CUDA"):
        target = out.clone()
        with fp.track():
            attention._bound_beside(target, q, k, v, causal, None, None, device)
        bounds = fp.bounds_of(target)
        assert bounds is not None
        assert bounds.contains(target).all()
        assert np.isfinite(bounds.radius).all()
        radii[device] = bounds
    cpu, cuda = radii["CPU"], radii["CUDA"]
    assert (cuda.lo <= cpu.lo).all()
    assert (cpu.hi <= cuda.hi).all()
    assert (cuda.radius > cpu.radius).any()  # the fused adders' truncation is charged


def test_a_kernel_value_outside_the_model_gets_no_bounds_and_a_note() -> None:
    q, k, v = _operands(torch.bfloat16)
    out, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    out[0, 0, 0, 0] += 1.0  # a kernel computing something else
    with fp.track():
        attention._bound_beside(out, q, k, v, False, None, None, "CUDA")
    bounds = fp.bounds_of(out)
    assert np.isinf(bounds.radius[0, 0, 0, 0])
    assert np.isfinite(bounds.radius.ravel()[1:]).all()
    assert any("CUDA attention kernel" in note for note in bounds.notes)


@pytest.mark.parametrize("kind", ["flash", "efficient", "cudnn"])
def test_the_cuda_attention_kernels_name_the_arguments_the_substitutes_read(kind) -> None:
    """The substitutes read their arguments by the names of the kernels' schemas."""
    for suffix in ("", "_backward"):
        kernel = getattr(torch.ops.aten, f"_scaled_dot_product_{kind}_attention{suffix}").default
        names = {argument.name for argument in kernel._schema.arguments}
        assert {"query", "key", "value", "dropout_p", "is_causal", "scale"} <= names
        if suffix:
            assert {"out", "logsumexp"} <= names
            assert names & {"grad_out", "grad_out_"}
    assert "attn_bias" in names or kind == "flash"


def test_saved_log_sum_exp_layouts() -> None:
    lse = torch.arange(2 * 3 * 40, dtype=torch.float32).view(2, 3, 40)
    assert torch.equal(decompose._lse(lse, 33), lse[..., :33])  # padded to 32s (efficient)
    assert torch.equal(decompose._lse(lse[..., :33, None], 33), lse[..., :33])  # cuDNN's
    assert torch.equal(decompose._lse(lse, 40), lse)  # flash


@pytest.mark.parametrize("causal", [False, True])
def test_the_cuda_backward_adapters_are_the_math_path(causal) -> None:
    q, k, v = _operands(torch.float32, seed=3)
    grad = torch.randn_like(q)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)
    expected = decompose._attention_backward(grad, q, k, v, out, lse, 0.0, causal)
    padded = torch.nn.functional.pad(lse, (0, 8), value=float("nan"))
    own = decompose._OWN
    flash, efficient, cudnn = (
        own[f"aten._scaled_dot_product_{kind}_attention_backward"]
        for kind in ("flash", "efficient", "cudnn")
    )
    got = {
        "flash": flash(grad, q, k, v, out, lse, None, None, 24, 24, 0.0, causal, None, None),
        "efficient": efficient(
            grad, q, k, v, None, out, padded, None, None, 0.0, [True, True, True, False], causal
        ),
        "cudnn": cudnn(
            grad, q, k, v, out, lse[..., None], None, None, None, None, None, 24, 24, 0.0, causal
        ),
    }
    assert got["efficient"][3] is None  # the mask's gradient, not asked for
    got["efficient"] = got["efficient"][:3]
    reference = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad, q, k, v, out, lse, 0.0, causal
    )
    for name, grads in got.items():
        for want, have, kernel in zip(expected, grads, reference, strict=True):
            assert torch.equal(want, have), name
            torch.testing.assert_close(have, kernel, rtol=1e-4, atol=1e-5)


def test_a_mask_gradient_and_dropout_are_refused_by_name() -> None:
    q, k, v = _operands(torch.float32)
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    efficient = decompose._OWN["aten._scaled_dot_product_efficient_attention_backward"]
    with pytest.raises(fp.UnsupportedOperation, match="gradient of an attention mask"):
        efficient(q, q, k, v, torch.zeros(24, 24), out, lse, None, None, 0.0, [True] * 4)
    with pytest.raises(fp.UnsupportedOperation, match=r"dropout \(dropout_p=0.1\)"):
        attention._refuse_dropout("_scaled_dot_product_flash_attention", 0.1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_max_pooling_backward_with_overlapping_windows(dtype) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9).to(dtype).requires_grad_()
    plain = torch.nn.functional.max_pool2d(x, 3, stride=1, padding=1)
    (expected,) = torch.autograd.grad(plain.square().sum(), x)
    with fp.track(strict=True):
        y = torch.nn.functional.max_pool2d(x, 3, stride=1, padding=1)
        (grad,) = torch.autograd.grad(y.square().sum(), x)
    assert torch.equal(grad, expected)
    bounds = fp.bounds_of(grad)
    assert bounds.contains(grad).all()
    assert np.isfinite(bounds.radius).all()
    direct = decompose._max_pool2d_backward(
        2 * plain, x, [3, 3], [1, 1], [1, 1], [1, 1], False,
        torch.nn.functional.max_pool2d_with_indices(x, 3, 1, 1)[1],
    )  # fmt: skip
    torch.testing.assert_close(direct, expected)


@pytest.mark.parametrize("divide", [False, True])
def test_addcmul_and_addcdiv_hold_an_intermediate_overflow_of_either_order(divide) -> None:
    """CUDA computes self + value (t1 op t2), the CPU self + (value t1) op t2: with t1 op t2
    beyond float32's range and value t1 op t2 within it, CUDA's result is infinite."""
    base = torch.tensor([1.0, 2.0], dtype=torch.float32)
    t1 = torch.tensor([1.35, -4.0], dtype=torch.float32)
    t2 = (
        torch.tensor([3.0e38, 1e-38], dtype=torch.float32)
        if divide
        else torch.tensor([3.0e38, -2.6e38], dtype=torch.float32)
    )
    value = 0.3 if not divide else 1e-3
    with fp.track():
        out = (
            torch.addcdiv(base, t1, t2, value=value)
            if divide
            else torch.addcmul(base, t1, t2, value=value)
        )
    f = np.float32
    a, b, c = base.numpy(), t1.numpy(), t2.numpy()
    with np.errstate(over="ignore"):
        cuda_order = a + f(value) * (b / c if divide else b * c)
    bounds = fp.bounds_of(out)
    assert not np.isfinite(cuda_order).all()  # the case: one order overflows
    assert bounds.contains(torch.from_numpy(cuda_order)).all()
    assert bounds.contains(out).all()


def test_a_float32_input_beyond_the_narrower_input_format_has_no_bounds() -> None:
    """With bfloat16 inputs allowed (``set_float32_matmul_precision("medium")``), a float32
    operand above bfloat16's largest number rounds to infinity, and times zero gives NaN."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        a = torch.tensor([[3.4e38, 0.0], [1.0, 2.0]])
        b = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
        with fp.track():
            out = a @ b
            small = (a / 1e38) @ b
    finally:
        torch.set_float32_matmul_precision(before)
    assert np.isinf(fp.bounds_of(out).radius).all()
    assert any("largest finite" in note for note in fp.bounds_of(out).notes)
    assert np.isfinite(fp.bounds_of(small).radius).all()
