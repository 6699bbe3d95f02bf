"""A custom model whose weights are the reference's rounded to a narrower format (a bfloat16 copy
of a float32 model) is judged on its code, not on its weights' format
(``pytest_fpcheck/assertions/modules/parameters.py``): the rounded parameters start from the
cast's enclosure, like the inputs; a bug in the code or in the weights is still caught."""

from __future__ import annotations

import copy

import pytest

import pytest_fpcheck as fp

from . import models

torch = pytest.importorskip("torch")

BF16, F16 = torch.bfloat16, torch.float16
UNIT = {BF16: 2.0**-8, F16: 2.0**-11}


class Affine(torch.nn.Module):
    """``x * w + b`` element-wise: its enclosure is a few roundings wide, narrower than the
    rounding of ``w`` and ``b`` to bfloat16 wherever the two terms cancel."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(width))
        self.bias = torch.nn.Parameter(torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.bias


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.affine = Affine(64)
        self.linear = torch.nn.Linear(64, 8)
        self.norm = torch.nn.LayerNorm(8)
        with torch.no_grad():  # a trained-looking scale and shift, not 1 and 0
            self.norm.weight.normal_()
            self.norm.bias.normal_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(self.affine(x)))


def net(dtype: torch.dtype) -> tuple[Net, Net, torch.Tensor]:
    """(a float32 net's copy in ``dtype``, its float64 copy, a float32 input). The reference
    is float64: a float32 one has its own round-off, which nothing bounds (a float32 ULP
    outside on 2 of 1,024 elements here; docs/roundoff.md)."""
    torch.manual_seed(0)
    model = Net().eval()
    return copy.deepcopy(model).to(dtype), copy.deepcopy(model).double(), torch.randn(16, 64)


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_a_rounded_copy_of_the_reference_is_roundoff(dtype: torch.dtype) -> None:
    """The narrow copy of a float32 net against a float64 copy of the float32 net: the
    weights' rounding is no bug. Judged as exact values, it was (630 of 1,024 elements of the
    affine layer outside in bfloat16)."""
    custom, reference, x = net(dtype)
    comparison = fp.assert_modules_roundoff_close(custom, reference, x.to(dtype))
    assert comparison.kind == "roundoff"
    affine = next(call for call in comparison.calls if call.path == "affine")
    verdict = affine.verdicts[0][1]
    narrow = str(dtype).removeprefix("torch.")
    for name in ("affine.weight", "affine.bias"):
        assert f"parameter {name}: the reference's float64 value stored in {narrow}" in (
            verdict.provenance
        )
        assert f"{name}: the reference's value rounded to {narrow}" in verdict.notes


def test_the_seeds_are_removed_afterwards() -> None:
    custom, reference, x = net(BF16)
    fp.compare_modules(custom, reference, x.to(BF16))
    assert all(fp.bounds_of(p) is None for p in custom.parameters())
    with torch.no_grad(), fp.track():
        out = custom.affine(x.to(BF16))
    # the weights are exact values again: the enclosure is the rounding of x * w + b alone
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert float((bounds.hi - bounds.lo).max()) <= 4 * UNIT[BF16] * float(out.abs().max())


def test_a_weight_that_differs_by_more_than_its_rounding_is_still_a_bug() -> None:
    """One element of the bias moved by one more bfloat16 step than its rounding: that element
    is not the reference's rounded copy, so it stays an exact value and its difference counts."""
    custom, reference, x = net(BF16)
    with torch.no_grad():
        bias = custom.affine.bias
        bias[3] = torch.nextafter(bias[3], torch.tensor(float("inf"), dtype=BF16))
        bias[3] = torch.nextafter(bias[3], torch.tensor(float("inf"), dtype=BF16))
    comparison = fp.compare_modules(custom, reference, x.to(BF16))
    assert comparison.first_bug is not None, comparison.report()
    assert comparison.first_bug.path == "affine"
    affine = comparison.first_bug.verdicts[0][1]
    assert 0 < affine.outside <= x.shape[0]  # column 3 only, at most one per row


