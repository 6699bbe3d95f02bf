"""Which module is the bug in? Module-by-module checks (docs/roundoff.md, RENDER III-C).

A hand-written layer norm replaces ``nn.LayerNorm`` in a small float16 network; it divides the
variance by n - 1. End to end the difference is a few ULPs of float16 on most outputs, and a
loose tolerance would pass. ``fp.assert_modules_roundoff_close`` runs the stock network once in
float64, replays each module of the custom one on the recorded inputs under ``fp.track()``,
and names the module whose own code is more than round-off.
"""

import pytest
import torch
from torch import nn

import pytest_fpcheck as fp


class HandLayerNorm(nn.Module):
    """A custom layer norm (same parameters as nn.LayerNorm); ``correction=1`` is the bug."""

    def __init__(self, width, eps=1e-5, correction=1):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))
        self.eps, self.correction = eps, correction

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, correction=self.correction)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class Net(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.embed = nn.Linear(16, 64)
        self.norm = norm(64)
        self.mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
        self.head = nn.Linear(64, 8)

    def forward(self, x):
        h = self.embed(x)
        return self.head(h + self.mlp(self.norm(h)))


def custom_and_stock(correction):
    torch.manual_seed(0)
    custom = Net(lambda width: HandLayerNorm(width, correction=correction)).half().eval()
    stock = Net(nn.LayerNorm).double().eval()  # the same module paths, stock layers
    stock.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    return custom, stock


def test_the_module_check_names_the_layer_norm():
    custom, stock = custom_and_stock(correction=1)
    x = torch.randn(32, 16).half()
    with pytest.raises(
        fp.RoundoffMismatch, match=r"Type-II \(bug\) in norm \(HandLayerNorm\)"
    ) as info:
        fp.assert_modules_roundoff_close(custom, stock, x)
    comparison = info.value.verdict  # the ModuleComparison
    assert comparison.first_bug.path == "norm"
    # its own module is the only bug: the others ran on the reference's inputs
    assert [call.name for call in comparison.bugs] == ["norm"]
    print(comparison.report())


def test_the_fixed_layer_norm_is_roundoff_in_every_module():
    custom, stock = custom_and_stock(correction=0)
    comparison = fp.assert_modules_roundoff_close(custom, stock, torch.randn(32, 16).half())
    assert comparison.kind == "roundoff"
    assert comparison.first_bug is None


def test_a_float32_layer_norm_eps_off_by_ten_is_caught():
    """float32, where the bug is a few dozen units of round-off: the custom model's layer norm
    uses eps 1e-6, the reference's 1e-5 (a config that says one and a port that uses the
    other). The output moves by about 1e-5 relative, far inside any tolerance a float32 test
    would set; each module is judged against the round-off of its own run (its a posteriori
    enclosure), which is a few units of float32's, and the layer norm is named."""
    torch.manual_seed(0)
    custom = Net(lambda width: nn.LayerNorm(width, eps=1e-6)).eval()
    stock = Net(nn.LayerNorm).double().eval()
    stock.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    x = torch.randn(32, 16)
    torch.testing.assert_close(custom(x), stock(x.double()).float())  # allclose sees nothing
    with pytest.raises(fp.RoundoffMismatch, match=r"Type-II \(bug\) in norm \(LayerNorm\)"):
        fp.assert_modules_roundoff_close(custom, stock, x)
    fixed = Net(nn.LayerNorm).eval()
    fixed.load_state_dict(custom.state_dict())
    assert fp.assert_modules_roundoff_close(fixed, stock, x).kind == "roundoff"
