"""Error metrics: definitions, conversions to float64, NaN/Inf positions compared first, and
the errors raised for outputs that give no finite error."""

from __future__ import annotations

import math
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from pytest_fpcheck.dualdelta.metrics import as_float64, measure, output_format, resolve_metric
from pytest_fpcheck.errors import InvalidArgument
from pytest_fpcheck.formats import FORMATS

torch = pytest.importorskip("torch")

F64 = FORMATS["float64"]
F16 = FORMATS["float16"]
Y = np.array([1.0, -2.5, 100.0])
ORACLE = np.array([1.25, -2.0, 99.0])


def value(metric: Any, y: Any, oracle: Any, fmt: Any = F64) -> float:
    return measure(resolve_metric(metric), np.asarray(y), np.asarray(oracle), fmt, "custom", 0)


def test_max_hybrid() -> None:
    assert value("max_hybrid", Y, ORACLE) == max(0.25 / 2.25, 0.5 / 3.0, 1.0 / 100.0)


@pytest.mark.parametrize("metric", ["max_hybrid", "rel_norm", "max_abs", "max_ulp"])
def test_scalar_outputs(metric: str) -> None:
    expected = {"max_hybrid": 0.25 / 2.25, "rel_norm": 0.2, "max_abs": 0.25, "max_ulp": 2.0**50}
    assert value(metric, 1.5, 1.25) == pytest.approx(expected[metric], rel=1e-15)


def test_max_abs() -> None:
    assert value("max_abs", Y, ORACLE) == 1.0


def test_rel_norm_is_the_two_norm_ratio() -> None:
    expected = math.sqrt(0.25**2 + 0.5**2 + 1.0) / math.sqrt(1.25**2 + 4.0 + 99.0**2)
    assert value("rel_norm", Y, ORACLE) == pytest.approx(expected, rel=1e-15)


def test_rel_norm_does_not_overflow_on_huge_values() -> None:
    assert value("rel_norm", [3e200, 4e200], [3e200, 4.5e200]) == pytest.approx(
        0.5e200 / 5.41e200, rel=1e-3
    )


def test_rel_norm_of_a_zero_oracle_is_zero_when_equal() -> None:
    assert value("rel_norm", np.zeros(3), np.zeros(3)) == 0.0


