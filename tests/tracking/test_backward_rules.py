"""Backward kernels and the other operations bounded through PyTorch's decompositions
(tracking/torch/decompose.py): each run under strict tracking, its computed value and a float64
evaluation of the same kernel (standing in for the exact value: its error is far below the
enclosures' radii here) lie in the enclosure; and the decomposition never changes what the
program computes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
aten = torch.ops.aten
F = torch.nn.functional

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def check(op: Callable[..., object], *args: object) -> list[fp.Bounds]:
    """``op(*args)`` under strict tracking, the values inside; the float64 run inside too."""
    with fp.track(strict=True):
        out = op(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    wide = [
        a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args
    ]
    reference = op(*wide)
    references = list(reference) if isinstance(reference, (tuple, list)) else [reference]
    found = []
    for value, exact in zip(outs, references, strict=True):
        if value is None or not value.is_floating_point() or value.numel() == 0:
            continue
        bounds = fp.bounds_of(value)
        if bounds is None:  # exact (a selection of exact values): never tracked
            assert torch.equal(value.double(), exact.double())
            continue
        assert bounds.contains(value).all(), "computed value outside its enclosure"
        inside = bounds.contains(exact.double())
        assert inside.all(), (np.flatnonzero(~inside)[:5], bounds.lo.flat[:5], bounds.hi.flat[:5])
        found.append(bounds)
    return found


@pytest.fixture(autouse=True)
def seed() -> None:
    torch.manual_seed(0)


def rand(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape) * scale).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_backward_kernels(dtype: torch.dtype) -> None:
    g, x = rand(4, 33, dtype=dtype), rand(4, 33, dtype=dtype, scale=3)
    check(aten.gelu_backward, g, x)
    check(lambda g, x: aten.gelu_backward(g, x, approximate="tanh"), g, x)
    check(aten.sigmoid_backward, g, torch.sigmoid(x))
    check(aten.tanh_backward, g, torch.tanh(x))
    check(lambda g, x: aten.threshold_backward(g, x, 0.0), g, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_and_layer_norm_backward(dtype: torch.dtype) -> None:
    g, x = rand(3, 17, dtype=dtype), rand(3, 17, dtype=dtype, scale=2)
    check(lambda g, y: aten._softmax_backward_data(g, y, -1, dtype), g, torch.softmax(x, -1))
    check(
        lambda g, y: aten._log_softmax_backward_data(g, y, -1, dtype), g, torch.log_softmax(x, -1)
    )
    # float16 and bfloat16: the weight's and bias's gradients in the kernel's thread blocks
    w, b = rand(17, dtype=dtype), rand(17, dtype=dtype)
    _, mean, rstd = aten.native_layer_norm(x, [17], w, b, 1e-5)
    check(
        lambda g, x, m, r, w, b: aten.native_layer_norm_backward(
            g, x, [17], m, r, w, b, [True, True, True]
        ),
        g,
        x,
        mean,
        rstd,
        w,
        b,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads", [1, 3])
def test_layer_norm_backward_over_many_rows(dtype: torch.dtype, threads: int) -> None:
    """37 rows split among the kernel's threads: each thread's block of rows is added into a
    buffer of the tensor's format, the buffers summed in float32 (the decomposition follows the
    same blocks); rows offset by 100 and tiny rows (cancellation, underflow)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = rand(37, 8, dtype=dtype, scale=2)
        x[0] = (x[0].float() + 100).to(dtype)
        x[1] = (x[1].float() * 1e-4).to(dtype)
        g, w, b = rand(37, 8, dtype=dtype), rand(8, dtype=dtype), rand(8, dtype=dtype)
        _, mean, rstd = aten.native_layer_norm(x, [8], w, b, 1e-5)
        check(
            lambda g, x, m, r, w, b: aten.native_layer_norm_backward(
                g, x, [8], m, r, w, b, [True, True, True]
            ),
            g,
            x,
            mean,
            rstd,
            w,
            b,
        )
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_loss_backward_kernels(dtype: torch.dtype) -> None:
    logp = torch.log_softmax(rand(6, 5, dtype=torch.float32), -1).to(dtype)
    target = torch.randint(0, 5, (6,))
    total = torch.tensor(6.0).to(dtype)
    g = torch.tensor(1.0).to(dtype)
    check(lambda g, p, t: aten.nll_loss_backward(g, p, target, None, 1, -100, t), g, logp, total)
    x, y = rand(4, 7, dtype=dtype), rand(4, 7, dtype=dtype)
    for reduction in (0, 1, 2):  # the norm 2 / n rounded to the format first (bfloat16 too)
        g = rand(4, 7, dtype=dtype) if reduction == 0 else torch.tensor(1.0).to(dtype)
        check(lambda g, x, y, r=reduction: aten.mse_loss_backward(g, x, y, r), g, x, y)
    check(lambda x, y: F.binary_cross_entropy_with_logits(x, torch.sigmoid(y)), x, y)
    logits = torch.log_softmax(rand(2, 5, 3, 4, dtype=torch.float32), 1).to(dtype)
    targets = torch.randint(0, 5, (2, 3, 4))
    check(lambda p: F.nll_loss(p, targets), logits)


