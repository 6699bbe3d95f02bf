"""``fp.track()``: rigorous round-off bounds recorded beside a real PyTorch run (RENDER III-A).

Inside ``with fp.track():`` every ATen operation on this thread runs as usual; afterwards its
floating results get an enclosure of every value they could hold had each floating-point
operation since the inputs (taken as exact) rounded in any legal way and summed in any order.
The dispatch mode itself is :class:`~.torch.mode.Tracker` (rules by family in
:mod:`.torch.rules`); Triton kernels launched in the block are bounded by the instrumented
interpreter (:mod:`.triton`). Nested trackers: the innermost one's settings apply. This module
holds the public entry points over both backends.

Layer-level analysis (RENDER III-C-1): ``track(assume={tensor: bounds})`` seeds the analysis
with given enclosures, typically :func:`hull` of two programs' activations at the first layer
where they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..adapters import is_torch_tensor
from ..adapters.torch import dtype_format, tensor_to_float64
from ..errors import InvalidArgument
from ..formats import FORMATS
from ..interval.bounds import Bounds

if TYPE_CHECKING:
    from numpy.typing import NDArray
from .core.store import STORE
from .torch.mode import Tracker, tensors

__all__ = ["Tracker", "bounds_of", "hull", "roundoff_bounds", "track"]


def track(
    *,
    mode: str = "rigorous",
    order: Any = None,
    assume: Mapping[Any, Any] | None = None,
    matmul_model: Any = None,
    strict: bool = False,
) -> Tracker:
    """Record round-off enclosures for what PyTorch computes inside the ``with`` block.

    ``mode="probabilistic"`` replaces gamma_n in sums and products by Higham and Mary's
    probabilistic bound (lambda = 6: each bounded sum fails with probability at most 3.1e-8
    if rounding errors are independent and mean zero); other rules stay rigorous.
    ``mode="a_posteriori"`` bounds this run rather than every run: each enclosure is the hull
    of the value computed and the exact result over the operands' enclosures (evaluated as in
    float64), so it holds the exact value, this run's value and a float64 run's, and its width
    is the round-off that happened, carried forward, instead of what any rounding and any
    summation order could have made (Higham, section 3.3); Triton kernels keep the rigorous
    rules. ``compare_modules`` judges each module this way. ``order`` is
    a ``SummationTree`` (``fp.reveal_order``) whose error factor replaces gamma_n for sums and
    dot products of its length. ``assume`` seeds tensors with given ``Bounds``. ``matmul_model``
    (issue 9: a ``MatmulFeatures`` from ``fp.probe_matmul``, or ``fp.emulate.fused_matmul``
    parameters) bounds matmuls of its input format by the fused-summation model of that
    hardware instead of the generic any-order bound.

    ``strict`` (issue 17): by default tracking never raises into the program it watches. An
    operation with a floating operand and no interval rule, or one this package fails to bound,
    still runs as PyTorch runs it; its floating results get the whole line as their enclosure,
    with a note naming the operation and its first source line (a verdict on them, or on what
    is computed from them, is "inconclusive"), and it is counted in the tracker's ``gaps``
    (under ``pytest --fpcheck`` the run report lists them): never silently skipped.
    ``strict=True`` raises ``UnsupportedOperation`` (or the internal error) instead, for a test
    that proves its code is covered by rules."""
    return Tracker(mode=mode, order=order, assume=assume, matmul_model=matmul_model, strict=strict)


def bounds_of(x: Any) -> Bounds | None:
    """The recorded enclosure of ``x``, or None when tracking never produced it or ``x`` holds
    integers or booleans (exact values: no round-off bounds).

    Raises StaleBoundsError when ``x`` was modified in place after its bounds were recorded."""
    return recorded(x)


def recorded(
    x: Any, value: NDArray[np.float64] | None = None, *, copy: bool = True
) -> Bounds | None:
    """:func:`bounds_of` for a caller that already holds ``x``'s float64 ``value`` and, without
    ``copy``, only reads the ends (views of the store's arrays, valid until the next tracked
    write: a verdict's)."""
    if not is_torch_tensor(x) or dtype_format(x.dtype) is None:
        return None
    if x.is_neg() or x.is_conj():  # a lazy view: its values are not its storage's
        return None
    record = STORE.record_of(x)
    if record is None:
        return None
    interval = STORE.read(x)
    if interval is None or record.format is None:  # freed and rewritten since: untracked
        return None
    if value is None:
        value = tensor_to_float64(x, argument="x")
    if copy:
        lo = np.array(interval.lo, dtype=np.float64)
        hi = lo.copy() if interval.is_point else np.array(interval.hi, dtype=np.float64)
    else:
        lo, hi = interval.lo, interval.hi
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
    if not tensors(result):
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
