"""Behaviour of the instrumented Triton interpreter beyond containment: masks, errors, taint,
provenance, the hand-over to PyTorch, and the scope of the instrumentation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
interpreter = pytest.importorskip("triton.runtime.interpreter")

from pytest_fpcheck.tracking.triton import hooks  # noqa: E402


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, OTHER: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=OTHER)
    tl.store(out_ptr + offsets, x * 3.0)


def test_masked_off_lanes_take_other_exactly_and_loads_read_recorded_bounds() -> None:
    with fp.track():
        x = torch.linspace(0.1, 0.9, 8) / 3  # rounded: x carries bounds
        out = torch.empty(8)
        scale_kernel[(1,)](x, out, 5, OTHER=2.5, BLOCK=8)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert (bounds.lo[5:] == 7.5).all()
    assert (bounds.hi[5:] == 7.5).all()
    assert (bounds.radius[:5] > 0).all()
    assert "scale_kernel" in bounds.provenance.describe()


def test_pytorch_operations_continue_from_a_kernels_bounds() -> None:
    x = torch.rand(8)
    with fp.track():
        out = torch.empty(8)
        scale_kernel[(1,)](x, out, 8, OTHER=0.0, BLOCK=8)
        doubled = (out / 7.0) * 2
    inner, outer = fp.bounds_of(out), fp.bounds_of(doubled)
    assert inner is not None
    assert outer is not None
    assert (outer.radius >= inner.radius * 2 / 7).all()
    assert (outer.radius > 0).all()


def test_a_kernels_output_modified_outside_tracking_is_stale() -> None:
    with fp.track():
        out = torch.empty(8)
        scale_kernel[(1,)](torch.rand(8), out, 8, OTHER=0.0, BLOCK=8)
    out.add_(1.0)
    with pytest.raises(fp.StaleBoundsError, match="modified in place"):
        fp.bounds_of(out)


@triton.jit
def product_reduce_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.reduce(x, 0, _times_plus))


@triton.jit
def _times_plus(a, b):  # type: ignore[no-untyped-def]
    return a * b + a


@triton.jit
def add_reduce_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.reduce(x, 0, _plus))


@triton.jit
def _plus(a, b):  # type: ignore[no-untyped-def]
    return a + b


def test_reduce_with_an_add_combine_is_bounded_like_a_sum() -> None:
    x = torch.rand(16) * 1000
    out = torch.empty(1)
    with fp.track():
        add_reduce_kernel[(1,)](x, out, BLOCK=16)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    exact = float(np.sum(x.double().numpy()))
    assert bounds.lo[0] <= exact <= bounds.hi[0]
    assert bounds.radius[0] > 0


def test_reduce_with_another_combine_raises_naming_it() -> None:
    with fp.track(strict=True), pytest.raises(fp.UnsupportedOperation, match="'_times_plus'"):
        product_reduce_kernel[(1,)](torch.rand(16), torch.empty(1), BLOCK=16)


@triton.jit
def in_place_product_kernel(x_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.store(x_ptr + offsets, x + 1.0)  # written before tracking refuses the reduction
    tl.store(x_ptr + offsets, x + tl.reduce(x, 0, _times_plus))


def test_a_refused_launch_runs_plainly_once_and_what_it_wrote_is_a_gap() -> None:
    """Outside strict mode a launch tracking cannot bound runs as in a plain run (its memory
    restored from before the refused instrumented run, so an in-place kernel is applied once)
    and what it changed has no bounds; what it only read keeps its bounds."""
    torch.manual_seed(0)
    x = torch.rand(16)
    plain = x * (torch.ones(16) / 3)
    in_place_product_kernel[(1,)](plain, BLOCK=16)
    with fp.track() as tracker:
        scale = torch.ones(16) / 3  # read only, tracked
        y = x * scale
        in_place_product_kernel[(1,)](y, BLOCK=16)
        out = torch.empty(1)
        product_reduce_kernel[(1,)](scale, out, BLOCK=16)
    assert torch.equal(y, plain)
    for written in (y, out):
        bounds = fp.bounds_of(written)
        assert np.isneginf(bounds.lo).all()
        assert np.isposinf(bounds.hi).all()
        assert "triton:" in bounds.notes[0]
    assert np.isfinite(fp.bounds_of(scale).hi).all()
    gaps = {g.op: g for g in tracker.gaps.values()}
    assert set(gaps) == {"triton:in_place_product_kernel", "triton:product_reduce_kernel"}
    gap = gaps["triton:in_place_product_kernel"]
    assert (gap.reason, gap.count) == ("no rule", 1)
    assert "'_times_plus'" in gap.message
    assert gap.source is not None
    assert gap.source[0] == __file__


@triton.jit
def argmax_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(out_ptr, tl.argmax(x / 3.0, axis=0))


def test_storing_an_argmax_that_rounding_may_change_raises() -> None:
    x = torch.tensor([1.0, 1 + 2**-23, 0.5, 0.25])  # x / 3 (2 ULP): the top two overlap
    with fp.track(strict=True), pytest.raises(fp.UnsupportedOperation, match="depends on rounding"):
        argmax_kernel[(1,)](x, torch.empty(1, dtype=torch.int32), BLOCK=4)
    decided = torch.tensor([1.0, 4.0, 0.5, 0.25])
    out = torch.empty(1, dtype=torch.int32)
    with fp.track():
        argmax_kernel[(1,)](decided, out, BLOCK=4)
    assert out.item() == 1


@triton.jit
def bf16_add_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))


def test_values_the_interpreter_computes_wrongly_are_refused() -> None:
    """Triton 3.9's interpreter adds bfloat16 bit patterns as integers: what it stores lies
    outside the bounds of real bfloat16 arithmetic, and tracking says so at the launch."""
    x = torch.tensor([0.5, 1.5, 2.0, -1.0], dtype=torch.bfloat16)
    with (
        fp.track(strict=True),
        pytest.raises(fp.UnsupportedOperation, match="computed them wrongly"),
    ):
        bf16_add_kernel[(1,)](x, x, torch.empty_like(x), BLOCK=4)


def test_a_compiled_launch_keeps_its_values_and_takes_bounds_from_an_interpreted_rerun(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No GPU here: a stand-in for the compiled kernel writes x * 3 (rounded as a GPU would),
    invisibly to tracking; the bounds come from re-running the kernel in the interpreter on host
    copies taken before the launch, with the inputs' own bounds."""
    from triton.runtime.jit import JITFunction

    from pytest_fpcheck.adapters.torch import internal

    def compiled_stand_in(self, *args, grid, warmup, **kwargs):  # type: ignore[no-untyped-def]
        x, out = args[0], args[1]
        with internal(), torch.no_grad():
            out.copy_(x * 3.0)

    monkeypatch.setattr(JITFunction, "run", compiled_stand_in)
    compiled = JITFunction(scale_kernel.fn)
    with fp.track():
        x = torch.linspace(0.1, 0.9, 8) / 3
        out = torch.zeros(8)
        compiled[(1,)](x, out, 8, OTHER=0.0, BLOCK=8)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert bounds.contains(out.double().numpy()).all()
    assert (bounds.radius > 0).all()  # x's own bounds were carried to the host copy
    assert any("compiled kernel scale_kernel" in note for note in bounds.notes)
    assert "compiled kernel" in fp.classify(out, (x.double() * 3)).report()


