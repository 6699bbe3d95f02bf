"""fp.isolate (CIEL): outcomes, the report's layout, what agreement means, composition with
fp.track and autocast, in-place operations, the plugin's helpers and invalid arguments."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pytest_fpcheck as fp  # noqa: E402
from pytest_fpcheck.diagnostics.isolate import (  # noqa: E402
    failing_dual_delta,
    isolate,
    isolate_test_call,
    isolation_note,
)
from pytest_fpcheck.errors import InvalidArgument  # noqa: E402


def line_of(text: str, function: object) -> int:
    lines, first = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return first + next(i for i, line in enumerate(lines) if text in line)


def cancellation(x: torch.Tensor) -> torch.Tensor:
    shifted = x + 1e5
    return shifted - 1e5


def scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 3.0 + 1.0


X = torch.linspace(0.5, 1.5, 8)
EXACT = X.double()


def test_two_sites_needed_together_are_found_and_reported() -> None:
    isolation = isolate(cancellation, X, reference=EXACT, tol=1e-4)
    add, sub = line_of("x + 1e5", cancellation), line_of("shifted - 1e5", cancellation)
    assert isolation.outcome == "isolated"
    assert [str(s) for s in isolation.sites] == [
        f"aten.add #0 at test_isolate.py:{add}",
        f"aten.sub #1 at test_isolate.py:{sub}",
    ]
    assert isolation.searches == 3
    assert isolation.report() == (
        "isolate (CIEL): 2 of 2 operation sites, in float64, resolve the inconsistency together\n"
        "  agreement: |actual - reference| <= atol + rtol * |reference| element-wise, "
        "rtol=0.0001, atol=0.0001 (tol=)\n"
        "  plain run: worst at (2,): |actual - reference| = 0.00335, 18.8 x its tolerance\n"
        "  with the culprit sites enhanced: worst at (0,): |actual - reference| = 0, "
        "0 x its tolerance\n"
        "culprit sites (1-minimal: leaving any one of them as written leaves the inconsistency):\n"
        f"  aten.add #0 at test_isolate.py:{add} [float32]\n"
        f"  aten.sub #1 at test_isolate.py:{sub} [float32]\n"
        "configurations run: 3\n"
        "    1 whole program resolved   worst at (0,): |actual - reference| = 0, 0 x its tolerance\n"
        "        enhanced every site (2)\n"
        "    2 bisection     unresolved worst at (2,): |actual - reference| = 0.00335, "
        "18.8 x its tolerance\n"
        f"        enhanced 1 site: aten.add #0 at test_isolate.py:{add}\n"
        "    3 bisection     unresolved worst at (2,): |actual - reference| = 0.00335, "
        "18.8 x its tolerance\n"
        f"        enhanced 1 site: aten.sub #1 at test_isolate.py:{sub}"
    )


def test_a_program_that_agrees_has_nothing_to_isolate() -> None:
    isolation = isolate(scaled, X, reference=scaled(EXACT))
    assert isolation.outcome == "consistent"
    assert (isolation.sites, isolation.searches) == ((), 0)
    assert isolation.report().splitlines()[0] == (
        "isolate (CIEL): the plain run already agrees: there is no inconsistency to isolate"
    )


def test_a_real_bug_is_reported_as_not_precision() -> None:
    isolation = isolate(scaled, X, reference=EXACT * 3.0 - 1.0)  # the sign of 1.0 is wrong
    assert isolation.outcome == "unresolved"
    assert isolation.searches == 1
    assert isolation.report().splitlines()[0] == (
        "isolate (CIEL): with all 2 operation sites in float64 the inconsistency remains: its "
        "cause is not precision (a bug in the program, or in the reference)"
    )


def test_a_program_without_narrow_operations_has_nothing_to_enhance() -> None:
    isolation = isolate(lambda v: np.asarray(v) * 2.0, [1.0, 2.0], reference=[2.0, 4.5])
    assert isolation.outcome == "unresolved"
    assert isolation.program_sites == ()
    assert isolation.searches == 0
    assert isolation.notes == (
        "the program ran no PyTorch operation in a format narrower than float64: there is "
        "nothing to enhance",
    )


def test_default_tolerances_are_torch_testings_for_the_dtype() -> None:
    isolation = isolate(cancellation, X.half(), reference=EXACT)
    assert isolation.criterion == (
        "|actual - reference| <= atol + rtol * |reference| element-wise, float16: rtol=0.001, "
        "atol=1e-05 (torch.testing's defaults; pass tol= to choose)"
    )


def test_reference_callable_tolerance_pair_and_structured_results() -> None:
    def pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return scaled(x), cancellation(x)

    isolation = isolate(
        pair, X, reference=lambda x: (scaled(x.double()), x.double()), tol=(0, 1e-4)
    )
    assert isolation.outcome == "isolated"
    assert [s.op for s in isolation.sites] == ["aten.add", "aten.sub"]
    assert isolation.plain.detail.startswith("[1] worst at (2,)")


def test_enhanced_confirms_the_fix_and_composes_with_tracking() -> None:
    isolation = isolate(cancellation, X, reference=EXACT, tol=1e-4)
    fixed = isolation.enhanced(cancellation)
    with fp.track():
        y = fixed(X)
    assert y.dtype == torch.float32
    assert torch.equal(y, X)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains(EXACT.numpy()).all()


def test_isolation_inside_tracking_runs_tracked() -> None:
    with fp.track():
        isolation = isolate(cancellation, X, reference=EXACT, tol=1e-4)
    assert [s.op for s in isolation.sites] == ["aten.add", "aten.sub"]


def test_autocast_casts_are_sites() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 16)
    x = torch.randn(8, 16) * 10 + 100

    def forward(v: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return layer(v).float()

    with torch.no_grad():
        reference = torch.nn.functional.linear(
            x.double(), layer.weight.double(), layer.bias.double()
        )
        isolation = isolate(forward, x, reference=reference, tol=1e-3)
    assert [(s.op, s.module_path, s.dtype) for s in isolation.sites] == [
        ("aten._to_copy", "Linear", "bfloat16"),
        ("aten.addmm", "Linear", "bfloat16"),
    ]


def test_in_place_operations_are_enhanced_and_keep_their_tensor() -> None:
    def in_place(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y.add_(1e5)
        y.sub_(1e5)
        return y

    isolation = isolate(in_place, X, reference=EXACT, tol=1e-4)
    assert [s.op for s in isolation.sites] == ["aten.add_", "aten.sub_"]
    assert torch.equal(isolation.enhanced(in_place)(X), X)


def test_random_programs_are_run_on_the_same_draws() -> None:
    def noisy(x: torch.Tensor) -> torch.Tensor:
        return cancellation(x + 1e-3 * torch.rand(x.shape))

    torch.manual_seed(1)
    expected = (X + 1e-3 * torch.rand(X.shape)).double()
    torch.manual_seed(1)
    isolation = isolate(noisy, X, reference=expected, tol=1e-4)
    assert [s.op for s in isolation.sites] == ["aten.add", "aten.sub"]


def small_cancellation(x: torch.Tensor) -> torch.Tensor:
    return (x + 100.0) - 100.0


def test_enhancing_to_float32_isolates_bfloat16_sites() -> None:
    isolation = isolate(
        small_cancellation, X.bfloat16() / 64, reference=EXACT / 64, tol=1e-3, enhance="float32"
    )
    assert isolation.enhance == "float32"
    assert {s.dtype for s in isolation.sites} == {"bfloat16"}


def failing_test() -> None:
    torch.manual_seed(0)
    x = torch.rand(16) + 0.5
    fp.assert_roundoff_close(cancellation(x), x.double(), rtol=1e-4, atol=1e-4)


def test_isolate_test_call_reruns_a_failing_test() -> None:
    isolation = isolate_test_call(failing_test, fp.RoundoffMismatch)
    assert isolation.criterion == "the test passes (it failed with RoundoffMismatch)"
    assert isolation.plain.detail.startswith(
        "failed: RoundoffMismatch: fpcheck verdict 'bug': outside rtol/atol"
    )
    assert math.isnan(isolation.plain.error)
    add, sub = line_of("x + 1e5", cancellation), line_of("shifted - 1e5", cancellation)
    assert isolation_note(isolation) == (
        "isolate (CIEL): 2 of 3 operation sites, in float64, resolve the inconsistency together "
        "(7 configurations run)\n"
        "culprit sites (1-minimal: leaving any one of them as written leaves the inconsistency):\n"
        f"  aten.add #1 at test_isolate.py:{add} [float32]\n"
        f"  aten.sub #2 at test_isolate.py:{sub} [float32]\n"
        "(fp.isolate(fn, *args, reference=...) reports every configuration, and its "
        ".enhanced(fn) runs fn with just these sites enhanced, to confirm the fix)"
    )


def test_a_test_that_fails_for_another_reason_is_not_precision() -> None:
    def wrong() -> None:
        x = torch.rand(4)
        fp.assert_roundoff_close(x * 2, x.double() * 3)

    isolation = isolate_test_call(wrong, fp.RoundoffMismatch)
    assert isolation.outcome == "unresolved"
    assert isolation_note(isolation).splitlines()[0] == (
        "isolate (CIEL): with all 1 operation sites in float64 the inconsistency remains: its "
        "cause is not precision (a bug in the program, or in the reference) "
        "(1 configurations run)"
    )


def test_failing_dual_delta_isolates_the_custom_side() -> None:
    def custom(x: torch.Tensor) -> torch.Tensor:
        return cancellation(x)

    def reference(x: torch.Tensor) -> torch.Tensor:
        return x * 1.0

    def inputs(rng: np.random.Generator) -> tuple[torch.Tensor]:
        return (torch.from_numpy(rng.uniform(0.5, 1.5, 16).astype(np.float32)),)

    call = failing_dual_delta(lambda: fp.dual_delta(custom, reference, inputs=inputs, n=30))
    with pytest.raises(fp.DualDeltaFailure):
        call()
    isolation = isolate_test_call(call, fp.DualDeltaFailure)
    assert [s.op for s in isolation.sites] == ["aten.add", "aten.sub"]


def not_a_result() -> int:
    return 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: isolate(1, X, reference=EXACT),
            "fn=1 (type int) is not valid: expected a callable running the program (a model, "
            "a function).",
        ),
        (
            lambda: isolate(scaled, X, reference=EXACT, tol=-1),
            "tol=-1 (type int) is not valid: expected None (torch.testing's tolerances for the "
            "result's dtype), a non-negative number (rtol = atol = tol) or a pair (rtol, atol) "
            "of non-negative numbers.",
        ),
        (
            lambda: isolate(scaled, X, reference=EXACT, tol=(1e-3,)),
            "tol=(0.001,) (type tuple) is not valid: expected None (torch.testing's tolerances "
            "for the result's dtype), a non-negative number (rtol = atol = tol) or a pair (rtol, "
            "atol) of non-negative numbers.",
        ),
        (
            lambda: isolate(scaled, X, reference=EXACT, enhance="float128"),
            "enhance='float128' (type str) is not valid: expected 'float64' or 'float32'.",
        ),
        (
            lambda: isolate(scaled, X, reference=EXACT[:3]),
            "reference=<torch array of shape (3,) and dtype torch.float64> (type Tensor) is not "
            "valid: expected an array of shape (8,), like fn's result.",
        ),
        (
            lambda: isolate(scaled, X, reference=(1.0, 2.0)),
            "reference=(1.0, 2.0) (type tuple) is not valid: expected 1 array(s), like fn's "
            "result.",
        ),
        (
            lambda: isolate(lambda v: None, X, reference=EXACT),
            "fn's result=None (type NoneType) is not valid: expected a floating array, tensor, "
            "float or nested list of floats.",
        ),
        (
            lambda: isolate_test_call("test", AssertionError),
            "call='test' (type str) is not valid: expected a callable that runs the failing test.",
        ),
        (
            lambda: isolate_test_call(failing_test, "RoundoffMismatch"),
            "failure_type='RoundoffMismatch' (type str) is not valid: expected an exception "
            "class (the failure's type).",
        ),
        (
            lambda: isolate(scaled, X, reference=EXACT, tol=1.0).enhanced(None),
            "fn=None (type NoneType) is not valid: expected a callable (the program, or one that "
            "runs it).",
        ),
        (
            lambda: failing_dual_delta(3),
            "rerun=3 (type int) is not valid: expected a callable returning a DualDeltaResult.",
        ),
        (
            lambda: failing_dual_delta(not_a_result)(),
            "rerun=<function not_a_result at",
        ),
    ],
)
def test_invalid_arguments_say_what_would_be_valid(call: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()  # type: ignore[operator]
