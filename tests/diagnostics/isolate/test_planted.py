"""fp.isolate on generated float32 models of 50 to 500 operation sites with planted culprits
(bfloat16 round trips: one site each; cancellations: two sites that only resolve together).
They are always found, the result is 1-minimal, and the configurations stay within
2 k ceil(log2 N) + 2 k + 2."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_fpcheck.diagnostics.isolate import isolate  # noqa: E402
from pytest_fpcheck.diagnostics.isolate.enhance import Enhancer  # noqa: E402

from .isolate_models import TOL, planted_model  # noqa: E402


@pytest.mark.parametrize(
    ("sites", "casts", "cancels", "seed"),
    [(50, 1, 0, 0), (50, 0, 1, 1), (120, 2, 0, 2), (200, 1, 1, 3), (350, 0, 2, 4), (500, 2, 1, 5)],
)
def test_planted_culprits_are_found(sites: int, casts: int, cancels: int, seed: int) -> None:
    planted = planted_model(sites, casts, cancels, seed)
    with torch.no_grad():
        isolation = isolate(planted.model, planted.x, reference=planted.reference(), tol=TOL)
    assert isolation.outcome == "isolated"
    assert len(isolation.program_sites) == planted.sites
    assert {(s.module_path, s.op) for s in isolation.sites} == planted.culprits
    assert isolation.searches == len(isolation.configurations) <= planted.budget()
    assert isolation.fixed is not None
    assert isolation.fixed.agrees


def test_the_result_is_one_minimal_and_enhanced_confirms_it() -> None:
    planted = planted_model(80, 1, 1, 7)
    reference = planted.reference()
    with torch.no_grad():
        isolation = isolate(planted.model, planted.x, reference=reference, tol=TOL)
        assert len(isolation.sites) == 3
        numbers = isolation._numbers
        for left_out in numbers:
            with Enhancer(isolation._table, target=torch.float64, enabled=numbers - {left_out}):
                partial = planted.model(planted.x)
            assert (partial.double() - reference).abs().max() > TOL * 2
        fixed = isolation.enhanced(planted.model)(planted.x)
    assert (fixed.double() - reference).abs().max() <= TOL * (1 + reference.abs().max())
    assert fixed.dtype == torch.float32


def test_a_correct_model_is_consistent() -> None:
    planted = planted_model(100, 0, 0, 8)
    with torch.no_grad():
        isolation = isolate(planted.model, planted.x, reference=planted.reference(), tol=TOL)
    assert isolation.outcome == "consistent"
    assert isolation.sites == ()
    assert isolation.searches == 0
