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
  widened by the kernel's error model and rounded to nearest onto the format
  (:func:`.rounding.nearest`; the kernel converts its float32 result with round-to-nearest-even).

  The model, per output element (row i, column e). Let a_j = exp(s_j) / sum_k exp(s_k) be the
  exact weights of the kernel's operands and W = sum_j a_j |v_j|. The kernel's float32 score
  differs from s_j by at most tau = (d + 4) 2^-24 / (1 - (d + 4) 2^-24) (scale max_j
  sum_e |q_ie| |k_je| + M) (the float32 dot product over d terms, the scale's conversion, the
  product, the mask's addition; M the largest finite |mask| of the row), max_j sum_e |q_ie|
  |k_je| taken at its upper bound sum_e |q_ie| max_j |k_je|. Its weight
  exp(s_j - m_k), m_k the running maximum of its block of keys, then carries a relative error of
  at most e^lambda - 1 against exp(s_j - m_k) with lambda = tau + 104 2^-24 (the rounded
  shift, for weights float32 does not underflow) + 2^-18 (the vectorised exp) + b (2 (S + 1)
  2^-24 + 4 2^-24) (b blocks, each rescaling the running sum and output by exp(m_old - m_new):
  the shift, ``std::exp``, two products; S the scores' spread, scale max sum |q||k| + M + tau).
  The normalisation cancels exp(-m), so the normalised weight w_j = r_j / l of the kernel, r_j
  the weight rounded to the format (|r_j - p_j| <= u p_j, or half the smallest subnormal) and
  l the float32 sum of the unrounded weights (relative error at most sums = gamma_{n+b+4}),
  satisfies |w_j - a_j| <= (e^{2 lambda} (1 + u) (1 + sums)^3 - 1) a_j. Summing against v
  (float32 products and sums over the n keys: gamma again, relative to sum_j w_j |v_j|), the
  kernel's float32 result differs from the exact sum_j a_j v_j by at most

      rho W + n (subnormal / 2 + 2^-124) 2 e^lambda max_j |v_j|,
      rho = expm1(2 lambda) (1 + u) (1 + sums)^3 + u (1 + sums)^3 + 3 sums + 4 2^-24,

  the second term the weights below the format's (and float32's) normal range, whose rounding
  is absolute (l >= e^-lambda: the largest weight is exp(0)). W is bounded above by the same
  math path run on |v| beside v (as extra columns: attention treats each column alone), whose
  enclosure holds W for every operand in the operands' enclosures. This charges the weights'
  rounding against the weighted mean of |v| that it actually scales, not max_j |v_j| (the
  model before charged 2 (u + ...) max_j |v_j|: a median radius 48 times the median actual error
  at the tightness benchmark's point inputs, against 8 to 9 now). Masked keys: a finite mask
  entry below -2^12, in a row with an entry of at most 2^12 in size and scores spreading less
  than 2^10, is left out of M (its weight, exact and computed, lies below exp(-2^11): under
  float32's range). The kernel's blocks are taken at 32 keys (ATen's kernel takes 512): more
  rescalings than it does. The vectorised exp's 2^-18 is the model's one assumption about the
  library (``exp_u20``), as before. ``tests/tracking/test_attention_model.py`` checks the model
  on random shapes (rows of up to 700 keys, large-magnitude scores, finite and large negative
  masks, subnormal and huge values) against the kernel and mpmath.

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

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...adapters.torch import dtype_format, internal
from ...errors import UnsupportedOperation
from ...formats import FORMATS, Format
from ...interval import rounding
from ...interval.bounds import Provenance
from ...interval.core import Interval
from ..core.policy import dot_factor
from ..core.store import STORE, Record, float64_values

__all__ = ["flash_attention_for_cpu"]

_FLOAT32 = FORMATS["float32"]
#: the fewest keys the kernel takes per block (ATen's CPU kernel takes 512; fewer is conservative:
#: each block adds a rescaling of the running sums)
_KV_SPLIT = 32
#: a finite mask entry below -_BLOCKING blocks its key (:func:`_mask_magnitude`)
_BLOCKING = 2.0**12


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
    _bound_beside(output, query, key, value, is_causal, attn_mask, scale, "CPU")
    return output, logsumexp


def _refuse_dropout(name: str, dropout_p: float) -> None:
    if dropout_p:
        raise UnsupportedOperation(
            f"aten.{name}", how=f"attention with dropout (dropout_p={dropout_p}) has no rule yet"
        )


def cuda_attention(name: str) -> Callable[..., tuple[Any, ...]]:
    """The substitute for CUDA's fused attention kernel ``aten.<name>`` (flash,
    memory-efficient or cuDNN): the kernel's outputs, its output bounded beside it by the math
    path with the tensor-core model (module docstring). The arguments are read by the names of
    the kernel's schema (``query``, ``key``, ``value``, ``attn_bias``: an additive mask,
    ``dropout_p``, ``is_causal``, ``scale``); dropout is refused."""
    kernel = getattr(torch.ops.aten, name).default
    names = [argument.name for argument in kernel._schema.arguments]

    def substitute(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        bound = {**dict(zip(names, args, strict=False)), **kwargs}
        _refuse_dropout(name, bound.get("dropout_p", 0.0))
        with internal():
            outputs = kernel(*args, **kwargs)
        _bound_beside(
            outputs[0],
            bound["query"],
            bound["key"],
            bound["value"],
            bool(bound.get("is_causal", False)),
            bound.get("attn_bias"),
            bound.get("scale"),
            "CUDA",
        )
        return tuple(outputs)

    return substitute


def _bound_beside(
    output: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    is_causal: bool,
    attn_mask: torch.Tensor | None,
    scale: float | None,
    device: str,
) -> None:
    """Bound a fused attention kernel's ``output`` beside it by the math path: in its own
    format for float32 and wider, else the float32 path widened by the kernel's error model
    (``device`` "CUDA": tensor cores' products and sums, module docstring)."""
    fmt = dtype_format(query.dtype)
    if fmt is None or fmt.precision >= 24:
        reference = _math_path(query, key, value, is_causal, attn_mask, scale)
        _record_beside(output, *_enclosure(reference), device)
        return
    wide_query, wide_key, wide_value = (t.float() for t in (query, key, value))
    mask = (
        attn_mask.float() if attn_mask is not None and attn_mask.is_floating_point() else attn_mask
    )
    # beside v's columns, |v|'s (each element's largest magnitude, rounded up onto float32):
    # the upper end of their attention bounds sum_j a_j |v_j| with the exact weights a_j of
    # the operands; attention treats each column alone, so one math path serves both
    with internal(), torch.no_grad():
        size = torch.from_numpy(rounding.up_to(_magnitude(value), _FLOAT32))
        size = size.to(value.device, torch.float32)
    both = torch.cat([wide_value, size], dim=-1)
    reference = _math_path(wide_query, wide_key, both, is_causal, mask, scale)
    lo, hi, record = _enclosure(reference)
    columns = value.shape[-1]
    if record is not None and record.mode == "a_posteriori":
        # the math path encloses the exact result; the kernel's value is joined to it
        _record_beside(output, lo[..., :columns], hi[..., :columns], record, device)
        return
    model = _kernel_model(
        lo[..., :columns],
        hi[..., :columns],
        hi[..., columns:],
        (query, key, value),
        mask,
        scale,
        fmt,
        tensor_cores=device == "CUDA",
    )
    _record_beside(output, *model, record, device)


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
        computed = float64_values(reference)
        return computed.copy(), computed.copy(), None
    lo = np.array(enclosure.lo, dtype=np.float64)
    return lo, np.array(enclosure.hi, dtype=np.float64), record


def _kernel_model(
    lo: np.ndarray,
    hi: np.ndarray,
    weighted: np.ndarray,
    operands: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    attn_mask: torch.Tensor | None,
    scale: float | None,
    fmt: Format,
    *,
    tensor_cores: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The float32 enclosure [``lo``, ``hi``] widened by the fused kernel's error in a half
    format, rho * ``weighted`` + the underflow term (module docstring), then rounded to nearest
    onto ``fmt`` (:func:`.rounding.nearest`: the kernel converts its float32 result with
    round-to-nearest-even). With ``tensor_cores`` the scores' dot products and the weighted
    sum are those of matrix units (:func:`.policy.dot_factor`, FTTN's truncating fused adders)
    rather than float32 FMA chains."""
    query, key, value = operands
    magnitude = _magnitude(value)
    keys, depth = value.shape[-2], query.shape[-1]
    largest = magnitude.max(axis=-2, keepdims=True)  # over the keys, per column
    if value.dim() >= 3 and lo.shape[-3] != value.shape[-3]:  # grouped-query heads
        largest = np.repeat(largest, lo.shape[-3] // value.shape[-3], axis=-3)
    # tau: how far a float32 score of the kernel may lie from the exact one, per query row
    query_size, key_size = _magnitude(query), _magnitude(key)
    if key.dim() >= 3 and query.shape[-3] != key.shape[-3]:
        key_size = np.repeat(key_size, query.shape[-3] // key.shape[-3], axis=-3)
    factor = abs(scale) if scale is not None else depth**-0.5
    with np.errstate(over="ignore", invalid="ignore"):
        # max_j sum_e |q_ie| |k_je| <= sum_e |q_ie| max_j |k_je|: a product of the sizes'
        # shape would cost as much as the attention's own
        largest_key = key_size.max(axis=-2, keepdims=True)
        spread = rounding.up(
            (query_size * largest_key).sum(axis=-1, keepdims=True) * (factor * (1 + 2.0**-20))
        )
        spread = spread + _mask_magnitude(attn_mask, spread)
        unit = 2.0**-24
        dot = (depth + 4) * unit / (1 - (depth + 4) * unit)
        if tensor_cores:
            dot = max(dot, _fused_factor(depth + 4))
        tau = rounding.up(spread * dot)
        blocks = -(-keys // _KV_SPLIT)
        # lambda: the log of each weight's relative error before the format's rounding
        lam = rounding.up(
            tau + 104 * unit + 2.0**-18 + blocks * (2 * (spread + tau + 1) * unit + 4 * unit)
        )
        sums = (keys + blocks + 4) * unit / (1 - (keys + blocks + 4) * unit)
        if tensor_cores:
            sums = max(sums, _fused_factor(keys + blocks + 4))
        rho = rounding.up(
            np.expm1(2 * lam) * (1 + fmt.unit_roundoff) * (1 + sums) ** 3
            + fmt.unit_roundoff * (1 + sums) ** 3
            + 3 * sums
            + 4 * unit
        )
        absolute = rounding.up(
            2 * np.exp(lam) * keys * (fmt.smallest_subnormal / 2 + 2.0**-124) * largest
        )
        radius = rounding.up(rounding.up(rho * np.maximum(weighted, 0.0)) + absolute)
        return rounding.nearest(rounding.down(lo - radius), rounding.up(hi + radius), fmt)


def _fused_factor(terms: int) -> float:
    """The relative error factor of a float32 accumulation of ``terms`` exact products on
    matrix units of unknown block width (:func:`.policy.dot_factor`)."""
    return dot_factor(terms, inputs="fused", accumulator_bits=24, products_exact=True)


def _magnitude(t: torch.Tensor) -> np.ndarray:
    """max |x| over each element's enclosure (its value where tracking has none), in float64."""
    enclosure = STORE.read(t)
    if enclosure is None:
        computed: np.ndarray = np.abs(float64_values(t))
        return computed
    magnitude: np.ndarray = np.maximum(np.abs(enclosure.lo), np.abs(enclosure.hi))
    return magnitude


def _mask_magnitude(attn_mask: torch.Tensor | None, spread: np.ndarray) -> np.ndarray | float:
    """The largest |mask| an additive float mask adds to a finite score of a row, per query row
    (0 for none or a boolean one). A row whose finite entries below -2**12 are the only ones
    past +-2**12, next to an entry of at most 2**12, and whose scores spread less than 2**10
    (``spread``) leaves them out: their weights, exact and computed, lie below exp(-2**11), far
    under float32's range, whatever the rounding of their scores (the underflow term holds
    them). Other rows count every finite entry (a row masked by large finite numbers only)."""
    if attn_mask is None or not attn_mask.is_floating_point():
        return 0.0
    mask = float64_values(attn_mask)
    finite = np.isfinite(mask)
    size = np.where(finite, np.abs(mask), 0.0)
    small = finite & (size <= _BLOCKING)
    every = size.max(axis=-1, keepdims=True)
    near = np.where(small, size, 0.0).max(axis=-1, keepdims=True)
    separable = (
        small.any(axis=-1, keepdims=True)
        & ~(finite & (mask > _BLOCKING)).any(axis=-1, keepdims=True)
        & (spread + near < 2.0**10)
    )
    counted: np.ndarray = np.where(separable, near, every)
    return counted


def _record_beside(
    output: torch.Tensor, lo: np.ndarray, hi: np.ndarray, record: Record | None, device: str
) -> None:
    """Record (lo, hi) beside the kernel's ``output``; an element of ``output`` outside it gets
    the whole line, with a note, unless tracking is a posteriori (:mod:`.mode`): then the
    kernel's values are joined to the math path's enclosure of the exact result."""
    actual = float64_values(output)
    if record is not None and record.mode == "a_posteriori":
        lo, hi = np.minimum(lo, actual), np.maximum(hi, actual)  # NaN: outside, below
    with np.errstate(invalid="ignore"):
        outside = ~((lo <= actual) & (actual <= hi))
    notes = (
        *(record.notes if record is not None else ()),
        f"value computed by the fused {device} attention kernel; bounds by ATen's math path",
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
