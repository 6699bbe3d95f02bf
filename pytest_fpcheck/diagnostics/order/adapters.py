"""Adapters that turn a sum, a dot product or one element of a matrix product into the
``impl(x) -> float`` that ``fp.reveal_order`` queries (FPRev section 3.2: "other AccumOps can be
abstracted as calls to the summation function").

``x`` arrives as a NumPy array of the format's dtype (ml_dtypes for bfloat16 and float8). The
adapter hands it to ``fn`` as a NumPy array, a PyTorch tensor (sharing memory on the CPU, copied
to ``device`` otherwise) or a list of Python floats. Whether ``fn`` is a torch function is read
from its module name; torch itself is imported only when a torch adapter first runs. A function
that launches a Triton kernel on torch tensors (``TRITON_INTERPRET=1`` on the CPU) is a torch
function here.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidArgument
from .inputs import to_float

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["OrderImpl", "dot_of", "matmul_of", "scales_both", "sum_of", "to_torch"]

_BACKENDS = ("numpy", "torch", "python")
_PYTHON_MODULES = ("builtins", "math", "statistics", "functools", "operator", "fractions")


def scales_both(dtype_name: str, scale: bool | None) -> bool:
    """Whether a product adapter scales both operands (FPRev section 8.1.1): as asked, or by
    default for the float8 formats, whose masks cannot swamp unit products otherwise."""
    return dtype_name.startswith("float8") if scale is None else scale


class OrderImpl:
    """``impl(x) -> float`` built by :func:`sum_of`, :func:`dot_of` or :func:`matmul_of`.

    Besides calling ``fn``, it tells ``fp.reveal_order`` what it needs to know: ``length`` (the
    number of summed terms, when fixed by a matrix shape), ``accumulator`` (the format ``fn`` adds
    in, when wider than the input), and ``scale`` (whether both operands of a product are scaled).
    """

    def __init__(
        self,
        call: Callable[[NDArray[Any]], Any],
        *,
        description: str,
        length: int | None = None,
        accumulator: Any = None,
        scale: bool | None = None,
        products: bool = False,
    ) -> None:
        self._call = call
        self.description = description
        self.length = length
        self.accumulator = accumulator
        self.scale = scale
        self.products = products

    def __call__(self, x: NDArray[Any]) -> float:
        return to_float(self._call(x), what=self.description)

    def __repr__(self) -> str:
        return self.description


def _module_of(fn: Any) -> str:
    """The module ``fn`` comes from: a ``functools.partial``'s function's, a method
    descriptor's class's (``torch.Tensor.sum``: torch's), else its own or its owner's."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    owner = getattr(fn, "__objclass__", None)
    if owner is not None:
        return str(owner.__module__)
    return str(getattr(fn, "__module__", None) or type(getattr(fn, "__self__", None)).__module__)


def _name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a Python function, ``module.name`` of a builtin (``torch.sum``),
    ``partial(name, ...)`` of a ``functools.partial``."""
    if isinstance(fn, functools.partial):
        settings = [repr(a) for a in fn.args] + [f"{k}={v!r}" for k, v in fn.keywords.items()]
        return f"partial({', '.join([_name(fn.func), *settings])})"
    module = _module_of(fn)
    if isinstance(fn, types.FunctionType):
        name = fn.__qualname__
    else:
        name = getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name}" if module and module != "builtins" else str(name)


def _backend(fn: Any, backend: str | None) -> str:
    """The backend named, or the one ``fn``'s module belongs to (free: nothing is imported):
    ``torch`` for torch's functions, ``python`` for the standard library's and the builtins,
    and NumPy arrays for anything else, a function of the user's own module included."""
    if not callable(fn):
        raise InvalidArgument("fn", fn, "a callable")
    if backend is not None:
        if backend not in _BACKENDS:
            raise InvalidArgument("backend", backend, "one of 'numpy', 'torch', 'python'")
        return backend
    root = _module_of(fn).split(".")[0]
    if root == "torch":
        return "torch"
    if root in _PYTHON_MODULES:
        return "python"
    return "numpy"


def _converter(backend: str, device: Any) -> Callable[[NDArray[Any]], Any]:
    if device is not None and backend != "torch":
        raise InvalidArgument("device", device, "None unless backend='torch'")
    if backend == "python":
        return lambda x: x.astype(np.float64).tolist()
    if backend == "numpy":
        return lambda x: x
    return lambda x: to_torch(x, device)


def to_torch(x: NDArray[Any], device: Any) -> Any:
    """The tensor viewing ``x`` (same memory on the CPU); bfloat16 and float8 go through their
    bit patterns, which NumPy and torch share."""
    import torch

    name = x.dtype.name
    if name == "bfloat16":
        tensor = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    elif name.startswith("float8"):
        tensor = torch.from_numpy(x.view(np.uint8)).view(getattr(torch, name))
    else:
        tensor = torch.from_numpy(x)
    return tensor if device is None else tensor.to(device)


def sum_of(
    fn: Callable[[Any], Any],
    *,
    backend: str | None = None,
    device: Any = None,
    accumulator: Any = None,
) -> OrderImpl:
    """``impl(x) = fn(x)``: reveal the order in which ``fn`` sums a 1-D array.

    ``backend`` is ``'numpy'``, ``'torch'`` (``device`` says where the tensor goes) or
    ``'python'`` (``fn`` gets a list of floats); by default it is read from ``fn``'s module
    (``torch.sum``: torch; ``math.fsum``, ``sum``: python), and is NumPy for any other function
    (``numpy.sum``, or one of the user's own). ``accumulator`` names the format ``fn``
    adds in when it is wider than the input (``'float32'`` for ``torch.sum`` of bfloat16): the
    masks must swamp partial sums in that format.
    """
    convert = _converter(_backend(fn, backend), device)
    return OrderImpl(
        lambda x: fn(convert(x)), description=f"sum_of({_name(fn)})", accumulator=accumulator
    )


def _other_operand(x: NDArray[Any], scaled: bool) -> NDArray[Any]:
    """The operand multiplied with the masked vector: ones, or ``|x|`` (ones where ``x`` is 0) when
    both operands are scaled, so that the products are ``x * |x|``: ``+-M**2`` and ``u**2``."""
    if not scaled:
        return np.ones_like(x)
    return np.where(x == 0, np.ones_like(x), np.abs(x))


def dot_of(
    fn: Callable[[Any, Any], Any],
    *,
    masked: str = "x",
    backend: str | None = None,
    device: Any = None,
    accumulator: Any = None,
    scale: bool | None = None,
) -> OrderImpl:
    """``impl(x) = fn(a, b)`` for a dot product: the masked vector is ``a`` (``masked='x'``) or
    ``b`` (``masked='y'``); the other operand is ones, or, with ``scale`` (default for float8),
    ``|x|`` so that the products span ``M**2`` to ``u**2`` (FPRev section 8.1.1; the products are
    then accumulated in ``accumulator``, default float32). Other keywords as for
    :func:`sum_of`."""
    if masked not in ("x", "y"):
        raise InvalidArgument("masked", masked, "'x' (the first operand) or 'y' (the second)")
    convert = _converter(_backend(fn, backend), device)

    def call(x: NDArray[Any]) -> Any:
        other = _other_operand(x, scales_both(x.dtype.name, scale))
        a, b = (x, other) if masked == "x" else (other, x)
        return fn(convert(a), convert(b))

    return OrderImpl(
        call,
        description=f"dot_of({_name(fn)}, masked={masked!r})",
        accumulator=accumulator,
        scale=scale,
        products=True,
    )


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(name, value, "an int >= 1")
    return value


def matmul_of(
    fn: Callable[[Any, Any], Any],
    m: int,
    k: int,
    n: int,
    *,
    row: int = 0,
    col: int = 0,
    masked: str = "a",
    backend: str | None = None,
    device: Any = None,
    accumulator: Any = None,
    scale: bool | None = None,
) -> OrderImpl:
    """``impl(x) = fn(A, B)[row, col]`` for ``A`` of shape ``(m, k)`` and ``B`` of shape
    ``(k, n)``: reveal how that output element accumulates its ``k`` products (pass ``n=k`` to
    ``fp.reveal_order``). The masked vector is row ``row`` of ``A`` (``masked='a'``) or column
    ``col`` of ``B`` (``masked='b'``); the other factor of the products is ones or, with
    ``scale``, ``|x|`` (see :func:`dot_of`); every other entry is one."""
    m, k, n = _positive_int("m", m), _positive_int("k", k), _positive_int("n", n)
    if not isinstance(row, int) or isinstance(row, bool) or not 0 <= row < m:
        raise InvalidArgument("row", row, f"an output row in [0, {m})")
    if not isinstance(col, int) or isinstance(col, bool) or not 0 <= col < n:
        raise InvalidArgument("col", col, f"an output column in [0, {n})")
    if masked not in ("a", "b"):
        raise InvalidArgument("masked", masked, "'a' (a row of A) or 'b' (a column of B)")
    convert = _converter(_backend(fn, backend), device)

    def call(x: NDArray[Any]) -> Any:
        other = _other_operand(x, scales_both(x.dtype.name, scale))
        a = np.ones((m, k), dtype=x.dtype)
        b = np.ones((k, n), dtype=x.dtype)
        a[row, :], b[:, col] = (x, other) if masked == "a" else (other, x)
        return fn(convert(a), convert(b))[row][col]

    return OrderImpl(
        call,
        description=f"matmul_of({_name(fn)}, {m}, {k}, {n}, row={row}, col={col}, "
        f"masked={masked!r})",
        length=k,
        accumulator=accumulator,
        scale=scale,
        products=True,
    )
