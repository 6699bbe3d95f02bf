"""``fp.track()``: rigorous round-off bounds recorded beside a real PyTorch run (RENDER III-A).

Inside ``with fp.track():`` every ATen operation on this thread runs as usual; afterwards its
floating results get an enclosure of every value they could hold had each floating-point
operation since the inputs (taken as exact) rounded in any legal way and summed in any order.
Rules come from the registry (:mod:`pytest_fpcheck.tracking.torch_rules`); an operation with a
floating operand and no rule raises ``UnsupportedOperation``; views need no rule (bounds live
beside storages). Nested trackers: the innermost one's settings apply.

Layer-level analysis (RENDER III-C-1): ``track(assume={tensor: bounds})`` seeds the analysis
with given enclosures, typically :func:`hull` of two programs' activations at the first layer
where they differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from ..adapters import is_torch_tensor
from ..adapters.torch import dtype_format, internal, tensor_to_float64
from ..errors import InvalidArgument, StaleBoundsError, UnsupportedOperation
from ..formats import FORMATS
from ..interval.bounds import Bounds, Provenance
from ..interval.core import Interval
from ..interval.kernels import summary
from ..interval.registry import lookup
from . import torch_rules as _torch_rules  # noqa: F401  (registers the rules)
from .context import RuleContext
from .interpose import Interposer, OpCall
from .interpreter import scope as kernels
from .policy import SumBound
from .store import STORE, Record
from .substitutes import SUBSTITUTES

__all__ = ["MODES", "Tracker", "bounds_of", "hull", "roundoff_bounds", "track"]

MODES = ("rigorous", "probabilistic")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _storage_ids(tensors: list[torch.Tensor]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors if t.untyped_storage().nbytes()}


class Tracker(Interposer):
    """The dispatch mode behind :func:`track`. ``mode``, ``order`` and ``ops`` (how many
    operations it bounded) are public."""

    def __init__(
        self,
        *,
        mode: str = "rigorous",
        order: Any = None,
        assume: Mapping[Any, Any] | None = None,
        matmul_model: Any = None,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise InvalidArgument("mode", mode, f"one of {', '.join(map(repr, MODES))}")
        if order is not None and not (hasattr(order, "n") and hasattr(order, "error_factor")):
            raise InvalidArgument("order", order, "a SummationTree from fp.reveal_order (or None)")
        self.mode = mode
        self.order = order
        self.sums = SumBound(mode, order, _matmul_models(matmul_model))
        self.assume = dict(assume or {})
        self.ops = 0
        for tensor, bounds in self.assume.items():
            if not is_torch_tensor(tensor):
                raise InvalidArgument("assume", tensor, "a mapping from torch tensors to Bounds")
            if not isinstance(bounds, Bounds):
                raise InvalidArgument(
                    f"assume[{tuple(tensor.shape)}]", bounds, "a Bounds (e.g. from fp.hull)"
                )
            if bounds.shape != tuple(tensor.shape):
                raise InvalidArgument(
                    f"assume[{tuple(tensor.shape)}]",
                    bounds,
                    f"Bounds of shape {tuple(tensor.shape)}",
                )

    @contextlib.contextmanager
    def reentered(self) -> Iterator[None]:
        """Make this tracker see the operations run inside the block, even from within the
        handling of another operation (for substitutes)."""
        active = type(self)._active
        depth = getattr(active, "depth", 0)
        active.depth = 0
        try:
            with self:
                yield
        finally:
            active.depth = depth

    def __enter__(self) -> Tracker:
        kernels.attach()
        super().__enter__()
        for tensor, bounds in self.assume.items():
            STORE.write(
                tensor,
                Interval(bounds.lo, bounds.hi),
                provenance=bounds.provenance,
                mode=self.mode,
                notes=(*bounds.notes, "seeded by track(assume=...)"),
            )
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        kernels.detach()

    def handle(self, call: OpCall, run: Callable[[], Any]) -> Any:
        substitute = SUBSTITUTES.get(call.packet)
        if substitute is not None:
            with self.reentered():
                return substitute(*call.args, **call.kwargs)
        rule = lookup(call.name, call.packet)
        if rule is None and _decomposable(call.func):
            # a composite operation reaching the mode undecomposed (from inside another
            # operation's decomposition): its parts, which have rules
            with self.reentered():
                return call.func.decompose(*call.args, **call.kwargs)
        inputs = _tensors(call.args) + _tensors(call.kwargs)
        mutable = call.func._schema.is_mutable
        stale_notes: list[str] = []
        records = [(t, _current_record(t, call, stale_notes)) for t in inputs]
        snapshot: dict[int, Interval] = {}
        if mutable:
            for t, record in records:
                if record is not None or dtype_format(t.dtype) is not None:
                    snapshot[id(t)] = _snapshot(t, record)
        out = run()
        outputs = _tensors(out)
        if not outputs:
            return out
        if not mutable and _storage_ids(outputs) <= _storage_ids(inputs):
            return out  # a view: its bounds already live beside the storage
        tracked = any(r is not None for _, r in records)
        floating_in = any(dtype_format(t.dtype) is not None for t in inputs)
        if rule is None:
            if not tracked and not floating_in:
                return out  # a factory or an integer operation on exact inputs
            raise UnsupportedOperation(call.name, where=call.location or None)
        ctx = RuleContext(call, out, self.sums, snapshot)
        ctx.notes.extend(stale_notes)
        result = rule(ctx)
        if any(r is not None and r.unbounded for _, r in records) or any(
            _unbounded(i) for i in snapshot.values()
        ):
            result = _propagate_nan(ctx, inputs, result)
        self.ops += 1
        self._record(ctx, outputs, result, [r for _, r in records if r is not None], mutable)
        return out

    def _record(
        self,
        ctx: RuleContext,
        outputs: list[torch.Tensor],
        result: Any,
        inherited: list[Record],
        in_place: bool,
    ) -> None:
        intervals = result if isinstance(result, (tuple, list)) else (result,)
        provenance = Provenance().merge(*(r.provenance for r in inherited))
        notes = tuple(dict.fromkeys([n for r in inherited for n in r.notes] + ctx.notes))
        inherited_radius = max((r.max_radius for r in inherited), default=0.0)
        handed_over: set[int] = set()
        for tensor, interval in zip(outputs, intervals, strict=False):
            if interval is None:
                continue
            if interval.is_point and not STORE.has_record(tensor):
                continue  # exact and never tracked: nothing to say
            # a rule's result arrays become the record's buffers (no copy) unless another
            # output already took them
            ends = {id(interval.lo), id(interval.hi)}
            owned = not ends & handed_over
            handed_over |= ends
            record = STORE.write(
                tensor,
                interval,
                provenance=provenance,
                mode=self.mode,
                notes=notes,
                in_place=in_place,
                owned=owned,
            )
            covered = record.lo.size == tensor.numel()
            radius = record.max_radius if covered else summary(interval.lo, interval.hi)[0]
            own = max(radius - inherited_radius, 0.0)
            record.provenance = provenance.merge(site=ctx.call.site, widening=own)


def _decomposable(func: torch._ops.OpOverload) -> bool:
    """Whether the operation has a composite kernel (PyTorch's decomposition into other
    operations, run by ``OpOverload.decompose``)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
    )


