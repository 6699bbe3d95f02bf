"""What a matrix multiply does with its bits: feature-targeted probes (FTTN, paper 004 sections 5
and 6.1), exported as ``fp.probe_matmul``.

``fp.probe_matmul(matmul, in_dtype=..., out_dtype=...)`` answers, for one output element of
``matmul(A, B)`` with ``A`` of shape (16, 64) and ``B`` of shape (64, 16):

1. **the accumulation order**, by FPRev (section 5.2: multiway nodes for fused multi-term sums)
   on masked inputs whose masks and units are chosen products of normal numbers (so that flushed
   subnormals and narrow formats do not spoil the queries; FPRev section 8.1). A block test on
   the same queries first looks for chains of fused ``w``-term blocks, whose full order FPRev
   reveals only in about ``w**2`` calls per block: for ``w <= 8`` the order of the first
   ``2w + 1`` terms is revealed, wider chains are taken from the block test (``order`` is None);
2. **every other feature**, by targeted probes (:mod:`._probe_library`) run on that order: each
   candidate model of a fused multi-term adder (extra alignment bits or exact sums, rounding of
   each addition, subnormal inputs and results kept or flushed, products exact or rounded,
   accumulator format, rounding of the final conversion) predicts each probe's result bit for bit
   (:mod:`pytest_fpcheck.emulate`); the matmul's results leave the *consistent* candidates, and
   a feature is reported only when all of them agree on it, ``None`` otherwise. A matmul that no
   candidate explains gets ``None`` everywhere.

The block width is the revealed tree's fan-out minus one (the accumulator plus ``width``
products per node; 1 for IEEE additions), cross-checked by the targeted probes, which are run
on that tree: it is reported only when some candidate reproduces every probe. A probe costs at
most 200 calls of ``matmul`` (``MatmulFeatures.calls``).

``probe_torch_matmul(device, in_dtype)`` probes ``torch.matmul`` once per process per argument
set (the plugin's ``matmul_features`` fixture and ``--fpcheck-probe`` header use it).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgument
from ..formats import FORMATS, Format, format_of, numpy_dtype
from ._order_inputs import to_float
from ._probe_library import Candidate, Library, next_probe, normalise

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    from ._order_tree import SummationTree

__all__ = ["MAX_CALLS", "PROBE_SHAPE", "MatmulFeatures", "probe_matmul", "probe_torch_matmul"]

#: (m, k, n) of every matmul call a probe makes; the element probed is [0, 0]
PROBE_SHAPE = (16, 64, 16)
#: the most calls of ``matmul`` one probe makes
MAX_CALLS = 200
_OUT_FORMATS = ("float32", "float16", "bfloat16")
# the largest number of terms whose order is revealed, by block width (0: no blocks found);
# FPRev needs about n * w / 2 calls for swamping w-term fused sums
_VERIFY = 12  # probes run after the candidates stop splitting (see _verify)
_REVEAL_LIMITS = {3: 7, 4: 9, 5: 11, 6: 13, 7: 15, 8: 17}
_FEATURES = (
    ("products_exact", "products exact"),
    ("products", "how products enter the sums"),
    ("block_width", "block width (terms fused per addition)"),
    ("extra_bits", "extra alignment bits"),
    ("exact_sums", "exact sums (IEEE: no alignment truncation)"),
    ("rounding", "rounding of each addition"),
    ("subnormal_inputs", "subnormal inputs kept"),
    ("subnormal_outputs", "subnormal results kept"),
    ("accumulator", "accumulator format"),
    ("conversion", "rounding of the conversion to the result"),
)


@dataclass(frozen=True)
class MatmulFeatures:
    """The probed numerical features of one matmul (API section 7). ``None`` means undecided:
    the probes could not tell, or no model explains the matmul (``consistent == 0``).

    ``extra_bits`` counts the bits kept beyond the accumulator's precision when the terms of one
    addition are aligned (``None`` as well when ``exact_sums``: every bit is kept, IEEE);
    ``rounding`` is one of ``"nearest-even"``, ``"toward-zero"`` (truncation of the aligned
    significands), ``"down"``, ``"up"``; ``subnormal_inputs`` / ``subnormal_outputs`` are True
    when kept, False when flushed to zero; ``conversion`` is the rounding of the final conversion
    from the accumulator to the result's format (``None`` also when they are the same format);
    ``order`` is the revealed :class:`~pytest_fpcheck.SummationTree` of output element [0, 0].
    ``products`` details ``products_exact``: ``"exact"``, ``"rounded"`` (to the accumulator),
    or ``"first-rounded"`` (a multiply starts each chain, fused multiply-adds continue it).
    ``calls`` counts the calls of ``matmul``; ``consistent`` the candidate models left;
    ``notes`` say why a feature is unknown.
    """

    in_dtype: str
    out_dtype: str
    products_exact: bool | None
    products: str | None
    block_width: int | None
    extra_bits: int | None
    exact_sums: bool | None
    rounding: str | None
    subnormal_inputs: bool | None
    subnormal_outputs: bool | None
    accumulator: str | None
    conversion: str | None
    order: SummationTree | None
    calls: int
    consistent: int
    notes: tuple[str, ...] = field(default=())

    def _shown(self, name: str) -> str:
        value = getattr(self, name)
        if name == "extra_bits" and value is None and self.exact_sums:
            return "n/a (exact sums)"
        if name == "conversion" and value is None and self.accumulator == self.out_dtype:
            return "n/a (accumulates in the result's format)"
        if value is None:
            return "unknown"
        if isinstance(value, bool):
            return "yes" if value else "no"
        return str(value)

    def summary(self) -> str:
        """A table of the features, the order's shape and the number of calls made."""
        rows = [(label, self._shown(name)) for name, label in _FEATURES]
        if self.order is None:
            rows.append(("accumulation order", "unknown"))
        else:
            rows.append(
                (
                    "accumulation order",
                    f"{self.order.n} terms, fan-out {self.order.fanout()}, "
                    f"depth {self.order.depth()}",
                )
            )
        rows.append(("consistent models", str(self.consistent)))
        rows.append(("matmul calls", f"{self.calls} (at most {MAX_CALLS})"))
        width = max(len(label) for label, _ in rows)
        m, k, n = PROBE_SHAPE
        lines = [
            f"matmul features: {self.in_dtype} inputs, {self.out_dtype} results ({m}x{k} @ {k}x{n})"
        ]
        lines += [f"  {label:<{width}}  {value}" for label, value in rows]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def header(self) -> str:
        """One line for a report header."""
        parts = [
            f"width={self._short('block_width')}",
            f"extra_bits={'exact' if self.exact_sums else self._short('extra_bits')}",
            f"rounding={self._short('rounding')}",
            f"acc={self._short('accumulator')}",
            f"products_exact={self._short('products_exact')}",
            f"subnormals in/out={self._short('subnormal_inputs')}/"
            f"{self._short('subnormal_outputs')}",
            f"calls={self.calls}",
        ]
        return f"matmul {self.in_dtype}->{self.out_dtype}: " + " ".join(parts)

    def _short(self, name: str) -> str:
        value = getattr(self, name)
        if value is None:
            return "?"
        if isinstance(value, bool):
            return "kept" if name.startswith("subnormal") and value else str(value).lower()
        return str(value)


