"""Checking a training step (docs/roundoff.md, "Training steps"): the forward pass,
``loss.backward()`` and an AdamW step run under ``fp.track(strict=True)``, so the loss, every
gradient and every updated parameter carry an enclosure of what round-off allows. The same step
in float64 is the reference: round-off, not a bug. A hand-written update with a wrong sign is
a bug, and the verdict says so. So is a mixed-precision step (float16 autocast with a
``GradScaler``) that forgets to unscale its gradients, while the correct one is round-off.
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


def scaled_float16_step(model, x, target, unscaled=True):
    """Mixed precision as PyTorch recommends it: float16 autocast, the loss scaled by a
    ``GradScaler`` so that small gradients survive float16, the step taken on unscaled
    gradients (``scaler.step``), or, with ``unscaled=False``, a bug: the optimizer stepped
    directly, on gradients still multiplied by the scale."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(model(x), target)
    scaler.scale(loss).backward()
    if unscaled:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()


@pytest.mark.parametrize("unscaled", [True, False], ids=["correct", "scaled-gradient bug"])
def test_a_scaled_float16_step_against_the_float64_step(unscaled):
    model, (x, target) = make_model(), batch()
    reference = copy.deepcopy(model).double()
    with fp.track(strict=True):
        scaled_float16_step(model, x, target, unscaled=unscaled)
    training_step(reference, x.double(), target, update=plain_sgd)
    verdict = fp.classify(model[0].weight, reference[0].weight)
    assert verdict.kind == ("roundoff" if unscaled else "bug"), verdict
