"""Calibration of ``fp.stochastic_bounds`` on a GPU, for the device machine a session may be
lent (docs/gpu.md, "Stochastic bounds on CUDA"). CI never has a GPU: nothing here runs there.

For each model of ``tests/models/zoo.py`` named in ``--models`` (in bfloat16 and float16; not
the mixture of experts, whose ``_grouped_mm`` has no float64 kernel for the reference), each
configuration and each seed (weights, batch and samples): the stochastic bounds of the logits
on ``--device``, and where the float64 model's logits (run on the CPU) fall in them. A JSON line
per run:

* ``outside``: elements of the float64 logits outside the interval (a false Type-II verdict
  when above 0: the models are correct);
* ``worst``: the largest ``|reference - mean| / half-width`` (above 1 is outside), and
  ``worst_plain`` the same for the plain run's logits on the device;
* ``ops``: once per model and configuration, the ATen operations a plain run dispatches.

Configurations: ``default`` (PyTorch's own CUDA flags), ``math`` (attention forced onto the
math path, ``torch.nn.attention.sdpa_kernel``, in the plain runs too) and ``no_reduced`` (no
reduced-precision reductions in half-precision matrix products).

``--gradient-seeds`` more runs per model and dtype (default configuration) estimate the
gradients of the training loss with respect to every parameter (forward and ``backward``
under the mode, samples one at a time) against the float64 model's gradients; their lines have
``"what": "gradients"``.

Run: ``python benchmarks/gpu_stochastic.py --out stochastic.jsonl [--seeds 8]``; ``--device
cpu`` runs it here, to check the script (and gives the CPU's figures for comparison).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest_fpcheck as fp


class _Ops(TorchDispatchMode):
    """Records the names of the ATen operations a run dispatches."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.names.add(str(func))
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _configuration(name: str) -> Iterator[None]:
    if name == "default":
        yield
    elif name == "math":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.MATH]):
            yield
    elif name == "no_reduced":
        matmul = torch.backends.cuda.matmul
        saved = (
            matmul.allow_bf16_reduced_precision_reduction,
            matmul.allow_fp16_reduced_precision_reduction,
        )
        matmul.allow_bf16_reduced_precision_reduction = False
        matmul.allow_fp16_reduced_precision_reduction = False
        try:
            yield
        finally:
            (
                matmul.allow_bf16_reduced_precision_reduction,
                matmul.allow_fp16_reduced_precision_reduction,
            ) = saved
    else:
        raise SystemExit(f"--configurations: {name!r} is not default, math or no_reduced")


