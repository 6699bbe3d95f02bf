"""Code the dispatch modes cannot follow runs as in a plain run (issue 17): ``torch.compile``
(``fullgraph=True`` included) compiles inside ``fp.track()`` and ``fp.watch_nonfinite()``, its
graphs run without the modes, and what they produced is a named gap (no bounds; strict tracking
refuses the graph) that the watch examines at the boundary; ``torch.jit.trace`` records the
graph a plain run records; TorchScript's constant scalars reach the modes intact."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

from torch.utils._python_dispatch import _pop_mode_temporarily  # noqa: E402

from pytest_fpcheck.tracking.core import gaps  # noqa: E402


def _layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ w).sum(-1) * 0.5


def _whole_line(bounds: fp.Bounds) -> bool:
    return bool((np.isneginf(bounds.lo) & np.isposinf(bounds.hi)).all())


@pytest.fixture
def operands() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(5, 8, generator=generator), torch.randn(8, 3, generator=generator)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_fullgraph_compile_runs_as_plainly_and_is_a_gap(operands, backend) -> None:
    dynamo.reset()
    compiled = torch.compile(_layer, fullgraph=True, backend=backend)
    plain = compiled(*operands)
    dynamo.reset()
    compiled = torch.compile(_layer, fullgraph=True, backend=backend)
    with fp.watch_nonfinite() as watch, fp.track() as tracker:
        first = compiled(*operands)  # compiles here: "found no compiled frames" before
        second = compiled(*operands)
        after = second + 1
    assert torch.equal(first, plain)
    assert torch.equal(second, plain)
    (gap,) = tracker.gaps.values()
    assert (gap.op, gap.reason, gap.count) == ("torch.compile(_layer)", gaps.COMPILED_REGION, 2)
    assert gap.source is not None
    assert gap.source[0] == __file__
    lines = Path(__file__).read_text().splitlines()
    assert "first = compiled(*operands)" in lines[gap.source[1] - 1]
    for t in (first, after):
        assert _whole_line(fp.bounds_of(t))
    assert "torch.compile(_layer) ran as compiled code" in fp.bounds_of(after).notes[0]
    verdict = fp.classify(after, plain.double() + 1)
    assert verdict.kind == "inconclusive"
    assert watch.operations >= 2  # the region's outputs were examined, and the addition
    assert dynamo.utils.counters["stats"]["unique_graphs"] >= 1


def test_strict_tracking_refuses_a_compiled_graph_before_it_runs(operands) -> None:
    dynamo.reset()
    calls = []

    def counted(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return x * 2

    compiled = torch.compile(counted, fullgraph=True, backend="eager")
    with fp.watch_nonfinite():
        compiled(operands[0])  # compiled inside a block (one of the package's)
    calls.clear()
    with (
        pytest.raises(
            fp.UnsupportedOperation,
            match=re.escape("no interval rule for operation 'torch.compile(counted)' at "),
        ),
        fp.track(strict=True),
    ):
        compiled(operands[0])
    assert calls == []  # refused, not run untracked


def test_what_a_compiled_graph_overwrites_has_no_bounds() -> None:
    dynamo.reset()

    def accumulate(total: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        total.add_(x * 3)
        return x.sum()

    compiled = torch.compile(accumulate, fullgraph=True, backend="aot_eager")
    x = torch.linspace(-1, 1, 4)
    with fp.track() as tracker:
        total = x / 3  # tracked, narrow
        compiled(total, x)
    assert _whole_line(fp.bounds_of(total))
    assert [g.reason for g in tracker.gaps.values()] == [gaps.COMPILED_REGION]


def test_the_watch_sees_a_nan_appear_in_a_compiled_graph() -> None:
    dynamo.reset()
    compiled = torch.compile(lambda x: torch.log(x - 2), fullgraph=True, backend="aot_eager")
    with fp.watch_nonfinite() as watch:
        compiled(torch.ones(3))
    (event,) = watch.appearances()
    assert event.kind == "nan"
    assert event.op == "torch.compile(<lambda>)"
    assert event.count == 3


def test_a_graph_compiled_outside_every_block_still_compiles_inside_one(operands) -> None:
    dynamo.reset()
    compiled = torch.compile(_layer, fullgraph=True, backend="aot_eager")
    plain = compiled(*operands)
    with fp.track(), fp.watch_nonfinite():
        assert torch.equal(compiled(*operands), plain)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
def test_jit_trace_records_what_a_plain_run_records(operands) -> None:
    """Under a dispatch mode the tracer records a wrong graph or fails (pytorch#130726); its
    check then runs the graph with the modes on, handing them wrapped numbers (below)."""
    plain = torch.jit.trace(_layer, operands)
    with fp.watch_nonfinite(), fp.track() as tracker:
        traced = torch.jit.trace(_layer, operands)
        out = traced(*operands)
    assert str(traced.graph) == str(plain.graph)
    assert torch.equal(out, plain(*operands))
    assert tracker.gaps == {}
    assert fp.bounds_of(out) is not None


@pytest.mark.parametrize(
    ("op", "args", "plain"),
    [
        ("_local_scalar_dense.default", (2,), lambda: 2),
        ("view.default", (0.1, [1]), lambda: torch.tensor([0.1], dtype=torch.float64)),
        ("add.Tensor", (1, 2.5), lambda: torch.tensor(3.5, dtype=torch.float64)),
        ("eq.Tensor", (3, 3), lambda: torch.tensor(True)),
    ],
)
def test_a_wrapped_number_reaches_the_modes_as_the_tensor_it_was(op, args, plain) -> None:
    """The TorchScript interpreter (``torch.jit.trace``'s check of what it recorded, above)
    hands a graph's wrapped numbers to Python dispatch as Python numbers, which the
    operation's schema refuses when a mode runs it ("Unable to cast 2 to Tensor")."""
    func = getattr(torch.ops.aten, op.split(".")[0]).__getattr__(op.split(".")[1])
    for mode in (fp.watch_nonfinite(), fp.track(strict=True)):
        with mode, _pop_mode_temporarily():  # as torch calls a mode
            out = mode.__torch_dispatch__(func, (), args, {})
        expected = plain()
        if isinstance(expected, torch.Tensor):
            assert out.dtype == expected.dtype
            assert torch.equal(out, expected)
        else:
            assert out == expected


def test_a_compiled_module_is_called_as_in_a_plain_run() -> None:
    """torch.compile(module) warns when any global module hook is set, as the package's module
    paths are while a block is open; they are set aside while the compiled module runs."""
    dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 3)
    plain = compiled(x)
    dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with fp.watch_nonfinite(), fp.track() as tracker:
            out = compiled(x)
            after = model(x) * 2  # module paths still reach what the modes see
    assert torch.equal(out, plain)
    assert [g.op for g in tracker.gaps.values()] == ["torch.compile(Sequential)"]
    assert "Sequential.0" in fp.bounds_of(after).provenance.describe()
    assert not torch.nn.modules.module._has_any_global_hook()
