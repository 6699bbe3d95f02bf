"""dual_delta / assert_dual_delta end to end: Algorithm 1, verdicts, reproducibility, the
failure message, every bad-argument path with its message, and the result's outputs."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytest_fpcheck.dualdelta import DualDeltaResult, assert_dual_delta, dual_delta, trial_rng
from pytest_fpcheck.errors import DualDeltaFailure, FPCheckError, InvalidArgument

torch = pytest.importorskip("torch")


def normals(rng: np.random.Generator) -> tuple[Any, ...]:
    return (rng.standard_normal(256, dtype=np.float32),)


def pairwise_sum(x: np.ndarray) -> Any:
    """NumPy's pairwise summation, in the input's precision."""
    return np.sum(x)


def reversed_pairwise_sum(x: np.ndarray) -> Any:
    """The same summation tree on the mirrored input: exactly as accurate, by symmetry."""
    return np.sum(x[::-1])


def sequential_sum(x: np.ndarray) -> Any:
    """Left-to-right summation: error bound n*u instead of log2(n)*u."""
    return np.cumsum(x)[-1]


def test_a_less_accurate_custom_is_detected() -> None:
    result = dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=1000)
    assert isinstance(result, DualDeltaResult)
    assert result.accuracy == "custom_less_accurate"
    assert result.stability == "custom_less_stable"
    assert result.n == 1000
    assert result.mean_ratio.estimate > 1.5


def test_equally_accurate_implementations_pass_the_assertion() -> None:
    result = assert_dual_delta(reversed_pairwise_sum, pairwise_sum, inputs=normals, n=300)
    assert (result.accuracy, result.stability) == ("equivalent", "equivalent")


def test_assertion_failure_carries_the_summary_and_the_result() -> None:
    with pytest.raises(DualDeltaFailure) as caught:
        assert_dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=1000)
    result = caught.value.result
    assert str(caught.value) == (
        "fpcheck dual-delta 'custom_less_accurate', 'custom_less_stable': custom sequential_sum "
        "is significantly less accurate and less stable than reference pairwise_sum "
        f"(alpha = 0.01).\n\n{result.summary()}"
    )


def test_deltas_are_algorithm_1() -> None:
    result = dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=20, seed=5)
    for trial in range(20):
        (x,) = normals(trial_rng(5, trial))
        exact = float(np.sum(x.astype(np.float64)))
        assert result.delta_custom[trial] == abs(float(sequential_sum(x)) - exact) / (
            1 + abs(exact)
        )
        assert result.delta_reference[trial] == abs(float(pairwise_sum(x)) - exact) / (
            1 + abs(exact)
        )


def test_runs_are_reproducible_from_the_seed() -> None:
    first = dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=30, seed=1)
    again = dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=30, seed=1)
    other = dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=30, seed=2)
    np.testing.assert_array_equal(first.delta_custom, again.delta_custom)
    assert first.to_dict() == again.to_dict()
    assert not np.array_equal(first.delta_custom, other.delta_custom)


def test_hypothesis_strategy_inputs() -> None:
    strategy = st.tuples(
        arrays(np.float32, 64, elements=st.floats(-1, 1, width=32), fill=st.nothing())
    )
    result = dual_delta(sequential_sum, pairwise_sum, inputs=strategy, n=40, seed=3)
    again = dual_delta(sequential_sum, pairwise_sum, inputs=strategy, n=40, seed=3)
    np.testing.assert_array_equal(result.delta_custom, again.delta_custom)
    assert result.n == 40


def test_torch_low_precision_outputs_with_the_mpmath_oracle_and_max_ulp() -> None:
    def inputs(rng: np.random.Generator) -> tuple[Any, ...]:
        return (torch.from_numpy(rng.standard_normal(16, dtype=np.float32)).to(torch.bfloat16),)

    def custom(x: Any) -> Any:
        return torch.cumsum(x, 0)[-1:]

    def reference(x: Any) -> Any:
        return x.float().sum(0, keepdim=True).to(torch.bfloat16)

    result = dual_delta(custom, reference, inputs=inputs, oracle="mpmath", metric="max_ulp", n=30)
    # The reference rounds once: at most half an ulp of bfloat16.
    assert result.stats["reference"]["max"] <= 0.5
    assert result.metric == "max_ulp"
    assert result.oracle == "mpmath"


def test_a_callable_oracle_is_used_as_given() -> None:
    calls: list[int] = []

    def oracle(x: np.ndarray) -> float:
        calls.append(1)
        return math.fsum(x.tolist())

    result = dual_delta(sequential_sum, pairwise_sum, inputs=normals, oracle=oracle, n=10)
    assert len(calls) == 10
    assert result.oracle == "test_a_callable_oracle_is_used_as_given.<locals>.oracle"


def test_an_exception_in_an_implementation_names_the_trial() -> None:
    def fragile(x: np.ndarray) -> Any:
        if x[0] > 1.0:
            raise ValueError("input out of range")
        return np.sum(x)

    with pytest.raises(ValueError, match="input out of range") as caught:
        dual_delta(fragile, pairwise_sum, inputs=normals, n=50, seed=0)
    trial = next(i for i in range(50) if normals(trial_rng(0, i))[0][0] > 1.0)
    assert caught.value.__notes__ == [
        f"raised by the custom implementation on dual-delta trial {trial} (seed=0)"
    ]


def test_a_nan_in_the_custom_output_is_refused_with_its_trial() -> None:
    def with_nan(x: np.ndarray) -> Any:
        return np.array([np.sum(x), np.nan], dtype=np.float32)

    def reference(x: np.ndarray) -> Any:
        return np.array([np.sum(x), 0.0], dtype=x.dtype)

    message = (
        "delta_custom[0]=nan (type float) is not valid: expected a finite error >= 0 from metric "
        "'max_hybrid'; the output holds nan at index (1,) where the oracle holds 0.0. Dual-delta "
        "statistics need finite errors: narrow the inputs, use metric='max_hybrid' (defined "
        "wherever the outputs are finite), or find where the value appears with "
        "fp.watch_nonfinite()."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        dual_delta(with_nan, reference, inputs=normals, n=5)


def test_outputs_of_mismatched_shapes_are_refused() -> None:
    message = (
        "reference output on trial 0=<numpy array of shape (2,) and dtype float64> (type "
        "ndarray) is not valid: expected an array of the oracle output's shape ()."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        dual_delta(pairwise_sum, lambda x: np.zeros(2), inputs=normals, oracle=np.sum, n=5)


def not_callable_message(name: str, what: str) -> str:
    return f"{name}=3 (type int) is not valid: expected a callable {name}(*args) returning {what}."


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"custom": 3}, not_callable_message("custom", "its output")),
        ({"reference": 3}, not_callable_message("reference", "its output")),
        (
            {"inputs": [1.0]},
            "inputs=[1.0] (type list) is not valid: expected a callable inputs(rng) returning a "
            "tuple of arguments, or a hypothesis strategy of argument tuples.",
        ),
        ({"n": 1}, "n=1 (type int) is not valid: expected an int >= 2 (the number of trials)."),
        ({"n": 10.0}, "n=10.0 (type float) is not valid: expected an int >= 2"),
        ({"n": True}, "n=True (type bool) is not valid: expected an int >= 2"),
        ({"seed": -1}, "seed=-1 (type int) is not valid: expected an int >= 0."),
        ({"seed": "0"}, "seed='0' (type str) is not valid: expected an int >= 0."),
        (
            {"alpha": 0.0},
            "alpha=0.0 (type float) is not valid: expected a number in the open interval (0, 1).",
        ),
        ({"alpha": 1}, "alpha=1 (type int) is not valid: expected a number in the open interval"),
        ({"alpha": math.nan}, "alpha=nan (type float) is not valid: expected a number in the"),
        ({"alpha": "0.05"}, "alpha='0.05' (type str) is not valid: expected a number in the"),
        (
            {"oracle": "float128"},
            "oracle='float128' (type str) is not valid: expected 'fp64', 'mpmath', 'arb' or a callable "
            "oracle(*args) returning the exact result.",
        ),
        (
            {"metric": "l2"},
            "metric='l2' (type str) is not valid: expected 'max_hybrid', 'rel_norm', 'max_abs', "
            "'max_ulp' or a callable metric(y, y_oracle) -> float.",
        ),
    ],
)
def test_bad_arguments_are_refused(overrides: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {
        "custom": sequential_sum,
        "reference": pairwise_sum,
        "inputs": normals,
        "n": 10,
    }
    arguments.update(overrides)
    custom, reference = arguments.pop("custom"), arguments.pop("reference")
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        dual_delta(custom, reference, **arguments)
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        assert_dual_delta(custom, reference, **arguments)


def test_numpy_integer_arguments_are_accepted() -> None:
    result = dual_delta(pairwise_sum, pairwise_sum, inputs=normals, n=np.int64(5), seed=np.uint8(2))
    assert (result.n, result.seed) == (5, 2)


@pytest.fixture(scope="module")
def worse() -> DualDeltaResult:
    return dual_delta(sequential_sum, pairwise_sum, inputs=normals, n=1000)


def test_summary_table(worse: DualDeltaResult) -> None:
    lines = worse.summary().splitlines()
    assert lines[0] == "dual-delta test of custom sequential_sum against reference pairwise_sum"
    assert lines[1] == "oracle fp64, metric max_hybrid, n = 1000, seed = 0, alpha = 0.01"
    wilcoxon = worse.tests["wilcoxon"]
    assert lines[2] == (
        "accuracy:  custom_less_accurate   by Wilcoxon signed-rank (paired): "
        f"p(custom larger) = {wilcoxon.pvalue_greater:.3g} < alpha/2 = 0.005"
    )
    assert lines[3].startswith("stability: custom_less_stable     by Pitman-Morgan, robust")
    ratio = worse.mean_ratio
    assert lines[4] == (
        f"mean error ratio custom / reference: {ratio.estimate:.4g} (99% bootstrap CI "
        f"{ratio.low:.4g} .. {ratio.high:.4g})"
    )
    assert lines[6] == "error          custom    reference"
    assert lines[7] == (
        f"mean     {worse.stats['custom']['mean']:12.4e} {worse.stats['reference']['mean']:12.4e}"
    )
    assert [line.split()[0] for line in lines[7:15]] == [
        "mean", "median", "std", "p50", "p90", "p95", "p99", "max"
    ]  # fmt: skip
    assert lines[16].split() == [
        "test", "statistic", "p", "two-sided", "p(c", "larger)", "p(c", "smaller)", "role"
    ]  # fmt: skip
    assert lines[17].startswith("Kolmogorov-Smirnov (2-sample)")
    assert "Shapiro-Wilk (normality of differences)" in lines[20]
    assert lines[20].split()[-7:-4] == ["-", "-", "normality"]


def test_to_dict_is_json_serialisable(worse: DualDeltaResult) -> None:
    data = json.loads(json.dumps(worse.to_dict(), allow_nan=False))
    assert data["accuracy"] == "custom_less_accurate"
    assert data["n"] == 1000
    assert data["delta_custom"] == worse.delta_custom.tolist()
    assert set(data["tests"]) == {
        "ks",
        "wilcoxon",
        "sign",
        "shapiro",
        "t",
        "variance",
        "pitman_morgan",
    }
    assert data["tests"]["shapiro"]["pvalue_greater"] is None
    assert data["stats"]["custom"]["max"] == worse.stats["custom"]["max"]


def test_to_dict_turns_non_finite_numbers_into_none() -> None:
    result = dual_delta(pairwise_sum, pairwise_sum, inputs=normals, n=3)
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["tests"]["shapiro"]["statistic"] is None


def test_plot_writes_a_png(worse: DualDeltaResult, tmp_path: Path) -> None:
    target = worse.plot(tmp_path / "errors.png")
    assert target == tmp_path / "errors.png"
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_of_all_zero_errors(tmp_path: Path) -> None:
    result = dual_delta(pairwise_sum, pairwise_sum, inputs=normals, oracle=pairwise_sum, n=5)
    assert result.stats["custom"]["max"] == 0.0
    assert result.plot(str(tmp_path / "zeros.png")).stat().st_size > 0


def test_plot_path_must_be_a_path(worse: DualDeltaResult) -> None:
    message = (
        "path=3 (type int) is not valid: expected a file path (str or os.PathLike) for the PNG."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        worse.plot(3)  # type: ignore[arg-type]


def test_plot_without_matplotlib_says_how_to_install_it(
    worse: DualDeltaResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    message = (
        "DualDeltaResult.plot needs matplotlib, which is not installed: "
        "pip install pytest-fpcheck[plot]"
    )
    with pytest.raises(FPCheckError, match=re.escape(message)):
        worse.plot(tmp_path / "never.png")


def test_repr(worse: DualDeltaResult) -> None:
    assert repr(worse) == (
        "<DualDeltaResult n=1000 accuracy=custom_less_accurate stability=custom_less_stable "
        f"mean ratio={worse.mean_ratio.estimate:.4g}>"
    )


def test_a_numpy_run_imports_no_other_backend() -> None:
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        from pytest_fpcheck.dualdelta import dual_delta
        dual_delta(lambda x: np.cumsum(x)[-1], np.sum, n=20,
                   inputs=lambda rng: (rng.standard_normal(8).astype(np.float32),))
        heavy = ("torch", "triton", "numba", "mpmath", "hypothesis", "matplotlib")
        print(sorted(m for m in heavy if m in sys.modules))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