class _Budget(Exception):
    """The probe reached MAX_CALLS calls."""


class _Caller:
    """Calls ``matmul`` on a probe row of ``A`` and column of ``B`` (other entries zero), counts
    the calls, and reads element [0, 0]."""

    def __init__(self, matmul: Callable[[Any, Any], Any], in_fmt: Format) -> None:
        self.matmul = matmul
        self.in_fmt = in_fmt
        self.dtype = numpy_dtype(in_fmt)
        self.calls = 0
        self.last: Any = None

    def raw(self, a_row: NDArray[np.float64], b_col: NDArray[np.float64]) -> Any:
        if self.calls >= MAX_CALLS:
            raise _Budget
        m, k, n = PROBE_SHAPE
        a = np.zeros((m, k), dtype=self.dtype)
        b = np.zeros((k, n), dtype=self.dtype)
        a[0] = a_row.astype(self.dtype)
        b[:, 0] = b_col.astype(self.dtype)
        self.calls += 1
        with np.errstate(all="ignore"):  # probes overflow narrow formats on purpose
            result = self.matmul(a, b)
        self.last = result
        return result

    def __call__(self, a_row: NDArray[np.float64], b_col: NDArray[np.float64]) -> float:
        result = self.raw(a_row, b_col)
        try:
            element = result[0][0]
        except (TypeError, IndexError, KeyError):
            raise InvalidArgument(
                "matmul", self.matmul, "a callable returning the (16, 16) product matrix"
            ) from None
        return to_float(element, what="matmul(a, b)[0][0]")


