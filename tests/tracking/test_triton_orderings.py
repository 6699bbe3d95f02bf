"""``tl.flip``, ``tl.sort`` and ``tl.topk`` of computed floating values (found by a hunt: Triton
writes them with bit casts to integers, which tracking refuses for rounded values, so every
kernel using them was refused). In a bounded launch they move the data and the enclosures
(``tracking/triton/hooks.py``, ``_orderings``): a sort's k-th value lies between the k-th
smallest lower end and the k-th smallest upper end."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import mpmath
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _ordering(x_ptr, y_ptr, N: tl.constexpr, OP: tl.constexpr, K: tl.constexpr):  # type: ignore[no-untyped-def]
    rows = tl.arange(0, 2)[:, None]
    columns = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + columns) * 1.1
    if OP == "flip":
        tl.store(y_ptr + rows * N + columns, tl.flip(x))
    elif OP == "sort":
        tl.store(y_ptr + rows * N + columns, tl.sort(x))
    elif OP == "sort_descending":
        tl.store(y_ptr + rows * N + columns, tl.sort(x, descending=True))
    else:
        top = tl.topk(x, K)
        tl.store(y_ptr + rows * K + tl.arange(0, K)[None, :], top)


def _exact(x: torch.Tensor, op: str, k: int) -> list[list[mpmath.mpf]]:
    rows = [[mpmath.mpf(float(v)) * mpmath.mpf(1.1) for v in row] for row in x]
    if op == "flip":
        return [row[::-1] for row in rows]
    if op == "sort":
        return [sorted(row) for row in rows]
    descending = [sorted(row, reverse=True) for row in rows]
    return descending if op == "sort_descending" else [row[:k] for row in descending]


@pytest.mark.parametrize("op", ["flip", "sort", "sort_descending", "topk"])
def test_orderings_of_computed_values_enclose_the_exact_ones(op: str) -> None:
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(3))
    k = 4
    y = torch.empty(2, k) if op == "topk" else torch.empty(2, 16)
    with fp.track(strict=True):
        _ordering[(1,)](x, y, N=16, OP=op, K=k)
    plain = torch.empty_like(y)
    _ordering[(1,)](x, plain, N=16, OP=op, K=k)
    assert torch.equal(y, plain)  # the data moved as Triton moves it
    bounds = fp.bounds_of(y)
    assert bounds.contains(y).all()
    exact = _exact(x, op, k)
    for i, row in enumerate(exact):
        for j, value in enumerate(row):
            assert mpmath.mpf(bounds.lo[i, j]) <= value <= mpmath.mpf(bounds.hi[i, j]), (i, j)
    assert float(bounds.radius.max()) < 1e-6


@triton.jit
def _sort_integers(x_ptr, y_ptr, N: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, tl.sort(tl.load(x_ptr + offsets)))


def test_integers_take_tritons_own_sort() -> None:
    x = torch.tensor([5, -1, 3, 0, 9, 2, 2, 7], dtype=torch.int32)
    y = torch.empty_like(x)
    with fp.track(strict=True):
        _sort_integers[(1,)](x, y, N=8)
    assert y.tolist() == sorted(x.tolist())
