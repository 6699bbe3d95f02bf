"""Stochastic arithmetic on a model too deep for the rigorous bound (docs/roundoff.md).

An 8-layer bfloat16 MLP: its rigorous enclosure is so wide that the verdict is
"inconclusive". ``fp.stochastic_bounds`` runs the model 16 times with every rounding made at
random and reads the spread: the bfloat16 model is round-off against its float64 twin, a layer
that scales its output by 1 + 1/16 is a bug. Both verdicts say "estimated, not proven", with
their confidence and seed.
"""

import pytest
import torch

import pytest_fpcheck as fp


def deep_mlp(dtype, *, bug=0.0):
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(32, 32), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dtype).requires_grad_(False)
    if bug:  # the seventh layer's output scaled by 1 + bug
        model[12].register_forward_hook(lambda module, args, out: out * (1 + bug))
    return model


def test_too_deep_for_the_rigorous_bound():
    x = torch.randn(8, 32)
    model = deep_mlp(torch.bfloat16)
    with fp.track():
        out = model(x.to(torch.bfloat16))
    verdict = fp.classify(out, deep_mlp(torch.float64)(x.double()))
    assert verdict.kind == "inconclusive"


def test_stochastic_bounds_judge_the_whole_model():
    x = torch.randn(8, 32)
    model = deep_mlp(torch.bfloat16)
    reference = deep_mlp(torch.float64)(x.double())
    bounds = fp.stochastic_bounds(model, x.to(torch.bfloat16), seed=1)
    verdict = fp.assert_roundoff_close(model(x.to(torch.bfloat16)), reference, bounds=bounds)
    assert verdict.kind == "roundoff"
    assert "estimated, not proven" in verdict.report()
    # CESTAC's significant digits of the output (bfloat16 holds 2.4 at most)
    assert bounds.estimate.digits.mean() > 1


def test_stochastic_bounds_catch_a_planted_bug():
    x = torch.randn(8, 32)
    buggy = deep_mlp(torch.bfloat16, bug=1 / 16)
    reference = deep_mlp(torch.float64)(x.double())
    bounds = fp.stochastic_bounds(buggy, x.to(torch.bfloat16), seed=1)
    with pytest.raises(fp.RoundoffMismatch, match="estimated, not proven"):
        fp.assert_roundoff_close(buggy(x.to(torch.bfloat16)), reference, bounds=bounds)
