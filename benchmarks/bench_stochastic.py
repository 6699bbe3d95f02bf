"""Calibration and cost of stochastic arithmetic (issue 21; docs/performance.md records the figures).

Sections (``--section``, default all):

* ``accumulation``: the accumulation model (:mod:`pytest_fpcheck.stochastic.accumulation`)
  against the addition-level emulation (one stochastic rounding per addition), for several
  lengths, accumulator formats, term distributions and orders; then the spread the dispatch
  mode gives ``torch.sum`` and ``torch.mm`` against the emulation of the same computation.
* ``scan``: the model of Triton prefix sums and products (``tl.cumsum``, ``tl.cumprod``:
  :func:`pytest_fpcheck.stochastic.accumulation.kernel_scan_noise`) against the addition-level
  emulation (one stochastic rounding per addition or multiplication), every prefix, for several
  lengths, formats and term distributions.
* ``calibration``: on correct programs, the false Type-II rate of ``classify(out, ref,
  bounds=stochastic_bounds(...))`` at the default confidence (0.999) over ``--seeds`` seeds (a
  seed draws the inputs and the stochastic seed), and the ratio of the estimated standard
  deviation to the actual error's spread over the input draws (RMS over the elements, median
  and range over the seeds): the soundness campaign's random programs (against their exact
  mpmath value), an 8-layer bfloat16 MLP and a bfloat16 transformer block (against float64).
* ``normalisations``: layer, group and batch norm (evaluation) in float32, bfloat16 and
  float16, inputs of mean 0 and 3 (outputs near 0 cancel): false Type-II verdicts, where the
  plain run lies outside its own interval, and the spread ratio.
* ``triton``: the same for Triton kernels run by the interpreter (``TRITON_INTERPRET=1``, set
  here): the softmax, matmul and layer norm kernels of tests/stochastic/kernels.py, inputs in the
  kernel's format, against their float64 PyTorch references; then with an input or a parameter
  converted inside the function (part of ``all``).
* ``power``: planted bugs (the output of one layer scaled by ``1 + 16u`` and ``1 + 64u``, ``u``
  bfloat16's unit round-off) in an 8-layer bfloat16 MLP and a 4-block bfloat16 transformer:
  the fraction of seeds whose verdict is "bug"; beside it, what the rigorous bounds
  (``fp.track``) and the module-level check (``fp.compare_modules``) say on one draw.
* ``cost``: ``stochastic_bounds(samples=16)`` against 16 plain runs (the floor), measured in the
  same process, interleaved, fastest of 5, in CPU time of the thread (``time.thread_time``: the
  machine is shared), each call with a seed not used before, for small and large models, then
  for the module checks' Hugging Face token models in float32 and bfloat16.

Run: ``python benchmarks/bench_stochastic.py [--section S] [--seeds 200] [--power-seeds 40]``.
CI runs a slice (tests/stochastic/test_calibration.py).
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

import pytest_fpcheck as fp
from pytest_fpcheck import formats as F
from tests.stochastic.calibration import (
    emulate_accumulation,
    emulate_scan,
    mode_spread,
    model_scan,
    model_sigma,
    verdict_trial,
)
from tests.stochastic.models import MLP, Transformer, run_in

BF16_U = 2.0**-8


def accumulation(seed: int) -> None:
    print("## accumulation model / addition-level emulation (std ratio, median over 8 sums)")
    print("emulation: one stochastic rounding per addition, 200 replicas")
    rng = np.random.default_rng(seed)
    print(f"{'accumulator':<10} {'K':>5} {'terms':<8} {'sequential':>10} {'pairwise':>9}")
    from pytest_fpcheck.stochastic.accumulation import KAPPA

    for name in ("float32", "float16", "bfloat16"):
        fmt = F.format_of(name)
        u = fmt.unit_roundoff
        for k in (16, 128, 1024, 4096):
            for terms_kind in ("normal", "uniform"):
                terms = (
                    rng.standard_normal((8, k)) if terms_kind == "normal" else rng.random((8, k))
                )
                terms = F.round_to(terms, fmt)
                sequential = emulate_accumulation(terms, fmt, "sequential", 200, rng)
                pairwise = emulate_accumulation(terms, fmt, "pairwise", 200, rng)
                s, q = terms.sum(-1), np.square(terms).sum(-1)
                levels = max(int(np.ceil(np.log2(k))) - 2, 0)
                pair_model = np.sqrt(KAPPA * u * u * (2 * s**2 + levels * q))
                r_seq = np.median(sequential.std(0, ddof=1) / model_sigma(terms, u))
                r_pair = np.median(pairwise.std(0, ddof=1) / pair_model)
                print(f"{name:<10} {k:>5} {terms_kind:<8} {r_seq:>10.3f} {r_pair:>9.3f}")
    print()
    print("## the mode's spread / emulation of the same torch operation (median over outputs)")
    for dtype, k in ((torch.float32, 256), (torch.float32, 2048), (torch.bfloat16, 256)):
        a = torch.randn(8, k, generator=torch.Generator().manual_seed(seed)).to(dtype)
        b = torch.randn(k, 4, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
        f32 = F.format_of("float32")
        products = a.double().numpy()[:, None, :] * b.double().numpy().T[None, :, :]
        emulated = emulate_accumulation(products.reshape(-1, k), f32, "sequential", 200, rng)
        row = emulate_accumulation(a.double().numpy(), f32, "pairwise", 200, rng)
        if dtype == torch.bfloat16:  # the float32 accumulator's result, rounded once more
            bf16 = F.format_of("bfloat16")
            emulated = np.stack([_sr(e, bf16, rng) for e in emulated])
            row = np.stack([_sr(e, bf16, rng) for e in row])
        mm = mode_spread(torch.mm, (a, b), 64, seed).reshape(-1)
        total = mode_spread(lambda t: t.sum(-1), (a,), 64, seed)
        print(
            f"{dtype!s:<15} K={k:<5} mm: {np.median(mm / emulated.std(0, ddof=1)):.3f}"
            f"   sum: {np.median(total / row.std(0, ddof=1)):.3f}"
        )
    print()


def scan(seed: int) -> None:
    print("## scan model / addition-level emulation (std ratio per prefix, 8 rows, 200 replicas)")
    print("emulation: one stochastic rounding per addition (multiplication); prefixes after the")
    print("first; median, 10%-90% quantiles, and the median at the last prefix")
    rng = np.random.default_rng(seed)
    print(
        f"{'format':<9} {'K':>5} {'scan':<8} {'terms':<9} {'median':>6} {'10-90%':>11} {'last':>5}"
    )
    for name in ("float32", "float16", "bfloat16"):
        fmt = F.format_of(name)
        for k in (16, 128, 1024):
            for kind, terms_kind in (
                ("cumsum", "normal"),
                ("cumsum", "uniform"),
                ("cumprod", "1+N/100"),
            ):
                if terms_kind == "normal":
                    terms = rng.standard_normal((8, k))
                elif terms_kind == "uniform":
                    terms = rng.random((8, k))
                else:
                    terms = 1 + rng.standard_normal((8, k)) / 100
                terms = F.round_to(terms, fmt)
                emulated = emulate_scan(terms, fmt, kind, 200, rng).std(0, ddof=1)[:, 1:]
                modelled = model_scan(terms, fmt, kind, 200, seed).std(0, ddof=1)[:, 1:]
                moved = emulated > 0
                ratio = modelled[moved] / emulated[moved]
                last = np.median(modelled[:, -1] / emulated[:, -1])
                low, high = np.quantile(ratio, [0.1, 0.9])
                print(
                    f"{name:<9} {k:>5} {kind:<8} {terms_kind:<9} {np.median(ratio):>6.2f} "
                    f"{low:>5.2f}-{high:<5.2f} {last:>5.2f}",
                    flush=True,
                )
    print()


def _sr(x: np.ndarray, fmt: F.Format, rng: np.random.Generator) -> np.ndarray:
    down, up = F.round_to(x, fmt, "down"), F.round_to(x, fmt, "up")
    p = np.where(up > down, (x - down) / np.where(up > down, up - down, 1.0), 0.0)
    return np.where(rng.random(x.shape) < p, up, down)


def _models() -> dict[str, tuple[Any, Any]]:
    """name -> (run(dtype, x), draw(seed) -> x)."""
    mlp, block = MLP(width=64, depth=8), Transformer(width=32, heads=4, depth=1)
    return {
        "MLP, 8 layers, 16x64, bfloat16": (
            run_in(mlp),
            lambda s: torch.randn(16, 64, generator=torch.Generator().manual_seed(s)),
        ),
        "transformer block, 2x16x32, bfloat16": (
            run_in(block),
            lambda s: torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(s)),
        ),
    }


def calibration(seeds: int, samples: int) -> None:
    print(f"## false Type-II rate at confidence 0.999, {seeds} seeds, {samples} samples")
    for name, (run, draw) in _models().items():
        start = time.perf_counter()
        kinds: dict[str, int] = {}
        ratios = []
        for s in range(seeds):
            kind, estimated, actual = verdict_trial(
                run, run, draw(1000 + s), torch.bfloat16, s, samples
            )
            kinds[kind] = kinds.get(kind, 0) + 1
            ratios.append(estimated / actual)
        r = np.array(ratios)
        print(
            f"{name}: verdicts {kinds}; false Type-II {kinds.get('bug', 0) / seeds:.2%}; "
            f"estimated/actual spread median {np.median(r):.2f} (range {r.min():.2f}-{r.max():.2f}) "
            f"[{time.perf_counter() - start:.0f} s]"
        )
    random_programs(seeds, samples)
    print()


def triton_kernels(seeds: int, samples: int, only: str = "") -> None:
    """The calibration of :func:`calibration` on the Triton kernels of tests/stochastic/kernels.py
    (inputs in the kernel's format, as the examples give them), then with an input or a
    parameter converted inside the function. ``only``: run the cases whose name contains it."""
    os.environ["TRITON_INTERPRET"] = "1"
    from tests.stochastic.kernels import CONVERTING, KERNELS

    print(
        f"## Triton kernels: false Type-II rate at confidence 0.999, {seeds} seeds, "
        f"{samples} samples"
    )
    cases = {**KERNELS, **CONVERTING}
    for name, (run, reference, draw, dtype) in cases.items():
        if only not in name:
            continue
        start = time.perf_counter()
        kinds: dict[str, int] = {}
        ratios, flagged = [], []
        for s in range(seeds):
            kind, estimated, actual = verdict_trial(
                run, reference, draw(1000 + s), dtype, s, samples
            )
            kinds[kind] = kinds.get(kind, 0) + 1
            ratios.append(estimated / actual)
            if kind == "bug":
                flagged.append(s)
        r = np.array(ratios)
        print(
            f"{name}: verdicts {kinds}; false Type-II {kinds.get('bug', 0) / seeds:.2%} "
            f"(seeds {flagged}); estimated/actual spread median {np.median(r):.2f} "
            f"(range {r.min():.2f}-{r.max():.2f}) [{time.perf_counter() - start:.0f} s]",
            flush=True,
        )
    print()


def normalisations(seeds: int, samples: int) -> None:
    """Layer, group and batch norm (tests/stochastic/models.py) in three formats, inputs of mean
    0 and 3, against float64: false Type-II verdicts, the elements where the plain run lies
    outside its own interval, and the estimated/actual spread ratio (RMS over the elements,
    median and range over the seeds)."""
    from tests.stochastic.models import NORMALISATIONS

    print(f"## normalisations: false Type-II at confidence 0.999, {seeds} seeds, {samples} samples")
    for name, make in NORMALISATIONS.items():
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for offset in (0.0, 3.0):
                module, draw = make(offset)
                model = copy.deepcopy(module).to(dtype)
                reference = copy.deepcopy(model).double()  # the parameters as the model has them
                kinds: dict[str, int] = {}
                ratios, outside, total = [], 0, 0
                for s in range(seeds):
                    x = draw(s, offset).to(dtype)
                    with torch.no_grad():
                        out, expected = model(x), reference(x.double())
                    bounds = fp.stochastic_bounds(model, x, samples=samples, seed=s)
                    kind = fp.classify(out, expected, bounds=bounds).kind
                    kinds[kind] = kinds.get(kind, 0) + 1
                    plain = out.double().numpy()
                    outside += int(((plain < bounds.lo) | (plain > bounds.hi)).sum())
                    total += plain.size
                    error = np.sqrt(np.mean(np.square(plain - expected.numpy())))
                    ratios.append(np.sqrt(np.mean(np.square(bounds.estimate.std))) / error)
                r = np.array(ratios)
                print(
                    f"{name}, {str(dtype).removeprefix('torch.')}, mean {offset:g}: verdicts "
                    f"{kinds}; plain run outside {outside} / {total}; estimated/actual spread "
                    f"median {np.median(r):.2f} (range {r.min():.2f}-{r.max():.2f})",
                    flush=True,
                )
    print()


def random_programs(count: int, samples: int) -> None:
    """The soundness campaign's programs, judged against their exact (mpmath) value."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from tests.tracking.programs import Undefined, exact_to_float, programs, run_exact, run_torch

    tally = {"judged": 0, "bug": 0, "undefined": 0, "overflow": 0}
    seen: set[str] = set()
    ratios: list[float] = []
    start = time.perf_counter()

    @hypothesis_seed(21)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs())
    def campaign(program: Any) -> None:
        if repr(program) in seen:  # the generator repeats small programs
            return
        seen.add(repr(program))
        try:
            exact = run_exact(program)
        except Undefined:
            tally["undefined"] += 1
            return
        down, _ = exact_to_float(exact)
        fmt = F.format_of(program.dtype)
        valid = np.isfinite(down) & (np.abs(down) <= fmt.max_finite)
        if not valid.any():
            tally["undefined"] += 1
            return
        bounds = fp.stochastic_bounds(run_torch, program, samples=samples, seed=tally["judged"])
        tally["judged"] += 1
        if np.isneginf(bounds.lo).all() and np.isposinf(bounds.hi).all():
            tally["overflow"] += 1
        inside = bounds.contains(down)
        if not inside[valid].all():
            tally["bug"] += 1
        with np.errstate(all="ignore"):
            actual = np.abs(run_torch(program).double().numpy() - down)[valid]
        std = bounds.estimate.std[valid]
        if np.all(np.isfinite(actual)) and actual.max() > 0 and np.all(np.isfinite(std)):
            ratios.append(float(np.sqrt(np.mean(std**2)) / np.sqrt(np.mean(actual**2))))

    campaign()
    r = np.array(ratios)
    print(
        f"random programs (soundness campaign generator, hypothesis seed 21): {tally['judged']} "
        f"distinct programs judged ({tally['undefined']} undefined or beyond range skipped; "
        f"{tally['overflow']} overflowed in a run: no estimate), false Type-II "
        f"{tally['bug'] / max(tally['judged'], 1):.2%} ({tally['bug']}); estimated/actual spread "
        f"median {np.median(r):.2f} (quartiles {np.quantile(r, 0.25):.2f}-{np.quantile(r, 0.75):.2f})"
        f" [{time.perf_counter() - start:.0f} s]"
    )