def _logits(name: str, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's logits on ``batch`` (a Hugging Face model takes its labels too: T5 makes its
    decoder's inputs from them)."""
    from tests.models.zoo import MODELS

    if MODELS[name][2]:
        out: Any = model(**batch)
        return out.logits  # type: ignore[no-any-return]
    return model(**{k: v for k, v in batch.items() if k != "labels"})  # type: ignore[no-any-return]


def _gradients(
    name: str, model: torch.nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    from tests.models.zoo import loss_of

    parameters = [p for p in model.parameters() if p.requires_grad]
    return torch.autograd.grad(loss_of(name, model, batch), parameters, allow_unused=True)


def _gradient_runs(options: argparse.Namespace, report: Any) -> None:
    from tests.models.zoo import build

    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    for name in options.gradient_models.split(","):
        for dtype_name in options.dtypes.split(","):
            for seed in range(options.gradient_seeds):
                start = time.perf_counter()
                reference_model, batch = build(name, torch.float64, seed=seed)
                model, _ = build(name, dtypes[dtype_name], seed=seed)
                model = model.to(options.device).eval()
                on_device = {k: v.to(options.device) for k, v in batch.items()}
                reference = [g.numpy() for g in _gradients(name, reference_model.eval(), batch)]
                bounds = fp.stochastic_bounds(
                    lambda b, model=model, name=name: _gradients(name, model, b),
                    on_device,
                    samples=options.samples,
                    seed=seed,
                )
                lo = np.concatenate([b.lo.ravel() for b in bounds])
                hi = np.concatenate([b.hi.ravel() for b in bounds])
                ref = np.concatenate([r.ravel() for r in reference])
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.abs(ref - (lo + hi) / 2) / ((hi - lo) / 2)
                report(
                    what="gradients",
                    model=name,
                    dtype=dtype_name,
                    seed=seed,
                    outside=int(np.sum(~((lo <= ref) & (ref <= hi)))),
                    elements=int(ref.size),
                    worst=float(np.nanmax(ratio)),
                    seconds=round(time.perf_counter() - start, 2),
                )


def run(options: argparse.Namespace) -> None:
    from tests.models.zoo import build

    dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16}
    with options.out.open("w") as file:

        def report(**fields: Any) -> None:
            line = json.dumps(fields, default=str)
            print(line, flush=True)
            file.write(line + "\n")

        for name in options.models.split(","):
            for dtype_name in options.dtypes.split(","):
                for configuration in options.configurations.split(","):
                    recorded = False
                    for seed in range(options.seeds):
                        fields: dict[str, Any] = {
                            "model": name,
                            "dtype": dtype_name,
                            "configuration": configuration,
                            "seed": seed,
                        }
                        start = time.perf_counter()
                        reference_model, batch = build(name, torch.float64, seed=seed)
                        model, device_batch = build(name, dtypes[dtype_name], seed=seed)
                        model = model.to(options.device).eval()
                        device_batch = {k: v.to(options.device) for k, v in device_batch.items()}
                        with torch.no_grad(), _configuration(configuration):
                            reference = _logits(name, reference_model.eval(), batch).numpy()
                            bounds = fp.stochastic_bounds(
                                lambda b, model=model, name=name: _logits(name, model, b),
                                device_batch,
                                samples=options.samples,
                                seed=seed,
                            )
                            if not recorded:
                                with _Ops() as ops:
                                    plain = _logits(name, model, device_batch)
                                fields["ops"] = sorted(ops.names)
                                recorded = True
                            else:
                                plain = _logits(name, model, device_batch)
                        plain_values = plain.double().cpu().numpy()
                        mean = (bounds.lo + bounds.hi) / 2
                        half = (bounds.hi - bounds.lo) / 2
                        verdict = fp.classify(
                            plain.cpu(), torch.from_numpy(reference), bounds=bounds
                        )
                        with np.errstate(divide="ignore", invalid="ignore"):
                            ratio = np.abs(reference - mean) / half
                            ratio_plain = np.abs(plain_values - mean) / half
                        # a whole-line interval (an overflow noted) has no ratio anywhere
                        worst = int(np.nanargmax(ratio)) if np.isfinite(ratio).any() else 0
                        fields.update(
                            kind=verdict.kind,
                            outside=int(
                                np.sum(~((bounds.lo <= reference) & (reference <= bounds.hi)))
                            ),
                            elements=int(reference.size),
                            worst=float(np.nanmax(ratio)) if np.isfinite(ratio).any() else None,
                            worst_at=np.unravel_index(worst, ratio.shape),
                            worst_plain=(
                                float(np.nanmax(ratio_plain))
                                if np.isfinite(ratio_plain).any()
                                else None
                            ),
                            median_half_over_error=float(
                                np.median(
                                    half / np.maximum(np.abs(plain_values - reference), 1e-300)
                                )
                            ),
                            seconds=round(time.perf_counter() - start, 2),
                        )
                        report(**fields)
        _gradient_runs(options, report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("gpu_stochastic.jsonl"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", default="gpt2,llama,nanogpt")
    parser.add_argument("--gradient-models", default="gpt2,llama,nanogpt")
    parser.add_argument("--dtypes", default="bfloat16,float16")
    parser.add_argument("--configurations", default="default,math,no_reduced")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--gradient-seeds", type=int, default=4)
    parser.add_argument("--samples", type=int, default=16)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
