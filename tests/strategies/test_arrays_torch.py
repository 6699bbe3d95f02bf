"""arrays(backend="torch"): tensors of the format's dtype, exactly on its grid; a clear error
when PyTorch is missing."""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from pytest_fpcheck import formats as F
from pytest_fpcheck import strategies as fst
from pytest_fpcheck.strategies._corners import corner_list

from .draws import draw_values

torch = pytest.importorskip("torch")

TORCH_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "tfloat32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}


def draws(strategy: st.SearchStrategy[Any], count: int = 30) -> list[Any]:
    """Deterministic draws (see tests/strategies/draws.py)."""
    return draw_values(strategy, count)


@pytest.mark.parametrize("name", list(F.FORMATS))
def test_tensors_have_the_format_dtype_and_values_on_the_grid(name: str) -> None:
    tensors = draws(fst.arrays(name, (4, 5), backend="torch"))
    assert all(isinstance(t, torch.Tensor) for t in tensors)
    assert {t.dtype for t in tensors} == {TORCH_DTYPES[name]}
    assert {tuple(t.shape) for t in tensors} == {(4, 5)}
    values = np.concatenate([t.to(torch.float64).numpy().ravel() for t in tensors])
    assert F.is_on_grid(values, name).all()


@pytest.mark.parametrize("name", list(F.FORMATS))
def test_torch_conversion_is_exact_on_every_corner(name: str) -> None:
    fmt = F.FORMATS[name]
    corners = np.array(corner_list(fmt))
    tensor = fst._converter(fmt, "torch")(corners.copy())
    back = tensor.to(torch.float64).numpy()
    np.testing.assert_array_equal(back, corners)
    numbers = ~np.isnan(corners)
    assert (np.signbit(back[numbers]) == np.signbit(corners[numbers])).all()


def test_a_missing_torch_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    message = (
        "arrays(backend='torch') needs PyTorch, which is not installed: "
        "pip install pytest-fpcheck[torch]"
    )
    with pytest.raises(ImportError, match=re.escape(message)):
        fst.arrays("float16", 3, backend="torch")
