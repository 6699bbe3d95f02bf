"""Arrays of Arb balls: the arithmetic under the ``"arb"`` oracle and ``fp.exact_reference``.

Ball arithmetic (Johansson, "Arb: efficient arbitrary-precision midpoint-radius interval
arithmetic", IEEE Trans. Computers 66(8), 2017): a real number is held as a ball ``[m +/- r]``
(a binary midpoint of ``prec`` bits and a radius), and every operation returns a ball that
contains the exact result of the operation applied to every point of its operand balls. A
result's radius therefore bounds the oracle's own error rigorously; the mpmath oracle's result
carries no such statement.

The arrays here are NumPy object arrays of ``flint.arb``; the rules:

* conversion in (:func:`to_balls`) is exact: a float64 value becomes the point ball of that value
  (+-inf become Arb's infinities, NaN Arb's NaN);
* element-wise functions run as NumPy loops over the Arb method (:data:`UNARY`), never a Python
  loop of ours; products and sums run as ``arb_mat`` products (:func:`matmul`, :func:`sum_axes`),
  one matrix call per matrix (per batch entry), which also makes them sharper (Arb's dot products
  round once per result, not once per term);
* maximum / minimum take Arb's ball maximum (``arb.max``), which encloses the maximum of every
  pair of points; comparisons are decided only when the balls are disjoint (or equal points) and
  otherwise ask for more precision (:class:`Imprecise`);
* an operation on finite balls that returns a non-finite ball (a division by a ball containing
  0, a logarithm of a ball reaching 0) raises :class:`Imprecise` naming the operation: more
  precision may separate the ball from 0; where every operand is a point, no precision can, and
  :class:`OraclePrecisionError` is raised at once;
* conversion out is correctly rounded: :func:`nearest` rounds each midpoint to the nearest
  float64 (subnormals included, where ``float(arb)`` would flush), :func:`enclosure` rounds the
  ball's ends outward.

:func:`adaptive` is the precision rule: evaluate at 64 bits beyond the widest input format's
precision, double until every finite result ball's relative radius is below the target (2**-60
unless the caller asks otherwise) or its radius is below 2**-1080 (far below the smallest float64
subnormal, so every point of it rounds to the same float64 neighbourhood of 0), and raise
:class:`OraclePrecisionError`, naming the operation that was too wide, once the cap is reached.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from flint import arb, arb_mat, ctx
from numpy.typing import NDArray

from ..errors import FPCheckError

__all__ = [
    "DEFAULT_MAX_BITS",
    "DEFAULT_REL_RADIUS",
    "UNARY",
    "Imprecise",
    "OraclePrecisionError",
    "adaptive",
    "all_finite",
    "ball_maximum",
    "ball_minimum",
    "check_finite",
    "compare",
    "enclosure",
    "matmul",
    "nearest",
    "start_bits",
    "sum_axes",
    "to_balls",
    "working_precision",
]

DEFAULT_REL_RADIUS = 2.0**-60
DEFAULT_MAX_BITS = 4096
_EXTRA_BITS = 64
_TINY_RADIUS = arb(2) ** -1080
_SMALLEST_NORMAL = 2.0**-1022

Balls = Any  # a NumPy object array of flint.arb (Python ints for integer data)
T = TypeVar("T")


class OraclePrecisionError(FPCheckError):
    """Ball arithmetic could not make a result narrow: the operation named in the message gave
    a ball too wide (or not finite) at the highest precision allowed."""

    def __init__(self, op: str, why: str, bits: int) -> None:
        self.op = op
        self.bits = bits
        super().__init__(
            f"the arb oracle cannot make the result of operation {op!r} narrow: {why} (at "
            f"{bits} bits of working precision). Pass oracle='fp64' or oracle=<callable>, or "
            "rewrite the reference so that it does not divide by (or take a logarithm of) a "
            "quantity that is 0 for these inputs."
        )


class Imprecise(Exception):
    """Raised inside an evaluation when an operation's ball is not finite; :func:`adaptive`
    retries at twice the precision."""

    def __init__(self, op: str, why: str) -> None:
        self.op = op
        self.why = why
        super().__init__(f"{op}: {why}")


@contextmanager
def working_precision(bits: int) -> Iterator[None]:
    """Arb's global working precision set to ``bits`` inside the block, restored after it.

    The precision is python-flint's process-wide context: evaluations on several threads at once
    (``dual_delta(executor=ThreadPoolExecutor())``) may run at one another's precision. Their
    balls stay enclosures at any precision, and :func:`adaptive` checks the result's width after
    the evaluation, so this costs at most a retry, never a wrong ball."""
    saved = ctx.prec
    ctx.prec = bits
    try:
        yield
    finally:
        ctx.prec = saved


def start_bits(precisions: Sequence[int]) -> int:
    """64 bits beyond the widest input format's precision (float64's 53 when there is none)."""
    return _EXTRA_BITS + max(precisions, default=53)


def _point(value: float) -> arb:
    if math.isfinite(value):
        return arb(value)
    if math.isnan(value):
        return arb.nan()
    return arb.pos_inf() if value > 0 else arb.neg_inf()


_TO_BALL = np.frompyfunc(_point, 1, 1)
_ARB = np.frompyfunc(arb, 1, 1)
_REL_BITS = np.frompyfunc(arb.rel_accuracy_bits, 1, 1)
_FLOAT = np.frompyfunc(float, 1, 1)
_IS_FINITE = np.frompyfunc(arb.is_finite, 1, 1)
_IS_EXACT = np.frompyfunc(arb.is_exact, 1, 1)
_LOWER = np.frompyfunc(arb.lower, 1, 1)
_UPPER = np.frompyfunc(arb.upper, 1, 1)
_MID = np.frompyfunc(arb.mid, 1, 1)
_MAX = np.frompyfunc(arb.max, 2, 1)
_MIN = np.frompyfunc(arb.min, 2, 1)


def to_balls(values: NDArray[Any]) -> Balls:
    """The point balls of a float64 (or integer) array's values, exactly."""
    array = np.asarray(values)
    if array.dtype.kind in "iub":
        return array.astype(object)
    exact = array.astype(np.float64)
    convert = _ARB if np.isfinite(exact).all() else _TO_BALL  # arb(float) is exact
    return np.asarray(convert(exact), dtype=object)


