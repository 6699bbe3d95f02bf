"""``fp.stochastic_bounds``: a round-off estimate for a whole program from randomly rounded runs.

CESTAC (Vignes; the CADNA library) and Monte Carlo arithmetic (Parker; Verificarlo and Verrou,
which the GPU-FPX/FTTN paper's section 7 asks more attention for) run a program ``N`` times with
every rounding made at random (:mod:`pytest_fpcheck.stochastic.mode`) and read the spread of the
results. The random errors keep the correlations between values, so the estimate grows with
depth as the real error does, where worst-case intervals multiply at every layer.

Per element, from the ``N`` samples ``y_1 .. y_N``:

* ``mean`` ``m`` and standard deviation ``s`` (``N - 1`` in the denominator);
* CESTAC's significant digits ``C = log10(sqrt(N) |m| / (tau s))`` with ``tau`` Student's t
  quantile at the requested confidence (``N - 1`` degrees of freedom), clipped to
  ``[0, p log10 2]`` of the result's format (all digits where ``s = 0``);
* the interval ``m -+ (t s sqrt(1 + 1/N) + ulp(m))``: Student's prediction interval for one
  more run, which also holds the exact result (the samples are unbiased estimates of it),
  widened by one unit in the last place of the result's format (the gap the samples' grid
  cannot resolve, and the rounding of a result whose samples all agree), and at least the
  smallest subnormal of every format the run's results were in: a value rounded onto a grid
  far coarser than itself near zero (a bfloat16 1e-38 cast to float16, whose smallest subnormal
  is 6e-8) rounds up with a probability 16 samples never see, so all of them give 0 while the
  exact result is not. CESTAC's interval of
  the mean, ``t s / sqrt(N)``, is four times narrower but holds only the exact result of this
  program on these inputs: a reference usually also differs by the rounding of the inputs
  (weights stored in bfloat16 against a float64 model made from float32 weights) and by
  operations that ran in their own format, whose round-to-nearest error every sample shares.
  On an 8-layer bfloat16 MLP against its float64 twin, the interval of the mean called 67 of
  200 correct runs a bug, the prediction interval none (benchmarks/bench_stochastic.py). ``t`` is the quantile at ``1 - (1 - confidence) / (2 n)``
  for ``n`` elements (Bonferroni): the whole array is inside at the requested confidence, so
  a verdict's false alarm rate is at most ``1 - confidence``. An element with a non-finite
  sample gets the whole line: it may be NaN, and an overflow in one run says nothing of the
  exact result's size. When any run had an operation make a non-finite value from finite
  operands, every element gets the whole line (which outputs the overflow reached is unknown),
  with a note naming the operation.

Each sample is a function of the seed, its index and the number of samples only, so they may
run on any ``concurrent.futures.Executor`` in any order with the same result. The directions of
their roundings are stratified across the samples (Latin-hypercube sampling,
:class:`~pytest_fpcheck.stochastic.rounding.SampleRandom`): each sample alone is a randomly
rounded run, and together they see a rounding near a grid point that independent samples would
all take the same way; the samples' spread is then a slightly conservative estimate.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import functools
import logging
import math
import pickle
import secrets
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgument
from ..formats import FORMATS, ulp
from ..interval.bounds import Bounds, Estimate

if TYPE_CHECKING:
    from .memo import Memo

__all__ = ["sample", "sample_batch", "stochastic_bounds"]

LOGGER = logging.getLogger("pytest_fpcheck.stochastic")

_EXECUTOR_EXPECTED = (
    "a concurrent.futures.Executor (a ThreadPoolExecutor, a ProcessPoolExecutor, a dask "
    "client's get_executor()) or None to run the samples in this process"
)


@dataclass(frozen=True)
class Sample:
    """One randomly rounded run's results: float64 copies of its floating tensors, their dtype
    names, the structure they came in (a serialised pytree spec) and how many results the run
    rounded; plain data, for process pools."""

    values: tuple[np.ndarray[Any, np.dtype[np.float64]], ...]
    dtypes: tuple[str, ...]
    structure: str
    ops: int
    overflowed: str | None
    #: the floating formats the run's results were in (the grids it rounded onto)
    formats: tuple[str, ...] = ()
    #: the first operation that drew random numbers (dropout in training), None if none
    random: str | None = None


def sample(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    seed: int,
    index: int,
    count: int | None = None,
    memo: Memo | None = None,
) -> Sample:
    """Run ``fn(*args, **kwargs)`` once with random rounding: sample ``index`` of ``count``
    (None: independent of the others) of ``seed``. ``memo``: what the samples of one call share
    in this process (None: nothing)."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_flatten

    from .mode import StochasticMode
    from .rounding import Pools, SampleRandom

    mode = StochasticMode(SampleRandom(Pools.shared(), seed, index, count), memo)
    # the dispatch modes active outside (tracking under ``pytest --fpcheck``, a non-finite
    # watch) do not see the randomly rounded runs
    with _disable_current_modes():
        with mode, _native_kernels():
            out = fn(*args, **kwargs)
        leaves, structure = tree_flatten(out)
        values, dtypes = [], []
        for position, leaf in enumerate(leaves):
            _check_leaf(fn, position, leaf)
            with torch.no_grad():
                values.append(leaf.detach().to("cpu", torch.float64).numpy().copy())
            dtypes.append(str(leaf.dtype).removeprefix("torch."))
    return Sample(
        tuple(values),
        tuple(dtypes),
        _dumps(structure),
        mode.ops,
        mode.overflowed,
        _formats(mode.dtypes),
        mode.random,
    )


