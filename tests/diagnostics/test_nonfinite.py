"""The non-finite watch (GPU-FPX): each kind at its site and line, appearance versus propagation,
flows, scope (thread, block, nesting with fp.track) and the report's layout."""

from __future__ import annotations

import importlib
import inspect
import re
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pytest_fpcheck.diagnostics.nonfinite import Event, Watch, watch_nonfinite  # noqa: E402
from pytest_fpcheck.errors import InvalidArgument  # noqa: E402
from pytest_fpcheck.tracking.track import bounds_of, track  # noqa: E402

HERE = __file__


def line_of(text: str, function: object) -> int:
    """The line number of the first line of ``function`` that contains ``text``."""
    lines, first = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return first + next(i for i, line in enumerate(lines) if text in line)


def only(watch: Watch, kind: str) -> Event:
    (event,) = [e for e in watch.events if e.kind == kind]
    return event


def sqrt_of_negative() -> torch.Tensor:
    x = torch.tensor([4.0, -1.0, 9.0])
    return torch.sqrt(x)  # the NaN appears here


def test_nan_appears_at_its_operation_and_line() -> None:
    with watch_nonfinite() as watch:
        sqrt_of_negative()
    event = only(watch, "nan")
    assert (event.op, event.dtype, event.count, event.calls, event.appeared) == (
        "aten.sqrt",
        "float32",
        1,
        1,
        True,
    )
    assert event.source == (HERE, line_of("appears here", sqrt_of_negative))
    assert watch.appearances() == [event]


def test_inf_appears_at_an_overflowing_exp() -> None:
    x = torch.tensor([1.0, 100.0, 200.0])
    with watch_nonfinite() as watch:
        y = torch.exp(x)
    assert [(e.op, e.kind, e.count, e.appeared) for e in watch.events] == [
        ("aten.exp", "inf", 2, True)
    ]
    assert watch.events[0].source == (
        HERE,
        line_of("y = torch.exp(x)", test_inf_appears_at_an_overflowing_exp),
    )
    assert torch.isinf(y).sum() == 2


@pytest.mark.parametrize(
    ("dtype", "value", "scale"),
    [("float32", 1e-30, 1e-10), ("float16", 1e-3, 1e-3), ("bfloat16", 1e-30, 1e-10)],
)
def test_subnormal_appears_per_the_output_format(dtype: str, value: float, scale: float) -> None:
    x = torch.tensor([value, 1.0], dtype=getattr(torch, dtype))
    with watch_nonfinite() as watch:
        x * scale
    event = only(watch, "subnormal")
    assert (event.op, event.dtype, event.count, event.appeared) == ("aten.mul", dtype, 1, True)


def test_large_tensors_are_scanned_in_every_piece() -> None:
    x = torch.zeros(100_000)  # zeros everywhere: the subnormal test cannot stop at the minimum
    x[70_000], x[90_000] = -1.0, 1e-20
    with watch_nonfinite() as watch:
        torch.sqrt(x)
        x * 1e-20
    assert [(e.op, e.kind, e.count) for e in watch.events] == [
        ("aten.sqrt", "nan", 1),
        ("aten.mul", "subnormal", 1),
    ]


def test_a_cast_to_float8_shows_its_subnormals_and_overflow() -> None:
    x = torch.tensor([0.0, 2.0**-8, 1.0, 1e5])
    with watch_nonfinite() as watch:
        x.to(torch.float8_e4m3fn)  # 2**-8 is below e4m3fn's tiny (2**-6); 1e5 saturates to 448
        x.to(torch.float8_e5m2)  # 2**-8 is normal in e5m2; 1e5 rounds to inf
    assert [(e.op, e.dtype, e.kind, e.count) for e in watch.events] == [
        ("aten._to_copy", "float8_e4m3fn", "subnormal", 1),
        ("aten._to_copy", "float8_e5m2", "inf", 1),
    ]
    assert watch.report_text().count("--- FLOAT8_E4M3FN Operations ---") == 1


