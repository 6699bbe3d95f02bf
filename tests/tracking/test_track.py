"""fp.track and friends: storage-level bounds, staleness, views, in-place updates, seeding,
nesting, threads, modes and the errors of each entry point."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")


def test_inputs_are_exact_and_results_are_enclosed() -> None:
    x = torch.tensor([1.0, 3.0], dtype=torch.float16)
    assert fp.bounds_of(x) is None
    with fp.track():
        y = x / 3
    bounds = fp.bounds_of(y)
    assert bounds.contains(y).all()
    assert bounds.contains(np.array([1 / 3, 1.0])).all()
    assert (bounds.radius > 0).all()
    assert bounds.format.name == "float16"
    assert bounds.dtype == torch.float16


def test_modifying_a_tracked_tensor_outside_tracking_makes_its_bounds_stale() -> None:
    x = torch.ones(3)
    with fp.track():
        y = x / 3
    y.add_(1)  # outside tracking
    message = (
        "a tensor of shape (3,) and dtype torch.float32 was modified in place after its bounds "
        "were recorded (version 0 -> 1), outside tracking; its bounds no longer hold. Recompute "
        "it inside fp.track(), or make the in-place change inside the tracked region."
    )
    with pytest.raises(fp.StaleBoundsError, match=re.escape(message)):
        fp.bounds_of(y)
    with fp.track():
        z = y * 2  # inside tracking, a tensor changed outside it is an input again
    assert fp.bounds_of(z).radius.max() == 0
    assert any(
        "was modified outside tracking after its bounds were recorded" in n
        for n in fp.bounds_of(z).notes
    )


def test_views_share_bounds_and_in_place_writes_inside_tracking_update_them() -> None:
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with fp.track():
        y = x / 7
        column = y[:, 1]
        transposed = y.t()
        column.mul_(3)  # through a view
    y_bounds, t_bounds = fp.bounds_of(y), fp.bounds_of(transposed)
    assert y_bounds.contains(y).all()
    assert np.array_equal(t_bounds.lo, y_bounds.lo.T)
    exact = np.arange(6.0).reshape(2, 3) / 7
    exact[:, 1] *= 3
    assert y_bounds.contains(exact).all()


def test_operation_without_a_rule_is_never_silently_skipped() -> None:
    x = torch.randn(8)
    with (
        pytest.raises(
            fp.UnsupportedOperation,
            match=re.escape(
                "no interval rule for operation 'prims.lgamma.default' at test_track.py:"
            ),
        ) as info,
        fp.track(strict=True),
    ):
        torch.lgamma(x)
    assert "register one with pytest_fpcheck.interval.register_rule(op_name, rule)" in str(
        info.value
    )


def test_register_rule_validates_and_refuses_duplicates() -> None:
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "name='add' (type str) is not valid: expected an operator name like 'aten.add' or 'aten.add.Tensor'."
        ),
    ):
        fp.interval.register_rule("add", lambda ctx: None)
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "name='aten.add' (type str) is not valid: expected an operation without a rule. Pass replace=True to override it."
        ),
    ):
        fp.interval.register_rule("aten.add", lambda ctx: None)
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "rule=3 (type int) is not valid: expected a callable taking the rule context."
        ),
    ):
        fp.interval.register_rule("aten.something_new", 3)
    assert "aten.mm" in fp.interval.registered()


def test_a_registered_rule_is_used() -> None:
    def rule(ctx):  # the real FFT is not round-off free; this rule claims an absurd width
        out = ctx.outputs[0]
        return fp.interval.Interval(
            np.full(tuple(out.shape), -np.inf), np.full(tuple(out.shape), np.inf)
        )

    fp.interval.register_rule("aten.frac", rule)
    with fp.track():
        y = torch.frac(torch.tensor([1.5, 2.25]))
    assert np.isneginf(fp.bounds_of(y).lo).all()


def test_roundoff_bounds_returns_the_structure_of_the_result() -> None:
    x = torch.tensor([1.0, 2.0])
    bounds = fp.roundoff_bounds(lambda v: {"a": v / 3, "b": (v * 2, v.sqrt())}, x)
    assert isinstance(bounds["a"], fp.Bounds)
    assert isinstance(bounds["b"][0], fp.Bounds)
    assert bounds["b"][0].notes == ()  # exact products are still recorded
    with pytest.raises(fp.InvalidArgument, match=re.escape("fn=<function")):
        fp.roundoff_bounds(lambda: 3)
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape("fn=3 (type int) is not valid: expected a callable returning tensors."),
    ):
        fp.roundoff_bounds(3)


def test_roundoff_bounds_of_an_untouched_input_is_a_point() -> None:
    x = torch.tensor([1.0, 2.0])
    bounds = fp.roundoff_bounds(lambda: x)
    assert np.array_equal(bounds.lo, bounds.hi)
    assert bounds.notes == ("exact: no rounding produced it",)


def test_track_validates_its_arguments() -> None:
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "mode='fast' (type str) is not valid: expected one of 'rigorous', 'probabilistic', 'a_posteriori'."
        ),
    ):
        fp.track(mode="fast")
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "order=3 (type int) is not valid: expected a SummationTree from fp.reveal_order (or None)."
        ),
    ):
        fp.track(order=3)
    x = torch.ones(2)
    with pytest.raises(
        fp.InvalidArgument, match=re.escape("is not valid: expected a Bounds (e.g. from fp.hull).")
    ):
        fp.track(assume={x: (0, 1)})
    with pytest.raises(fp.InvalidArgument, match=re.escape("expected Bounds of shape (2,).")):
        fp.track(assume={x: fp.hull(np.ones(3), np.zeros(3))})


def test_layer_level_analysis_seeds_with_the_hull() -> None:
    custom = torch.tensor([1.0, 2.0, 3.0])
    reference = torch.tensor([1.001, 1.999, 3.0])
    seed = fp.hull(custom, reference)
    assert np.array_equal(seed.lo, np.minimum(custom.double().numpy(), reference.double().numpy()))
    assert np.array_equal(seed.hi, np.maximum(custom.double().numpy(), reference.double().numpy()))
    with fp.track(assume={custom: seed}):
        out = custom * 2
    assert fp.bounds_of(out).contains(reference.double() * 2).all()
    assert "seeded by track(assume=...)" in fp.bounds_of(out).notes
    with pytest.raises(
        fp.InvalidArgument, match=re.escape("expected an array of shape (3,), like a.")
    ):
        fp.hull(custom, torch.ones(2))


def test_probabilistic_mode_is_tighter_for_long_sums() -> None:
    x = torch.rand(100_000)
    with fp.track():
        rigorous = x.sum()
    with fp.track(mode="probabilistic"):
        probable = x.sum()
    assert fp.bounds_of(probable).mode == "probabilistic"
    assert float(fp.bounds_of(probable).radius) < float(fp.bounds_of(rigorous).radius) / 10
    assert fp.bounds_of(probable).contains(x.double().sum()).all()


def test_nested_trackers_innermost_settings_apply() -> None:
    x = torch.rand(50_000)
    with fp.track():
        with fp.track(mode="probabilistic"):
            inner = x.sum()
        outer = x.sum()
    assert fp.bounds_of(inner).mode == "probabilistic"
    assert fp.bounds_of(outer).mode == "rigorous"


def test_tracking_is_per_thread() -> None:
    seen = {}

    def other_thread() -> None:
        seen["y"] = torch.ones(3) / 3

    with fp.track():
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        mine = torch.ones(3) / 3
    assert fp.bounds_of(seen["y"]) is None
    assert fp.bounds_of(mine) is not None


def test_nothing_is_recorded_outside_the_context() -> None:
    with fp.track():
        pass
    assert fp.bounds_of(torch.ones(2) / 3) is None


def test_comparisons_near_ties_give_the_hull_of_both_branches() -> None:
    a = torch.tensor([1.0, 5.0])
    with fp.track():
        b = a / 3 * 3  # [1, 5] up to round-off: the comparison with 1 and 5 is undecided
        chosen = torch.where(b > a, torch.zeros(2), torch.ones(2) * 7)
        top = torch.maximum(b, a)
    bounds = fp.bounds_of(chosen)
    assert bounds.lo.tolist() == [0.0, 0.0]
    assert bounds.hi.tolist() == [7.0, 7.0]
    assert fp.bounds_of(top).contains(a).all()


def test_devices_must_match() -> None:
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape(
            "expected a tensor on cpu, the device of actual. Move one of them (e.g. expected.to(actual.device))."
        ),
    ):
        fp.classify(torch.ones(2), torch.ones(2, device="meta"))


def test_a_revealed_order_tightens_a_long_sum_and_stays_sound() -> None:
    n = 4096
    tree = fp.reveal_order(fp.order.sum_of(torch.sum), n, dtype="float32")
    x = torch.rand(n)
    with fp.track():
        generic = x.sum()
    with fp.track(order=tree):
        ordered = x.sum()
    generic_radius = float(fp.bounds_of(generic).radius)
    ordered_radius = float(fp.bounds_of(ordered).radius)
    assert ordered_radius < generic_radius / 4
    assert fp.bounds_of(ordered).contains(x.double().sum()).all()
    assert fp.bounds_of(ordered).contains(ordered).all()


def test_views_with_their_own_version_counter_keep_their_bounds() -> None:
    # unsafe_split's views (ATen's LSTM and GRU cells make them) have a version counter of
    # their own, which tracking's in-place write through their base does not move: their
    # bounds used to be called stale and their values taken as exact, so the enclosure of
    # what followed missed the exact result
    torch.manual_seed(0)
    x, y = torch.randn(4, 10), torch.randn(4, 10)
    with fp.track(strict=True):
        a = x.half() * 3
        a.add_(y.half() * 3)
        parts = [p.sigmoid_() for p in a.unsafe_split(5, 1)]
        b = parts[0] * 1
    bounds = fp.bounds_of(b)
    assert bounds.notes == ()
    exact = torch.sigmoid((x.double() * 3 + y.double() * 3)[:, :5]).numpy()
    assert bounds.contains(exact).all()
    assert (bounds.radius > 0).any()


def test_a_recurrent_cell_keeps_its_enclosure() -> None:
    torch.manual_seed(0)
    cell = torch.nn.GRU(6, 5, batch_first=True)
    x = torch.randn(2, 3, 6)
    with fp.track(strict=True):
        out, _ = cell(x)
    bounds = fp.bounds_of(out)
    assert not any("modified outside tracking" in note for note in bounds.notes)
    with torch.no_grad():
        reference, _ = cell.double()(x.double())
    assert bounds.contains(reference).all()
