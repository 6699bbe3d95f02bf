"""Reference models of matrix-multiply hardware: fused multi-term (block FMA) accumulation and IEEE
accumulation in a chosen order (FTTN, paper 004 sections 5-6.1; FPRev section 5.2.1).

See the package docstring (:mod:`pytest_fpcheck.emulate`) for what each parameter stands for. Both
models evaluate, for every output element, a summation tree whose leaves are the products (and
``c``) and whose inner nodes are multi-term adders (:mod:`._kernel`). The matrices are processed a
block of rows at a time, so memory stays near ``rows * n * k`` float64 values per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgument
from ..formats import MODE_CODES, Format, format_of, numpy_dtype, round_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ..diagnostics.order import SummationTree

__all__ = [
    "MAX_EXTRA_BITS",
    "MAX_WIDTH",
    "PRODUCTS",
    "ROUNDINGS",
    "SUBNORMALS",
    "Plan",
    "chain_plan",
    "evaluate_products",
    "fused_matmul",
    "ieee_matmul",
    "tree_plan",
]

#: the rounding modes, in the order of their codes in the compiled kernel
ROUNDINGS: tuple[str, ...] = tuple(MODE_CODES)
SUBNORMALS: tuple[str, ...] = ("keep", "flush", "flush-inputs", "flush-outputs")
#: how products enter the sums: all exact; each rounded to the accumulator; exact except the first
#: product of each chain, which a plain multiply computes (the rest by fused multiply-adds)
PRODUCTS: tuple[str, ...] = ("exact", "rounded", "first-rounded")
#: the fixed-point sum of a node must stay exact in float64: p + extra + log2(fan-out) + 1 <= 53
MAX_EXTRA_BITS = 16
MAX_WIDTH = 256
_ROWS_PER_BLOCK_ELEMENTS = 1 << 21  # float64 products evaluated per kernel call


@dataclass(frozen=True)
class Plan:
    """A summation tree over ``leaves`` terms in compiled form: ``kids[starts[v]:starts[v+1]]``
    are the children of inner node ``leaves + v`` (children come before parents)."""

    leaves: int
    starts: NDArray[np.int64]
    kids: NDArray[np.int64]

    @property
    def fanout(self) -> int:
        """The largest number of children of a node (1 for a tree with no inner node)."""
        return int(np.diff(self.starts).max()) if self.starts.size > 1 else 1


def _plan(leaves: int, children: list[list[int]]) -> Plan:
    starts = np.zeros(len(children) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(c) for c in children])
    kids = np.array([c for group in children for c in group], dtype=np.int64)
    return Plan(leaves, starts, kids)


def chain_plan(k: int, width: int, *, with_c: bool) -> Plan:
    """Blocks of ``width`` consecutive products added one block at a time: each node sums the
    previous node (or, first, ``c`` when ``with_c``: leaf ``k``) with the next ``width`` products."""
    leaves = k + 1 if with_c else k
    children: list[list[int]] = []
    previous: list[int] = [k] if with_c else []
    for start in range(0, k, width):
        group = previous + list(range(start, min(start + width, k)))
        if len(group) >= 2:
            children.append(group)
            previous = [leaves + len(children) - 1]
        else:
            previous = group
    return _plan(leaves, children)


def tree_plan(tree: SummationTree, *, with_c: bool) -> Plan:
    """The plan of a revealed or built :class:`SummationTree`; ``c`` (leaf ``n``) is added to the
    tree's result by one last addition."""
    n = tree.n
    leaves = n + 1 if with_c else n

    def shifted(v: int) -> int:
        return v if v < n else v + (1 if with_c else 0)

    children = [[shifted(c) for c in tree.children(v)] for v in range(n, tree.root + 1)]
    if with_c:
        children.append([shifted(tree.root), n])
    return _plan(leaves, children)


def _params(fmt: Format) -> NDArray[np.float64]:
    return np.array([fmt.precision, fmt.emin, fmt.max_finite], dtype=np.float64)


def evaluate_products(
    values: NDArray[np.float64],
    plan: Plan,
    *,
    accumulator: Format,
    extra_bits: int | None,
    rounding: str,
    flush_outputs: bool,
    products: str,
    out: Format,
    conversion: str = "nearest-even",
) -> NDArray[np.float64]:
    """One tree sum per row of ``values`` (exact float64 products, flushed already), as the
    fused model computes it in ``accumulator`` and converts it to ``out`` (``conversion`` rounds
    that last step when the two formats differ). ``products`` is one of :data:`PRODUCTS`."""
    from ._kernel import evaluate

    convert = accumulator.name != out.name
    result: NDArray[np.float64] = evaluate(
        np.ascontiguousarray(values, dtype=np.float64),
        plan.starts,
        plan.kids,
        _params(accumulator),
        -1 if extra_bits is None else extra_bits,
        ROUNDINGS.index(rounding),
        flush_outputs,
        PRODUCTS.index(products),
        _params(out),
        convert,
        ROUNDINGS.index(conversion),
    )
    return result


