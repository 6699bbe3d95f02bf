"""The exception hierarchy and the layout of argument errors."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.errors import describe_value


def test_hierarchy_matches_the_api() -> None:
    assert issubclass(fp.InvalidArgument, fp.FPCheckError)
    assert issubclass(fp.InvalidArgument, TypeError)
    assert issubclass(fp.RoundoffMismatch, AssertionError)
    assert issubclass(fp.DualDeltaFailure, AssertionError)
    for error in (
        fp.RoundoffMismatch,
        fp.DualDeltaFailure,
        fp.UnsupportedOperation,
        fp.StaleBoundsError,
        fp.InternalError,
    ):
        assert issubclass(error, fp.FPCheckError)


def test_invalid_argument_names_argument_value_type_and_what_is_valid() -> None:
    error = fp.InvalidArgument(
        "width", -3, "a positive int", hint="Use 16 for Hopper tensor cores."
    )
    assert str(error) == (
        "width=-3 (type int) is not valid: expected a positive int. Use 16 for Hopper tensor cores."
    )
    assert (error.name, error.value, error.expected) == ("width", -3, "a positive int")


def test_arrays_are_described_by_shape_and_dtype() -> None:
    assert (
        describe_value(np.zeros((2, 3), np.float16))
        == "<numpy array of shape (2, 3) and dtype float16>"
    )
    assert describe_value("x" * 200) == "'" + "x" * 76 + "..."
    assert describe_value(np.float32) == "<class 'numpy.float32'>"


def test_unsupported_operation_says_how_to_register_a_rule() -> None:
    error = fp.UnsupportedOperation("aten.fft_r2c.default", where="model.py:12")
    assert str(error) == (
        "no interval rule for operation 'aten.fft_r2c.default' at model.py:12: register one with "
        "pytest_fpcheck.interval.register_rule(op_name, rule), or run this code outside fp.track()."
    )


def test_internal_error_asks_for_a_report_and_keeps_the_record() -> None:
    record = {"op": "add"}
    error = fp.InternalError("enclosure lo > hi", record)
    assert error.record is record
    assert str(error).startswith(
        "internal error in pytest-fpcheck: enclosure lo > hi. This is a bug"
    )
    assert "(.record = {'op': 'add'})" in str(error)


def test_assertion_errors_carry_their_evidence() -> None:
    with pytest.raises(AssertionError) as info:
        raise fp.RoundoffMismatch("bug", verdict="v")
    assert info.value.verdict == "v"
    assert fp.DualDeltaFailure("worse", result=1).result == 1
