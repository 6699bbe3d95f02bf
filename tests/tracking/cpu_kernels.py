"""ATen CPU kernels replaced for a test: what another CPU's kernel computes (one that flushes
subnormal inputs, one that rounds float32 inputs to bfloat16), emulated on any CPU."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def replaced_cpu_kernels(**kernels: Callable[..., Any]) -> Iterator[None]:
    """ATen's CPU kernels of the operations named (``mm=...``) replaced by ``kernels`` within
    the block; the real ones back after it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        library = torch.library.Library("aten", "IMPL")
        for name, kernel in kernels.items():
            library.impl(name, kernel, "CPU")
    try:
        yield
    finally:
        library._destroy()
