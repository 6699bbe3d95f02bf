"""The ``"arb"`` oracle for PyTorch references: a dispatch mode with Arb-ball shadow values.

The rule (Dual-Delta paper, section 3.2.2; Johansson 2017 for ball arithmetic): each ATen
operation the reference performs is evaluated on Arb balls at the working precision that
:func:`~pytest_fpcheck.oracle.arb_balls.adaptive` chose. :class:`ArbMode` is a
:class:`~pytest_fpcheck.oracle.shadow_torch.ShadowMode`: every operation still runs in float64 on
ordinary tensors (which keeps shapes, views and control flow working, and gives the float64
evaluation for free), and beside each floating tensor it keeps a NumPy object array of
``flint.arb`` balls, each containing the exact value of that element of the reference's
computation (the reference's inputs and Python float constants taken at their exact values).

Supported operations on floating tensors, each enclosing the mathematically exact result:

* arithmetic: add, sub, rsub, mul, div (true division), neg, abs, pow, reciprocal, the in-place
  forms add_, sub_, mul_, div_, and copy_, fill_, zero_, where, masked_fill, tril, triu, clamp,
  clamp_min, clamp_max, relu, maximum, minimum;
* functions: exp, expm1, log, log1p, sqrt, rsqrt, sin, cos, tan, atan, sinh, cosh, tanh, erf,
  erfc, sigmoid, silu, gelu (both forms; the tanh form with its decimal constant 0.044715);
* matrix products, one ``arb_mat`` product per matrix: mm, bmm, addmm, baddbmm, dot, mv,
  convolution (1-d and 2-d, grouped, strided, padded, dilated; not transposed), as an
  ``arb_mat`` product per image of the weights with the image's columns;
* reductions: sum and mean (as products with a column of ones), amax, amin, max, min, var and
  std (with any correction);
* normalisations and attention: softmax, log_softmax, the masked-row-safe softmax of scaled dot
  product attention (_safe_softmax), the fused CPU attention kernel
  (_scaled_dot_product_flash_attention_for_cpu: output and log-sum-exp, the default scale
  1/sqrt(E) taken exactly, additive masks (-inf included), causal), native_layer_norm (layer norm; RMS
  norm arrives as its pow / mean / rsqrt / mul steps);
* data movement, exact: the list of :mod:`.shadow_torch`, and embedding.

Anything else that takes a floating tensor raises
:class:`~pytest_fpcheck.oracle.unsupported.UnsupportedOracleOperation` naming the ATen operation
(the mpmath oracle may support it: ``oracle="mpmath"``). An operation whose finite operand balls
give a non-finite ball raises :class:`~pytest_fpcheck.oracle.arb_balls.Imprecise`, and the
evaluation is retried at a higher precision (:mod:`.arb_balls`). That check costs a pass over
every result, so the oracle first runs unchecked and runs checked only when a result ball of
finite inputs is not finite (:class:`ArbMode`'s ``checked``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from flint import arb

from . import arb_balls as balls
from .shadow_torch import MOVEMENT, Rule, ShadowMode
from .unsupported import UnsupportedOracleOperation

__all__ = ["ArbMode"]

_ORACLE = "arb"
aten = torch.ops.aten

Values = Any  # a NumPy object array of flint.arb (bool / Python int arrays for other tensors)
_IS_ZERO = np.frompyfunc(arb.is_zero, 1, 1)
_ZERO = np.asarray(arb(0), dtype=object)
_NEG_INF = np.asarray(arb.neg_inf(), dtype=object)


def _alpha(kwargs: Mapping[str, Any]) -> Any:
    return kwargs.get("alpha", 1)


def _axes(dims: Any, ndim: int) -> tuple[int, ...] | None:
    if dims is None:
        return None
    if isinstance(dims, int):
        return (dims % max(ndim, 1),)
    return None if len(dims) == 0 else tuple(d % max(ndim, 1) for d in dims)


def _argument(args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    if index < len(args):
        return args[index]
    return kwargs.get(name)


def _sum(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x = np.asarray(args[0], dtype=object)
    axes = _axes(_argument(args, kwargs, 1, "dim"), x.ndim)
    keepdim = bool(_argument(args, kwargs, 2, "keepdim"))
    return balls.sum_axes(x, axes, keepdim)


def _count(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> int:
    return math.prod(shape) if axes is None else math.prod(shape[a] for a in axes)


def _mean(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x = np.asarray(args[0], dtype=object)
    axes = _axes(_argument(args, kwargs, 1, "dim"), x.ndim)
    return _sum(args, kwargs) / _count(x.shape, axes)


def _variance(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x = np.asarray(args[0], dtype=object)
    axes = _axes(_argument(args, kwargs, 1, "dim"), x.ndim)
    keepdim = bool(kwargs.get("keepdim", False))
    correction = kwargs.get("correction")
    correction = 1 if correction is None else correction
    deviation = x - balls.sum_axes(x, axes, True) / _count(x.shape, axes)
    squares = balls.sum_axes(deviation * deviation, axes, keepdim)
    return squares / (_count(x.shape, axes) - correction)


def _extremum(maximum: bool) -> Rule:
    def rule(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
        x = np.asarray(args[0], dtype=object)
        axes = _axes(_argument(args, kwargs, 1, "dim"), x.ndim)
        keepdim = bool(_argument(args, kwargs, 2, "keepdim"))
        reduce = balls.reduce_maximum if maximum else balls.reduce_minimum
        return reduce(x, axes, keepdim)

    return rule


def _full_extremum(maximum: bool) -> Rule:
    def rule(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
        if len(args) > 1 or kwargs:
            raise UnsupportedOracleOperation(
                _ORACLE,
                f"aten.{'max' if maximum else 'min'}(dim=...)",
                "the index of an extremum of balls may be undecided",
                "Use amax / amin, or pass oracle='fp64'",
            )
        return _extremum(maximum)(args, kwargs)

    return rule


def _true_division(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    if kwargs.get("rounding_mode") is not None:
        raise UnsupportedOracleOperation(
            _ORACLE,
            f"aten.div(rounding_mode={kwargs['rounding_mode']!r})",
            "only true division has an arb rule",
            "Pass oracle='fp64' or oracle=<callable>",
        )
    return args[0] / args[1]


def _power(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    base, exponent = args[0], args[1]
    if isinstance(exponent, arb) and exponent.is_exact():
        integer = exponent.unique_fmpz()
        exponent = exponent if integer is None else int(integer)
    if isinstance(base, arb) and not isinstance(exponent, np.ndarray):
        base = np.asarray(base, dtype=object)
    return np.power(base, exponent)


def _unary(name: str) -> Rule:
    function = balls.UNARY[name]
    return lambda args, kwargs: function(args[0])


def _sigmoid(x: Values) -> Values:
    return 1 / (1 + balls.UNARY["exp"](-x))


def _gelu(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x = np.asarray(args[0], dtype=object)
    if kwargs.get("approximate", "none") == "tanh":
        kappa = arb("0.044715")
        inner = (2 / arb.pi()).sqrt() * (x + kappa * x * x * x)
        return x * (1 + balls.UNARY["tanh"](inner)) / 2
    return x * (1 + balls.UNARY["erf"](x / arb(2).sqrt())) / 2


def _shifted_exp(x: Values, dim: int) -> tuple[Values, Values, Values]:
    """exp(x - c), x - c and c, with c the row maximum rounded to float64 (softmax is
    shift-invariant, and a point shift adds no width)."""
    rows_max = balls.nearest(balls.reduce_maximum(x, dim, True))
    shift = balls.to_balls(np.where(np.isfinite(rows_max), rows_max, 0.0))
    shifted = x - shift
    return balls.UNARY["exp"](shifted), shifted, shift


def _softmax(safe: bool) -> Rule:
    def rule(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
        x = np.asarray(args[0], dtype=object)
        dim = args[1] % x.ndim
        exps, _, _ = _shifted_exp(x, dim)
        total = balls.sum_axes(exps, dim, True)
        if safe:
            empty = np.asarray(_IS_ZERO(total), dtype=bool)
            return np.where(empty, _ZERO, exps / np.where(empty, _ZERO + 1, total))
        return exps / total

    return rule


def _log_softmax(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x = np.asarray(args[0], dtype=object)
    dim = args[1] % x.ndim
    exps, shifted, _ = _shifted_exp(x, dim)
    return shifted - balls.UNARY["log"](balls.sum_axes(exps, dim, True))


def _layer_norm(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Values, ...]:
    x = np.asarray(args[0], dtype=object)
    shape, weight, bias, eps = args[1], args[2], args[3], args[4]
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    count = _count(x.shape, axes)
    mean = balls.sum_axes(x, axes, True) / count
    deviation = x - mean
    variance = balls.sum_axes(deviation * deviation, axes, True) / count
    rstd = balls.UNARY["rsqrt"](variance + eps)
    out = deviation * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _flash_attention(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Values, Values]:
    """softmax(q k^T * scale + mask) v and the rows' log-sum-exp, the scale 1/sqrt(E) exactly
    unless given."""
    query, key, value = (np.asarray(a, dtype=object) for a in args[:3])
    dropout = _argument(args, kwargs, 3, "dropout_p")  # a ball: Python floats become balls
    if dropout is not None and not (
        dropout.is_zero() if isinstance(dropout, arb) else dropout == 0
    ):
        raise UnsupportedOracleOperation(
            _ORACLE,
            "aten._scaled_dot_product_flash_attention_for_cpu(dropout_p > 0)",
            "dropout draws random numbers, which have no exact value",
            "Evaluate the reference with dropout_p=0 (model.eval()), or pass oracle='fp64'",
        )
    scale = kwargs.get("scale")
    scale = arb(query.shape[-1]).rsqrt() if scale is None else scale
    scores = balls.matmul(query, np.swapaxes(key, -1, -2)) * scale
    mask = kwargs.get("attn_mask")  # additive: the kernel takes masks in the query's dtype
    if mask is not None:
        scores = scores + mask
    if _argument(args, kwargs, 4, "is_causal"):
        rows, cols = scores.shape[-2:]
        scores = np.where(np.tri(rows, cols, 0, dtype=bool), scores, _NEG_INF)
    exps, _, shift = _shifted_exp(scores, scores.ndim - 1)
    total = balls.sum_axes(exps, scores.ndim - 1, True)
    out = balls.matmul(exps / total, value)
    logsumexp = shift + balls.UNARY["log"](total)
    return out, logsumexp[..., 0]


def _scaled_sum(beta: Any, added: Any, alpha: Any, product: Values) -> Values:
    scaled = product if alpha == 1 else alpha * product
    if beta == 0:
        return scaled
    return scaled + (added if beta == 1 else beta * added)


def _addmm(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    product = balls.matmul(args[1], args[2])
    return _scaled_sum(kwargs.get("beta", 1), args[0], kwargs.get("alpha", 1), product)


def _where(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    return np.where(np.asarray(args[0], dtype=bool), args[1], args[2])


def _masked_fill(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    value = args[2]
    value = value[()] if isinstance(value, np.ndarray) else value
    return np.where(np.asarray(args[1], dtype=bool), value, args[0])


def _triangle(lower: bool) -> Rule:
    def rule(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
        x = np.asarray(args[0], dtype=object)
        diagonal = _argument(args, kwargs, 1, "diagonal") or 0
        rows, cols = x.shape[-2:]
        keep = np.tri(rows, cols, diagonal, dtype=bool)
        keep = keep if lower else ~np.tri(rows, cols, diagonal - 1, dtype=bool)
        return np.where(keep, x, _ZERO)

    return rule


def _clamp(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x = args[0]
    low, high = _argument(args, kwargs, 1, "min"), _argument(args, kwargs, 2, "max")
    if low is not None:
        x = balls.ball_maximum(x, low)
    if high is not None:
        x = balls.ball_minimum(x, high)
    return x


def _convolution(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    x, weight, bias = (np.asarray(a, dtype=object) if a is not None else None for a in args[:3])
    stride, padding, dilation, transposed, _, groups = args[3:9]
    if transposed or x is None or weight is None or x.ndim not in (3, 4):
        raise UnsupportedOracleOperation(
            _ORACLE,
            "aten.convolution",
            "only 1-d and 2-d convolutions that are not transposed have an arb rule",
            "Pass oracle='fp64' or oracle=<callable>",
        )
    one_d = x.ndim == 3
    if one_d:
        x, weight = x[:, :, None, :], weight[:, :, None, :]
        stride, padding, dilation = (1, stride[0]), (0, padding[0]), (1, dilation[0])
    batch, _, height, width = x.shape
    out_channels, group_channels, kernel_h, kernel_w = weight.shape
    positions = torch.arange(1, x.size + 1, dtype=torch.float64).reshape(x.shape)
    columns = F.unfold(
        positions,
        (kernel_h, kernel_w),
        dilation=tuple(dilation),
        padding=tuple(padding),
        stride=tuple(stride),
    )
    source = np.concatenate([np.asarray([arb(0)], dtype=object), x.reshape(-1)])
    patches = source[columns.to(torch.int64).numpy()]  # (batch, channels * kh * kw, L)
    per_group = group_channels * kernel_h * kernel_w
    outputs_per_group = out_channels // groups
    kernels = weight.reshape(out_channels, per_group)
    pieces = [
        balls.matmul(
            kernels[g * outputs_per_group : (g + 1) * outputs_per_group],
            patches[:, g * per_group : (g + 1) * per_group, :],
        )
        for g in range(groups)
    ]
    out = np.concatenate(pieces, axis=1)
    out_h = (height + 2 * padding[0] - dilation[0] * (kernel_h - 1) - 1) // stride[0] + 1
    out_w = (width + 2 * padding[1] - dilation[1] * (kernel_w - 1) - 1) // stride[1] + 1
    out = out.reshape(batch, out_channels, out_h, out_w)
    if bias is not None:
        out = out + bias[None, :, None, None]
    return out[:, :, 0, :] if one_d else out


def _fill(args: Sequence[Any], kwargs: Mapping[str, Any]) -> Values:
    value = args[1]
    value = value[()] if isinstance(value, np.ndarray) else value
    return np.full(np.shape(args[0]), value, dtype=object)


_RULES: dict[Any, Rule] = {
    aten.add: lambda a, k: a[0] + _alpha(k) * a[1],
    aten.add_: lambda a, k: a[0] + _alpha(k) * a[1],
    aten.sub: lambda a, k: a[0] - _alpha(k) * a[1],
    aten.sub_: lambda a, k: a[0] - _alpha(k) * a[1],
    aten.rsub: lambda a, k: a[1] - _alpha(k) * a[0],
    aten.mul: lambda a, k: a[0] * a[1],
    aten.mul_: lambda a, k: a[0] * a[1],
    aten.div: _true_division,
    aten.div_: _true_division,
    aten.neg: lambda a, k: -np.asarray(a[0], dtype=object),
    aten.abs: lambda a, k: np.abs(np.asarray(a[0], dtype=object)),
    aten.pow: _power,
    aten.reciprocal: lambda a, k: 1 / np.asarray(a[0], dtype=object),
    **{
        getattr(aten, name): _unary(name)
        for name in (
            "exp",
            "expm1",
            "log",
            "log1p",
            "sqrt",
            "rsqrt",
            "sin",
            "cos",
            "tan",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "erf",
            "erfc",
        )
    },
    aten.sigmoid: lambda a, k: _sigmoid(np.asarray(a[0], dtype=object)),
    aten.silu: lambda a, k: np.asarray(a[0], dtype=object) * _sigmoid(a[0]),
    aten.gelu: _gelu,
    aten.relu: lambda a, k: balls.ball_maximum(a[0], arb(0)),
    aten.maximum: lambda a, k: balls.ball_maximum(a[0], a[1]),
    aten.minimum: lambda a, k: balls.ball_minimum(a[0], a[1]),
    aten.clamp: _clamp,
    aten.clamp_min: lambda a, k: balls.ball_maximum(a[0], a[1]),
    aten.clamp_max: lambda a, k: balls.ball_minimum(a[0], a[1]),
    aten.where: _where,
    aten.masked_fill: _masked_fill,
    aten.tril: _triangle(lower=True),
    aten.triu: _triangle(lower=False),
    aten.mm: lambda a, k: balls.matmul(a[0], a[1]),
    aten.bmm: lambda a, k: balls.matmul(a[0], a[1]),
    aten.dot: lambda a, k: balls.matmul(a[0], a[1]),
    aten.mv: lambda a, k: balls.matmul(a[0], a[1]),
    aten.addmm: _addmm,
    aten.baddbmm: _addmm,
    aten.convolution: _convolution,
    aten.sum: _sum,
    aten.mean: _mean,
    aten.amax: _extremum(maximum=True),
    aten.amin: _extremum(maximum=False),
    aten.max: _full_extremum(maximum=True),
    aten.min: _full_extremum(maximum=False),
    aten.var: _variance,
    aten.std: lambda a, k: balls.UNARY["sqrt"](_variance(a, k)),
    aten._softmax: _softmax(safe=False),
    aten._safe_softmax: _softmax(safe=True),
    aten._log_softmax: _log_softmax,
    aten.native_layer_norm: _layer_norm,
    aten._scaled_dot_product_flash_attention_for_cpu: _flash_attention,
    aten.copy_: lambda a, k: np.broadcast_to(a[1], np.shape(a[0])).copy(),
    aten.fill_: _fill,
    aten.zero_: lambda a, k: np.full(np.shape(a[0]), arb(0), dtype=object),
}
SUPPORTED = ", ".join(sorted(str(packet).removeprefix("aten.") for packet in _RULES))


class ArbMode(ShadowMode):  # type: ignore[no-untyped-call]
    """ShadowMode whose shadows are Arb balls (module docstring); :meth:`values_of` gives a
    tensor's balls."""

    oracle_name = _ORACLE
    rules = _RULES
    movement = MOVEMENT | {aten.embedding}
    supported = SUPPORTED

    def exact_values(self, tensor: torch.Tensor) -> Values:
        host = tensor.detach().cpu()
        if host.is_floating_point():
            return balls.to_balls(host.to(torch.float64).numpy())
        if host.dtype == torch.bool:
            return host.numpy()
        return host.numpy().astype(object)

    def scalar(self, value: float) -> Any:
        return balls.to_balls(np.asarray(value))[()]

    def __init__(self, *, checked: bool = True) -> None:
        super().__init__()
        self.checked = checked

    def check(self, func: torch._ops.OpOverload, operands: Sequence[Any], values: Values) -> None:
        """With ``checked``, a non-finite ball from finite operands stops the evaluation there
        (:func:`~pytest_fpcheck.oracle.arb_balls.check_finite`, naming the operation);
        without, it flows on as the enclosure it is (every later ball still encloses its exact
        value), and the caller re-runs checked only if a result is not finite."""
        if self.checked:
            balls.check_finite(str(func), operands, values)
