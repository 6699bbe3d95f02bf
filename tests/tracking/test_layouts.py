"""Sparse and nested tensors under tracking: refused as having no interval rules, a gap without
``strict`` (found by a hunt: they were counted as internal failures of the tracker, "Cannot
access storage of SparseTensorImpl", "NestedTensorImpl doesn't support sizes")."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning"),
    pytest.mark.filterwarnings("ignore:Sparse CSR tensor support:UserWarning"),
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning"),
]


def _sparse_product() -> torch.Tensor:
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([3.0, 4.0]), (2, 2))
    return coo @ torch.ones(2, 1)


def _nested_product() -> torch.Tensor:
    return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]) * 2


@pytest.mark.parametrize("program", [_sparse_product, _nested_product])
def test_sparse_and_nested_tensors_are_refused_under_strict(program) -> None:  # type: ignore[no-untyped-def]
    with (
        pytest.raises(fp.UnsupportedOperation, match="non-strided tensors have no interval"),
        fp.track(strict=True),
    ):
        program()


@pytest.mark.parametrize("program", [_sparse_product, _nested_product])
def test_without_strict_they_are_gaps_of_no_rule(program) -> None:  # type: ignore[no-untyped-def]
    with fp.track() as tracker:
        out = program()
    assert tracker.gaps
    assert {reason for _, reason in tracker.gaps} == {"no rule"}
    if not out.is_nested:
        assert out.flatten().tolist() == [3.0, 4.0]
        bounds = fp.bounds_of(out)
        assert bounds is not None
        assert np.isinf(bounds.radius).all()  # a product of a sparse matrix: no bounds
