"""A slow, independent reference of the fused multi-term model in exact rational arithmetic
(``fractions.Fraction``), to check the compiled emulator and the error bounds against."""

from __future__ import annotations

import math
from fractions import Fraction

from pytest_fpcheck.formats import Format


def round_fraction(value: Fraction, fmt: Format, mode: str) -> float:
    """``value`` rounded exactly onto ``fmt``'s grid (IEEE 754 overflow rules)."""
    if value == 0:
        return 0.0
    magnitude = abs(value)
    e = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** e > magnitude:
        e -= 1
    quantum = Fraction(2) ** (max(e, fmt.emin) - fmt.precision + 1)
    scaled = value / quantum
    low = math.floor(scaled)
    if mode == "down":
        n = low
    elif mode == "up":
        n = math.ceil(scaled)
    elif mode == "toward-zero":
        n = int(scaled)
    else:
        rest = scaled - low
        n = low + 1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and low % 2) else low
    result = float(n * quantum)
    if abs(result) > fmt.max_finite:
        toward_zero = (
            mode == "toward-zero"
            or (mode == "down" and result > 0)
            or (mode == "up" and result < 0)
        )
        return math.copysign(fmt.max_finite if toward_zero else math.inf, result)
    return result


def fused_sum(terms: list[float], fmt: Format, extra: int | None, mode: str) -> float:
    """One fused node: align to the largest exponent, truncate, add exactly, round once."""
    exact = [Fraction(t) for t in terms]
    nonzero = [abs(t) for t in exact if t != 0]
    if not nonzero:
        return 0.0
    if extra is not None:
        e_max = math.frexp(float(max(nonzero)))[1] - 1
        quantum = Fraction(2) ** (e_max - fmt.precision + 1 - extra)
        exact = [int(t / quantum) * quantum for t in exact]
    return round_fraction(sum(exact, Fraction(0)), fmt, mode)


def chain_entry(
    products: list[float],
    c: float | None,
    *,
    width: int,
    extra: int | None,
    mode: str,
    fmt: Format,
    flush_outputs: bool,
) -> float:
    """``c + sum(products)`` by blocks of ``width`` products (what fused_matmul does)."""
    acc: list[float] = [] if c is None else [c]
    for start in range(0, len(products), width):
        block = acc + products[start : start + width]
        if len(block) < 2:
            acc = block
            continue
        y = fused_sum(block, fmt, extra, mode)
        if flush_outputs and abs(y) < fmt.smallest_normal:
            y = 0.0
        acc = [y]
    return acc[0] if acc else 0.0
