"""The foreach optimizers (``foreach=True``: the default of torch.optim on CUDA) and the
``_foreach_`` arithmetic under strict tracking: the same values as an untracked run, every
parameter in its enclosure. Before the foreach operations ran as loops
(``tracking/torch/substitutes.py``), ``_foreach_lerp_`` (Adam's first moment) had no rule."""

from __future__ import annotations

import contextlib

import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

OPTIMIZERS = {
    # eps 1e-3: the default 1e-8 is zero in float16, and a zero second moment then divides 0/0
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2, eps=1e-3, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, eps=1e-3, foreach=True),
    "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True, foreach=True),
}


def _train(name: str, dtype: torch.dtype, tracked: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    model = model.to(dtype)
    optimizer = OPTIMIZERS[name](model.parameters())
    x = torch.randn(5, 8).to(dtype)
    block = fp.track(strict=True) if tracked else contextlib.nullcontext()
    with block:
        for _ in range(3):
            model(x).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_foreach_optimizer_steps_are_unchanged_and_enclosed(name: str, dtype) -> None:
    plain = _train(name, dtype, tracked=False)
    tracked = _train(name, dtype, tracked=True)
    for before, after in zip(plain.parameters(), tracked.parameters(), strict=True):
        assert torch.equal(before, after)
        bounds = fp.bounds_of(after)
        assert bounds is not None
        assert bounds.contains(after.detach()).all()


def _lists(dtype):
    generator = torch.Generator().manual_seed(1)
    return [[torch.randn(4, generator=generator).to(dtype) for _ in range(3)] for _ in range(3)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "call",
    [
        lambda a, b, c: torch._foreach_addcmul_(a, b, c, [0.5, -1.5, 3.0]),  # ScalarList
        lambda a, b, c: torch._foreach_addcdiv_(a, b, c, torch.tensor([0.25, 2.0, -1.0])),
        lambda a, b, c: torch._foreach_lerp_(a, b, c),  # weights as tensors
        lambda a, b, c: torch._foreach_lerp_(a, b, 0.3),
        lambda a, b, c: torch._foreach_mul_(a, 1.7),  # rounded to the format first
        lambda a, b, c: torch._foreach_div_(a, [2.0, 3.0, 7.0]),
        lambda a, b, c: torch._foreach_add_(a, b, alpha=-0.5),
        lambda a, b, c: (torch._foreach_abs_(a), torch._foreach_sqrt_(a)),
    ],
    ids=[
        "addcmul_list",
        "addcdiv_tensor",
        "lerp_tensor",
        "lerp_scalar",
        "mul",
        "div",
        "add",
        "sqrt",
    ],
)
def test_foreach_arithmetic_in_place_matches_the_kernel(call, dtype) -> None:
    plain = _lists(dtype)
    call(*plain)
    tracked = _lists(dtype)
    with fp.track(strict=True):
        call(*tracked)
    for before, expected, actual in zip(_lists(dtype)[0], plain[0], tracked[0], strict=True):
        assert not torch.equal(before, expected)  # the call wrote the first list
        assert torch.equal(expected, actual)
        bounds = fp.bounds_of(actual)
        assert bounds is not None
        assert bounds.contains(actual).all()


def test_foreach_arithmetic_out_of_place_returns_bounded_results() -> None:
    a, b, _ = _lists(torch.bfloat16)
    expected = torch._foreach_sqrt(torch._foreach_add(a, b))
    with fp.track(strict=True):
        results = torch._foreach_sqrt(torch._foreach_add(a, b))
    for want, got in zip(expected, results, strict=True):
        assert torch.equal(want.nan_to_num(), got.nan_to_num())  # sqrt of a negative sum: NaN
        bounds = fp.bounds_of(got)
        assert bounds is not None
        assert bounds.contains(got).all()