def power(seeds: int, samples: int) -> None:
    print(f"## power on planted bugs (one layer's output scaled by 1 + c u), {seeds} seeds")
    models = {
        "MLP, 8 layers, 16x64, bfloat16": (
            MLP(width=64, depth=8),
            lambda s: torch.randn(16, 64, generator=torch.Generator().manual_seed(s)),
        ),
        "transformer, 4 blocks, 2x16x32, bfloat16": (
            Transformer(width=32, heads=4, depth=4),
            lambda s: torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(s)),
        ),
    }
    for name, (model, draw) in models.items():
        reference = run_in(model)
        for c in (16.0, 64.0):
            buggy = copy.deepcopy(model)
            buggy.bug = c * BF16_U
            run = run_in(buggy)
            caught = sum(
                verdict_trial(run, reference, draw(2000 + s), torch.bfloat16, s, samples)[0]
                == "bug"
                for s in range(seeds)
            )
            x = draw(2000)
            print(
                f"{name}, bug {c:g}u: stochastic flags {caught}/{seeds}; rigorous: "
                f"{_rigorous(run, reference, x)}; module-level: {_modules(buggy, model, x)}"
            )
    print()


def _rigorous(run: Any, reference: Any, x: torch.Tensor) -> str:
    with torch.no_grad():
        expected = reference(torch.float64, x)
        with fp.track():
            out = run(torch.bfloat16, x)
    verdict = fp.classify(out, expected)
    radius = "unbounded" if verdict.tightness is None else f"{verdict.tightness:.3g} ULP"
    return f"{verdict.kind} (median radius {radius})"


