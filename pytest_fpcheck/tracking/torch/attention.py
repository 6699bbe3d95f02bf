"""Scaled dot-product attention under tracking: the fused CPU kernel computes the values, ATen's
math path the bounds (issue 17: tracking never changes what the program computes).

``F.scaled_dot_product_attention`` on the CPU runs the fused flash kernel
(``aten._scaled_dot_product_flash_attention_for_cpu``: scores and an online softmax over key
blocks in float32, the unnormalised weights rounded to the input format for bfloat16 and
float16 before they multiply the values, the product accumulated in float32 and rounded once
to the output format). Tracking has no rule for that kernel: it runs the kernel itself, so the
program sees exactly the plain run's output and log-sum-exp, and computes the enclosure beside
it by running ATen's math path (``_scaled_dot_product_attention_math``: scores, softmax,
weighted sum) on the same operands through the tracker, each operation bounded by its rule
(RENDER III-A). The math path draws no random numbers without dropout; its results are dropped
once their bounds are copied.

The enclosure, by the operands' format:

* float32 (and float64): the math path's enclosure in that format. It contains the exact
  attention of the operands' enclosures (softmax(q k^T s) v in real arithmetic;
  ``tests/tracking/test_attention_gqa.py`` proves it against mpmath) widened by the a-priori
  bounds of each step (gamma_n for the sums), which dominate the fused kernel's float32
  rounding.
* bfloat16 and float16: the kernel is not the math path in that format (whose steps round
  every intermediate to it); it is the float32 computation with each weight rounded once to the
  input format. The enclosure is the float32 math path's on the widened operands, [lo, hi],
  widened by the kernel's error model and rounded outward onto the format: with weights p_j >= 0,
  l = sum_j p_j >= 1 (the largest weight is exp(0)) and each weight carrying a relative error
  of at most u (the format's unit round-off) + 2^-18 (the vectorised exp and the float32
  rescaling) + 4 (n + 2) 2^-24 (the float32 sums over n keys), plus an absolute error of half
  the format's smallest subnormal where it underflows, the kernel's output differs from the
  exact sum_j p_j v_j / l by at most (that relative error + n * subnormal / 2) times
  max_j |v_j|, per output column.

An element of the kernel's result outside the enclosure is checked on every call, not assumed
away: it gets no bounds (the whole line), with a note, so a verdict on it is inconclusive rather
than wrong (``tests/tracking/test_attention_kernel.py`` checks that none is, in every format,
with causal and explicit masks and grouped-query heads).

Grouped-query attention (``enable_gqa=True``: fewer key/value heads than query heads) reaches
the fused kernel with the key and value heads as they are; query head h reads key/value head
h // (query heads / key-value heads), as ``repeat_interleave`` along the head dimension lays
them out (ATen's math path does exactly that), so the math path repeats them first: copies,
whose bounds are the operands' own.

The CPU kernel refuses dropout (ATen takes the math path then, whose dropout is an operation
of its own, bounded with the mask it drew).
"""

from __future__ import annotations

import numpy as np
import torch

from ...adapters.torch import dtype_format, internal
from ...formats import Format
from ...interval import rounding
from ...interval.bounds import Provenance
from ...interval.core import Interval
from ..core.store import STORE, Record

__all__ = ["flash_attention_for_cpu"]


