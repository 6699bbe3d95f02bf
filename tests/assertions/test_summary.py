"""The verdict's one pass (``assertions/summary.py``): the compiled loop and its NumPy twin give
the same numbers bit for bit, one-sided, two-sided and by tolerance alone, on adversarial
arrays (NaN, infinities, signed zeros, subnormals, unbounded and point enclosures)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_fpcheck import formats
from pytest_fpcheck.assertions import summary


def adversarial(seed: int, size: int) -> np.ndarray:
    """Zeros of both signs, infinities, NaN, float64's and float16's edges and their
    neighbours, and random magnitudes over float64's whole range."""
    rng = np.random.default_rng(seed)
    edges = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 2.0**-1022, 1.0, 1 / 3]
    edges += [np.finfo(np.float64).max, formats.format_of("float16").max_finite, 2.0**-24]
    with np.errstate(all="ignore"):
        edges += list(np.nextafter(edges[5:], math.inf))
        random = rng.standard_normal(size) * 2.0 ** rng.integers(-1080, 1030, size)
    values = np.array(edges, dtype=np.float64)
    return np.concatenate([values, -values, random, rng.standard_normal(size)])


def arrays(seed: int) -> dict[str, np.ndarray]:
    """a, e and enclosures of each that hold them mostly (some ends NaN or infinite, some
    elements outside, some exact), all from adversarial values."""
    with np.errstate(all="ignore"):
        return _arrays(seed)


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = adversarial(seed, 600)
    n = x.size
    a = x[rng.permutation(n)]
    e = np.where(rng.random(n) < 0.5, a, x[rng.permutation(n)])
    e = np.where(rng.random(n) < 0.2, a * (1 + 2.0**-20), e)
    out = {"a": a, "e": e}
    for name, centre in (("", a), ("e", e)):
        radius = np.abs(centre) * 2.0 ** rng.integers(-60, 2, n)
        lo, hi = centre - radius, centre + radius
        kind = rng.random(n)
        lo = np.where(kind < 0.05, -math.inf, np.where(kind < 0.1, centre, lo))
        hi = np.where(kind < 0.05, math.inf, np.where(kind < 0.1, centre, hi))
        lo = np.where(kind > 0.97, math.nan, lo)
        out[name + "lo"], out[name + "hi"] = lo, hi
    return out


def run(kernel_or_twin, x, two_sided, by_tolerance, equal_nan, judge_wider, fmt):
    n = x["a"].size
    relative, ratio = np.full(n, -7.0), np.full(n, -7.0)
    offenders = np.full(summary.OFFENDERS, -1, dtype=np.int64)
    counts = np.zeros(16, dtype=np.int64)
    values = np.zeros(4)
    jlo, jhi = x["lo"], x["hi"]
    if judge_wider:
        with np.errstate(all="ignore"):
            jlo, jhi = jlo - np.abs(jlo), jhi + np.abs(jhi)
    kernel_or_twin(
        x["a"], x["e"], x["lo"], x["hi"], jlo, jhi, x["elo"], x["ehi"],
        two_sided, by_tolerance, equal_nan, 1e-3, 1e-5, fmt.precision, fmt.emin,
        relative, ratio, offenders, counts, values,
    )  # fmt: skip
    return relative, ratio, offenders, counts, values


@pytest.mark.parametrize("fmt", ["float16", "float64"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    ("two_sided", "by_tolerance", "equal_nan", "judge_wider"),
    [
        (False, False, False, False),
        (False, False, True, True),
        (True, False, False, False),
        (True, False, True, False),
        (False, True, False, False),
        (False, True, True, False),
    ],
)
def test_twin_gives_the_compiled_loops_bits(
    fmt, seed, two_sided, by_tolerance, equal_nan, judge_wider
):
    x = arrays(seed)
    switches = (two_sided, by_tolerance, equal_nan, judge_wider, formats.format_of(fmt))
    compiled = run(summary._pass.dispatcher, x, *switches)
    twin = run(summary._twin, x, *switches)
    for got, want in zip(compiled, twin, strict=True):
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(np.int64), want.view(np.int64))
    counts = compiled[3]
    # the adversarial arrays reach every branch the verdict reads
    assert counts[0] > 0  # actual outside its own enclosure
    assert counts[5] > summary.OFFENDERS
    assert counts[2 if two_sided else 15] > 0  # expected outside its own / the judging range
    assert (compiled[2] >= 0).all()
    assert 0 < counts[8] < x["a"].size  # some finite values judged, not all
    assert counts[10] > 0  # some unbounded
