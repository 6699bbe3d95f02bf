"""Matrix products on the CPU, whose results are enclosed as rounded to nearest
(``Interval.to_nearest``): the computed value and the exact one (``math.fsum`` of the exact
float64 products, correctly rounded, widened by a float64 step) lie in the enclosure, for every
product rule, in bfloat16, float16 and float32, on short and long sums, with cancellation. ATen's
``addmv`` of float16/bfloat16 rounds more than once: its rule takes every step rounded to the
tensor's format (before that, this test found its values a ULP outside)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

PRODUCTS = {
    "mm": lambda a, b, c: a @ b,
    "mv": lambda a, b, c: torch.mv(a, b[:, 0]),
    "dot": lambda a, b, c: torch.dot(a[0], b[:, 0]),
    "bmm": lambda a, b, c: torch.bmm(a[None], b[None])[0],
    "addmm": lambda a, b, c: torch.addmm(c, a, b),
    "addmm_row": lambda a, b, c: torch.addmm(c[0], a, b),
    "addmm_scaled": lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=3.0),
    "addmv": lambda a, b, c: torch.addmv(c[:, 0], a, b[:, 0]),
    "baddbmm": lambda a, b, c: torch.baddbmm(c[None], a[None], b[None])[0],
    "linear": lambda a, b, c: torch.nn.functional.linear(a[None], b.t(), c[0])[0],
}


def _exact_terms(name: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(down, up) float64 neighbours of the exact result, from fsum of exact products."""
    m, n = a.shape[0], b.shape[1]

    def entry(i: int, j: int, addend: float, beta: float = 1.0, alpha: float = 1.0) -> float:
        terms = [alpha * float(x) * float(y) for x, y in zip(a[i], b[:, j], strict=True)]
        return math.fsum([*terms, beta * addend])

    if name in ("mm", "bmm"):
        return np.array([[entry(i, j, 0.0) for j in range(n)] for i in range(m)])
    if name == "mv":
        return np.array([entry(i, 0, 0.0) for i in range(m)])
    if name == "dot":
        return np.array(entry(0, 0, 0.0))
    if name in ("addmm", "baddbmm"):
        return np.array([[entry(i, j, c[i, j]) for j in range(n)] for i in range(m)])
    if name in ("addmm_row", "linear"):
        return np.array([[entry(i, j, c[0, j]) for j in range(n)] for i in range(m)])
    if name == "addmm_scaled":
        return np.array([[entry(i, j, c[i, j], 0.5, 3.0) for j in range(n)] for i in range(m)])
    assert name == "addmv"
    return np.array([entry(i, 0, c[i, 0]) for i in range(m)])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", list(PRODUCTS))
def test_computed_and_exact_products_lie_in_the_nearest_enclosure(name: str, dtype: str) -> None:
    torch.manual_seed(len(name) + len(dtype))
    dt = getattr(torch, dtype)
    for trial in range(40):
        k = int(torch.randint(1, 4, ())) if trial % 2 else int(torch.randint(4, 48, ()))
        m, n = int(torch.randint(1, 5, ())), int(torch.randint(1, 5, ()))
        a = (4 * torch.randn(m, k)).to(dt)
        b = torch.randn(k, n).to(dt)
        c = (8 * torch.randn(m, n)).to(dt)
        if trial % 3 == 0:  # the first entry cancels
            b[:, 0] = (-a[0] + 1e-2 * torch.randn(k)).to(dt)
        with fp.track():
            y = PRODUCTS[name](a, b, c)
            bounds = fp.bounds_of(y)
        exact = _exact_terms(name, *(t.double().numpy() for t in (a, b, c)))
        # the products above are exact in float64 (at most 2 x 24 bits; alpha and beta are
        # powers of two or 3), fsum rounds their sum correctly: the exact value is within one
        # float64 step
        down, up = np.nextafter(exact, -np.inf), np.nextafter(exact, np.inf)
        value = y.double().numpy()
        assert bounds.contains(value).all(), (name, dtype, trial, value, bounds.lo, bounds.hi)
        inside = (bounds.lo <= down) & (up <= bounds.hi)
        assert inside.all(), (name, dtype, trial, exact, bounds.lo, bounds.hi)
