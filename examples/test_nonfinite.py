"""Where NaN, Inf and subnormals appear: four stories for the non-finite watch (docs/nonfinite.md),
after GPU-FPX's case studies (Li et al., ARRAY '25, section 3).

Each test runs a small program inside ``watch_nonfinite()`` and asserts where the exceptional
values appeared, which operations only carried them, and what the final output shows.
"""

import torch

from pytest_fpcheck.diagnostics.nonfinite import watch_nonfinite


def sru_like_layer(x, weight):
    return torch.tanh(x @ weight)


def test_uninitialised_memory_flows_into_a_matmul():
    """Section 3.1 (SRU): ``torch.FloatTensor(20, 32, 128)`` is uninitialised memory, and the NaN
    GPU-FPX found in the sgemm was already in it. Real garbage differs from run to run, so this
    example simulates it deterministically by filling the empty tensor with NaN."""
    torch.manual_seed(0)
    weight = torch.randn(128, 128)
    with watch_nonfinite() as watch:
        x = torch.empty(20, 128).fill_(float("nan"))  # stands in for garbage memory
        out = sru_like_layer(x, weight)
    fill, matmul, tanh = watch.events
    assert (fill.op, fill.kind, fill.appeared) == ("aten.fill_", "nan", True)
    assert (
        fill.source_line
        == 'x = torch.empty(20, 128).fill_(float("nan"))  # stands in for garbage memory'
    )
    assert (matmul.op, matmul.appeared, tanh.op, tanh.appeared) == (
        "aten.mm",
        False,
        "aten.tanh",
        False,
    )
    assert watch.flow(fill) == [fill, matmul, tanh]
    assert torch.isnan(out).all()
    watch.report()
    print(watch.flow_text(fill))


def test_reciprocal_of_a_subnormal_overflows_then_becomes_nan():
    """Section 3.2 (the compressor's ``0.5f / eb``): the reciprocal of a subnormal error bound is
    INF, and the next fused operation turns INF into NaN."""
    error_bound = torch.tensor([1e-3, 1e-41, 1e-2])  # the middle one is subnormal in float32
    values = torch.tensor([0.25, 0.0, 0.5])
    with watch_nonfinite() as watch:
        precision = 0.5 * torch.reciprocal(error_bound)
        quantised = values * precision
    reciprocal = watch.appearances()[0]
    assert (reciprocal.op, reciprocal.kind, reciprocal.count) == ("aten.reciprocal", "inf", 1)
    nan = [e for e in watch.events if e.kind == "nan"]
    assert [(e.op, e.appeared) for e in nan] == [("aten.mul", False)]
    assert nan[0].source_line == "quantised = values * precision"
    assert torch.isnan(quantised[1])
    print(watch.flow_text(reciprocal))


def test_a_nan_hidden_by_max_still_shows():
    """Section 2's ``MAX`` macro: ``fmax`` (and ``where`` on ``isnan``) drop a NaN, so the final
    output is finite; the watch still reports where the NaN appeared."""
    x = torch.tensor([-4.0, 1.0, 9.0])
    with watch_nonfinite() as watch:
        scale = torch.sqrt(x)
        clipped = torch.fmax(scale, torch.tensor(0.5))
        out = torch.where(torch.isnan(clipped), 0.0, clipped).sum()
    assert torch.isfinite(out)
    (event,) = watch.appearances()
    assert (event.op, event.kind, event.source_line) == (
        "aten.sqrt",
        "nan",
        "scale = torch.sqrt(x)",
    )
    assert watch.flow(event) == [event]  # fmax swallowed it at once
    print(event.summary())


def naive_softmax(x):
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def stable_softmax(x):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def test_softmax_without_max_subtraction_overflows_in_float16():
    """exp(12) is 162755, beyond float16's 65504: the naive softmax's exp overflows and INF/INF
    is NaN; subtracting the row maximum first keeps every value finite (the smallest probabilities
    are then float16 subnormals, which the watch reports too)."""
    logits = torch.tensor([[12.0, 1.0, 2.0], [0.5, 0.25, 0.0]], dtype=torch.float16)
    with watch_nonfinite() as watch:
        probabilities = naive_softmax(logits)
    exp = watch.appearances()[0]
    assert (exp.op, exp.kind, exp.dtype, exp.source_line) == (
        "aten.exp",
        "inf",
        "float16",
        "e = torch.exp(x)",
    )
    assert [(e.op, e.kind) for e in watch.flow(exp)[1:]] == [
        ("aten.sum", "inf"),
        ("aten.div", "nan"),
    ]
    assert torch.isnan(probabilities[0, 0])
    with watch_nonfinite() as stable:
        probabilities = stable_softmax(logits)
    assert [e.kind for e in stable.events if e.kind in ("nan", "inf")] == []
    # exp(1 - 12) = 1.7e-5 lies below float16's smallest normal (6.1e-5): a subnormal appears
    (subnormal,) = stable.appearances()
    assert (subnormal.op, subnormal.kind, subnormal.count) == ("aten.exp", "subnormal", 2)
    torch.testing.assert_close(probabilities.sum(dim=-1), torch.ones(2, dtype=torch.float16))
    watch.report()
