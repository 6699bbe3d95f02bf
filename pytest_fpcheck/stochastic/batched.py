"""The samples of one ``stochastic_bounds`` call run together: one batch along a leading dimension.

Sixteen randomly rounded runs of a small model cost sixteen times the dispatch of every
operation and the Python of its rounding (docs/performance.md, "Cost"). Run as one batch, each
operation is dispatched and rounded once for all the samples.

How: ``fn`` runs once under :class:`BatchedMode`, a dispatch mode that sees every ATen
operation (as :class:`~pytest_fpcheck.stochastic.mode.StochasticMode` does, from which it takes
every rule). A value whose samples differ is a :class:`SampleBatch`: a tensor of the logical
shape one sample sees, holding the ``(samples, *shape)`` tensor of all the samples' values
(``rows``; row ``i`` is sample ``i``'s). The mode runs each operation on the rows through
functorch's batching rules (``vmap`` of that one operation, batch dimension 0 in and out: the
rules' own placement of the batch dimension, which a dispatch mode under ``torch.func.vmap``
sees without knowing where it is, never reaches the rounding), then rounds each row with the
draws of its own sample (:class:`~pytest_fpcheck.stochastic.rounding.BatchRandom`: the same
pool positions, strata and generators as that sample run alone). A value computed from values
all the samples share (the inputs, the parameters) stays a plain tensor until its first
rounding, which makes it a batch.

The samples are the same, bit for bit, as those the samples run one at a time give:

* each row draws exactly the numbers its sample draws alone;
* matrix products and convolutions (and the accumulation terms of matrix-vector and dot
  products) are computed one sample at a time, as ``samples`` calls of the kernel each
  sample makes alone: a batched product of ``samples`` times the rows runs another BLAS
  blocking (measured: a 4096 x 1024
  float32 product differed from the sixteen 256 x 1024 ones in most elements' last bit); each
  call writes its row of the batch;
* everything else runs batched: element-wise operations compute each element alone, and
  reductions along a dimension reduce each sample's slice as they would alone. An exception
  is possible where a kernel's arithmetic depends on the tensor's size or layout rather than on
  the element (a vectorised transcendental function whose scalar tail loop rounds differently,
  a reduction over a whole tensor split among threads): it changes a wide value's last bit,
  which changes a sample only where that bit decides a rounding (one in 65,536 for bfloat16
  from float32). The tests and benchmarks found none (tests/stochastic).

What a batch cannot run raises :class:`Unbatchable`, before the operation changes anything,
and the call runs its samples one at a time (:mod:`pytest_fpcheck.stochastic.run`):

* an operation reading a batch's value into Python (``.item()``, ``bool()``, data-dependent
  control flow, ``.tolist()``, ``.numpy()``) or giving a shape that depends on the values
  (``nonzero``, ``masked_select``): functorch refuses them;
* a random operation (dropout in training, ``torch.randn``): the samples run alone draw from
  the global generator one after another (an attention kernel with ``dropout_p=0`` and dropout
  in evaluation draw nothing and run batched);
* a write into a tensor every sample shares (a captured buffer, a module's running statistics)
  of a value that differs between the samples;
* a backward pass (``Tensor.backward``, ``torch.autograd.grad``, an operation in the autograd
  engine);
* a resize in place (``resize_``) of a value that differs between the samples;
* a module's parameters converted in place inside ``fn`` to a format they round onto
  (``model.to(torch.bfloat16)``: ``nn.Module._apply`` would set their data to a batch);
* a Triton kernel (its instrumentation rounds one sample's interpreter run);
* anything else that fails in the batched run (an error of ``fn`` then recurs, and is
  raised, in the samples run one at a time).

What ``fn`` did in Python before the failure (a counter, a list appended to) is done again by
the samples run one at a time: ``fn`` must be repeatable, as it always had to be (it runs once
per sample).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch._C import _functorch as functorch

from ..formats import Format
from .memo import Memo
from .mode import (
    _CONVERSIONS,
    _FORMATS,
    StochasticMode,
    _accumulate,
    _all_finite,
    _describe,
    _draws_random,
    _leaves,
    _map_arguments,
    _narrower,
    _written_operands,
    writes,
)
from .rounding import BatchRandom, in_range
from .substitutes import SUBSTITUTES, substitute

__all__ = ["BatchedMode", "SampleBatch", "Unbatchable"]


class Unbatchable(Exception):
    """``fn`` does something a batch of samples cannot do (the reason); its samples run one at
    a time."""


#: the dispatch keys of functorch, which a dispatch mode's handler runs without: put back for
#: the batching rules
_FUNCTORCH_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.FuncTorchBatched)
for _key in (
    torch._C.DispatchKey.FuncTorchVmapMode,
    torch._C.DispatchKey.FuncTorchDynamicLayerFrontMode,
    torch._C.DispatchKey.FuncTorchDynamicLayerBackMode,
):
    _FUNCTORCH_KEYS = _FUNCTORCH_KEYS | torch._C.DispatchKeySet(_key)

#: the entries into the autograd engine
_BACKWARD = frozenset({torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad})

#: operations computed one sample at a time (module docstring): products and convolutions
_PER_SAMPLE = frozenset(
    {
        "aten.mm",
        "aten.bmm",
        "aten.mv",
        "aten.addmm",
        "aten.baddbmm",
        "aten.addmv",
        "aten.dot",
        "aten.vdot",
        "aten.addbmm",
        "aten.convolution",
        "aten.convolution_backward",
    }
)
#: operations that change a tensor's size in place: a batch's rows cannot follow them
_RESIZES = frozenset({"aten.resize", "aten.resize_as"})
#: accumulations whose rounding term reads a value into Python: computed one sample at a time
_SIGMA_PER_SAMPLE = frozenset(
    {"aten.mv", "aten.addmv", "aten.dot", "aten.embedding_dense_backward"}  # (bincount)
)


class SampleBatch(torch.Tensor):
    """The values of one tensor in every sample of a batched run: a tensor of the shape one
    sample sees, whose ``rows`` hold the samples' values along a leading dimension. Only
    :class:`BatchedMode` computes with it."""

    rows: torch.Tensor

    @staticmethod
    def __new__(cls, rows: torch.Tensor) -> SampleBatch:
        batch: SampleBatch = torch.Tensor._make_wrapper_subclass(
            cls,
            rows.shape[1:],
            strides=rows.stride()[1:],
            dtype=rows.dtype,
            device=rows.device,
            requires_grad=False,
        )
        batch.rows = rows
        return batch

    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """Refuse the autograd engine before it runs (module docstring); pass the rest."""
        if func in _BACKWARD:
            raise Unbatchable("a backward pass")
        if func is torch._has_compatible_shallow_copy_type:
            # nn.Module._apply about to set a parameter's data to a batch (a module converted
            # inside fn): a batch must not end up in the module
            raise Unbatchable("a module's parameters converted in place")
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        raise Unbatchable(f"{func} on a batch of samples outside its run")

    def __repr__(self) -> str:  # type: ignore[override]
        return f"SampleBatch({tuple(self.rows.shape)}, dtype={self.dtype})"


def _unwrap(value: Any) -> Any:
    return value.rows if type(value) is SampleBatch else value


def _substitute(values: Any, replacements: dict[int, Any], counter: list[int]) -> Any:
    """``values`` (arguments, lists and tuples opened as :func:`_leaves` opens them) with the
    leaves at the positions of ``replacements`` replaced."""
    if isinstance(values, (list, tuple)):
        return type(values)(_substitute(v, replacements, counter) for v in values)
    position = counter[0]
    counter[0] += 1
    return replacements.get(position, values)


def _replace(
    args: tuple[Any, ...], kwargs: dict[str, Any], replacements: dict[int, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not kwargs and not any(isinstance(a, (list, tuple)) for a in args):
        # flat arguments (most operations): positions are indices
        new = list(args)
        for position, value in replacements.items():
            new[position] = value
        return tuple(new), kwargs
    counter = [0]
    new_args = tuple(_substitute(a, replacements, counter) for a in args)
    new_kwargs = {name: _substitute(v, replacements, counter) for name, v in kwargs.items()}
    return new_args, new_kwargs


def _aliased(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> Any:
    """``result`` with each result that is an argument written into (``add_``, ``out=``)
    replaced by that argument itself."""
    schema = func._schema
    written = {}
    for position, argument in enumerate(schema.arguments):
        info = argument.alias_info
        if info is not None and info.is_write:
            if argument.kwarg_only or position >= len(args):
                written[frozenset(info.before_set)] = kwargs.get(argument.name)
            else:
                written[frozenset(info.before_set)] = args[position]
    if not written:
        return result
    returns = schema.returns
    if len(returns) == 1:
        info = returns[0].alias_info
        if info is not None and frozenset(info.before_set) in written:
            return written[frozenset(info.before_set)]
        return result
    leaves = list(result)
    for index, ret in enumerate(returns):
        info = ret.alias_info
        if info is not None and frozenset(info.before_set) in written:
            leaves[index] = written[frozenset(info.before_set)]
    return type(result)(leaves)


@contextmanager
def _functorch_on() -> Iterator[None]:
    """Put back the functorch dispatch keys a mode's handler runs without."""
    include = torch._C._dispatch_tls_local_include_set()
    exclude = torch._C._dispatch_tls_local_exclude_set()
    with torch._C._ForceDispatchKeyGuard(include, exclude - _FUNCTORCH_KEYS):
        yield


