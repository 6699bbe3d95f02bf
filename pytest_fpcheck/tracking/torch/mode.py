"""The PyTorch backend's dispatch mode behind ``fp.track()`` (RENDER III-A).

:class:`Tracker` sees every ATen operation run on its thread inside the block, runs it, and
records an enclosure of each floating result beside its storage (:mod:`..core.store`): a
substitute (:mod:`.substitutes`) or a composite operation's decomposition runs through the
tracker itself; any other operation is bounded by its rule from the registry (:mod:`.rules`,
given a :class:`~.context.RuleContext`). Views need no rule, nor does integer or boolean work on
exact operands. The tracker subscribes to the Triton instrumentation (:mod:`..core.observe`) for
the block, so kernels launched in it are bounded too.

The promise (issue 17): tracking observes and never changes what the program computes. Each
operation runs exactly once, as PyTorch runs it (the values and the random stream are those of
an untracked run); rules only read. An operation with a floating operand and no rule, or one
whose bounding fails inside this package, is a *gap* (:mod:`..core.gaps`): its floating results
get the whole line, with a note naming it, and the tracker counts it; under ``strict=True`` it
raises instead (``UnsupportedOperation``, or the internal error itself). Where an input may be
NaN (its enclosure is the whole line), the output elements that may depend on it become the
whole line too, by the operation's dependence structure (:mod:`.nan`), without running anything;
where every output element may, the rule's arithmetic is skipped (unless ``strict``).

``mode="a_posteriori"`` bounds what this run did instead of what any run could do (Higham,
*Accuracy and Stability of Numerical Algorithms*, section 3.3, running error analysis: the
computed values are known, so only their distance from the exact ones needs bounding). Each
floating result's enclosure is the hull of the value the run computed and the rule's enclosure
of the exact result over the operands' enclosures, evaluated as if in float64
(:class:`~.context.RuleContext` ``observed``). By induction every enclosure holds the exact
value (the rule encloses the exact result over operands that hold theirs), the computed value
(joined), and the value of the same operations run in float64 (the rule holds every float64
evaluation), so a float64 copy of the program is judged against the enclosure it belongs to.
What it does not hold is the value another summation order would have given: the bound is of
this run. A computed NaN makes the element the whole line.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np
import torch

from ...adapters import is_torch_tensor
from ...adapters.torch import dtype_format, internal, undeclared_writes
from ...allocator import keep_freed_memory
from ...errors import InvalidArgument, StaleBoundsError, UnsupportedOperation
from ...interval.bounds import Bounds, Provenance
from ...interval.core import Interval, is_whole_line
from ...interval.kernels import join_computed, summary
from ...interval.registry import lookup
from ..core import gaps as _gaps
from ..core.compiled import CompiledRegion
from ..core.interpose import Interposer, OpCall, describe_location
from ..core.policy import SumBound
from ..core.store import STORE, Record, float64_values
from ..triton import scope as triton_scope
from . import rules as _rules  # noqa: F401  (registers the rules)
from .context import RuleContext
from .decompose import decomposition_rule
from .nan import propagate as _propagate_nan
from .nan import whole_line_outputs as _whole_line_outputs
from .substitutes import SUBSTITUTES

#: why an operation on complex tensors is refused
_COMPLEX = (
    "complex tensors have no interval rules (their results are the whole line, real views of "
    "them included); bound the real and imaginary parts as real tensors, or run this code "
    "outside fp.track()"
)
#: why an operation on a tensor with a lazy negation or conjugation bit is refused
_LAYOUT = (
    "sparse, nested and other non-strided tensors have no interval rules: what such an "
    "operation produces has no bounds; convert to a dense tensor (.to_dense(), "
    ".to_padded_tensor()) for a bounded result, or run this code outside fp.track()"
)
_LAZY = (
    "an operand carries PyTorch's lazy negation or conjugation bit (a view such as "
    "z.conj().imag), whose values are not those of the storage the bounds live beside: its "
    "results are the whole line; materialise it before the tracked block (.resolve_neg(), "
    ".resolve_conj()), or run this code outside fp.track()"
)

__all__ = ["MODES", "Tracker", "record_conversion", "tensors"]

MODES = ("rigorous", "probabilistic", "a_posteriori")


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in an argument or result (nested in lists, tuples and dicts), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    found: list[torch.Tensor] = []
    if isinstance(value, (list, tuple, dict)):
        _collect(value.values() if isinstance(value, dict) else value, found)
    return found


def _collect(items: Any, found: list[torch.Tensor]) -> None:
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            _collect(item, found)
        elif isinstance(item, dict):
            _collect(item.values(), found)


def written_arguments(call: OpCall) -> list[torch.Tensor]:
    """The tensors an operation's schema says it writes (``Tensor(a!)`` arguments, lists of
    them included): what an operation that returns nothing changed."""
    written: list[torch.Tensor] = []
    for position, argument in enumerate(call.func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if argument.name in call.kwargs:
            value = call.kwargs[argument.name]
        elif position < len(call.args) and not argument.kwarg_only:
            value = call.args[position]
        else:
            continue
        written.extend(tensors(value))
    return written


def _undeclared(call: OpCall) -> list[torch.Tensor]:
    """:func:`~pytest_fpcheck.adapters.torch.undeclared_writes` of this call (checked by name
    first: it is asked of every operation)."""
    if call.functional != "aten.native_batch_norm":
        return []
    return undeclared_writes(call.func, call.args, call.kwargs)


def _split(result: Any, count: int) -> tuple[Any, tuple[Any, ...]]:
    """A rule's enclosures of an operation's ``count`` results, and those it gave after them
    (of what the operation wrote beside its results)."""
    if not isinstance(result, (tuple, list)):
        return result, ()
    return tuple(result[:count]), tuple(result[count:])


def _storage_ids(values: list[torch.Tensor]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in values if t.untyped_storage().nbytes()}


class _Schema(NamedTuple):
    """What the tracker asks of an overload's schema, read once per overload."""

    #: it writes an argument (``add_``, ``copy_``, ``out=`` variants)
    mutable: bool
    #: it changes an argument's sizes over the same storage (``transpose_``, ``unsqueeze_``)
    inplace_view: bool
    #: it has a composite kernel (PyTorch's decomposition, run by ``OpOverload.decompose``)
    decomposable: bool


