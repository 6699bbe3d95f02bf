"""Fused attention off the CPU runs its math path in stochastic runs (stochastic/attention.py).

CI has no GPU: the tests take the CPU off ``FUSED_IN_MODE``, so that the CPU's attention calls
take the path CUDA's take (docs/gpu.md has the GPU's figures)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import pytest_fpcheck as fp
from pytest_fpcheck.stochastic import attention
from pytest_fpcheck.stochastic.mode import StochasticMode
from pytest_fpcheck.stochastic.rounding import Pools, SampleRandom

FLASH = "aten._scaled_dot_product_flash_attention_for_cpu.default"
MATH_STEPS = {"aten.bmm.default", "aten._safe_softmax.default"}


@pytest.fixture
def off_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU treated as CUDA is: no fused kernel in the mode."""
    monkeypatch.setattr(attention, "FUSED_IN_MODE", frozenset())


def _operands(dtype: torch.dtype, heads: int = 4, kv_heads: int = 2) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(2, heads, 9, 8, generator=generator, dtype=torch.float64)
    k = torch.randn(2, kv_heads, 9, 8, generator=generator, dtype=torch.float64)
    v = torch.randn(2, kv_heads, 9, 8, generator=generator, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _dispatched(fn: Any, *args: Any) -> set[str]:
    """The ATen operations one stochastic run of ``fn(*args)`` dispatches."""
    names: set[str] = set()

    class Spy(StochasticMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            names.add(str(func))
            return super().__torch_dispatch__(func, types, args, kwargs)

    with Spy(SampleRandom(Pools.shared(), 0, 0, 1)):
        fn(*args)
    return names


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def test_the_cpu_keeps_its_fused_kernel() -> None:
    names = _dispatched(_attend, *_operands(torch.bfloat16))
    assert FLASH in names
    assert not names & MATH_STEPS


@pytest.mark.usefixtures("off_the_cpu")
def test_off_the_cpu_attention_runs_the_math_path() -> None:
    names = _dispatched(_attend, *_operands(torch.bfloat16))
    assert FLASH not in names
    assert names >= MATH_STEPS


@pytest.mark.usefixtures("off_the_cpu")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_math_path_bounds_hold_the_exact_attention_and_catch_a_wrong_scale(
    dtype: torch.dtype,
) -> None:
    q, k, v = _operands(dtype)
    bounds = fp.stochastic_bounds(_attend, q, k, v, samples=16, seed=5)
    out = _attend(q, k, v)
    exact = _attend(q.double(), k.double(), v.double())
    assert fp.classify(out, exact, bounds=bounds).kind == "roundoff"
    # a planted bug: the scores scaled by 1.02 too much
    wrong = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True, enable_gqa=True, scale=1.02 / 8**0.5
    )
    assert fp.classify(out, wrong, bounds=bounds).kind == "bug"


@pytest.mark.usefixtures("off_the_cpu")
def test_math_path_is_differentiated_in_the_stochastic_run() -> None:
    q, k, v = (t.requires_grad_() for t in _operands(torch.bfloat16))

    def gradient(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        (grad,) = torch.autograd.grad(_attend(q, k, v).square().sum(), [q])
        return grad

    names = _dispatched(gradient, q, k, v)
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" not in names
    assert "aten._safe_softmax.default" in names
    bounds = fp.stochastic_bounds(gradient, q, k, v, samples=16, seed=2)
    exact = gradient(*(t.detach().double().requires_grad_() for t in (q, k, v)))
    assert fp.classify(gradient(q, k, v), exact, bounds=bounds).kind == "roundoff"


@pytest.mark.usefixtures("off_the_cpu")
def test_math_path_takes_the_calls_keywords() -> None:
    q, k, v = _operands(torch.float32, heads=2, kv_heads=2)
    mask = torch.randn(9, 9, generator=torch.Generator().manual_seed(1))
    with StochasticMode(SampleRandom(Pools.shared(), 0, 0, 1)):
        got = F.scaled_dot_product_attention(query=q, key=k, value=v, attn_mask=mask, scale=0.3)
    plain = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    torch.testing.assert_close(got, plain, rtol=1e-5, atol=1e-6)


def test_the_function_mode_is_entered_only_where_a_device_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torch.overrides import _get_current_function_mode_stack

    def stack_inside() -> list[Any]:
        with StochasticMode(SampleRandom(Pools.shared(), 0, 0, 1)):
            return list(_get_current_function_mode_stack())

    monkeypatch.setattr(attention, "_devices", lambda: frozenset({"cpu"}))
    assert not attention.needed()
    assert not any(isinstance(m, attention.MathAttention) for m in stack_inside())
    monkeypatch.setattr(attention, "_devices", lambda: frozenset({"cpu", "cuda"}))
    assert attention.needed()
    assert any(isinstance(m, attention.MathAttention) for m in stack_inside())
    assert not _get_current_function_mode_stack()


@pytest.mark.usefixtures("off_the_cpu")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_boolean_mask_masks(dtype: torch.dtype) -> None:
    """The math operation adds its mask: a boolean one is made additive first (True keeps)."""
    q, k, v = _operands(dtype, heads=2, kv_heads=2)
    keep = torch.rand(9, 9, generator=torch.Generator().manual_seed(2)) > 0.4
    keep[:, 0] = True  # no row masked whole

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    with StochasticMode(SampleRandom(Pools.shared(), 0, 0, 1)):
        got = attend(q.float(), k.float(), v.float())
    torch.testing.assert_close(got, attend(q.float(), k.float(), v.float()), rtol=1e-5, atol=1e-6)
    bounds = fp.stochastic_bounds(attend, q, k, v, samples=16, seed=1)
    exact = attend(q.double(), k.double(), v.double())
    assert fp.classify(attend(q, k, v), exact, bounds=bounds).kind == "roundoff"