def test_a_compiled_launch_tracking_refuses_keeps_its_values_and_is_a_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outside strict mode the interpreted re-run that would bound a compiled launch is refused
    like any launch: the compiled kernel's values stay, and what the re-run wrote on the host
    copies (no bounds) is moved to the device tensors."""
    from triton.runtime.jit import JITFunction

    from pytest_fpcheck.adapters.torch import internal

    def compiled_stand_in(self, *args, grid, warmup, **kwargs):  # type: ignore[no-untyped-def]
        x, out = args[0], args[1]
        with internal(), torch.no_grad():
            out.copy_(x.sum().reshape(1))

    monkeypatch.setattr(JITFunction, "run", compiled_stand_in)
    compiled = JITFunction(product_reduce_kernel.fn)
    x = torch.rand(16)
    out = torch.zeros(1)
    with fp.track() as tracker:
        compiled[(1,)](x, out, BLOCK=16)
    assert out.item() == x.sum().item()  # the compiled kernel's value
    assert np.isposinf(fp.bounds_of(out).hi).all()
    assert [g.op for g in tracker.gaps.values()] == ["triton:product_reduce_kernel"]
    with fp.track(strict=True), pytest.raises(fp.UnsupportedOperation, match="'_times_plus'"):
        compiled[(1,)](x, out, BLOCK=16)


def test_an_unsupported_triton_release_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triton, "__version__", "2.1.0")
    with pytest.raises(
        fp.UnsupportedOperation, match=r"triton 2\.1\.0.*supports triton 3\.0 to 3\.9"
    ):
        hooks._check_version()


def test_the_interpreter_is_instrumented_only_inside_track() -> None:
    builder = interpreter.interpreter_builder
    assert "create_fadd" not in vars(builder)
    with fp.track():
        assert "create_fadd" in vars(builder)
        with fp.track():
            assert "create_fadd" in vars(builder)
        assert "create_fadd" in vars(builder)
    assert "create_fadd" not in vars(builder)
    assert interpreter.ReduceOps.__name__ == "ReduceOps"
    out = torch.empty(8)
    scale_kernel[(1,)](torch.rand(8), out, 8, OTHER=0.0, BLOCK=8)  # untracked: plain run
    assert fp.bounds_of(out) is None


@triton.jit
def masked_softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + cols, e / tl.sum(e, axis=0), mask=cols < n)


def test_masked_lanes_at_minus_infinity_keep_a_softmax_tight() -> None:
    """exp(-inf) is exactly 0 (also for ex2.approx): the padding lanes add nothing."""
    x = torch.randn(100)
    y = torch.empty(100)
    with fp.track():
        masked_softmax_kernel[(1,)](x, y, 100, BLOCK=128)
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.radius.max() < 1e-5
    assert bounds.contains(torch.softmax(x.double(), 0).numpy()).all()


@triton.jit
def branching_kernel(x_ptr, out_ptr):  # type: ignore[no-untyped-def]
    x = tl.load(x_ptr) / 3.0
    if x > 1.0 / 3.0:
        tl.store(out_ptr, x)
    else:
        tl.store(out_ptr, -x)


def test_branching_on_a_comparison_rounding_may_flip_raises() -> None:
    with fp.track(strict=True), pytest.raises(fp.UnsupportedOperation, match="control flow"):
        branching_kernel[(1,)](torch.tensor([1.0]), torch.empty(1))
    out = torch.empty(1)
    with fp.track():  # decided: 6 / 3 is far above 1 / 3
        branching_kernel[(1,)](torch.tensor([6.0]), out)
    assert out.item() == 2.0


@triton.jit
def descriptor_kernel(x_desc, y_desc):  # type: ignore[no-untyped-def]
    y_desc.store([0, 0], x_desc.load([0, 0]) / 3.0)


@pytest.mark.parametrize("tf32", [False, True])
def test_tensor_descriptor_loads_and_stores_are_bounded(tf32: bool) -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    x, y = torch.rand(8, 8) + 0.5, torch.empty(8, 8)
    source = TensorDescriptor(x, list(x.shape), list(x.stride()), [8, 8], round_f32_to_tf32=tf32)
    with fp.track():
        descriptor_kernel[(1,)](source, TensorDescriptor.from_tensor(y, [8, 8]))
    bounds = fp.bounds_of(y)
    assert bounds is not None
    assert bounds.contains((x.double() / 3).numpy()).all()
    assert bounds.contains(y.double().numpy()).all()
    # a TF32 descriptor rounds what it loads to 10 significand bits: 2**-11 relative, not 2**-24
    assert (bounds.radius.max() > 1e-4) == tf32


@triton.jit
def rounded_other_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    fill = tl.full((BLOCK,), 1.0, tl.float32) / 3.0  # a rounded 'other'
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n, other=fill))


def test_loaded_lanes_of_exact_memory_keep_their_values_beside_a_rounded_other() -> None:
    x = torch.arange(8, dtype=torch.float32) + 10
    out = torch.empty(8)
    with fp.track():
        rounded_other_kernel[(1,)](x, out, 5, BLOCK=8)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    assert (bounds.lo[:5] == x[:5].numpy()).all()
    assert (bounds.hi[:5] == x[:5].numpy()).all()
    assert (bounds.lo[5:] < 1 / 3).all()
    assert (bounds.hi[5:] > 1 / 3).all()


_LATE_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * 3)
"""


