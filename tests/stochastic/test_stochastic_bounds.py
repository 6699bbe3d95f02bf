"""stochastic_bounds end to end: the statistics it returns, reproducibility, what it rounds
(every floating operation, backward passes, not integer or exact ones), verdicts on a correct and
a buggy model, executors, and every bad argument with its message."""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import re
from typing import Any

import numpy as np
import pytest

from pytest_fpcheck.errors import InvalidArgument

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.stochastic.run import sample, stochastic_bounds  # noqa: E402

from .models import MLP, mlp_in  # noqa: E402


def _inputs(rows: int = 16, width: int = 64) -> torch.Tensor:
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(1))


def test_statistics_of_a_single_rounding() -> None:
    """One float32 -> bfloat16 conversion of 1 + u/4: samples are 1 or 1 + 2u, the interval
    holds both the exact value and the samples, digits follow CESTAC's formula."""
    x = torch.full((4,), 1 + 2.0**-10, dtype=torch.float32)
    b = stochastic_bounds(lambda t: t.to(torch.bfloat16), x, samples=64, seed=3)
    assert b.mode == "stochastic"
    assert b.dtype == torch.bfloat16
    assert b.format.name == "bfloat16"
    e = b.estimate
    assert e is not None
    assert e.samples == 64
    assert e.seed == 3
    assert np.all(e.mean > 1.0)
    assert np.all(e.mean < 1 + 2.0**-7)
    assert np.all(b.contains(np.full(4, 1 + 2.0**-10)))
    assert np.all(b.lo <= 1.0)
    assert np.all(b.hi >= 1 + 2.0**-7)
    assert np.allclose(b.value, e.mean)
    tau = float(__import__("scipy").stats.t.ppf(1 - 0.001 / 2, 63))
    expected_digits = np.log10(math.sqrt(64) * np.abs(e.mean) / (tau * e.std))
    assert np.allclose(e.digits, np.minimum(expected_digits, 8 * math.log10(2)))


def test_the_same_seed_gives_the_same_samples_and_none_records_the_one_drawn() -> None:
    model, x = MLP(), _inputs()
    first = stochastic_bounds(mlp_in, torch.bfloat16, x, model, samples=4, seed=9)
    again = stochastic_bounds(mlp_in, torch.bfloat16, x, model, samples=4, seed=9)
    other = stochastic_bounds(mlp_in, torch.bfloat16, x, model, samples=4, seed=10)
    assert np.array_equal(first.estimate.std, again.estimate.std)
    assert np.array_equal(first.lo, again.lo)
    assert not np.array_equal(first.estimate.std, other.estimate.std)
    drawn = stochastic_bounds(mlp_in, torch.bfloat16, x, model, samples=4)
    assert isinstance(drawn.estimate.seed, int)
    replay = stochastic_bounds(
        mlp_in, torch.bfloat16, x, model, samples=4, seed=drawn.estimate.seed
    )
    assert np.array_equal(drawn.lo, replay.lo)


def _through_float16(v: torch.Tensor) -> torch.Tensor:
    return torch.log1p(v.abs()).to(torch.float16).to(torch.bfloat16)


def test_underflow_on_a_coarser_grid_is_inside_the_interval() -> None:
    """A bfloat16 1e-38 cast to float16 (smallest subnormal 6e-8) rounds up with a probability
    no 16 samples see: all give 0. The interval reaches float16's smallest subnormal around
    every element of such a run (the random programs' false Type-II verdicts were these); a run
    that stays in bfloat16 keeps bfloat16's floor, and a planted error is still caught."""
    x = torch.tensor([1.2e-38, -7e-39, 2.2e-16, 1.5]).to(torch.bfloat16)
    exact = np.log1p(np.abs(x.double().numpy()))
    bounds = stochastic_bounds(_through_float16, x, seed=3)
    assert (bounds.estimate.std[:2] == 0).all()  # every sample flushed them to zero
    assert bounds.contains(exact).all()
    # not a bug (inconclusive: half the elements are zeros whose interval is float16's floor)
    verdict = fp.classify(_through_float16(x), torch.from_numpy(exact), bounds=bounds)
    assert verdict.kind == "inconclusive"
    assert verdict.outside == 0
    alone = stochastic_bounds(lambda v: torch.log1p(v.abs()), x, seed=3)
    assert (alone.radius[:2] < 1e-39).all()  # bfloat16's own floor: no float16 in the run
    planted = torch.from_numpy(exact * (1 + 64 * 2.0**-8))
    assert fp.classify(_through_float16(x), planted, bounds=bounds).kind == "bug"


