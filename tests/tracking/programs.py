"""Random small PyTorch programs and their exact evaluation in mpmath, for soundness tests.

A program is a list of steps over a stack of values; each step applies one covered operation.
``run_torch`` executes it with torch (under tracking, in the tests), ``run_exact`` evaluates the
same program with every rounding removed (casts are the identity) on mpmath numbers at 60
digits. Steps whose exact value is undefined (division by zero, log of zero) make the example
invalid; the tests discard those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np
import torch
from hypothesis import strategies as st
from mpmath import libmp

import pytest_fpcheck as fp
from pytest_fpcheck import formats as F

mpmath.mp.dps = 60

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
UNARY = [
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "gelu",
    "gelu_tanh",
    "silu",
    "relu",
    "square",
    "reciprocal",
    "cast",
    "erf",
    "softplus",
    "leaky_relu",
    "elu",
    "cube",
    "expm1",
    "log1p",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "atan",
    "atanh",
    "erfinv",
    "logit",
    "pow_scalar",
    "sinh",
    "cosh",
    "asinh",
    "log10",
    "inverse_square",
]
#: "iadd" and the like: the in-place variant (``x += y``) of the same operation
BINARY = ["add", "sub", "mul", "div", "maximum", "where", "iadd", "isub", "imul", "idiv"]
#: the element-wise updates of optimizers (Adam's moments and step): lerp on either side of its
#: branch at 0.5, addcmul, addcdiv, in place as torch.optim runs them
BINARY += ["lerp", "lerp_high", "addcmul", "addcdiv"]
#: backward kernels of activations: the gradient y's upstream gradient x meets
BINARY += ["sigmoid_backward", "tanh_backward", "threshold_backward"]
BINARY += ["gelu_backward", "gelu_backward_tanh", "silu_backward"]
#: one fused AdamW step (the CPU kernel) of parameters x with gradients y and fresh states
BINARY += ["fused_adamw"]
#: layer norm's backward kernel: the input's gradient of a layer norm of x (unit weight, zero
#: bias) under the upstream gradient y, plus the weight's and the bias's gradients (each row)
BINARY += ["layer_norm_backward"]
#: a cross-entropy's backward kernel after its log-softmax: the gradient of x's log-softmax
#: (each row) under the upstream gradient y, y - softmax(x) sum(y)
BINARY += ["log_softmax_backward"]
#: an attention weights' backward kernel: the gradient of x's softmax (each row) under the
#: upstream gradient y, softmax(x) (y - sum(y softmax(x)))
BINARY += ["softmax_backward"]
#: a training batch norm's running statistics (updated in place, undeclared by the schema):
#: x as a batch of rows, the running mean from y's first row and the variance from |y|'s last;
#: the rows of the result alternate the updated mean and variance. The batch is x clamped to
#: +-100, plus 1 (rounded, and tracked), contiguous: the rule refuses inputs whose statistics
#: may overflow, other layouts and, on (N, C) inputs, channels of subnormal spread, which then
#: take the decomposition and leave the statistics a gap that strict tracking refuses (those
#: cases: tests/tracking/test_running_statistics.py)
BINARY += ["batch_norm_running"]
REDUCE = [
    "sum",
    "mean",
    "softmax",
    "log_softmax",
    "logsumexp",
    "var",
    "std",
    "layer_norm",
    "norm",
    "cumsum",
    "amax",
]


class Undefined(Exception):
    """The exact program is undefined for these inputs (a pole, or a log of zero)."""


@dataclass(frozen=True)
class Program:
    dtype: str
    shape: tuple[int, int]
    inputs: tuple[np.ndarray, ...]
    steps: tuple[tuple[str, str], ...]  # (kind, op)
    cast_to: str


def grid_values(fmt_name: str, shape: tuple[int, int]) -> st.SearchStrategy[np.ndarray]:
    """Arrays on the format's grid, mixing moderate values, subnormals, values near overflow,
    near-ties and cancellation partners."""
    fmt = F.FORMATS[fmt_name]
    size = shape[0] * shape[1]
    moderate = st.floats(-8, 8, allow_nan=False, width=32)
    tiny = st.integers(1, 2 ** (fmt.precision - 1) + 8).map(lambda k: float(F.from_ordinal(k, fmt)))
    large = st.integers(fmt.max_ordinal - 64, fmt.max_ordinal).map(
        lambda k: float(F.from_ordinal(k, fmt))
    )
    one_ish = st.integers(-4, 4).map(
        lambda d: float(F.from_ordinal(int(F.ordinal(1.0, fmt)) + d, fmt))
    )
    element = st.one_of(moderate, moderate, moderate, tiny, one_ish, large, st.just(0.0))
    signs = st.lists(st.sampled_from([-1.0, 1.0]), min_size=size, max_size=size)
    return st.tuples(st.lists(element, min_size=size, max_size=size), signs).map(
        lambda pair: F.round_to(np.array(pair[0]) * np.array(pair[1]), fmt).reshape(shape)
    )


def kind_of(op: str) -> str:
    """The kind of step ``op`` is (``"unary"``, ``"binary"``, ``"reduce"``, ``"matmul"`` or
    ``"addbmm"``); a ValueError names the operations there are."""
    for kind, ops in (("unary", UNARY), ("binary", BINARY), ("reduce", REDUCE)):
        if op in ops:
            return kind
    if op in ("matmul", "addbmm", "matmul_tiled"):
        return op
    raise ValueError(
        f"op={op!r} is no operation of the programs; valid: {UNARY + BINARY + REDUCE} or "
        "'matmul', 'addbmm', 'matmul_tiled'"
    )


@st.composite
def programs(draw: st.DrawFn, *, max_steps: int = 4, require: str | None = None) -> Program:
    """A random program; with ``require``, one of its steps (at a random place) is that
    operation (a campaign aimed at one rule)."""
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 5)))
    x = draw(grid_values(dtype, shape))
    y = draw(grid_values(dtype, shape))
    if draw(st.booleans()):
        y = F.round_to(-x + draw(grid_values(dtype, shape)) * 2.0**-10, dtype)  # cancellation
    kinds = st.sampled_from(
        ["unary"] * 6
        + ["binary"] * 4
        + ["reduce"] * 2
        + ["matmul"] * 2
        + ["addbmm", "matmul_tiled"]
    )
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(kinds)
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(UNARY))))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(BINARY))))
        elif kind == "reduce":
            steps.append(("reduce", draw(st.sampled_from(REDUCE))))
        elif kind in ("addbmm", "matmul_tiled"):
            steps.append((kind, kind))
        else:
            steps.append(("matmul", "matmul"))
    if require is not None:
        steps.insert(draw(st.integers(0, len(steps))), (kind_of(require), require))
    cast_to = draw(st.sampled_from(sorted(set(DTYPES) - {dtype})))
    return Program(dtype, shape, (x, y), tuple(steps), cast_to)


def run_torch(program: Program, *, float64: bool = False, device: str = "cpu") -> torch.Tensor:
    """The program run by PyTorch in its format on ``device``, or with ``float64`` every step
    in float64 (casts the identity, as in :func:`run_exact`)."""
    dtype = torch.float64 if float64 else DTYPES[program.dtype]
    x = torch.tensor(program.inputs[0], dtype=dtype, device=device)
    y = torch.tensor(program.inputs[1], dtype=dtype, device=device)
    F_ = torch.nn.functional
    for kind, op in program.steps:
        if kind == "unary":
            x = {
                "neg": lambda v: -v,
                "abs": torch.abs,
                "exp": torch.exp,
                "log": lambda v: torch.log(v.abs()),
                "sqrt": lambda v: torch.sqrt(v.abs()),
                "tanh": torch.tanh,
                "sigmoid": torch.sigmoid,
                "gelu": F_.gelu,
                "gelu_tanh": lambda v: F_.gelu(v, approximate="tanh"),
                "silu": F_.silu,
                "relu": torch.relu,
                "square": lambda v: v * v,
                "reciprocal": torch.reciprocal,
                "cast": lambda v: v if float64 else v.to(DTYPES[program.cast_to]).to(dtype),
                "erf": torch.erf,
                "softplus": F_.softplus,
                "leaky_relu": F_.leaky_relu,
                "elu": F_.elu,
                "cube": lambda v: v.pow(3),
                "expm1": torch.expm1,
                "log1p": lambda v: torch.log1p(v.abs()),
                "rsqrt": lambda v: torch.rsqrt(v.abs()),
                "sin": torch.sin,
                "cos": torch.cos,
                "tan": torch.tan,
                "atan": torch.atan,
                "atanh": lambda v: torch.atanh(v.clamp(-0.875, 0.875)),
                "erfinv": lambda v: torch.erfinv(v.clamp(-0.875, 0.875)),
                "logit": lambda v: torch.logit(v.abs().clamp(0.0625, 0.9375)),
                "pow_scalar": lambda v: 1.5 ** v.clamp(-64, 64),
                "sinh": torch.sinh,
                "cosh": torch.cosh,
                "asinh": torch.asinh,
                "log10": lambda v: torch.log10(v.abs()),
                "inverse_square": lambda v: v.pow(-2),
            }[op](x)
        elif kind == "binary":
            x = {
                "add": lambda a, b: a + b,
                "sub": lambda a, b: a - b,
                "mul": lambda a, b: a * b,
                "div": lambda a, b: a / b,
                "iadd": lambda a, b: a.clone().__iadd__(b),
                "isub": lambda a, b: a.clone().__isub__(b),
                "imul": lambda a, b: a.clone().__imul__(b),
                "idiv": lambda a, b: a.clone().__itruediv__(b),
                "maximum": torch.maximum,
                "where": lambda a, b: torch.where(a > b, a, b * 0.5),
                "lerp": lambda a, b: a.clone().lerp_(b, 0.3),
                "lerp_high": lambda a, b: torch.lerp(a, b, 0.75),
                "addcmul": lambda a, b: a.clone().addcmul_(a, b, value=0.3),
                "addcdiv": lambda a, b: a.clone().addcdiv_(a, b, value=-0.5),
                "sigmoid_backward": lambda a, b: torch.ops.aten.sigmoid_backward(
                    b, torch.sigmoid(a)
                ),
                "tanh_backward": lambda a, b: torch.ops.aten.tanh_backward(b, torch.tanh(a)),
                "threshold_backward": lambda a, b: torch.ops.aten.threshold_backward(b, a, 0.0),
                "gelu_backward": lambda a, b: torch.ops.aten.gelu_backward(b, a),
                "gelu_backward_tanh": lambda a, b: torch.ops.aten.gelu_backward(
                    b, a, approximate="tanh"
                ),
                "silu_backward": lambda a, b: torch.ops.aten.silu_backward(b, a),
                "fused_adamw": _fused_adamw,
                "layer_norm_backward": _layer_norm_backward,
                "batch_norm_running": _batch_norm_running,
                "log_softmax_backward": lambda a, b: torch.ops.aten._log_softmax_backward_data(
                    b, torch.log_softmax(a, -1), -1, a.dtype
                ),
                "softmax_backward": lambda a, b: torch.ops.aten._softmax_backward_data(
                    b, torch.softmax(a, -1), -1, a.dtype
                ),
            }[op](x, y)
        elif kind == "reduce":
            x = {
                "sum": lambda v: v.sum(-1, keepdim=True).expand_as(v) + 0,
                "mean": lambda v: v.mean(-1, keepdim=True) * torch.ones_like(v),
                "softmax": lambda v: v.softmax(-1),
                "log_softmax": lambda v: v.log_softmax(-1),
                "logsumexp": lambda v: v.logsumexp(-1, keepdim=True) * torch.ones_like(v),
                "var": lambda v: v.var(-1, keepdim=True, correction=0) * torch.ones_like(v),
                "std": lambda v: v.std(-1, keepdim=True, correction=0) * torch.ones_like(v),
                "layer_norm": lambda v: F_.layer_norm(v, (v.shape[-1],)),
                "norm": lambda v: (
                    torch.linalg.vector_norm(v, dim=-1, keepdim=True) * torch.ones_like(v)
                ),
                "cumsum": lambda v: v.cumsum(-1),
                "amax": lambda v: v.amax(-1, keepdim=True) * torch.ones_like(v),
            }[op](x)
        elif kind == "addbmm":
            # x + sum over the columns b of x[:, b] (outer) y[0]: one batch per column, each
            # added to the running result (rounded to its format after every batch)
            columns = x.shape[1]
            x = torch.addbmm(x, x.T.unsqueeze(-1), y[:1].unsqueeze(0).expand(columns, 1, columns))
        elif kind == "matmul_tiled":
            # a 32 x 32 x 32 product of x and y tiled (the size CPU libraries run their blocked
            # kernels at: oneDNN's bfloat16 ones flush subnormal inputs), cut back to x's shape
            rows, columns = x.shape
            tiles = (TILE // rows + 1, TILE // columns + 1)
            x = (x.repeat(tiles)[:TILE, :TILE] @ y.repeat(tiles)[:TILE, :TILE].T)[:rows, :columns]
        else:
            x = x @ y.transpose(0, 1) @ y
    return x


#: the side of :func:`run_torch`'s tiled product
TILE = 32


def _map(function, array: np.ndarray) -> np.ndarray:
    return np.vectorize(function, otypes=[object])(array)


def _gelu(v):
    return v * mpmath.mpf(0.5) * (1 + mpmath.erf(v / mpmath.sqrt(2)))


def _gelu_tanh(v):
    inner = mpmath.sqrt(2 / mpmath.pi) * (v + mpmath.mpf("0.044715") * v**3)
    return mpmath.mpf(0.5) * v * (1 + mpmath.tanh(inner))


def _softplus(v):
    return v if v > 20 else mpmath.log1p(_exp(v))


def _exp(v):
    """exp, declining arguments whose result is beyond every float format by far: mpmath would
    spend minutes on exp(exp(1e38)), and the enclosure's check there adds nothing."""
    if abs(v) > 100_000:
        raise Undefined("exp of a huge argument")
    return mpmath.exp(v)


