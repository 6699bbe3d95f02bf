"""The tracker's promise (issue 17): it observes and never changes what the program does.

* an operation without a rule, or a failure inside the tracker, never raises (unless
  ``strict=True``): what it produced has no bounds (the whole line), a verdict on it or on
  anything computed from it is "inconclusive" naming the operation, and it is a counted gap;
* integer and boolean work on exact operands needs no rule;
* NaN propagates by the operation's dependence structure, without running anything again;
* tracked runs compute bit for bit what plain runs compute and leave the random stream where
  a plain run leaves it (a property test over the soundness programs and small models).
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")

from pytest_fpcheck.tracking.core import gaps  # noqa: E402

from .programs import programs, run_torch  # noqa: E402


@torch.library.custom_op("fpcheck_promise::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    """An operation no rule will ever cover (a custom op of this test module)."""
    return x + 0.5


@torch.library.custom_op("fpcheck_promise::broken", mutates_args=())
def broken(x: torch.Tensor) -> torch.Tensor:
    """An operation whose rule (registered below) fails: an internal failure."""
    return x * 3.0


@torch.library.custom_op("fpcheck_promise::halve_", mutates_args=("x",))
def halve_(x: torch.Tensor) -> None:
    """An in-place operation that returns nothing (as the fused optimizers do) and has no rule."""
    x.mul_(0.5)


def _broken_rule(ctx):
    raise ZeroDivisionError("a rule that divides by zero")


fp.interval.register_rule("fpcheck_promise.broken", _broken_rule, replace=True)


def whole_line(bounds: fp.Bounds) -> np.ndarray:
    return np.isneginf(bounds.lo) & np.isposinf(bounds.hi)


def test_an_operation_without_a_rule_is_a_gap_not_an_error() -> None:
    x = torch.linspace(-1, 1, 6)
    plain = shift(x) * 2 + 1
    with fp.track() as tracker:
        y = shift(x)  # first line
        z = y * 2 + 1
        shift(x)
    assert torch.equal(z, plain)
    for t in (y, z):
        bounds = fp.bounds_of(t)
        assert whole_line(bounds).all()
        assert any("fpcheck_promise.shift.default has no interval rule" in n for n in bounds.notes)
        assert "fpcheck_promise.shift at test_promise.py:" in bounds.provenance.describe()
    verdict = fp.classify(z, plain.double() + 1e-9)
    assert verdict.kind == "inconclusive"
    assert "fpcheck_promise.shift.default has no interval rule" in verdict.report()
    (gap,) = tracker.gaps.values()
    assert (gap.op, gap.reason, gap.count) == ("fpcheck_promise.shift.default", gaps.NO_RULE, 2)
    assert gap.source is not None
    assert gap.source[0] == __file__
    assert gap.site.startswith("fpcheck_promise.shift at test_promise.py:")
    assert "no interval rule for operation 'fpcheck_promise.shift.default'" in gap.message
    record = gap.to_dict()
    assert record["count"] == 2
    assert record["line"] == gap.source[1]
    assert "traceback" not in record


def test_strict_tracking_raises_as_before() -> None:
    x = torch.ones(3)
    with (
        pytest.raises(
            fp.UnsupportedOperation,
            match=re.escape("no interval rule for operation 'fpcheck_promise.shift.default'"),
        ),
        fp.track(strict=True),
    ):
        shift(x)
    with (
        pytest.raises(ZeroDivisionError, match="a rule that divides by zero"),
        fp.track(strict=True),
    ):
        broken(x)
    with pytest.raises(
        fp.InvalidArgument,
        match=re.escape("strict='yes' (type str) is not valid: expected True or False."),
    ):
        fp.track(strict="yes")


def test_an_operation_that_returns_nothing_but_writes_is_a_gap_on_what_it_wrote() -> None:
    x = torch.linspace(-1, 1, 6)
    with fp.track() as tracker:
        y = x * 3  # tracked, with a narrow enclosure
        halve_(y)
    bounds = fp.bounds_of(y)
    assert whole_line(bounds).all()  # never the bounds of what y held before
    (gap,) = tracker.gaps.values()
    assert gap.op == "fpcheck_promise.halve_.default"
    with (
        pytest.raises(
            fp.UnsupportedOperation,
            match=re.escape("no interval rule for operation 'fpcheck_promise.halve_.default'"),
        ),
        fp.track(strict=True),
    ):
        halve_(x * 3)


def test_an_internal_failure_is_a_gap_with_its_traceback() -> None:
    x = torch.tensor([1.0, 2.0])
    with fp.track() as tracker:
        y = broken(x)
    assert torch.equal(y, torch.tensor([3.0, 6.0]))
    assert whole_line(fp.bounds_of(y)).all()
    (gap,) = tracker.gaps.values()
    assert gap.reason == gaps.INTERNAL_FAILURE
    assert gap.message == "ZeroDivisionError: a rule that divides by zero"
    assert "Traceback" in gap.traceback
    assert "_broken_rule" in gap.traceback
    assert "could not be bounded" in fp.bounds_of(y).notes[0]


def test_the_programs_own_error_reaches_it_unchanged() -> None:
    with pytest.raises(RuntimeError, match="cannot be multiplied"), fp.track() as tracker:
        torch.mm(torch.ones(2, 3), torch.ones(2, 3))
    assert tracker.gaps == {}


def test_gaps_reach_the_collectors_once_per_block() -> None:
    x = torch.ones(2)
    with gaps.collecting() as collected:
        with fp.track():
            shift(x)
            shift(x)
        with fp.track():
            broken(x)
    assert [(g.op, g.count) for g in collected] == [
        ("fpcheck_promise.shift.default", 2),
        ("fpcheck_promise.broken.default", 1),
    ]
    merged: dict = {}
    gaps.merge(merged, collected + collected)
    assert [g.count for g in merged.values()] == [4, 2]


def test_integer_and_boolean_work_needs_no_rule() -> None:
    with fp.track(strict=True) as tracker:
        powers = 2 ** torch.arange(6)
        folded = torch.arange(10).cumsum(0) % 3
        doubled = torch.tensor([1, 2, 3]) * 2
        mask = (torch.arange(4) % 2).bool() & torch.tensor([True, True, False, True])
    assert powers.tolist() == [1, 2, 4, 8, 16, 32]
    assert folded.tolist() == (torch.arange(10).cumsum(0) % 3).tolist()
    assert fp.bounds_of(doubled) is None  # integers have no round-off bounds
    assert fp.bounds_of(mask) is None
    assert tracker.gaps == {}


def _partly_unbounded(values: torch.Tensor, where: np.ndarray) -> fp.Bounds:
    v = values.double().numpy()
    return fp.Bounds(
        np.where(where, -np.inf, v),
        np.where(where, np.inf, v),
        v,
        values.dtype,
        fp.formats.FORMATS["float32"],
    )


def test_a_possible_nan_reaches_exactly_what_depends_on_it() -> None:
    x = torch.arange(12.0).reshape(3, 4) - 5
    where = np.zeros((3, 4), dtype=bool)
    where[1, 2] = True
    w = torch.ones(4, 2)
    with fp.track(assume={x: _partly_unbounded(x, where)}):
        relu = torch.relu(x)
        rows = x.sum(dim=1)
        columns = x.amax(dim=0)
        soft = torch.softmax(x, dim=-1)
        product = x @ w
        left = (w.t() @ x.t()).t()
        moved = torch.cat([x, x[:1]])
        total = x.max()
    assert np.array_equal(whole_line(fp.bounds_of(relu)), where)
    assert whole_line(fp.bounds_of(rows)).tolist() == [False, True, False]
    assert whole_line(fp.bounds_of(columns)).tolist() == [False, False, True, False]
    assert np.array_equal(
        whole_line(fp.bounds_of(soft)), np.repeat(where.any(1, keepdims=True), 4, 1)
    )
    assert whole_line(fp.bounds_of(product)).tolist() == [
        [False, False],
        [True, True],
        [False, False],
    ]
    assert whole_line(fp.bounds_of(left)).tolist() == [[False, False], [True, True], [False, False]]
    assert np.array_equal(whole_line(fp.bounds_of(moved)), np.concatenate([where, where[:1]]))
    assert whole_line(fp.bounds_of(total)).item()


def test_nan_propagation_runs_nothing_again() -> None:
    """A standard deviation whose bounds are the whole line (from a gap) used to be re-run as
    NaN by aten.normal (RuntimeError: normal expects all elements of std >= 0.0), moving the
    random stream too."""
    torch.manual_seed(3)
    std = shift(torch.ones(4))
    plain = torch.normal(torch.zeros(4), std)
    torch.manual_seed(3)
    with fp.track():
        std = shift(torch.ones(4))
        tracked = torch.normal(torch.zeros(4), std)
        dropped = torch.nn.functional.dropout(std, 0.5)
    torch.manual_seed(3)
    torch.normal(torch.zeros(4), shift(torch.ones(4)))
    expected_dropped = torch.nn.functional.dropout(shift(torch.ones(4)), 0.5)
    assert torch.equal(tracked, plain)
    assert torch.equal(dropped, expected_dropped)
    assert whole_line(fp.bounds_of(dropped)).all()


# -- the property: tracked runs are plain runs ------------------------------------------------


def _same(a, b) -> bool:
    return torch.equal(a, b) or bool(((a == b) | (a.isnan() & b.isnan())).all())


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_tracked_programs_compute_what_plain_ones_compute(program) -> None:
    torch.manual_seed(0)
    plain = run_torch(program)
    state = torch.get_rng_state()
    torch.manual_seed(0)
    with fp.track():
        tracked = run_torch(program)
    assert _same(tracked, plain)
    assert torch.equal(torch.get_rng_state(), state)


#: binary operations with a Python number, as a program writes them (the number wrapped as
#: ATen wraps it) and as ATen's own loops call them (the foreach kernels: ``mul_.Scalar``,
#: which takes the number in the tensor's format where ``x * s`` takes it in float32)
_WITH_NUMBERS = {
    "x * s": lambda x, s: x * s,
    "s * x": lambda x, s: s * x,
    "x + s": lambda x, s: x + s,
    "x - s": lambda x, s: x - s,
    "s - x": lambda x, s: s - x,
    "x / s": lambda x, s: x / s,
    "x.mul_(s)": lambda x, s: x.clone().mul_(s),
    "x.add_(s)": lambda x, s: x.clone().add_(s),
    "x.div_(s)": lambda x, s: x.clone().div_(s),
    "mul_.Scalar": lambda x, s: torch.ops.aten.mul_.Scalar(x.clone(), s),
    **{
        f"_foreach_{name}_": lambda x, s, name=name: _foreach(name, x, s)
        for name in ("add", "sub", "mul", "div")
    },
    "_foreach_mul_ list": lambda x, s: _foreach("mul", x, [s, -s]),
}


def _foreach(name: str, x: torch.Tensor, s: float | list[float]) -> torch.Tensor:
    values = [x.clone(), (2 * x).clone()]
    getattr(torch, f"_foreach_{name}_")(values, s)
    return torch.stack(values)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
    st.sampled_from([(), (1,), (5,)]),
    st.sampled_from(list(_WITH_NUMBERS)),
    st.lists(st.floats(-1e5, 1e5, width=32), min_size=5, max_size=5),
    st.one_of(st.floats(-10, 10), st.floats(allow_nan=False), st.integers(-300, 300)),
)
def test_tracked_numbers_times_tensors_compute_what_plain_ones_compute(
    dtype, shape, operation, values, number
) -> None:
    """A 0-d or n-d half, bfloat16 or float tensor with a Python number: bit for bit."""
    x = torch.tensor(values[: int(np.prod(shape))], dtype=torch.float32).reshape(shape).to(dtype)
    program = _WITH_NUMBERS[operation]
    with np.errstate(all="ignore"):
        plain = program(x, number)
        with fp.track():
            tracked = program(x, number)
    assert tracked.dtype == plain.dtype
    assert _same(tracked, plain), (x, number)


class _Block(torch.nn.Module):
    """A nanoGPT-like block with randomness inside: dropout on the attention weights and the
    output, a noise term drawn with randn, a random scale drawn with normal."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln_2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * d**-0.5
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        weights = self.drop(torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1))
        x = x + self.proj((weights @ v).transpose(1, 2).reshape(b, t, c))
        x = x + 0.01 * torch.randn_like(x)
        scale = torch.normal(torch.ones(c), 0.1 * torch.ones(c))
        return x + self.drop(self.mlp(self.ln_2(x))) * scale


