"""The non-finite watch inside interpreted Triton kernels: appearances at the kernel's line."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def normalise_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
    total = tl.sum(x, axis=0)
    tl.store(y_ptr + cols, x / total, mask=cols < n)  # the division line


def _run(x: torch.Tensor, *, tracked: bool) -> tuple[fp.Watch, torch.Tensor]:
    y = torch.empty_like(x)
    with np.errstate(all="ignore"), fp.watch_nonfinite() as watch:
        if tracked:
            with fp.track():
                normalise_kernel[(1,)](x, y, x.numel(), BLOCK=8)
        else:
            normalise_kernel[(1,)](x, y, x.numel(), BLOCK=8)
    return watch, y


@pytest.mark.parametrize("tracked", [False, True])
def test_a_division_by_a_zero_sum_appears_at_the_kernel_line(tracked: bool) -> None:
    watch, y = _run(torch.tensor([1.0, -1.0, 2.0, -2.0]), tracked=tracked)
    assert torch.isinf(y).all()
    kinds = {e.kind: e for e in watch.appearances()}
    # the four padding lanes divide 0 by 0: NaN there, as GPU-FPX would report it too
    assert set(kinds) == {"inf", "nan", "div0"}
    assert kinds["inf"].count == 4
    assert kinds["nan"].count == 4
    event = kinds["div0"]
    assert event.op == "normalise_kernel.fdiv"
    assert event.count == 8
    assert event.source_line.endswith("# the division line")
    assert "appeared in normalise_kernel.fdiv at test_nonfinite_triton.py:" in event.summary()


def test_a_nan_loaded_from_memory_propagates_and_does_not_appear() -> None:
    watch, _ = _run(torch.tensor([1.0, float("nan"), 2.0, 3.0]), tracked=False)
    assert watch.appearances() == []
    assert {e.kind for e in watch.events} == {"nan"}


def test_a_clean_kernel_has_no_events_and_counts_its_operations() -> None:
    watch, y = _run(torch.tensor([1.0, 2.0, 3.0, 4.0]), tracked=False)
    assert watch.events == []
    assert watch.operations >= 1
    assert torch.allclose(y.sum(), torch.tensor(1.0))