def flash_attention_for_cpu(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    attn_mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fused kernel's (output, logsumexp), the output bounded beside it by the math path
    (module docstring). Runs inside the tracker's block, re-entered."""
    with internal():
        output, logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(
            query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
        )
    fmt = dtype_format(query.dtype)
    if fmt is None or fmt.precision >= 24:
        reference = _math_path(query, key, value, is_causal, attn_mask, scale)
        enclosure = _enclosure(reference)
    else:
        wide_query, wide_key, wide_value = (t.float() for t in (query, key, value))
        mask = (
            attn_mask.float()
            if attn_mask is not None and attn_mask.is_floating_point()
            else attn_mask
        )
        reference = _math_path(wide_query, wide_key, wide_value, is_causal, mask, scale)
        enclosure = _enclosure(reference)
        enclosure = (*_kernel_model(enclosure[0], enclosure[1], value, fmt), enclosure[2])
    _record_beside(output, *enclosure)
    return output, logsumexp


def _math_path(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    is_causal: bool,
    attn_mask: torch.Tensor | None,
    scale: float | None,
) -> torch.Tensor:
    """ATen's math path on the same operands, each of its operations reaching the tracker."""
    if query.dim() >= 3 and key.dim() >= 3 and query.shape[-3] != key.shape[-3]:
        repeats = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(repeats, dim=-3)
        value = value.repeat_interleave(repeats, dim=-3)
    # decompose(): run the composite kernel, whose operations then reach the tracker one by one
    output: torch.Tensor = torch.ops.aten._scaled_dot_product_attention_math.default.decompose(
        query, key, value, attn_mask, 0.0, is_causal, scale=scale
    )[0]
    return output


def _enclosure(reference: torch.Tensor) -> tuple[np.ndarray, np.ndarray, Record | None]:
    """(lo, hi) of the math path's result, as fresh float64 arrays, and its record."""
    record = STORE.record_of(reference)
    enclosure = STORE.read(reference)
    if record is None or enclosure is None:  # exact throughout: the math path's values
        with internal(), torch.no_grad():
            computed = reference.detach().to(torch.float64).numpy()
        return computed.copy(), computed.copy(), None
    lo = np.array(enclosure.lo, dtype=np.float64)
    return lo, np.array(enclosure.hi, dtype=np.float64), record


def _kernel_model(
    lo: np.ndarray, hi: np.ndarray, value: torch.Tensor, fmt: Format
) -> tuple[np.ndarray, np.ndarray]:
    """The float32 enclosure widened by the fused kernel's error in a half format (module
    docstring), rounded outward onto ``fmt``."""
    values = STORE.read(value)
    if values is None:
        with internal(), torch.no_grad():
            magnitude = value.detach().to(torch.float64).abs().numpy()
    else:
        magnitude = np.maximum(np.abs(values.lo), np.abs(values.hi))
    keys = value.shape[-2]
    largest = magnitude.max(axis=-2, keepdims=True)  # over the keys, per column
    if value.dim() >= 3 and lo.shape[-3] != value.shape[-3]:  # grouped-query heads
        largest = np.repeat(largest, lo.shape[-3] // value.shape[-3], axis=-3)
    # a weight below the format's normal range is rounded with an absolute error of at most
    # half its smallest subnormal: with l >= 1 (the largest weight is exp(0)), n of them move
    # the output by at most n * subnormal / 2 * max|v|
    relative = (
        fmt.unit_roundoff + 2.0**-18 + 4 * (keys + 2) * 2.0**-24 + keys * fmt.smallest_subnormal / 2
    )
    with np.errstate(over="ignore", invalid="ignore"):
        radius = rounding.up(relative * 2 * largest)  # 2x: the relative error's own rounding
        return (
            rounding.down_to(rounding.down(lo - radius), fmt),
            rounding.up_to(rounding.up(hi + radius), fmt),
        )


def _record_beside(
    output: torch.Tensor, lo: np.ndarray, hi: np.ndarray, record: Record | None
) -> None:
    """Record (lo, hi) beside the kernel's ``output``; an element of ``output`` outside it gets
    the whole line, with a note."""
    with internal(), torch.no_grad():
        actual = output.detach().to(torch.float64).numpy()
    with np.errstate(invalid="ignore"):
        outside = ~((lo <= actual) & (actual <= hi))
    notes = (
        *(record.notes if record is not None else ()),
        "value computed by the fused CPU attention kernel; bounds by ATen's math path",
    )
    if outside.any():
        lo[outside], hi[outside] = -np.inf, np.inf
        notes = (
            *notes,
            f"{int(outside.sum())} of {outside.size} elements of the fused attention kernel's "
            "result lie outside the math path's enclosure: they have no bounds",
        )
    STORE.write(
        output,
        Interval(lo, hi),
        provenance=record.provenance if record is not None else Provenance(),
        mode=record.mode if record is not None else "rigorous",
        notes=notes,
        owned=True,
    )