@contextlib.contextmanager
def _native_kernels() -> Iterator[None]:
    """oneDNN off while ``fn`` runs a sample: ``nn.LSTM`` then takes ATen's native path, whose
    operations (products, sigmoids, the cell's update) the mode rounds one by one. oneDNN's
    fused layer, ``mkldnn_rnn_layer``, has no float64 kernel and rounds every time step out of
    the mode's sight: its result took one perturbation, a spread far below the layer's
    round-off, and a correct float32 LSTM was judged a bug at every seed. (Products and
    convolutions the mode widens run in float64 or float32, which oneDNN's switch does not
    change.)"""
    import torch

    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _check_leaf(fn: Any, position: int, leaf: Any) -> None:
    import torch

    if not isinstance(leaf, torch.Tensor) or not leaf.is_floating_point():
        raise InvalidArgument(
            "fn",
            fn,
            "a callable returning a floating tensor or a tuple, list or dict of them",
            hint=f"Its result's leaf {position} is {type(leaf).__name__}"
            + (f" of dtype {leaf.dtype}" if isinstance(leaf, torch.Tensor) else "")
            + ".",
        )


def _formats(dtypes: Collection[Any]) -> tuple[str, ...]:
    names = (str(dtype).removeprefix("torch.") for dtype in dtypes)
    return tuple(sorted(name for name in names if name in FORMATS))


def sample_batch(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    seed: int,
    count: int,
    memo: Memo | None = None,
) -> list[Sample]:
    """Samples ``0 .. count - 1`` of ``seed`` run together, as one batch
    (:mod:`pytest_fpcheck.stochastic.batched`): the same samples as :func:`sample` gives each.
    Raises :class:`~pytest_fpcheck.stochastic.batched.Unbatchable` (or whatever ``fn`` raised)
    when ``fn`` cannot run so."""
    import warnings

    import torch
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_flatten

    from .batched import BatchedMode, SampleBatch, Unbatchable
    from .rounding import BatchRandom, Pools

    mode = BatchedMode(BatchRandom(Pools.shared(), seed, count), memo)
    with _disable_current_modes(), warnings.catch_warnings():
        # an operation without a batching rule runs sample by sample inside functorch (exact)
        warnings.filterwarnings("ignore", message="There is a performance drop")
        with mode, _native_kernels():
            out = fn(*args, **kwargs)
        leaves, structure = tree_flatten(out)
        rows, dtypes = [], []
        for position, leaf in enumerate(leaves):
            if not isinstance(leaf, torch.Tensor) or not leaf.is_floating_point():
                raise Unbatchable(f"its result's leaf {position} is no floating tensor")
            if type(leaf) is SampleBatch:
                batch = leaf.rows
            else:  # no rounding reached it: every sample's is the same
                batch = leaf.detach().expand(count, *leaf.shape)
            with torch.no_grad():
                rows.append(batch.detach().to("cpu", torch.float64).numpy())
            dtypes.append(str(leaf.dtype).removeprefix("torch."))
    text, formats = _dumps(structure), _formats(mode.dtypes)
    return [
        Sample(
            tuple(r[index] for r in rows),
            tuple(dtypes),
            text,
            mode.ops,
            mode.overflows[index],
            formats,
        )
        for index in range(count)
    ]


