"""Random rounding: only the two neighbours, with probabilities proportional to distance
(unbiased), grid values kept, special values kept; the one-step perturbation of a result with no
wider value; pools reproducible from the seed; the samples of a run stratified."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_fpcheck import formats as F

torch = pytest.importorskip("torch")

from pytest_fpcheck.stochastic.rounding import (  # noqa: E402
    STEP_PROBABILITY,
    Pools,
    SampleRandom,
    perturb_in_place_format,
    round_stochastic,
)

DRAWS = 4096
CASES = [
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float16),
    (torch.float64, torch.float32),
    (torch.float64, torch.bfloat16),
    (torch.float32, torch.float8_e4m3fn),
]


def _draw(seed: int = 7, index: int = 0) -> SampleRandom:
    return SampleRandom(Pools.shared(), seed, index)


def _values(source: torch.dtype, target: torch.dtype) -> np.ndarray:
    """Values between two neighbours of the target's grid at several fractional positions and
    magnitudes (normal and subnormal), both signs."""
    fmt = F.format_of(str(target).removeprefix("torch."))
    bases = np.array([1.0, 3.0, 1e3 if fmt.max_finite > 1e4 else 100.0, fmt.smallest_normal * 4])
    bases = F.round_to(bases, fmt)
    gaps = F.ulp(bases, fmt)
    fractions = np.array([0.0, 0.125, 0.25, 0.5, 0.9])
    values = (bases[:, None] + fractions[None, :] * gaps[:, None]).ravel()
    values = np.concatenate([values, -values, [fmt.smallest_subnormal * 2.5]])
    return values.astype(np.float64 if source == torch.float64 else np.float32)


@pytest.mark.parametrize(("source", "target"), CASES)
def test_rounds_to_a_neighbour_with_probability_proportional_to_distance(
    source: torch.dtype, target: torch.dtype
) -> None:
    fmt = F.format_of(str(target).removeprefix("torch."))
    values = _values(source, target)
    x = torch.tensor(values, dtype=source).expand(DRAWS, -1).contiguous()
    rounded = round_stochastic(x, target, fmt, _draw()).to(torch.float64).numpy()
    exact = values.astype(np.float64)
    down = F.round_to(exact, fmt, "down")
    up = F.round_to(exact, fmt, "up")
    assert ((rounded == down) | (rounded == up)).all()
    gap = np.where(up > down, up - down, 1.0)
    probability_up = (exact - down) / gap
    observed = (rounded == up).mean(axis=0)
    # binomial standard error at 4096 draws is at most 0.008
    assert np.abs(observed - np.where(up > down, probability_up, 1.0)).max() < 0.04
    # unbiased: the mean of the draws is the value, within 5 standard errors
    spread = np.sqrt(probability_up * (1 - probability_up)) * gap / np.sqrt(DRAWS)
    assert (np.abs(rounded.mean(axis=0) - exact) <= 5 * spread + 1e-300).all()


@pytest.mark.parametrize("count", [16, 10])
@pytest.mark.parametrize(("source", "target"), CASES)
def test_the_samples_of_a_run_are_stratified(
    source: torch.dtype, target: torch.dtype, count: int
) -> None:
    """Of N samples of one run, floor(N f) or ceil(N f) round a value at fraction f up; each
    sample alone still rounds up with probability f (the pool and offsets are random). N a
    power of two reads pools reduced into the first stratum; others shift and wrap."""
    fmt = F.format_of(str(target).removeprefix("torch."))
    values = _values(source, target)
    x = torch.tensor(values, dtype=source)
    ups = np.zeros(values.shape)
    exact = values.astype(np.float64)
    down, up = F.round_to(exact, fmt, "down"), F.round_to(exact, fmt, "up")
    for index in range(count):
        draw = SampleRandom(Pools.shared(), 11, index, count)
        rounded = round_stochastic(x, target, fmt, draw).to(torch.float64).numpy()
        assert ((rounded == down) | (rounded == up)).all()
        ups += (rounded == up) & (up > down)
    expected = count * np.where(up > down, (exact - down) / np.where(up > down, up - down, 1), 0)
    assert np.all(np.abs(ups - expected) < 1 + 1e-9), (ups, expected)


@pytest.mark.parametrize(("source", "target"), CASES[:4])
def test_special_values_are_kept(source: torch.dtype, target: torch.dtype) -> None:
    fmt = F.format_of(str(target).removeprefix("torch."))
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0], dtype=source)
    rounded = round_stochastic(x.expand(64, -1), target, fmt, _draw()).to(torch.float64)
    assert (rounded[:, 0] == float("inf")).all()
    assert (rounded[:, 1] == -float("inf")).all()
    assert rounded[:, 2].isnan().all()
    assert (rounded[:, 3:] == 0).all()


def test_beyond_the_largest_finite_value_rounds_to_infinity_at_random() -> None:
    fmt = F.format_of("float16")
    x = torch.full((DRAWS,), 65504.0 + 16.0)  # halfway between the largest float16 and 2**16
    rounded = round_stochastic(x, torch.float16, fmt, _draw()).to(torch.float64)
    assert set(rounded.unique().tolist()) == {65504.0, float("inf")}
    assert abs(float((rounded == float("inf")).double().mean()) - 0.5) < 0.04


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_perturbation_moves_one_step_with_probability_one_twelfth(dtype: torch.dtype) -> None:
    fmt = F.format_of(str(dtype).removeprefix("torch."))
    values = np.array([1.0, -3.0, 1e-3, 5e4])
    y = torch.tensor(F.round_to(values, fmt), dtype=dtype).expand(DRAWS, -1).contiguous()
    moved = perturb_in_place_format(y, _draw()).to(torch.float64).numpy()
    base = y.to(torch.float64).numpy()
    up = F.next_up(base, fmt)
    down = F.next_down(base, fmt)
    assert ((moved == base) | (moved == up) | (moved == down)).all()
    for side in (up, down):
        assert np.abs((moved == side).mean(axis=0) - STEP_PROBABILITY).max() < 0.025


def test_the_perturbation_keeps_zeros_and_non_finite_values() -> None:
    y = torch.tensor([0.0, -0.0, float("inf"), float("nan")]).expand(256, -1).contiguous()
    moved = perturb_in_place_format(y, _draw())
    assert (moved[:, :2] == 0).all()
    assert (moved[:, 2] == float("inf")).all()
    assert moved[:, 3].isnan().all()


@pytest.mark.parametrize(("source", "target"), [CASES[1], CASES[2]])
def test_zeros_round_to_themselves_without_the_subnormal_road(
    source: torch.dtype, target: torch.dtype
) -> None:
    """Signed zeros stay themselves, and a batch of samples rounding them (a masked softmax's
    weights, ReLU outputs) keeps drawing its numbers together; a target subnormal in one row
    takes that row's own draws, the other rows skip as many, and the batch reads them together
    again, each row what its sample run alone gives."""
    from pytest_fpcheck.stochastic.rounding import BatchRandom

    fmt = F.FORMATS[str(target).removeprefix("torch.")]
    x = torch.tensor([0.0, -0.0, 1.0 / 3], dtype=source).expand(8, 64, -1).contiguous()
    batch = BatchRandom(Pools.shared(), 5, 8)
    rounded = round_stochastic(x, target, fmt, batch)
    assert (rounded[..., :2] == 0).all()
    assert torch.equal(rounded[..., 1].signbit(), torch.ones(8, 64, dtype=torch.bool))
    assert batch._aligned is not None  # still drawing for all rows at once
    x[3, 0, 2] = fmt.smallest_subnormal * 2.5  # one row's subnormal: that row draws alone
    rows = [round_stochastic(x, target, fmt, batch) for _ in range(2)]
    assert batch._aligned is not None
    for index in range(8):
        alone = SampleRandom(Pools.shared(), 5, index, 8)
        # the batch's first rounding (row 3 takes its subnormal draw now, the others skip:
        # either way one position, as in the batch, whose values were checked above)
        round_stochastic(x[index], target, fmt, alone)
        for got in rows:
            assert torch.equal(got[index], round_stochastic(x[index], target, fmt, alone))


def test_the_pools_are_generated_once_and_offsets_depend_on_the_seed_and_the_sample() -> None:
    like = torch.empty(1000)
    assert _draw(11, 3).pools is _draw(12, 0).pools
    first = _draw(11, 3).take("uniform", like).clone()
    Pools._shared = None  # generated again: the same numbers
    assert torch.equal(_draw(11, 3).take("uniform", like), first)
    assert not torch.equal(_draw(11, 4).take("uniform", like), first)
    assert not torch.equal(_draw(12, 3).take("uniform", like), first)


def test_a_pool_grows_for_a_tensor_larger_than_it() -> None:
    draw = _draw(5)
    big = torch.empty(3 << 20)
    taken = draw.take("bits16", big)
    assert taken.shape == big.shape
    assert int(taken.min()) >= 0
    assert int(taken.max()) < 1 << 16


def test_what_a_sample_reads_does_not_depend_on_what_ran_before_it() -> None:
    small = torch.empty(1000)
    Pools._shared = None
    fresh = _draw(3, 0).take("normal", small).clone()
    Pools._shared = None
    _draw(3, 7).take("normal", torch.empty(3 << 20))  # grows the pool first
    assert torch.equal(_draw(3, 0).take("normal", small), fresh)


def test_each_operation_assigns_the_strata_to_the_samples_afresh() -> None:
    """The samples' strata of one operation are a permutation, drawn again for each operation:
    with a fixed stratum per sample, a chain of roundings of one value (a scan) kept neighbouring
    samples together and their spread collapsed."""
    count, operations = 16, 40
    like = torch.zeros(1)
    strata = np.empty((count, operations), dtype=np.int64)
    for index in range(count):
        draw = SampleRandom(Pools.shared(), 12, index, count)
        for op in range(operations):
            strata[index, op] = int(float(draw.take("uniform", like)) * count)
    for op in range(operations):
        assert sorted(strata[:, op]) == list(range(count))
    # each sample visits many strata; neighbouring samples do not move together
    assert all(len(set(row)) >= 8 for row in strata)
    assert np.mean(np.abs(strata[0] - strata[1]) == 1) < 0.5
    # within one operation, a sample's elements lie in every stratum: their errors do not move
    # together (a softmax cancels a common shift, and its spread would be too small)
    values = SampleRandom(Pools.shared(), 12, 3, count).take("uniform", torch.zeros(4096))
    per_stratum = np.bincount((values.numpy() * count).astype(np.int64), minlength=count)
    assert per_stratum.min() > 4096 / count / 2