def test_subnormal_inputs_make_a_subnormal_output_propagated() -> None:
    x = torch.tensor([1e-40, 1.0])  # a subnormal float32 made outside the watch
    with watch_nonfinite() as watch:
        x * 0.5
    assert only(watch, "subnormal").appeared is False
    assert watch.appearances() == []


def test_division_by_zero_counts_finite_dividends_over_zero() -> None:
    a = torch.tensor([1.0, 0.0, float("inf"), 2.0])
    b = torch.tensor([0.0, 0.0, 0.0, 4.0])
    with watch_nonfinite() as watch:
        a / b
    div0 = only(watch, "div0")
    assert (div0.op, div0.count, div0.appeared) == ("aten.div", 2, True)  # 1/0 and 0/0
    # element by element: 0/0's NaN appeared, beside the Inf input of another element
    assert only(watch, "nan").appeared is True
    assert only(watch, "inf").count == 2


def test_division_by_a_zero_scalar_and_reciprocal_of_zero() -> None:
    x = torch.tensor([1.0, 2.0, 3.0])
    with watch_nonfinite(kinds=("div0",)) as watch:
        x / 0.0
        torch.reciprocal(torch.tensor([0.0, 5.0]))
        x / 2.0
    assert [(e.op, e.count) for e in watch.events] == [("aten.div", 3), ("aten.reciprocal", 1)]


def test_in_place_division_checks_the_dividend_before_it_is_overwritten() -> None:
    x = torch.tensor([1.0, float("nan")])
    with watch_nonfinite() as watch:
        x.div_(torch.tensor([0.0, 0.0]))
    assert only(watch, "div0").count == 1
    assert only(watch, "inf").appeared is False  # the dividend held a NaN


def test_an_in_place_overflow_appears_although_the_tensor_ends_infinite() -> None:
    x = torch.tensor([1.0, 100.0])
    with watch_nonfinite() as watch:
        x.exp_()
    assert [(e.op, e.kind, e.appeared) for e in watch.events] == [("aten.exp_", "inf", True)]


def test_propagated_values_are_not_appearances_and_flow_from_their_origin() -> None:
    x = torch.tensor([0.0, 1.0])
    with watch_nonfinite(kinds=("nan", "inf")) as watch:
        y = torch.log(x)  # -inf appears
        z = y * 2
        w = z - z  # -inf - -inf: NaN carried from log's Inf
        torch.relu(torch.tensor([1.0]))
    log, mul, sub = watch.events
    assert [(e.op, e.kind, e.appeared) for e in watch.events] == [
        ("aten.log", "inf", True),
        ("aten.mul", "inf", False),
        ("aten.sub", "nan", False),
    ]
    assert watch.appearances() == [log]
    assert watch.flow(log) == [log, mul, sub]
    assert mul.origins == {log.key}
    assert torch.isnan(w).sum() == 1


def test_a_nan_hidden_by_where_or_fmax_is_still_caught() -> None:
    x = torch.tensor([-1.0, 4.0])
    with watch_nonfinite() as watch:
        root = torch.sqrt(x)
        hidden = torch.where(torch.isnan(root), torch.zeros_like(root), root)
        fmax = torch.fmax(root, torch.zeros_like(root))
        cleaned = torch.nan_to_num(root)
    assert all(bool(torch.isfinite(t).all()) for t in (hidden, fmax, cleaned))
    (event,) = watch.events
    assert (event.op, event.kind, event.appeared) == ("aten.sqrt", "nan", True)
    assert watch.flow(event) == [event]


def test_fill_with_a_nan_constant_is_where_the_nan_appears() -> None:
    with watch_nonfinite() as watch:
        x = torch.empty(2, 3).fill_(float("nan"))
        x @ torch.ones(3, 2)
    fill, mm = watch.events
    assert (fill.op, fill.appeared, fill.count) == ("aten.fill_", True, 6)
    assert (mm.op, mm.appeared, mm.origins) == ("aten.mm", False, {fill.key})