class _HalfAttention(torch.nn.Module):
    """Grouped-query causal attention through ``F.scaled_dot_product_attention`` in a half
    format (the fused CPU kernel, which tracking runs itself), with dropout around it."""

    def __init__(self, dtype: torch.dtype, width: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.q = torch.nn.Linear(width, width, dtype=dtype)
        self.kv = torch.nn.Linear(width, width, dtype=dtype)
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d = c // self.heads
        x = self.drop(x.to(self.q.weight.dtype))
        q = self.q(x).view(b, t, self.heads, d).transpose(1, 2)
        k, v = (
            z.view(b, t, self.heads // 2, d).transpose(1, 2) for z in self.kv(x).split(c // 2, -1)
        )
        y = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True
        )
        return self.drop(y.transpose(1, 2).reshape(b, t, c)).float()


class _Compiled(torch.nn.Module):
    """A block whose middle is ``torch.compile``'d with ``fullgraph=True`` (and dropout inside
    the compiled graph): compiled inside the tracked block, it runs without the modes."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(12, 16)
        self.middle = torch.compile(
            torch.nn.Sequential(torch.nn.GELU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 16)),
            fullgraph=True,
            backend="aot_eager",
        )
        self.last = torch.nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(torch.relu(self.middle(self.first(x)))) + 0.01 * torch.randn(5)


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(32, 5)
    )


@pytest.mark.parametrize(
    ("build", "shape"),
    [
        (_Block, (2, 5, 16)),
        (_mlp, (7, 12)),
        (functools.partial(_HalfAttention, torch.bfloat16), (2, 6, 16)),
        (functools.partial(_HalfAttention, torch.float16), (2, 6, 16)),
        (_Compiled, (7, 12)),
    ],
    ids=["block", "mlp", "sdpa-bfloat16", "sdpa-float16", "compiled"],
)
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_tracked_models_compute_what_plain_ones_compute(build, shape, backward) -> None:
    def run() -> tuple[torch.Tensor, ...]:
        torch._dynamo.reset()  # a compiled graph is compiled again, inside the block
        torch.manual_seed(1)
        model = build().train()
        x = torch.randn(*shape)
        out = model(x)
        if not backward:
            return (out,)
        out.square().mean().backward()
        return (out, *(p.grad for p in model.parameters()))

    plain = run()
    state = torch.get_rng_state()
    with fp.track():
        tracked = run()
    assert all(_same(a, b) for a, b in zip(tracked, plain, strict=True))
    assert torch.equal(torch.get_rng_state(), state)
