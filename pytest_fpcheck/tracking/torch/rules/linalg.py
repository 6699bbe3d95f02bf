"""Matrix products and convolutions (mm, bmm, matmul, mv, dot, addmm, baddbmm, addmv, addbmm,
convolution): midpoint-radius products with gamma_k in the accumulation format the policy gives
(:mod:`pytest_fpcheck.tracking.core.policy`: float32 accumulation of half-precision inputs,
TF32, tensor cores' fused adders per FTTN), or the fused-summation model passed as
``track(matmul_model=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ....adapters.torch import dtype_format, float64_values, internal
from ....formats import Format
from ....interval import elementwise as ew
from ....interval.bounds import contains
from ....interval.core import Interval, gamma
from ....interval.kernels import any_subnormal, float32_magnitudes
from ....interval.linalg import matmul
from ....interval.rounding import up
from ...core.policy import (
    MatmulPrecision,
    accumulating_in_format,
    convolution_precision,
    dot_factor,
    matmul_precision,
)
from ..context import RuleContext
from ._common import (
    F64,
    Array,
    as_tensor,
    raise_unsupported,
    rule,
)

__all__: list[str] = []


def _modelled(ctx: RuleContext, k: int, has_c: bool) -> tuple[float, float] | None:
    """(relative factor, absolute term) of a matmul under ``track(matmul_model=...)``'s model
    for its input format, or None without one."""
    bound = ctx.sums.matmul_bound(ctx.fmt, k, has_c=has_c)
    if bound is None:
        return None
    ctx.note(f"matmul bounded by the fused-summation model given for {ctx.fmt.name} inputs")
    return float(bound.relative), float(bound.absolute + bound.inputs * (1 + 2 * k))


def _matmul_setup(
    ctx: RuleContext, k: int, extra_terms: int = 0, precision: MatmulPrecision | None = None
) -> tuple[float, Format]:
    if precision is None:
        precision = matmul_precision(ctx.fmt, ctx.device)
    acc = precision.accumulate
    u = acc.eps if precision.faithful else acc.unit_roundoff
    source_bits = ctx.fmt.precision if precision.inputs is None else precision.inputs.precision
    exact_products = 2 * source_bits <= acc.precision
    factor = ctx.sums.dot_factor(k + extra_terms, u, products_exact=exact_products)
    if ctx.device.type == "cuda" and source_bits <= 11:
        # tensor cores (float16, bfloat16, TF32 inputs): fused multi-term adders that align to
        # the block's largest exponent and truncate (FTTN), of unknown width
        fused = dot_factor(
            k + extra_terms,
            inputs="fused",
            accumulator_bits=acc.precision,
            products_exact=exact_products,
        )
        factor = max(factor, fused)
    if precision.inputs is not None:
        e = precision.inputs.eps
        factor = up(np.asarray((1 + factor) * (1 + 2 * e + e * e) - 1)).item()
        ctx.note(f"inputs rounded to {precision.inputs.name} before the products")
    return float(factor), acc


_NARROW_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _float32_point(x: Any, enclosure: Interval) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(magnitudes, values) of a point operand of a product held in a format float32 holds
    exactly (None, None otherwise), as float32 arrays: max(|x|, 2**-126), the operand of a
    radius product (:func:`pytest_fpcheck.interval.linalg.matmul`'s ``magnitudes``), and x
    itself where it holds no float32 subnormal (its ``values``: a float32 midpoint product may
    flush those), each in one vectorised pass instead of a float64 one."""
    if not (
        enclosure.is_point
        and isinstance(x, torch.Tensor)
        and x.dtype in _NARROW_DTYPES
        and x.device.type == "cpu"
    ):
        return None, None
    with internal(), torch.no_grad():
        values = x.detach().to(torch.float32).numpy()
    magnitudes, subnormal = float32_magnitudes(values)
    return magnitudes, None if subnormal else values