def _run_fresh(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (triton not imported yet), with ``tmp_path`` on its path
    and ``TRITON_INTERPRET=1``."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )


def test_triton_first_imported_inside_a_block_is_reported(tmp_path: Path) -> None:
    """Without triton imported, opening a block imports nothing (triton costs a second and
    200 MiB); a kernel defined with triton arriving inside the block would run uninstrumented,
    and closing the block says so."""
    (tmp_path / "late_kernels.py").write_text(_LATE_KERNEL)
    code = (
        "import sys, warnings, torch\n"
        "import pytest_fpcheck as fp\n"
        "with fp.track():\n"
        "    assert 'triton' not in sys.modules\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    with fp.track():\n"
        "        from late_kernels import copy_kernel\n"
        "print([str(w.message)[:60] for w in caught])\n"
    )
    out = _run_fresh(code, tmp_path)
    assert "triton was first imported inside an fp.track()" in out.stdout


def test_triton_imported_by_torch_inside_a_block_is_not_reported(tmp_path: Path) -> None:
    """Issue 18: with ``TRITON_INTERPRET=1``, torch imports triton to probe for it from inside
    ordinary operations; a block that launches no Triton kernel gets no warning (warnings are
    errors here), and the watch says the same."""
    code = (
        "import sys, warnings, torch\n"
        "import pytest_fpcheck as fp\n"
        "warnings.simplefilter('error')\n"
        "x = torch.randn(4, 4)\n"
        "with fp.watch_nonfinite(), fp.track():\n"
        # torch._dynamo imports triton; the package's modes no longer import Dynamo themselves
        # (a foreign dispatch mode's first operation, or torch.compile, still does)
        "    import torch._dynamo\n"
        "    y = torch.nn.functional.gelu(x @ x)\n"
        "assert 'triton.runtime.interpreter' in sys.modules, 'torch no longer imports triton'\n"
        "assert fp.bounds_of(y) is not None\n"
        "print('quiet')\n"
    )
    out = _run_fresh(code, tmp_path)
    assert out.stdout.strip() == "quiet", out.stderr


@triton.jit
def as_halves_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    halves = x_ptr.to(tl.pointer_type(tl.float16))
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(halves + offsets) * 2.0)


