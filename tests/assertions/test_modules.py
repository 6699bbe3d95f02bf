"""Module-by-module checks (issue 20, part 2; API section 9; RENDER section III-C): the mechanics
on small hand-written models, the message pinned whole, the arguments named."""

from __future__ import annotations

import re

import pytest

import pytest_fpcheck as fp
from pytest_fpcheck.assertions.record import collecting

from .models import plant_relative_error

torch = pytest.importorskip("torch")
nn = torch.nn

BF16 = torch.bfloat16


class Residual(nn.Module):
    """Glue around two children: a Linear called twice (two calls of one path) and a GELU."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor, *, gate: torch.Tensor | None = None) -> torch.Tensor:
        h = self.act(self.fc(x))
        if gate is not None:
            h = h * gate
        return x + self.fc(h)


class Pair(nn.Module):
    """Returns a tuple and a dict with a float, an integer tensor and a non-tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Residual()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, object]]:
        y = self.inner(x, gate=torch.sigmoid(x))
        return y, {"sum": y.sum(-1), "argmax": y.argmax(-1), "name": "pair"}


def inputs(dtype: torch.dtype = BF16) -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(0)).to(dtype)


def model(seed: int = 0, dtype: torch.dtype = BF16) -> Pair:
    torch.manual_seed(seed)
    return Pair().to(dtype).eval()


def test_every_call_in_execution_order_with_kwargs_tuples_and_repeated_paths() -> None:
    comparison = fp.compare_modules(model(), torch.float64, inputs())
    assert [(c.name, c.module_class, c.depth, c.leaf) for c in comparison.calls] == [
        ("<root>", "Pair", 0, False),
        ("inner", "Residual", 1, False),
        ("inner.fc", "Linear", 2, True),
        ("inner.act", "GELU", 2, True),
        ("inner.fc#2", "Linear", 2, True),
    ]
    assert comparison.kind == "roundoff"
    assert comparison.first_bug is None
    assert comparison.passed
    root, inner = comparison.calls[0], comparison.calls[1]
    # the root is judged on what it hands to inner (x, and the keyword gate) and on its
    # floating outputs; the integer argmax and the string are not judged
    assert [label for label, _ in root.verdicts] == [
        "input of inner: args[0]",
        "input of inner: kwargs['gate']",
        "output[0]",
        "output[1]['sum']",
    ]
    assert [label for label, _ in inner.verdicts] == [
        "input of inner.fc: args[0]",
        "input of inner.act: args[0]",
        "input of inner.fc: args[0]",
        "output",
    ]
    assert all(call.resolution is not None and call.resolution < 0.1 for call in comparison.calls)