def _modules(buggy: torch.nn.Module, correct: torch.nn.Module, x: torch.Tensor) -> str:
    """The buggy bfloat16 model judged module by module against the correct one in float64."""
    custom = copy.deepcopy(buggy).to(torch.bfloat16).requires_grad_(False)
    reference = copy.deepcopy(correct).to(torch.float64).requires_grad_(False)
    try:
        with torch.no_grad():
            comparison = fp.compare_modules(custom, reference, x.to(torch.bfloat16))
    except Exception as error:  # the module-level check is young: report, do not stop
        return f"not run ({type(error).__name__}: {str(error)[:80]})"
    first = comparison.first_bug
    kinds = [call.kind for call in comparison.calls]
    top = kinds[0] if kinds else "no calls"
    found = "no bug" if first is None else f"first bug at {first.name}"
    return f"{found} (whole model: {top})"


def cost(samples: int) -> None:
    print(f"## cost: stochastic_bounds(samples={samples}) / {samples} plain runs (interleaved)")
    cases = {
        "MLP 8x64, batch 16, bfloat16": (MLP(width=64, depth=8), (16, 64)),
        "MLP 8x1024, batch 256, bfloat16": (MLP(width=1024, depth=8), (256, 1024)),
        "MLP 8x1024, batch 256, float32": (MLP(width=1024, depth=8), (256, 1024)),
        "transformer 4 blocks, 4x64x128, bfloat16": (
            Transformer(width=128, heads=4, depth=4),
            (4, 64, 128),
        ),
    }
    for name, (model, shape) in cases.items():
        dtype = torch.float32 if "float32" in name else torch.bfloat16
        run = run_in(model)
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            run(dtype, x)  # the model's copy in dtype, made once
            _timed_ratio(name, samples, run, dtype, x)
    zoo_cost(samples)
    print()