def _point_operand(
    ctx: RuleContext, x: Any, enclosure: Interval
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`_float32_point` of an operand the operation cannot have overwritten; (None, None)
    for one it may have (``w.addmm_(a, w)``, ``out=`` an operand: its memory holds the result
    now, and its values as the operation read them come from the context's snapshot)."""
    if ctx.overwritten(x):
        return None, None
    return _float32_point(x, enclosure)


def _product(
    ctx: RuleContext,
    a: Interval,
    b: Interval,
    k: int,
    addend: Interval | None = None,
    product: Callable[[Array, Array], Array] = np.matmul,
    magnitudes: tuple[Array | None, Array | None] = (None, None),
    values: tuple[Array | None, Array | None] = (None, None),
    precision: MatmulPrecision | None = None,
) -> Interval:
    if precision is None:
        precision = matmul_precision(ctx.fmt, ctx.device)
    factor, acc = _matmul_setup(ctx, k, 1 if addend is not None else 0, precision)
    # a CPU matrix product's result is its accumulator rounded to nearest (convolutions keep
    # outward rounding: their output conversion is oneDNN's)
    nearest = ctx.nearest and product is np.matmul
    if addend is None:
        enclosure = matmul(
            a,
            b,
            ctx.fmt,
            factor=factor,
            accumulate=acc,
            product=product,
            k=k,
            magnitudes=magnitudes,
            values=values,
            nearest=nearest,
        )
        return _converted_overflow(ctx, enclosure, (a, b), precision)
    # addend + A B: one more term in the same accumulation; evaluate A B unrounded, then add
    # the addend with the same factor applied to its magnitude.
    inner = matmul(a, b, F64, factor=factor, accumulate=acc, product=product, k=k + 1)
    spread = up(addend.magnitude() * factor * (1 + 2**-40))
    enclosure = ew.add(inner, addend, F64).widen(spread)
    enclosure = enclosure.to_nearest(ctx.fmt) if nearest else enclosure.to_format(ctx.fmt)
    return _converted_overflow(ctx, enclosure, (a, b), precision)


def _converted_overflow(
    ctx: RuleContext,
    enclosure: Interval,
    operands: tuple[Interval, ...],
    precision: MatmulPrecision,
) -> Interval:
    """``enclosure``, or the whole line where the operands are rounded to a narrower input
    format (TF32 on tensor cores, bfloat16 or TF32 in oneDNN) and one of them may lie beyond
    that format's largest finite number: rounded to nearest it becomes infinite, and its
    products infinite or, against a zero, NaN (float32 inputs within 0.05% of float32's largest
    number, TF32 matmuls on an H100: found by the CUDA soundness campaign, docs/gpu.md)."""
    inputs = precision.inputs
    if inputs is None:
        return enclosure
    with np.errstate(invalid="ignore"):
        beyond = any(bool((o.magnitude() > inputs.max_finite).any()) for o in operands)
    if not beyond:
        return enclosure
    ctx.note(
        f"an input beyond {inputs.name}'s largest finite number may round to infinity: no bounds"
    )
    shape = np.shape(enclosure.lo)
    return Interval.whole(shape)


def _scale(ctx: RuleContext, a: Interval, factor: Any) -> Interval:
    if factor is None or float(factor) == 1.0:
        return a
    return ew.mul(a, Interval.point(np.asarray(float(factor))), F64)


@rule("aten.mm", "aten.bmm", "aten.matmul", "aten.mv", "aten.dot", "aten.vdot")
def _mm(ctx: RuleContext) -> Interval:
    a, b = ctx.args[0], ctx.args[1]
    k = a.shape[-1]
    left, right = ctx.operand(a), ctx.operand(b)
    model = _modelled(ctx, k, has_c=False)
    if model is not None:
        enclosure = _model_product(ctx, left, right, k, model)
    else:
        (magnitude_a, values_a), (magnitude_b, values_b) = (
            _point_operand(ctx, a, left),
            _point_operand(ctx, b, right),
        )
        enclosure = _product(
            ctx,
            left,
            right,
            k,
            magnitudes=(magnitude_a, magnitude_b),
            values=(values_a, values_b),
        )
    return _allow_flushed_inputs(ctx, enclosure, [(a, b, 1.0, _matmul)])


def _model_product(
    ctx: RuleContext, a: Interval, b: Interval, k: int, model: tuple[float, float]
) -> Interval:
    """The midpoint-radius product with the model's relative factor, widened by its absolute
    term (subnormal spacing of each node, flushed inputs); the inputs' own radii propagate as
    in the generic bound."""
    factor, absolute = model
    accumulate = matmul_precision(ctx.fmt, ctx.device).accumulate
    product = matmul(a, b, F64, factor=factor, accumulate=accumulate, k=k)
    return product.widen(up(np.asarray(absolute)).item()).to_format(ctx.fmt)


@rule("aten.addmm", "aten.baddbmm", "aten.addmv", "aten.addbmm")
def _addmm(ctx: RuleContext) -> Interval:
    """beta * input + alpha * (m1 @ m2): the scalings are exact-range products, and the k
    products plus the addend are one accumulation (two more terms cover either place where
    BLAS may apply alpha and beta)."""
    addend, m1, m2 = ctx.args[0], ctx.args[1], ctx.args[2]
    beta, alpha = ctx.kwargs.get("beta", 1), ctx.kwargs.get("alpha", 1)
    k = m1.shape[-1]
    left = _scale(ctx, ctx.operand(m1), alpha)
    shifted = _scale(ctx, ctx.operand(addend), beta)
    extra = 0 if (float(alpha) == 1 and float(beta) == 1) else 2
    precision = matmul_precision(ctx.fmt, ctx.device)
    factor, acc = _matmul_setup(ctx, k, 1 + extra, precision)
    if ctx.call.functional == "aten.addmv" and ctx.nearest and ctx.fmt.precision < acc.precision:
        # ATen's CPU addmv of float16/bfloat16 keeps results a ULP off one accumulation's
        # rounding (a randomised check against float64 found them outside that bound): taken
        # as a sum whose every product and partial sum is rounded to the tensor's format
        acc = ctx.fmt
        factor = gamma(2 * (k + 1 + extra), acc.unit_roundoff)
    flushed: Products = [(m1, m2, float(alpha), _matmul)]
    if ctx.call.functional == "aten.addbmm":
        flushed = [(m1, m2, float(alpha), _batch_sum)]
        enclosure = _addbmm(ctx, left, ctx.operand(m2), shifted, extra)
        enclosure = _converted_overflow(ctx, enclosure, (left, ctx.operand(m2)), precision)
        return _allow_flushed_inputs(ctx, enclosure, flushed, (addend, float(beta), _as_is))
    right = ctx.operand(m2)
    (magnitude_a, values_a), (magnitude_b, values_b) = (
        _point_operand(ctx, m1, left) if float(alpha) == 1 else (None, None),
        _point_operand(ctx, m2, right),
    )
    enclosure = matmul(
        left,
        right,
        ctx.fmt,
        factor=factor,
        accumulate=acc,
        k=k + 1 + extra,
        addend=shifted,
        magnitudes=(magnitude_a, magnitude_b),
        values=(values_a, values_b),
        # not addmv: ATen's CPU addmv of float16/bfloat16 rounds more than once (its
        # results lie a ULP off the nearest rounding of the one accumulation; found by a
        # randomised check against float64), which outward rounding covers
        nearest=ctx.nearest and ctx.call.functional != "aten.addmv",
    )
    enclosure = _converted_overflow(ctx, enclosure, (left, right), precision)
    return _allow_flushed_inputs(ctx, enclosure, flushed, (addend, float(beta), _as_is))


def _as_is(c: Array) -> Array:
    return c


def _matmul(a: Array, b: Array) -> Array:
    result: Array = np.matmul(a, b)
    return result


def _batch_sum(a: Array, b: Array) -> Array:
    """sum_b A_b B_b (``addbmm``'s product)."""
    result: Array = np.matmul(a, b).sum(axis=0)
    return result


def _addbmm(
    ctx: RuleContext, left: Interval, right: Interval, shifted: Interval, extra: int
) -> Interval:
    """beta C + alpha sum_b A_b B_b. ATen accumulates batch by batch into the result, which it
    rounds to the result format after each batch (on CPU, one addmm per batch), so a term's
    error compounds over the batches: the bound is one product over the batches' concatenated
    inner dimension, each term passing the k-term accumulation (the accumulator's factor) and
    then up to b + 2 (+ the alpha/beta scalings) roundings in the result format."""
    batches, rows, k = left.shape
    columns = right.shape[-1]
    wide = left.map(lambda v: np.moveaxis(v, 0, 1).reshape(rows, batches * k))
    tall = right.map(lambda v: v.reshape(batches * k, columns))
    inner, acc = _matmul_setup(ctx, k, 1)
    outer = gamma(batches + 2 + extra, ctx.fmt.unit_roundoff)
    factor = float(up(np.asarray((1 + inner) * (1 + outer) - 1)) * (1 + 2**-50))
    # the running result lives in the result format: its overflow threshold may be the lower
    accumulate = ctx.fmt if ctx.fmt.max_finite < acc.max_finite else acc
    return matmul(
        wide,
        tall,
        ctx.fmt,
        factor=factor,
        accumulate=accumulate,
        k=batches * k + batches + 1 + extra,
        addend=shifted,
    )


@rule("aten.convolution", "aten._convolution")
def _convolution(ctx: RuleContext) -> Interval:
    """A convolution is bilinear with non-negative coefficients: the matmul bound applies with
    the convolution itself as the product (float64, Python dispatch disabled) and k the number
    of terms each output sums.

    ``_convolution`` (the full signature a traced TorchScript graph calls) takes the same nine
    arguments first; of its backend flags (``benchmark``, ``deterministic``, ``cudnn_enabled``,
    ``allow_tf32``) only ``allow_tf32`` can change the values, and only off the CPU. Off the
    CPU a float32 convolution's inputs are taken as rounded to TF32 whenever cuDNN may do so
    (:func:`pytest_fpcheck.tracking.core.policy.convolution_precision`: cuDNN's own flag, on
    by default, or the call's ``allow_tf32``)."""
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = ctx.args[:9]
    allow_tf32 = (
        bool(ctx.arg(12, "allow_tf32", True))
        if ctx.call.functional == "aten._convolution"
        else None
    )
    precision = convolution_precision(ctx.fmt, ctx.device, allow_tf32)
    k = (
        int(np.prod(w.shape[1:]))
        if not transposed
        else int(w.shape[0] // groups * np.prod(w.shape[2:]))
    )

    def product(inp: Array, weight: Array) -> Array:
        with internal(), torch.no_grad():
            out = torch.ops.aten.convolution.default(
                as_tensor(inp),
                as_tensor(weight),
                None,
                stride,
                padding,
                dilation,
                transposed,
                output_padding,
                groups,
            )
        result: Array = out.numpy()
        return result

    addend = None
    if bias is not None:
        addend = ctx.operand(bias).map(lambda v: v.reshape((1, -1) + (1,) * (x.dim() - 2)))
    enclosure = _product(
        ctx, ctx.operand(x), ctx.operand(w), k, addend, product, precision=precision
    )
    if ctx.observed or ctx.device.type != "cpu" or ctx.fmt.precision >= _F32_BITS:
        return enclosure
    # Some CPU kernels of float16 and bfloat16 convolutions round partial sums to the tensor's
    # format (transposed float16 convolutions on an AVX-512 AMD EPYC: a quarter of the values
    # off the float32 accumulation's rounding), some flush subnormal inputs to zero: where the
    # kernel's value leaves the float32 model's enclosure, the convolution is bounded with
    # flushed inputs, then as accumulated in its own format (with flushed inputs)
    channels = (1, -1) + (1,) * (x.dim() - 2)
    products: Products = [(x, w, 1.0, product)]
    flushing = None if bias is None else (bias, 1.0, lambda c: c.reshape(channels))
    may_flush: bool | None = None  # both found when first needed
    allowance = None
    value = float64_values(ctx.outputs[0])  # as written: an in-place result too
    for in_format in (False, True):
        if in_format:
            with accumulating_in_format():
                precision = convolution_precision(ctx.fmt, ctx.device, allow_tf32)
                enclosure = _product(
                    ctx, ctx.operand(x), ctx.operand(w), k, addend, product, precision=precision
                )
            ctx.note(
                f"the CPU kernel rounded partial sums to {ctx.fmt.name}: bounded as accumulated in it"
            )
        if _holds(enclosure, value):
            return enclosure
        if may_flush is None:
            may_flush = _may_flush(ctx, products, flushing)
        if may_flush:
            if allowance is None:
                allowance = _flush_allowance(ctx, products, flushing)
            widened = enclosure.widen(allowance).to_format(ctx.fmt)
            if _holds(widened, value):
                ctx.note(_FLUSHED)
                return widened
    raise_unsupported(ctx, f"a {ctx.fmt.name} convolution computed outside every model")


#: float32's significand bits: narrower formats may round partial sums (``_convolution``)
_F32_BITS = 24

#: a product's float64 evaluation errs by at most gamma_k(2**-53) < 2**-30 relatively here
_F64_PRODUCT_MARGIN = 1 + 2.0**-30


def _has_subnormal(x: Any, fmt: Format) -> bool:
    """Does the tensor (or float64 array) ``x`` hold a non-zero value below ``fmt``'s smallest
    normal number in magnitude? A CPU tensor in ``fmt``, a 16-bit format, is scanned on its
    bits in one pass (:func:`~pytest_fpcheck.interval.kernels.any_subnormal`)."""
    if isinstance(x, np.ndarray):  # an overwritten operand's values from before the operation
        return bool(((np.abs(x) < fmt.smallest_normal) & (x != 0)).any())
    if not isinstance(x, torch.Tensor) or x.numel() == 0:
        return False
    with internal(), torch.no_grad():
        if x.device.type == "cpu" and x.element_size() == 2 and dtype_format(x.dtype) == fmt:
            return any_subnormal(x.detach().view(torch.int16).numpy().view(np.uint16), fmt)
        magnitude = x.detach().abs()
        return bool(((magnitude < fmt.smallest_normal) & (magnitude != 0)).any())


#: the note of a product bounded with its subnormal inputs flushed
_FLUSHED = "the CPU kernel may have flushed subnormal inputs to zero: bounded with them as zero too"

#: ``(a, b, scale, product)``: the term ``scale * product(a, b)`` of an operation's result
Products = list[tuple[Any, Any, float, Callable[[Array, Array], Array]]]


def _may_flush(
    ctx: RuleContext,
    products: Products,
    addend: tuple[Any, float, Callable[[Array], Array]] | None = None,
) -> bool:
    """Can flushing subnormal inputs to zero change this CPU product (:func:`_flush_allowance`):
    a float16 or bfloat16 one with a subnormal operand, not bounded a posteriori?"""
    if ctx.observed or ctx.device.type != "cpu" or ctx.fmt.precision >= _F32_BITS:
        return False
    operands = [t for a, b, _, _ in products for t in (a, b)]
    if addend is not None:
        operands.append(addend[0])
    return any(
        _has_subnormal(ctx.values(t) if ctx.overwritten(t) else t, ctx.fmt) for t in operands
    )


def _flush_allowance(
    ctx: RuleContext,
    products: Products,
    addend: tuple[Any, float, Callable[[Array], Array]] | None = None,
) -> Array:
    """What flushing subnormal inputs to zero can change each output by.

    oneDNN's bfloat16 kernels on a CPU with AVX-512 bfloat16 instructions (an AMD EPYC, torch
    2.13.0) flush subnormal inputs to zero (DAZ): a 64 x 64 product of 1e-39 by 1e30 computes 0,
    not 6.5e-8, in ``mm``, ``bmm``, ``addmm`` and convolutions (small products, and float16 on
    that CPU, keep them). The change is at most the sum over an output's terms with a
    subnormal factor of ``|scale| |a| |b|`` (``products``), plus ``|beta| |c|`` for a subnormal
    addend element (``addend``: ``c``, ``beta`` and the map laying ``c`` out as the output),
    computed from the operands' values (two more products: only where needed)."""
    tiny = ctx.fmt.smallest_normal
    allowance: Array = np.zeros(tuple(ctx.outputs[0].shape))
    with np.errstate(over="ignore", invalid="ignore"):
        for a, b, scale, product in products:
            x, y = np.abs(ctx.values(a)), np.abs(ctx.values(b))
            flushed = product(np.where(x < tiny, x, 0.0), y) + product(
                x, np.where(y < tiny, y, 0.0)
            )
            allowance = allowance + abs(scale) * flushed
        if addend is not None and isinstance(addend[0], torch.Tensor):
            c = addend[2](np.abs(ctx.values(addend[0])))
            allowance = allowance + abs(addend[1]) * np.where(c < tiny, c, 0.0)
        result: Array = up(allowance * _F64_PRODUCT_MARGIN)
    return result


def _allow_flushed_inputs(
    ctx: RuleContext,
    enclosure: Interval,
    products: Products,
    addend: tuple[Any, float, Callable[[Array], Array]] | None = None,
) -> Interval:
    """``enclosure``, or, where an operand holds a subnormal and the kernel's value lies
    outside it, ``enclosure`` widened by :func:`_flush_allowance` (a value outside even that
    is refused). Either way it holds the exact result."""
    if not _may_flush(ctx, products, addend):
        return enclosure
    value = float64_values(ctx.outputs[0])  # as written: an in-place result too
    if _holds(enclosure, value):
        return enclosure
    widened = enclosure.widen(_flush_allowance(ctx, products, addend)).to_format(ctx.fmt)
    if not _holds(widened, value):
        raise_unsupported(ctx, f"a {ctx.fmt.name} product computed outside every model")
    ctx.note(_FLUSHED)
    return widened


def _holds(enclosure: Interval, value: Array) -> bool:
    """Does ``enclosure`` hold every element of ``value``?"""
    lo, hi = np.broadcast_to(enclosure.lo, value.shape), np.broadcast_to(enclosure.hi, value.shape)
    return bool(contains(lo, hi, value).all())
