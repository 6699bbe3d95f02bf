"""What the stochastic-arithmetic calibration measures, shared by its CI slice
(tests/stochastic/test_calibration.py) and the full script (benchmarks/bench_stochastic.py).

* :func:`emulate_accumulation`: the addition-level reference of the accumulation model, one
  stochastic rounding onto the accumulator's grid after every addition, in a sequential or a
  pairwise order, for many independent replicas at once (NumPy, exact in float64 for these
  grids);
* :func:`model_sigma`: the accumulation model's standard deviation for the same terms;
* :func:`emulate_scan` and :func:`model_scan`: the same for the prefix sums and products of
  Triton kernels (``tl.cumsum``, ``tl.cumprod``), every prefix;
* :func:`mode_spread`: the spread the dispatch mode itself gives a ``torch.sum`` or a matrix
  product, over samples;
* :func:`verdict_trial`: one correct or buggy model, one input draw, one seed: the verdict of
  ``classify`` against the float64 model, and the estimated and actual spreads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import pytest_fpcheck as fp
from pytest_fpcheck import formats as F
from pytest_fpcheck.stochastic.accumulation import KAPPA
from pytest_fpcheck.stochastic.run import sample, stochastic_bounds


def _round_stochastic(x: np.ndarray, fmt: F.Format, rng: np.random.Generator) -> np.ndarray:
    down = F.round_to(x, fmt, "down")
    up = F.round_to(x, fmt, "up")
    with np.errstate(invalid="ignore", divide="ignore"):
        probability = np.where(up > down, (x - down) / (up - down), 0.0)
    return np.where(rng.random(x.shape) < probability, up, down)


def emulate_accumulation(
    terms: np.ndarray, fmt: F.Format, order: str, replicas: int, rng: np.random.Generator
) -> np.ndarray:
    """``replicas`` stochastic-arithmetic evaluations of each row sum of ``terms`` (shape
    ``(M, K)``, values on ``fmt``'s grid or not): shape ``(replicas, M)``."""
    t = np.broadcast_to(terms, (replicas, *terms.shape)).astype(np.float64)
    if order == "sequential":
        total = t[..., 0]
        for k in range(1, t.shape[-1]):
            total = _round_stochastic(total + t[..., k], fmt, rng)
        return total
    if order == "pairwise":
        level = t
        while level.shape[-1] > 1:
            if level.shape[-1] % 2:
                level = np.concatenate([level, np.zeros_like(level[..., :1])], axis=-1)
            level = _round_stochastic(level[..., 0::2] + level[..., 1::2], fmt, rng)
        return level[..., 0]
    raise ValueError(order)


def emulate_scan(
    terms: np.ndarray, fmt: F.Format, kind: str, replicas: int, rng: np.random.Generator
) -> np.ndarray:
    """``replicas`` stochastic-arithmetic evaluations of the sequential prefix sums
    (``kind == "cumsum"``) or products (``"cumprod"``) of each row of ``terms`` (shape
    ``(M, K)``, on ``fmt``'s grid): one stochastic rounding per operation, shape
    ``(replicas, M, K)``."""
    t = np.broadcast_to(terms, (replicas, *terms.shape)).astype(np.float64)
    out = np.empty_like(t)
    out[..., 0] = t[..., 0]
    for k in range(1, t.shape[-1]):
        wide = out[..., k - 1] + t[..., k] if kind == "cumsum" else out[..., k - 1] * t[..., k]
        out[..., k] = _round_stochastic(wide, fmt, rng)
    return out


def model_scan(terms: np.ndarray, fmt: F.Format, kind: str, replicas: int, seed: int) -> np.ndarray:
    """``replicas`` randomly rounded scans of the rows of ``terms`` as a Triton kernel's
    ``tl.cumsum``/``tl.cumprod`` is rounded (the model of
    :func:`pytest_fpcheck.stochastic.accumulation.kernel_scan_noise`, through the dispatch
    mode's :meth:`~pytest_fpcheck.stochastic.mode.StochasticMode.kernel_rounded`), shape
    ``(replicas, M, K)``."""
    from pytest_fpcheck.stochastic.mode import StochasticMode
    from pytest_fpcheck.stochastic.rounding import Pools, SampleRandom

    wide = np.cumsum(terms, axis=-1) if kind == "cumsum" else np.cumprod(terms, axis=-1)
    runs = [
        StochasticMode(SampleRandom(Pools.shared(), seed, index)).kernel_rounded(
            f"scan.{kind}", wide, fmt.name, (terms,), terms.ndim - 1
        )
        for index in range(replicas)
    ]
    return np.stack(runs)


def model_sigma(terms: np.ndarray, u: float) -> np.ndarray:
    """The accumulation model's standard deviation of each row sum (exact ``Q``)."""
    k = terms.shape[-1]
    total = terms.sum(-1)
    squares = np.square(terms).sum(-1)
    return np.sqrt(KAPPA * u * u * k * (total**2 / 3 + squares / 6))


def mode_spread(
    fn: Callable[..., torch.Tensor], args: tuple[Any, ...], samples: int, seed: int
) -> np.ndarray:
    """The standard deviation over ``samples`` randomly rounded runs of ``fn(*args)``."""
    runs = [sample(fn, args, {}, seed, index).values[0] for index in range(samples)]
    spread: np.ndarray = np.std(np.stack(runs), axis=0, ddof=1)
    return spread


def verdict_trial(
    run: Callable[[torch.dtype, torch.Tensor], torch.Tensor],
    reference: Callable[[torch.dtype, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    dtype: torch.dtype,
    seed: int,
    samples: int = 16,
    confidence: float = 0.999,
) -> tuple[str, float, float]:
    """(verdict kind, RMS of the estimated standard deviation, RMS of the actual error) of
    ``run(dtype, x)`` against ``reference(torch.float64, x)`` with stochastic bounds of
    ``seed``."""
    with torch.no_grad():
        expected = reference(torch.float64, x)
        out = run(dtype, x)
    bounds = stochastic_bounds(run, dtype, x, samples=samples, confidence=confidence, seed=seed)
    verdict = fp.classify(out, expected, bounds=bounds)
    error = (out.double() - expected).numpy()
    estimated = math.sqrt(float(np.mean(np.square(bounds.estimate.std))))
    return verdict.kind, estimated, math.sqrt(float(np.mean(np.square(error))))
