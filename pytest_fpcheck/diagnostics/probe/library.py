"""Candidate models and feature-targeted probes for ``fp.probe_matmul`` (FTTN, paper 004 section 5).

A *candidate* is one setting of the features a fused multi-term model has (:class:`Candidate`):
extra alignment bits (or exact sums), rounding of every addition, subnormal inputs and results
kept or flushed, products exact or rounded, the accumulator format and the rounding of the final
conversion to the result's format. Given the accumulation order (a revealed
:class:`~pytest_fpcheck.SummationTree`), every candidate predicts, bit for bit, what the matmul
returns on any input (:func:`pytest_fpcheck.emulate.models.evaluate_products`).

A *probe* is one input: a row of ``A`` and a column of ``B`` whose products are placed on chosen
leaves of the tree, FTTN's way (paper 004 section 5, Figure 2; Li et al. [24]): a few large terms
and small terms ``2**-j`` below them, so that whether a small term survives the alignment, and
how the sum is rounded, shows in the result; a cancelling term on the last leaf to be added brings
the rounding error of the first additions back into the result format's range; subnormal
factors and products; products of full significands. The library holds a seeded set of such
probes.
The probes are run adaptively (:func:`next_probe`): each time the one whose predictions best split
the candidates still consistent with the results so far, until no probe in the library splits
them. The candidates left are the *consistent* ones, and a feature is decided exactly when all of
them agree on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...emulate.models import PRODUCTS, ROUNDINGS, Plan, evaluate_products
from ...formats import FORMATS, Format, round_to

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "EXTRA_BITS",
    "Candidate",
    "Library",
    "build_library",
    "candidates",
    "leaf_sequence",
    "next_probe",
    "normalise",
    "ranks",
]

#: extra alignment bits the candidates range over; None stands for exact sums (IEEE)
EXTRA_BITS: tuple[int | None, ...] = (None, *range(9))
_SIGNIFICANDS = (1.0, 1.5, 1.25, 1.75, 1.125, 1.375)
_RANDOM_PROBES = 100
_SEED = 20250611


@dataclass(frozen=True)
class Candidate:
    """One model of a matmul's arithmetic (see the module docstring)."""

    extra_bits: int | None
    rounding: str
    flush_inputs: bool
    flush_outputs: bool
    products: str
    accumulator: str
    conversion: str | None


def accumulators(out: Format) -> tuple[Format, ...]:
    """The accumulator formats considered: the result's format, and float32 when it is wider."""
    wide = FORMATS["float32"]
    return (out,) if out.precision >= wide.precision else (out, wide)


def candidates(in_fmt: Format, out: Format) -> list[Candidate]:
    """Every candidate model for inputs ``in_fmt`` and results ``out``. Rounded products are a
    separate candidate only when a product may need more bits than the accumulator holds."""
    result = []
    for acc in accumulators(out):
        conversions: tuple[str | None, ...] = (None,) if acc.name == out.name else ROUNDINGS
        exactness = PRODUCTS if 2 * in_fmt.precision > acc.precision else ("exact",)
        for extra in EXTRA_BITS:
            for rounding in ROUNDINGS:
                for flush_in in (False, True):
                    for flush_out in (False, True):
                        for exact in exactness:
                            for conversion in conversions:
                                result.append(
                                    Candidate(
                                        extra,
                                        rounding,
                                        flush_in,
                                        flush_out,
                                        exact,
                                        acc.name,
                                        conversion,
                                    )
                                )
    return result


def leaf_sequence(plan: Plan) -> list[int]:
    """The leaves in the order the tree adds them (depth first, children in order)."""
    inner = plan.starts.size - 1
    if inner == 0:
        return list(range(plan.leaves))
    order: list[int] = []
    stack = [plan.leaves + inner - 1]
    while stack:
        node = stack.pop()
        if node < plan.leaves:
            order.append(node)
            continue
        v = node - plan.leaves
        stack.extend(reversed(plan.kids[plan.starts[v] : plan.starts[v + 1]].tolist()))
    return order


def _factor(value: float, in_fmt: Format, subnormal: bool) -> tuple[float, float] | None:
    """``(a, b)`` on ``in_fmt``'s grid with ``a * b == value`` exactly, ``b`` a power of two, both
    normal (``subnormal``: ``a`` may be subnormal); None when there is none."""
    if value == 0.0:
        return 0.0, 0.0
    _, exponent = math.frexp(abs(value))
    e = exponent - 1
    low = in_fmt.emin - (in_fmt.precision - 1 if subnormal else 0)
    for eb in sorted(range(in_fmt.emin, in_fmt.emax + 1), key=lambda t: abs(t - e / 2)):
        a = math.ldexp(value, -eb)
        ea = e - eb
        if (
            low <= ea <= in_fmt.emax
            and float(round_to(a, in_fmt)) == a
            and abs(a) <= in_fmt.max_finite
        ):
            return a, math.ldexp(1.0, eb)
    return None