#: the last structure serialised, and its serialisation (every sample of a call has the same);
#: one tuple, replaced whole (threads of a pool may share it)
_LAST_STRUCTURE: dict[str, tuple[Any, str]] = {"last": (None, "")}


def _dumps(structure: Any) -> str:
    """``treespec_dumps(structure)``, reused from the previous sample when it is the same
    structure (it costs more than a small operation's rounding)."""
    from torch.utils._pytree import treespec_dumps

    last, text = _LAST_STRUCTURE["last"]
    if last is None or last != structure:
        text = treespec_dumps(structure)
        _LAST_STRUCTURE["last"] = (structure, text)
    return text


def _check(fn: Any, samples: Any, confidence: Any, seed: Any, executor: Any) -> None:
    if not callable(fn):
        raise InvalidArgument("fn", fn, "a callable fn(*args, **kwargs) returning floating tensors")
    if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or samples < 2:
        raise InvalidArgument(
            "samples", samples, "an int >= 2 (the number of randomly rounded runs)"
        )
    if (
        not isinstance(confidence, (int, float, np.floating))
        or isinstance(confidence, bool)
        or not 0.0 < float(confidence) < 1.0
    ):
        raise InvalidArgument("confidence", confidence, "a number in the open interval (0, 1)")
    if seed is not None and (
        not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**63
    ):
        raise InvalidArgument("seed", seed, "None (draw one) or an int in [0, 2**63)")
    if executor is not None and not isinstance(executor, concurrent.futures.Executor):
        raise InvalidArgument("executor", executor, _EXECUTOR_EXPECTED)


def _check_picklable(**named: Any) -> None:
    """A process pool pickles what it sends: say which argument cannot be, at once (the pool
    itself reports it from a feeder thread, naming neither the argument nor a fix)."""
    for name, value in named.items():
        try:
            pickle.dumps(value)
        except (pickle.PicklingError, AttributeError, TypeError) as error:
            raise InvalidArgument(
                name,
                value,
                "a value a ProcessPoolExecutor can pickle (a module-level function, an nn.Module, "
                "tensors)",
                hint=f"Pickling it failed: {error}. Define the function at module level in an "
                "importable module, or pass a ThreadPoolExecutor (or a dask client's "
                "get_executor(), which pickles closures).",
            ) from None


