"""The dispatch mode of one stochastic run: every floating operation's result rounded at random.

Rule (CESTAC's random rounding; Monte Carlo arithmetic as in Verificarlo, which the
GPU-FPX/FTTN paper recommends in section 7): each ATen operation with a floating tensor operand
is run, below autograd (so backward passes are covered without rules), and each of its floating
results is replaced by a random rounding (:mod:`pytest_fpcheck.stochastic.rounding`) of a value
computed in a wider format:

* GELU, its gradient and log-softmax are computed in the wider format by formulas without
  their ATen kernels' cancellation (:mod:`pytest_fpcheck.stochastic.accurate`);
* operands narrower than float32 (bfloat16, float16, float8) are widened to float32, the
  operation runs in float32, and its results are rounded stochastically onto their own format
  (the format the operation gives them in a plain run, learnt once per operation and operand
  types);
* float32 operations run on float64 copies and are rounded stochastically onto float32 (so a
  library function's own inaccuracy in float32, such as GELU's cancellation for large negative
  inputs, does not shift the samples away from the exact result), except matrix products and
  convolutions, which run in float32 (a float64 rerun would cost twice the run) and carry
  their accumulation's rounding as below; float64 operations, and operations whose kernel has
  no float64 version, run in their own format and their result moves one step of its grid up
  or down, each with probability 1/12: the stochastic rounding of an exact value placed
  uniformly in the rounding interval of the computed one (same variance on average);
* accumulations (sums, means, matrix products, convolutions) add, before that rounding, the
  Gaussian term of their own rounding (their accumulator's format and length:
  :mod:`pytest_fpcheck.stochastic.accumulation`);
* conversions to a narrower format (``.to(torch.bfloat16)``, ``copy_`` into a narrower tensor)
  are stochastic roundings of the source;
* an operation that writes into its operands (``add_``, ``out=``) runs wider on copies of every
  tensor it writes, whatever its format (``x.add_(y)`` of a float32 ``x`` and a bfloat16 ``y``
  otherwise added ``y`` twice), and the tensors it wrote take the rounded values; one that
  returns nothing (``_foreach_mul_``) has the tensors it wrote rounded the same way;
* ``F.scaled_dot_product_attention`` off the CPU runs ATen's math path, whose operations are
  rounded one by one (:mod:`pytest_fpcheck.stochastic.attention`: the fused CUDA kernels have no
  wider version and no batching rule);
* operations whose result is exact (copies, views, selections, ``relu``, ``abs``, comparisons,
  rounding to integers, ...), random-number operations, operations without a floating operand
  and integer or boolean results are left as they are;
* a Triton kernel launched in the block (interpreted, ``TRITON_INTERPRET=1``) is rounded the
  same way, operation by operation: the mode subscribes to the interpreter's instrumentation as
  an :class:`~pytest_fpcheck.tracking.core.observe.OperationRounder`
  (:mod:`pytest_fpcheck.tracking.triton.rounding`), which hands it each rounding result computed
  in float64 (:meth:`StochasticMode.kernel_rounded`): stochastic rounding onto the result's
  format, float64 results moved one step as above, ``tl.dot`` and ``tl.sum`` with their
  accumulation's Gaussian term first
  (:func:`~pytest_fpcheck.stochastic.accumulation.kernel_sigma`), ``tl.cumsum`` and
  ``tl.cumprod`` with the accumulated errors of the additions (multiplications) before each
  prefix (:func:`~pytest_fpcheck.stochastic.accumulation.kernel_scan_noise`). The draws come from the
  sample's generator, so a seed gives the same kernel roundings.

An operation that cannot run on widened operands (a kernel that insists on its dtypes) runs
as it is and its results take the one-step perturbation of their own format.

An operation that makes an infinity or a NaN from finite operands (an overflow, ``0 * inf``
after one, the square root of a rounded negative) is recorded: a random rounding model says
nothing about a run that left the format's range, and the estimate then covers the whole
line (:mod:`pytest_fpcheck.stochastic.run`). An operation that writes into an operand
(``add_``, ``out=``) is judged by its operands' values before it ran (any of them may share
the memory it writes); a destination it only writes (an ``out=`` argument, ``copy_``'s
first) is no operand, unless it is also passed as one. An infinity is recorded even where it
is a pole of the function at an exact zero (T5's ``log(0)`` of its relative positions, then
discarded by ``where``): the run cannot tell such a zero from one a rounding made
(``1 - sigmoid(20)`` rounded to 0, whose ``log`` a ``clamp`` then makes finite, far from the
exact -20), so it stays on the safe side.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..adapters.torch import undeclared_writes
from ..allocator import keep_freed_memory
from ..errors import UnsupportedOperation
from ..formats import FORMATS, Format
from ..tracking.triton.scope import close_block, open_block
from .accumulation import (
    ACCUMULATIONS,
    PRODUCTS,
    SCANS,
    accumulation_sigma,
    kernel_scan_noise,
    kernel_sigma,
    product_scales,
    product_terms,
)
from .accurate import ACCURATE
from .attention import MathAttention
from .attention import needed as needs_math_attention
from .memo import Memo
from .rounding import (
    Draw,
    add_noise,
    add_product_noise,
    in_range,
    perturb_in_place_format,
    round_checked,
)
from .substitutes import SUBSTITUTES, substitute

__all__ = ["EXACT", "StochasticMode"]

_FORMATS: dict[torch.dtype, Format] = {
    getattr(torch, name): fmt for name, fmt in FORMATS.items() if hasattr(torch, name)
}
_FLOAT32 = FORMATS["float32"]
_FLOAT64 = FORMATS["float64"]
#: formats narrower than float32: computed in float32 and rounded stochastically
_NARROW = {dtype for dtype, fmt in _FORMATS.items() if fmt.precision < _FLOAT32.precision}

#: functional packet names whose floating results are exact functions of their operands
#: (or random draws), or that change only a tensor's metadata or storage (``set_``, in-place
#: views): never perturbed; names ending in ``_copy`` (view copies) too
EXACT = frozenset(
    {
        "aten.abs",
        "aten.amax",
        "aten.amin",
        "aten.adaptive_max_pool2d",
        "aten.cat",
        "aten.ceil",
        "aten.channel_shuffle",
        "aten.clamp",
        "aten.clamp_max",
        "aten.clamp_min",
        "aten.clone",
        "aten.constant_pad_nd",
        "aten.contiguous",
        "aten.cummax",
        "aten.cummin",
        "aten.diag_embed",
        "aten.diagonal_scatter",
        "aten.embedding",
        "aten.empty_like",
        "aten.empty_strided",
        "aten.expand",
        "aten.fill",
        "aten.flip",
        "aten.floor",
        "aten.full_like",
        "aten.gather",
        "aten.hardtanh",
        "aten.heaviside",
        "aten.index",
        "aten.index_select",
        "aten.kthvalue",
        "aten.lift_fresh",
        "aten.masked_fill",
        "aten.masked_scatter",
        "aten.masked_select",
        "aten.max",
        "aten.max_pool2d_with_indices",
        "aten.max_pool3d_with_indices",
        "aten.maximum",
        "aten.median",
        "aten.min",
        "aten.minimum",
        "aten.nan_to_num",
        "aten.neg",
        "aten.new_empty",
        "aten.new_empty_strided",
        "aten.new_full",
        "aten.new_ones",
        "aten.new_zeros",
        "aten.ones_like",
        "aten.pixel_shuffle",
        "aten.pixel_unshuffle",
        "aten.reflection_pad1d",
        "aten.reflection_pad2d",
        "aten.relu",
        "aten.repeat",
        "aten.replication_pad1d",
        "aten.replication_pad2d",
        "aten.roll",
        "aten.rot90",
        "aten.round",
        "aten.scatter",
        "aten.select_scatter",
        "aten.sgn",
        "aten.sign",
        "aten.slice_scatter",
        "aten.sort",
        "aten.take",
        "aten.threshold",
        "aten.threshold_backward",
        "aten.topk",
        "aten.tril",
        "aten.triu",
        "aten.trunc",
        "aten._unsafe_view",
        "aten.unfold",
        "aten.zero",
        "aten.zeros_like",
        "aten.set",
        "aten.resize",
        "aten.resize_as",
        "aten.as_strided",
        "aten.detach",
        "aten.t",
        "aten.transpose",
        "aten.squeeze",
        "aten.unsqueeze",
        "aten.bernoulli",
        "aten.binomial",
        "aten.cauchy",
        "aten.exponential",
        "aten.geometric",
        "aten.log_normal",
        "aten.multinomial",
        "aten.native_dropout",
        "aten.normal",
        "aten.poisson",
        "aten.rand_like",
        "aten.randint_like",
        "aten.randn_like",
        "aten.random",
        "aten.rrelu_with_noise",
        "aten._sample_dirichlet",
        "aten._standard_gamma",
        "aten.uniform",
    }
)
_CONVERSIONS = frozenset({"aten._to_copy", "aten.copy"})
#: float32 operations that run in their own format (a float64 rerun costs more than the run):
#: matrix products and convolutions, whose rounding is their accumulation's (the Gaussian term)
_OWN_FORMAT = frozenset(
    {
        "aten.mm",
        "aten.bmm",
        "aten.mv",
        "aten.addmm",
        "aten.baddbmm",
        "aten.addbmm",
        "aten.addmv",
        "aten.dot",
        "aten.convolution",
        "aten.convolution_backward",
    }
)


def _format(dtype: torch.dtype) -> Format | None:
    return _FORMATS.get(dtype)


def _narrower(target: torch.dtype, source: torch.dtype) -> bool:
    """Does converting ``source`` to ``target`` round (fewer digits or a smaller range)?"""
    key = (target, source)
    narrower = _NARROWER.get(key)
    if narrower is None:
        t, s = _FORMATS[target], _FORMATS[source]
        narrower = t.precision < s.precision or t.emax < s.emax or t.emin > s.emin
        _NARROWER[key] = narrower
    return narrower


_NARROWER: dict[tuple[torch.dtype, torch.dtype], bool] = {}


def _refuse_complex(func: torch._ops.OpOverload) -> None:
    """Complex arithmetic is not rounded at random (its results would carry no spread, and a
    correct program's estimate would call its float64 reference a bug): refused, naming the
    operation. Views between real and complex tensors pass through before this."""
    raise UnsupportedOperation(
        str(func).removesuffix(".default"),
        how="complex tensors are not rounded at random by stochastic_bounds; estimate the "
        "real and imaginary parts as real tensors, or bound this code with fp.track()",
    )


def _refuse_layout(name: str, layout: torch.layout) -> None:
    """Sparse (and other non-strided) tensors are not rounded at random: refused, naming the
    operation (before, the rounding of a sparse result crashed inside a reshape)."""
    raise UnsupportedOperation(
        name,
        how=f"tensors of layout {layout} are not rounded at random by stochastic_bounds; "
        "estimate with dense tensors (.to_dense()), or bound this code with fp.track()",
    )


def _widen(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _NARROW:
        return value.to(torch.float32)
    if isinstance(value, torch.dtype) and value in _NARROW:
        return torch.float32
    return value


def _to_float32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32)


def _to_float64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float64)


def _written_operands(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[torch.Tensor]:
    """The tensors an operation writes into (``add_``'s ``self``, ``out=`` arguments, and
    what its schema does not declare: a training batch norm's running statistics)."""
    written: list[torch.Tensor] = []
    for position, argument in enumerate(func._schema.arguments):
        info = argument.alias_info
        if info is None or not info.is_write:
            continue
        if argument.kwarg_only or position >= len(args):
            value = kwargs.get(argument.name)
        else:
            value = args[position]
        written.extend(t for t in _leaves((value,)) if isinstance(t, torch.Tensor))
    return written + undeclared_writes(func, args, kwargs)


def writes(
    func: torch._ops.OpOverload,
    functional: str,
    declared: bool,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> bool:
    """Does this call write into an operand: its schema says so (``declared``), or it is a
    training batch norm, whose running statistics its schema does not mark written."""
    if functional == "aten.native_batch_norm":
        return bool(undeclared_writes(func, args, kwargs))
    return declared


def _read_operands(
    func: torch._ops.OpOverload, functional: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[torch.Tensor]:
    """The floating tensors an operation reads: its tensor arguments but the destinations it
    only writes (``out=`` arguments, ``copy_``'s first), told by position, not identity (``y``
    may be both ``out=`` and an operand)."""
    read: list[torch.Tensor] = []
    for position, argument in enumerate(func._schema.arguments):
        if argument.kwarg_only or position >= len(args):
            if argument.name not in kwargs:
                continue
            value = kwargs[argument.name]
        else:
            value = args[position]
        info = argument.alias_info
        only_written = argument.kwarg_only or (functional == "aten.copy" and position == 0)
        if info is not None and info.is_write and only_written:
            continue
        read.extend(
            t for t in _leaves((value,)) if isinstance(t, torch.Tensor) and t.dtype in _FORMATS
        )
    return read


def _wide_copies(
    widen: Callable[[Any], Any],
    func: torch._ops.OpOverload,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments of an operation that writes into some of them, ``widen``-ed for its wider
    run, every tensor it writes copied whatever its format: the wider run must not write into
    the program's tensors, which the plain run then writes again (``x.add_(y)`` of a float32
    ``x`` and a bfloat16 ``y`` added ``y`` twice)."""
    written = {id(t) for t in _written_operands(func, args, kwargs)}

    def copy(value: Any) -> Any:
        widened = widen(value)
        if widened is value and isinstance(value, torch.Tensor) and id(value) in written:
            return value.clone()
        return widened

    return _map_arguments(copy, args, kwargs)


def _widen_float32(value: Any) -> Any:
    """float32 tensors (and dtypes) to float64."""
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return value.to(torch.float64)
    if value is torch.float32:
        return torch.float64
    return value


_DESCRIPTIONS: dict[Any, tuple[str, bool, bool]] = {}
#: (overload, operand dtypes and types) -> the dtypes of its results in a plain run
_RESULT_DTYPES: dict[tuple[Any, ...], list[torch.dtype | None]] = {}


def _describe(func: torch._ops.OpOverload) -> tuple[str, bool, bool]:
    """(functional packet name, whether it passes unrounded, whether it is mutable), once per
    overload."""
    description = _DESCRIPTIONS.get(func)
    if description is None:
        functional = f"{func.namespace}.{func._opname}".removesuffix("_")
        schema = func._schema
        passes = (
            functional in EXACT
            or (functional.endswith("_copy") and functional != "aten._to_copy")
            or func.is_view
            or (not schema.is_mutable and any(r.alias_info is not None for r in schema.returns))
        )
        description = (functional, passes, schema.is_mutable)
        _DESCRIPTIONS[func] = description
    return description


def _leaves(values: tuple[Any, ...] | list[Any]) -> list[Any]:
    """The arguments, with lists and tuples of them (``cat``'s tensors) opened."""
    leaves: list[Any] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            leaves.extend(_leaves(value))
        else:
            leaves.append(value)
    return leaves


def _map(function: Callable[[Any], Any], value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)([_map(function, item) for item in value])
    return function(value)


def _map_arguments(
    function: Callable[[Any], Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    mapped = tuple(_map(function, a) if isinstance(a, (list, tuple)) else function(a) for a in args)
    if not kwargs:
        return mapped, kwargs
    return mapped, {name: _map(function, v) for name, v in kwargs.items()}


def _results(out: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """An operation's results as a flat list, and how to put a list back in their shape."""
    if isinstance(out, torch.Tensor):
        return [out], lambda leaves: leaves[0]
    if isinstance(out, (tuple, list)) and not any(isinstance(o, (tuple, list)) for o in out):
        kind = type(out)
        return list(out), lambda leaves: kind(leaves)
    leaves, spec = tree_flatten(out)
    return leaves, lambda new: tree_unflatten(new, spec)


def _signature(func: torch._ops.OpOverload, flat: list[Any]) -> tuple[Any, ...]:
    """What decides an operation's result dtypes: its operands' dtypes, and whether each is
    0-d (a 0-d operand does not promote: bfloat16 + a 0-d float32 tensor is bfloat16, + a
    1-d one float32); for an operation returning a list (``unsafe_chunk``, ``split``), whose
    length the shapes and numbers decide, those too; and every boolean, which may decide
    whether a result exists at all (a backward kernel's ``output_mask``: a group norm's
    gradient without the input's, after one with it, took three dtypes for two results and
    crashed). Learnt from one operation's dtypes, a later call with other shapes took the
    wrong dtypes or crashed."""
    listed = _returns_list(func)

    def part(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return (v.dtype, tuple(v.shape)) if listed else (v.dtype, v.dim() == 0)
        if isinstance(v, (torch.dtype, bool)) or (listed and isinstance(v, (int, float))):
            return v
        return type(v)

    return tuple(part(v) for v in flat)


@functools.cache
def _returns_list(func: torch._ops.OpOverload) -> bool:
    return any(isinstance(r.type, torch.ListType) for r in func._schema.returns)


# torch leaves TorchDispatchMode's __init_subclass__ and __init__ unannotated
class StochasticMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Runs the operations of its block with random rounding, drawing from ``draw``.
    ``ops`` counts the results it rounded; ``overflowed`` names the first operation that made a
    non-finite value from finite operands (None if none did); ``random`` the first that drew
    random numbers; ``dtypes`` holds the floating
    dtypes of the results (the grids the run rounded onto). ``memo``: what the samples of one
    call share (the wide copies of the parameters, their norms), by default this run's own."""

    def __init__(self, draw: Draw, memo: Memo | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.draw = draw
        #: functions of the parameters, shared with the call's other samples
        self.memo = Memo() if memo is None else memo
        self.ops = 0
        self.overflowed: str | None = None
        #: the floating dtypes of the results (the grids this run rounded onto)
        self.dtypes: set[torch.dtype] = set()
        self._suspect = False
        self._attention = MathAttention() if needs_math_attention() else None
        #: the first operation that drew random numbers (dropout in training), None if none
        self.random: str | None = None

    def __enter__(self) -> StochasticMode:
        """Enter the dispatch mode, subscribe to the Triton instrumentation and run fused
        attention off the CPU through its math path (:mod:`.attention`), with freed memory
        kept for the next operation (:func:`..allocator.keep_freed_memory`)."""
        keep_freed_memory()
        open_block(self, super().__enter__)
        if self._attention is not None:
            self._attention.__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._attention is not None:
            self._attention.__exit__(*exc)  # type: ignore[no-untyped-call]
        close_block(self, lambda: TorchDispatchMode.__exit__(self, *exc))  # type: ignore[no-untyped-call]

    def kernel_rounded(
        self,
        op: str,
        wide: np.ndarray,
        format_name: str,
        operands: tuple[np.ndarray, ...],
        axis: int | None = None,
    ) -> np.ndarray:
        """A Triton kernel's result (:class:`~pytest_fpcheck.tracking.core.observe.
        OperationRounder`): ``wide`` plus its accumulation term, rounded at random onto the
        format named ``format_name`` (float64: moved one step with probability 1/12 each)."""
        fmt = FORMATS[format_name]
        self.ops += 1
        self.dtypes.add(getattr(torch, format_name))
        value = torch.from_numpy(np.array(wide, dtype=np.float64))
        kind = op.rsplit(".", 1)[-1]
        if kind in SCANS and axis is not None:
            normal = self.draw.take("normal", value).numpy()
            noise = kernel_scan_noise(
                kind, value.numpy(), axis, fmt.precision, fmt.emin, fmt.unit_roundoff, normal
            )
            value = value + torch.from_numpy(noise)
        else:
            sigma = kernel_sigma(kind, operands, axis, wide, fmt.unit_roundoff)
            if sigma is not None:
                value = add_noise(value, torch.from_numpy(sigma), self.draw)
        if format_name == "float64":
            rounded = perturb_in_place_format(value, self.draw)
        else:
            target = getattr(torch, format_name)
            rounded, _ = round_checked(value, target, fmt, self.draw)
        result: np.ndarray = rounded.to(torch.float64).numpy()
        if (
            self.overflowed is None
            and not np.isfinite(result).all()
            and all(np.isfinite(operand).all() for operand in operands)
        ):
            self.overflowed = op
        return result

    def _dispatch(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """The handler (a batch calls it without a second wrapper: torch wraps each class's
        own ``__torch_dispatch__`` to keep Dynamo out, a few microseconds per call)."""
        kwargs = kwargs or {}
        functional, passes, mutable = _describe(func)
        if self.random is None and _draws_random(func, args, kwargs):
            self.random = functional
        if functional in SUBSTITUTES:
            run = substitute(func, functional, args, kwargs)
            if run is not None:
                return self.reentered(run)
        mutable = writes(func, functional, mutable, args, kwargs)
        if passes or (functional == "aten.index_put" and not _accumulate(args, kwargs)):
            return self._call(func, args, kwargs)
        flat = _leaves(args) + _leaves(tuple(kwargs.values()))
        if any(isinstance(v, torch.Tensor) and v.is_complex() for v in flat):
            _refuse_complex(func)
        for v in flat:
            if isinstance(v, torch.Tensor) and v.layout != torch.strided:
                _refuse_layout(functional, v.layout)
        floating = [v for v in flat if isinstance(v, torch.Tensor) and v.dtype in _FORMATS]
        if not floating:
            return self._call(func, args, kwargs)
        self._suspect = False
        after, before = floating, None
        if mutable:
            for written in _written_operands(func, args, kwargs):
                self.memo.forget(written)  # a parameter's widened copy and norms are stale
            # it writes into an operand, which any other may share memory with: the operands'
            # values before it ran, but for a destination it only writes (out=, copy_'s)
            after, before = (
                [],
                self._operands_finite(_read_operands(func, functional, args, kwargs)),
            )
        result = self._handle(func, functional, mutable, flat, floating, args, kwargs)
        for leaf in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(leaf, torch.Tensor):
                if leaf.is_complex():
                    _refuse_complex(func)
                if leaf.layout != torch.strided:
                    _refuse_layout(functional, leaf.layout)
                self.dtypes.add(leaf.dtype)
        if mutable and not any(isinstance(leaf, torch.Tensor) for leaf in _results(result)[0]):
            # an operation in place that returns nothing (_foreach_mul_): what it wrote
            self._check_overflow(functional, _written_operands(func, args, kwargs), after, before)
        else:
            self._check_overflow(functional, result, after, before)
        return result

    __torch_dispatch__ = _dispatch

    def reentered(self, run: Callable[[], Any]) -> Any:
        """``run()`` with this mode seeing (and rounding) each operation it makes, from within
        the handling of another (:mod:`.normalisation`'s substitutes)."""
        TorchDispatchMode.__enter__(self)  # type: ignore[no-untyped-call]
        try:
            return run()
        finally:
            TorchDispatchMode.__exit__(self, None, None, None)  # type: ignore[no-untyped-call]

    # what a batch of samples (pytest_fpcheck.stochastic.batched) does its own way

    def _call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run the operation (here: as it is)."""
        return func(*args, **kwargs)

    def _operands_finite(self, tensors: list[torch.Tensor]) -> Any:
        """Are these operands finite (here: all of them; a batch: each sample's)?"""
        return all(map(_all_finite, tensors))

    def _check_overflow(
        self, functional: str, result: Any, floating: list[torch.Tensor], before: Any
    ) -> None:
        """Record ``functional`` as the run's overflow if it made a non-finite value from finite
        operands: ``floating`` now and ``before`` (:meth:`_operands_finite` of those of an
        operation that writes into an operand, taken before it ran; None: none). Looked at only
        when a rounding found a value out of range."""
        if (
            self._suspect  # some result was not finite, or could round beyond the range
            and self.overflowed is None
            and not _all_finite(result)
            and all(map(_all_finite, floating))
            and (before is None or before)
        ):
            self.overflowed = functional

    def _note_range(self, x: torch.Tensor, fmt: Format, inside: bool | None = None) -> None:
        """If ``x`` is not finite and within ``fmt``'s range (``inside``, when known), the
        operation is suspect."""
        if inside is None:
            inside = in_range(x, fmt)
        self._suspect |= not inside

    def _sigma(
        self,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        total: torch.Tensor,
        u: float,
    ) -> torch.Tensor | None:
        """The standard deviation of the accumulation's rounding (None: no accumulation)."""
        return accumulation_sigma(functional, args, kwargs, total, u, self.memo)

    def _spread(self, wide: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """A conversion's source in the shape of its result."""
        return wide.expand(out.shape)

    def _handle(
        self,
        func: torch._ops.OpOverload,
        functional: str,
        mutable: bool,
        flat: list[Any],
        floating: list[torch.Tensor],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """The operation's results, rounded (see the module docstring)."""
        if functional in _CONVERSIONS:
            return self._convert(func, functional, args, kwargs)
        if not any(v.dtype in _NARROW for v in floating):
            # the wider run first: it works on copies, the plain run may modify the operands
            wide, wide_args, wide_kwargs, widened = None, args, kwargs, False
            if functional not in _OWN_FORMAT and any(v.dtype == torch.float32 for v in floating):
                if mutable:
                    wide_args, wide_kwargs = _wide_copies(_widen_float32, func, args, kwargs)
                else:
                    wide_args, wide_kwargs = _map_arguments(self._widened_float32, args, kwargs)
                try:
                    wide = self._call(ACCURATE.get(func, func), wide_args, wide_kwargs)
                    widened = True  # (an operation in place may return nothing)
                except RuntimeError:  # a kernel without float64: its own result, perturbed
                    wide, wide_args, wide_kwargs = None, args, kwargs
                if wide is not None and not mutable:
                    targets = self._target_dtypes(func, flat, args, kwargs)
                    if all(target in _FORMATS for target in targets):
                        # floating results only: no float32 run, only its dtypes
                        return self._round_results(
                            wide, targets, functional, wide_args, wide_kwargs, None
                        )
            out = self._call(func, args, kwargs)
            if mutable and widened:
                return self._round_written(
                    func, out, wide, functional, (args, kwargs), wide_args, wide_kwargs
                )
            return self._round_outputs(
                out, out if wide is None else wide, functional, wide_args, wide_kwargs, mutable
            )
        if mutable:
            wide_args, wide_kwargs = _wide_copies(_widen, func, args, kwargs)
            wide = self._call(func, wide_args, wide_kwargs)
            out = self._call(func, args, kwargs)
            return self._round_written(
                func, out, wide, functional, (args, kwargs), wide_args, wide_kwargs
            )
        targets = self._target_dtypes(func, flat, args, kwargs)
        wide_args, wide_kwargs = _map_arguments(self._widened, args, kwargs)
        try:
            wide = self._call(ACCURATE.get(func, func), wide_args, wide_kwargs)
        except RuntimeError:
            # a kernel that insists on its operand types: its own result, perturbed
            out = self._call(func, args, kwargs)
            return self._round_outputs(out, out, functional, args, kwargs, False)
        plain = None
        if not all(target in _FORMATS for target in targets):
            plain = self._call(func, args, kwargs)  # its other results: as a plain run's
        return self._round_results(wide, targets, functional, wide_args, wide_kwargs, plain)

    def _round_results(
        self,
        wide: Any,
        targets: list[torch.dtype | None],
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        plain: Any,
    ) -> Any:
        """The results computed in a wider format, each floating one rounded to its dtype in a
        plain run (``targets``); the others (a comparison's booleans, an index, a Python
        number) are the plain run's, ``plain`` (a comparison with ``0.1`` made in the wider
        format is another comparison)."""
        leaves, rebuild = _results(wide)
        others = None if plain is None else _results(plain)[0]
        rounded = []
        for position, (leaf, target) in enumerate(zip(leaves, targets, strict=True)):
            if target in _FORMATS and isinstance(leaf, torch.Tensor):
                rounded.append(self._round(leaf, target, functional, args, kwargs))
            else:
                assert others is not None  # a plain run wherever a target is not floating
                rounded.append(others[position])
        return rebuild(rounded)

    def _widened(self, value: Any) -> Any:
        """:func:`_widen`, a parameter's copy made once per call (not to be modified)."""
        if isinstance(value, torch.Tensor) and value.dtype in _NARROW:
            return self.memo.get("widened", value, _to_float32)
        return _widen(value)

    def _widened_float32(self, value: Any) -> Any:
        """:func:`_widen_float32`, a parameter's copy made once per call (not to be modified)."""
        if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
            return self.memo.get("widened", value, _to_float64)
        return _widen_float32(value)

    def _target_dtypes(
        self,
        func: torch._ops.OpOverload,
        flat: list[Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> list[torch.dtype | None]:
        """The dtype of each result leaf in a plain run (None for a non-tensor), learnt once
        per process, operation and operand types by running it plainly."""
        key = (func, _signature(func, flat))
        dtypes = _RESULT_DTYPES.get(key)
        if dtypes is None:
            leaves, _ = _results(self._call(func, args, kwargs))
            dtypes = [leaf.dtype if isinstance(leaf, torch.Tensor) else None for leaf in leaves]
            _RESULT_DTYPES[key] = dtypes
        return dtypes

    def _round(
        self,
        wide: torch.Tensor,
        target: torch.dtype,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> torch.Tensor:
        """One result computed in a wider (or its own) format, rounded at random to ``target``."""
        if wide.layout != torch.strided:
            _refuse_layout(functional, wide.layout)
        fmt = _format(target)
        if fmt is None or wide.dtype not in _FORMATS:
            return wide.to(target) if wide.dtype != target else wide
        self.ops += 1
        accumulation = functional in ACCUMULATIONS
        u = (_FLOAT64 if target == torch.float64 else _FLOAT32).unit_roundoff
        if wide.dtype != target and _narrower(target, wide.dtype):
            if accumulation:
                wide = self._noisy(functional, args, kwargs, wide, u, wide.dtype)
            return self._onto(wide, target, fmt)
        own = wide.to(target)
        if not accumulation:
            self._note_range(own, fmt)
            return perturb_in_place_format(own, self.draw)
        if target == torch.float64:
            noisy = self._noisy(functional, args, kwargs, own, u, target)
            self._note_range(noisy, fmt)
            return perturb_in_place_format(noisy, self.draw)
        wider = torch.float64 if target == torch.float32 else torch.float32
        return self._onto(self._noisy(functional, args, kwargs, own, u, wider), target, fmt)

    def _noisy(
        self,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        total: torch.Tensor,
        u: float,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        """``total`` plus its accumulation's Gaussian term, in ``dtype``: a float32 matrix
        product in host memory in one compiled pass from its operands' norms, anything else
        from its standard deviation."""
        if functional in PRODUCTS and total.dtype == torch.float32 and total.device.type == "cpu":
            rows, columns = self._product_terms(functional, args, kwargs)
            scales = product_scales(functional, args, kwargs, u)
            return add_product_noise(total, rows, columns, scales, self.draw, dtype)
        sigma = self._sigma(functional, args, kwargs, total, u)
        assert sigma is not None  # an accumulation
        return add_noise(total.to(dtype), sigma, self.draw)

    def _product_terms(
        self, functional: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The squared norms of a product's rows and columns."""
        return product_terms(functional, args, self.memo)

    def _onto(self, value: torch.Tensor, target: torch.dtype, fmt: Format) -> torch.Tensor:
        """``value`` stochastically rounded onto ``target``; a value that is not finite, or
        that may round beyond the format's range, makes this operation suspect of overflow."""
        rounded, inside = round_checked(value, target, fmt, self.draw)
        self._note_range(value, fmt, inside)
        return rounded

    def _round_written(
        self,
        func: torch._ops.OpOverload,
        out: Any,
        wide: Any,
        functional: str,
        call: tuple[tuple[Any, ...], dict[str, Any]],
        wide_args: tuple[Any, ...],
        wide_kwargs: dict[str, Any],
    ) -> Any:
        """An operation that wrote into its operands (``call``: its arguments): each result
        rounded from the wider run's into the tensor written; an operation that returns nothing
        (the foreach ones in place, ``_foreach_mul_``) has its written operands rounded so,
        from their wide copies."""
        written = _written_operands(func, *call)
        copies = _written_operands(func, wide_args, wide_kwargs)
        results = [leaf for leaf in _results(out)[0] if isinstance(leaf, torch.Tensor)]
        if results:
            out = self._round_outputs(out, wide, functional, wide_args, wide_kwargs, True)
            # operands it writes but does not return (a training batch norm's running
            # statistics): each from its wider copy too
            returned = {leaf.untyped_storage().data_ptr() for leaf in results}
            pairs = [
                (w, c)
                for w, c in zip(written, copies, strict=True)
                if w.untyped_storage().data_ptr() not in returned
            ]
            written, copies = [w for w, _ in pairs], [c for _, c in pairs]
        if written:
            self._round_outputs(written, copies, functional, wide_args, wide_kwargs, True)
        return out

    def _round_outputs(
        self,
        out: Any,
        wide: Any,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        in_place: bool,
    ) -> Any:
        """Round each floating result of ``out`` from its counterpart in ``wide``; results of an
        in-place or ``out=`` operation are overwritten, others replaced."""
        leaves, rebuild = _results(out)
        wide_leaves, _ = _results(wide)
        rounded = []
        for leaf, wide_leaf in zip(leaves, wide_leaves, strict=True):
            if not isinstance(leaf, torch.Tensor) or leaf.dtype not in _FORMATS:
                rounded.append(leaf)
                continue
            value = self._round(wide_leaf, leaf.dtype, functional, args, kwargs)
            if in_place:
                leaf.copy_(value)
                rounded.append(leaf)
            else:
                rounded.append(value)
        return rebuild(rounded)

    def _convert(
        self,
        func: torch._ops.OpOverload,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """A conversion: a stochastic rounding of the source where the target is narrower."""
        out = self._call(func, args, kwargs)
        source = args[1] if functional == "aten.copy" else args[0]
        if (
            not isinstance(source, torch.Tensor)
            or source.dtype not in _FORMATS
            or out.dtype not in _FORMATS
            or not _narrower(out.dtype, source.dtype)
        ):
            return out
        wide = source.to(
            out.device, torch.float64 if source.dtype == torch.float64 else torch.float32
        )
        value = self._onto(self._spread(wide, out), out.dtype, _FORMATS[out.dtype])
        self.ops += 1
        if func._schema.is_mutable:
            out.copy_(value)
            return out
        return value


def _all_finite(value: Any) -> bool:
    """Are the floating tensors among ``value`` (a tensor or a tuple or list of them) finite?
    (A finite float64 sum, one pass, says yes; only a non-finite one is looked at closely.)"""
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() or value.numel() == 0:
            return True
        return math.isfinite(value.sum(dtype=torch.float64)) or bool(torch.isfinite(value).all())
    if isinstance(value, (tuple, list)):
        return all(map(_all_finite, value))
    return True


def _draws_random(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bool:
    """Does this call draw random numbers? An operation PyTorch tags as seeded does, unless
    its ``dropout_p`` is 0 (attention kernels: what scaled dot-product attention runs in
    evaluation) or its ``train`` is False (``native_dropout`` in evaluation)."""
    if not _seeded(func):
        return False
    for position, argument in enumerate(func._schema.arguments):
        if argument.name not in ("dropout_p", "train"):
            continue
        if position < len(args):
            value = args[position]
        else:
            value = kwargs.get(argument.name, argument.default_value)
        if argument.name == "dropout_p" and value == 0:
            return False
        if argument.name == "train" and value is False:
            return False
    return True


@functools.cache
def _seeded(func: torch._ops.OpOverload) -> bool:
    return torch.Tag.nondeterministic_seeded in func.tags


def _accumulate(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return bool(args[3] if len(args) > 3 else kwargs.get("accumulate", False))