def _as_ball(value: Any) -> Any:
    return _point(value) if isinstance(value, float) else value


UNARY: dict[str, Callable[[Balls], Balls]] = {
    name: np.frompyfunc(getattr(arb, name), 1, 1)
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
        "asin",
        "acos",
        "sinh",
        "cosh",
        "tanh",
        "atanh",
        "asinh",
        "acosh",
        "erf",
        "erfc",
    )
}


def ball_maximum(a: Any, b: Any) -> Balls:
    """Element-wise ball maximum: contains max(x, y) for every x in a, y in b."""
    return _MAX(_as_ball_array(a), _as_ball_array(b))


def ball_minimum(a: Any, b: Any) -> Balls:
    """Element-wise ball minimum: contains min(x, y) for every x in a, y in b."""
    return _MIN(_as_ball_array(a), _as_ball_array(b))


def reduce_maximum(values: Balls, axis: int | tuple[int, ...] | None, keepdims: bool) -> Balls:
    """The ball maximum over ``axis`` (all axes for None)."""
    return _reduce(_MAX, values, axis, keepdims)


def reduce_minimum(values: Balls, axis: int | tuple[int, ...] | None, keepdims: bool) -> Balls:
    """The ball minimum over ``axis`` (all axes for None)."""
    return _reduce(_MIN, values, axis, keepdims)


