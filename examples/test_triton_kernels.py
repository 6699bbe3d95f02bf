"""Round-off or bug, for Triton kernels (docs/triton.md).

The kernels run on the CPU through Triton's interpreter (``TRITON_INTERPRET=1``, set in
``conftest.py``). Inside ``fp.track()`` the interpreter is instrumented: every operation of the
kernel carries an interval, and what the kernel stores gets bounds, exactly as for PyTorch ops.
The stories are those of public Triton precision reports: split-K with atomics, TF32 dots, a
float16 GEMM that fails allclose by one ULP, fused softmax, a flash-attention forward (all
round-off), and two real bugs (exchanged strides, an off-by-one mask).
"""

import pytest
import torch
import triton
import triton.language as tl

import pytest_fpcheck as fp


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    """C = A B; with SPLIT_K > 1 each program adds its slice of K into C atomically."""
    pid_m, pid_n, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(pid_k * BLOCK_K, K, BLOCK_K * SPLIT_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)  # fmt: skip
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    c_ptrs = c_ptr + rows[:, None] * N + cols[None, :]
    c_mask = (rows[:, None] < M) & (cols[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
    else:
        tl.atomic_add(c_ptrs, acc, mask=c_mask)


def matmul(a, b, *, out_dtype=None, precision="ieee", split_k=1, swap_strides=False):
    m, k = a.shape
    n = b.shape[1]
    c = torch.zeros(m, n, dtype=out_dtype or a.dtype)
    stride_am, stride_ak = a.stride()
    if swap_strides:  # the bug: A read as if it were stored transposed
        stride_am, stride_ak = stride_ak, stride_am
    grid = (triton.cdiv(m, 16), triton.cdiv(n, 16), split_k)
    matmul_kernel[grid](
        a, b, c, m, n, k, stride_am, stride_ak, *b.stride(),
        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, PRECISION=precision, SPLIT_K=split_k,
    )  # fmt: skip
    return c


def test_split_k_matmul_with_atomic_add_is_roundoff():
    """Split-K adds the K-slices in whatever order the programs finish: run to run the result
    changes in the last bits. The bound holds for every order, so it is round-off (Type-I)."""
    torch.manual_seed(0)
    a, b = torch.randn(32, 128), torch.randn(128, 32)
    with fp.track():
        c = matmul(a, b, split_k=4)
    expected = a.double() @ b.double()
    assert not torch.equal(c, (a @ b))  # a different order than torch's
    verdict = fp.assert_roundoff_close(c, expected)
    assert verdict.kind == "roundoff"


def test_tf32_dot_against_a_float32_reference_is_roundoff():
    """``tl.dot`` in TF32 keeps 10 significand bits of each input: against float32 torch it
    fails tight tolerances on a GPU; the TF32 bound covers that (Type-I)."""
    torch.manual_seed(1)
    a, b = torch.randn(32, 64), torch.randn(64, 32)
    with fp.track():
        c = matmul(a, b, precision="tf32")
    bounds = fp.bounds_of(c)
    tf32_error = torch.from_numpy(bounds.radius).max()
    assert tf32_error > 1e-3  # TF32's 2**-11 relative error per input, summed over K
    verdict = fp.assert_roundoff_close(c, a.double() @ b.double())
    assert verdict.kind in ("roundoff", "exact")


def test_float16_gemm_failing_allclose_by_one_ulp_is_roundoff():
    """A float16 GEMM whose outputs are around 40: one float16 ULP there is 0.03, so
    ``allclose(atol=1e-2, rtol=0)`` fails, yet the difference is round-off (Type-I)."""
    torch.manual_seed(2)
    a = (torch.rand(32, 64) + 0.5).half()
    b = (torch.rand(64, 32) + 0.5).half()
    with fp.track():
        c = matmul(a, b)
    expected = a.double() @ b.double()
    assert not torch.allclose(c.double(), expected, atol=1e-2, rtol=0)
    verdict = fp.assert_roundoff_close(c, expected)
    assert verdict.kind == "roundoff"


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x.to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * n_cols + cols, y.to(tl.float16), mask=cols < n_cols)


def test_fused_float16_softmax_is_roundoff():
    """The fused softmax tutorial kernel in float16 against torch's float32 softmax."""
    torch.manual_seed(3)
    x = (3 * torch.randn(16, 100)).half()
    y = torch.empty_like(x)
    with fp.track():
        softmax_kernel[(16,)](x, y, 100, BLOCK=128)
    expected = torch.softmax(x.double(), dim=-1)
    verdict = fp.assert_roundoff_close(y, expected)
    assert verdict.kind == "roundoff"


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, scale,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """A flash-attention forward: online softmax over key blocks, float32 statistics."""
    start = tl.program_id(0) * BLOCK_M
    rows = start + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + dims[None, :])
    m = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    total = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for begin in range(0, seq, BLOCK_N):
        keys = begin + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + keys[:, None] * D + dims[None, :])
        v = tl.load(v_ptr + keys[:, None] * D + dims[None, :])
        s = tl.dot(q, tl.trans(k)) * scale
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        total = total * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m = m_new
    tl.store(o_ptr + rows[:, None] * D + dims[None, :], (acc / total[:, None]).to(tl.float16))


def test_flash_attention_forward_in_float16_is_roundoff():
    torch.manual_seed(4)
    seq, d = 64, 16
    q, k, v = (torch.randn(seq, d).half() for _ in range(3))
    out = torch.empty_like(q)
    with fp.track():
        attention_kernel[(seq // 16,)](q, k, v, out, seq, d**-0.5, D=d, BLOCK_M=16, BLOCK_N=16)
    weights = torch.softmax((q.double() @ k.double().T) * d**-0.5, dim=-1)
    verdict = fp.assert_roundoff_close(out, weights @ v.double())
    assert verdict.kind == "roundoff"


def test_matmul_with_exchanged_strides_is_a_bug():
    """Passing A's strides in the wrong order reads A transposed: not round-off (Type-II)."""
    torch.manual_seed(5)
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    with fp.track():
        c = matmul(a, b, swap_strides=True)
    with pytest.raises(fp.RoundoffMismatch, match="bug"):
        fp.assert_roundoff_close(c, a.double() @ b.double())


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    # the bug: <= reads one element of the next row
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols <= n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def test_row_reduction_with_an_off_by_one_mask_is_a_bug():
    torch.manual_seed(6)
    x = torch.randn(8, 100)
    out = torch.empty(8)
    with fp.track():
        row_sum_kernel[(7,)](x, out, 100, BLOCK=128)  # rows 0..6: row 7 has no next row
    with pytest.raises(fp.RoundoffMismatch, match="bug"):
        fp.assert_roundoff_close(out[:7], x[:7].double().sum(dim=1))