def test_a_bug_in_the_second_call_of_a_module_is_found_there() -> None:
    custom = model()
    reference = model().double()
    reference.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    fc = custom.inner.fc
    calls = {"n": 0}
    forward = type(fc).forward

    def second_call_wrong(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        out = forward(fc, x)
        return out * 1.25 if calls["n"] == 2 else out

    fc.forward = second_call_wrong
    comparison = fp.compare_modules(custom, reference, inputs())
    assert [c.kind for c in comparison.calls] == [
        "roundoff",
        "roundoff",
        "roundoff",
        "roundoff",
        "bug",
    ]
    assert comparison.first_bug is comparison.calls[4]
    assert comparison.first_bug.name == "inner.fc#2"


def test_the_first_bug_is_innermost_when_not_isolated() -> None:
    custom = model()
    reference = model().double()
    reference.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    plant_relative_error(custom, "inner.act", 0.25)
    isolated = fp.compare_modules(custom, reference, inputs())
    # isolated, each call is judged on its own code: inner's inputs to the second fc come
    # from the reference's GELU output, so only the GELU is wrong
    assert [c.name for c in isolated.bugs] == ["inner.act"]
    # isolated: inner's own code is judged on the inputs it hands its children, and the
    # input it hands the second fc call comes from the wrong GELU only through the reference's
    # answer; what is wrong is the GELU alone
    assert isolated.first_bug is not None
    assert isolated.first_bug.path == "inner.act"
    whole = fp.compare_modules(custom, reference, inputs(), isolate=False)
    # whole subtrees: every call that contains the GELU is a bug, the GELU first among the
    # innermost
    assert {c.name for c in whole.bugs} == {"<root>", "inner", "inner.act"}
    assert whole.first_bug is not None
    assert whole.first_bug.path == "inner.act"


def test_leaves_only() -> None:
    comparison = fp.compare_modules(model(), torch.float64, inputs(), leaves_only=True)
    assert [c.name for c in comparison.calls] == ["inner.fc", "inner.act", "inner.fc#2"]
    assert comparison.leaves_only


def test_report_layout_is_pinned() -> None:
    custom = model()
    reference = model().double()
    reference.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    plant_relative_error(custom, "inner.act", 0.25)
    with pytest.raises(fp.RoundoffMismatch) as info:
        fp.assert_modules_roundoff_close(custom, reference, inputs())
    lines = str(info.value).splitlines()
    site = r"test_modules\.py:\d+"
    # resolutions of a posteriori enclosures (the exact result's, joined to the computed
    # value): what widens a leaf most is often the cast of its inputs to the module's format
    expected = [
        re.escape(
            "fpcheck modules 'bug': Type-II (bug) in inner.act (GELU): the difference is more "
            "than round-off can explain."
        ),
        re.escape(
            "5 module calls judged against Pair (reference) (each on the reference's inputs, the "
            "modules it calls answered by the reference): 1 bug, 4 roundoff"
        ),
        "call  module          class     verdict   outside  resolution  widest operation",
        rf"   0  <root>          Pair      roundoff  0 / 100  0\.00356     aten\.sum at {site}",
        rf"   1    inner         Residual  roundoff  0 / 128  0\.00329     aten\._to_copy at {site}",
        rf"   2      inner\.fc    Linear    roundoff  0 / 32   0\.00129     aten\.addmm at {site}",
        rf"   3      inner\.act   GELU      bug       32 / 32  0\.00233     aten\._to_copy at {site}",
        rf"   4      inner\.fc#2  Linear    roundoff  0 / 32   0\.0025      aten\._to_copy at {site}",
        "first bug: inner.act",
        "  output:",
        re.escape(
            "    fpcheck verdict 'bug': Type-II (bug): the difference is more than round-off can "
            "explain."
        ),
        re.escape("    32 / 32 (100%) expected elements outside the round-off enclosure of actual"),
    ]
    assert len(lines) == 24
    for pattern, line in zip(expected, lines, strict=False):
        assert re.fullmatch(pattern, line), (pattern, line)
    assert info.value.verdict.first_bug.path == "inner.act"


def test_the_comparison_goes_to_the_report_sink() -> None:
    with collecting() as collected:
        comparison = fp.compare_modules(model(), torch.float64, inputs())
    assert collected == [comparison]
    record = comparison.to_dict()
    assert (record["kind"], record["first_bug"], record["isolate"]) == ("roundoff", None, True)
    assert [c["name"] for c in record["calls"]] == [c.name for c in comparison.calls]
    assert record["calls"][2]["verdicts"][0]["label"] == "output"
    judged = list(comparison.judged())
    assert {(call.name, label) for call, label, _ in judged} >= {("inner.act", "output")}
    assert {verdict.kind for _, _, verdict in judged} <= {"exact", "roundoff"}


def test_a_call_the_reference_did_not_make_is_a_bug() -> None:
    custom = model()
    reference = model().double()
    reference.load_state_dict({k: v.double() for k, v in custom.state_dict().items()})
    inner = custom.inner
    forward = type(inner).forward

    def extra_call(x: torch.Tensor, *, gate: torch.Tensor | None = None) -> torch.Tensor:
        return forward(inner, inner.act(x), gate=gate)

    inner.forward = extra_call
    comparison = fp.compare_modules(custom, reference, inputs())
    inner_call = comparison.calls[1]
    assert inner_call.kind == "bug"
    assert inner_call.problems[0] == (
        "it called inner.act (GELU) more often than the reference did; that call ran for real"
    )


class Shared(nn.Module):
    """A ReLU and three projections of one hidden state (as attention's query, key and value),
    and, after an in-place change of the state, a fourth projection of it."""

    def __init__(self, relu: nn.Module) -> None:
        super().__init__()
        self.q, self.k, self.v, self.after = (nn.Linear(8, 8) for _ in range(4))
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * 3
        total = self.relu(h) + self.q(h) + self.k(h) + self.v(h)
        h.add_(1)  # written between calls: the next call takes the new values
        return total + self.after(h)


def test_calls_that_shared_a_tensor_share_its_record_and_its_cast() -> None:
    from pytest_fpcheck.assertions.modules.reference import record_calls

    torch.manual_seed(0)
    reference = Shared(nn.ReLU()).double()
    calls = {c.path: c for c in record_calls(reference, (inputs(torch.float64),), {})}
    q, k, v, after = (calls[p].args[0] for p in ("q", "k", "v", "after"))
    assert q is k is v  # one copy of the shared state, as the run shared it
    assert after is not q
    assert torch.equal(after, q + 1)
    # the custom model's ReLU writes into its input (the reference's does not): the replays of
    # the projections after it must still get the state's values, not the ReLU's
    custom = Shared(nn.ReLU(inplace=True)).float()
    custom.load_state_dict({n: t.float() for n, t in reference.state_dict().items()})
    comparison = fp.compare_modules(custom, reference, inputs(torch.float32))
    assert {c.path: c.kind for c in comparison.calls} == {
        "": "roundoff",
        "relu": "roundoff",
        "q": "roundoff",
        "k": "roundoff",
        "v": "roundoff",
        "after": "roundoff",
    }
    assert fp.compare_modules(custom, reference, inputs(torch.float32), leaves_only=True).kind == (
        "roundoff"
    )
    # and a planted error in one of the sharing calls is found there
    plant_relative_error(custom, "k", 1e-3)
    found = fp.compare_modules(custom, reference, inputs(torch.float32), leaves_only=True)
    assert found.first_bug is not None
    assert found.first_bug.path == "k"
    assert [c.path for c in found.bugs] == ["k"]


class Outer(nn.Module):
    """A Linear after a child module given at construction."""

    def __init__(self, child: nn.Module) -> None:
        super().__init__()
        self.child = child
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.child(x))