def _reduce(
    ufunc: np.ufunc, values: Balls, axis: int | tuple[int, ...] | None, keepdims: bool
) -> Balls:
    array = np.asarray(values, dtype=object)
    axes = tuple(range(array.ndim)) if axis is None else np.atleast_1d(axis).tolist()
    result = array
    for single in sorted((a % max(array.ndim, 1) for a in axes), reverse=True):
        result = ufunc.reduce(result, axis=single, keepdims=keepdims)
    return np.asarray(result, dtype=object)


def _as_ball_array(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.dtype != object:
        return to_balls(value)
    return _as_ball(value)


def _decide(a: Any, b: Any, op: str) -> bool:
    a, b = _as_ball(a), _as_ball(b)
    if not isinstance(a, arb) and not isinstance(b, arb):
        return bool(getattr(a, op)(b))
    a = a if isinstance(a, arb) else arb(a)
    b = b if isinstance(b, arb) else arb(b)
    if op in ("__eq__", "__ne__"):
        if a == b:
            return op == "__eq__"
        if not a.overlaps(b):
            return op == "__ne__"
    else:
        if getattr(a, op)(b):
            return True
        negation = {"__lt__": "__ge__", "__le__": "__gt__", "__gt__": "__le__", "__ge__": "__lt__"}
        if getattr(a, negation[op])(b):
            return False
    raise Imprecise(f"comparison {op.strip('_')}", "the balls overlap")


_COMPARISONS = {
    op: np.frompyfunc(lambda a, b, op=op: _decide(a, b, op), 2, 1)
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__")
}


def compare(a: Any, b: Any, op: str) -> NDArray[np.bool_]:
    """Element-wise comparison ``op`` (``"__lt__"``, ...), decided by the balls; overlapping
    balls raise :class:`Imprecise`."""
    return np.asarray(_COMPARISONS[op](a, b), dtype=bool)


def _to_matrix(values: Balls) -> arb_mat:
    rows, cols = values.shape
    return arb_mat(rows, cols, values.ravel().tolist())  # floats and ints enter exactly


def _from_matrix(matrix: arb_mat) -> Balls:
    rows, cols = matrix.nrows(), matrix.ncols()
    # fromiter: np.array(list) probes each arb for the sequence protocol, 30x slower
    return np.fromiter(matrix.entries(), dtype=object, count=rows * cols).reshape(rows, cols)


def matmul(a: Balls, b: Balls) -> Balls:
    """``a @ b`` with NumPy's matmul broadcasting: one ``arb_mat`` product per matrix pair."""
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    vector_a, vector_b = a.ndim == 1, b.ndim == 1
    if vector_a:
        a = a[None, :]
    if vector_b:
        b = b[:, None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    b = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    out = np.empty((*batch, a.shape[-2], b.shape[-1]), dtype=object)
    for index in np.ndindex(*batch):
        if a.shape[-1] == 0:
            out[index] = np.full((a.shape[-2], b.shape[-1]), arb(0), dtype=object)
            continue
        out[index] = _from_matrix(_to_matrix(a[index]) * _to_matrix(b[index]))
    if vector_a:
        out = out[..., 0, :]
    if vector_b:
        out = out[..., 0]
    return out if out.ndim else out[()]


def sum_axes(values: Balls, axis: int | tuple[int, ...] | None, keepdims: bool = False) -> Balls:
    """The sum over ``axis`` (all axes for None), as one ``arb_mat`` product with a column of
    ones (each sum rounded once)."""
    array = np.asarray(values, dtype=object)
    axes = tuple(range(array.ndim)) if axis is None else tuple(np.atleast_1d(axis).tolist())
    axes = tuple(sorted({a % max(array.ndim, 1) for a in axes})) if array.ndim else ()
    kept = [a for a in range(array.ndim) if a not in axes]
    moved = np.transpose(array, (*kept, *axes)) if array.ndim else array
    kept_shape = tuple(array.shape[a] for a in kept)
    count = math.prod(array.shape[a] for a in axes)
    rows = moved.reshape(math.prod(kept_shape), count)
    if count == 0 or rows.shape[0] == 0:
        total = np.full(rows.shape[0], arb(0), dtype=object)
    else:
        total = _from_matrix(_to_matrix(rows) * arb_mat(count, 1, [1] * count))[:, 0]
    result = total.reshape(kept_shape)
    if keepdims:
        result = result.reshape([1 if a in axes else n for a, n in enumerate(array.shape)])
    return result if result.ndim else result[()]


def all_finite(values: Balls) -> bool:
    """Whether every ball is finite."""
    return bool(_flat_balls(values)[1].all())


def check_finite(op: str, operands: Sequence[Any], result: Balls) -> None:
    """Raise when finite operand balls gave a non-finite result ball (module docstring)."""
    flags = np.asarray(_IS_FINITE(np.asarray(result, dtype=object)), dtype=bool)
    if flags.all():
        return
    arrays = [np.asarray(x, dtype=object) for x in operands if _holds_balls(x)]
    if not all(np.asarray(_IS_FINITE(x), dtype=bool).all() for x in arrays):
        return  # non-finite inputs propagate as Arb's infinities and NaN
    why = "finite operands gave a ball that is not finite (a division by a ball containing 0?)"
    if all(np.asarray(_IS_EXACT(x), dtype=bool).all() for x in arrays):
        raise OraclePrecisionError(
            op, "its exact result is not a finite real number for these inputs", ctx.prec
        )
    raise Imprecise(op, why)


def _holds_balls(value: Any) -> bool:
    if isinstance(value, arb):
        return True
    return isinstance(value, np.ndarray) and value.dtype == object


def _exact_float(point: arb) -> float:
    """A point ball (an exact binary number) rounded to the nearest float64, ties to even, by
    Python's correctly rounded integer division (subnormals and overflow included)."""
    mantissa, exponent = (int(part) for part in point.man_exp())
    try:
        if exponent >= 0:
            return float(mantissa << exponent)
        return mantissa / (1 << -exponent)
    except OverflowError:
        return math.copysign(math.inf, mantissa)


_EXACT_FLOAT = np.frompyfunc(_exact_float, 1, 1)


def _round_points(points: Balls) -> NDArray[np.float64]:
    """Point balls rounded to the nearest float64 (``float(arb)`` where it is right, the exact
    rule in the subnormal range, where it flushes)."""
    rounded = np.asarray(_FLOAT(points), dtype=np.float64)
    small = np.abs(rounded) < _SMALLEST_NORMAL
    if small.any():
        middles = np.asarray(_MID(points[small]), dtype=object)
        rounded[small] = np.asarray(_EXACT_FLOAT(middles), dtype=np.float64)
    return rounded


def _ensure(value: Any) -> arb:
    if isinstance(value, arb):
        return value
    return _point(value) if isinstance(value, float) else arb(value)


_ENSURE = np.frompyfunc(_ensure, 1, 1)


def _flat_balls(values: Balls) -> tuple[Balls, NDArray[np.bool_]]:
    """``values`` flattened, every element an arb (Python numbers converted exactly), and which
    balls are finite."""
    array = np.asarray(values, dtype=object).reshape(-1)
    if not array.size:
        return array, np.empty(0, dtype=bool)
    try:
        finite = _IS_FINITE(array)
    except TypeError:  # a Python number among the balls
        array = np.asarray(_ENSURE(array), dtype=object)
        finite = _IS_FINITE(array)
    return array, np.asarray(finite, dtype=bool)


def nearest(values: Balls) -> NDArray[np.float64]:
    """Each ball's midpoint rounded to the nearest float64; NaN where the ball is not finite and
    its midpoint is (the whole line or NaN), +-inf where the midpoint is infinite."""
    shape = np.shape(values)
    balls, finite = _flat_balls(values)
    if not balls.size:
        return np.empty(shape)
    rounded = _round_points(balls)  # float(arb) rounds the midpoint
    rounded[~finite & np.isfinite(rounded)] = np.nan
    return rounded.reshape(shape)


def _outward(points: Balls, direction: float) -> NDArray[np.float64]:
    """Exact points rounded toward ``direction`` (-inf: down, +inf: up)."""
    rounded = _round_points(points)
    finite = np.isfinite(rounded)
    candidates = np.asarray(_ARB(rounded[finite]), dtype=object)  # exact, as points
    beyond = np.greater if direction < 0 else np.less  # arb comparisons of points are decided
    off = np.asarray(beyond(candidates, points[finite]), dtype=bool)
    stepped = rounded[finite]
    with np.errstate(over="ignore"):  # past the largest finite float: an infinity, rightly
        stepped[off] = np.nextafter(stepped[off], direction)
    rounded[finite] = stepped
    overflowed = np.isinf(rounded) & (np.sign(rounded) != np.sign(direction))
    rounded[overflowed] = np.copysign(np.finfo(np.float64).max, rounded[overflowed])
    return rounded


def enclosure(values: Balls) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Float64 ends ``lo <= every point of the ball <= hi``, rounded outward; the whole line
    where a ball is not finite."""
    shape = np.shape(values)
    balls, finite = _flat_balls(values)
    lo = np.full(balls.size, -np.inf)
    hi = np.full(balls.size, np.inf)
    if finite.any():
        lo[finite] = _outward(np.asarray(_LOWER(balls[finite]), dtype=object), -np.inf)
        hi[finite] = _outward(np.asarray(_UPPER(balls[finite]), dtype=object), np.inf)
    return lo.reshape(shape), hi.reshape(shape)


def _narrow(ball: Any, bits: int) -> bool:
    if not isinstance(ball, arb):
        return True
    if not ball.is_finite():
        return True  # non-finite inputs propagated; check_finite rejected every other case
    return bool(ball.rel_accuracy_bits() >= bits or ball.rad() <= _TINY_RADIUS)


_NARROW = np.frompyfunc(_narrow, 2, 1)


def wide_count(values: Balls, rel_radius: float) -> int:
    """How many balls are wider than ``rel_radius`` (relative) and 2**-1080 (absolute)."""
    bits = math.ceil(-math.log2(rel_radius)) + 1
    array = np.asarray(values, dtype=object).reshape(-1)
    if not array.size:
        return 0
    try:
        accuracy = _REL_BITS(array)
    except TypeError:  # a Python number among the balls
        array = np.asarray(_ENSURE(array), dtype=object)
        accuracy = _REL_BITS(array)
    suspects = array[np.asarray(accuracy, dtype=np.int64) < bits]
    if not suspects.size:
        return 0
    flags = np.asarray(_NARROW(suspects, bits), dtype=bool)
    return int(flags.size - np.count_nonzero(flags))


def adaptive(
    evaluate: Callable[[], T],
    results: Callable[[T], Sequence[Balls]],
    *,
    first_bits: int,
    rel_radius: float = DEFAULT_REL_RADIUS,
    max_bits: int = DEFAULT_MAX_BITS,
    what: str = "the result",
) -> T:
    """Run ``evaluate()`` at ``first_bits``, doubling the precision until every ball of
    ``results(value)`` is narrow (module docstring); raise :class:`OraclePrecisionError` at
    ``max_bits``."""
    bits = first_bits
    while True:
        try:
            with working_precision(bits):
                value = evaluate()
            wide = sum(wide_count(balls, rel_radius) for balls in results(value))
        except Imprecise as signal:
            if bits >= max_bits:
                raise OraclePrecisionError(signal.op, signal.why, bits) from None
        else:
            if wide == 0:
                return value
            if bits >= max_bits:
                raise OraclePrecisionError(
                    what,
                    f"{wide} ball(s) still have a relative radius above {rel_radius:.3g}",
                    bits,
                )
        bits = min(2 * bits, max_bits)