def test_a_model_whose_weights_are_not_rounded_copies_is_judged_as_before() -> None:
    """A custom model with different weights (another seed): nothing is seeded, the weights'
    difference is a bug of the first module that uses them."""
    _, reference, x = net(BF16)
    torch.manual_seed(1)
    custom = Net().eval().to(BF16)
    comparison = fp.compare_modules(custom, reference, x.to(BF16))
    assert comparison.first_bug is not None
    assert comparison.first_bug.path == "affine"


def float32_pair(name: str, dtype: torch.dtype) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(the model in ``dtype``, made from the float32 model; a float64 copy of the float32
    model: a float32 reference would bring its own round-off, which nothing bounds)."""
    model = models.MODELS[name]().float().eval()
    return copy.deepcopy(model).to(dtype).eval(), copy.deepcopy(model).double().eval()


@pytest.mark.parametrize("name", ["nanogpt", "bert"])
def test_narrow_copies_of_float32_models_get_no_type_ii_verdict(name: str) -> None:
    custom, reference = float32_pair(name, BF16)
    comparison = fp.compare_modules(custom, reference, models.tokens())
    assert comparison.bugs == (), comparison.report()
    # the embeddings are judged on bounds now (before: rtol/atol, "close")
    assert comparison.counts()["close"] == 0, comparison.report()


@pytest.mark.parametrize(
    ("bug", "site"),
    [("linear", "h.0.mlp.c_fc"), ("eps", "h.0.ln_2"), ("residual", "h.0")],
)
def test_bugs_in_a_narrow_copy_are_caught_and_localised(bug: str, site: str) -> None:
    """nanoGPT in bfloat16 made from the float32 one: a factor 1 + 64u on one Linear's output,
    a layer norm's eps of 0.1 and a dropped residual are each the first bug, where planted."""
    custom, reference = float32_pair("nanogpt", BF16)
    if bug == "linear":
        models.plant_relative_error(custom, site, 64 * UNIT[BF16])
    elif bug == "eps":
        models.plant_layer_norm_eps(custom, site)
    else:
        models.plant_dropped_residual(custom)  # type: ignore[arg-type]
    comparison = fp.compare_modules(custom, reference, models.tokens())
    assert comparison.first_bug is not None, comparison.report()
    assert comparison.first_bug.path == site


@pytest.mark.parametrize("dtype", [BF16, F16])
def test_the_seeds_hold_the_reference_and_the_stored_value(dtype: torch.dtype) -> None:
    """Each seeded element's enclosure holds the reference's float32 value and the value stored
    (compared exactly, in float64), across magnitudes: subnormal and underflowing in the narrow
    format, overflowing float16, ties, signed zeros; elements stored otherwise stay points."""
    from pytest_fpcheck.assertions.modules.parameters import rounded_parameters

    generator = torch.Generator().manual_seed(3)
    magnitudes = 2.0 ** torch.randint(-40, 40, (512,), generator=generator).double()
    values = torch.randn(512, generator=generator, dtype=torch.float64) * magnitudes
    special = torch.tensor(
        [7e4, -7e4, 1e-6, -1e-6, 1e-8, 6e-8, 2.0**-25, 1 + 2.0**-9, 1 + 3 * 2.0**-9, 0.0, -0.0],
        dtype=torch.float64,
    )
    reference = torch.nn.Linear(1, 1)
    reference.weight = torch.nn.Parameter(torch.cat([values, special]).float().reshape(-1, 1))
    custom = copy.deepcopy(reference).to(dtype)
    with torch.no_grad():
        custom.bias.copy_(custom.bias + 1)  # not a rounded copy: not seeded
        custom.weight[0, 0] = custom.weight[0, 0] * 2  # one element that is not: a point
    seeds = rounded_parameters(custom, reference)
    assert set(seeds) == {"weight"}
    _, interval, _ = seeds["weight"]
    exact = reference.weight.detach().double().numpy()
    stored = custom.weight.detach().double().numpy()
    held = (interval.lo <= exact) & (exact <= interval.hi)
    assert held[1:].all(), exact[1:][~held[1:]]
    assert ((interval.lo <= stored) & (stored <= interval.hi)).all()
    assert interval.lo[0, 0] == interval.hi[0, 0] == stored[0, 0]
    assert fp.bounds_of(custom.weight) is None  # computing the seeds writes none