@contextmanager
def _vmap_level(count: int) -> Iterator[int]:
    """A functorch vmap level of ``count`` samples, entered with the functorch keys back."""
    with _functorch_on():
        level = functorch._vmap_increment_nesting(count, "error")
        try:
            yield level
        finally:
            functorch._vmap_decrement_nesting()


def _batched(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    positions: tuple[int, ...],
    rows: list[torch.Tensor],
    level: int,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with the rows at ``positions`` batched along their first dimension at
    ``level``."""
    batched = {
        p: functorch._add_batch_dim(t, 0, level) for p, t in zip(positions, rows, strict=True)
    }
    return _replace(args, kwargs, batched)


class BatchedMode(StochasticMode):  # type: ignore[no-untyped-call]
    """The dispatch mode of a batch of samples (module docstring): the rules of
    :class:`~pytest_fpcheck.stochastic.mode.StochasticMode`, each operation run on the rows of
    its :class:`SampleBatch` operands and each row rounded with its own sample's draws.
    ``overflows`` holds each sample's first overflowing operation (None where none)."""

    def __init__(self, draw: BatchRandom, memo: Memo | None = None) -> None:
        super().__init__(draw, memo)
        self.batch = draw
        self.count = draw.rows
        self.overflows: list[str | None] = [None] * self.count
        self._suspects = [False] * self.count
        #: positions (in :func:`~pytest_fpcheck.stochastic.mode._leaves` order) of the
        #: current operation's batched operands
        self._positions: tuple[int, ...] = ()
        self._functional = ""
        #: identities of the current operation's batched operands (their rows) and of the
        #: results its roundings made (rows too)
        self._rows: set[int] = set()
        self._made: set[int] = set()
        #: each sample's own mode, for the operations run row by row
        self._alone: list[StochasticMode] | None = None

    def kernel_rounded(self, *args: Any, **kwargs: Any) -> Any:
        """A Triton kernel's rounding: refused (module docstring)."""
        raise Unbatchable("a Triton kernel")

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if torch._C._current_graph_task_id() != -1:
            raise Unbatchable("a backward pass")
        if _draws_random(func, args, kwargs):
            raise Unbatchable(f"{func} draws random numbers")
        functional, passes, mutable = _describe(func)
        flat = _leaves(args) + _leaves(tuple(kwargs.values()))
        positions = tuple(i for i, v in enumerate(flat) if type(v) is SampleBatch)
        mutable = writes(func, functional, mutable, args, kwargs)
        if positions and functional in _RESIZES:
            # resizing the rows' flat storage would shift each sample's values into the next
            raise Unbatchable(f"{functional} of a value that differs between the samples")
        if not positions:
            # the same in every sample unless it rounds: run once, as it is
            passes = passes or (functional == "aten.index_put" and not _accumulate(args, kwargs))
            floating = any(isinstance(v, torch.Tensor) and v.dtype in _FORMATS for v in flat)
            if passes or not floating or not self._rounds(functional, args):
                return func(*args, **kwargs)
        if mutable:
            for target in _written_operands(func, args, kwargs):
                if type(target) is not SampleBatch:
                    raise Unbatchable(
                        f"{functional} writes a value that differs between the samples into a "
                        "tensor they share"
                    )
        if functional in SUBSTITUTES:
            run = substitute(func, functional, args, kwargs)
            if run is not None:
                return self.reentered(run)  # on the batches: each operation rounded per row
        physical_args, physical_kwargs = _map_arguments(_unwrap, args, kwargs)
        if not passes and _largest(flat) >= ROW_BY_ROW:
            # (views, selections and exact operations stay batched: a view of the rows, which
            # a write through it must reach)
            result = self._row_by_row(func, types, positions, physical_args, physical_kwargs)
            if mutable:
                return _aliased(func, args, kwargs, _map_results(SampleBatch, result))
            return _map_results(self._wrap_rows, result)
        self._positions, self._functional = positions, functional
        physical = _leaves(physical_args) + _leaves(tuple(physical_kwargs.values()))
        self._rows = {id(physical[i]) for i in positions}
        self._suspects = [False] * self.count
        self._made = set()
        try:
            result = self._dispatch(func, types, physical_args, physical_kwargs)
            wrapped = _map_results(self._wrap, result)
        finally:
            self._positions, self._rows, self._made = (), set(), set()
        if mutable:
            return _aliased(func, args, kwargs, wrapped)
        return wrapped

    def _row_by_row(
        self,
        func: torch._ops.OpOverload,
        types: Any,
        positions: tuple[int, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """The operation run and rounded one sample at a time, each by its own sample's mode
        on its own rows (a large operation: the batch's passes over memory would leave the
        cache), the results stacked."""
        if self._alone is None:
            self._alone = [StochasticMode(draw, self.memo) for draw in self.batch.samples]
        flat = _leaves(args) + _leaves(tuple(kwargs.values()))
        rows = [flat[i] for i in positions]
        outs = []
        for index, mode in enumerate(self._alone):
            replacements = {p: t[index] for p, t in zip(positions, rows, strict=True)}
            sample_args, sample_kwargs = _replace(args, kwargs, replacements)
            self.batch.row(index)
            ops = mode.ops
            outs.append(mode._dispatch(func, types, sample_args, sample_kwargs))
            if mode.overflowed is not None and self.overflows[index] is None:
                self.overflows[index] = mode.overflowed
        self.ops += mode.ops - ops
        self.dtypes |= mode.dtypes
        self.batch.realign()
        self._made = set()
        first = outs[0]
        if isinstance(first, torch.Tensor):
            if not positions and first.dtype not in _FORMATS:
                return first  # no rounding: the same in every sample
            stacked = torch.stack(outs)
            self._made.add(id(stacked))
            return stacked
        results = []
        for i, leaf in enumerate(first):
            if isinstance(leaf, torch.Tensor) and (positions or leaf.dtype in _FORMATS):
                leaf = torch.stack([out[i] for out in outs])
                self._made.add(id(leaf))
            results.append(leaf)
        return type(first)(results)

    def _wrap_rows(self, t: torch.Tensor) -> torch.Tensor:
        return SampleBatch(t) if id(t) in self._made else t

    def _wrap(self, t: torch.Tensor) -> torch.Tensor:
        """A result of the current operation as a :class:`SampleBatch` if it holds rows: every
        result of an operation on batches, the rounded results of one on shared values."""
        if self._positions or id(t) in self._made:
            return SampleBatch(t)
        return t

    def _rounds(self, functional: str, args: tuple[Any, ...]) -> bool:
        """Would the operation (not exact, with a floating operand, no batch among its
        operands) round its result? Conversions only to a narrower format."""
        if functional not in _CONVERSIONS:
            return True
        if functional == "aten.copy":
            target, source = args[0], args[1]
            return (
                isinstance(source, torch.Tensor)
                and source.dtype in _FORMATS
                and target.dtype in _FORMATS
                and _narrower(target.dtype, source.dtype)
            )
        return True  # _to_copy: its target dtype is known only from its result

    def _call(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The operation on the rows of its batched operands (their positions: the current
        operation's), batch dimension first; products one sample at a time."""
        positions = self._positions
        if not positions:
            return func(*args, **kwargs)
        flat = _leaves(args) + _leaves(tuple(kwargs.values()))
        rows = [flat[i] for i in positions]
        if self._functional in _PER_SAMPLE:
            return self._per_sample(func, args, kwargs, rows)
        return _aliased(func, args, kwargs, self._vmap(func, args, kwargs, rows))

    def _vmap(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        rows: list[torch.Tensor],
    ) -> Any:
        count = self.count
        with _vmap_level(count) as level:
            inner_args, inner_kwargs = _batched(args, kwargs, self._positions, rows, level)
            out = func(*inner_args, **inner_kwargs)
            return _map_results(lambda t: functorch._remove_batch_dim(t, level, count, 0), out)

    def _per_sample(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        rows: list[torch.Tensor],
    ) -> Any:
        """``func`` once per sample, on its rows: the kernel calls of the samples run alone."""
        positions = self._positions
        unbound = [t.unbind(0) for t in rows]
        outs = []
        for index in range(self.count):
            replacements = {p: u[index] for p, u in zip(positions, unbound, strict=True)}
            sample_args, sample_kwargs = _replace(args, kwargs, replacements)
            outs.append(func(*sample_args, **sample_kwargs))
        if func._schema.is_mutable:  # type: ignore[attr-defined]
            return _aliased(func, args, kwargs, outs[0])  # written into the rows
        first = outs[0]
        if isinstance(first, torch.Tensor):
            return torch.stack(outs)
        return type(first)(
            torch.stack([out[i] for out in outs]) if isinstance(leaf, torch.Tensor) else leaf
            for i, leaf in enumerate(first)
        )

    def _onto(self, value: torch.Tensor, target: torch.dtype, fmt: Format) -> torch.Tensor:
        rounded = super()._onto(value, target, fmt)
        self._made.add(id(rounded))
        return rounded

    def _expanded(self, wide: torch.Tensor) -> torch.Tensor:
        """``wide`` with the samples' dimension: a value every sample shares, expanded."""
        if self._positions:
            return wide
        return wide.expand(self.count, *wide.shape)

    def _round(
        self,
        wide: torch.Tensor,
        target: torch.dtype,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> torch.Tensor:
        if wide.dtype not in _FORMATS or target not in _FORMATS:
            return super()._round(wide, target, functional, args, kwargs)
        # computed once, rounded per sample: every result becomes a batch
        rounded = super()._round(self._expanded(wide), target, functional, args, kwargs)
        self._made.add(id(rounded))
        return rounded

    def _sigma(
        self,
        functional: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        total: torch.Tensor,
        u: float,
    ) -> torch.Tensor | None:
        positions = self._positions
        if not positions:  # the same for every sample: computed once
            return super()._sigma(functional, args, kwargs, total[0], u)
        flat = _leaves(args) + _leaves(tuple(kwargs.values()))
        rows = [flat[i] for i in positions]
        if functional in _SIGMA_PER_SAMPLE:
            sigmas = []
            for index in range(self.count):
                replacements = {p: t[index] for p, t in zip(positions, rows, strict=True)}
                sample_args, sample_kwargs = _replace(args, kwargs, replacements)
                sigma = super()._sigma(functional, sample_args, sample_kwargs, total[index], u)
                assert sigma is not None
                sigmas.append(sigma)
            return torch.stack(sigmas)
        count = self.count
        with _vmap_level(count) as level:
            inner_args, inner_kwargs = _batched(args, kwargs, positions, rows, level)
            inner_total = functorch._add_batch_dim(total, 0, level)
            sigma = super()._sigma(functional, inner_args, inner_kwargs, inner_total, u)
            if sigma is None:
                return None
            return functorch._remove_batch_dim(sigma, level, count, 0)

    def _note_range(self, x: torch.Tensor, fmt: Format, inside: bool | None = None) -> None:
        """Per sample: the samples with a value out of ``fmt``'s range are suspect."""
        if inside is None:
            inside = in_range(x, fmt)
        if inside:  # one pass over the batch, or none: the usual case
            return
        low, high = torch.aminmax(x.reshape(self.count, -1), dim=1)
        rows = (
            torch.isfinite(low)
            & torch.isfinite(high)
            & (torch.maximum(-low, high) <= fmt.max_finite)
        ).tolist()
        self._suspects = [s or not i for s, i in zip(self._suspects, rows, strict=True)]

    def _spread(self, wide: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """A conversion's source (with or without the samples' dimension) in the shape of its
        result (with it)."""
        if not self._positions:
            return wide.expand(self.count, *out.shape)
        if wide.dim() < out.dim() and self._source_batched:
            # the rows of a batched source, aligned on the result's last dimensions
            middle = [1] * (out.dim() - wide.dim())
            wide = wide.reshape(self.count, *middle, *wide.shape[1:])
        return wide.expand(out.shape)

    @property
    def _source_batched(self) -> bool:
        """Is the current conversion's source (its first operand; ``copy_``'s second) a batch?"""
        source = 1 if self._functional == "aten.copy" else 0
        return source in self._positions

    def _operands_finite(self, tensors: list[torch.Tensor]) -> Any:
        """Per sample: are its values of these operands finite (one pass each)?"""
        finite = torch.ones(self.count, dtype=torch.bool)
        for t in tensors:
            if id(t) in self._rows:
                rows = torch.isfinite(t).reshape(self.count, -1).all(1).cpu()
                finite &= rows
            elif not _all_finite(t):
                return [False] * self.count
        return finite.tolist()

    def _check_overflow(
        self, functional: str, result: Any, floating: list[torch.Tensor], before: Any
    ) -> None:
        """Per sample: a sample's rows of the result not finite where its operands were (and,
        for those the operation wrote into, were before it ran)."""
        if not any(self._suspects):
            return
        for index, suspect in enumerate(self._suspects):
            if not suspect or self.overflows[index] is not None:
                continue
            row = _map_results(functools.partial(self._row_of, index), result)
            if _all_finite(row):
                continue
            operands = [t[index] if id(t) in self._rows else t for t in floating]
            if all(map(_all_finite, operands)) and (before is None or before[index]):
                self.overflows[index] = functional

    def _row_of(self, index: int, t: torch.Tensor) -> torch.Tensor:
        """Sample ``index``'s value of a result ``t`` (all of ``t`` where it is shared)."""
        return t[index] if self._batched_result(t) else t

    def _batched_result(self, t: torch.Tensor) -> bool:
        return bool(self._positions) or id(t) in self._made


#: the number of elements of an operand in one sample from which an operation runs row by row
#: (2**16: Hugging Face's GPT-2 and BERT at width 64, whose MLPs are 8,192 elements a sample,
#: cost 1.3 and 1.07 plain runs per sample batched, 2.2 and 1.4 run row by row; operations of
#: 32,768 elements cost the same either way)
ROW_BY_ROW = 1 << 16


def _largest(flat: list[Any]) -> int:
    """The number of elements of the largest tensor among ``flat`` in one sample."""
    largest = 0
    for value in flat:
        if isinstance(value, torch.Tensor):
            size = value.rows[0].numel() if type(value) is SampleBatch else value.numel()
            largest = max(largest, size)
    return largest


def _map_results(function: Callable[[torch.Tensor], Any], out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return function(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_map_results(function, o) for o in out)
    return out