# -- argument handling -------------------------------------------------------------------------


def _as_float64(x: Any, name: str) -> tuple[NDArray[np.float64], Format]:
    """``x`` (a NumPy array or a PyTorch tensor on any device) as float64, with its format.

    Whether ``x`` is a tensor is read from its type's module (free: nothing is imported)."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        fmt = format_of(x, argument=name)
        import torch

        return x.detach().to(device="cpu", dtype=torch.float64).numpy(), fmt
    if not isinstance(x, np.ndarray):
        raise InvalidArgument(
            name,
            x,
            "a NumPy array or PyTorch tensor of float32, float16, bfloat16 or float8 values",
            hint="Wrap a list as np.asarray(x, dtype=np.float32): the input format matters.",
        )
    fmt = format_of(x, argument=name)
    return x.astype(np.float64), fmt


def _matrix(x: Any, name: str) -> tuple[NDArray[np.float64], Format]:
    values, fmt = _as_float64(x, name)
    if values.ndim != 2:
        raise InvalidArgument(name, x, "a 2-D matrix")
    if fmt.precision > 24:
        raise InvalidArgument(
            name,
            x,
            "values of at most 24 significant bits (float32, tfloat32, float16, bfloat16, "
            "float8_e4m3fn, float8_e5m2)",
            hint="Matrix units take low-precision inputs; float64 products are not exact here.",
        )
    return values, fmt


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgument(name, value, f"one of {', '.join(map(repr, choices))}")
    return value


def _output_format(out_dtype: Any) -> Format:
    fmt = format_of(out_dtype, argument="out_dtype")
    if fmt.precision > 24:
        raise InvalidArgument(
            "out_dtype", out_dtype, "an accumulator format of at most 24 bits, e.g. 'float32'"
        )
    return fmt


def _flush_inputs(values: NDArray[np.float64], fmt: Format) -> NDArray[np.float64]:
    flushed: NDArray[np.float64] = np.where(
        np.abs(values) < fmt.smallest_normal, np.copysign(0.0, values), values
    )
    return flushed


@dataclass(frozen=True)
class _Operands:
    a: NDArray[np.float64]
    b: NDArray[np.float64]
    c: NDArray[np.float64] | None
    out: Format


def _operands(a: Any, b: Any, c: Any, out_dtype: Any, subnormals: str) -> _Operands:
    av, a_fmt = _matrix(a, "a")
    bv, b_fmt = _matrix(b, "b")
    if a_fmt.name != b_fmt.name:
        raise InvalidArgument("b", b, f"a matrix of the same format as a ({a_fmt.name})")
    if av.shape[1] != bv.shape[0]:
        raise InvalidArgument("b", b, f"a matrix with {av.shape[1]} rows (a has shape {av.shape})")
    out = _output_format(out_dtype)
    flush_in = subnormals in ("flush", "flush-inputs")
    if flush_in:
        av, bv = _flush_inputs(av, a_fmt), _flush_inputs(bv, a_fmt)
    cv: NDArray[np.float64] | None = None
    if c is not None:
        shape = (av.shape[0], bv.shape[1])
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            cv = np.full(shape, float(c))
        else:
            cv, _ = _as_float64(c, "c")
        if cv.shape != shape or not np.all(round_to(cv, out) == cv):
            raise InvalidArgument("c", c, f"values on the {out.name} grid, of shape {shape}")
        if flush_in:
            cv = _flush_inputs(cv, out)
    return _Operands(av, bv, cv, out)


def _run(
    ops: _Operands,
    plan: Plan,
    *,
    extra_bits: int | None,
    rounding: str,
    subnormals: str,
    products_mode: str,
) -> NDArray[Any]:
    m, k = ops.a.shape
    n = ops.b.shape[1]
    result = np.empty((m, n), dtype=np.float64)
    rows = max(1, _ROWS_PER_BLOCK_ELEMENTS // max(1, n * (k + 1)))
    bt = ops.b.T
    for start in range(0, m, rows):
        stop = min(start + rows, m)
        products = (ops.a[start:stop, None, :] * bt[None, :, :]).reshape(-1, k)
        if ops.c is not None:
            products = np.concatenate([products, ops.c[start:stop].reshape(-1, 1)], axis=1)
        result[start:stop] = evaluate_products(
            products,
            plan,
            accumulator=ops.out,
            extra_bits=extra_bits,
            rounding=rounding,
            flush_outputs=subnormals in ("flush", "flush-outputs"),
            products=products_mode,
            out=ops.out,
        ).reshape(stop - start, n)
    return result.astype(numpy_dtype(ops.out))


def _int_in(name: str, value: Any, low: int, high: int, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise InvalidArgument(name, value, f"an int in [{low}, {high}] ({what})")
    if not low <= int(value) <= high:
        raise InvalidArgument(name, value, f"an int in [{low}, {high}] ({what})")
    return int(value)


def fused_matmul(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    width: int,
    extra_bits: int | None,
    rounding: str,
    out_dtype: Any,
    subnormals: str = "keep",
) -> NDArray[Any]:
    """``a @ b (+ c)`` as block-FMA matrix hardware computes it (see :mod:`pytest_fpcheck.emulate`).

    Each output element starts from ``c`` (or nothing) and adds the products ``width`` at a time:
    the running sum and the next ``width`` exact products are aligned to the largest exponent,
    truncated toward zero ``extra_bits`` bits beyond the precision of ``out_dtype`` (``None``: not
    truncated, the exact sum is rounded once), added exactly, and rounded to ``out_dtype`` by
    ``rounding``. ``subnormals`` flushes subnormal inputs (``a``, ``b``, ``c``) and/or results to
    zero: ``'keep'``, ``'flush'`` (both), ``'flush-inputs'``, ``'flush-outputs'``.

    ``a`` and ``b`` are NumPy arrays (ml_dtypes for bfloat16 and float8; float32 arrays of tfloat32
    values for the TF32 mode) or PyTorch tensors of one format of at most 24 bits; ``c`` holds
    ``out_dtype`` values. Returns a NumPy array of ``out_dtype``.
    """
    width = _int_in("width", width, 1, MAX_WIDTH, "products fused per addition")
    if extra_bits is not None:
        extra_bits = _int_in("extra_bits", extra_bits, 0, MAX_EXTRA_BITS, "or None: exact sums")
    rounding = _choice("rounding", rounding, ROUNDINGS)
    subnormals = _choice("subnormals", subnormals, SUBNORMALS)
    ops = _operands(a, b, c, out_dtype, subnormals)
    plan = chain_plan(ops.a.shape[1], width, with_c=ops.c is not None)
    return _run(
        ops,
        plan,
        extra_bits=extra_bits,
        rounding=rounding,
        subnormals=subnormals,
        products_mode="exact",
    )


def ieee_matmul(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    out_dtype: Any,
    order: SummationTree | None = None,
    fma: bool = True,
    rounding: str = "nearest-even",
    subnormals: str = "keep",
) -> NDArray[Any]:
    """``a @ b (+ c)`` with IEEE 754 arithmetic in ``out_dtype``, in a chosen order.

    ``order`` is a :class:`~pytest_fpcheck.SummationTree` over the ``k`` products (its fused
    nodes add their children exactly and round once; ``c`` is added last), or ``None`` for the
    sequential order starting from ``c``. With ``fma`` every product is added to the running sum
    by a fused multiply-add (exact product, one rounding); without it the product is rounded to
    ``out_dtype`` first. ``rounding`` and ``subnormals`` as for :func:`fused_matmul`.
    """
    if not isinstance(fma, bool):
        raise InvalidArgument("fma", fma, "True or False")
    rounding = _choice("rounding", rounding, ROUNDINGS)
    subnormals = _choice("subnormals", subnormals, SUBNORMALS)
    ops = _operands(a, b, c, out_dtype, subnormals)
    k = ops.a.shape[1]
    if order is None:
        plan = chain_plan(k, 1, with_c=ops.c is not None)
    else:
        from ..diagnostics.order import SummationTree

        if not isinstance(order, SummationTree) or order.n != k:
            raise InvalidArgument("order", order, f"None or a SummationTree over {k} terms")
        plan = tree_plan(order, with_c=ops.c is not None)
    return _run(
        ops,
        plan,
        extra_bits=None,
        rounding=rounding,
        subnormals=subnormals,
        products_mode="exact" if fma else "rounded",
    )
