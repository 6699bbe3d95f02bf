"""A-priori error bounds for dot products and matrix entries under the fused multi-term model of
matrix hardware (FPRev section 5.2.1; FTTN, paper 004 sections 5-6.1; the model of
:mod:`pytest_fpcheck.emulate`).

For one output entry ``y = c + sum_i a_i b_i`` computed by a summation tree whose inner nodes are
fused adders (children aligned to the largest exponent, truncated toward zero ``E`` bits beyond
the accumulator precision ``p``, added exactly, rounded once),

    |computed - y| <= rel * (sum_i |a_i b_i| + |c|) + abs + inputs * (sum_i (|a_i| + |b_i|) + 1)

with, for a tree of height ``h`` (inner nodes on the longest path), ``N`` inner nodes and largest
fan-out ``f``:

* per node, ``theta = f * 2**(1 - p - E) + u`` (``E = None``: no truncation term), ``u = 2**-p``
  for round-to-nearest and ``2**(1 - p)`` for the directed modes; ``eta`` is the accumulator's
  subnormal spacing (``2**emin`` when results are flushed);
* ``rel = (1 + theta)**h - 1`` (plus ``(1 + theta)**h * 2**-p`` when products are rounded);
* ``abs = (1 + theta)**h * (N + leaves) * eta``;
* ``inputs = (1 + theta)**h * tiny`` when subnormal inputs are flushed (``tiny`` the input
  format's smallest normal; the ``+ 1`` covers a flushed ``c``), else 0;
* a final conversion to a narrower result format adds its own ``u`` and ``eta``.

Proof sketch. Truncation moves each of the ``f`` children by less than the quantum
``2**(e_max - p + 1 - E) <= 2**(1 - p - E) * max|t|``, and never increases the magnitude of the
sum; rounding adds at most ``u |S| + eta``. So a node errs by at most
``theta * sum|t_i| + eta``; writing ``err_v <= (1 + theta) sum err_c + theta M_v + eta`` (``M_v``
the sum of the exact magnitudes below ``v``) and inducting on the height gives the formula (the
constants of Higham, *Accuracy and Stability*, section 3.1, with a fused node in place of an
addition). The bound assumes no partial sum overflows: :meth:`FusedBound.radius` returns +inf
wherever ``(1 + rel) * sum |a_i b_i|`` reaches the accumulator's largest finite number. Every
constant is computed in float64 and rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import InvalidArgument
from ..formats import Format, format_of

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "FusedBound",
    "HardwareFeatures",
    "SummationShape",
    "bound_from_features",
    "fused_error_bound",
]


class SummationShape(Protocol):
    """What the bound reads of a summation tree (``fp.reveal_order``'s ``SummationTree``): the
    engine states the shape it needs and never imports the diagnostic."""

    @property
    def n(self) -> int: ...

    @property
    def root(self) -> int: ...

    def depth(self) -> int: ...

    def fanout(self) -> int: ...


class HardwareFeatures(Protocol):
    """What :func:`bound_from_features` reads of ``fp.probe_matmul``'s ``MatmulFeatures``."""

    @property
    def in_dtype(self) -> str: ...

    @property
    def out_dtype(self) -> str: ...

    @property
    def products_exact(self) -> bool | None: ...

    @property
    def block_width(self) -> int | None: ...

    @property
    def extra_bits(self) -> int | None: ...

    @property
    def exact_sums(self) -> bool | None: ...

    @property
    def rounding(self) -> str | None: ...

    @property
    def subnormal_inputs(self) -> bool | None: ...

    @property
    def subnormal_outputs(self) -> bool | None: ...

    @property
    def accumulator(self) -> str | None: ...

    @property
    def conversion(self) -> str | None: ...

    @property
    def order(self) -> SummationShape | None: ...


_ROUNDINGS = ("nearest-even", "toward-zero", "down", "up")
_SUBNORMALS = ("keep", "flush", "flush-inputs", "flush-outputs")
_PRODUCTS = ("exact", "rounded", "first-rounded")


def _up(x: float) -> float:
    """x rounded up generously: the float64 evaluation of each constant errs by a few ulps."""
    return math.nextafter(x * (1.0 + 2.0**-40), math.inf)


@dataclass(frozen=True)
class FusedBound:
    """``|computed - exact| <= relative * (sum|a_i b_i| + |c|) + absolute
    + inputs * (sum(|a_i| + |b_i|) + 1)`` for every entry (see the module docstring);
    ``overflow`` is the accumulator's largest finite number."""

    relative: float
    absolute: float
    inputs: float
    overflow: float

    def radius(self, a: Any, b: Any, c: Any = None) -> NDArray[np.float64]:
        """The bound for every entry of ``a @ b (+ c)`` (arrays of the exact inputs; a vector ``a``
        is one row, a vector ``b`` one column), as a 2-D float64 array rounded up; +inf where a
        partial sum may overflow."""
        av = np.abs(np.asarray(a, dtype=np.float64))
        bv = np.abs(np.asarray(b, dtype=np.float64))
        if av.ndim == 1:
            av = av[None, :]
        if bv.ndim == 1:
            bv = bv[:, None]
        with np.errstate(over="ignore", invalid="ignore"):
            magnitude = av @ bv
            if c is not None:
                magnitude = magnitude + np.abs(np.asarray(c, dtype=np.float64))
            magnitude = magnitude * (1.0 + 2.0**-40)  # the float64 products and sums above
            radius = self.relative * magnitude + self.absolute
            if self.inputs:
                sizes = av.sum(axis=1)[:, None] + bv.sum(axis=0)[None, :] + 1.0
                radius = radius + self.inputs * sizes * (1.0 + 2.0**-40)
            radius = np.nextafter(radius * (1.0 + 2.0**-40), np.inf)
            too_big = ~(magnitude * (1.0 + self.relative) + self.absolute < self.overflow)
        result: NDArray[np.float64] = np.where(too_big, np.inf, radius)
        return result


def _shape(
    k: int, width: int | None, order: SummationShape | None, has_c: bool
) -> tuple[int, int, int]:
    """(height, inner nodes, largest fan-out) of the tree of one entry."""
    if order is not None:
        if order.n != k:
            raise InvalidArgument("order", order, f"a SummationTree over k={k} terms")
        height, nodes, fanout = order.depth(), order.root - order.n + 1, order.fanout()
        if has_c:
            height, nodes, fanout = height + 1, nodes + 1, max(fanout, 2)
        return height, nodes, fanout
    if width is None:
        raise InvalidArgument(
            "width", width, "an int >= 1 (or an order): the bound needs the tree's shape"
        )
    nodes = math.ceil(k / width)
    return nodes, nodes, width + 1


def fused_error_bound(
    k: int,
    *,
    width: int | None,
    extra_bits: int | None,
    rounding: str | None,
    in_dtype: Any,
    out_dtype: Any,
    subnormals: str = "keep",
    products: str = "exact",
    accumulator: Any = None,
    conversion: str | None = "nearest-even",
    order: SummationShape | None = None,
    has_c: bool = False,
) -> FusedBound:
    """The :class:`FusedBound` of a ``k``-term entry under the fused model: the parameters of
    :func:`pytest_fpcheck.emulate.fused_matmul` (``extra_bits=None``: exact sums), the tree
    (``order``, else the chain of ``width``-term blocks), ``products`` (``'exact'``,
    ``'rounded'``, ``'first-rounded'``), and the ``accumulator`` when it is wider than
    ``out_dtype`` (then ``conversion`` rounds the result; None: any rounding).
    ``rounding=None`` takes the worst mode."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidArgument("k", k, "an int >= 1, the number of products")
    if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 1):
        raise InvalidArgument("width", width, "None or an int >= 1")
    if extra_bits is not None and (
        not isinstance(extra_bits, int) or isinstance(extra_bits, bool) or extra_bits < 0
    ):
        raise InvalidArgument("extra_bits", extra_bits, "None (exact sums) or an int >= 0")
    if rounding is not None and rounding not in _ROUNDINGS:
        raise InvalidArgument(
            "rounding", rounding, f"None or one of {', '.join(map(repr, _ROUNDINGS))}"
        )
    if subnormals not in _SUBNORMALS:
        raise InvalidArgument(
            "subnormals", subnormals, f"one of {', '.join(map(repr, _SUBNORMALS))}"
        )
    if products not in _PRODUCTS:
        raise InvalidArgument("products", products, f"one of {', '.join(map(repr, _PRODUCTS))}")
    in_fmt = format_of(in_dtype, argument="in_dtype")
    out = format_of(out_dtype, argument="out_dtype")
    acc = out if accumulator is None else format_of(accumulator, argument="accumulator")
    height, nodes, fanout = _shape(k, width, order, has_c)
    p = acc.precision
    u = _unit(rounding, p)
    truncation = 0.0 if extra_bits is None else fanout * math.ldexp(1.0, 1 - p - extra_bits)
    theta = _up(truncation + u)
    flush_out = subnormals in ("flush", "flush-outputs")
    eta = _eta(acc, flush_out)
    growth = _up(math.exp(height * math.log1p(theta)))
    relative = _up(growth - 1.0)
    leaves = 0
    if products != "exact":
        relative = _up(relative + growth * math.ldexp(1.0, -p))
        leaves = k
    absolute = _up(growth * (nodes + leaves) * eta)
    inputs = (
        _up(growth * in_fmt.smallest_normal) if subnormals in ("flush", "flush-inputs") else 0.0
    )
    if acc.name != out.name:
        uc = _unit(conversion, out.precision)
        relative = _up(relative + uc * (1.0 + relative))
        absolute = _up(absolute * (1.0 + uc) + _eta(out, flush_out))
        inputs = _up(inputs * (1.0 + uc))
    return FusedBound(relative, absolute, inputs, acc.max_finite)


def _unit(rounding: str | None, p: int) -> float:
    return math.ldexp(1.0, -p) if rounding == "nearest-even" else math.ldexp(1.0, 1 - p)


def _eta(fmt: Format, flush: bool) -> float:
    return fmt.smallest_normal if flush else fmt.smallest_subnormal


def bound_from_features(features: HardwareFeatures, k: int, *, has_c: bool = False) -> FusedBound:
    """The bound for a probed matmul (``fp.probe_matmul``). Unknown features take their worst
    case: rounding directed, no extra bits, products rounded, subnormals flushed, the
    accumulator no wider than the result. The order's shape comes from
    ``features.order`` when it is over ``k`` terms, else from ``features.block_width``."""
    order = features.order if features.order is not None and features.order.n == k else None
    if order is None and features.block_width is None:
        raise InvalidArgument(
            "features",
            features,
            "features with a revealed order over k terms or a known block_width",
            hint="The bound needs the shape of the summation tree.",
        )
    exact = features.exact_sums is True
    flush_in = features.subnormal_inputs is not True
    flush_out = features.subnormal_outputs is not True
    subnormals = {
        (False, False): "keep",
        (True, True): "flush",
        (True, False): "flush-inputs",
        (False, True): "flush-outputs",
    }[(flush_in, flush_out)]
    accumulator = features.accumulator or features.out_dtype
    return fused_error_bound(
        k,
        width=features.block_width,
        extra_bits=None if exact else (features.extra_bits or 0),
        rounding=features.rounding,
        in_dtype=features.in_dtype,
        out_dtype=features.out_dtype,
        subnormals=subnormals,
        products="exact" if features.products_exact else "rounded",
        accumulator=accumulator,
        conversion=features.conversion,
        order=order,
        has_c=has_c,
    )