class Zeta(nn.Module):
    """An operation without an interval rule, on a tracked operand: the tracker refuses it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.zeta(x.abs() + 2, torch.ones_like(x))


def test_an_operation_without_a_rule_leaves_the_call_unjudged_and_inconclusive() -> None:
    torch.manual_seed(0)
    comparison = fp.compare_modules(Outer(Zeta()).float(), torch.float64, inputs(torch.float32))
    assert [c.kind for c in comparison.calls] == ["roundoff", "inconclusive", "roundoff"]
    assert comparison.calls[1].verdicts == ()
    # the operation refused is zeta (aten.special_zeta, or prims.zeta where it decomposes)
    assert re.fullmatch(
        r"not judged: no interval rule for operation '\w+\.(special_)?zeta\.default' at "
        r"test_modules\.py:\d+: register one with .*",
        comparison.calls[1].unjudged,
    )
    assert "  not judged: no interval rule" in comparison.report()
    with pytest.raises(fp.InconclusiveVerdict, match=r"inconclusive from child \(Zeta\)"):
        fp.assert_modules_roundoff_close(
            Outer(Zeta()).float(), torch.float64, inputs(torch.float32)
        )
    accepted = fp.assert_modules_roundoff_close(
        Outer(Zeta()).float(), torch.float64, inputs(torch.float32), accept_inconclusive=True
    )
    assert accepted.kind == "inconclusive"


def test_mask_values_stand_for_the_custom_formats_extremes() -> None:
    class Masked(nn.Module):
        def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return torch.softmax(scores + mask, dim=-1)

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attend = Masked()
            self.fc = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            lowest = torch.finfo(x.dtype).min
            mask = torch.full((8, 8), lowest, dtype=x.dtype).triu(1)
            return self.attend(self.fc(x)[:, :8].repeat(2, 1)[:8], mask)

    torch.manual_seed(0)
    comparison = fp.compare_modules(Outer().to(torch.float16), torch.float64, inputs(torch.float16))
    assert comparison.first_bug is None
    handed = dict(comparison.calls[0].verdicts)
    assert handed["input of attend: args[1]"].kind == "exact"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            ("model", torch.float64),
            {},
            "custom='model' (type str) is not valid: expected an nn.Module (the model under test).",
        ),
        (
            (None, torch.int32),
            {},
            "reference=torch.int32 (type dtype) is not valid: expected an nn.Module or a floating dtype (e.g. torch.float64).",
        ),
        (
            (None, "float64"),
            {},
            "reference='float64' (type str) is not valid: expected an nn.Module with custom's module paths, or a floating dtype (e.g. torch.float64).",
        ),
        (
            (None, None),
            {},
            "is not valid: expected a different module than custom (a float64 copy, or a stock implementation). Pass reference=torch.float64 for a float64 copy of custom.",
        ),
        (
            (None, nn.Sequential(nn.Linear(8, 8)).double()),
            {},
            "is not valid: expected a module with custom's module paths. custom has no module at 0.",
        ),
        (
            (None, torch.float64),
            {"isolate": 1},
            "isolate=1 (type int) is not valid: expected True or False.",
        ),
        (
            (None, torch.float64),
            {"leaves_only": "no"},
            "leaves_only='no' (type str) is not valid: expected True or False.",
        ),
        (
            (None, torch.float64),
            {"max_resolution": 2.0},
            "max_resolution=2.0 (type float) is not valid: expected a relative deviation strictly between 0 and 0.5",
        ),
        (
            (None, torch.float64),
            {"accept_inconclusive": None},
            "accept_inconclusive=None (type NoneType) is not valid: expected True or False.",
        ),
    ],
)
def test_bad_arguments_are_named(args: tuple, kwargs: dict, message: str) -> None:
    custom = model()
    args = tuple(custom if a is None else a for a in args)
    with pytest.raises(fp.InvalidArgument, match=re.escape(message)):
        fp.assert_modules_roundoff_close(*args, inputs(), **kwargs)
