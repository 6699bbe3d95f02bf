"""Checks that only a GPU can make, for the device machine a session may be lent; what they
found is in docs/gpu.md. CI never has a GPU: nothing here runs there.

Sections (``--sections``, comma-separated; default all), each reported as JSON lines on stdout
and in ``--out``; a section that raises reports its traceback and the next one runs:

* ``env``: the GPU, PyTorch and Triton versions, the CUDA flags the bounds read
  (``tracking/core/policy.py``).
* ``probe``: FTTN's probe (``fp.probe_matmul``) of ``torch.matmul`` on CUDA in float32, TF32,
  float16 and bfloat16: products, rounding, accumulator, block width, subnormals.
* ``order``: FPRev's revealed order of ``torch.sum`` and of one element of ``torch.matmul``.
* ``triton``: the example kernels (``gpu_triton_cases.py``) compiled for the GPU on seeded
  inputs; inputs and outputs go to ``--triton-out`` (an ``.npz``), which
  ``gpu_triton_bounds.py`` checks against the interpreter's enclosures on the CPU.
* ``zoo``: each model of ``tests/models/zoo.py`` in float32, bfloat16 and float16 on CUDA
  under ``fp.track(strict=True)``: the forward pass in evaluation, whose loss enclosure must hold
  the float64 model's loss (run on the CPU), then forward, ``backward()`` and an AdamW step
  (foreach, CUDA's default) in training without dropout: every loss, gradient and parameter
  value in its enclosure, no gaps.
* ``modules``: ``fp.compare_modules`` of GPT-2 and nanoGPT in bfloat16 on CUDA against float64:
  correct models, so no call may be judged a bug.
* ``stochastic``: ``fp.stochastic_bounds`` of GPT-2's logits in bfloat16 on CUDA, and the
  verdict on the float64 model's logits (correct: round-off).

Run (on the device machine): ``python benchmarks/gpu_checks.py --out results.jsonl
--triton-out triton.npz [--budget 240]``; ``--device cpu`` runs the sections that need no GPU
here, to check the script.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest_fpcheck as fp

SECTIONS = ("env", "probe", "order", "triton", "zoo", "modules", "stochastic")


class Report:
    """JSON lines to stdout and to a file."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w")

    def __call__(self, section: str, **fields: Any) -> None:
        line = json.dumps({"section": section, **fields}, default=str)
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def env(report: Report, device: str, _: argparse.Namespace) -> None:
    fields: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    try:
        import triton

        fields["triton"] = triton.__version__
    except ImportError:
        fields["triton"] = None
    if device.startswith("cuda"):
        properties = torch.cuda.get_device_properties(0)
        fields["gpu"] = properties.name
        fields["capability"] = f"{properties.major}.{properties.minor}"
        matmul = torch.backends.cuda.matmul
        fields["flags"] = {
            "matmul.allow_tf32": matmul.allow_tf32,
            "matmul.allow_fp16_reduced_precision_reduction": (
                matmul.allow_fp16_reduced_precision_reduction
            ),
            "matmul.allow_bf16_reduced_precision_reduction": (
                matmul.allow_bf16_reduced_precision_reduction
            ),
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        }
    report("env", **fields)


def probe(report: Report, device: str, _: argparse.Namespace) -> None:
    from pytest_fpcheck.diagnostics.probe import probe_torch_matmul

    for dtype in ("float32", "tfloat32", "float16", "bfloat16"):
        if dtype == "tfloat32" and not device.startswith("cuda"):
            continue
        start = time.perf_counter()
        try:
            features = probe_torch_matmul(device, dtype)
        except Exception as error:  # one format's probe failing must not hide the others
            report("probe", dtype=dtype, error=f"{type(error).__name__}: {error}")
            continue
        report(
            "probe",
            dtype=dtype,
            seconds=round(time.perf_counter() - start, 1),
            summary=features.summary(),
        )


def order(report: Report, device: str, _: argparse.Namespace) -> None:
    from pytest_fpcheck.diagnostics import order as fo

    impls: list[tuple[str, int, Any]] = [
        (f"torch.sum float32 n={n}", n, fo.sum_of(torch.sum, device=device)) for n in (64, 4096)
    ]
    for m, k, n in ((1, 256, 64), (64, 256, 64)):
        impls.append(
            (
                f"torch.matmul float32 ({m}x{k})@({k}x{n}) [0,0]",
                k,
                fo.matmul_of(torch.matmul, m, k, n, device=device),
            )
        )
    for name, n, impl in impls:
        tree = fo.reveal_order(impl, n)
        report(
            "order", case=name, verified=bool(tree.verify(impl)), tree=tree.to_text(max_lines=12)
        )


def triton_compiled(report: Report, device: str, options: argparse.Namespace) -> None:
    import gpu_triton_cases as cases

    saved: dict[str, np.ndarray] = {}
    for name in cases.CASES:
        for seed in range(options.triton_seeds):
            inputs = cases.inputs_of(name, seed)
            out = cases.launch(name, {k: v.to(device) for k, v in inputs.items()})
            torch.cuda.synchronize()
            key = f"{name}|{seed}"
            for arg, tensor in inputs.items():
                saved[f"{key}|in|{arg}"] = tensor.numpy()
            saved[f"{key}|out"] = out.cpu().numpy()
        report("triton", case=name, seeds=options.triton_seeds)
    np.savez_compressed(options.triton_out, **saved)


def _to(batch: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}


def _outside(tensor: torch.Tensor) -> int | None:
    bounds = fp.bounds_of(tensor)
    if bounds is None:
        return None
    return int((~bounds.contains(tensor.detach().cpu())).sum())