def _exp_nonpositive(d):
    """exp(d) for d <= 0; below -1e5 it is under 1e-43000, far below the 60 digits carried,
    and is taken as 0 (mpmath would spend minutes on exp(-1e38))."""
    return mpmath.mpf(0) if d < -100_000 else mpmath.exp(d)


def _expm1(v):
    if abs(v) > 100_000:
        raise Undefined("expm1 of a huge argument")
    return mpmath.expm1(v)


def _hyperbolic(function, v):
    """sinh or cosh, declining huge arguments as :func:`_exp` does."""
    if abs(v) > 100_000:
        raise Undefined("a hyperbolic function of a huge argument")
    return function(v)


def _log(v):
    if v == 0:
        raise Undefined("log(0)")
    return mpmath.log(v)


def _div(a, b):
    if b == 0:
        raise Undefined("division by zero")
    return a / b


def _rsqrt(v):
    if v == 0:
        raise Undefined("rsqrt(0)")
    return 1 / mpmath.sqrt(abs(v))


#: the fused AdamW step's hyper-parameters (doubles, as torch.optim passes them)
ADAMW = {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "weight_decay": 0.01, "eps": 1e-8}


def _layer_norm_backward(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """dx + dw + db (the parameters' gradients broadcast over the rows) of
    ``native_layer_norm_backward`` at x with upstream gradient g, the statistics from the
    forward kernel, eps 1e-5."""
    aten = torch.ops.aten
    n = x.shape[-1]
    weight = torch.ones(n, dtype=x.dtype, device=x.device)
    bias = torch.zeros(n, dtype=x.dtype, device=x.device)
    _, mean, rstd = aten.native_layer_norm(x, [n], weight, bias, 1e-5)
    dx, dw, db = aten.native_layer_norm_backward(
        g, x, [n], mean, rstd, weight, bias, [True, True, True]
    )
    return dx + dw + db


def _layer_norm_backward_exact(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The exact value of :func:`_layer_norm_backward`: per row, with xh = (x - mean) rstd,
    dx = rstd (g - mean(g) - xh mean(g xh)); dw and db the column sums of g xh and g."""
    rows, n = x.shape
    hat = np.empty_like(x)
    dx = np.empty_like(x)
    for i in range(rows):
        row = list(x[i])
        mean = mpmath.fsum(row) / n
        var = mpmath.fsum((v - mean) ** 2 for v in row) / n
        rstd = 1 / mpmath.sqrt(var + mpmath.mpf(1e-5))
        hat[i] = [(v - mean) * rstd for v in row]
        g_mean = mpmath.fsum(g[i]) / n
        gh_mean = mpmath.fsum(a * b for a, b in zip(g[i], hat[i], strict=True)) / n
        dx[i] = [rstd * (gi - g_mean - h * gh_mean) for gi, h in zip(g[i], hat[i], strict=True)]
    dw = [mpmath.fsum(g[i, j] * hat[i, j] for i in range(rows)) for j in range(n)]
    db = [mpmath.fsum(g[i, j] for i in range(rows)) for j in range(n)]
    return dx + np.array(dw, dtype=object) + np.array(db, dtype=object)


def _batch_norm_running(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    mean, var = y[0].clone(), y[-1].abs()
    batch = (x.clamp(-100, 100) + 1).contiguous()
    torch.ops.aten.native_batch_norm(batch, None, None, mean, var, True, 0.1, 1e-5)
    return torch.stack([mean, var, mean][: x.shape[0]])


def _batch_norm_running_exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The running statistics :func:`_batch_norm_running` updates, exactly: momentum times
    the batch mean (the unbiased variance) plus (1 - momentum) times the running one."""
    rows, columns = x.shape
    if rows < 2:
        raise Undefined("the unbiased variance of a single element is 0 / 0")
    rate = mpmath.mpf(0.1)
    means, variances = [], []
    for c in range(columns):
        column = [min(max(v, mpmath.mpf(-100)), mpmath.mpf(100)) + 1 for v in x[:, c]]
        mean = mpmath.fsum(column) / rows
        var = mpmath.fsum((v - mean) ** 2 for v in column) / (rows - 1)
        means.append(rate * mean + (1 - rate) * y[0, c])
        variances.append(rate * var + (1 - rate) * abs(y[-1, c]))
    return np.array([means, variances, means][:rows], dtype=object)


def _fused_adamw(param: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    zeros = torch.zeros_like(param)
    (out,), *_ = torch.ops.aten._fused_adamw(
        [param],
        [grad],
        [zeros],
        [zeros.clone()],
        [],
        [torch.tensor(1.0, device=param.device)],
        **ADAMW,
        amsgrad=False,
        maximize=False,
    )
    return out


def _fused_adamw_exact(a, b):
    """AdamW's first step from zero moments, exactly: the moments are (1 - beta1) g and
    (1 - beta2) g^2, their bias corrections 1 - beta1 and 1 - beta2."""
    lr, beta1, beta2, decay, eps = (mpmath.mpf(ADAMW[k]) for k in ADAMW)
    m, v = (1 - beta1) * b, (1 - beta2) * b * b
    denom = mpmath.sqrt(v) / mpmath.sqrt(1 - beta2) + eps
    return a * (1 - lr * decay) - lr / (1 - beta1) * m / denom


def _sigmoid_backward(a, b):
    s = 1 / (1 + _exp(-a))
    return b * s * (1 - s)


def gelu_derivative(v):
    """GELU's derivative, Phi(v) + v phi(v), exactly."""
    return mpmath.ncdf(v) + v * mpmath.npdf(v)


def silu_derivative(v):
    """SiLU's derivative, s (1 + v (1 - s)) with s the logistic function, exactly."""
    s = 1 / (1 + mpmath.exp(-v))
    return s * (1 + v * (1 - s))


def gelu_tanh_derivative(v):
    """The tanh form's derivative, exactly (kappa the decimal 0.044715)."""
    beta, kappa = mpmath.sqrt(2 / mpmath.pi), mpmath.mpf("0.044715")
    inner = beta * (v + kappa * v**3)
    half = mpmath.mpf(0.5)
    return half * (1 + mpmath.tanh(inner)) + half * v * mpmath.sech(inner) ** 2 * beta * (
        1 + 3 * kappa * v**2
    )


def _clamp(v, limit):
    return min(max(v, -mpmath.mpf(limit)), mpmath.mpf(limit))


def _logit(v):
    return mpmath.log(v / (1 - v))


def run_exact(program: Program) -> np.ndarray:
    """The program without roundings; Undefined where mpmath cannot evaluate it."""
    try:
        return _run_exact(program)
    except (OverflowError, ValueError, MemoryError) as error:  # exp(exp(1e38)): beyond any format
        raise Undefined(str(error)) from None


def _run_exact(program: Program) -> np.ndarray:
    x = _map(mpmath.mpf, program.inputs[0].astype(object))
    y = _map(mpmath.mpf, program.inputs[1].astype(object))
    half = mpmath.mpf(0.5)
    for kind, op in program.steps:
        if kind == "unary":
            function = {
                "neg": lambda v: -v,
                "abs": abs,
                "exp": _exp,
                "log": lambda v: _log(abs(v)),
                "sqrt": lambda v: mpmath.sqrt(abs(v)),
                "tanh": mpmath.tanh,
                "sigmoid": lambda v: 1 / (1 + _exp(-v)),
                "gelu": _gelu,
                "gelu_tanh": _gelu_tanh,
                "silu": lambda v: v / (1 + _exp(-v)),
                "relu": lambda v: max(v, mpmath.mpf(0)),
                "square": lambda v: v * v,
                "reciprocal": lambda v: _div(1, v),
                "cast": lambda v: v,
                "erf": mpmath.erf,
                "softplus": _softplus,
                "leaky_relu": lambda v: v if v > 0 else v * mpmath.mpf("0.01"),
                "elu": lambda v: v if v > 0 else _expm1(v),
                "cube": lambda v: v**3,
                "expm1": _expm1,
                "log1p": lambda v: mpmath.log1p(abs(v)),
                "rsqrt": _rsqrt,
                "sin": mpmath.sin,
                "cos": mpmath.cos,
                "tan": mpmath.tan,
                "atan": mpmath.atan,
                "atanh": lambda v: mpmath.atanh(_clamp(v, 0.875)),
                "erfinv": lambda v: mpmath.erfinv(_clamp(v, 0.875)),
                "logit": lambda v: _logit(min(max(abs(v), mpmath.mpf(0.0625)), mpmath.mpf(0.9375))),
                "pow_scalar": lambda v: mpmath.mpf(1.5) ** _clamp(v, 64),
                "sinh": lambda v: _hyperbolic(mpmath.sinh, v),
                "cosh": lambda v: _hyperbolic(mpmath.cosh, v),
                "asinh": mpmath.asinh,
                "log10": lambda v: _log(abs(v)) / mpmath.log(10),
                "inverse_square": lambda v: _div(1, v * v),
            }[op]
            x = _map(function, x)
        elif kind == "binary":
            if op == "layer_norm_backward":
                x = _layer_norm_backward_exact(x, y)
            elif op == "batch_norm_running":
                x = _batch_norm_running_exact(x, y)
            elif op == "log_softmax_backward":
                probabilities = _reduce_exact("softmax", x)
                x = y - probabilities * np.array([[mpmath.fsum(row)] for row in y], dtype=object)
            elif op == "softmax_backward":
                probabilities = _reduce_exact("softmax", x)
                dots = [[mpmath.fsum(row)] for row in y * probabilities]
                x = probabilities * (y - np.array(dots, dtype=object))
            elif op == "where":
                x = np.where(
                    np.vectorize(lambda a, b: a > b, otypes=[bool])(x, y),
                    x,
                    _map(lambda b: b * half, y),
                )
            else:
                x = np.vectorize(
                    {
                        "add": lambda a, b: a + b,
                        "sub": lambda a, b: a - b,
                        "mul": lambda a, b: a * b,
                        "div": _div,
                        "maximum": max,
                        "lerp": lambda a, b: a + mpmath.mpf("0.3") * (b - a),
                        "lerp_high": lambda a, b: a + mpmath.mpf("0.75") * (b - a),
                        "addcmul": lambda a, b: a + mpmath.mpf("0.3") * a * b,
                        "addcdiv": lambda a, b: a - half * _div(a, b),
                        "sigmoid_backward": _sigmoid_backward,
                        "tanh_backward": lambda a, b: b * (1 - mpmath.tanh(a) ** 2),
                        "threshold_backward": lambda a, b: b if a > 0 else mpmath.mpf(0),
                        "gelu_backward": lambda a, b: b * gelu_derivative(a),
                        "gelu_backward_tanh": lambda a, b: b * gelu_tanh_derivative(a),
                        "silu_backward": lambda a, b: b * silu_derivative(a),
                        "fused_adamw": _fused_adamw_exact,
                    }[op.removeprefix("i")],
                    otypes=[object],
                )(x, y)
        elif kind == "reduce":
            x = _reduce_exact(op, x)
        elif kind == "addbmm":
            x = x + np.outer(x.sum(axis=1), y[0])
        elif kind == "matmul_tiled":
            rows, columns = x.shape
            x = np.array(
                [
                    [
                        mpmath.fsum(
                            x[i % rows, k % columns] * y[j % rows, k % columns] for k in range(TILE)
                        )
                        for j in range(columns)
                    ]
                    for i in range(rows)
                ],
                dtype=object,
            )
        else:
            x = x.dot(y.T).dot(y)
    return x


def _reduce_exact(op: str, x: np.ndarray) -> np.ndarray:
    rows = []
    for row in x:
        row = list(row)
        n = len(row)
        total = mpmath.fsum(row)
        mean = total / n
        var = mpmath.fsum((v - mean) ** 2 for v in row) / n
        if op == "sum":
            out = [total] * n
        elif op == "mean":
            out = [mean] * n
        elif op in ("softmax", "log_softmax", "logsumexp"):
            top = max(row)
            lse = top + mpmath.log(mpmath.fsum(_exp_nonpositive(v - top) for v in row))
            out = {
                "softmax": [_exp_nonpositive(v - lse) for v in row],
                "log_softmax": [v - lse for v in row],
                "logsumexp": [lse] * n,
            }[op]
        elif op == "var":
            out = [var] * n
        elif op == "std":
            out = [mpmath.sqrt(var)] * n
        elif op == "layer_norm":
            rstd = 1 / mpmath.sqrt(var + mpmath.mpf(1e-5))
            out = [(v - mean) * rstd for v in row]
        elif op == "norm":
            out = [mpmath.sqrt(mpmath.fsum(v * v for v in row))] * n
        elif op == "cumsum":
            out = [mpmath.fsum(row[: i + 1]) for i in range(n)]
        else:
            out = [max(row)] * n
        rows.append(out)
    return np.array(rows, dtype=object)


def exact_to_float(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exact rounded down, exact rounded up) to float64: for a float64 bound b,
    b <= exact iff b <= down, and exact <= b iff up <= b, so containment is tested exactly."""
    limit = mpmath.mpf(2) ** 1024

    def directed(v: mpmath.mpf, rounding: str) -> float:
        if abs(v) >= limit:
            return math.copysign(math.inf, v)
        return float(libmp.to_float(v._mpf_, rnd=rounding))

    with np.errstate(all="ignore"):
        lo = np.vectorize(lambda v: directed(mpmath.mpf(v), libmp.round_floor), otypes=[float])(
            values
        )
        hi = np.vectorize(lambda v: directed(mpmath.mpf(v), libmp.round_ceiling), otypes=[float])(
            values
        )
    return lo, hi


def assert_encloses(
    bounds: fp.Bounds, value: torch.Tensor, exact: np.ndarray, note: object
) -> None:
    """The kernel's value (a NaN only where the enclosure is the whole line) and the exact
    values (an object array of mpmath numbers) lie in ``bounds`` (an ``fp.Bounds``)."""
    lo, hi = bounds.lo.reshape(-1), bounds.hi.reshape(-1)
    whole = np.isneginf(lo) & np.isposinf(hi)
    computed = value.double().numpy().reshape(-1)
    nan = np.isnan(computed)
    assert whole[nan].all(), (note, computed, lo, hi)
    assert bounds.contains(value).reshape(-1)[~nan].all(), (note, computed, lo, hi)
    assert_exact_inside(lo, hi, exact.reshape(-1), note)


def assert_exact_inside(lo: np.ndarray, hi: np.ndarray, exact: np.ndarray, note: object) -> None:
    """Each exact value (an object array of mpmath numbers) lies in [lo, hi] of its element,
    or that element's enclosure is the whole line."""
    down, up = exact_to_float(exact)
    with np.errstate(invalid="ignore"):
        inside = (lo <= down) & (up <= hi)
    bad = ~(inside | (np.isneginf(lo) & np.isposinf(hi)))
    assert not bad.any(), (note, down[bad], lo[bad], hi[bad])
