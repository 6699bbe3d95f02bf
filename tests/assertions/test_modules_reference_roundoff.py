"""A reference that is not float64 has round-off of its own: ``compare_modules`` replays it
under tracking too and judges two-sided (the custom call's enclosure must meet the reference
call's). Without that, a correct float32 layer norm judged against PyTorch's own float32 one was
a bug on 128 of 2,048 elements: their two roundings differ, and the custom enclosure of this
run is as narrow as its own rounding."""

from __future__ import annotations

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
nn = torch.nn


class HandLayerNorm(nn.Module):
    def __init__(self, width: int, correction: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))
        self.correction = correction

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, correction=self.correction)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias


class Net(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.embed = nn.Linear(16, 64)
        self.norm = norm
        self.head = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.head(h + self.norm(h))


def _pair(correction: int, dtype: torch.dtype) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    custom = Net(HandLayerNorm(64, correction)).to(dtype).eval()
    stock = Net(nn.LayerNorm(64)).to(dtype).eval()
    stock.load_state_dict(custom.state_dict())
    return custom, stock


@pytest.mark.parametrize("isolate", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_correct_module_is_roundoff_against_a_reference_in_its_own_format(
    dtype: torch.dtype, isolate: bool
) -> None:
    custom, stock = _pair(0, dtype)
    x = torch.randn(32, 16).to(dtype)
    comparison = fp.compare_modules(custom, stock, x, isolate=isolate)
    assert comparison.bugs == ()
    norm = next(call for call in comparison.calls if call.path == "norm")
    assert norm.kind == "roundoff"
    # two-sided: the verdict allowed for the reference's round-off
    assert all(verdict.two_sided for _, verdict in norm.verdicts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_bug_is_still_named_against_a_reference_in_its_own_format(dtype: torch.dtype) -> None:
    custom, stock = _pair(1, dtype)
    x = torch.randn(32, 16).to(dtype)
    with pytest.raises(fp.RoundoffMismatch, match=r"Type-II \(bug\) in norm \(HandLayerNorm\)"):
        fp.assert_modules_roundoff_close(custom, stock, x)


def test_a_float64_reference_is_judged_one_sided() -> None:
    """A float64 reference needs no enclosure of its own: a posteriori enclosures hold a
    float64 run of the same operations."""
    custom, _ = _pair(0, torch.float32)
    comparison = fp.compare_modules(custom, torch.float64, torch.randn(32, 16))
    verdicts = [verdict for call in comparison.calls for _, verdict in call.verdicts]
    assert verdicts
    assert not any(verdict.two_sided for verdict in verdicts)
    assert comparison.bugs == ()