def stochastic_bounds(
    fn: Callable[..., Any],
    *args: Any,
    samples: int = 16,
    confidence: float = 0.999,
    seed: int | None = None,
    executor: concurrent.futures.Executor | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)`` ``samples`` times with random rounding and return the
    estimated round-off of what it returns: a :class:`~pytest_fpcheck.interval.bounds.Bounds`
    with ``mode="stochastic"`` (or the same structure of them for a tuple, list or dict of
    tensors). See the module docstring for the statistics.

    ``seed``: the same seed gives the same samples; None draws one (recorded in
    ``bounds.estimate.seed`` and in verdicts). ``executor``: runs the samples (default: in this
    process, one after the other); with a process pool, ``fn`` and its arguments must be
    picklable (a module-level function or an ``nn.Module``, not a lambda or a local function:
    ``InvalidArgument`` names the one that is not), and each worker process generates its random
    pools and widens the parameters again (in-process samples share them). ``fn`` must be
    deterministic apart from rounding. In this process each sample starts from the arguments
    as they were (tensors, and the parameters, gradients and buffers of modules: an optimizer
    step on the model given is estimated as one step), and the call leaves them so; on an
    executor ``fn`` must not modify its arguments (the samples may run at once).
    """
    _check(fn, samples, confidence, seed, executor)
    samples, confidence = int(samples), float(confidence)
    seed = secrets.randbits(63) if seed is None else int(seed)
    if executor is None:
        from ..tracking.triton.scope import attach, detach
        from .memo import Memo

        memo = Memo()  # the parameters' copies and norms, once for all samples
        state = _State(fn, args, kwargs)  # what fn may change: each sample starts from it
        attach()  # the Triton instrumentation once for all samples, not once per sample
        try:
            try:
                runs = sample_batch(fn, args, kwargs, seed, samples, memo)
            except Exception as error:  # what a batch cannot run: one sample at a time
                LOGGER.debug("stochastic_bounds: samples run one at a time (%r)", error)
                runs = []
                for index in range(samples):
                    state.restore()
                    state.rewind()
                    runs.append(sample(fn, args, kwargs, seed, index, samples, memo))
        finally:
            detach()
            state.restore()
    else:
        if isinstance(executor, concurrent.futures.ProcessPoolExecutor):
            _check_picklable(fn=fn, args=args, kwargs=kwargs)
        futures = [
            executor.submit(sample, fn, args, kwargs, seed, index, samples)
            for index in range(samples)
        ]
        runs = [future.result() for future in futures]
    first = runs[0]
    for run in runs[1:]:
        if (
            run.structure != first.structure
            or run.dtypes != first.dtypes
            or [v.shape for v in run.values] != [v.shape for v in first.values]
        ):
            raise InvalidArgument(
                "fn", fn, "a callable whose results have the same structure on every run"
            )
    overflows = [run.overflowed for run in runs if run.overflowed is not None]
    grids = {name for run in runs for name in run.formats}
    random = next((run.random for run in runs if run.random is not None), None)
    bounds = [
        _bounds(
            np.stack([run.values[i] for run in runs]),
            first.dtypes[i],
            confidence,
            seed,
            overflows,
            grids,
            random,
        )
        for i in range(len(first.values))
    ]
    from torch.utils._pytree import tree_unflatten, treespec_loads

    return tree_unflatten(bounds, treespec_loads(first.structure))


class _State:
    """The tensors ``fn`` may change, as they were before the call: its tensor arguments, the
    parameters, their gradients and the buffers of its module arguments and of ``fn`` itself
    when it is a module or a module's method, and the state of its optimizer arguments (a
    training step
    on the model it is given, batch norm's running statistics, an input normalised in place,
    a weight scaled through ``.data``). Each in-process sample starts from them, and the call
    leaves them as it found them: samples run one after another on the same objects, and the
    sixteenth would otherwise start from fifteen steps' state (an estimate of fifteen steps'
    drift, not of one step's round-off). Checked by value, since a write through ``.data``
    moves no version counter; restored only where changed. The CPU random generator is rewound
    before each sample (:meth:`rewind`)."""

    def __init__(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch
        from torch.utils._python_dispatch import _disable_current_modes
        from torch.utils._pytree import tree_flatten

        found: dict[int, Any] = {}
        #: optimizers given, with a copy of their state (momenta, steps, moments)
        self._optimizers: list[tuple[Any, Any]] = []
        owners = [fn, getattr(fn, "__self__", None)]  # a module called, or its bound method
        for leaf in tree_flatten((args, kwargs))[0] + owners:
            if isinstance(leaf, torch.Tensor):
                found.setdefault(id(leaf), leaf)
            elif isinstance(leaf, torch.nn.Module):
                # buffers a state dict leaves out (persistent=False) included
                for tensor in (*leaf.parameters(), *leaf.buffers()):
                    found.setdefault(id(tensor), tensor)
            elif isinstance(leaf, torch.optim.Optimizer):
                self._optimizers.append((leaf, copy.deepcopy(leaf.state_dict())))
        #: the random generators' state: every sample draws what one plain call would
        self._rng = torch.get_rng_state()
        self._saved: list[tuple[Any, Any, Any]] = []
        # an outer dispatch mode (tracking under ``pytest --fpcheck``) sees none of this
        with _disable_current_modes(), torch.no_grad():
            for tensor in found.values():
                if tensor.layout != torch.strided or tensor.is_meta:
                    continue
                grad = tensor.grad if tensor.requires_grad and tensor.is_leaf else None
                self._saved.append(
                    (tensor, tensor.detach().clone(), None if grad is None else grad.clone())
                )

    def rewind(self) -> None:
        """The CPU generator as it was: a sample's dropout draws the mask one plain call would
        (a run that drew from where the last sample left off had sixteen masks, and its spread
        was dropout's, not round-off's); the generator ends as after one call."""
        import torch

        torch.set_rng_state(self._rng)

    def restore(self) -> None:
        import torch
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes(), torch.no_grad():
            for optimizer, state in self._optimizers:
                optimizer.load_state_dict(copy.deepcopy(state))
            for tensor, value, grad in self._saved:
                current = tensor.detach()
                if current.shape == value.shape and not torch.equal(current, value):
                    current.copy_(value)
                if not (tensor.requires_grad and tensor.is_leaf):
                    continue
                if grad is None:
                    tensor.grad = None
                elif tensor.grad is None or not torch.equal(tensor.grad, grad):
                    tensor.grad = grad.clone()


@functools.lru_cache(maxsize=64)
def _t_quantile(probability: float, freedom: int) -> float:
    """Student's t quantile (remembered: scipy's takes longer than a small model's sample)."""
    from scipy import stats

    return float(stats.t.ppf(probability, freedom))