@dataclass
class Library:
    """Probes (rows of ``a`` and ``b`` factors, float64 on the input grid) and the predictions of
    every candidate on them."""

    a: NDArray[np.float64]
    b: NDArray[np.float64]
    kinds: list[str]
    predictions: NDArray[np.float64]  # (candidates, probes), normalised


def normalise(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Results as compared: the sign of zero ignored, every NaN the same."""
    out: NDArray[np.float64] = np.where(values == 0.0, 0.0, values)
    return np.where(np.isnan(out), np.nan, out)


class _Builder:
    def __init__(self, plan: Plan, in_fmt: Format, out: Format) -> None:
        self.plan = plan
        self.in_fmt = in_fmt
        self.out = out
        self.k = plan.leaves
        self.seq = leaf_sequence(plan)
        self.rows_a: list[NDArray[np.float64]] = []
        self.rows_b: list[NDArray[np.float64]] = []
        self.kinds: list[str] = []

    def add(self, kind: str, placed: list[tuple[int, float]], subnormal: bool = False) -> bool:
        """A probe with the product ``value`` at each sequence position; False if some value is
        not a product of two inputs."""
        a = np.zeros(self.k)
        b = np.zeros(self.k)
        for position, value in placed:
            factors = _factor(value, self.in_fmt, subnormal)
            if factors is None:
                return False
            leaf = self.seq[position]
            a[leaf], b[leaf] = factors
        self.rows_a.append(a)
        self.rows_b.append(b)
        self.kinds.append(kind)
        return True

    def add_factors(self, kind: str, placed: list[tuple[int, float, float]]) -> None:
        a = np.zeros(self.k)
        b = np.zeros(self.k)
        for position, x, y in placed:
            leaf = self.seq[position]
            a[leaf], b[leaf] = x, y
        self.rows_a.append(a)
        self.rows_b.append(b)
        self.kinds.append(kind)


def _scales(in_fmt: Format, out: Format) -> list[int]:
    """Exponents of the large terms: one where the rounding errors of a float32 accumulator stay
    normal in the result's format, one safely inside the result's range, and 0."""
    top = 2 * in_fmt.emax - 3
    wanted = [0, min(out.emin + 24 + 14, top), min(out.emax - 4, top)]
    return sorted({max(min(e, top), 2 * in_fmt.emin + 2) for e in wanted})


def _random_probes(builder: _Builder, rng: np.random.Generator, precisions: list[int]) -> None:
    fanout = builder.plan.fanout
    k = builder.k
    scales = _scales(builder.in_fmt, builder.out)
    made = 0
    while made < _RANDOM_PROBES:
        eb = int(rng.choice(scales))
        p = int(rng.choice(precisions))
        big_sign = 1.0 if rng.random() < 0.8 else -1.0
        bigs = [
            big_sign * math.ldexp(float(rng.choice(_SIGNIFICANDS[:2])), eb)
            for _ in range(int(rng.integers(1, 4)))
        ]
        smalls = []
        for _ in range(int(rng.integers(1, 4))):
            j = int(rng.integers(1, p + 16))
            sign = 1.0 if rng.random() < 0.6 else -1.0
            smalls.append(sign * math.ldexp(float(rng.choice(_SIGNIFICANDS)), eb - j))
        terms = bigs + smalls
        rng.shuffle(terms)
        span = int(rng.choice([len(terms), len(terms) + 1, fanout, fanout + 1, 2 * fanout + 1]))
        span = min(max(span, len(terms)), k - 1)
        positions = sorted(rng.choice(span, size=len(terms), replace=False).tolist())
        placed = list(zip(positions, terms, strict=True))
        if rng.random() < 0.75:
            placed.append((k - 1, -math.fsum(bigs)))
        if builder.add("aligned", placed):
            made += 1


def _fixed_probes(builder: _Builder, rng: np.random.Generator) -> None:
    in_fmt, out = builder.in_fmt, builder.out
    k = builder.k
    # subnormal inputs: a subnormal factor times a large power of two
    for sub in (in_fmt.smallest_subnormal, in_fmt.smallest_normal - in_fmt.smallest_subnormal):
        scale = math.ldexp(1.0, min(in_fmt.emax, 1 - math.frexp(sub)[1]))
        builder.add_factors("subnormal input", [(0, sub, scale)])
        builder.add_factors("subnormal input", [(0, sub, scale), (1, 1.0, 1.0), (k - 1, -1.0, 1.0)])
    # subnormal products and results, in the result's format and in float32
    for fmt in {out, FORMATS["float32"]}:
        for value in (math.ldexp(1.0, fmt.emin - 1), math.ldexp(1.5, fmt.emin - 3)):
            builder.add("subnormal output", [(0, value)])
            builder.add("subnormal output", [(0, value)], subnormal=True)
            builder.add("subnormal output", [(0, 2 * value), (1, -value)])
        tiny = math.ldexp(1.0, fmt.emin + 2)
        builder.add("subnormal output", [(0, tiny), (1, -tiny * 0.875)])
    # products of full significands, cancelled by their rounding to each candidate accumulator
    grid = FORMATS[in_fmt.name]
    for _ in range(12):
        x = float(round_to(rng.uniform(1.0, 2.0), grid, "toward-zero"))
        y = float(round_to(rng.uniform(1.0, 2.0), grid, "toward-zero"))
        for acc in accumulators(out):
            rounded = float(round_to(x * y, acc))
            if float(round_to(rounded, in_fmt)) != rounded:
                continue
            builder.add_factors("exact products", [(0, x, y), (1, -rounded, 1.0)])
            builder.add_factors("exact products", [(0, -rounded, 1.0), (1, x, y)])
    # targeted alignment probes (FTTN's T_rnd_dir style), for each accumulator precision p:
    # a tie bit 2**-p (with a sticky bit i places below it), or a lone bit, added to or
    # subtracted from a large term, then the large term cancelled; and carries into a new binade
    for p in sorted({acc.precision for acc in accumulators(out)}):
        eb = _scales(in_fmt, out)[-2 if len(_scales(in_fmt, out)) > 1 else 0]
        big = math.ldexp(1.0, eb)
        for sign in (1.0, -1.0):
            for i in range(12):
                tie, low = sign * math.ldexp(big, -p), sign * math.ldexp(big, -p - i)
                builder.add(
                    "alignment", [(0, tie), (1, low), (2, sign * big), (k - 1, -sign * big)]
                )
                builder.add("alignment", [(0, low), (1, sign * big), (k - 1, -sign * big)])
                builder.add("alignment", [(0, -low), (1, sign * big), (k - 1, -sign * big)])
            ulp = sign * math.ldexp(big, 1 - p)
            for extra in ([], [(3, sign * big)], [(3, ulp), (4, ulp)]):
                placed = [(0, sign * big), (1, ulp), (2, sign * big), *extra]
                builder.add("carry", placed)
                cancel = -math.fsum(v for _, v in placed if abs(v) >= abs(big))
                builder.add("carry", [*placed, (k - 1, cancel)])
    # dense random inputs of nearby magnitudes
    for _ in range(12):
        count = int(rng.integers(2, 9))
        values = round_to(
            rng.uniform(-2.0, 2.0, size=count) * 2.0 ** rng.integers(-4, 5, size=count), in_fmt
        )
        positions = sorted(rng.choice(k, size=count, replace=False).tolist())
        builder.add_factors(
            "dense", [(pos, float(v), 1.0) for pos, v in zip(positions, values, strict=True)]
        )


def build_library(plan: Plan, in_fmt: Format, out: Format) -> Library:
    """The probes for a tree and formats, with every candidate's predictions."""
    rng = np.random.default_rng(_SEED)
    builder = _Builder(plan, in_fmt, out)
    _fixed_probes(builder, rng)
    _random_probes(builder, rng, sorted({acc.precision for acc in accumulators(out)}))
    a = np.array(builder.rows_a)
    b = np.array(builder.rows_b)
    cands = candidates(in_fmt, out)
    flushed_a = np.where(np.abs(a) < in_fmt.smallest_normal, 0.0, a)
    flushed_b = np.where(np.abs(b) < in_fmt.smallest_normal, 0.0, b)
    products = {False: a * b, True: flushed_a * flushed_b}
    predictions = np.empty((len(cands), len(a)))
    with np.errstate(over="ignore", invalid="ignore"):
        for row, cand in enumerate(cands):
            predictions[row] = evaluate_products(
                products[cand.flush_inputs],
                plan,
                accumulator=FORMATS[cand.accumulator],
                extra_bits=cand.extra_bits,
                rounding=cand.rounding,
                flush_outputs=cand.flush_outputs,
                products=cand.products,
                out=out,
                conversion=cand.conversion or "nearest-even",
            )
    return Library(a, b, builder.kinds, normalise(predictions))


def ranks(predictions: NDArray[np.float64]) -> NDArray[np.int64]:
    """Each column's predictions replaced by small integers, equal exactly where the predictions
    are (NaN equal to NaN)."""
    out = np.empty(predictions.shape, dtype=np.int64)
    for j in range(predictions.shape[1]):
        column = predictions[:, j]
        nan = np.isnan(column)
        _, inverse = np.unique(np.where(nan, np.inf, column), return_inverse=True)
        out[:, j] = inverse.reshape(-1) * 2 + nan
    return out


def next_probe(ranked: NDArray[np.int64], alive: NDArray[np.int64]) -> int | None:
    """The probe that best splits the candidates still ``alive``: the smallest expected number
    of survivors, sum(group size ** 2) / alive (each candidate equally likely); None when no
    probe splits them."""
    rows = np.sort(ranked[alive], axis=0)
    starts = np.ones(rows.shape, dtype=bool)
    starts[1:] = rows[1:] != rows[:-1]
    splitting = np.flatnonzero(starts.sum(axis=0) > 1)
    if splitting.size == 0:
        return None
    best, best_score = -1, math.inf
    for j in splitting.tolist():
        bounds = np.append(np.flatnonzero(starts[:, j]), len(alive))
        score = float(np.sum(np.diff(bounds).astype(np.float64) ** 2))
        if score < best_score:
            best, best_score = j, score
    return best