def _result_format(caller: _Caller, out_dtype: Any) -> Format:
    k = PROBE_SHAPE[1]
    caller(np.zeros(k), np.zeros(k))
    result = caller.last
    shape = tuple(getattr(result, "shape", ()))
    if shape and shape != (PROBE_SHAPE[0], PROBE_SHAPE[2]):
        raise InvalidArgument(
            "matmul", caller.matmul, f"a callable returning a (16, 16) matrix, got shape {shape}"
        )
    found: Format | None = None
    if hasattr(result, "dtype"):
        try:
            found = format_of(result, argument="matmul")
        except InvalidArgument:
            found = None
    if out_dtype is not None:
        out = format_of(out_dtype, argument="out_dtype")
        if out.name not in _OUT_FORMATS:
            raise InvalidArgument(
                "out_dtype", out_dtype, "None, 'float32', 'float16' or 'bfloat16'"
            )
        if found is not None and found.name != out.name:
            raise InvalidArgument(
                "out_dtype", out_dtype, f"the format of matmul's results ({found.name}) or None"
            )
        return out
    if found is None or found.name not in _OUT_FORMATS:
        raise InvalidArgument(
            "out_dtype",
            out_dtype,
            "the format of matmul's results ('float32', 'float16' or 'bfloat16'); it cannot be "
            f"read from a result of type {type(result).__name__}"
            + (f" and dtype {result.dtype}" if hasattr(result, "dtype") else ""),
        )
    return found


def _mask_schemes(in_fmt: Format, out: Format) -> list[tuple[int, int, bool]]:
    """(log2 of the mask product, log2 of the unit product, unit uses subnormal factors) to try:
    the widest gap first (for a float32 accumulator), then masks inside the result's range."""
    wide = FORMATS["float32"]
    schemes = []
    for subnormal in (False, True):
        low_factor = in_fmt.emin - (in_fmt.precision - 1 if subnormal else 0)
        unit = max(2 * low_factor, out.emin, wide.emin)
        for top in (min(2 * in_fmt.emax, wide.emax - 8), min(2 * in_fmt.emax, out.emax - 2)):
            if top - unit >= 8 and (top, unit, subnormal) not in schemes:
                schemes.append((top, unit, subnormal))
    return schemes


