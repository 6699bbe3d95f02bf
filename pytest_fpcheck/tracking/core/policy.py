"""Which precision an operation really computes and accumulates in (issue 3, "a sound error
model"), and how a sum's rounding error is bounded.

PyTorch computes float16 and bfloat16 element-wise operations and reductions in float32
(``at::opmath_type``), on the CPU and on CUDA. Its CPU matmuls of float16 and bfloat16 (oneDNN
or the native GEMM) accumulate in float32; products of two float16 or bfloat16 numbers are exact
in float32. On CUDA, cuBLAS may reduce float16/bfloat16 split-K partial sums in the input format
when ``torch.backends.cuda.matmul.allow_{fp16,bf16}_reduced_precision_reduction`` is set (the
default), so the accumulation format is then the input format (the wider bound), and float32
matmuls round their inputs to TF32 when ``allow_tf32`` is set or the float32 matmul precision is
not "highest". Tensor cores may truncate rather than round: on CUDA every matmul's rounding is
taken as faithful (error < 1 ULP instead of 1/2 ULP), and matmuls on tensor cores (float16,
bfloat16 and TF32 inputs) as FTTN's fused multi-term adders of unknown width, which truncate
each block's terms relative to its largest one (:func:`dot_factor`). On the CPU, oneDNN may
compute float32 matmuls and convolutions from bfloat16 or TF32 inputs when its
``fp32_precision`` allows it (:func:`onednn_inputs`; ``torch.set_float32_matmul_precision`` sets
it for matmuls), and some kernels round partial sums to float16 (:func:`accumulating_in_format`).
When unsure, the wider bound is used.

``SumBound`` turns (number of terms, unit round-off) into the relative factor of a sum:
gamma_{n} (rigorous), Higham and Mary's probabilistic factor, or a revealed summation tree's
``error_factor`` (FPRev) when the order is known.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ...formats import FORMATS, Format, format_of
from ...interval.core import gamma, gamma_probabilistic

__all__ = [
    "TENSOR_CORE_WIDTHS",
    "MatmulPrecision",
    "SumBound",
    "accumulating_in_format",
    "compute_format",
    "dot_factor",
    "matmul_precision",
    "onednn_inputs",
]

_F32 = FORMATS["float32"]


def compute_format(fmt: Format) -> Format:
    """The format element-wise operations and reductions on ``fmt`` tensors compute in."""
    return _F32 if fmt.precision < _F32.precision else fmt


@dataclass(frozen=True)
class MatmulPrecision:
    """How a matmul rounds: inputs rounded to ``inputs`` (None: used as they are), products
    accumulated in ``accumulate``, each rounding faithful (``faithful``) or to nearest."""

    inputs: Format | None
    accumulate: Format
    faithful: bool


#: set within :func:`accumulating_in_format`
_IN_FORMAT: ContextVar[bool] = ContextVar("fpcheck_accumulating_in_format", default=False)


@contextmanager
def accumulating_in_format() -> Iterator[None]:
    """Within it, CPU products of float16 and bfloat16 tensors are modelled as computed
    entirely in their own format (every product and partial sum rounded to nearest in it, any
    order), the widest model of a CPU kernel. Some CPU kernels do round partial results to
    the tensor's format: float16 ``convolution_backward`` on an AVX-512 CPU without oneDNN
    float16 support (AMD EPYC, torch 2.13.0) accumulates its gradients in float16, up to 65
    ULPs off the float32 accumulation's rounding. The convolution rule, where the kernel's
    value leaves the float32 model's enclosure, and the decompositions' last attempt
    (:mod:`pytest_fpcheck.tracking.torch.decompose`) bound such kernels with it."""
    token = _IN_FORMAT.set(True)
    try:
        yield
    finally:
        _IN_FORMAT.reset(token)


#: what oneDNN may round float32 inputs to on the CPU, by its ``fp32_precision`` setting
_ONEDNN_INPUTS = {"bf16": "bfloat16", "tf32": "tfloat32"}


def onednn_inputs(kind: str) -> Format | None:
    """The format oneDNN may round a CPU float32 ``kind`` (``"matmul"`` or ``"conv"``)
    operation's inputs to: ``torch.backends.mkldnn.<kind>.fp32_precision``, ``"bf16"`` or
    ``"tf32"`` (set directly, or by ``torch.set_float32_matmul_precision("medium")`` and
    ``("high")`` for matmuls), lets it compute float32 products from bfloat16 or TF32 inputs
    on CPUs that have them; None when it is ``"ieee"`` or ``"none"`` (the default)."""
    backend = getattr(torch.backends.mkldnn, kind, None)
    name = _ONEDNN_INPUTS.get(str(getattr(backend, "fp32_precision", "none")))
    return None if name is None else FORMATS[name]


def matmul_precision(fmt: Format, device: torch.device) -> MatmulPrecision:
    """The matmul model for ``fmt`` tensors on ``device`` (see the module docstring)."""
    if device.type == "cpu":
        if _IN_FORMAT.get() and fmt.precision < _F32.precision:
            return MatmulPrecision(None, fmt, faithful=False)
        if fmt.name == "float32":
            return MatmulPrecision(onednn_inputs("matmul"), fmt, faithful=False)
        return MatmulPrecision(None, compute_format(fmt), faithful=False)
    matmul = torch.backends.cuda.matmul
    if fmt.name == "float16" and matmul.allow_fp16_reduced_precision_reduction:
        return MatmulPrecision(None, fmt, faithful=True)
    if fmt.name == "bfloat16" and matmul.allow_bf16_reduced_precision_reduction:
        return MatmulPrecision(None, fmt, faithful=True)
    if fmt.name == "float32" and (
        matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    ):
        return MatmulPrecision(FORMATS["tfloat32"], fmt, faithful=True)
    return MatmulPrecision(None, compute_format(fmt), faithful=True)


def convolution_precision(
    fmt: Format, device: torch.device, allow_tf32: bool | None = None
) -> MatmulPrecision:
    """The model for a convolution on ``device``: a matmul's (:func:`matmul_precision`),
    except that cuDNN rounds float32 inputs to TF32 under its own flag,
    ``torch.backends.cudnn.allow_tf32`` (on by default, whatever the matmul flags say), or
    under ``allow_tf32`` when the call passes it (``aten._convolution``)."""
    if device.type != "cpu" and fmt.name == "float32":
        tf32 = torch.backends.cudnn.allow_tf32 if allow_tf32 is None else allow_tf32
        if tf32:
            return MatmulPrecision(FORMATS["tfloat32"], fmt, faithful=True)
    if device.type == "cpu" and fmt.name == "float32":
        return MatmulPrecision(onednn_inputs("conv"), fmt, faithful=False)
    return matmul_precision(fmt, device)


#: Block widths (terms fused per addition) a matrix unit may use, FTTN section 5.
TENSOR_CORE_WIDTHS = (1, 2, 4, 8, 16, 32)


def _power_minus_one(base_minus_one: float, exponent: int) -> float:
    """(1 + x)^n - 1, rounded up."""
    if not math.isfinite(base_minus_one):
        return math.inf
    value = math.expm1(exponent * math.log1p(base_minus_one))
    return math.nextafter(value * (1 + 2**-40), math.inf)


def dot_factor(k: int, *, inputs: str, accumulator_bits: int, products_exact: bool) -> float:
    """The relative error factor of a k-term matrix-unit accumulation (plus the accumulator):
    ``tl.dot``, and CUDA matmuls on tensor cores.

    * ``inputs="ieee"`` (float32/float64 FMA chains, and the interpreter's NumPy matmul):
      gamma_{k+1} of the accumulator's unit round-off, one more rounding per product unless the
      products are exact;
    * matrix units (float16, bfloat16, float8, TF32 inputs): FTTN's fused multi-term model with
      an unknown block width w in :data:`TENSOR_CORE_WIDTHS`: each block of w products and the
      accumulator is aligned to its largest exponent and truncated, then rounded, so one block
      step errs by at most (w + 2) 2**(1-p) times the sum of its terms' magnitudes (the node
      bound of :mod:`pytest_fpcheck.interval.fused` with w + 1 children and a directed
      rounding); over ceil(k / w) + 1 steps the factor is (1 + (w + 2) 2**(1-p))^(ceil(k/w)+1)
      - 1, maximised over w; it covers the interpreter's IEEE evaluation as well.
    """
    u = 2.0**-accumulator_bits
    ieee = gamma(k + 1, u)
    if not products_exact:
        ieee = math.nextafter((1 + ieee) * (1 + u) - 1, math.inf) * (1 + 2**-50)
    if inputs == "ieee":
        return ieee
    step = 2.0 ** (1 - accumulator_bits)
    fused = max(_power_minus_one((w + 2) * step, -(-k // w) + 1) for w in TENSOR_CORE_WIDTHS)
    return max(ieee, fused)


class _Tree(Protocol):
    n: int

    def error_factor(self, u: float) -> float: ...


@dataclass(frozen=True)
class SumBound:
    """The relative error factor of summing ``n`` terms with unit round-off ``u``; and, where
    ``matmul_models`` describe the matmul hardware of an input format (issue 9: a probed
    ``MatmulFeatures`` or the parameters of ``fp.emulate.fused_matmul``), the fused-summation
    bound of a matmul with those inputs."""

    mode: str = "rigorous"
    order: Any = None
    matmul_models: tuple[Any, ...] = ()

    def matmul_bound(self, fmt: Format, k: int, *, has_c: bool) -> Any:
        """The :class:`~pytest_fpcheck.interval.fused.FusedBound` of a k-term matmul entry on
        ``fmt`` inputs under the model for ``fmt``, or None when no model is for ``fmt``."""
        from ...interval.fused import bound_from_features, fused_error_bound

        for model in self.matmul_models:
            if isinstance(model, dict):
                if format_of(model["in_dtype"]).name == fmt.name:
                    return fused_error_bound(k, has_c=has_c, **model)
            elif model.in_dtype == fmt.name:
                return bound_from_features(model, k, has_c=has_c)
        return None

    def factor(self, n: int, u: float) -> float:
        """gamma_{n-1} for a plain sum of n terms (a dot product passes n+1 for its products)."""
        tree: _Tree | None = self.order
        if tree is not None and tree.n == n:
            return min(float(tree.error_factor(u)), gamma(n - 1, u))
        if self.mode == "probabilistic":
            return gamma_probabilistic(n - 1, u)
        return gamma(n - 1, u)

    def dot_factor(self, k: int, u: float, *, products_exact: bool) -> float:
        """The factor of a k-term dot product: the sum's, with one more rounding per product
        unless the products are exact in the accumulation format."""
        total = self.factor(k, u)
        if products_exact:
            return total
        return math.nextafter((1 + total) * (1 + u) - 1, math.inf) * (1 + 2**-50)