_SCHEMAS: dict[torch._ops.OpOverload, _Schema] = {}


def _schema_of(func: torch._ops.OpOverload) -> _Schema:
    schema = _SCHEMAS.get(func)
    if schema is None:
        schema = _SCHEMAS[func] = _Schema(
            func._schema.is_mutable, torch.Tag.inplace_view in func.tags, _decomposable(func)
        )
    return schema


class Tracker(Interposer):
    """The dispatch mode behind :func:`~pytest_fpcheck.tracking.track.track`. ``mode``,
    ``order``, ``strict``, ``ops`` (how many operations it bounded) and ``gaps`` (what it could
    not bound, by operation and reason: :class:`~..core.gaps.Gap`) are public."""

    def __init__(
        self,
        *,
        mode: str = "rigorous",
        order: Any = None,
        assume: Mapping[Any, Any] | None = None,
        matmul_model: Any = None,
        strict: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(strict, bool):
            raise InvalidArgument("strict", strict, "True or False")
        if mode not in MODES:
            raise InvalidArgument("mode", mode, f"one of {', '.join(map(repr, MODES))}")
        if order is not None and not (hasattr(order, "n") and hasattr(order, "error_factor")):
            raise InvalidArgument("order", order, "a SummationTree from fp.reveal_order (or None)")
        self.mode = mode
        self.order = order
        self.sums = SumBound(mode, order, _matmul_models(matmul_model))
        self.assume = dict(assume or {})
        self.strict = strict
        self.ops = 0
        self.gaps: dict[tuple[str, str], _gaps.Gap] = {}
        self._depth = 0  # how many times the block is entered (substitutes re-enter it)
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

    def kernel_bounded(self) -> None:
        """A Triton launch in the block was bounded (:class:`..core.observe.LaunchBounder`)."""
        self.ops += 1

    def __enter__(self) -> Tracker:
        if self._depth == 0:
            keep_freed_memory()
            self.gaps = {}
            STORE.new_epoch()
        self._depth += 1
        try:
            return self._enter()
        except BaseException:
            self._depth -= 1
            raise

    def _enter(self) -> Tracker:
        triton_scope.open_block(self, super().__enter__)
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
        try:
            triton_scope.close_block(self, lambda: super(Tracker, self).__exit__(*exc))
        finally:
            self._depth -= 1
            if self._depth == 0:
                STORE.new_epoch()  # what happens to the tensors next, tracking does not see
                _gaps.hand_over(self.gaps.values())

    def handle(self, call: OpCall, run: Callable[[], Any]) -> Any:
        """Run the operation once and bound it; a gap (module docstring) instead of raising
        unless ``strict``. An error the operation itself raises reaches the caller unchanged."""
        if self.strict:
            return self._bound(call, run)
        ran: list[Any] = []

        def run_once() -> Any:
            try:
                out = run()
            except BaseException as error:
                error._fpcheck_raised_by_operation = True  # type: ignore[attr-defined]
                raise
            ran.append(out)
            return out

        try:
            return self._bound(call, run_once)
        except Exception as error:
            if getattr(error, "_fpcheck_raised_by_operation", False):
                raise  # the program's own error (a shape mismatch, say): not tracking's
            out = ran[0] if ran else run_once()
            self._gap(call, out, error)
            return out

    def _gap(self, call: OpCall, out: Any, error: Exception) -> None:
        """Record an operation tracking could not bound: the whole line for its floating
        results, with a note; counted in :attr:`gaps`."""
        unsupported = isinstance(error, UnsupportedOperation)
        gap = self._count_gap(
            call.name,
            _gaps.NO_RULE if unsupported else _gaps.INTERNAL_FAILURE,
            call.site,
            call.source,
            lambda: str(error) if unsupported else f"{type(error).__name__}: {error}",
            lambda: "" if unsupported else "".join(traceback.format_exception(error)),
        )
        in_place = call.func._schema.is_mutable
        self._unbounded(gap, tensors(out) or written_arguments(call), in_place=in_place)
        self._unbounded(gap, _undeclared(call), in_place=False)

    def kernel_gap(
        self,
        kernel: str,
        source: tuple[str, int] | None,
        error: Exception,
        written: list[torch.Tensor],
    ) -> None:
        """A Triton launch tracking could not bound ran plainly (:mod:`..triton.hooks`): a gap
        (``"no rule"``, op ``triton:<kernel>``), and what it wrote has no bounds."""
        op = f"triton:{kernel}"
        where = describe_location(source, "")
        gap = self._count_gap(
            op,
            _gaps.NO_RULE,
            f"{op} at {where}" if where else op,
            source,
            lambda: str(error),
            str,
        )
        self._unbounded(gap, written, in_place=False)

    def before_compiled_region(self, region: CompiledRegion) -> None:
        """Under ``strict``, a compiled graph is refused before it runs: tracking cannot see
        inside it."""
        if self.strict:
            raise UnsupportedOperation(
                region.name,
                where=region.site.partition(" at ")[2] or None,
                how="a torch.compile'd graph runs without tracking; run the function "
                "uncompiled inside fp.track(strict=True) (e.g. under "
                'torch.compiler.set_stance("force_eager"))',
            )

    def compiled_region(self, region: CompiledRegion) -> None:
        """A compiled graph ran untracked: what it produced and overwrote has no bounds, a gap
        (``"torch.compile region"``) counted per compiled function."""
        gap = self._count_gap(
            region.name,
            _gaps.COMPILED_REGION,
            region.site,
            region.source,
            lambda: f"{region.name} ran as compiled code; tracking does not see inside it",
            str,
        )
        self._unbounded(gap, region.outputs, in_place=False)
        self._unbounded(gap, region.written, in_place=True)

    def _count_gap(
        self,
        op: str,
        reason: str,
        site: str,
        source: tuple[str, int] | None,
        message: Callable[[], str],
        trace: Callable[[], str],
    ) -> _gaps.Gap:
        gap = self.gaps.get((op, reason))
        if gap is None:
            gap = self.gaps[(op, reason)] = _gaps.Gap(
                op=op,
                reason=reason,
                count=0,
                site=site,
                source=source,
                message=message(),
                traceback=trace(),
            )
        gap.count += 1
        return gap

    def _unbounded(self, gap: _gaps.Gap, written: list[torch.Tensor], *, in_place: bool) -> None:
        """The whole line, with the gap's note, for the floating tensors in ``written``."""
        provenance = Provenance().merge(site=gap.site, widening=np.inf)
        for tensor in written:
            if tensor.is_nested:
                continue  # no strided storage to record; what it becomes is a gap again
            if tensor.is_complex():
                with internal():  # a complex result's whole line, as its real view holds it
                    tensor = torch.view_as_real(tensor)
            if dtype_format(tensor.dtype) is None:
                continue  # integers and booleans: the values the program observed
            shape = tuple(tensor.shape)
            try:
                STORE.write(
                    tensor,
                    Interval.whole(shape),
                    provenance=provenance,
                    mode=self.mode,
                    notes=(gap.note(),),
                    in_place=in_place,
                    owned=True,
                )
            except Exception:  # a tensor the store cannot hold bounds for: no stale ones
                with contextlib.suppress(Exception):
                    STORE.forget(tensor)

    def _bound(self, call: OpCall, run: Callable[[], Any]) -> Any:
        packet = call.packet
        substitute = SUBSTITUTES.get(packet)
        if substitute is not None:
            with self.reentered():
                return substitute(*call.args, **call.kwargs)
        rule = lookup(call.name, packet)
        schema = _schema_of(call.func)
        if rule is None and schema.decomposable:
            # a composite operation reaching the mode undecomposed (from inside another
            # operation's decomposition): its parts, which have rules
            with self.reentered():
                return call.func.decompose(*call.args, **call.kwargs)
        inputs = tensors(call.args)
        if call.kwargs:
            inputs += tensors(call.kwargs)
        if any(t.is_complex() or t.is_neg() or t.is_conj() for t in inputs):
            return self._complex(call, run, schema, inputs)
        if any(t.layout != torch.strided or t.is_nested for t in inputs):
            run()
            raise UnsupportedOperation(call.name, where=call.location or None, how=_LAYOUT)
        mutable = schema.mutable
        # what the kernel writes beside its results although its schema does not say so (a
        # training batch norm's running statistics): read before it runs, recorded after
        hidden = _undeclared(call)
        stale_notes: list[str] = []
        records = [(t, _current_record(t, call, stale_notes)) for t in inputs]
        snapshot: dict[int, Interval] = {}
        if mutable or hidden:
            hidden_ids = {id(t) for t in hidden}
            for t, record in records:
                if (mutable or id(t) in hidden_ids) and (
                    record is not None or dtype_format(t.dtype) is not None
                ):
                    snapshot[id(t)] = _snapshot(t, record)
        out = run()
        outputs = tensors(out)
        if any(t.layout != torch.strided or t.is_nested for t in outputs):
            raise UnsupportedOperation(call.name, where=call.location or None, how=_LAYOUT)
        if not outputs:
            if rule is None and any(dtype_format(t.dtype) for t in written_arguments(call)):
                # returns nothing but overwrites floating arguments (_fused_adam_, ...): what
                # it wrote has no bound, and must not keep the bounds of what it held before
                raise UnsupportedOperation(call.name, where=call.location or None)
            return out
        if not mutable and _storage_ids(outputs) <= _storage_ids(inputs):
            return out  # a view: its bounds already live beside the storage
        if schema.inplace_view:
            return out  # transpose_, unsqueeze_, ...: new sizes over the same storage
        if any(t.is_complex() for t in outputs):
            raise UnsupportedOperation(call.name, where=call.location or None, how=_COMPLEX)
        tracked = any(r is not None and r.max_radius > 0 for _, r in records)
        floating_in = any(dtype_format(t.dtype) is not None for t in inputs)
        floating_out = any(dtype_format(t.dtype) is not None for t in outputs)
        if not tracked and not floating_in and (rule is None or not floating_out):
            # a factory, or integer and boolean work on exact operands: exact, nothing to bound
            for t in outputs:
                if STORE.has_record(t):
                    STORE.forget(t)  # overwritten in place by exact values
            return out
        # torch._decomp's decomposition, checked, where there is no rule or it refuses
        rule = decomposition_rule(call, self.reentered, rule)
        if rule is None:
            raise UnsupportedOperation(call.name, where=call.location or None)
        observed = self.mode == "a_posteriori"
        ctx = RuleContext(call, out, self.sums, snapshot, observed=observed)
        ctx.notes.extend(stale_notes)
        unbounded = any(r is not None and r.unbounded for _, r in records) or any(
            _unbounded(i) for i in snapshot.values()
        )
        # every output element may depend on a possibly-NaN operand: the whole line whatever
        # the rule says, so its arithmetic is skipped (a backward pass after an unbounded
        # loss); under strict the rule still runs, so that a variant it refuses still raises
        whole = _whole_line_outputs(ctx, inputs, outputs) if unbounded and not self.strict else None
        extra: tuple[Any, ...] = ()
        if whole is not None:
            result = whole
        else:
            result = rule(ctx)
            if hidden:
                result, extra = _split(result, len(outputs))
            if unbounded:
                result = _propagate_nan(ctx, inputs, outputs, result)
        summaries: list[tuple[float, bool] | None] = []
        if observed:
            result, summaries = _joined(outputs, result)
        self.ops += 1
        inherited = [r for _, r in records if r is not None]
        self._record(ctx, outputs, result, inherited, mutable, summaries)
        if hidden:
            if unbounded:  # (their dependence on a possibly-NaN operand is not worked out)
                extra = tuple(Interval.whole(tuple(t.shape)) for t in hidden)
            self._record_undeclared(ctx, hidden, extra, inherited)
        return out

    def _record_undeclared(
        self,
        ctx: RuleContext,
        hidden: list[torch.Tensor],
        extra: tuple[Any, ...],
        inherited: list[Record],
    ) -> None:
        """Record what an operation wrote beside its results (``hidden``) from the enclosures
        its rule gave after those of the results (``extra``); what it gave none for (the
        decomposition computes no running statistics) is a gap: the whole line, refused under
        ``strict``."""
        given = [(t, e) for t, e in zip(hidden, extra, strict=False) if e is not None]
        if given:
            pairs = [t for t, _ in given], [e for _, e in given]
            observed = ctx.observed
            summaries: list[tuple[float, bool] | None] = []
            if observed:
                joined, summaries = _joined(pairs[0], tuple(pairs[1]))
                pairs = pairs[0], list(joined)
            self._record(ctx, pairs[0], tuple(pairs[1]), inherited, False, summaries)
        missing = [t for t in hidden if all(t is not g for g, _ in given)]
        if not missing:
            return
        call = ctx.call
        how = "its rule does not bound the running statistics it updates in place here"
        if self.strict:
            raise UnsupportedOperation(call.name, where=call.location or None, how=how)
        gap = self._count_gap(
            call.name, _gaps.NO_RULE, call.site, call.source, lambda: f"{call.name}: {how}", str
        )
        self._unbounded(gap, missing, in_place=False)

    def _complex(
        self, call: OpCall, run: Callable[[], Any], schema: Any, inputs: list[torch.Tensor]
    ) -> Any:
        """An operation on complex tensors (or tensors with a lazy negation or conjugation bit,
        whose values are not their storage's): run, a view passed through (its bounds, if any,
        live beside the storage, a complex tensor's as those of its real view), anything else
        refused (a gap unless ``strict``: the whole line for what it produced). A complex
        tensor's enclosure is never read as a real one's: ``abs`` of a complex view of a
        tracked real tensor read the real parts' bounds as its own (values outside them)."""
        out = run()
        outputs = tensors(out)
        if outputs and not schema.mutable and _storage_ids(outputs) <= _storage_ids(inputs):
            return out
        if schema.inplace_view:
            return out
        lazy = any(t.is_neg() or t.is_conj() for t in inputs)
        raise UnsupportedOperation(
            call.name, where=call.location or None, how=_LAZY if lazy else _COMPLEX
        )

    def _record(
        self,
        ctx: RuleContext,
        outputs: list[torch.Tensor],
        result: Any,
        inherited: list[Record],
        in_place: bool,
        summaries: list[tuple[float, bool] | None],
    ) -> None:
        """Write each output's enclosure into the store, with the operands' provenance and
        notes and this site's own widening; ``summaries``: the radius summaries
        :func:`_joined` made of the enclosures, where it made them (else an enclosure's own,
        :attr:`Interval.summary`, where the kernel that wrote it took one)."""
        intervals = result if isinstance(result, (tuple, list)) else (result,)
        # the union of the operands' provenances (one operand's is its own: merging is
        # idempotent)
        provenance = (
            inherited[0].provenance
            if len(inherited) == 1
            else Provenance().merge(*(r.provenance for r in inherited))
        )
        notes = tuple(dict.fromkeys([n for r in inherited for n in r.notes] + ctx.notes))
        inherited_radius = max((r.max_radius for r in inherited), default=0.0)
        handed_over: set[int] = set()
        for position, (tensor, interval) in enumerate(zip(outputs, intervals, strict=False)):
            if interval is None:
                continue
            if interval.is_point and not STORE.has_record(tensor):
                continue  # exact and never tracked: nothing to say
            # a rule's result arrays become the record's buffers (no copy) unless another
            # output already took them
            ends = {id(interval.lo), id(interval.hi)}
            owned = not ends & handed_over
            handed_over |= ends
            summarised = summaries[position] if position < len(summaries) else None
            if summarised is None:  # the summary the rule's kernel took, if it took one
                summarised = interval.summary
            record = STORE.write(
                tensor,
                interval,
                provenance=provenance,
                mode=self.mode,
                notes=notes,
                in_place=in_place,
                owned=owned,
                summarised=summarised,
            )
            if record.lo.size == tensor.numel():  # the record is this output's
                radius = record.max_radius
            else:
                radius = (summarised or summary(interval.lo, interval.hi))[0]
            own = max(radius - inherited_radius, 0.0)
            # a site that widened nothing is not kept: its description is not needed then
            record.provenance = (
                provenance.merge(site=ctx.call.site, widening=own) if own > 0 else provenance
            )


def record_conversion(
    exact: torch.Tensor, converted: torch.Tensor, site: str | None = None
) -> None:
    """Record, a posteriori, the enclosure of ``converted``, a conversion made untracked of
    ``exact`` (values taken as exact, as an input is): what a posteriori tracking of
    ``aten._to_copy`` gives (the module docstring's rule: the exact value joined to the
    computed one), with the same site (``site``: the caller's, when it knows it: its many
    conversions then share one look-up of the user's frame), without the dispatch (module
    checks cast every replayed input). Nothing is recorded where the conversion is exact."""
    values = float64_values(exact)
    joined = join_computed(values, values, float64_values(converted))
    if joined is None:
        return
    lo, hi, summarised = joined
    record = STORE.write(
        converted,
        Interval(lo, hi),
        provenance=Provenance(),
        mode="a_posteriori",
        owned=True,
        summarised=summarised,
    )
    if record.max_radius > 0:
        if site is None:
            site = OpCall(torch.ops.aten._to_copy.default, (), {}).site  # this caller's
        record.provenance = Provenance().merge(site=site, widening=record.max_radius)


def _joined(
    outputs: list[torch.Tensor], result: Any
) -> tuple[Any, list[tuple[float, bool] | None]]:
    """Each floating output's enclosure joined to the values the run computed (the module
    docstring's a posteriori rule; where a computed value or an end is NaN, the whole line),
    and the radius summary of each enclosure it joined (None where it kept the rule's: an
    exact result, a point still, or the whole line already)."""
    single = not isinstance(result, (tuple, list))
    intervals = [result] if single else list(result)
    summaries: list[tuple[float, bool] | None] = [None] * len(intervals)
    for position, (tensor, interval) in enumerate(zip(outputs, intervals, strict=False)):
        if interval is None or dtype_format(tensor.dtype) is None:
            continue
        if is_whole_line(interval.lo, interval.hi):
            continue  # holds every value already
        joined = join_computed(interval.lo, interval.hi, float64_values(tensor))
        if joined is None:
            continue  # computed exactly: still a point
        lo, hi, summaries[position] = joined
        intervals[position] = Interval(lo, hi)
    return (intervals[0] if single else intervals), summaries


def _decomposable(func: torch._ops.OpOverload) -> bool:
    """Whether the operation runs as its composite kernel (PyTorch's decomposition into other
    operations, run by ``OpOverload.decompose``): it has one and no CPU or CUDA kernel of its
    own. One with both (``silu_backward``, ``mish_backward``) runs its own kernel, whose values
    the composite's differ from in the last bit: the tracked run must compute what the plain
    run does."""
    name, keys = func.name(), torch._C.DispatchKey
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(name, keys.CompositeImplicitAutograd) and not (
        has(name, keys.CPU) or has(name, keys.CUDA)
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


def _snapshot(t: torch.Tensor, record: Record | None) -> Interval:
    """An in-place operation overwrites its operand: read its enclosure (copied) first."""
    if record is not None:
        current = STORE.read(t)
        assert current is not None
        if current.is_point:
            return Interval.point(current.lo.copy())
        return Interval(current.lo.copy(), current.hi.copy())
    return Interval.point(float64_values(t, copy=True))


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