def test_exact_memory_read_through_another_element_type_is_its_bits_reinterpreted() -> None:
    x = torch.tensor([1.5, -2.25, 3.0, 1e-3])
    out = torch.empty(8, dtype=torch.float16)
    with fp.track():
        as_halves_kernel[(1,)](x, out, BLOCK=8)
    bounds = fp.bounds_of(out)
    assert bounds is not None
    expected = x.view(torch.float16).double() * 2
    assert bounds.contains(expected.numpy()).all()
    assert bounds.contains(out.double().numpy()).all()
    tracked = torch.tensor([1.5, -2.25, 3.0, 1e-3]) / 3
    with fp.track(strict=True):
        tracked = tracked / 3
        with pytest.raises(fp.UnsupportedOperation, match="another element type"):
            as_halves_kernel[(1,)](tracked, out, BLOCK=8)


def test_a_posteriori_tracking_bounds_kernels_with_their_rigorous_rules() -> None:
    """Inside ``track(mode="a_posteriori")`` a kernel's stores keep the rigorous enclosures
    (they hold the exact value and this run's, as the mode promises) and PyTorch carries them
    on a posteriori."""
    x = torch.linspace(0.1, 0.9, 8) / 3
    with fp.track(mode="a_posteriori"):
        out = torch.empty(8)
        scale_kernel[(1,)](x, out, 8, OTHER=0.0, BLOCK=8)
        doubled = out * 2
    bounds, after = fp.bounds_of(out), fp.bounds_of(doubled)
    assert bounds is not None
    assert after is not None
    assert bounds.mode == after.mode == "a_posteriori"
    exact = np.array([float(v) * 3 for v in x.double()])
    assert bounds.contains(exact).all()
    assert bounds.contains(out).all()
    assert after.contains(2 * exact).all()
    assert after.contains(doubled).all()