def _split(exponent: int, in_fmt: Format, subnormal: bool) -> tuple[float, float]:
    low = in_fmt.emin - (in_fmt.precision - 1 if subnormal else 0)
    first = min(max(exponent - exponent // 2, low), in_fmt.emax)
    return math.ldexp(1.0, first), math.ldexp(1.0, exponent - first)


class _Masked:
    """FPRev's masked queries (section 4.1) on the first ``n`` terms of element [0, 0], the mask
    and unit products built from normal (or, if asked, subnormal) factors; returns unit counts."""

    def __init__(self, caller: _Caller, scheme: tuple[int, int, bool], n: int) -> None:
        top, unit, subnormal = scheme
        self.caller = caller
        self.n = n
        self.big = _split(top, caller.in_fmt, subnormal=False)
        self.small = _split(unit, caller.in_fmt, subnormal)
        self.unit = math.ldexp(1.0, unit)

    def __call__(self, x: NDArray[Any]) -> float:
        k = PROBE_SHAPE[1]
        values = x.astype(np.float64)
        a, b = np.zeros(k), np.zeros(k)
        masks = np.abs(values) > 1.0
        a[: self.n] = np.where(masks, np.sign(values) * self.big[0], values * self.small[0])
        b[: self.n] = np.where(masks, self.big[1], np.where(values != 0, self.small[1], 0.0))
        return self.caller(a, b) / self.unit

    def count(self, i: int, j: int) -> float:
        """Surviving units with +M at leaf i, -M at leaf j and units on the other leaves."""
        x = np.ones(self.n)
        x[i], x[j] = 2.0, -2.0
        return self(x)


def _blocked_width(masked: _Masked) -> int | None:
    """FTTN's block test through masked queries: with the masks on terms 0 and j, the units in
    the fused sums that hold both masks vanish. In a chain of ``w``-term blocks (``w >= 3``) terms
    0, 1 and 2 share the first block, so the counts for j = 1 and 2 are both ``n - w``, and the
    second block's count for ``j = w`` is ``n - 2w``; returns ``w``, or None for any other
    pattern (IEEE additions, 2-term blocks, other orders)."""
    n = masked.n
    first, second = masked.count(0, 1), masked.count(0, 2)
    width = n - first
    if first != second or width != int(width) or not 3 <= width <= n:
        return None
    w = int(width)
    if 2 * w <= n and masked.count(0, w) != n - 2 * w:
        return None
    if w - 1 > 2 and masked.count(0, w - 1) != first:
        return None
    return w


def _reveal(
    caller: _Caller, in_fmt: Format, out: Format
) -> tuple[SummationTree | None, int | None, list[str]]:
    """(the order of element [0, 0] or None, the width of its fused blocks when read from the
    block test rather than from a full tree, notes)."""
    from .order import NondeterministicOrder, OrderRevealError, SummationTree, reveal_tree

    k = PROBE_SHAPE[1]
    notes: list[str] = []
    why = "no mask scheme fits these formats"
    for scheme in _mask_schemes(in_fmt, out):
        masked = _Masked(caller, scheme, k)
        try:
            if not float(masked.count(0, 1)).is_integer():
                why = "the masked queries do not return whole numbers of units"
                continue
            width = _blocked_width(masked)
            n = k if width is None else 2 * width + 1
            if width is not None and n > _REVEAL_LIMITS.get(width, 0):
                notes.append(
                    f"blocks of {width} terms found by the block test; revealing their order "
                    f"with FPRev would take about {width * width} calls, more than the budget: "
                    "the order is taken to be the chain of blocks, which the probes then check"
                )
                return None, width, notes
            tree = reveal_tree(_Masked(caller, scheme, n), n, dtype="float32")
        except (OrderRevealError, NondeterministicOrder) as error:
            why = str(error)
            continue
        children = [list(tree.children(v)) for v in range(n, tree.root + 1)]
        tree = SummationTree(n, children, dtype=in_fmt)
        if width is not None:
            if tree.fanout() != width + 1:
                notes.append(
                    f"the block test found {width}-term blocks but the revealed tree has fan-out "
                    f"{tree.fanout()}"
                )
                return tree, None, notes
            notes.append(f"order revealed over the first {n} terms (three blocks)")
        return tree, width, notes
    notes.append(f"accumulation order not revealed: {why}")
    return None, None, notes


@functools.lru_cache(maxsize=32)
def _library(
    key: Any, in_name: str, out_name: str
) -> tuple[Library, NDArray[np.int64], list[Candidate]]:
    """The probes and candidates for an order: a tree's nested form, or the width of a chain of
    blocks over the probe's k terms (cached: a probe grid shares them)."""
    from ..emulate.models import chain_plan, tree_plan
    from ._order_tree import SummationTree
    from ._probe_library import build_library, candidates, ranks

    in_fmt, out = FORMATS[in_name], FORMATS[out_name]
    if isinstance(key, int):
        plan = chain_plan(PROBE_SHAPE[1], key, with_c=False)
    else:
        plan = tree_plan(SummationTree.from_nested(key, dtype=in_fmt), with_c=False)
    library = build_library(plan, in_fmt, out)
    return library, ranks(library.predictions), candidates(in_fmt, out)


def _agreed(consistent: list[Candidate], name: str) -> Any:
    values = {getattr(c, name) for c in consistent}
    return values.pop() if len(values) == 1 else None


def _input_format(in_dtype: Any) -> Format:
    in_fmt = format_of(in_dtype, argument="in_dtype")
    if in_fmt.precision > 24:
        raise InvalidArgument(
            "in_dtype",
            in_dtype,
            "a format of at most 24 bits: 'float32', 'tfloat32', 'float16', 'bfloat16', "
            "'float8_e4m3fn' or 'float8_e5m2'",
            hint="float64 matmuls are IEEE on every known device; fp.reveal_order gives their order.",
        )
    return in_fmt


def probe_matmul(
    matmul: Callable[[Any, Any], Any], *, in_dtype: Any, out_dtype: Any = None
) -> MatmulFeatures:
    """The numerical features of ``matmul`` (see the module docstring and :class:`MatmulFeatures`).

    ``matmul(a, b)`` gets NumPy arrays of ``in_dtype`` (ml_dtypes for bfloat16 and float8; float32
    arrays of tfloat32 values for ``'tfloat32'``) of shapes (16, 64) and (64, 16) and returns their
    product as a NumPy array, a PyTorch tensor or nested lists. ``out_dtype`` is the format of the
    results (``'float32'``, ``'float16'`` or ``'bfloat16'``), read from them when None. At most 200
    calls are made.
    """
    if not callable(matmul):
        raise InvalidArgument("matmul", matmul, "a callable matmul(a, b) -> a @ b")
    features = _probe(matmul, _input_format(in_dtype), out_dtype)
    from ..report.sink import publish

    publish("probes", features, in_dtype=str(in_dtype), out_dtype=features.out_dtype)
    return features


def _probe(matmul: Callable[[Any, Any], Any], in_fmt: Format, out_dtype: Any) -> MatmulFeatures:
    caller = _Caller(matmul, in_fmt)
    out = _result_format(caller, out_dtype)
    try:
        tree, width, notes = _reveal(caller, in_fmt, out)
    except _Budget:
        tree, width, notes = None, None, [f"the order needed more than {MAX_CALLS} calls"]
    if tree is not None and width is None:
        plan_key: Any = tree.to_nested()
    elif width is not None:
        plan_key = width
    else:
        return _features(in_fmt, out, [], None, None, caller.calls, notes)
    library, ranked, cands = _library(plan_key, in_fmt.name, out.name)
    alive = np.arange(len(cands))
    while caller.calls < MAX_CALLS:
        j = next_probe(ranked, alive)
        if j is None:
            break
        observed = normalise(np.array([caller(library.a[j], library.b[j])]))[0]
        predicted = library.predictions[alive, j]
        same = (predicted == observed) | (np.isnan(predicted) & np.isnan(observed))
        if not same.any():
            notes.append(
                f"no fused multi-term model explains the result of a {library.kinds[j]!r} probe; "
                "every feature but the order is unknown"
            )
        alive = alive[same]
        if alive.size == 0:
            break
    alive = _verify(caller, library, alive, notes)
    consistent = [cands[c] for c in alive.tolist()]
    if width is None and tree is not None and tree.root != tree.n:
        width = tree.fanout() - 1
    elif tree is not None and tree.root == tree.n:
        notes.append(f"all {tree.n} terms meet in one fused sum: the width is at least {tree.n}")
    return _features(in_fmt, out, consistent, tree, width, caller.calls, notes)


def _verify(
    caller: _Caller, library: Library, alive: NDArray[np.int64], notes: list[str]
) -> NDArray[np.int64]:
    """Run up to ``_VERIFY`` more probes, one of each kind in turn, that the consistent candidates
    all predict alike: a matmul outside the model family is caught instead of being described by
    the first model that survived the splitting probes."""
    if alive.size == 0:
        return alive
    kinds = sorted(set(library.kinds))
    by_kind = {kind: [j for j, k in enumerate(library.kinds) if k == kind] for kind in kinds}
    run = 0
    for round_ in range(_VERIFY):
        for kind in kinds:
            if run >= _VERIFY or caller.calls >= MAX_CALLS or alive.size == 0:
                return alive
            probes = by_kind[kind]
            if round_ >= len(probes):
                continue
            j = probes[(round_ * 7919) % len(probes)]
            observed = normalise(np.array([caller(library.a[j], library.b[j])]))[0]
            predicted = library.predictions[alive, j]
            same = (predicted == observed) | (np.isnan(predicted) & np.isnan(observed))
            run += 1
            if not same.all():
                notes.append(
                    f"a {kind!r} probe contradicts {int((~same).sum())} of the models left: "
                    "no model of the family explains the matmul; every feature but the order "
                    "is unknown"
                )
                return alive[:0]
    return alive


def _features(
    in_fmt: Format,
    out: Format,
    consistent: list[Candidate],
    tree: SummationTree | None,
    width: int | None,
    calls: int,
    notes: list[str],
) -> MatmulFeatures:
    extra = _agreed(consistent, "extra_bits")
    products = _agreed(consistent, "products")
    exact_values = {c.extra_bits is None for c in consistent}
    exact_sums = exact_values.pop() if len(exact_values) == 1 else None
    flush_in = _agreed(consistent, "flush_inputs")
    flush_out = _agreed(consistent, "flush_outputs")
    return MatmulFeatures(
        in_dtype=in_fmt.name,
        out_dtype=out.name,
        products_exact=None if products is None else products == "exact",
        products=products,
        block_width=width if consistent else None,
        extra_bits=extra,
        exact_sums=exact_sums,
        rounding=_agreed(consistent, "rounding"),
        subnormal_inputs=None if flush_in is None else not flush_in,
        subnormal_outputs=None if flush_out is None else not flush_out,
        accumulator=_agreed(consistent, "accumulator"),
        conversion=_agreed(consistent, "conversion"),
        order=tree,
        calls=calls,
        consistent=len(consistent),
        notes=tuple(notes),
    )


def _torch_matmul(device: str, in_fmt: Format) -> Callable[[Any, Any], Any]:
    import torch

    from ._order_adapters import _to_torch

    def matmul(a: NDArray[Any], b: NDArray[Any]) -> Any:
        ta, tb = _to_torch(a, device), _to_torch(b, device)
        if in_fmt.name != "tfloat32":
            return torch.matmul(ta, tb)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(ta, tb)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before

    return matmul


@functools.cache
def _probe_torch(device: str, in_name: str, out_name: str | None) -> MatmulFeatures:
    return probe_matmul(
        _torch_matmul(device, FORMATS[in_name]), in_dtype=in_name, out_dtype=out_name
    )


def probe_torch_matmul(device: str, in_dtype: Any, out_dtype: Any = None) -> MatmulFeatures:
    """:func:`probe_matmul` of ``torch.matmul`` on ``device`` (``'cpu'``, ``'cuda'``,
    ``'cuda:1'``...), once per process for each argument set. ``in_dtype='tfloat32'`` probes
    float32 matmuls with ``torch.backends.cuda.matmul.allow_tf32`` set during the calls."""
    if not isinstance(device, str) or not device:
        raise InvalidArgument("device", device, "a torch device name such as 'cpu' or 'cuda'")
    in_fmt = _input_format(in_dtype)
    out_name = None if out_dtype is None else format_of(out_dtype, argument="out_dtype").name
    return _probe_torch(device, in_fmt.name, out_name)
