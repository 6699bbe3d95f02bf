"""NaN propagation's shortcuts (tracking/torch/nan.py): ``whole_line_outputs`` says "every
output element is the whole line" only where :func:`propagate` makes every element of the
rule's result the whole line, whatever the rule computed; and an operand whose record holds no
unbounded element is not read (the enclosures are the same as reading it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.torch import mode, nan  # noqa: E402


def whole(bounds: fp.Bounds | None) -> np.ndarray:
    assert bounds is not None
    return np.isneginf(bounds.lo) & np.isposinf(bounds.hi)


def program() -> dict[str, torch.Tensor]:
    """Results of operations on an operand that is the whole line everywhere (1 / (x - x)),
    alone or beside bounded ones."""
    torch.manual_seed(0)
    x = torch.randn(3, 4) * 1.1
    unbounded = 1.0 / (x - x)
    mask = torch.tensor([True, False, True, False])
    w = torch.randn(4, 2)
    return {
        "unbounded": unbounded,
        "scaled": unbounded * 2.0,
        "sum": unbounded + x,
        "rows": unbounded.sum(-1),
        "product": unbounded @ w,
        "softmax": unbounded.softmax(-1),
        "layer_norm": torch.nn.functional.layer_norm(unbounded, (4,)),
        "where": torch.where(mask, unbounded, x),
        "cat": torch.cat([unbounded, x]),
        "bounded": x * 3.0,
    }


def test_whole_line_outputs_only_where_propagation_makes_everything_the_whole_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = mode._propagate_nan
    seen: list[tuple[str, bool, bool]] = []

    def checked(ctx: Any, inputs: list[Any], outputs: list[Any], result: Any) -> Any:
        predicted = nan.whole_line_outputs(ctx, inputs, outputs)
        propagated = original(ctx, inputs, outputs, result)
        everything = all(
            interval is not None
            and bool(
                (
                    np.isneginf(np.broadcast_to(interval.lo, tuple(out.shape)))
                    & np.isposinf(np.broadcast_to(interval.hi, tuple(out.shape)))
                ).all()
            )
            for out, interval in zip(outputs, propagated, strict=False)
        )
        seen.append((ctx.call.functional, predicted is not None, everything))
        if predicted is not None:
            assert everything, ctx.call.name
            assert len(predicted) == len(outputs)
        return propagated

    monkeypatch.setattr(mode, "_propagate_nan", checked)
    with fp.track(strict=True):  # strict: every rule runs, no shortcut, so both are compared
        results = program()
    assert whole(fp.bounds_of(results["unbounded"])).all()
    predicted = {name for name, said, _ in seen if said}
    assert {"aten.mul", "aten.add", "aten.sum", "aten.mm"} <= predicted
    # a selection and a concatenation keep their bounded elements: no shortcut there
    assert not {"aten.where", "aten.cat"} & predicted
    assert not whole(fp.bounds_of(results["where"])).all()
    assert not whole(fp.bounds_of(results["cat"])).all()
    assert not whole(fp.bounds_of(results["bounded"])).any()


def test_skipping_bounded_operands_changes_no_enclosure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The enclosures with every operand read (the skip turned off) and with the skip."""
    with fp.track():
        fast = {name: fp.bounds_of(t) for name, t in program().items()}
    monkeypatch.setattr(nan, "_may_be_unbounded", lambda ctx, t: True)
    with fp.track():
        slow = {name: fp.bounds_of(t) for name, t in program().items()}
    for name, bounds in fast.items():
        other = slow[name]
        assert bounds is not None
        assert other is not None
        assert np.array_equal(bounds.lo, other.lo), name
        assert np.array_equal(bounds.hi, other.hi), name


def test_the_whole_line_shortcut_changes_no_enclosure() -> None:
    """Not strict, the tracker skips the rule of an operation whose every output element may
    depend on a possibly-NaN operand; the enclosures are those of the rule and propagation
    (strict runs every rule)."""
    ends = {}
    for strict in (False, True):
        with fp.track(strict=strict):
            results = program()
        ends[strict] = {
            name: (bounds.lo.copy(), bounds.hi.copy())
            for name, value in results.items()
            if (bounds := fp.bounds_of(value)) is not None
        }
    assert ends[False].keys() == ends[True].keys()
    for name, (lo, hi) in ends[False].items():
        np.testing.assert_array_equal(lo, ends[True][name][0])
        np.testing.assert_array_equal(hi, ends[True][name][1])
