"""The ``fpcheck`` fixture offers stochastic bounds with the test's seed, so a test reads like
one with ``fp.track()``."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_the_fixture_binds_the_seed_and_a_test_reads_naturally(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import torch

        def model(x):
            for _ in range(6):
                x = torch.tanh(x @ x.T @ x / x.shape[1])
            return x

        def test_model(fpcheck):
            x = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))
            bounds = fpcheck.stochastic_bounds(model, x.to(torch.bfloat16))
            assert bounds.estimate.seed == fpcheck.seed
            verdict = fpcheck.assert_roundoff_close(
                model(x.to(torch.bfloat16)), model(x.double()), bounds=bounds
            )
            assert verdict.kind == "roundoff"
            assert "estimated, not proven" in verdict.report()

        def test_explicit_seed_wins(fpcheck):
            bounds = fpcheck.stochastic_bounds(torch.exp, torch.ones(3), samples=2, seed=5)
            assert bounds.estimate.seed == 5
        """
    )
    pytester.runpytest(
        "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"
    ).assert_outcomes(passed=2)
