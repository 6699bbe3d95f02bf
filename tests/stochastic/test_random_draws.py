"""A function that draws random numbers (dropout in training): every sample draws what one call
draws from the generator as it was when ``stochastic_bounds`` was called, so a result computed
with other draws is no sample of it. Before, nothing said so: a model built in training mode
(``nn.Module``'s default) had every gradient judged a bug, the samples and the plain run
dropping different units."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.Dropout(0.5), torch.nn.Linear(32, 4)
    )


def _notes(bounds: fp.Bounds) -> str:
    return " ".join(bounds.notes)


def test_a_run_with_dropout_says_which_draws_its_samples_share() -> None:
    model = _model().train()
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(5)
    bounds = fp.stochastic_bounds(model, x, seed=2)
    assert "fn drew random numbers (aten.bernoulli)" in _notes(bounds)  # dropout's mask
    with torch.no_grad():
        torch.manual_seed(5)  # the generator as the call found it: the samples' mask
        same = model(x).double().numpy()
        other = model(x).double().numpy()  # the next mask
    assert ((same >= bounds.lo) & (same <= bounds.hi)).all()
    assert not ((other >= bounds.lo) & (other <= bounds.hi)).all()


def test_a_run_without_random_draws_has_no_such_note() -> None:
    model = _model().eval()  # dropout draws nothing in evaluation
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1))
    assert "random numbers" not in _notes(fp.stochastic_bounds(model, x, seed=2))
