"""The compiled stochastic truncation (``stochastic/truncation.py``): its NumPy twin gives the
same bits and flags, and on the host it rounds exactly as the tensor operations do elsewhere
(the same bits, the same range verdict, the draws advanced alike), on adversarial values:
NaN, infinities, signed zeros, the target's largest values (whose rounding may carry to
infinity), its subnormals, the wide format's subnormals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_fpcheck import formats as F

torch = pytest.importorskip("torch")

from pytest_fpcheck.stochastic import rounding  # noqa: E402
from pytest_fpcheck.stochastic.rounding import BatchRandom, Pools, SampleRandom  # noqa: E402
from pytest_fpcheck.stochastic.truncation import _truncate, truncate  # noqa: E402

CASES = [
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.float16),
    (torch.float64, torch.float32),
]


def _adversarial(source: torch.dtype, target: torch.dtype, seed: int = 0) -> torch.Tensor:
    fmt = F.FORMATS[str(target).removeprefix("torch.")]
    kind = np.float32 if source == torch.float32 else np.float64
    wide = np.finfo(kind)
    edges = [fmt.max_finite, fmt.smallest_normal, fmt.smallest_subnormal, 1.0, 1 / 3]
    edges += [wide.max, wide.smallest_normal, wide.smallest_subnormal]
    values = [0.0, math.inf, math.nan, fmt.max_finite * (1 + 2**-12)]
    rng = np.random.default_rng(seed)
    random = rng.standard_normal(512) * 2.0 ** rng.integers(-160, 140, 512)
    with np.errstate(over="ignore", under="ignore"):
        for edge in np.array(edges, dtype=kind):
            values += [edge, *np.nextafter(edge, np.array([-math.inf, math.inf], dtype=kind))]
        array = np.array(values + list(random), dtype=kind)
    return torch.from_numpy(np.concatenate([array, -array]))


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])


@pytest.mark.parametrize("width", [np.int32, np.int64])
def test_the_twin_gives_the_compiled_bits_and_flags(width: type) -> None:
    rng = np.random.default_rng(1)
    info = np.iinfo(width)
    bits = rng.integers(info.min, info.max, (4, 700), dtype=width, endpoint=True)
    bits[:, :4] = [0, info.min, info.max, -1]  # zeros, NaN patterns of both signs
    strided = np.broadcast_to(bits[1], (3, 700))  # rows sharing one value (stride 0)
    pool = rng.integers(0, 1 << 20, 1 << 12, dtype=width)
    dropped = 13 if width == np.int32 else 29
    largest = int(np.float32(65504.0).view(np.int32)) if width == np.int32 else 0x47EFFFFFE0000000
    smallest = 0x38800000 if width == np.int32 else 0x3810000000000000
    for rows in (bits, strided):
        starts = rng.integers(0, pool.size - 700, rows.shape[0])
        shifts = rng.integers(0, 1 << dropped, rows.shape[0])
        low = (1 << dropped) - 1
        constants = (low, -(1 << dropped), int(info.max), largest, smallest)
        compiled, twin = np.empty_like(rows), np.empty_like(rows)
        flags = _truncate.dispatcher(rows, pool, starts, shifts, constants, compiled)
        twin_flags = _truncate.fallback(rows, pool, starts, shifts, constants, twin)
        assert np.array_equal(compiled, twin)
        assert bool(flags[0]) == bool(twin_flags[0])
        assert np.array_equal(flags[1], twin_flags[1])
        # what the rule says, written out for row 0
        drawn = (pool[starts[0] : starts[0] + 700].astype(np.int64) + shifts[0]) & low
        expected = ((rows[0].astype(np.int64) + drawn) & -(1 << dropped)).astype(width)
        assert np.array_equal(compiled[0], expected)


@pytest.mark.parametrize("eager", [False, True])
def test_zeros_are_not_flagged_as_subnormal_and_a_subnormal_is(
    eager: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row of signed zeros takes no subnormal road (a masked softmax's weights, ReLU's
    zeros); a row with one float16 subnormal does; a float32 maximum is out of range."""
    if eager:
        monkeypatch.setenv("FPCHECK_JIT", "eager")
    x = np.zeros((3, 64), dtype=np.float32)
    x[0, 1::2] = -0.0
    x[1, 7] = 2.0**-20  # below float16's smallest normal, 2**-14
    x[2, 9] = np.finfo(np.float32).max
    pool = np.arange(1 << 10, dtype=np.int32)
    starts, shifts = np.zeros(3, np.int64), np.zeros(3, np.int64)
    largest, smallest = int(np.float32(65504.0).view(np.int32)), 0x38800000
    _, outside, tiny = truncate(x.view(np.int32), pool, starts, shifts, 13, largest, smallest)
    assert tiny.tolist() == [False, True, False]
    assert outside
    _, outside, _ = truncate(x[:2].view(np.int32), pool, starts, shifts, 13, largest, smallest)
    assert not outside


def test_bad_arrays_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match=r"int32 or int64.*float64"):
        truncate(
            np.zeros((1, 3)), np.zeros(8), np.zeros(1, np.int64), np.zeros(1, np.int64), 13, 0, 0
        )


def _draws(kind: str, seed: int, count: int | None, rows: int) -> rounding.Draw:
    pools = Pools.shared()
    if kind == "batch":
        assert count is not None
        return BatchRandom(pools, seed, count)
    return SampleRandom(pools, seed, rows, count)


@pytest.mark.parametrize(("source", "target"), CASES)
@pytest.mark.parametrize("draws", ["alone", "stratified", "batch"])
@pytest.mark.parametrize("eager", [False, True])
def test_on_the_host_the_compiled_pass_rounds_as_the_tensor_operations(
    source: torch.dtype,
    target: torch.dtype,
    draws: str,
    eager: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each of three roundings in a row gives the same bits and range verdict both ways, and
    the draws that follow are the same (the positions advanced alike): values in range, then
    the adversarial ones, then a batch in which one row alone holds a target subnormal (that
    row draws alone, as its sample does)."""
    if eager:  # the compiled kernel, not its twin
        monkeypatch.setenv("FPCHECK_JIT", "eager")
    fmt = F.FORMATS[str(target).removeprefix("torch.")]
    count = None if draws == "alone" else 6
    rows = 6 if draws == "batch" else 1
    adversarial = _adversarial(source, target)
    usual = torch.linspace(-3, 3, adversarial.numel(), dtype=source)
    lone = usual.clone()
    lone[5] = fmt.smallest_subnormal * 2.5
    inputs = [usual, adversarial, lone]
    if rows > 1:
        inputs = [usual.expand(rows, -1), adversarial.expand(rows, -1).contiguous(), None]
        inputs[2] = usual.expand(rows, -1).contiguous()
        inputs[2][3, 5] = fmt.smallest_subnormal * 2.5
    host, tensors = _draws(draws, 4, count, rows), _draws(draws, 4, count, rows)
    for x in inputs:
        assert x is not None
        got, inside = rounding._truncated_on_host(x, target, fmt, host)
        expected, expected_inside = rounding._truncated_by_tensors(x, target, fmt, tensors)
        assert torch.equal(_bits(got), _bits(expected))
        assert inside == expected_inside == rounding.in_range(x, fmt)
    like = torch.empty(rows, 100) if rows > 1 else torch.empty(100)
    for kind in ("uniform", "bits16", "bits29"):
        assert torch.equal(host.take(kind, like), tensors.take(kind, like)), kind
