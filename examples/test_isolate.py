"""fp.isolate: which operations make a low-precision model disagree with its reference (CIEL).

Four cases: a float16 model whose one hand-written normalisation computes the variance as
E[x^2] - E[x]^2 among dozens of correct layers; a bfloat16 attention whose softmax normaliser
is summed block by block in bfloat16; a float32 layer under bfloat16 autocast that needs two
sites enhanced together; and a wrong formula, which precision cannot fix.
"""

import pytest
import torch

import pytest_fpcheck as fp

WIDTH = 32


class NaiveNorm(torch.nn.Module):
    """Normalisation with the textbook one-pass variance: cancels catastrophically when the
    mean is large against the spread."""

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        variance = (x * x).mean(-1, keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(variance + 1e-5)


class Block(torch.nn.Module):
    def __init__(self, naive=False):
        super().__init__()
        self.fc = torch.nn.Linear(WIDTH, WIDTH)
        self.norm = NaiveNorm() if naive else torch.nn.LayerNorm(WIDTH)

    def forward(self, x):
        return self.norm(x + torch.tanh(self.fc(x)))


def test_naive_variance_among_correct_layers():
    torch.manual_seed(0)
    blocks = [Block() for _ in range(12)]
    blocks[0] = Block(naive=True)  # the first block sees the raw, offset input
    model = torch.nn.Sequential(*blocks).eval().requires_grad_(False)
    x = torch.randn(16, WIDTH) + 40.0  # readings around 40 with unit spread
    reference = model.double()(x.double())
    model.half()

    isolation = fp.isolate(model, x.half(), reference=reference, tol=0.05)
    print(isolation.report())

    assert isolation.outcome == "isolated"
    assert {site.module_path for site in isolation.sites} <= {"Sequential.0", "Sequential.0.norm"}
    assert isolation.enhanced(model)(x.half()).dtype == torch.float16


def attention(q, k, v, block=4):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    total = torch.zeros_like(weights[..., :1])
    for start in range(0, weights.shape[-1], block):  # the normaliser, summed block by block
        total = total + weights[..., start : start + block].sum(-1, keepdim=True)
    return (weights / total) @ v


def test_bfloat16_softmax_normaliser():
    torch.manual_seed(1)
    q = 0.25 * torch.randn(2, 16, 16)
    k, v = torch.randn(2, 1024, 16), torch.randn(2, 1024, 16) + 2.0  # a long context
    reference = attention(q.double(), k.double(), v.double())

    isolation = fp.isolate(
        attention, q.bfloat16(), k.bfloat16(), v.bfloat16(), reference=reference, tol=0.02
    )
    print(isolation.report())

    assert [site.op for site in isolation.sites] == ["aten.add"]  # total = total + ...


def test_two_sites_together_under_autocast():
    torch.manual_seed(2)
    layer = torch.nn.Linear(64, 64).requires_grad_(False)
    x = torch.randn(32, 64) + 100.0

    def forward(v):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return layer(v).float()

    reference = torch.nn.functional.linear(x.double(), layer.weight.double(), layer.bias.double())
    isolation = fp.isolate(forward, x, reference=reference, tol=1e-3)
    print(isolation.report())

    # the input casts autocast inserts and the matrix product: either alone changes nothing
    assert [site.op for site in isolation.sites] == ["aten._to_copy", "aten.addmm"]


def softplus(x):
    return torch.log(1 + torch.exp(-x))  # wrong: the sign of x


@pytest.mark.fpcheck(nonfinite="off")
def test_a_real_bug_is_not_precision():
    x = torch.linspace(-3, 3, 16, dtype=torch.float16)
    reference = torch.nn.functional.softplus(x.double())

    isolation = fp.isolate(softplus, x, reference=reference)
    print(isolation.report())

    assert isolation.outcome == "unresolved"  # precision cannot explain it: a bug
    assert isolation.searches == 1