def test_rel_norm_of_a_zero_oracle_is_otherwise_refused() -> None:
    message = (
        "delta_custom[0]=inf (type float) is not valid: expected a finite error >= 0 from metric "
        "'rel_norm'; the oracle's output is zero, so ||y - y_o|| / ||y_o|| is undefined. "
        "Dual-delta statistics need finite errors: narrow the inputs, use metric='max_hybrid' "
        "(defined wherever the outputs are finite), or find where the value appears with "
        "fp.watch_nonfinite()."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        value("rel_norm", [1e-3, 0.0], [0.0, 0.0])


def test_max_ulp_counts_units_of_the_given_format() -> None:
    # ulp_float16(1.0) = 2**-10, ulp_float16(1000.0) = 2**-1 (binade [512, 1024)).
    y = np.array([1.0 + 3 * 2.0**-10, 1000.5])
    oracle = np.array([1.0, 1000.0])
    assert value("max_ulp", y, oracle, F16) == 3.0
    assert value("max_ulp", y, oracle, F64) == 3 * 2.0**-10 / 2.0**-52


def test_output_format_follows_the_custom_dtype() -> None:
    assert output_format(np.zeros(2, np.float16)).name == "float16"
    assert output_format(np.zeros(2, ml_dtypes.bfloat16)).name == "bfloat16"
    assert output_format(torch.zeros(2, dtype=torch.bfloat16)).name == "bfloat16"
    assert output_format(1.5).name == "float64"
    message = (
        "metric='max_ulp' (type str) is not valid: expected a metric that fits the custom "
        "output: max_ulp counts units in the last place of custom's floating format, and custom "
        "returned <numpy array of shape (2,) and dtype int64>. Use metric='max_hybrid' or "
        "'max_abs'."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        output_format(np.zeros(2, np.int64))


@pytest.mark.parametrize("metric", ["max_hybrid", "max_abs", "max_ulp", "rel_norm"])
def test_matching_nonfinite_positions_count_as_exact(metric: str) -> None:
    y = np.array([np.nan, np.inf, -np.inf, 2.0])
    oracle = np.array([np.nan, np.inf, -np.inf, 2.0])
    assert value(metric, y, oracle) == 0.0


def test_empty_outputs_have_zero_error() -> None:
    assert value("max_hybrid", np.zeros(0), np.zeros(0)) == 0.0


def test_nan_where_the_oracle_is_finite_is_refused_with_its_position() -> None:
    message = (
        "delta_custom[0]=nan (type float) is not valid: expected a finite error >= 0 from metric "
        "'max_hybrid'; the output holds nan at index (1, 0) where the oracle holds 3.0. "
        "Dual-delta statistics need finite errors"
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        value("max_hybrid", [[1.0, 2.0], [np.nan, 4.0]], [[1.0, 2.0], [3.0, 4.0]])


def test_infinity_of_the_wrong_sign_is_refused() -> None:
    message = (
        "delta_custom[0]=inf (type float) is not valid: expected a finite error >= 0 from metric "
        "'max_abs'; the output holds -inf at index (0,) where the oracle holds inf."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        value("max_abs", [-np.inf], [np.inf])


def test_mismatched_shapes_are_refused() -> None:
    message = (
        "custom output on trial 0=<numpy array of shape (3,) and dtype float64> (type ndarray) "
        "is not valid: expected an array of the oracle output's shape (2,)."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        value("max_abs", np.zeros(3), np.zeros(2))


def test_callable_metric_gets_float64_arrays() -> None:
    seen: list[Any] = []

    def mean_abs(y: np.ndarray, oracle: np.ndarray) -> float:
        seen.append((y.dtype, oracle.dtype))
        return float(np.mean(np.abs(y - oracle)))

    assert value(mean_abs, Y, ORACLE) == pytest.approx((0.25 + 0.5 + 1.0) / 3)
    assert resolve_metric(mean_abs).name == "mean_abs"
    assert seen == [(np.float64, np.float64)]


def test_callable_metric_returning_a_negative_number_is_refused() -> None:
    message = (
        "delta_custom[0]=-1.0 (type float) is not valid: expected a finite error >= 0 from "
        "metric 'signed'."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        value(_named("signed", lambda y, o: -1.0), Y, ORACLE)


def _named(name: str, function: Any) -> Any:
    function.__name__ = name
    return function


def test_callable_metric_returning_a_non_number_is_refused() -> None:
    metric = resolve_metric(_named("words", lambda y, o: "small"))
    message = "metric 'words' on trial 4='small' (type str) is not valid: expected a real number"
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        measure(metric, Y, ORACLE, F64, "reference", 4)


def test_unknown_metric_is_refused() -> None:
    message = (
        "metric='max_rel' (type str) is not valid: expected 'max_hybrid', 'rel_norm', 'max_abs', "
        "'max_ulp' or a callable metric(y, y_oracle) -> float."
    )
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        resolve_metric("max_rel")


@pytest.mark.parametrize(
    "output",
    [
        np.array([1.5, 2.5], dtype=ml_dtypes.bfloat16),
        np.array([1.5, 2.5], dtype=np.float16),
        torch.tensor([1.5, 2.5], dtype=torch.bfloat16),
        torch.tensor([1.5, 2.5], dtype=torch.float16, requires_grad=True),
        [1.5, 2.5],
        (1.5, 2.5),
    ],
)
def test_outputs_convert_to_float64(output: Any) -> None:
    converted = as_float64(output, "custom output")
    assert converted.dtype == np.float64
    np.testing.assert_array_equal(converted, [1.5, 2.5])


def test_scalar_outputs_convert_to_float64() -> None:
    assert as_float64(np.float16(0.5), "x").shape == ()
    assert as_float64(0.5, "x") == 0.5
    assert as_float64(torch.tensor(0.5), "x") == 0.5


@pytest.mark.parametrize(
    ("output", "shown"),
    [
        (np.array([1 + 2j]), "<numpy array of shape (1,) and dtype complex128> (type ndarray)"),
        (
            torch.tensor([1 + 2j]),
            "<torch array of shape (1,) and dtype torch.complex64> (type Tensor)",
        ),
        ("1.5", "'1.5' (type str)"),
        ([[1.0], [2.0, 3.0]], "[[1.0], [2.0, 3.0]] (type list)"),
    ],
)
def test_non_real_outputs_are_refused(output: Any, shown: str) -> None:
    expected = (
        "real numbers, not complex ones"
        if "complex64" in shown
        else "real numbers: an array, a tensor, a float or a nested list of floats"
    )
    message = f"custom output on trial 2={shown} is not valid: expected {expected}."
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        as_float64(output, "custom output on trial 2")