def test_writes_through_views_keep_the_origin_of_the_rest_of_the_storage() -> None:
    x = torch.zeros(4)
    with watch_nonfinite() as watch:
        x[2:].fill_(float("nan"))
        x[:2].fill_(1.0)  # a clean partial write
        x.add_(1.0)  # in place on a NaN tensor: checked before it runs
        x.sum()
        x.fill_(0.0)  # a clean write of the whole storage ends the flow
        x.sum()
    fill, add, total = watch.events
    assert (fill.op, fill.appeared, fill.count) == ("aten.fill_", True, 2)
    assert [(e.op, e.appeared, e.origins) for e in (add, total)] == [
        ("aten.add_", False, {fill.key}),
        ("aten.sum", False, {fill.key}),
    ]
    assert watch.operations == 6


def test_overwritten_tensors_are_not_inputs() -> None:
    garbage, out = torch.full((3,), float("nan")), torch.full((2,), float("nan"))
    with watch_nonfinite() as watch:
        garbage.fill_(float("inf"))  # the NaN it held is not read
        torch.exp(torch.tensor([1.0, 500.0]), out=out)
        garbage.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert [(e.op, e.kind, e.count, e.appeared) for e in watch.events] == [
        ("aten.fill_", "inf", 3, True),
        ("aten.exp", "inf", 1, True),
    ]


def test_a_site_in_a_loop_is_one_event_with_counts() -> None:
    x = torch.tensor([-1.0, -2.0, 3.0])
    with watch_nonfinite() as watch:
        for _ in range(3):
            torch.sqrt(x)
    (event,) = watch.events
    assert (event.count, event.calls) == (6, 3)


def test_events_name_the_module_path() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LogSigmoid())
    with torch.no_grad():
        model[0].weight.fill_(1e30)
        model[0].bias.zero_()
    with watch_nonfinite() as watch, torch.no_grad():
        model(torch.tensor([[1e10, 1e10]]))
    first = watch.appearances()[0]
    assert (first.kind, first.module_path) == ("inf", "Sequential.0")


def test_non_floating_operations_are_ignored() -> None:
    with watch_nonfinite() as watch:
        i = torch.arange(6)
        (i * 0) // 3
        torch.tensor([True, False]) & torch.tensor([True, True])
    assert watch.events == []
    assert watch.operations == 0


def test_nothing_is_recorded_outside_the_block() -> None:
    x = torch.tensor([-1.0])
    torch.sqrt(x)
    with watch_nonfinite() as watch:
        pass
    torch.sqrt(x)
    assert watch.events == []
    assert watch.operations == 0


def test_the_watch_is_per_thread() -> None:
    seen: list[Watch] = []
    started, finish = threading.Event(), threading.Event()

    def other_thread() -> None:
        with watch_nonfinite() as inner:
            started.set()
            finish.wait(10)
            torch.exp(torch.tensor([500.0]))
        seen.append(inner)

    thread = threading.Thread(target=other_thread)
    thread.start()
    started.wait(10)
    with watch_nonfinite() as watch:
        torch.sqrt(torch.tensor([-1.0]))
        finish.set()
        thread.join(10)
    assert [(e.op, e.kind) for e in watch.events] == [("aten.sqrt", "nan")]
    assert [(e.op, e.kind) for e in seen[0].events] == [("aten.exp", "inf")]


@pytest.mark.parametrize("watch_outside", [True, False])
def test_nests_with_track_both_see_every_operation(watch_outside: bool) -> None:
    x = torch.tensor([1.0, 200.0])
    watch = watch_nonfinite()
    tracker = track()
    outer, inner = (watch, tracker) if watch_outside else (tracker, watch)
    with outer, inner:
        y = torch.exp(x)
    assert [(e.op, e.kind) for e in watch.events] == [("aten.exp", "inf")]
    assert tracker.ops == 1
    assert bounds_of(y) is not None


