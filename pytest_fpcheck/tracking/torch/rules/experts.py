"""What a mixture of experts' routing runs (Hugging Face's ``grouped_mm_experts_forward``, Mixtral):
``histc`` counts the tokens sent to each expert, ``_grouped_mm`` multiplies each expert's
tokens by its weights.

* **histc** ``(x, bins, min, max)``: the number of elements of ``x`` in each of ``bins`` equal
  bins of ``[min, max]`` (``x == max`` in the last; elements outside, and NaN, in none), as
  floats of ``x``'s format. A count is an integer, computed exactly (up to 2**p, the format's
  precision; more elements are refused); what is uncertain is which bin an element falls in.
  Its position ``(x - min) bins / (max - min)`` is rounded in the kernel (in ``x``'s own
  format: measured, a bfloat16 1.9921875 lands in the bin of 2.0), and its enclosure may
  straddle an edge, so each bin's count is enclosed by ``[elements certainly in it, elements
  possibly in it]``: an element whose enclosure, widened by the position's rounding (8 units
  of the format's round-off, relative to ``|position| + bins``), lies inside one bin counts for
  both ends of that bin; one that may reach into several bins, or may lie outside ``[min,
  max]`` (an exact comparison, as the kernel's), counts only for the upper ends. On exact
  inputs away from the edges the counts are exact points: the routing of a mixture of experts
  (expert numbers 0..E-1 in E bins of ``[0, E-1]``) is. The counts that feed indexing (the
  experts' offsets, through an integer ``cumsum``) are the program's own values, as every
  integer is.
* **_grouped_mm** ``(a, b, offs)``: a matrix product per group, each bounded as ``mm``
  (:mod:`.linalg`: midpoint-radius products, gamma_k in the accumulation format of the policy),
  in four layouts: ``a`` 2-d and ``b`` 3-d (group g: rows ``offs[g-1]:offs[g]`` of ``a`` times
  ``b[g]``), ``a`` 3-d and ``b`` 2-d (columns ``offs[g-1]:offs[g]`` of ``b`` times ``a[g]``),
  both 2-d (the shared dimension cut by ``offs``, one result matrix per group), both 3-d (one
  product per group, no offsets). Rows (columns) past ``offs[-1]`` are never written by the
  kernel, which leaves whatever the memory held there: the whole line. A bias is refused.
"""

from __future__ import annotations

import numpy as np

from ....interval.core import Interval
from ..context import RuleContext
from ._common import raise_unsupported, rule
from .linalg import _allow_flushed_inputs, _product

__all__: list[str] = []

#: the rounding of an element's position, in units of the format's round-off relative to
#: |position| + bins
_POSITION_ROUNDINGS = 8.0


@rule("aten.histc")
def _histc(ctx: RuleContext) -> Interval:
    x = ctx.arg(0, "self")
    bins = int(ctx.arg(1, "bins", 100))
    low, high = float(ctx.arg(2, "min", 0)), float(ctx.arg(3, "max", 0))
    enclosure = ctx.interval(x)
    if low == high:
        raise_unsupported(ctx, "histc over the data's own range (min == max)")
    if x.numel() > 2**ctx.fmt.precision:
        raise_unsupported(ctx, f"histc of more than 2**{ctx.fmt.precision} elements")
    lo, hi = enclosure.lo.reshape(-1), enclosure.hi.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        scale = bins / (high - low)
        start, end = (lo - low) * scale, (hi - low) * scale
        slack = _POSITION_ROUNDINGS * ctx.fmt.unit_roundoff  # the kernel computes in it
        first = np.floor(start - slack * (np.abs(start) + bins))
        last = np.floor(end + slack * (np.abs(end) + bins))
    # x == max and positions rounded up to ``bins`` count in the last bin
    first = np.clip(np.nan_to_num(first, nan=0.0, neginf=0.0, posinf=bins - 1), 0, bins - 1)
    last = np.clip(np.nan_to_num(last, nan=bins - 1, neginf=0.0, posinf=bins - 1), 0, bins - 1)
    maybe_inside = (hi >= low) & (lo <= high)  # False for NaN ends
    surely_inside = (lo >= low) & (hi <= high)
    possible = np.zeros(bins)
    certain = np.zeros(bins)
    for b in range(bins):
        reach = maybe_inside & (first <= b) & (b <= last)
        possible[b] = np.count_nonzero(reach)
        certain[b] = np.count_nonzero(reach & surely_inside & (first == last))
    if np.array_equal(possible, certain):
        return Interval.point(certain)
    return Interval(certain, possible)


def _cut(offsets: np.ndarray, groups: int, what: str, ctx: RuleContext) -> list[tuple[int, int]]:
    if len(offsets) != groups:
        raise_unsupported(ctx, f"_grouped_mm with {len(offsets)} offsets for {groups} {what}")
    starts = np.concatenate([[0], offsets[:-1]])
    return [(int(s), int(e)) for s, e in zip(starts, offsets, strict=True)]


#: where a group of ``_grouped_mm`` lies in an operand or the result
_Index = tuple[slice | int, ...]


@rule("aten._grouped_mm")
def _grouped_mm(ctx: RuleContext) -> Interval:
    a, b = ctx.arg(0, "self"), ctx.arg(1, "mat2")
    offs, bias = ctx.arg(2, "offs"), ctx.arg(3, "bias")
    if bias is not None:
        raise_unsupported(ctx, "_grouped_mm with a bias")
    left, right = ctx.operand(a), ctx.operand(b)
    shape = tuple(ctx.outputs[0].shape)
    # each group: (its place in the result, in a, in b, the length of its sums)
    groups: list[tuple[_Index, _Index, _Index, int]]
    if a.dim() == 3 and b.dim() == 3:
        groups = [((g,), (g,), (g,), a.shape[2]) for g in range(a.shape[0])]
    else:
        if offs is None:
            raise_unsupported(
                ctx, f"_grouped_mm of {a.dim()}-d and {b.dim()}-d operands without offs"
            )
        offsets = ctx.values(offs).astype(np.int64).reshape(-1)
        if a.dim() == 2 and b.dim() == 3:
            groups = [
                ((slice(s, e),), (slice(s, e),), (g,), a.shape[1])
                for g, (s, e) in enumerate(_cut(offsets, b.shape[0], "experts", ctx))
            ]
        elif a.dim() == 3 and b.dim() == 2:
            groups = [
                ((slice(None), slice(s, e)), (g,), (slice(None), slice(s, e)), a.shape[2])
                for g, (s, e) in enumerate(_cut(offsets, a.shape[0], "groups", ctx))
            ]
        else:  # both 2-d: the shared dimension cut into groups, one result matrix each
            groups = [
                ((g,), (slice(None), slice(s, e)), (slice(s, e),), e - s)
                for g, (s, e) in enumerate(_cut(offsets, shape[0], "groups", ctx))
            ]
    lo, hi = np.full(shape, -np.inf), np.full(shape, np.inf)
    for out_index, a_index, b_index, k in groups:
        if k == 0:  # an empty sum: exactly 0
            lo[out_index], hi[out_index] = 0.0, 0.0
            continue
        product = _product(
            ctx, left.map(lambda v, i=a_index: v[i]), right.map(lambda v, i=b_index: v[i]), k
        )
        lo[out_index], hi[out_index] = product.lo, product.hi

    def grouped(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The same groups' products of float64 arrays (rows never written: 0)."""
        out = np.zeros(shape)
        for out_index, a_index, b_index, _ in groups:
            out[out_index] = x[a_index] @ y[b_index]
        return out

    return _allow_flushed_inputs(ctx, Interval(lo, hi), [(a, b, 1.0, grouped)])