def _current_record(t: torch.Tensor, call: OpCall, notes: list[str]) -> Record | None:
    """The record of an operand. One modified outside tracking since its bounds were recorded
    is an input again: its record is dropped, its current value taken as exact, and the
    operation's bounds carry a note saying so (``bounds_of`` on it still raises)."""
    try:
        return STORE.record_of(t)
    except StaleBoundsError:
        STORE.forget(t)
        notes.append(
            f"{call.site}: an operand of shape {tuple(t.shape)} was modified outside tracking "
            "after its bounds were recorded; its current value was taken as exact"
        )
        return None


def _unbounded(interval: Interval) -> bool:
    return not interval.is_point and bool(
        (np.isneginf(interval.lo) & np.isposinf(interval.hi)).any()
    )


def _propagate_nan(ctx: RuleContext, inputs: list[torch.Tensor], result: Any) -> Any:
    """Where an input element may be NaN (its enclosure is the whole line), run the operation
    itself on NaN markers (float64 copies with NaN there) and make every output element the
    operation turns into NaN the whole line too: NaN propagates exactly as PyTorch does it."""
    markers: dict[int, torch.Tensor] = {}
    for t in inputs:
        if dtype_format(t.dtype) is None or id(t) in markers:
            continue
        enclosure = ctx.interval(t)
        values = np.array(ctx.values(t), dtype=np.float64)
        values = np.broadcast_to(values, enclosure.shape).copy()
        values[np.isneginf(enclosure.lo) & np.isposinf(enclosure.hi)] = np.nan
        markers[id(t)] = torch.from_numpy(values)

    def swap(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return markers.get(id(value), value)
        if isinstance(value, (list, tuple)):
            return type(value)(swap(v) for v in value)
        return value

    kwargs = {k: swap(v) for k, v in ctx.kwargs.items() if k != "out"}
    with internal(), torch.no_grad():
        marked = ctx.call.func(*swap(ctx.args), **kwargs)
    intervals = list(result) if isinstance(result, (tuple, list)) else [result]
    for position, output in enumerate(_tensors(marked)[: len(intervals)]):
        interval = intervals[position]
        if interval is None or dtype_format(output.dtype) is None:
            continue
        nan = np.isnan(output.to(torch.float64).numpy())
        if nan.any():
            lo = np.where(nan, -np.inf, np.broadcast_to(interval.lo, nan.shape))
            hi = np.where(nan, np.inf, np.broadcast_to(interval.hi, nan.shape))
            intervals[position] = Interval(lo, hi)
    return tuple(intervals)


def _snapshot(t: torch.Tensor, record: Record | None) -> Interval:
    """An in-place operation overwrites its operand: read its enclosure (copied) first."""
    if record is not None:
        current = STORE.read(t)
        assert current is not None
        if current.is_point:
            return Interval.point(current.lo.copy())
        return Interval(current.lo.copy(), current.hi.copy())
    with internal(), torch.no_grad():
        return Interval.point(t.detach().to("cpu", torch.float64).numpy().copy())


def _matmul_models(value: Any) -> tuple[Any, ...]:
    """``track(matmul_model=...)``: a MatmulFeatures (``fp.probe_matmul``), a dict of
    ``fp.emulate.fused_matmul`` parameters with ``in_dtype``/``out_dtype``, or a list of them
    (one per input format)."""
    models = value if isinstance(value, (list, tuple)) else ([] if value is None else [value])
    for model in models:
        features = all(hasattr(model, a) for a in ("in_dtype", "block_width", "summary"))
        parameters = isinstance(model, dict) and {"in_dtype", "out_dtype"} <= set(model)
        if not (features or parameters):
            raise InvalidArgument(
                "matmul_model",
                model,
                "a MatmulFeatures (fp.probe_matmul), a dict of fp.emulate.fused_matmul "
                "parameters with in_dtype and out_dtype, or a list of them",
            )
    return tuple(models)


def track(
    *,
    mode: str = "rigorous",
    order: Any = None,
    assume: Mapping[Any, Any] | None = None,
    matmul_model: Any = None,
) -> Tracker:
    """Record round-off enclosures for what PyTorch computes inside the ``with`` block.

    ``mode="probabilistic"`` replaces gamma_n in sums and products by Higham and Mary's
    probabilistic bound (lambda = 6: each bounded sum fails with probability at most 3.1e-8
    if rounding errors are independent and mean zero); other rules stay rigorous. ``order`` is
    a ``SummationTree`` (``fp.reveal_order``) whose error factor replaces gamma_n for sums and
    dot products of its length. ``assume`` seeds tensors with given ``Bounds``. ``matmul_model``
    (issue 9: a ``MatmulFeatures`` from ``fp.probe_matmul``, or ``fp.emulate.fused_matmul``
    parameters) bounds matmuls of its input format by the fused-summation model of that
    hardware instead of the generic any-order bound."""
    return Tracker(mode=mode, order=order, assume=assume, matmul_model=matmul_model)


def bounds_of(x: Any) -> Bounds | None:
    """The recorded enclosure of ``x``, or None when tracking never produced it.

    Raises StaleBoundsError when ``x`` was modified in place after its bounds were recorded."""
    if not is_torch_tensor(x):
        return None
    record = STORE.record_of(x)
    if record is None:
        return None
    interval = STORE.read(x)
    assert interval is not None
    assert record.format is not None
    value = tensor_to_float64(x, argument="x")
    lo = np.array(interval.lo, dtype=np.float64)
    hi = lo.copy() if interval.is_point else np.array(interval.hi, dtype=np.float64)
    return Bounds(
        lo, hi, value, x.dtype, record.format, record.provenance, record.mode, record.notes
    )


def _bounds_or_point(x: torch.Tensor) -> Bounds:
    found = bounds_of(x)
    if found is not None:
        return found
    value = tensor_to_float64(x, argument="result")
    fmt = dtype_format(x.dtype) or FORMATS["float64"]
    return Bounds(
        value.copy(), value.copy(), value, x.dtype, fmt, notes=("exact: no rounding produced it",)
    )


def _tree_map(value: Any, leaf: Callable[[torch.Tensor], Bounds]) -> Any:
    if isinstance(value, torch.Tensor):
        return leaf(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_tree_map(v, leaf) for v in value)
    if isinstance(value, dict):
        return {k: _tree_map(v, leaf) for k, v in value.items()}
    return value


def roundoff_bounds(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` under :func:`track` and return the Bounds of what it returns
    (a Bounds, or the same list/tuple/dict structure of them)."""
    if not callable(fn):
        raise InvalidArgument("fn", fn, "a callable returning tensors")
    with track():
        result = fn(*args, **kwargs)
    if not _tensors(result):
        raise InvalidArgument(
            "fn",
            fn,
            "a callable that returns a tensor (or a structure of tensors)",
            hint=f"It returned {type(result).__name__}. For a Triton launch, return the output "
            "argument: lambda: (kernel[grid](x, out), out)[1].",
        )
    return _tree_map(result, _bounds_or_point)


def hull(a: Any, b: Any) -> Bounds:
    """The element-wise hull [min(a, b), max(a, b)] of two programs' activations, as Bounds of
    ``a`` (RENDER III-C-1): seed ``track(assume={a: fp.hull(a, b)})`` with it to start an
    analysis at the first layer where the programs differ."""
    from ..adapters import as_float64, storage_format

    va, vb = as_float64(a, argument="a"), as_float64(b, argument="b")
    if va.shape != vb.shape:
        raise InvalidArgument("b", b, f"an array of shape {va.shape}, like a")
    fmt = storage_format(a, argument="a")
    return Bounds(
        np.minimum(va, vb),
        np.maximum(va, vb),
        va,
        getattr(a, "dtype", np.float64),
        fmt,
        notes=("hull of two programs' values",),
    )