def test_integer_results_and_exact_operations_are_left_alone() -> None:
    x = torch.linspace(-3, 3, 50, dtype=torch.float32)

    def program(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        counts = (t > 0).sum() + torch.arange(3).sum()  # integer: untouched
        exact = torch.relu(t).flip(0).abs().clone()
        exact[0] = counts  # an integer written into a float tensor: exactly representable
        return exact + 0.0, t.exp()  # adding zero is exact too

    assert sample(program, (x,), {}, 0, 0).ops == 2  # the addition and the exponential
    exact, rounded = stochastic_bounds(program, x, samples=8, seed=1)
    assert np.all(exact.estimate.std == 0)
    assert np.any(rounded.estimate.std > 0)


def test_backward_passes_are_rounded_too() -> None:
    model, x = MLP(depth=2), _inputs()

    def gradient(inputs: torch.Tensor) -> torch.Tensor:
        w = model.layers[0].weight.detach().to(torch.bfloat16).requires_grad_()
        h = torch.nn.functional.gelu(inputs.to(torch.bfloat16) @ w.T)
        h.square().sum().backward()
        assert w.grad is not None
        return w.grad

    forward_only = sample(lambda t: gradient(t) * 0, (x,), {}, 1, 0)
    with_backward = sample(gradient, (x,), {}, 1, 0)
    assert with_backward.ops > 0
    b = stochastic_bounds(gradient, x, samples=8, seed=2)
    assert np.median(b.estimate.std) > 0
    assert forward_only.ops == with_backward.ops + 1  # the multiplication by zero


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_correct_model_is_roundoff_and_a_planted_bug_is_caught(dtype: torch.dtype) -> None:
    model, x = MLP(), _inputs()
    reference = mlp_in(torch.float64, x, model)
    out = mlp_in(dtype, x, model)
    b = stochastic_bounds(mlp_in, dtype, x, model, seed=4)
    # the bfloat16 estimate resolves a relative deviation of about 0.1, the default threshold
    verdict = fp.classify(out, reference, bounds=b, max_resolution=0.25)
    assert verdict.kind == "roundoff", verdict.report()
    u = 2.0 ** -{torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}[dtype]
    model.bug = 64 * u
    buggy = stochastic_bounds(mlp_in, dtype, x, model, seed=4)
    verdict = fp.classify(mlp_in(dtype, x, model), reference, bounds=buggy)
    assert verdict.kind == "bug"
    assert verdict.outside > verdict.total // 4


def test_the_estimated_spread_follows_the_actual_error() -> None:
    """Over input draws, the error of the bfloat16 model against float64 has a spread within a
    factor of 2 of the estimated standard deviation (the slice of benchmarks/bench_stochastic.py
    that CI runs)."""
    model = MLP(depth=6)
    ratios = []
    for draw in range(3):
        x = torch.randn(32, 64, generator=torch.Generator().manual_seed(100 + draw))
        with torch.no_grad():
            error = mlp_in(torch.bfloat16, x, model).double() - mlp_in(torch.float64, x, model)
        b = stochastic_bounds(mlp_in, torch.bfloat16, x, model, samples=16, seed=draw)
        actual = float(error.square().mean().sqrt())
        ratios.append(float(np.sqrt(np.mean(b.estimate.std**2))) / actual)
    assert 0.5 <= float(np.median(ratios)) <= 2.0, ratios


def test_a_tuple_of_results_gives_a_tuple_of_bounds() -> None:
    x = _inputs()
    pair = stochastic_bounds(lambda t: (t.exp(), {"s": t.sin()}), x, samples=3, seed=1)
    assert isinstance(pair, tuple)
    assert pair[0].shape == (16, 64)
    assert pair[1]["s"].mode == "stochastic"


def test_thread_pool_samples_equal_in_process_samples() -> None:
    model, x = MLP(), _inputs()
    here = stochastic_bounds(mlp_in, torch.bfloat16, x, model, samples=6, seed=5)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        threaded = stochastic_bounds(
            mlp_in, torch.bfloat16, x, model, samples=6, seed=5, executor=pool
        )
    assert np.array_equal(here.estimate.std, threaded.estimate.std)
    assert np.array_equal(here.lo, threaded.lo)
    assert np.median(threaded.estimate.std) > 0  # the mode was active on the pool's threads


def test_process_pool_samples_equal_in_process_samples() -> None:
    """A process pool pickles ``fn``: an ``nn.Module`` of torch's own layers pickles by value
    (a class defined in a test module would have to be importable in the workers)."""
    torch.manual_seed(0)
    fn = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    fn = fn.to(torch.bfloat16).requires_grad_(False)
    x = _inputs().to(torch.bfloat16)
    here = stochastic_bounds(fn, x, samples=4, seed=6)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        spread = stochastic_bounds(fn, x, samples=4, seed=6, executor=pool)
    assert np.median(here.estimate.std) > 0
    assert np.array_equal(here.estimate.mean, spread.estimate.mean)
    assert np.array_equal(here.lo, spread.lo)


def test_a_process_pool_is_refused_what_it_cannot_pickle() -> None:
    def local(t: torch.Tensor) -> torch.Tensor:
        return t * 3

    # refused before anything is submitted: no worker process starts
    with (
        concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool,
        pytest.raises(InvalidArgument) as raised,
    ):
        stochastic_bounds(local, torch.ones(4), samples=2, seed=1, executor=pool)
    assert raised.value.name == "fn"
    assert str(raised.value).startswith(
        str(
            InvalidArgument(
                "fn",
                local,
                "a value a ProcessPoolExecutor can pickle (a module-level function, an "
                "nn.Module, tensors)",
            )
        )
        + " Pickling it failed: "
    )
    assert str(raised.value).endswith(
        "Define the function at module level in an importable module, or pass a "
        "ThreadPoolExecutor (or a dask client's get_executor(), which pickles closures)."
    )


def _message(name: str, value: object, expected: str) -> str:
    return re.escape(str(InvalidArgument(name, value, expected)))


@pytest.mark.parametrize(
    ("kwargs", "name", "value", "expected"),
    [
        ({"samples": 1}, "samples", 1, "an int >= 2 (the number of randomly rounded runs)"),
        ({"samples": 2.0}, "samples", 2.0, "an int >= 2 (the number of randomly rounded runs)"),
        ({"samples": True}, "samples", True, "an int >= 2 (the number of randomly rounded runs)"),
        ({"confidence": 1.0}, "confidence", 1.0, "a number in the open interval (0, 1)"),
        ({"confidence": 0}, "confidence", 0, "a number in the open interval (0, 1)"),
        ({"confidence": "high"}, "confidence", "high", "a number in the open interval (0, 1)"),
        ({"seed": -1}, "seed", -1, "None (draw one) or an int in [0, 2**63)"),
        ({"seed": 1.5}, "seed", 1.5, "None (draw one) or an int in [0, 2**63)"),
        (
            {"executor": "dask"},
            "executor",
            "dask",
            "a concurrent.futures.Executor (a ThreadPoolExecutor, a ProcessPoolExecutor, a dask "
            "client's get_executor()) or None to run the samples in this process",
        ),
    ],
)
def test_bad_arguments_are_rejected(kwargs: dict, name: str, value: object, expected: str) -> None:
    with pytest.raises(InvalidArgument, match=_message(name, value, expected)):
        stochastic_bounds(torch.exp, torch.ones(2), **kwargs)


def test_a_non_callable_is_rejected() -> None:
    with pytest.raises(
        InvalidArgument,
        match=_message("fn", 3, "a callable fn(*args, **kwargs) returning floating tensors"),
    ):
        stochastic_bounds(3, torch.ones(2))  # type: ignore[arg-type]


def test_a_result_that_is_no_floating_tensor_is_rejected() -> None:
    def count(t: torch.Tensor) -> torch.Tensor:
        return (t > 0).sum()

    message = str(
        InvalidArgument(
            "fn",
            count,
            "a callable returning a floating tensor or a tuple, list or dict of them",
            hint="Its result's leaf 0 is Tensor of dtype torch.int64.",
        )
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        stochastic_bounds(count, torch.ones(2), samples=2, seed=0)


def test_an_outer_tracker_does_not_see_the_randomly_rounded_runs() -> None:
    x = torch.linspace(0, 1, 8)
    with fp.track() as tracker:
        inside = stochastic_bounds(torch.exp, x, samples=3, seed=0)
    assert tracker.ops == 0
    outside = stochastic_bounds(torch.exp, x, samples=3, seed=0)
    assert np.array_equal(inside.lo, outside.lo)


def test_a_run_subscribes_as_the_rounder_hiding_the_blocks_around_it() -> None:
    """The Triton instrumentation asks tracking/core/observe.py whom to tell: inside a randomly
    rounded run, the run (a rounder) and no tracker or watch opened before it; a tracker
    opened inside the run is found again."""
    from pytest_fpcheck.stochastic.mode import StochasticMode
    from pytest_fpcheck.stochastic.rounding import Pools, SampleRandom
    from pytest_fpcheck.tracking.core.observe import bounder, rounder, watcher

    with fp.track() as tracker, fp.watch_nonfinite():
        with StochasticMode(SampleRandom(Pools.shared(), 1, 0)) as mode:
            assert rounder() is mode
            assert bounder() is None
            assert watcher() is None
            with fp.track() as inner:
                assert bounder() is inner
        assert rounder() is None
        assert bounder() is tracker


def test_an_overflow_in_a_run_leaves_no_estimate() -> None:
    x = torch.tensor([60000.0, 1.0], dtype=torch.float16)
    b = stochastic_bounds(
        lambda t: (t * 2).sum() / 4 * torch.ones(2, dtype=t.dtype), x, samples=3, seed=0
    )
    assert np.isneginf(b.lo).all()
    assert np.isposinf(b.hi).all()
    assert b.notes[1] == (
        "aten.mul made a non-finite value from finite operands in 3 of the 3 runs (an "
        "overflow): no estimate, every element may be anything"
    )
    fine = stochastic_bounds(
        lambda t: t.masked_fill(t > 2, float("-inf")).softmax(0), x, samples=3, seed=0
    )
    assert np.isfinite(fine.lo).all()  # an infinity from an exact operation is no overflow


def _buckets(position: torch.Tensor) -> torch.Tensor:
    """T5's relative-position buckets: ``log(0)`` at position 0, discarded by ``where``."""
    large = 4 + (torch.log(position / 4) / math.log(32 / 4) * 4).to(torch.int64)
    return torch.where(position < 4, position.to(torch.int64), large)


@pytest.mark.parametrize(
    ("fn", "x"),
    [
        # T5: the zero is exact and the infinity discarded, but nothing in the run says so
        (
            lambda t: torch.linspace(-1, 1, 12, dtype=t.dtype)[_buckets(t)] * 3.1,
            torch.arange(0.0, 20.0),
        ),
        # a rounding makes the zero (1 - sigmoid(20) rounds to 0 in float32), a clamp then
        # makes log's infinity finite (-100, the exact value is -20)
        (lambda t: torch.log(1 - torch.sigmoid(t)).clamp(min=-100.0), torch.tensor([20.0, 1.0])),
        # an underflow makes it (softmax's exp(-20) in float16), the same clamp
        (
            lambda t: torch.log(torch.softmax(t, -1)).clamp(min=-30.0),
            torch.tensor([0.0, -20.0], dtype=torch.float16),
        ),
    ],
)
def test_an_infinity_from_finite_operands_leaves_no_estimate(fn: Any, x: torch.Tensor) -> None:
    """A pole at an exact zero and one at a zero a rounding made look the same to a run: both
    stay overflows (no estimate), never a confident interval around a wrong value."""
    b = stochastic_bounds(fn, x, samples=16, seed=0)
    assert np.isneginf(b.lo).all()
    assert np.isposinf(b.hi).all()
    assert "made a non-finite value from finite operands" in b.notes[1]
    assert fp.classify(fn(x), fn(x.double()), bounds=b).kind == "inconclusive"


@pytest.mark.parametrize(
    ("fn", "operation"),
    [
        # float32 overflow of a quotient that float64 holds: an overflow
        (lambda t: (t[0] / t[1]) * torch.ones(2), "aten.div"),
        # a divisor below float32's range: float64 would overflow where float32 divides by 0
        (lambda t: (t[0] / 1e-300) * torch.ones(2), "aten.div"),
        # the logarithm of a negative (a rounded one may be): NaN is never a pole
        (lambda t: torch.log(t[1] - 0.5) * torch.ones(2), "aten.log"),
        # in place: the operand holds the result when it is looked at
        (lambda t: t.clone().div_(torch.tensor([1e-30, 1.0])).sum() * torch.ones(2), "aten.div"),
    ],
)
@pytest.mark.parametrize("batched", [True, False])
def test_overflows_stay_overflows(fn: Any, operation: str, batched: bool) -> None:
    x = torch.tensor([3e30, 1e-10])
    executor = None if batched else concurrent.futures.ThreadPoolExecutor(2)
    b = stochastic_bounds(fn, x, samples=3, seed=0, executor=executor)
    assert np.isneginf(b.lo).all()
    assert np.isposinf(b.hi).all()
    assert b.notes[1].startswith(f"{operation} made a non-finite value from finite operands")


def test_addbmm_carries_the_accumulation_of_its_joined_product() -> None:
    """``addbmm`` is one sequential accumulation of its batches' products: the term of the
    ``(n, P k) @ (P k, m)`` product it is."""
    from pytest_fpcheck.stochastic.accumulation import accumulation_sigma
    from pytest_fpcheck.stochastic.memo import Memo

    generator = torch.Generator().manual_seed(4)
    a, b = torch.randn(5, 3, 7, generator=generator), torch.randn(5, 7, 4, generator=generator)
    addend = torch.randn(3, 4, generator=generator)
    total = torch.addbmm(addend, a, b, alpha=0.5)
    joined = (addend, a.transpose(0, 1).reshape(3, 35), b.reshape(35, 4))
    u = 2.0**-24
    sigma = accumulation_sigma("aten.addbmm", (addend, a, b), {"alpha": 0.5}, total, u, Memo())
    flat = accumulation_sigma("aten.addmm", joined, {"alpha": 0.5}, total, u, Memo())
    assert sigma is not None
    assert flat is not None
    torch.testing.assert_close(sigma, flat, rtol=1e-6, atol=0)
    assert bool((sigma > 0).all())


@pytest.mark.parametrize("batched", [True, False])
def test_an_addbmm_cancellation_is_inside(batched: bool) -> None:
    """The running sum ``1 - 2e-39`` rounds to 1 in float32 (and float64), then cancels against
    -1: every run gives 0, the exact value is -2e-39. The accumulation's term spreads the
    samples over what its roundings could have made."""
    x = torch.tensor([[2.0021654e-39, 1.0, 0.0]])
    y = torch.tensor([[-2.0021654e-39, -1.0, 0.0]])

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.addbmm(x, x.T.unsqueeze(-1), y.unsqueeze(0).expand(3, 1, 3))

    executor = None if batched else concurrent.futures.ThreadPoolExecutor(2)
    b = stochastic_bounds(fn, x, y, samples=16, seed=0, executor=executor)
    exact = fn(x.double(), y.double()).numpy()
    exact[0, 1] = -float(x[0, 0])  # x01 - (x00 + x01) exactly: float64 rounds it to 0 too
    assert fn(x, y)[0, 1] == 0.0
    assert b.contains(exact).all()


@pytest.mark.parametrize("fill", [0.0, math.nan])
def test_a_destination_only_written_is_no_operand(fill: float) -> None:
    """What an ``out=`` or ``copy_`` destination held before (NaN from ``torch.empty``, say)
    neither hides an overflow nor makes one."""

    def copied(x: torch.Tensor) -> torch.Tensor:
        buffer = torch.full((2,), fill, dtype=torch.float16)
        buffer.copy_(x * 1.0)  # 7e4 overflows float16
        return torch.where(buffer.isinf(), 0.0, buffer.float()) + 1.0

    def exp_out(x: torch.Tensor) -> torch.Tensor:
        buffer = torch.full((2,), fill)
        torch.exp(x * 1.0, out=buffer)  # exp(100) overflows float32
        return torch.where(buffer.isinf(), 0.0, buffer) + 1.0

    for fn, x in ((copied, torch.tensor([7e4, 1.0])), (exp_out, torch.tensor([100.0, 1.0]))):
        b = stochastic_bounds(fn, x, samples=4, seed=0)
        assert "made a non-finite value from finite operands" in b.notes[1], fn
        fine = stochastic_bounds(fn, torch.tensor([3.0, 1.0]), samples=4, seed=0)
        assert np.isfinite(fine.lo).all(), fn


def _square_by_a_view(t: torch.Tensor) -> torch.Tensor:
    y = t * 1.0
    y.mul_(y.view(-1))  # the operand is another object on the memory mul_ writes
    return torch.where(y.isinf(), 0.0, y) + 1.0


def _square_in_place(t: torch.Tensor) -> torch.Tensor:
    y = t * 1.0
    y.mul_(y)  # a batch runs this large operation sample by sample, on one view per argument
    return torch.where(y.isinf(), 0.0, y) + 1.0


def _add_into_an_operand(t: torch.Tensor) -> torch.Tensor:
    y = t * 1.0
    y[0] = math.inf
    torch.add(y, 1.0, out=y)  # y is both an operand and the destination: it held the inf
    return torch.where(y.isinf(), 0.0, y) + 1.0


_LARGE = torch.full((1 << 16,), 2.0)
_LARGE[0] = 1e20


@pytest.mark.parametrize(
    ("fn", "x", "overflow"),
    [
        (_square_by_a_view, torch.tensor([1e20, 2.0]), True),
        (_square_in_place, _LARGE, True),
        (_add_into_an_operand, torch.tensor([1.0, 2.0]), False),
        (_add_into_an_operand, torch.full((1 << 16,), 2.0), False),
    ],
)
@pytest.mark.parametrize("batched", [True, False])
def test_an_operation_in_place_is_judged_by_its_operands_before_it_ran(
    fn: Any, x: torch.Tensor, overflow: bool, batched: bool
) -> None:
    """Every operand it reads, whatever object holds it (one may share the written memory),
    and an operand that is also the ``out=`` destination: the same verdict batched and alone."""
    executor = None if batched else concurrent.futures.ThreadPoolExecutor(2)
    b = stochastic_bounds(fn, x, samples=4, seed=0, executor=executor)
    noted = any("made a non-finite value from finite operands" in note for note in b.notes)
    assert noted is overflow
    assert bool(np.isfinite(b.lo).all()) is not overflow


def _mixed_in_place(y: torch.Tensor) -> torch.Tensor:
    x = torch.full((3,), 0.25, dtype=torch.float64 if y.dtype == torch.float32 else torch.float32)
    x.add_(y)  # the wider run must not write into x: the plain run does, once
    return x * 1.0


def _foreach_in_place(y: torch.Tensor) -> torch.Tensor:
    x = torch.full((3,), 1.0, dtype=y.dtype)
    torch._foreach_add_([x], [y])  # returns nothing: what it wrote is rounded
    return x * 1.0


def _method_in_place(y: torch.Tensor) -> torch.Tensor:
    x = torch.full((3,), 1.0, dtype=y.dtype)
    x.add_(y)
    return x * 1.0


@pytest.mark.parametrize("batched", [True, False])
def test_operations_in_place_write_once_and_are_rounded(batched: bool) -> None:
    executor = None if batched else concurrent.futures.ThreadPoolExecutor(2)

    def bounds(fn: Any, y: torch.Tensor) -> Any:
        return stochastic_bounds(fn, y, samples=8, seed=0, executor=executor)

    for y in (torch.ones(3, dtype=torch.bfloat16), torch.full((3,), 0.1)):
        b = bounds(_mixed_in_place, y)
        exact = 0.25 + y.double().numpy()
        assert b.contains(exact).all(), (y.dtype, b.lo, b.hi)
    for y in (torch.full((3,), 3.3e-8), torch.full((3,), 1e-3, dtype=torch.bfloat16)):
        foreach, method = bounds(_foreach_in_place, y), bounds(_method_in_place, y)
        assert (foreach.estimate.std > 0).all()
        np.testing.assert_array_equal(foreach.estimate.std, method.estimate.std)
        np.testing.assert_array_equal(foreach.lo, method.lo)


@pytest.mark.parametrize("batched", [True, False])
def test_a_foreach_overflow_in_place_is_recorded(batched: bool) -> None:
    def fn(y: torch.Tensor) -> torch.Tensor:
        x = y * 1.0
        torch._foreach_mul_([x], [y])  # 1e20 squared overflows float32
        return torch.where(x.isinf(), 0.0, x) + 1.0

    executor = None if batched else concurrent.futures.ThreadPoolExecutor(2)
    b = stochastic_bounds(fn, torch.tensor([1e20, 2.0]), samples=4, seed=0, executor=executor)
    assert "made a non-finite value from finite operands" in b.notes[1]


@pytest.mark.parametrize(
    "draw",
    [
        lambda y: y.log_normal_(1.0, 0.5),
        lambda y: y.cauchy_(),
        lambda y: y.geometric_(0.3),
        lambda y: y.random_(0, 10),
        lambda y: y.exponential_(),
        lambda y: y.uniform_(),
        lambda y: torch.poisson(y.abs() + 1),
        lambda y: torch.multinomial(y.abs() + 1, 2).float(),
        lambda y: torch.nn.functional.rrelu(y - 0.5, training=True),
    ],
)
def test_random_operations_draw_once_and_are_left_alone(draw: Any) -> None:
    """A random operation under the mode gives the plain run's numbers and leaves the
    generator where the plain run leaves it (a wider run drew them a second time)."""
    from pytest_fpcheck.stochastic.mode import StochasticMode
    from pytest_fpcheck.stochastic.rounding import Pools, SampleRandom

    def run() -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        return draw(torch.full((6,), 0.25)).clone(), torch.rand(2)

    plain = run()
    with StochasticMode(SampleRandom(Pools.shared(), 0, 0, 1)):
        rounded = run()
    torch.testing.assert_close(rounded, plain, rtol=0, atol=0)