def test_kinds_limit_what_is_recorded_and_reported() -> None:
    x = torch.tensor([0.0, -1.0])
    with watch_nonfinite(kinds=("inf", "inf")) as watch:
        torch.sqrt(x)
        torch.log(x)
    assert watch.kinds == ("inf",)
    assert [(e.op, e.kind) for e in watch.events] == [("aten.log", "inf")]
    assert "Total NaN found: not watched" in watch.report_text()


def test_kinds_must_be_a_collection_of_known_names() -> None:
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "kinds='nan' (type str) is not valid: expected a collection of kind names from "
            "('nan', 'inf', 'subnormal', 'div0'). Pass a tuple, e.g. kinds=('nan',)."
        ),
    ):
        watch_nonfinite(kinds="nan")
    with pytest.raises(
        InvalidArgument,
        match=re.escape(
            "kinds=('nan', 'overflow') (type tuple) is not valid: expected a non-empty collection "
            "of kind names from ('nan', 'inf', 'subnormal', 'div0')."
        ),
    ):
        watch_nonfinite(kinds=("nan", "overflow"))
    with pytest.raises(InvalidArgument, match=re.escape("kinds=() (type tuple) is not valid")):
        watch_nonfinite(kinds=())


def test_flow_text_needs_an_event_of_this_watch() -> None:
    with watch_nonfinite() as first:
        torch.sqrt(torch.tensor([-1.0]))
    with watch_nonfinite() as second:
        pass
    with pytest.raises(
        InvalidArgument,
        match=re.escape("event=Event(op='aten.sqrt', module_path=''"),
    ):
        second.flow_text(first.events[0])
    with pytest.raises(
        InvalidArgument, match=re.escape("expected an Event from this watch's events.")
    ):
        second.flow_text(first.events[0])


def reciprocal_then_nan() -> None:
    x = torch.tensor([1e-40, 2.0, 0.0])
    r = torch.reciprocal(x)
    r - r


def test_report_layout() -> None:
    with watch_nonfinite() as watch:
        reciprocal_then_nan()
        torch.sqrt(torch.tensor([-1.0], dtype=torch.float64))
    line = line_of("r = torch.reciprocal(x)", reciprocal_then_nan)
    sqrt_line = line_of("torch.sqrt(torch.tensor([-1.0], dtype=torch.float64))", test_report_layout)
    assert watch.report_text() == "\n".join(
        [
            "----- fpcheck non-finite watch report -----",
            "--- FP16 Operations ---",
            "Total NaN found: 0",
            "Total INF found: 0",
            "Total underflow (subnormal): 0",
            "Total Division by 0: 0",
            "--- BF16 Operations ---",
            "Total NaN found: 0",
            "Total INF found: 0",
            "Total underflow (subnormal): 0",
            "Total Division by 0: 0",
            "--- FP32 Operations ---",
            "Total NaN found: 1",
            "Total INF found: 1",
            "Total underflow (subnormal): 0",
            "Total Division by 0: 1",
            "--- FP64 Operations ---",
            "Total NaN found: 1",
            "Total INF found: 0",
            "Total underflow (subnormal): 0",
            "Total Division by 0: 0",
            "--- Other Stats ---",
            "Operations: 3",
            "The total number of exceptions are: 6",
            "--- Appearances (3, first seen first) ---",
            f"1. INF appeared in aten.reciprocal at test_nonfinite.py:{line} [FP32]: 2 values in 1 call",
            f"   {line} | r = torch.reciprocal(x)",
            f"2. division by 0 appeared in aten.reciprocal at test_nonfinite.py:{line} [FP32]: 1 value in 1 call",
            f"   {line} | r = torch.reciprocal(x)",
            f"3. NaN appeared in aten.sqrt at test_nonfinite.py:{sqrt_line} [FP64]: 1 value in 1 call",
            f"   {sqrt_line} | torch.sqrt(torch.tensor([-1.0], dtype=torch.float64))",
        ]
    )
    first = watch.appearances()[0]
    assert watch.flow_text(first) == "\n".join(
        [
            f"Flow of INF appeared in aten.reciprocal at test_nonfinite.py:{line} [FP32]: 2 values in 1 call",
            f"  -> NaN propagated in aten.sub at test_nonfinite.py:{line + 1} [FP32]: 2 values in 1 call",
            f"     {line + 1} | r - r",
        ]
    )