def _no_dropout(model: torch.nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for name in ("attention_dropout", "dropout"):
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, 0.0)


def zoo(report: Report, device: str, options: argparse.Namespace) -> None:
    from tests.models.zoo import MODELS, build, loss_of

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    for name in MODELS:
        reference_model, reference_batch = build(name, torch.float64)
        reference_model.eval()
        try:
            with torch.no_grad():
                reference: float | None = float(loss_of(name, reference_model, reference_batch))
        except RuntimeError:  # _grouped_mm has no float64 kernel (the mixture of experts)
            reference = None
        for dtype_name, dtype in dtypes.items():
            if options.deadline and time.perf_counter() > options.deadline:
                report("zoo", model=name, dtype=dtype_name, skipped="time budget spent")
                continue
            fields: dict[str, Any] = {"model": name, "dtype": dtype_name}
            start = time.perf_counter()
            try:
                model, batch = build(name, dtype)
                model = model.to(device).eval()
                batch = _to(batch, device)
                with torch.no_grad(), fp.track(strict=True):
                    loss = loss_of(name, model, batch)
                bounds = fp.bounds_of(loss)
                fields["loss"] = float(loss)
                fields["float64_loss"] = reference
                if bounds is not None:
                    lo, hi = float(bounds.lo), float(bounds.hi)
                    fields["enclosure"] = [lo, hi]
                    if reference is not None:
                        fields["float64_inside"] = lo <= reference <= hi
                    fields["value_inside"] = lo <= float(loss) <= hi
                model.train()
                _no_dropout(model)  # attention dropout on CUDA has no rule (refused by name)
                parameters = [p for p in model.parameters() if p.requires_grad]
                optimizer = torch.optim.AdamW(parameters, lr=1e-3)
                with fp.track(strict=True) as tracker:
                    loss = loss_of(name, model, batch)
                    loss.backward()
                    optimizer.step()
                fields["gaps"] = sorted(tracker.gaps)
                outside = Counter[str]()
                for p in parameters:
                    for what, tensor in (("grad", p.grad), ("param", p)):
                        if tensor is not None:
                            outside[what] += _outside(tensor) or 0
                fields["train_outside"] = dict(outside)
                fields["train_loss_outside"] = _outside(loss)
            except Exception as error:
                fields["error"] = f"{type(error).__name__}: {str(error)[:600]}"
                fields["where"] = traceback.format_exc().splitlines()[-8:]
            fields["seconds"] = round(time.perf_counter() - start, 2)
            report("zoo", **fields)


def modules(report: Report, device: str, options: argparse.Namespace) -> None:
    from tests.models.zoo import build

    for name in ("gpt2", "nanogpt"):
        model, batch = build(name, torch.bfloat16)
        model = model.to(device).eval()
        inputs = {k: v for k, v in _to(batch, device).items() if k != "labels"}
        start = time.perf_counter()
        try:
            comparison = fp.compare_modules(model, torch.float64, **inputs)
            kinds = Counter(call.kind for call in comparison.calls)
            report(
                "modules",
                model=name,
                kinds=dict(kinds),
                first_bug=None if comparison.first_bug is None else comparison.first_bug.path,
                seconds=round(time.perf_counter() - start, 2),
                report=comparison.report()[:3000],
            )
        except Exception as error:
            report(
                "modules",
                model=name,
                error=f"{type(error).__name__}: {str(error)[:600]}",
                where=traceback.format_exc().splitlines()[-8:],
            )


def stochastic(report: Report, device: str, options: argparse.Namespace) -> None:
    from tests.models.zoo import build

    model, batch = build("gpt2", torch.bfloat16)
    model = model.to(device).eval()
    reference_model, _ = build("gpt2", torch.float64)
    reference_model.eval()
    ids = batch["input_ids"]
    with torch.no_grad():
        reference = reference_model(input_ids=ids).logits
        start = time.perf_counter()
        bounds = fp.stochastic_bounds(
            lambda x: model(input_ids=x).logits, ids.to(device), samples=16, seed=0
        )
        out = model(input_ids=ids.to(device)).logits
    verdict = fp.classify(out.cpu(), reference, bounds=bounds)
    report(
        "stochastic",
        model="gpt2 bfloat16",
        kind=verdict.kind,
        seconds=round(time.perf_counter() - start, 2),
        outside=verdict.outside,
        total=verdict.total,
    )


RUNNERS: dict[str, Callable[[Report, str, argparse.Namespace], None]] = {
    "env": env,
    "probe": probe,
    "order": order,
    "triton": triton_compiled,
    "zoo": zoo,
    "modules": modules,
    "stochastic": stochastic,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("gpu_checks.jsonl"))
    parser.add_argument("--triton-out", type=Path, default=Path("gpu_triton.npz"))
    parser.add_argument("--triton-seeds", type=int, default=8)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument(
        "--budget", type=float, default=None, help="seconds after which the zoo stops"
    )
    options = parser.parse_args()
    options.deadline = None if options.budget is None else time.perf_counter() + options.budget
    report = Report(options.out)
    for section in options.sections.split(","):
        if section not in RUNNERS:
            parser.error(f"--sections: {section!r} is not one of {', '.join(SECTIONS)}")
        start = time.perf_counter()
        try:
            RUNNERS[section](report, options.device, options)
        except Exception as error:
            report(
                section,
                error=f"{type(error).__name__}: {str(error)[:600]}",
                where=traceback.format_exc().splitlines()[-10:],
            )
        report(section, done=True, seconds=round(time.perf_counter() - start, 1))


if __name__ == "__main__":
    main()
