"""Checking a training step (docs/roundoff.md, "Training steps"): the forward pass,
``loss.backward()`` and an AdamW step run under ``fp.track(strict=True)``, so the loss, every
gradient and every updated parameter carry an enclosure of what round-off allows. The same step
in float64 is the reference: round-off, not a bug. A hand-written update with a wrong sign is
a bug, and the verdict says so.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

import pytest_fpcheck as fp


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def training_step(model, x, target, update=None):
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    if update is None:
        torch.optim.AdamW(model.parameters(), lr=1e-2).step()
    else:
        update(model.parameters())
    return loss


def batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(32, 8, generator=generator), torch.randint(0, 4, (32,), generator=generator)


def test_an_adamw_step_is_roundoff_of_the_exact_step():
    model, (x, target) = make_model(), batch()
    reference = copy.deepcopy(model).double()
    with fp.track(strict=True):
        loss = training_step(model, x, target)
    expected_loss = training_step(reference, x.double(), target)
    fp.assert_roundoff_close(loss, expected_loss)
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        fp.assert_roundoff_close(p.grad, q.grad)
        fp.assert_roundoff_close(p, q)


def sgd_with_a_sign_bug(parameters):
    with torch.no_grad():
        for p in parameters:
            p.add_(p.grad, alpha=0.1)  # should be alpha=-0.1


def plain_sgd(parameters):
    with torch.no_grad():
        for p in parameters:
            p.add_(p.grad, alpha=-0.1)


def test_a_wrong_update_is_a_bug_not_roundoff():
    model, (x, target) = make_model(), batch()
    reference = copy.deepcopy(model).double()
    with fp.track(strict=True):
        training_step(model, x, target, update=sgd_with_a_sign_bug)
    training_step(reference, x.double(), target, update=plain_sgd)
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(model[0].weight, reference[0].weight)
