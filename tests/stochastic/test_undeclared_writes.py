"""A training batch norm updates its running statistics although ``native_batch_norm``'s schema
declares no write (pytest_fpcheck/adapters/torch.py, ``undeclared_writes``). The samples must
update them as the plain run does, each rounded at random from a wider run: before, the wider
run updated copies and the program's statistics were never updated in any sample, so a correct
module's running mean had no spread and was judged a bug at every seed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.stochastic.batched import Unbatchable  # noqa: E402
from pytest_fpcheck.stochastic.memo import Memo  # noqa: E402
from pytest_fpcheck.stochastic.run import sample_batch  # noqa: E402


def _statistics(dtype: torch.dtype, momentum: float = 0.1) -> Callable[..., Any]:
    def run(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        norm = torch.nn.BatchNorm1d(6, momentum=momentum).to(dtype).train()
        norm(x.to(dtype))
        norm(x.to(dtype) * 0.5 + 1)  # a second update reads the first one's statistics
        return norm.running_mean, norm.running_var

    return run


def _input() -> torch.Tensor:
    return torch.randn(40, 6, generator=torch.Generator().manual_seed(3)) * 3 + 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_running_statistics_are_round_off_of_a_correct_module_and_a_bug_of_a_wrong_momentum(
    dtype: torch.dtype,
) -> None:
    x = _input()
    reference = _statistics(torch.float64)(x.double())
    for seed in range(3):
        bounds = fp.stochastic_bounds(_statistics(dtype), x, seed=seed, samples=8)
        correct = _statistics(dtype)(x)
        for b, out, ref in zip(bounds, correct, reference, strict=True):
            assert b.mode == "stochastic"
            assert float(np.max(b.hi - b.lo)) > 0  # the updates are rounded: they spread
            verdict = fp.classify(out, ref, bounds=b)
            assert verdict.kind == "roundoff", seed
            assert not verdict.notes[1:], verdict.notes  # the run's own values are inside
        planted = _statistics(dtype, momentum=0.11)
        wrong = fp.stochastic_bounds(planted, x, seed=seed, samples=8)
        for b, out, ref in zip(wrong, planted(x), reference, strict=True):
            assert fp.classify(out, ref, bounds=b).kind == "bug", seed


def test_the_statistics_a_module_keeps_are_updated_once_per_call() -> None:
    """A module passed in, as a training step passes its model: the call leaves it as it was."""
    norm = torch.nn.BatchNorm1d(6).train()
    x = _input()
    fp.stochastic_bounds(norm, x, seed=1, samples=4)
    assert torch.equal(norm.running_mean, torch.zeros(6))
    norm(x)
    assert not torch.equal(norm.running_mean, torch.zeros(6))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_batch_hands_them_to_the_samples_run_alone_before_writing(dtype: torch.dtype) -> None:
    """Each sample's statistics differ, and the module holds one copy: the batch refuses
    (the samples then run one at a time), before the operation wrote anything."""
    norm = torch.nn.BatchNorm1d(6).to(dtype).train()
    x = _input().to(dtype)
    with pytest.raises(Unbatchable, match="native_batch_norm writes"):
        sample_batch(norm, (x,), {}, 5, 4, Memo())
    assert torch.equal(norm.running_mean, torch.zeros(6, dtype=dtype))
    assert torch.equal(norm.running_var, torch.ones(6, dtype=dtype))
