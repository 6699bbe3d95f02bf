"""What ``fp.probe_matmul`` reports: :class:`MatmulFeatures`, the features FTTN (paper 004
sections 5 and 6.1) names for a matrix accelerator, and how they are read from the candidate
models left consistent with the probes (a feature is decided only when all of them agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...formats import Format
    from ..order.tree import SummationTree
    from .library import Candidate

__all__ = ["MAX_CALLS", "PROBE_SHAPE", "MatmulFeatures", "features_of"]

#: (m, k, n) of every matmul call a probe makes; the element probed is [0, 0]
PROBE_SHAPE = (16, 64, 16)
#: the most calls of ``matmul`` one probe makes
MAX_CALLS = 200
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


def _agreed(consistent: list[Candidate], name: str) -> Any:
    values = {getattr(c, name) for c in consistent}
    return values.pop() if len(values) == 1 else None


def features_of(
    in_fmt: Format,
    out: Format,
    consistent: list[Candidate],
    tree: SummationTree | None,
    width: int | None,
    calls: int,
    notes: list[str],
) -> MatmulFeatures:
    """The features the ``consistent`` candidates agree on, with the order and the calls made."""
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
