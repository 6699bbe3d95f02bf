"""The memory rules of the Triton instrumentation: loads read the bounds recorded for the memory
they address, stores record bounds (:class:`.memory.LaunchMemory`), atomics bound every
schedule, and memory operations without a rule refuse floating values. Addresses and masks that
depend on rounding are refused: the lanes not taken would not be bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...interval.core import Interval
from . import handles as h
from .launch import STATE, Launch
from .rules import KernelOp

__all__ = ["MEMORY_RULES", "float_atomic_extreme"]


def _element(ptrs: Any) -> tuple[Any, int]:
    dtype = h.element_type(ptrs.dtype)
    pointee = dtype.element_ty
    return pointee, max(1, pointee.primitive_bitwidth // 8)


def _check_lanes(op: KernelOp, ptrs: Any, mask: Any) -> None:
    if h.tainted(ptrs):
        raise op.fail("a load or store at an address that depends on rounding")
    if mask is not None and (h.tainted(mask) or h.undecided(mask) is not None):
        raise op.fail("a load or store masked by a comparison that rounding may flip")


def _masked_load(launch: Launch, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    ptrs, mask, other = args[:3]
    result = original(*args)
    op = KernelOp("masked_load", args, result, launch.site)
    _check_lanes(op, ptrs, mask)
    pointee, itemsize = _element(ptrs)
    if not pointee.is_floating():
        return result
    fmt = h.format_of_type(pointee, where=op.where())
    fill = h.interval_of(other, fmt) if other is not None else Interval.point(np.zeros(()))
    addresses = np.asarray(ptrs.data)
    lanes = np.broadcast_to(np.asarray(mask.data, bool), addresses.shape)
    loaded = h.decode(np.asarray(result.data), fmt)
    enclosure = launch.bounded.load(addresses, lanes, fill, loaded, fmt, itemsize, op.where())
    if not enclosure.is_point and (
        not np.array_equal(enclosure.lo, enclosure.hi) or _has_nan(enclosure)
    ):
        h.set_interval(result, enclosure)
    STATE.last_load = h.interval_of(result, fmt)
    return result


def _has_nan(interval: Interval) -> bool:
    return bool(np.isnan(interval.lo).any() or np.isnan(interval.hi).any())


def _masked_store(launch: Launch, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    ptrs, value, mask = args[:3]
    op = KernelOp("masked_store", args, None, launch.site)
    _check_lanes(op, ptrs, mask)
    pointee, itemsize = _element(ptrs)
    if not pointee.is_floating():
        if h.tainted(value):
            raise op.fail(
                "a store of an integer that depends on rounding",
                how="e.g. an argmax of values whose intervals overlap; its other possible "
                "values are not bounded",
            )
        result = original(*args)
        _bits_written(launch, op, ptrs, mask, itemsize)
        return result
    fmt = h.format_of_type(pointee, where=op.where())
    addresses = np.asarray(ptrs.data)
    lanes = np.broadcast_to(np.asarray(mask.data, bool), addresses.shape)
    launch.bounded.store(addresses, lanes, h.interval_of(value, fmt), fmt, itemsize, op.where())
    return original(*args)


_ATOMIC_KINDS = {"FADD": "fadd", "MAX": "max", "MIN": "min"}


def _atomic_rmw(launch: Launch, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    rmw_op, ptrs, value, mask = args[:4]
    pointee, itemsize = _element(ptrs)
    op = KernelOp("atomic_rmw", args, None, launch.site)
    _check_lanes(op, ptrs, mask)
    if not pointee.is_floating():
        result = original(*args)
        _bits_written(launch, op, ptrs, mask, itemsize)
        return h.set_taint(result, h.tainted(value))
    kind = _ATOMIC_KINDS.get(getattr(rmw_op, "name", str(rmw_op)).upper().split(".")[-1])
    if kind is None:
        raise op.fail(f"atomic {rmw_op} on floating values")
    _record_atomic(launch, op, kind, ptrs, value, mask)
    return _schedule_dependent(original(*args))


def _record_atomic(
    launch: Launch, op: KernelOp, kind: str, ptrs: Any, value: Any, mask: Any
) -> None:
    """Record an atomic ``fadd``, ``max`` or ``min`` of a floating ``value`` (any order)."""
    pointee, itemsize = _element(ptrs)
    fmt = h.format_of_type(pointee, where=op.where())
    addresses = np.asarray(ptrs.data)
    lanes = np.broadcast_to(np.asarray(mask.data, bool), addresses.shape)
    launch.bounded.atomic(
        kind, addresses, lanes, h.interval_of(value, fmt), fmt, itemsize, op.where()
    )


def _schedule_dependent(result: Any) -> Any:
    """The old value an atomic returns depends on the schedule: the whole line."""
    everything = np.full(np.shape(result.data), np.inf)
    return h.set_interval(result, Interval(-everything, everything))


def _bits_written(launch: Launch, op: KernelOp, ptrs: Any, mask: Any, itemsize: int) -> None:
    """After a store or atomic of integers (exact bits: a tainted one is refused): what it
    wrote into a floating tensor's memory (through a pointer cast to an integer type) is
    exact, and must not keep the enclosure of what the memory held."""
    addresses = np.asarray(ptrs.data)
    lanes = np.broadcast_to(
        np.asarray(mask.data, bool) if mask is not None else True, addresses.shape
    )
    launch.bounded.bits_written(addresses, lanes, itemsize, op.where())


def float_atomic_extreme(kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``tl.atomic_max``/``tl.atomic_min`` (``kind``) of the interpreter's semantic: Triton
    implements them on floats as integer atomics on the values' bits (a signed max where the
    value is non-negative, an unsigned min where negative), whose bit casts of rounded values
    tracking refuses and whose integer writes it would not see. In a bounded launch the
    operation is recorded as the floating max or min it is (exact: the enclosure's ends
    maximised), and Triton's implementation then runs uninstrumented."""

    def atomic(ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        launch = STATE.launch
        if launch is None or launch.memory is None:
            return original(ptr, val, mask, sem, scope)
        semantic = original.__self__  # type: ignore[attr-defined]
        checked_ptr, checked_val, checked_mask = semantic.atom_red_typechecking_impl(
            ptr, val, mask, kind
        )
        if not checked_val.type.scalar.is_floating():
            return original(ptr, val, mask, sem, scope)
        args = (kind, checked_ptr.handle, checked_val.handle, checked_mask.handle)
        op = KernelOp("atomic_rmw", args, None, launch.site)
        _check_lanes(op, checked_ptr.handle, checked_mask.handle)
        _record_atomic(launch, op, kind, *args[1:])
        STATE.launch = None
        try:
            result = original(ptr, val, mask, sem, scope)
        finally:
            STATE.launch = launch
        _schedule_dependent(result.handle)
        return result

    return atomic


def _atomic_cas(launch: Launch, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    ptrs = args[0]
    pointee, _ = _element(ptrs)
    result = original(*args)
    if pointee.is_floating():
        raise KernelOp("atomic_cas", args, result, launch.site).fail(
            "atomic compare-and-swap on floating values"
        )
    return h.set_taint(result, any(h.tainted(a) for a in args if hasattr(a, "attr")))


def _descriptor_load(launch: Launch, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """A descriptor load is a masked load (hooked); a TF32-rounding descriptor rounds its
    result afterwards, into a new handle: round the enclosure the same way."""
    STATE.last_load = None
    result = original(*args)
    loaded: Interval | None = STATE.last_load
    if getattr(args[0], "round_f32_to_tf32", False) and loaded is not None:
        from ...formats import FORMATS

        h.set_interval(result, loaded.to_format(FORMATS["tfloat32"]))
    return result


def _unsupported_memory(what: str) -> Callable[[Launch, Callable[..., Any], tuple[Any, ...]], Any]:
    def rule(launch: Launch, original: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        result = original(*args)
        results = result if isinstance(result, tuple) else (result,)
        if any(hasattr(r, "dtype") and h.is_floating(r) for r in results) or any(
            hasattr(a, "dtype") and hasattr(a, "attr") and h.is_floating(a) for a in args
        ):
            raise KernelOp(what, args, result, launch.site).fail(
                f"Triton operation {what!r} on floating values",
                how="it has no interval rule in the instrumented interpreter; run this kernel "
                "outside fp.track()",
            )
        return result

    return rule


MEMORY_RULES: dict[str, Callable[[Launch, Callable[..., Any], tuple[Any, ...]], Any]] = {
    "masked_load": _masked_load,
    "masked_store": _masked_store,
    "atomic_rmw": _atomic_rmw,
    "atomic_cas": _atomic_cas,
    "descriptor_load": _descriptor_load,
    "descriptor_gather": _unsupported_memory("descriptor_gather"),
    "descriptor_scatter": _unsupported_memory("descriptor_scatter"),
    "dot_scaled": _unsupported_memory("dot_scaled"),
    "extern_elementwise": _unsupported_memory("extern_elementwise (libdevice)"),
    "inline_asm": _unsupported_memory("inline_asm"),
}
