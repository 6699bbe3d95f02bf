"""Batch norm in training mode on a CPU input, contiguous or channels-last, as ATen's kernel
computes it (``batch_norm_cpu_collect_stats_contiguous_impl``, ``..._channels_last_impl`` and
``batch_norm_cpu_update_stats_template``), with the input's width propagated by a mean-value
form. Called by the batch-norm rule (:mod:`.normalisation`); other layouts are refused and
bounded through the decomposition (:mod:`..decompose`).

**The statistics.** For each channel, over its n = N H W elements, the kernel sums the inputs
(in double for float32 and float64 inputs, in float32 for float16 and bfloat16 ones; ATen's
channels-last kernel, which also takes every contiguous input whose channels are adjacent, a
(N, C) one or one of a single pixel, first sums each thread's rows in the input's own format,
float32 for float16 and bfloat16, then those partial sums in double), rounds
``sum / n`` to the saved statistics' format (``mean``), sums ``(x - mean)^2``, each term computed
in the input's format (float32 for float16 and bfloat16), the same way, stores the sum and
computes ``invstd = 1 / sqrt(var_sum / n + eps)`` in the accumulation format before storing it.
With u the unit round-off of each, the sums err by gamma_n of the sum of magnitudes, each
squared deviation by gamma_3(u), each stored value by u: for float32 far below the order-free
gamma_{2n+2}(u) of the layer-norm rule (:func:`~pytest_fpcheck.interval.kernels.moments_rows`),
which holds for any algorithm. The rule encloses the mean over the input's box (its exact row
sums widened by both sums' errors, rounded outward onto the saved format), the sum of squared
deviations over the box and the mean's enclosure (each deviation interval's least and greatest
square) widened by rho = gamma_3(u) + gamma_{n+2}(accumulation) + 2 u(saved), and invstd from
it; the exact mean and invstd are inside too. The kernel's own values are checked against these
enclosures (a safety net under the model: a miss is refused, and the decomposition tried).

Where a deviation, its square or the stored sum may overflow the format, the sum is infinite
and invstd 0: its enclosure then reaches 0.

**The output** ``x * (invstd w) + (b - mean invstd w)`` is enclosed twice, and the rule keeps the
intersection:

* by interval evaluation of ``(x - mean) invstd w + b`` over the boxes in float64, widened by
  the allowance of either evaluation order ATen uses, ``6 u (|x| + |mean|) |invstd w| + 2 u |b|``
  plus 8 smallest subnormals times ``1 + |x| + |mean| + |w|`` for underflow (the layer-norm
  rule's allowance);
* by a mean-value form around the input's computed values x^ (RENDER section III-B-1 keeps the
  exact range; this encloses it). The normalisation y = (x - m) r, r = (v + eps)^(-1/2), has
  the derivative dy_i / dx_j = r (delta_ij - 1/n - y_i y_j / n); over the box r <= r_hi and
  |y| <= Y (the interval bound, and sqrt(n - 1) always: the normalised values have mean 0 and
  mean square at most 1), so with R_j the box's radius around x^_j,
  |y_i(x) - y_i(x^)| <= r_hi (R_i + sum_j R_j / n + Y_i sum_j R_j Y_j / n). y(x^) itself is
  enclosed in float64 arithmetic (every step outward). The kernel's value at the actual input
  differs from the exact one by its statistics' rounding, |mean - m| r + |y| |invstd / r - 1|
  (bounded from the errors above: |var_f - v| <= dm^2 + rho (v + dm^2)), and by the affine
  evaluation's allowance (in float32 for float16 and bfloat16, then rounded outward onto the
  input's format).

Interval evaluation multiplies the input's width by about 14 / sigma in a normalisation (x and
its mean and spread taken as independent); the mean-value form by about (2 + |y|) / sigma.

**The running statistics**, which the kernel updates in place although the operation's schema
does not say so (``adapters.torch.undeclared_writes``): per channel
``momentum * mean + (1 - momentum) * running_mean`` and
``momentum * var_sum / (n - 1) + (1 - momentum) * running_var``, from the same stored mean and
sum of squares as above. ATen evaluates them in the statistics' format, in float32 or in
double (the momentum a double, or rounded onto the statistics' format first), with or without
a fused multiply-add; every such evaluation lies in the interval evaluation from the hull of
the momentum and its nearest roundings onto float32 and the statistics' format whose every
step (``1 - momentum``, each product, the quotient, the sum) is rounded outward onto the
statistics' format (float64 statistics: a double momentum only), the coarsest of them (a rounding onto a finer grid lies
between the coarser grid's neighbours). The stored sum of squares of a single element is 0, and
``0 / 0`` is NaN: the running variance is then the whole line.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ....adapters.torch import batch_norm_channels_last, dtype_format, float64_values
from ....formats import FORMATS, Format
from ....interval import elementwise as ew
from ....interval.bounds import contains
from ....interval.core import Interval, gamma
from ....interval.kernels import moments_rows
from ....interval.rounding import down, down_to, up, up_to
from ..context import RuleContext
from ._common import F64, raise_unsupported

__all__ = ["batch_norm_training"]

_D = 2.0**-53
_F32 = FORMATS["float32"]


class _Kernel:
    """The formats ATen's CPU kernel computes a training batch norm in (module docstring):
    ``accumulate``, the unit round-off of its sums (double for float32 and float64 inputs,
    float32 for float16 and bfloat16 ones); ``deviation``, the format of each (x - mean)^2;
    ``stored``, the format of the saved mean, the sum of squares and invstd (the saved
    statistics' dtype); ``opmath``, the format of the affine step; ``rho``, the relative error
    of the stored sum of squares."""

    def __init__(self, ctx: RuleContext, n: int, channels_last: bool) -> None:
        fmt = ctx.fmt
        reduced = fmt.name in ("float16", "bfloat16")
        stored = dtype_format(ctx.outputs[1].dtype)
        if stored is None or fmt.name not in ("float16", "bfloat16", "float32", "float64"):
            raise_unsupported(ctx, f"batch_norm in training mode on {fmt.name}")
        assert stored is not None
        self.output: Format = fmt
        self.stored: Format = stored
        self.opmath: Format = FORMATS["float32"] if reduced else fmt
        self.deviation: Format = self.opmath
        # (the channels-last kernel's partial sums in the input's format: float32's unit
        # round-off for float32 inputs too)
        single = reduced or (channels_last and fmt.name == "float32")
        self.accumulate = FORMATS["float32"].unit_roundoff if single else _D
        self.rho = (
            gamma(3, self.deviation.unit_roundoff)
            + gamma(n + 2, self.accumulate)
            + 2 * stored.unit_roundoff
        )


def _rows(v: np.ndarray, channels: int) -> np.ndarray:
    """(N, C, ...) as (C, N * ...): each channel's elements, one row."""
    return np.ascontiguousarray(np.moveaxis(v, 1, 0).reshape(channels, -1))


def _per_channel(ctx: RuleContext, t: Any, channels: int) -> Interval | None:
    if t is None:
        return None
    return ctx.operand(t, ctx.compute).map(lambda v: np.broadcast_to(v, (channels,)).reshape(-1, 1))


def batch_norm_training(
    ctx: RuleContext,
    x: torch.Tensor,
    weight: Any,
    bias: Any,
    running: tuple[Any, Any],
    momentum: float,
    eps: float,
) -> tuple[Interval | None, ...]:
    """(output, save_mean, save_invstd, running_mean, running_var) of ``native_batch_norm`` in
    training mode (module docstring), the last two None where the call has none; refuses what
    it does not model."""
    fmt = ctx.fmt
    if x.device.type != "cpu" or len(ctx.outputs) < 3:
        raise_unsupported(ctx, f"batch_norm in training mode on {x.device.type}")
    if x.dim() < 2 or x.numel() == 0:
        raise_unsupported(ctx, f"batch_norm in training mode on a {x.dim()}-d input")
    channels_last = batch_norm_channels_last(x)
    if not (x.is_contiguous() or channels_last):
        raise_unsupported(ctx, "batch_norm in training mode on a non-contiguous input")
    channels = x.shape[1]
    n = x.numel() // channels
    if n >= 2**20:
        raise_unsupported(ctx, f"batch_norm in training mode over {n} elements per channel")
    kernel = _Kernel(ctx, n, channels_last)
    box = ctx.interval(x)
    lo, hi = _rows(box.lo, channels), _rows(box.hi, channels)
    centre = _rows(ctx.values(x), channels)
    stored = kernel.stored
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.maximum(np.abs(lo), np.abs(hi))
        total = up(magnitude.sum(axis=1) * (1 + (n + 2) * 2.0**-52))
        # both sums (the kernel's, and this float64 one of the ends) err by gamma_n * total
        error = up((gamma(n + 1, kernel.accumulate) + gamma(n + 1, _D)) * total)
        mean_lo = down(down(down(lo.sum(axis=1) * 1.0) - error) / n)
        mean_hi = up(up(up(hi.sum(axis=1) * 1.0) + error) / n)
        mean = Interval(down_to(mean_lo, stored), up_to(mean_hi, stored)).map(
            lambda v: v.reshape(-1, 1)
        )
        low_dev, high_dev = lo - mean.hi, hi - mean.lo
        straddles = (low_dev < 0) & (high_dev > 0)
        small = np.where(straddles, 0.0, np.minimum(np.abs(low_dev), np.abs(high_dev)))
        large = np.maximum(np.abs(low_dev), np.abs(high_dev))
        rho = kernel.rho
        slack = (n + 2) * 2.0**-52
        tiny = n * kernel.deviation.smallest_subnormal
        q_lo = np.maximum(down((small * small).sum(axis=1) * (1 - slack) * (1 - rho) - tiny), 0.0)
        q_hi = up((large * large).sum(axis=1) * (1 + slack) * (1 + rho) + tiny)
        v_lo, v_hi = down(q_lo / n), up(q_hi / n)
        spread = 8 * kernel.accumulate
        r_lo = down_to(down(1.0 / np.sqrt(v_hi + eps) * (1 - spread)), stored)
        r_hi = up_to(up(1.0 / np.sqrt(v_lo + eps) * (1 + spread)), stored)
        # a deviation or its square, or the stored sum, may overflow: the sum is then
        # infinite and invstd 0
        overflow = (large.max(axis=1) >= math.sqrt(kernel.deviation.max_finite) / 2) | (
            q_hi >= stored.max_finite / 2
        )
        r_lo = np.where(overflow, 0.0, r_lo)
    if not (np.isfinite(mean.lo).all() and np.isfinite(mean.hi).all()):
        raise_unsupported(ctx, "batch_norm in training mode on inputs that may overflow")
    rstd = Interval(r_lo.reshape(-1, 1), r_hi.reshape(-1, 1))
    w, b = _per_channel(ctx, weight, channels), _per_channel(ctx, bias, channels)
    rows = Interval(lo, hi)
    mean_error = up(
        (stored.unit_roundoff + 4 * kernel.accumulate) * mean.magnitude() + error.reshape(-1, 1) / n
    )
    allowance = _affine_allowance(kernel.opmath, rows, mean, rstd, w, b)
    naive = _affine(rows, mean, rstd, w, b).widen(allowance).to_format(fmt)
    tight = _mean_value_form(kernel, rows, centre, mean, rstd, w, b, mean_error, allowance, eps)
    if tight is not None and not overflow.any():  # the form holds where invstd is not 0
        naive = Interval(np.maximum(naive.lo, tight.lo), np.minimum(naive.hi, tight.hi))
    shape = x.shape
    moved = (shape[1], shape[0], *shape[2:])

    def back(v: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(v.reshape(moved), 0, 1))

    flat_mean = mean.map(lambda v: v.reshape(-1))
    results = (naive.map(back), flat_mean, rstd.map(lambda v: v.reshape(-1)))
    # where the stored sum of squares may have overflowed, it may be infinite
    var_sum = Interval(q_lo, np.where(overflow, np.inf, q_hi))
    updated = _running_statistics(ctx, flat_mean, var_sum, n, running, momentum)
    # (the running statistics as the kernel left them: ctx.values gives them as they were)
    written = [*ctx.outputs, *(t for t in running if t is not None)]
    enclosures = [*results, *(e for e in updated if e is not None)]
    for value, enclosure in zip(written, enclosures, strict=True):
        # a safety net under the model of the kernel (tested against mpmath): a value outside
        # is refused, and the decomposition tried (joined to the enclosure when observed)
        computed = float64_values(value)
        if not ctx.observed and not contains(enclosure.lo, enclosure.hi, computed).all():
            raise_unsupported(ctx, "batch_norm in training mode where the kernel's model misses")
    return (*results, *updated)


def _running_statistics(
    ctx: RuleContext,
    mean: Interval,
    var_sum: Interval,
    n: int,
    running: tuple[Any, Any],
    momentum: float,
) -> tuple[Interval | None, Interval | None]:
    """The running mean and variance after the update (module docstring), None for an absent
    one; ``mean`` and ``var_sum``: the stored statistics' enclosures, per channel."""
    updated: list[Interval | None] = []
    for statistic, batch in zip(running, (mean, var_sum), strict=True):
        if statistic is None:
            updated.append(None)
            continue
        fmt = dtype_format(statistic.dtype)
        if fmt is None:
            raise_unsupported(ctx, f"batch_norm's running statistics in {statistic.dtype}")
        assert fmt is not None
        if batch is var_sum:
            if n < 2:  # 0 / 0
                updated.append(Interval.whole(tuple(statistic.shape)))
                continue
            batch = ew.div(batch, Interval.point(np.asarray(float(n - 1))), fmt)
        # the momentum as a double, or rounded to nearest onto the format or (below double)
        # float32
        given = Interval.point(np.asarray(float(momentum)))
        rounded = [given.to_nearest(f) for f in (fmt, _F32 if fmt.precision < 53 else fmt)]
        rate = Interval(
            np.minimum(rounded[0].lo, rounded[1].lo), np.maximum(rounded[0].hi, rounded[1].hi)
        )
        keep = ew.sub(Interval.point(np.asarray(1.0)), rate, fmt)
        old = ctx.interval(statistic).map(lambda v: v.reshape(-1))
        total = ew.add(ew.mul(rate, batch, fmt), ew.mul(keep, old, fmt), fmt)
        shape = tuple(statistic.shape)
        updated.append(Interval(total.lo.reshape(shape), total.hi.reshape(shape)))
    return updated[0], updated[1]


def _affine(
    y: Interval, mean: Interval, rstd: Interval, w: Interval | None, b: Interval | None
) -> Interval:
    """(y - mean) rstd w + b over the boxes, in float64, every step outward."""
    out = ew.mul(ew.sub(y, mean, F64), rstd, F64)
    if w is not None:
        out = ew.mul(out, w, F64)
    return out if b is None else ew.add(out, b, F64)


def _affine_allowance(
    opmath: Format,
    rows: Interval,
    mean: Interval,
    rstd: Interval,
    w: Interval | None,
    b: Interval | None,
) -> np.ndarray:
    """What ATen's evaluation of the affine normalisation in the format adds (module
    docstring), in its opmath format."""
    u = opmath.unit_roundoff
    w_mag = w.magnitude() if w is not None else 1.0
    b_mag = b.magnitude() if b is not None else 0.0
    x_mag, m_mag = rows.magnitude(), mean.magnitude()
    with np.errstate(over="ignore", invalid="ignore"):
        allowance = 6 * u * (x_mag + m_mag) * rstd.hi * w_mag + 2 * u * b_mag
        allowance = allowance + 8 * opmath.smallest_subnormal * (1 + x_mag + m_mag + w_mag)
        result: np.ndarray = up(allowance * (1 + 2.0**-40))
    return np.where(np.isnan(result), np.inf, result)


def _mean_value_form(
    kernel: _Kernel,
    rows: Interval,
    centre: np.ndarray,
    mean: Interval,
    rstd: Interval,
    w: Interval | None,
    b: Interval | None,
    mean_error: np.ndarray,
    allowance: np.ndarray,
    eps: float,
) -> Interval | None:
    """The mean-value enclosure of the output (module docstring), rounded outward onto the
    output's format; None where the statistics' rounding is too large for it to be worth it."""
    n = rows.shape[1]
    if eps <= 0:
        return None  # the statistics' rounding is then unbounded relative to the variance
    # y(x^) exactly: float64 statistics of the point, every step outward
    m_lo, m_hi, var_lo, var_hi = moments_rows(centre, centre, 0.0, F64)
    centre_mean = Interval(m_lo.reshape(-1, 1), m_hi.reshape(-1, 1))
    shifted = ew.add(Interval(var_lo, var_hi), Interval.point(np.asarray(eps)), F64)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre_rstd = Interval(
            down(1.0 / up(np.sqrt(shifted.hi))), up(1.0 / down(np.sqrt(shifted.lo)))
        )
    centre_rstd = centre_rstd.map(lambda v: v.reshape(-1, 1))
    y_hat = ew.mul(ew.sub(Interval.point(centre), centre_mean, F64), centre_rstd, F64)
    # |y| over the box: the interval bound, and sqrt(n - 1) for the exact function
    y_box = ew.mul(ew.sub(rows, mean, F64), rstd, F64).magnitude()
    bound = np.minimum(y_box, math.sqrt(max(n - 1, 0)) * (1 + 2.0**-40))
    with np.errstate(over="ignore", invalid="ignore"):
        radius = np.maximum(centre - rows.lo, rows.hi - centre)
        spread = (
            radius.sum(axis=1, keepdims=True) + bound * (radius * bound).sum(axis=1, keepdims=True)
        ) / n
        delta_y = up((radius + spread) * rstd.hi * (1 + 2.0**-40))
        # the kernel's statistics at the actual input: |mean - m| and invstd / r - 1
        rho = kernel.rho
        rounding = kernel.stored.unit_roundoff + 8 * kernel.accumulate  # invstd's
        kappa = up((rho + (1 + rho) * mean_error * mean_error / eps + rounding) * (1 + 2.0**-30))
    if not np.all(kappa < 0.25):
        return None
    w_mag = w.magnitude() if w is not None else 1.0
    statistics = mean_error * rstd.hi + bound * kappa
    with np.errstate(over="ignore", invalid="ignore"):
        widening = up(((delta_y + statistics) * w_mag + allowance) * (1 + 2.0**-40))
    out = y_hat
    if w is not None:
        out = ew.mul(out, w, F64)
    if b is not None:
        out = ew.add(out, b, F64)
    return ew.everything_where_nan(
        out.widen(np.where(np.isnan(widening), np.inf, widening))
    ).to_format(kernel.output)
