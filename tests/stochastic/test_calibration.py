"""The CI slice of benchmarks/bench_stochastic.py: the accumulation model against the
addition-level emulation, the mode's spread on a matrix product against the emulation of the
same product, and, on an 8-layer bfloat16 MLP, no false Type-II verdict on correct code, the
estimated spread within a factor of 2 of the actual error's, and a planted bug caught."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_fpcheck import formats as F

torch = pytest.importorskip("torch")

from pytest_fpcheck.stochastic.accumulation import KAPPA  # noqa: E402

from .calibration import emulate_accumulation, mode_spread, model_sigma, verdict_trial  # noqa: E402
from .models import MLP, run_in  # noqa: E402


@pytest.mark.parametrize(("name", "k"), [("float32", 256), ("bfloat16", 64)])
def test_the_sequential_model_follows_the_addition_level_emulation(name: str, k: int) -> None:
    rng = np.random.default_rng(0)
    fmt = F.format_of(name)
    terms = F.round_to(rng.standard_normal((8, k)), fmt)
    emulated = emulate_accumulation(terms, fmt, "sequential", 200, rng).std(0, ddof=1)
    ratio = float(np.median(emulated / model_sigma(terms, fmt.unit_roundoff)))
    assert 0.5 <= ratio <= 2.0, ratio


def test_the_pairwise_model_follows_the_addition_level_emulation() -> None:
    rng = np.random.default_rng(1)
    fmt = F.format_of("float32")
    terms = F.round_to(rng.random((8, 512)), fmt)
    emulated = emulate_accumulation(terms, fmt, "pairwise", 200, rng).std(0, ddof=1)
    u = fmt.unit_roundoff
    model = np.sqrt(KAPPA * u * u * (2 * terms.sum(-1) ** 2 + 7 * np.square(terms).sum(-1)))
    ratio = float(np.median(emulated / model))
    assert 0.5 <= ratio <= 2.0, ratio
    # the sequential model would overstate this sum's spread tenfold
    assert np.median(emulated / model_sigma(terms, u)) < 0.2


def test_the_modes_spread_on_a_float32_product_follows_the_emulation() -> None:
    rng = np.random.default_rng(2)
    a = torch.randn(4, 256, generator=torch.Generator().manual_seed(3))
    b = torch.randn(256, 2, generator=torch.Generator().manual_seed(4))
    products = (a.double().numpy()[:, None, :] * b.double().numpy().T[None, :, :]).reshape(-1, 256)
    emulated = emulate_accumulation(products, F.format_of("float32"), "sequential", 200, rng)
    spread = mode_spread(torch.mm, (a, b), 48, 5).reshape(-1)
    ratio = float(np.median(spread / emulated.std(0, ddof=1)))
    assert 0.5 <= ratio <= 2.0, ratio


def test_correct_code_passes_and_a_planted_bug_is_caught_on_a_deep_bfloat16_mlp() -> None:
    correct, buggy = MLP(width=32, depth=8), MLP(width=32, depth=8)
    buggy.bug = 64 * 2.0**-8
    reference = run_in(correct)
    ratios, caught = [], []
    for seed in range(4):
        x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1000 + seed))
        kind, estimated, actual = verdict_trial(reference, reference, x, torch.bfloat16, seed)
        assert kind == "roundoff"
        ratios.append(estimated / actual)
        caught.append(verdict_trial(run_in(buggy), reference, x, torch.bfloat16, seed)[0])
    assert 0.5 <= float(np.median(ratios)) <= 2.0, ratios
    assert caught.count("bug") >= 3, caught