def _bounds(
    values: np.ndarray,
    dtype_name: str,
    confidence: float,
    seed: int,
    overflows: list[str],
    grids: Collection[str] = (),
    random: str | None = None,
) -> Bounds:
    import torch

    fmt = FORMATS[dtype_name]
    # what underflow on the run's coarsest grid near zero may take away unseen (module docstring)
    floor = max(FORMATS[name].smallest_subnormal for name in (dtype_name, *grids))
    count = values.shape[0]
    elements = max(int(np.prod(values.shape[1:])), 1)
    with np.errstate(invalid="ignore", over="ignore"):
        mean = values.mean(axis=0)
        std = values.std(axis=0, ddof=1)
    quantile = _t_quantile(1 - (1 - confidence) / (2 * elements), count - 1)
    tau = _t_quantile(1 - (1 - confidence) / 2, count - 1)
    finite = np.isfinite(values).all(axis=0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        gap = np.maximum(ulp(np.where(finite, mean, 0.0), fmt), floor)
        radius = quantile * std * math.sqrt(1 + 1 / count) + gap
        lo = np.where(finite & (not overflows), mean - radius, -np.inf)
        hi = np.where(finite & (not overflows), mean + radius, np.inf)
        most = fmt.precision * math.log10(2)
        digits = np.log10(math.sqrt(count) * np.abs(mean) / (tau * std))
        digits = np.where(std == 0, most, np.clip(np.nan_to_num(digits, nan=0.0), 0.0, most))
    estimate = Estimate(
        mean=mean,
        std=std,
        digits=digits,
        samples=count,
        confidence=confidence,
        quantile=quantile,
        seed=seed,
    )
    notes = [estimate.describe()]
    if random is not None:
        notes.append(
            f"fn drew random numbers ({random}): each run drew what one call of fn draws from "
            "the generator as it was when stochastic_bounds was called (and left it as after "
            "one call); a result computed with other draws (dropout in training) differs from "
            "these runs by more than round-off: compute it from that same generator state "
            "(torch.manual_seed(s) before each), or with the model in eval()"
        )
    if overflows:
        notes.append(
            f"{overflows[0]} made a non-finite value from finite operands in {len(overflows)} of "
            f"the {count} runs (an overflow): no estimate, every element may be anything"
        )
    return Bounds(
        lo=lo,
        hi=hi,
        value=mean,
        dtype=getattr(torch, dtype_name),
        format=fmt,
        mode="stochastic",
        notes=tuple(notes),
        estimate=estimate,
    )