@pytest.mark.parametrize("dtype", DTYPES)
def test_indexing_backward_kernels(dtype: torch.dtype) -> None:
    g = rand(5, 4, dtype=dtype)
    indices = torch.tensor([[1, 3, 1, 0, 3]]).T.expand(5, 1).reshape(5)
    check(lambda g: aten.embedding_dense_backward(g, indices, 6, -1, False), g)
    check(lambda g: aten.slice_backward(g, [9, 4], 0, 2, 7, 1), g)
    check(lambda g: aten.select_backward(g[0], [3, 4], 0, 1), g)


@pytest.mark.parametrize("dtype", DTYPES)
def test_var_mean_and_cdist(dtype: torch.dtype) -> None:
    x = rand(3, 11, dtype=dtype, scale=4) + 2
    check(lambda x: torch.var_mean(x, -1), x)
    check(lambda x: torch.var_mean(x, -1, correction=0), x)
    a, b = rand(4, 3, dtype=torch.float32), rand(5, 3, dtype=torch.float32)
    check(lambda a, b: torch.cdist(a, b), a, b)


def test_batch_norm_in_training_mode_through_its_decomposition() -> None:
    x, w, b = rand(2, 3, 4, 4, dtype=torch.float32, scale=2), torch.rand(3) + 0.5, torch.randn(3)
    running_mean, running_var = torch.zeros(3), torch.ones(3)
    plain_mean, plain_var = running_mean.clone(), running_var.clone()
    plain = F.batch_norm(x, plain_mean, plain_var, w, b, training=True)
    with fp.track(strict=True):
        out = F.batch_norm(x, running_mean, running_var, w, b, training=True)
    assert torch.equal(out, plain)
    # the running statistics are updated once, as without tracking
    assert torch.equal(running_mean, plain_mean)
    assert torch.equal(running_var, plain_var)
    check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b)


def test_a_decomposition_never_changes_the_value_the_program_computes() -> None:
    g, x = torch.randn(3, 17), torch.randn(3, 17)
    y = torch.softmax(x, -1)
    plain = aten._softmax_backward_data(g, y, -1, torch.float32)
    with fp.track(strict=True):
        tracked = aten._softmax_backward_data(g, y, -1, torch.float32)
    assert torch.equal(plain, tracked)


@pytest.mark.parametrize("dtype", DTYPES)
def test_convolution_backward_through_convolutions(dtype: torch.dtype) -> None:
    g2, x2, w2 = (
        rand(2, 6, 5, 5, dtype=dtype),
        rand(2, 4, 9, 9, dtype=dtype),
        rand(6, 2, 3, 3, dtype=dtype),
    )
    check(
        lambda g, x, w: aten.convolution_backward(
            g, x, w, [6], [2, 2], [1, 1], [1, 1], False, [0, 0], 2, [True, True, True]
        ),
        g2,
        x2,
        w2,
    )
    g1, x1, w1 = rand(2, 3, 7, dtype=dtype), rand(2, 5, 9, dtype=dtype), rand(3, 5, 3, dtype=dtype)
    check(
        lambda g, x, w: aten.convolution_backward(
            g, x, w, None, [1], [0], [1], False, [0], 1, [True, True, False]
        ),
        g1,
        x1,
        w1,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_through_the_math_path(dtype: torch.dtype, causal: bool) -> None:
    q, k, v = (rand(1, 2, 5, 4, dtype=dtype) for _ in range(3))
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)[:2]
    g = rand(1, 2, 5, 4, dtype=dtype)
    check(
        lambda g, q, k, v, o, lse: aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, o, lse, 0.0, causal
        ),
        g,
        q,
        k,
        v,
        out,
        lse,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add_in_any_order(dtype: torch.dtype) -> None:
    target, source = rand(4, 6, dtype=dtype), rand(4, 9, dtype=dtype, scale=100)
    index = torch.randint(0, 6, (4, 9))
    bounds = check(lambda t, s: torch.scatter_add(t, 1, index, s), target, source)[0]
    assert np.isfinite(bounds.radius).all()
    # max pooling's backward decomposition scatters the gradient back
    x = rand(1, 2, 6, 6, dtype=dtype)
    out, indices = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    g = rand(*out.shape, dtype=dtype)
    check(
        lambda g, x: torch.ops.aten.max_pool2d_with_indices_backward(
            g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices
        ),
        g,
        x,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_average_pooling_and_its_backward(dtype: torch.dtype) -> None:
    x = rand(2, 3, 8, 6, dtype=dtype)
    check(lambda x: F.avg_pool2d(x, 2), x)
    check(lambda x: F.avg_pool2d(x, 3, 2), x)
    if dtype == torch.float16:
        return  # its float16 kernel accumulates in float16: no rule yet (issue 19)
    g = rand(2, 3, 3, 2, dtype=dtype)
    check(
        lambda g, x: aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [0, 0], False, True, None), g, x
    )