def test_report_prints_to_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    with watch_nonfinite() as watch:
        torch.sqrt(torch.tensor([-1.0]))
    watch.report()
    assert capsys.readouterr().out == watch.report_text() + "\n"


@pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support:UserWarning")
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_sparse_nested_fake_and_meta_tensors_are_observed_without_breaking_anything() -> None:
    """The watch reads a sparse tensor's stored values, and nothing of a nested, meta or fake
    tensor (a hunt: sparse and nested tensors raised inside the watch, so ``pytest --fpcheck``
    failed passing tests; a ``FakeTensorMode`` tensor was read and the process crashed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with watch_nonfinite() as watch:
        coo = torch.sparse_coo_tensor(
            torch.tensor([[0, 1], [1, 0]]), torch.tensor([3.0, 0.0]), (2, 2)
        )
        out = coo @ torch.ones(2, 1)
        csr = torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csr()
        assert (csr @ torch.ones(2, 1)).flatten().tolist() == [2.0, 3.0]
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]) * 2
        assert nested.is_nested
        with FakeTensorMode():
            fake = torch.randn(3, 3)
            assert (fake @ fake).shape == (3, 3)
        meta = torch.empty(3, 4, device="meta") @ torch.empty(4, 2, device="meta")
        assert meta.shape == (3, 2)
        halved = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([3.0]), (2,)) / 0.0
    assert out.flatten().tolist() == [3.0, 0.0]
    kinds = {(event.op, event.kind) for event in watch.appearances()}
    assert ("aten.div", "inf") in kinds  # 3 / 0 in a sparse tensor's stored values
    assert halved.is_sparse


@pytest.mark.parametrize("name", ["numpy_helpers", "triton_ops", "pluggyish"])
def test_a_user_module_named_like_a_library_is_the_users(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module whose name merely starts with ``numpy`` or ``triton`` is the user's (a hunt:
    ``numpy_helpers.py`` and ``triton_ops.py`` were skipped as library frames, and the report
    named the caller's line)."""
    (tmp_path / f"{name}.py").write_text(
        "def normalise(x):\n    total = x.sum()\n    return x / total  # the division\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    with watch_nonfinite() as watch:
        module.normalise(torch.zeros(4))
    sources = {event.source for event in watch.appearances()}
    assert sources == {(str(tmp_path / f"{name}.py"), 3)}


def test_an_element_wise_operation_is_judged_element_by_element() -> None:
    """An INF born by 1 / 0 is an appearance although another element of an input held a NaN,
    and it does not name that NaN as its origin (a hunt: it was "propagated" from it); a NaN
    at the element that held one is propagated, with its origin."""
    with watch_nonfinite() as watch:
        a = torch.log(torch.tensor([-1.0, 1.0]))  # NaN appears at element 0
        b = a + torch.tensor([0.0, 1.0])
        b / torch.tensor([1.0, 0.0])  # element 1: 1 / 0
    log = next(e for e in watch.events if e.op == "aten.log")
    divisions = {e.kind: e for e in watch.events if e.op == "aten.div"}
    assert divisions["inf"].appeared is True
    assert divisions["inf"].origins == set()
    assert divisions["nan"].appeared is False
    assert divisions["nan"].origins == {log.key}
    assert [e.op for e in watch.appearances()] == ["aten.log", "aten.div", "aten.div"]
