"""Reductions and scans of instrumented kernels (``tl.sum``, ``tl.max``, ``tl.argmax``,
``tl.reduce``, ``tl.cumsum``, ``tl.associative_scan``).

The interpreter evaluates these outside its builder (``ReduceOps``/``ScanOps``); the subclasses
here compute the interpreter's result and then its enclosure. A compiled kernel reduces in a
tree whose shape depends on the layout, so every bound holds for any order:

* sums: the order-free gamma_{n-1} bound of :func:`pytest_fpcheck.interval.linalg.reduce_sum`
  in the reduction's type (``tl.sum`` keeps a float16 or bfloat16 input's format unless its
  ``dtype=`` asks for another, a cast the builder rules bound); prefix sums bound each prefix
  of j terms the same way;
* max and min: exact, the interval max/min over the axis; ``argmax``/``argmin`` are exact where
  one element's interval lies above (below) all others, and rounding-dependent elsewhere;
* ``tl.reduce``/``tl.associative_scan`` with a user combine function: the function is traced once
  on two scalars; a single floating add, maximum or minimum of its arguments is bounded as above.
  Any other floating combine raises ``UnsupportedOperation``: its result depends on the
  reduction tree in ways no rule here bounds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...formats import Format
from ...interval import elementwise as ew
from ...interval.core import Interval, gamma
from ...interval.linalg import may_overflow, reduce_sum
from ...interval.rounding import down, up
from . import handles as h

__all__ = ["combine_kind", "instrumented_reduce_ops", "instrumented_scan_ops"]

_U64 = 2.0**-53
_TRACE = threading.local()
_KINDS: dict[int, str | None] = {}
_CALLS = {"fadd": "sum", "maximumf": "max", "maxnumf": "max", "minimumf": "min", "minnumf": "min"}


def record_call(name: str, args: tuple[Any, ...]) -> None:
    """Called by the builder hooks: remember builder calls while a combine is traced."""
    calls = getattr(_TRACE, "calls", None)
    if calls is not None:
        calls.append((name, args))


def combine_kind(combine_fn: Any, dtype: Any, tl: Any) -> str | None:
    """'sum', 'max' or 'min' when ``combine_fn(a, b)`` is one such operation of its two
    floating arguments; None otherwise (cached per function)."""
    key = id(combine_fn)
    if key in _KINDS:
        return _KINDS[key]
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    a = tl.core.tensor(TensorHandle(np.zeros(1, _get_np_dtype(dtype)), dtype), dtype)
    b = tl.core.tensor(TensorHandle(np.zeros(1, _get_np_dtype(dtype)), dtype), dtype)
    _TRACE.calls = []
    try:
        combine_fn.fn(a, b)
    finally:
        calls, _TRACE.calls = _TRACE.calls, None
    kind = None
    if len(calls) == 1:
        name, args = calls[0]
        operands = {id(x) for x in args[:2]}
        if name in _CALLS and operands == {id(a.handle), id(b.handle)}:
            kind = _CALLS[name]
    _KINDS[key] = kind
    return kind


def _prefix_bound(x: Interval, axis: int, fmt: Format) -> Interval:
    """Enclosures of every prefix sum along ``axis``, in any order within each prefix, computed
    in ``fmt``: the whole line from the first prefix whose partial sums may overflow (the
    rounded partial sums of j terms of magnitude sum S are at most S (1 + gamma_{j-1}); an
    infinity, or NaN, then propagates to every later prefix)."""
    u = fmt.unit_roundoff
    n = x.shape[axis]
    counts = np.arange(1, n + 1, dtype=np.float64).reshape(
        [n if i == axis else 1 for i in range(len(x.shape))]
    )
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.cumsum(x.magnitude(), axis=axis)
        nu = up((counts - 1) * u)
        g = np.where(nu < 1, up(nu / down(1 - nu)), np.inf)
        float64_error = 3 * gamma(n + 2, _U64)
        spread = up(up(magnitude * (1 + float64_error)) * (g + float64_error))
        spread = np.where(magnitude == 0, 0.0, spread)
        lo_sum = np.cumsum(x.lo, axis=axis)
        hi_sum = lo_sum if x.is_point else np.cumsum(x.hi, axis=axis)
        # the last rounding cannot overflow (rounding is monotone and the largest finite number
        # is on the grid): the operands of the last addition, at most S (1 + gamma_{j-2}), decide
        before = np.maximum(counts - 2, 0) * u
        grow = np.where(before < 1, up(before / down(1 - before)), np.inf)
        overflow = may_overflow(up(magnitude * (1 + float64_error)), grow, fmt.max_finite)
        lo = np.where(np.isnan(lo_sum) | overflow, -np.inf, down(lo_sum - spread))
        hi = np.where(np.isnan(hi_sum) | overflow, np.inf, up(hi_sum + spread))
    return Interval(lo, hi)


def instrumented_reduce_ops(
    base: type,
    tl: Any,
    active: Callable[[Any, Any], bool],
    rounded_sum: Callable[[Any, Any, int | None, bool], None],
) -> type:
    """A subclass of the interpreter's ``ReduceOps`` that attaches enclosures. ``active(before,
    after)`` says whether a launch is instrumented and records the widening from the input
    handles to the output handles (``after=None``: only ask); ``rounded_sum(x, output, axis,
    keep_dims)`` rounds a ``tl.sum`` at random in a stochastic-arithmetic launch."""

    class IntervalReduceOps(base):  # type: ignore[misc]
        def apply_impl(self, input: Any) -> Any:
            result = super().apply_impl(input)
            if self.combine_fn is tl.standard._sum_combine:
                rounded_sum(input[0].handle, result.handle, self.axis, self.keep_dims)
            if not active(None, None):
                return result
            if not any(h.is_floating(t.handle) for t in input):
                _taint_integers(input, result)
                return result
            kind = self._kind(input)
            outputs = result if isinstance(result, (tuple, list)) else (result,)
            x = input[0]
            fmt = h.format_of_type(x.handle.dtype)
            values = h.interval_of(x.handle, fmt)
            axes = tuple(range(len(values.shape))) if self.axis is None else (self.axis,)
            if kind == "sum":
                bound = reduce_sum(
                    values, axes, self.keep_dims, fmt,
                    lambda n: gamma(n - 1, fmt.unit_roundoff), accumulate=fmt,
                )  # fmt: skip
                h.set_interval(outputs[0].handle, _shaped(bound, outputs[0]))
            elif kind in ("max", "min", "argmax", "argmin"):
                pick = np.max if kind in ("max", "argmax") else np.min
                lo = pick(values.lo, axis=axes, keepdims=self.keep_dims)
                hi = pick(values.hi, axis=axes, keepdims=self.keep_dims)
                # a lane that may be NaN may propagate (compiled) or be skipped (interpreter)
                whole = np.any(
                    np.isneginf(values.lo) & np.isposinf(values.hi),
                    axis=axes,
                    keepdims=self.keep_dims,
                )
                lo, hi = np.where(whole, -np.inf, lo), np.where(whole, np.inf, hi)
                if kind in ("max", "min") or len(outputs) == 2:
                    h.set_interval(
                        outputs[0].handle,
                        _shaped(ew.everything_where_nan(Interval(lo, hi)), outputs[0]),
                    )
                if kind.startswith("arg"):
                    index = outputs[-1]
                    h.set_taint(index.handle, not _argument_decided(values, axes, kind))
            active([t.handle for t in input], [t.handle for t in outputs])
            return result

        def _kind(self, input: Any) -> str:
            standard = tl.standard
            if self.combine_fn is standard._sum_combine:
                return "sum"
            if self.combine_fn is standard._elementwise_max:
                return "max"
            if self.combine_fn is standard._elementwise_min:
                return "min"
            if self.combine_fn in (
                standard._argmax_combine_tie_break_left,
                standard._argmax_combine_tie_break_fast,
            ):
                return "argmax"
            if self.combine_fn in (
                standard._argmin_combine_tie_break_left,
                standard._argmin_combine_tie_break_fast,
            ):
                return "argmin"
            kind = None
            if len(input) == 1:
                kind = combine_kind(self.combine_fn, input[0].dtype, tl)
            if kind is None:
                raise _unsupported(self.combine_fn, "tl.reduce")
            return kind

    return IntervalReduceOps


def _taint_integers(input: Any, result: Any) -> None:
    """An integer reduction or scan of values that depend on rounding (tainted, or from a
    comparison rounding may flip: ``tl.sum((x > 0).to(tl.int32))``) depends on rounding."""
    if any(h.tainted(t.handle) or h.undecided(t.handle) is not None for t in input):
        for output in result if isinstance(result, (tuple, list)) else (result,):
            h.set_taint(output.handle, True)


def _argument_decided(values: Interval, axes: tuple[int, ...], kind: str) -> bool:
    """Whether the arg-extremum is the same for every choice of values in the intervals."""
    lo, hi = (values.lo, values.hi) if kind == "argmax" else (-values.hi, -values.lo)
    best_lo = np.max(lo, axis=axes, keepdims=True)
    rivals = np.sum(hi >= best_lo, axis=axes)
    exact_ties = np.all((lo == hi) | (hi < best_lo), axis=axes)
    return bool(np.all((rivals <= 1) | exact_ties))


def _shaped(bound: Interval, output: Any) -> Interval:
    shape = np.shape(output.handle.data)
    return Interval(np.reshape(bound.lo, shape), np.reshape(bound.hi, shape))


def _unsupported(combine_fn: Any, what: str) -> Exception:
    from ...errors import UnsupportedOperation

    name = getattr(getattr(combine_fn, "fn", combine_fn), "__name__", repr(combine_fn))
    return UnsupportedOperation(
        f"{what} with combine function {name!r}",
        how="tracking bounds combine functions that are one floating add, maximum or minimum "
        "of their arguments (its result depends on the reduction tree otherwise); run this "
        "kernel outside fp.track()",
    )


def instrumented_scan_ops(
    base: type,
    tl: Any,
    active: Callable[[Any, Any], bool],
    rounded_scan: Callable[[str, Any, Any, int, bool], None] | None = None,
) -> type:
    """A subclass of the interpreter's ``ScanOps`` that attaches enclosures;
    ``rounded_scan(kind, x, output, axis, reverse)`` rounds a ``tl.cumsum`` (``kind ==
    "cumsum"``) or ``tl.cumprod`` at random in a stochastic-arithmetic launch."""

    class IntervalScanOps(base):  # type: ignore[misc]
        def apply_impl(self, input: Any) -> Any:
            if not active(None, None) or not any(h.is_floating(t.handle) for t in input):
                result = super().apply_impl(input)
                standard = tl.standard
                if rounded_scan is not None and len(input) == 1:
                    scan = (
                        "cumsum"
                        if self.combine_fn is standard._sum_combine
                        else "cumprod"
                        if self.combine_fn is standard._prod_combine
                        else None
                    )
                    if scan is not None:
                        rounded_scan(
                            scan, input[0].handle, result[0].handle, self.axis, self.reverse
                        )
                if active(None, None):
                    _taint_integers(input, result)
                return result
            if self.combine_fn is tl.standard._sum_combine:
                kind: str | None = "sum"
            elif len(input) == 1:
                kind = combine_kind(self.combine_fn, input[0].dtype, tl)
            else:
                kind = None
            if kind is None:
                raise _unsupported(self.combine_fn, "tl.associative_scan")
            x = input[0]
            fmt = h.format_of_type(x.handle.dtype)
            values = h.interval_of(x.handle, fmt)
            result = super().apply_impl(input)
            axis = self.axis
            if self.reverse:
                values = values.map(lambda a: np.flip(a, axis=axis))
            if kind == "sum":
                bound = _prefix_bound(values, axis, fmt)
            else:
                running = np.maximum.accumulate if kind == "max" else np.minimum.accumulate
                bound = ew.everything_where_nan(
                    Interval(running(values.lo, axis=axis), running(values.hi, axis=axis))
                )
            if self.reverse:
                bound = Interval(np.flip(bound.lo, axis=axis), np.flip(bound.hi, axis=axis))
            h.set_interval(result[0].handle, bound.to_format(fmt))
            active([x.handle], [result[0].handle])
            return result

    return IntervalScanOps
