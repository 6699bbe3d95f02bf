"""The numeric environment of a run: what decides how floating-point code rounds here.

Versions come from package metadata, so asking costs no import. PyTorch's flags (device, TF32,
reduced-precision reductions, flush-to-zero) are read only when torch is already imported or the
caller allows importing it: the report header must not add torch's import time to every run.
Triton's settings are environment variables and need no import either.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from importlib import metadata

__all__ = ["NumericEnvironment", "numeric_environment"]

_PACKAGES = ("numpy", "torch", "triton", "ml_dtypes", "scipy", "mpmath", "hypothesis", "numba")


@dataclass(frozen=True)
class NumericEnvironment:
    """Versions and floating-point settings, as ``name -> text`` pairs, in a stable order."""

    versions: dict[str, str]
    torch: dict[str, str] = field(default_factory=dict)
    triton: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The report header's lines."""
        installed = ", ".join(f"{name} {version}" for name, version in self.versions.items())
        out = [f"fpcheck: {installed}"]
        if self.torch:
            out.append("fpcheck: torch " + ", ".join(f"{k}={v}" for k, v in self.torch.items()))
        out.append("fpcheck: triton " + ", ".join(f"{k}={v}" for k, v in self.triton.items()))
        return out

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {"versions": self.versions, "torch": self.torch, "triton": self.triton}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _torch_flags() -> dict[str, str]:
    import torch

    cuda = torch.cuda.is_available()
    matmul = torch.backends.cuda.matmul
    flags = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_tf32": str(matmul.allow_tf32),
        "cudnn.allow_tf32": str(torch.backends.cudnn.allow_tf32),
        "fp16_reduced_precision_reduction": str(matmul.allow_fp16_reduced_precision_reduction),
        "bf16_reduced_precision_reduction": str(matmul.allow_bf16_reduced_precision_reduction),
    }
    return flags


def numeric_environment(*, import_torch: bool = False) -> NumericEnvironment:
    """Collect the environment. torch's flags are included when torch is already imported, or
    when ``import_torch`` is true and torch is installed; otherwise the torch entry says how to
    see them."""
    versions = {name: v for name in _PACKAGES if (v := _version(name)) is not None}
    torch_flags: dict[str, str] = {}
    if "torch" in sys.modules or (import_torch and "torch" in versions):
        torch_flags = _torch_flags()
    elif "torch" in versions:
        torch_flags = {"flags": "not read (torch not imported; shown under --fpcheck)"}
    triton = {
        "TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "0"),
        "default_dot_precision": os.environ.get("TRITON_F32_DEFAULT", "tf32"),
    }
    return NumericEnvironment(versions, torch_flags, triton)
