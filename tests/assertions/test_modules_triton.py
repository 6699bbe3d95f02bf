"""A Triton kernel inside a module is judged like PyTorch operations (issue 20): under the
replay's ``fp.track()`` Triton's interpreter is instrumented (``TRITON_INTERPRET=1``), so a
module that replaces a stock layer with its own kernel is compared with the stock layer."""

from __future__ import annotations

import os

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="Triton kernels run interpreted on the CPU"
)


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    """tanh-approximated GELU, times SCALE (1.0: correct)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tanh = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    y = 0.5 * x * (1.0 + tanh) * SCALE
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


class TritonGELU(torch.nn.Module):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 128),)](x, out, n, SCALE=self.scale, BLOCK=128)
        return out


def models(scale: float) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    custom = torch.nn.Sequential(torch.nn.Linear(16, 16), TritonGELU(scale)).half()
    stock = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU("tanh")).double()
    stock.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    return custom, stock


def test_a_triton_kernel_in_a_module_is_judged() -> None:
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).half()
    custom, stock = models(1.0)
    comparison = fp.assert_modules_roundoff_close(custom, stock, x)
    assert [(c.name, c.module_class, c.kind) for c in comparison.calls] == [
        ("<root>", "Sequential", "roundoff"),
        ("0", "Linear", "roundoff"),
        ("1", "TritonGELU", "roundoff"),
    ]
    custom, stock = models(1.01)  # a 1% error inside the kernel
    comparison = fp.compare_modules(custom, stock, x)
    assert comparison.first_bug is not None
    assert comparison.first_bug.path == "1"
