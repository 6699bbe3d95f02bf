"""Scoped instrumentation of Triton's interpreter (RENDER section IV-A-2, without a fork).

The RENDER authors modified Triton's interpreter. Here the interpreter that ships with the
installed triton is instrumented in memory while a ``fp.track()`` or ``fp.watch_nonfinite()``
block is open anywhere in the process, and restored when the last one closes
(:mod:`.scope`); no file is patched. :func:`hook_set` lists the hooks:

* the interpreter's builder (``triton.runtime.interpreter.interpreter_builder``, the object
  whose ``create_*`` methods implement every operation of an interpreted kernel) gets instance
  attributes that call the original method and then the operation's interval rule
  (:mod:`.rules`; loads, stores and atomics by :mod:`.memory_hooks`); a floating operation with
  no rule raises ``UnsupportedOperation`` under ``fp.track(strict=True)``; otherwise (issue 17)
  the launch runs again plainly, on its arguments' memory as it was before the refused run
  (:class:`Snapshot`), and what it changed is a gap of the tracker (``triton:<kernel>``). An
  out-of-bounds access (``fp.OutOfBoundsAccess``) is a bug of the kernel and raises in both;
* ``ReduceOps``/``ScanOps`` are replaced by subclasses that bound reductions (:mod:`.reduce`);
* ``GridExecutor.__call__`` (a launch) sets up the launch's memory (:mod:`.memory`), runs the
  grid with PyTorch dispatch disabled (its host copies are plumbing, not the user's
  operations) as the thread's :class:`~.launch.Launch`, and records what the kernel stored in
  the side store;
* a compiled launch (``JITFunction.run``, a GPU without ``TRITON_INTERPRET=1``) keeps the
  compiled kernel's values and takes the bounds from the instrumented interpreter re-running the
  kernel on host copies of its arguments (:class:`HostCopies`).

Who listens is found through the core's subscription interface (:mod:`..core.observe`), never
by importing a user of the instrumentation: a launch is bounded when a
:class:`~..core.observe.LaunchBounder` (a tracker) is subscribed on its thread, and each computing
operation of the launch is shown to a subscribed :class:`~..core.observe.OperationWatcher` (the
non-finite watch, :meth:`Launch.observe`), so NaN, Inf, subnormals and divisions by zero that
appear inside a kernel are reported at the kernel's source line; under a subscribed
:class:`~..core.observe.OperationRounder` (a stochastic-arithmetic run) each rounding result
is rounded at random (:mod:`.rounding`). The hooks do nothing on threads
without a subscriber, and nothing for launches outside such a block.
Supported triton releases: :data:`SUPPORTED` (checked on first use).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ...errors import FPCheckError, StaleBoundsError, UnsupportedOperation
from ...formats import FORMATS, Format
from ...interval.core import Interval
from ..core import observe
from ..core.interpose import user_frame
from . import handles as h
from .launch import STATE, Launch, current_launch
from .memory import LaunchMemory, tensors_of
from .memory_hooks import MEMORY_RULES, float_atomic_extreme
from .reduce import instrumented_reduce_ops, instrumented_scan_ops, record_call
from .rounding import round_constant, round_result, round_scan, round_sum
from .rules import RULES, KernelOp

__all__ = ["SUPPORTED", "HostCopies", "Launch", "hook_set"]

#: triton releases whose interpreter this instrumentation knows (major, minor), inclusive.
SUPPORTED = ((3, 0), (3, 9))

#: Builder methods that hold no values to bound (or delegate to a hooked method).
_PASS_THROUGH = frozenset(
    {
        "create_load",  # -> create_masked_load
        "create_store",  # -> create_masked_store
        "create_atomic_load",  # -> create_masked_load
        "create_atomic_store",  # -> create_masked_store
        "create_print",
        "create_assert",
        "create_assume",
        "create_barrier",
        "create_make_tensor_descriptor",
        "create_descriptor_store",  # -> create_masked_store
        "create_atomic_poll",
    }
)


def _check_version() -> None:
    import triton

    parts = tuple(int(p) for p in triton.__version__.split(".")[:2])
    if not SUPPORTED[0] <= parts <= SUPPORTED[1]:
        low, high = (".".join(map(str, v)) for v in SUPPORTED)
        raise UnsupportedOperation(
            f"Triton kernels with triton {triton.__version__}",
            how=f"the instrumented interpreter supports triton {low} to {high}; install one "
            "of those, or run Triton kernels outside fp.track()",
        )


def hook_set() -> list[tuple[Any, str, Any]]:
    """(owner, name, instrumented value) of every hook: the builder's and the reductions',
    built on first use and reused, and the launch wrappers around what is there now (a test
    may have replaced it)."""
    import triton.runtime.interpreter as interpreter
    from triton.runtime.jit import JITFunction

    if not _HOOKS:
        _check_version()
        _build(interpreter)
    return [
        *_HOOKS,
        (interpreter.GridExecutor, "__call__", _launcher(interpreter.GridExecutor.__call__)),
        (JITFunction, "run", _compiled_guard(JITFunction.run)),
    ]


#: (owner, name, instrumented value) of the builder and reduction hooks, built once per process
_HOOKS: list[tuple[Any, str, Any]] = []


def _build(interpreter: Any) -> None:
    import triton.language as tl

    builder = interpreter.interpreter_builder
    for name in dir(type(builder)):
        if name.startswith("create_") and name not in _PASS_THROUGH:
            _HOOKS.append(
                (builder, name, _hooked(name, getattr(type(builder), name).__get__(builder)))
            )
    semantic = interpreter.interpreter_semantic
    for name, kind in (("atomic_max", "max"), ("atomic_min", "min")):
        original = getattr(type(semantic), name).__get__(semantic)
        _HOOKS.append((semantic, name, float_atomic_extreme(kind, original)))
    for name, fmt in _CONSTANTS.items():  # (get_bf16 rounds a get_fp32 constant)
        _HOOKS.append(
            (builder, name, _constant(fmt, getattr(type(builder), name).__get__(builder)))
        )
    _HOOKS.append(
        (
            interpreter,
            "ReduceOps",
            instrumented_reduce_ops(interpreter.ReduceOps, tl, _widened, _rounded_sum),
        )
    )
    _HOOKS.append(
        (
            interpreter,
            "ScanOps",
            instrumented_scan_ops(interpreter.ScanOps, tl, _widened, _rounded_scan),
        )
    )
    _HOOKS.append(
        (interpreter, "_patch_lang", _lang_patcher(interpreter._patch_lang, interpreter, tl))
    )


#: the builder's constructors of floating constants below double, and their formats: a Python
#: float (a kernel argument, a literal) reaches the kernel through one of them, rounded to
#: nearest onto the format of the operation that uses it
_CONSTANTS = {"get_fp16": FORMATS["float16"], "get_fp32": FORMATS["float32"]}


def _constant(fmt: Format, original: Callable[..., Any]) -> Callable[..., Any]:
    """A constructor of a floating constant whose result, in a bounded launch, encloses both
    the Python number it was given (the exact value the program means: ``x * 1.1`` is x times
    the double 1.1, as a float64 reference computes it) and its rounding onto ``fmt``: the
    hull of the two; in a randomly rounded launch it is that number rounded at random. Before,
    the rounded constant was taken as exact (and rounded the same way in every sample), and a
    correct kernel scaled by a Python float was judged a bug."""

    def hook(value: Any) -> Any:
        result = original(value)
        launch = current_launch()
        if launch is None or isinstance(value, (bool, np.bool_)):
            return result
        given = np.asarray(value, dtype=np.float64)
        stored = h.decode(np.asarray(result.data), fmt)
        if not np.isfinite(given).all() or np.array_equal(given, stored):
            return result
        if launch.memory is not None:
            h.set_interval(result, Interval(np.minimum(given, stored), np.maximum(given, stored)))
        elif launch.rounder is not None:  # a stochastic-arithmetic run: rounded at random
            round_constant(launch.rounder, launch.kernel, given, result, fmt.name)
        return result

    return hook


def _hooked(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    short = name.removeprefix("create_")
    memory_rule = MEMORY_RULES.get(short)
    rule = RULES.get(short)

    def hook(*args: Any, **keywords: Any) -> Any:
        launch = current_launch()
        if launch is None:
            return original(*args, **keywords)
        if launch.memory is None:  # watched or randomly rounded, not bounded
            result = original(*args, **keywords)
            if launch.rounder is not None:
                result = round_result(
                    launch.rounder, launch.kernel, short, original, args, keywords, result
                )
            launch.observe(short, args, result)
            return result
        if memory_rule is not None:
            result = memory_rule(launch, partial(original, **keywords), args)
            launch.note_formats(result, *args)
            return result
        result = original(*args, **keywords)
        launch.note_formats(result)
        record_call(short, args)
        op = KernelOp(short, args, result, launch.site)
        if rule is None:
            _unknown(op)
            return result
        before = _radius(args)
        rule(op)
        grown = _radius(result if isinstance(result, tuple) else (result,)) - before
        if grown > 0:
            launch.widened(op.where(), grown)
        launch.observe(short, args, result)
        return result

    hook.__name__ = name
    return hook


def _widened(before: Any, after: Any) -> bool:
    """For reductions: whether a launch is being instrumented; if so, record how much the
    reduction (from handles ``before`` to handles ``after``) widened its operands."""
    launch = current_launch()
    if launch is None or launch.memory is None:
        return False
    if after is not None:
        grown = _radius(after) - _radius(before)
        if grown > 0:
            launch.widened(launch.site(), grown)
    return True


def _rounded_sum(x: Any, output: Any, axis: int | None, keep: bool) -> None:
    """For ``tl.sum``: in a randomly rounded launch, round the sum at random."""
    launch = current_launch()
    if launch is not None and launch.rounder is not None and launch.memory is None:
        round_sum(launch.rounder, launch.kernel, x, output, axis, keep)


def _rounded_scan(kind: str, x: Any, output: Any, axis: int, reverse: bool) -> None:
    """For ``tl.cumsum``/``tl.cumprod``: in a randomly rounded launch, round the scan at random."""
    launch = current_launch()
    if launch is not None and launch.rounder is not None and launch.memory is None:
        round_scan(launch.rounder, launch.kernel, kind, x, output, axis, reverse)


def _radius(values: Any) -> float:
    """The largest radius among the float handles in ``values``."""
    widest = 0.0
    for value in values:
        lo = getattr(value, "attr", {}).get("fpcheck.lo")
        if lo is not None and lo.size:
            hi = value.attr["fpcheck.hi"]
            with np.errstate(invalid="ignore", over="ignore"):
                width = float(np.max(np.where(lo == hi, 0.0, hi - lo)))
            widest = max(widest, width / 2 if np.isfinite(width) else np.inf)
    return widest


def _unknown(op: KernelOp) -> None:
    results = op.result if isinstance(op.result, tuple) else (op.result,)
    if any(hasattr(r, "dtype") and hasattr(r, "attr") and h.is_floating(r) for r in results):
        raise op.fail(
            f"Triton operation {op.name!r}",
            how="it has no interval rule in the instrumented interpreter; run this kernel "
            "outside fp.track()",
        )
    taint = any(h.tainted(a) for a in op.args if hasattr(a, "attr"))
    for r in results:
        if hasattr(r, "attr"):
            h.set_taint(r, taint)


# --- launches ----------------------------------------------------------------------------------


def _innermost_cause(error: BaseException, wrapper: type[BaseException]) -> BaseException | None:
    """What raised inside the interpreter: it wraps an error in ``wrapper`` (its
    ``InterpreterError``) once per ``@triton.jit`` call level, so an error of a helper the
    kernel calls (``tl.flip``, ``tl.sort``, a user's ``_attn_fwd_inner``) is nested."""
    cause = error.__cause__
    while isinstance(cause, wrapper):
        inner = cause.__cause__
        if inner is None:
            break
        cause = inner
    return cause


def _launcher(original: Callable[..., Any]) -> Callable[..., Any]:
    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        tracker, watch, rounder = observe.bounder(), observe.watcher(), observe.rounder()
        if (tracker is None and watch is None and rounder is None) or current_launch() is not None:
            return original(self, *args, **kwargs)
        from triton.runtime.errors import InterpreterError

        from ...adapters.torch import internal

        tensors = tensors_of(list(args)) + tensors_of(list(kwargs.values()))
        kernel = getattr(self.fn, "__name__", "kernel")
        memory = None
        snapshot = None
        if tracker is not None:
            named = [*zip(getattr(self, "arg_names", ()), args, strict=False), *kwargs.items()]
            names = {id(t): name for name, value in named for t in tensors_of(value)}
            memory = LaunchMemory(tensors, kernel=kernel, names=names)
            if not tracker.strict:
                snapshot = Snapshot(tensors)
        state = Launch(kernel, memory, tracker.mode if tracker else "rigorous", watch, rounder)
        STATE.launch = state
        try:
            with internal():
                result = original(self, *args, **kwargs)
        except InterpreterError as error:
            cause = _innermost_cause(error, InterpreterError)
            if isinstance(cause, UnsupportedOperation) and snapshot is not None:
                assert tracker is not None
                return _run_plainly(self, original, args, kwargs, tracker, snapshot, cause)
            if isinstance(cause, FPCheckError):
                raise cause from None
            raise
        finally:
            STATE.launch = None
        if tracker is not None and memory is not None:
            try:
                memory.finish(
                    kernel=kernel,
                    provenance=state.provenance(),
                    notes=(f"bounded by the instrumented Triton interpreter (kernel {kernel})",),
                    mode=state.mode,
                    reduced=state.reduced,
                )
            except UnsupportedOperation as refused:
                if snapshot is None:
                    raise
                tracker.kernel_gap(kernel, user_frame(), refused, snapshot.changed())
                return result
            tracker.kernel_bounded()
        return result

    return launch


def _run_plainly(
    executor: Any,
    original: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    tracker: observe.LaunchBounder,
    snapshot: Snapshot,
    error: UnsupportedOperation,
) -> Any:
    """A launch tracking refused, outside strict mode: the memory its instrumented run had
    written is restored, the kernel runs again without bounds (the watch still sees it), and
    what it changed is a gap. The program sees one launch, as in a plain run."""
    from ...adapters.torch import internal

    kernel = getattr(executor.fn, "__name__", "kernel")
    snapshot.restore()
    watch = observe.watcher()
    STATE.launch = Launch(kernel, None, tracker.mode, watch) if watch is not None else None
    try:
        with internal():
            result = original(executor, *args, **kwargs)
    finally:
        STATE.launch = None
    tracker.kernel_gap(kernel, user_frame(), error, snapshot.changed())
    return result


class Snapshot:
    """Copies of the storages of a launch's tensor arguments, taken before a non-strict
    tracked launch: restored if tracking refuses the launch half-way (the interpreter writes
    host memory in place), and compared afterwards to tell what the launch changed."""

    def __init__(self, tensors: list[Any]) -> None:
        import torch

        from ...adapters.torch import internal

        self._saved: dict[int, tuple[Any, Any]] = {}
        with internal(), torch.no_grad():
            for t in tensors:
                storage = t.untyped_storage()
                if storage.data_ptr() in self._saved or storage.nbytes() == 0:
                    continue
                self._saved[storage.data_ptr()] = (t, storage.clone())

    def restore(self) -> None:
        """Put back the bytes of every saved storage the refused run changed (no tracking
        sees the copies)."""
        import torch

        from ...adapters.torch import internal

        with internal(), torch.no_grad():
            for t, saved in self._saved.values():
                if not self._same(t, saved):
                    t.untyped_storage().copy_(saved)

    def changed(self) -> list[Any]:
        """Each argument storage whose bytes differ from the copy, as a flat tensor of its
        argument's dtype over the whole storage."""
        import torch

        from ...adapters.torch import internal

        found = []
        with internal(), torch.no_grad():
            for t, saved in self._saved.values():
                if not self._same(t, saved):
                    length = t.untyped_storage().nbytes() // t.element_size()
                    found.append(t.as_strided((length,), (1,), 0))
        return found

    @staticmethod
    def _same(t: Any, saved: Any) -> bool:
        import torch

        now = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
        before = torch.empty(0, dtype=torch.uint8, device=t.device).set_(saved)
        return bool(torch.equal(now, before))


def _lang_patcher(original: Callable[..., Any], interpreter: Any, tl: Any) -> Callable[..., Any]:
    """After the interpreter patches ``triton.language`` for a launch, make ``tensor.T``
    (a transpose built outside the builder) keep enclosures."""

    def patch(fn: Any) -> Any:
        scope = original(fn)
        if current_launch() is None:
            return scope

        def transpose(self: Any) -> Any:
            handle = interpreter.TensorHandle(np.transpose(self.handle.data), self.handle.dtype)
            for key in ("fpcheck.lo", "fpcheck.hi", "fpcheck.undecided"):
                if key in self.handle.attr:
                    handle.attr[key] = np.transpose(self.handle.attr[key])
            h.set_taint(handle, h.tainted(self.handle))
            shape = list(self.type.shape)
            shape[-1], shape[-2] = shape[-2], shape[-1]
            return tl.core.tensor(handle, tl.core.block_type(self.dtype, shape))

        scope.set_attr(tl.tensor, "T", property(transpose))
        truth = tl.tensor.__bool__

        def checked_truth(self: Any) -> bool:
            if h.undecided(self.handle) is not None or h.tainted(self.handle):
                launch = current_launch()
                raise UnsupportedOperation(
                    "control flow on a comparison that rounding may flip",
                    where=launch.site() if launch is not None else None,
                    how="the other branch's results would not be bounded; branch on exact "
                    "values, or select with tl.where (whose bound covers both branches)",
                )
            return bool(truth(self))

        scope.set_attr(tl.tensor, "__bool__", checked_truth)
        if current_launch().memory is not None:  # type: ignore[union-attr]
            for name, substitute in _orderings(interpreter, tl).items():
                scope.set_attr(tl, name, substitute)
                if hasattr(tl.tensor, name):
                    scope.set_attr(tl.tensor, name, substitute)
        return scope

    return patch


@functools.cache
def _orderings(interpreter: Any, tl: Any) -> dict[str, Callable[..., Any]]:
    """``tl.flip``, ``tl.sort`` and ``tl.topk`` of floating values in a bounded launch, as the
    exact data movement they are: Triton writes them with bit casts of the values to integers
    (refused for rounded values: the bits of an interval mean nothing), so here they move the
    data and the enclosures themselves. A flip moves each element's enclosure with it; a sort
    along the last dimension puts the sorted lower ends and the sorted upper ends in place
    (the k-th smallest of values each in its interval lies between the k-th smallest lower end
    and the k-th smallest upper end), the whole line along a row that may hold a NaN; topk is
    a descending sort's first k. Integer tensors take Triton's own functions."""
    originals = {name: getattr(tl, name) for name in ("flip", "sort", "topk")}

    def floating(x: Any) -> bool:
        return isinstance(x, tl.tensor) and h.is_floating(x.handle)

    def moved(x: Any, data: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Any:
        handle = interpreter.TensorHandle(np.ascontiguousarray(data), x.handle.dtype)
        h.set_interval(handle, Interval(np.ascontiguousarray(lo), np.ascontiguousarray(hi)))
        return tl.core.tensor(handle, tl.core.block_type(x.dtype, list(data.shape)))

    def last_dim(x: Any, dim: Any) -> int:
        rank = len(x.shape)
        axis = rank - 1 if dim is None else int(getattr(dim, "value", dim)) % rank
        if axis != rank - 1:
            raise ValueError("only the last dimension is supported (as Triton's sort)")
        return axis

    def flip(x: Any, dim: Any = None, **_: Any) -> Any:
        if not floating(x):
            return originals["flip"](x, dim)
        rank = len(x.shape)
        axis = rank - 1 if dim is None else int(getattr(dim, "value", dim)) % rank
        enclosure = h.interval_of(x.handle, h.format_of_type(x.handle.dtype))
        lo = np.broadcast_to(enclosure.lo, np.shape(x.handle.data))
        hi = np.broadcast_to(enclosure.hi, np.shape(x.handle.data))
        data = np.asarray(x.handle.data)
        return moved(x, np.flip(data, axis), np.flip(lo, axis), np.flip(hi, axis))

    def ordered(x: Any, k: Any, dim: Any, descending: Any) -> Any:
        axis = last_dim(x, dim)
        fmt = h.format_of_type(x.handle.dtype)
        data = np.asarray(x.handle.data)
        values = h.decode(data, fmt)
        enclosure = h.interval_of(x.handle, fmt)
        lo = np.sort(np.broadcast_to(enclosure.lo, data.shape), axis=axis)
        hi = np.sort(np.broadcast_to(enclosure.hi, data.shape), axis=axis)
        order = np.argsort(values, axis=axis, kind="stable")
        if bool(getattr(descending, "value", descending)):  # the k-th largest
            order, lo, hi = np.flip(order, axis), np.flip(lo, axis), np.flip(hi, axis)
        with np.errstate(invalid="ignore"):
            nan = np.any(
                np.isnan(values) | (np.isneginf(enclosure.lo) & np.isposinf(enclosure.hi)),
                axis=axis,
                keepdims=True,
            )
        lo, hi = np.where(nan, -np.inf, lo), np.where(nan, np.inf, hi)
        data = np.take_along_axis(data, order, axis=axis)
        count = data.shape[axis] if k is None else int(getattr(k, "value", k))
        keep = (slice(None),) * axis + (slice(0, count),)
        return moved(x, data[keep], lo[keep], hi[keep])

    def sort(x: Any, dim: Any = None, descending: Any = 0, **_: Any) -> Any:
        if not floating(x):
            return originals["sort"](x, dim=dim, descending=descending)
        return ordered(x, None, dim, descending)

    def topk(x: Any, k: Any, dim: Any = None, descending: Any = True, **_: Any) -> Any:
        if not floating(x):
            return originals["topk"](x, k, dim=dim, descending=descending)
        return ordered(x, k, dim, descending)

    return {"flip": flip, "sort": sort, "topk": topk}


def _compiled_guard(original: Callable[..., Any]) -> Callable[..., Any]:
    """A compiled launch under tracking: the compiled kernel computes the values; the kernel is
    then re-run by the instrumented interpreter on host copies of its arguments (taken before
    the compiled run, with their bounds), and the bounds it records are moved to the device
    tensors, with a note saying where value and bounds come from (issue 4, item 2). A re-run
    tracking refuses is handled by the launch hook like any launch: outside strict mode the host
    copies it wrote get no bounds, which move to the device tensors, and the compiled values
    stay."""

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        tracker = observe.bounder()
        if tracker is None or warmup or current_launch() is not None:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        from triton.runtime.interpreter import InterpretedFunction

        copies = HostCopies(tensors_of(list(args)) + tensors_of(list(kwargs.values())))
        host_args = [copies.swap(a) for a in args]
        host_kwargs = {k: copies.swap(v) for k, v in kwargs.items()}
        result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        InterpretedFunction(self.fn).run(*host_args, grid=grid, warmup=False, **host_kwargs)
        name = getattr(self.fn, "__name__", "kernel")
        copies.move_bounds_back(
            mode=tracker.mode,
            note=f"value computed by the compiled kernel {name}; bounds by the instrumented "
            "interpreter re-running it on host copies of its arguments",
        )
        return result

    return run


class HostCopies:
    """Host copies of a launch's argument storages, carrying their bounds."""

    def __init__(self, tensors: list[Any]) -> None:
        import torch

        from ...adapters.torch import internal
        from ..core.store import STORE

        self._copies: dict[int, tuple[Any, Any, Any]] = {}
        with internal(), torch.no_grad():
            for t in tensors:
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key in self._copies or storage.nbytes() == 0:
                    continue
                host = storage.cpu()
                if host.data_ptr() == storage.data_ptr():
                    host = host.clone()
                length = storage.nbytes() // t.element_size()
                flat = t.as_strided((length,), (1,), 0)
                host_flat = torch.empty(0, dtype=t.dtype).set_(host, 0, (length,), (1,))
                try:
                    record = STORE.record_of(flat)
                except StaleBoundsError:
                    STORE.forget(flat)  # modified outside tracking: an exact input again
                    record = None
                if record is not None:
                    interval = Interval(record.lo, record.hi)
                    if record.hi is record.lo:
                        interval = Interval.point(record.lo)
                    STORE.write(
                        host_flat,
                        interval,
                        provenance=record.provenance,
                        mode=record.mode,
                        notes=record.notes,
                    )
                self._copies[key] = (flat, host_flat, STORE.record_of(host_flat))

    def swap(self, value: Any) -> Any:
        """``value`` with each tensor replaced by the same view of its host copy."""
        import torch

        from ...adapters.torch import internal

        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in self._copies:
            host_flat = self._copies[value.untyped_storage().data_ptr()][1]
            with internal(), torch.no_grad():
                return host_flat.as_strided(value.shape, value.stride(), value.storage_offset())
        if isinstance(value, tuple):
            return tuple(self.swap(v) for v in value)
        return value

    def move_bounds_back(self, *, mode: str, note: str) -> None:
        """Record the bounds the re-run wrote beside the device storages."""
        from ..core.store import STORE

        for flat, host_flat, before in self._copies.values():
            record = STORE.record_of(host_flat)
            if record is None or record is before:
                continue
            interval = (
                Interval.point(record.lo)
                if record.hi is record.lo
                else Interval(record.lo, record.hi)
            )
            STORE.write(
                flat,
                interval,
                provenance=record.provenance,
                mode=mode,
                notes=(*record.notes, note),
            )