def _timed_ratio(name: str, samples: int, run: Any, *args: Any) -> None:
    """Print ``stochastic_bounds(run, *args, samples=samples)`` against ``samples`` plain runs,
    interleaved, fastest of 5 each, thread CPU time, after a warm-up (pools, imports); each
    call with a seed not used before, as in a test suite (each test its own)."""
    fp.stochastic_bounds(run, *args, samples=2, seed=0)
    plain, stochastic = [], []
    for repeat in range(5):
        start = time.thread_time()
        for _ in range(samples):
            run(*args)
        plain.append(time.thread_time() - start)
        start = time.thread_time()
        fp.stochastic_bounds(run, *args, samples=samples, seed=1 + repeat)
        stochastic.append(time.thread_time() - start)
    floor, spent = min(plain), min(stochastic)
    print(f"{name}: floor {floor:.3f} s, stochastic {spent:.3f} s, ratio {spent / floor:.2f}")


def zoo_cost(samples: int) -> None:
    """The same for the token models of the module checks (tests/assertions/models.py: Hugging
    Face's GPT-2, BERT and Llama and a nanoGPT, 2 layers, width 64, 2 x 16 tokens) in
    evaluation, float32 and bfloat16: real code, with fused attention and written-out GELUs."""
    from tests.assertions import models

    for name in ("gpt2", "bert", "llama", "nanogpt"):
        for dtype in (torch.float32, torch.bfloat16):
            model = models.MODELS[name](0).eval().to(dtype)
            ids = models.tokens(0)

            def run(model: torch.nn.Module = model, ids: torch.Tensor = ids) -> torch.Tensor:
                with torch.no_grad():
                    out = model(ids)
                return out if isinstance(out, torch.Tensor) else out[0]

            _timed_ratio(f"{name} {str(dtype).removeprefix('torch.')}", samples, run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--section",
        choices=[
            "all",
            "accumulation",
            "scan",
            "calibration",
            "programs",
            "normalisations",
            "triton",
            "power",
            "cost",
        ],
        default="all",
    )
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--power-seeds", type=int, default=40)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--only", default="", help="triton section: the kernels whose name contains this"
    )
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
        f"{torch.__version__}, {options.threads} thread(s), load {os.getloadavg()[0]:.1f}"
    )
    if options.section in ("all", "accumulation"):
        accumulation(1)
    if options.section in ("all", "scan"):
        scan(1)
    if options.section in ("all", "calibration"):
        calibration(options.seeds, options.samples)
    if options.section == "programs":
        random_programs(options.seeds, options.samples)
    if options.section in ("all", "normalisations"):
        normalisations(options.seeds, options.samples)
    if options.section in ("all", "triton"):
        triton_kernels(options.seeds, options.samples, options.only)
    if options.section in ("all", "power"):
        power(options.power_seeds, options.samples)
    if options.section in ("all", "cost"):
        cost(options.samples)


if __name__ == "__main__":
    main()
