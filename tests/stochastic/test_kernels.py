"""The compiled stochastic truncation (``stochastic/kernels.py``): its NumPy twin gives the
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
from pytest_fpcheck.stochastic.kernels import (  # noqa: E402
    _product_noise,
    _truncate,
    product_noise,
    truncate,
)
from pytest_fpcheck.stochastic.rounding import BatchRandom, Pools, SampleRandom  # noqa: E402

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


@pytest.mark.parametrize(("width", "half"), [(np.int32, 0), (np.int32, 16), (np.int64, 0)])
def test_the_twin_gives_the_compiled_bits_and_flags(width: type, half: int) -> None:
    rng = np.random.default_rng(1)
    info = np.iinfo(width)
    bits = rng.integers(info.min, info.max, (4, 700), dtype=width, endpoint=True)
    bits[:, :4] = [0, info.min, info.max, -1]  # zeros, NaN patterns of both signs
    strided = np.broadcast_to(bits[1], (3, 700))  # rows sharing one value (stride 0)
    pool = rng.integers(0, 1 << 20, 1 << 12, dtype=width)
    dropped = 16 if half else 13 if width == np.int32 else 29
    largest = int(np.float32(65504.0).view(np.int32)) if width == np.int32 else 0x47EFFFFFE0000000
    smallest = 0x38800000 if width == np.int32 else 0x3810000000000000
    kind = np.int16 if half else width
    for rows in (bits, strided):
        starts = rng.integers(0, pool.size - 700, rows.shape[0])
        shifts = rng.integers(0, 1 << dropped, rows.shape[0])
        low = (1 << dropped) - 1
        constants = (low, -(1 << dropped), int(info.max), largest, smallest, half)
        compiled, twin = np.empty(rows.shape, kind), np.empty(rows.shape, kind)
        assert len(starts) == rows.shape[0]
        flags = _truncate.dispatcher(rows, pool, starts, shifts, constants, compiled)
        twin_flags = _truncate.fallback(rows, pool, starts, shifts, constants, twin)
        assert np.array_equal(compiled, twin)
        assert bool(flags[0]) == bool(twin_flags[0])
        assert np.array_equal(flags[1], twin_flags[1])
        # what the rule says, written out for row 0
        drawn = (pool[starts[0] : starts[0] + 700].astype(np.int64) + shifts[0]) & low
        truncated = (rows[0].astype(np.int64) + drawn) & -(1 << dropped)
        assert np.array_equal(compiled[0], (truncated >> half).astype(kind))


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
    out = np.empty((3, 64), np.int32)
    outside, tiny = truncate(x.view(np.int32), pool, starts, shifts, 13, largest, smallest, out)
    assert tiny.tolist() == [False, True, False]
    assert outside
    bits = x[:2].view(np.int32)
    outside, _ = truncate(bits, pool, starts[:2], shifts[:2], 13, largest, smallest, out[:2])
    assert not outside


def test_bad_arrays_are_refused_naming_them() -> None:
    """The compiled loops do not check bounds: every argument is checked before them."""
    bits, pool = np.zeros((2, 8), np.int32), np.zeros(16, np.int32)
    starts, shifts, out = np.zeros(2, np.int64), np.zeros(2, np.int64), np.empty((2, 8), np.int32)
    ok = (bits, pool, starts, shifts, 13, 0, 0, out)
    truncate(*ok)
    cases = {
        r"int32 or int64.*float64": (np.zeros((2, 8)), *ok[1:]),
        r"starts of 2 int64 offsets.*\(1,\)": (bits, pool, starts[:1], *ok[3:]),
        r"starts \[0, 9\] reading 8 numbers each leave the pool of 16": (
            bits,
            pool,
            np.array([0, 9], np.int64),
            *ok[3:],
        ),
        r"2 int64 shifts expected": (*ok[:3], shifts[:1], *ok[4:]),
        r"out of int32 or int16 and shape \(2, 8\)": (*ok[:7], np.empty((2, 8), np.int64)),
        r"high halves of 32-bit patterns cleared of 16 bits": (*ok[:7], np.empty((2, 8), np.int16)),
    }
    for message, arguments in cases.items():
        with pytest.raises(ValueError, match=message):
            truncate(*arguments)


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
    # strided and stride-0 layouts too: a NaN's conversion depends on the layout
    inputs = [usual, adversarial, adversarial.repeat(2)[::2], lone]
    if rows > 1:
        batch = usual.expand(rows, -1).contiguous()
        batch[3, 5] = fmt.smallest_subnormal * 2.5
        spread = adversarial.expand(rows, -1)
        inputs = [usual.expand(rows, -1), spread, spread.contiguous(), batch]
    host, tensors = _draws(draws, 4, count, rows), _draws(draws, 4, count, rows)
    for x in inputs:
        got, inside = rounding._truncated_on_host(x, target, fmt, host)
        expected, expected_inside = rounding._truncated_by_tensors(x, target, fmt, tensors)
        assert torch.equal(_bits(got), _bits(expected))
        assert inside == expected_inside == rounding.in_range(x, fmt)
    like = torch.empty(rows, 100) if rows > 1 else torch.empty(100)
    for kind in ("uniform", "bits16", "bits29"):
        assert torch.equal(host.take(kind, like), tensors.take(kind, like)), kind


@pytest.mark.parametrize("wide", [False, True])
def test_the_product_noise_twin_gives_the_compiled_bits(wide: bool) -> None:
    rng = np.random.default_rng(2)
    total = (rng.standard_normal((6, 5, 7)) * 2.0 ** rng.integers(-30, 30, (6, 5, 7))).astype(
        np.float32
    )
    total[0, 0, :3] = [0.0, -0.0, np.finfo(np.float32).max]
    rows = np.abs(rng.standard_normal((6, 5))).astype(np.float32)
    columns = np.abs(rng.standard_normal((6, 7))).astype(np.float32)
    rows[1] = 0.0
    pool = rng.standard_normal(1 << 12).astype(np.float32)
    starts = np.array([17, 1000, 2500], dtype=np.int64)  # three samples of two groups
    scales = (0.36 * 2.0**-48 * 64 / 3, 0.36 * 2.0**-48 / 6)
    compiled = np.empty(total.shape, np.float64 if wide else np.float32)
    twin = np.empty_like(compiled)
    _product_noise.dispatcher(total, rows, columns, scales, pool, starts, 2, wide, compiled)
    _product_noise.fallback(total, rows, columns, scales, pool, starts, 2, wide, twin)
    assert np.array_equal(compiled.view(np.uint8), twin.view(np.uint8))
    # group 3 is sample 1's second: its numbers follow the first group's
    z = pool[1000 + 35 : 1000 + 70].reshape(5, 7).astype(np.float64)
    sigma = np.sqrt(
        total[3].astype(np.float64) ** 2 * scales[0] + np.outer(rows[3], columns[3]) * scales[1]
    )
    assert np.allclose(compiled[3], total[3] + sigma * z, rtol=1e-5, atol=0)


def test_product_noise_refuses_arrays_it_cannot_read() -> None:
    f32, pool = np.zeros((2, 2, 3), np.float32), np.zeros(16, np.float32)
    rows, columns, one = f32[:, :, 0], f32[:, 0, :], np.zeros(1, np.int64)
    out = np.empty((2, 2, 3))
    product_noise(f32, rows, columns, (1.0, 1.0), pool, one, out)
    cases = {
        "rows of float32 expected, not float64": (f32, rows.astype(float), columns, pool, one, out),
        r"rows \(groups, m\) and columns \(groups, n\) expected": (
            f32,
            columns,
            rows,
            pool,
            one,
            out,
        ),
        "out of float32 or float64": (f32, rows, columns, pool, one, out.astype(np.float16)),
        "2 groups do not divide among 3 samples": (
            f32,
            rows,
            columns,
            pool,
            np.zeros(3, np.int64),
            out,
        ),
        r"starts \[5\] reading 12 numbers each leave the pool of 16": (
            f32,
            rows,
            columns,
            pool,
            np.array([5], np.int64),
            out,
        ),
    }
    for message, (t, r, c, p, s, o) in cases.items():
        with pytest.raises(ValueError, match=message):
            product_noise(t, r, c, (1.0, 1.0), p, s, o)


def test_add_product_noise_and_windows_refuse_what_they_cannot_give() -> None:
    from pytest_fpcheck.stochastic.rounding import add_product_noise

    draw = SampleRandom(Pools.shared(), 1, 0, 4)
    total = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"dtype: float32 or float64 expected, not torch\.bf"):
        add_product_noise(total, torch.zeros(2), torch.zeros(3), (1.0, 1.0), draw, torch.bfloat16)
    rows = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="rows of float32 expected, not float64"):
        add_product_noise(total, rows, torch.zeros(3), (1.0, 1.0), draw, torch.float32)
    for windowed in (draw, BatchRandom(Pools.shared(), 1, 4)):
        with pytest.raises(ValueError, match=r"kind: one of \['bits13'.*not 'uniform'"):
            windowed.window("uniform", 8)


@pytest.mark.parametrize("draws", ["alone", "batch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("packet", ["aten.addmm", "aten.bmm"])
def test_the_compiled_product_noise_is_the_accumulation_model(
    draws: str, dtype: torch.dtype, packet: str
) -> None:
    """The compiled pass adds what the tensor operations add (the standard deviation of
    accumulation.py's sequential model, the same normal numbers), to float32's last bits,
    and leaves the draws where they leave them."""
    from pytest_fpcheck.stochastic.accumulation import (
        accumulation_sigma,
        product_scales,
        product_terms,
    )
    from pytest_fpcheck.stochastic.memo import Memo
    from pytest_fpcheck.stochastic.rounding import add_noise, add_product_noise

    generator = torch.Generator().manual_seed(3)
    rows = 4 if draws == "batch" else 1
    if packet == "aten.addmm":
        a, b = torch.randn(6, 40, generator=generator), torch.randn(40, 9, generator=generator)
        args: tuple = (torch.zeros(9), a, b)
        kwargs = {"alpha": 0.5}
        total = torch.addmm(*args, **kwargs)
    else:
        a, b = (
            torch.randn(3, 6, 40, generator=generator),
            torch.randn(3, 40, 9, generator=generator),
        )
        args, kwargs = (a, b), {}
        total = torch.bmm(a, b)
    if rows > 1:
        total = total.expand(rows, *total.shape)
    u = 2.0**-24
    host, tensors = _draws(draws, 8, 4, 0), _draws(draws, 8, 4, 0)
    terms = product_terms(packet, args, Memo())
    got = add_product_noise(total, *terms, product_scales(packet, args, kwargs, u), host, dtype)
    sigma = accumulation_sigma(packet, args, kwargs, total, u, Memo())
    assert sigma is not None
    expected = add_noise(total.to(dtype), sigma, tensors)
    assert got.dtype == dtype
    assert torch.allclose(got, expected, rtol=2e-6, atol=0)
    assert not torch.equal(got, total.to(dtype))
    like = torch.empty(rows, 50) if rows > 1 else torch.empty(50)
    assert torch.equal(host.take("normal", like), tensors.take("normal", like))


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("start", [-1, 9, 2**63 - 2])
def test_windows_outside_the_pool_are_refused_by_the_loops(
    compiled: bool, start: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled loops and their twins check each window before reading it, without a sum
    that could wrap (a start near 2**63 passed ``start + n > size``)."""
    from pytest_fpcheck.interval.jit import MODE_ENV

    monkeypatch.setenv(MODE_ENV, "eager" if compiled else "")
    bits, pool = np.zeros((2, 8), np.int32), np.zeros(16, np.int32)
    starts = np.array([0, start], np.int64)
    shifts, out = np.zeros(2, np.int64), np.empty((2, 8), np.int32)
    with pytest.raises(ValueError, match=r"reading 8 numbers each leave the pool of 16"):
        truncate(bits, pool, starts, shifts, 13, 0, 0, out)
    f32 = np.zeros((2, 3, 4), np.float32)
    rows, columns = np.ones((2, 3), np.float32), np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"reading 12 numbers each leave the pool of 16"):
        product_noise(
            f32, rows, columns, (1.0, 1.0), np.zeros(16, np.float32), starts, np.empty_like(f32)
        )
