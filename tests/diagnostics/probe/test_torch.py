"""probe_torch_matmul: torch.matmul on the CPU, probed once per process per argument set."""

from __future__ import annotations

import re

import pytest

from pytest_fpcheck.diagnostics.probe import MAX_CALLS, probe_torch_matmul
from pytest_fpcheck.errors import InvalidArgument

torch = pytest.importorskip("torch")


def test_probe_is_cached_and_decides_the_cpu_features() -> None:
    first = probe_torch_matmul("cpu", "bfloat16")
    assert probe_torch_matmul("cpu", torch.bfloat16) is first
    assert first.out_dtype == "bfloat16"
    assert first.order is not None
    assert first.consistent >= 1
    assert first.calls <= MAX_CALLS
    assert first.header().startswith("matmul bfloat16->bfloat16: width=")
    assert "\n" not in first.header()


@pytest.mark.parametrize(
    ("device", "in_dtype", "message"),
    [
        (
            "",
            "float32",
            "device='' (type str) is not valid: expected a torch device name such as 'cpu' or 'cuda'.",
        ),
        (
            "cpu",
            "float64",
            "in_dtype='float64' (type str) is not valid: expected a format of at most 24 bits",
        ),
    ],
)
def test_invalid_arguments(device: str, in_dtype: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        probe_torch_matmul(device, in_dtype)
