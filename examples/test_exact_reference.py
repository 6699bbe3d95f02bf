"""A float64 reference that is wrong, caught by the exact reference (docs/roundoff.md,
docs/dual-delta.md).

``sqrt(x + 1) - sqrt(x)`` for large ``x`` cancels: written that way, even float64 keeps only a
few digits (at x = 1e14 the two square roots agree in their first 14 digits). The kernel under
test computes the same quantity in float32 without cancellation, as ``1 / (sqrt(x + 1) +
sqrt(x))``. Judged against the float64 evaluation of the textbook formula, the correct kernel
looks like a bug; judged against the exact result (``fp.exact_reference``: every operation in
Arb ball arithmetic, so the result is an enclosure of the exact value), it is round-off, and
the report says that the float64 reference is wrong. Needs python-flint (the ``arb`` extra).
"""

import numpy as np
import pytest
import torch

import pytest_fpcheck as fp

pytest.importorskip("flint")


def textbook(x):
    """The reference as the formula is written: cancels for large x."""
    return torch.sqrt(x + 1) - torch.sqrt(x)


def kernel(x):
    """The kernel under test: the same quantity, rewritten so that nothing cancels."""
    return 1 / (torch.sqrt(x + 1) + torch.sqrt(x))


def large_inputs(rng):
    return (torch.from_numpy(10.0 ** rng.uniform(8, 14, 16)).float(),)


def test_the_exact_reference_catches_a_wrong_float64_reference():
    (x,) = large_inputs(np.random.default_rng(0))
    with fp.track():
        out = kernel(x)

    # Against float64, the correct kernel looks like a bug: float64 itself is off by up to 0.2%.
    # (The float64 result as a plain array, as a test would load it from a file: under
    # `pytest --fpcheck` a tensor computed here would be tracked, and its own wide enclosure
    # would make the verdict inconclusive instead.)
    float64_reference = textbook(x.double()).numpy().copy()
    assert fp.classify(out, float64_reference).kind == "bug"

    # Against the exact result it is round-off, and the report calls the float64 reference out.
    exact = fp.exact_reference(textbook, x)
    verdict = fp.assert_roundoff_close(out, exact)
    assert verdict.kind == "roundoff"
    assert "judged against the exact result" in verdict.report()
    assert "a float64 reference is wrong there" in verdict.report()


def test_dual_delta_with_the_arb_oracle():
    """The fp64 oracle runs the textbook formula in float64, and what it reports as the kernel's
    error is its own; the Arb oracle's error is proven below 2**-60."""
    run = {
        oracle: fp.dual_delta(
            kernel, textbook, inputs=large_inputs, oracle=oracle, metric="rel_norm", n=30
        )
        for oracle in ("fp64", "arb")
    }
    kernel_error = {oracle: result.stats["custom"]["mean"] for oracle, result in run.items()}
    assert kernel_error["arb"] < 1e-7 < 1e-6 < kernel_error["fp64"]
    assert run["arb"].accuracy == "custom_more_accurate"