def test_slice_and_select_backward_place_the_gradients_enclosure() -> None:
    """``slice_backward`` and ``select_backward`` are exact placements (rule, no
    decomposition): the gradient's enclosure where the slice was, exact zeros elsewhere."""
    from pytest_fpcheck.interval.registry import registered

    g = rand(5, 4, dtype=torch.float32)
    lo, hi = g.double() - 0.25, g.double() + 0.5
    with fp.track(strict=True, assume={g: fp.hull(lo, hi)}):
        sliced = aten.slice_backward(g, [9, 4], 0, 2, 7, 1)
        selected = aten.select_backward(g[0], [3, 4], 0, 1)
    for out, place, shape in ((sliced, (slice(2, 7),), (9, 4)), (selected, (1,), (3, 4))):
        bounds = fp.bounds_of(out)
        assert bounds is not None
        want_lo, want_hi = np.zeros(shape), np.zeros(shape)
        want_lo[place] = lo.numpy() if out is sliced else lo[0].numpy()
        want_hi[place] = hi.numpy() if out is sliced else hi[0].numpy()
        assert np.array_equal(bounds.lo, want_lo)
        assert np.array_equal(bounds.hi, want_hi)
    assert {"aten.slice_backward", "aten.select_backward"} <= set(registered())


def test_clone_copies_the_enclosure_into_memory_of_its_own() -> None:
    """``clone`` of a tracked tensor (contiguous, transposed, 0-d): the operand's enclosure,
    its ends equal, held apart from the operand's record (writing one leaves the other)."""
    base = rand(6, 5, dtype=torch.float32)
    lo, hi = base.double() - 0.125, base.double() + 0.25
    with fp.track(strict=True, assume={base: fp.hull(lo, hi)}):
        copies = [base.clone(), base.t().clone(), base[2, 3].clone()]
        views = [base, base.t(), base[2, 3]]
        base.add_(1.0)  # the operand changes; the copies' enclosures must not
    for copy, view, (want_lo, want_hi) in zip(
        copies, views, [(lo, hi), (lo.t(), hi.t()), (lo[2, 3], hi[2, 3])], strict=True
    ):
        bounds = fp.bounds_of(copy)
        assert bounds is not None
        assert np.array_equal(bounds.lo, want_lo.numpy())
        assert np.array_equal(bounds.hi, want_hi.numpy())
        moved = fp.bounds_of(view)
        assert moved is not None
        assert not np.array_equal(moved.lo, bounds.lo)


def test_cat_joins_the_enclosures() -> None:
    """``cat`` of tracked and untracked tensors along each dimension, with a legacy empty
    tensor that ``torch.cat`` skips: the enclosures joined, each element its operand's."""
    a, b = rand(3, 4, dtype=torch.float32), rand(3, 4, dtype=torch.float32)
    lo, hi = a.double() - 0.125, a.double() + 0.25
    with fp.track(strict=True, assume={a: fp.hull(lo, hi)}):
        joined = [torch.cat([a, b], dim) for dim in (0, 1, -1)]
        skipping = torch.cat([torch.empty(0), a, b])
        both_points = torch.cat([b, b], 1)
    for out, dim in zip([*joined, skipping], (0, 1, -1, 0), strict=True):
        bounds = fp.bounds_of(out)
        assert bounds is not None
        assert np.array_equal(bounds.lo, torch.cat([lo, b.double()], dim).numpy())
        assert np.array_equal(bounds.hi, torch.cat([hi, b.double()], dim).numpy())
    assert fp.bounds_of(both_points) is None  # exact, never tracked
