"""Random Triton programs for the soundness tests of the instrumented interpreter.

``chain_kernel`` applies a list of element-wise operations (a constexpr tuple of opcodes) to a
loaded block; :func:`exact_chain` evaluates the same list in exact (mpmath, 200-bit) arithmetic,
with casts as the identity (a cast's exact counterpart) and comparisons on the exact values.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import mpmath
import triton
import triton.language as tl

OPS = (
    "add", "sub", "mul", "div", "div_rn", "sqrt", "exp", "log", "max", "where", "fma",
    "to_f16", "to_bf16", "to_f8e5", "rsqrt", "sin", "cos", "erf", "exp2", "log2", "clamp",
    "abs", "neg", "sqrt_rn", "min", "to_f8e4",
)  # fmt: skip

_CODE = {name: i for i, name in enumerate(OPS)}


@triton.jit
def chain_kernel(x_ptr, y_ptr, out_ptr, n, OPS: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=1.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=1.0)
    v = x
    for code in OPS:
        if code == 0:
            v = v + y
        elif code == 1:
            v = v - x
        elif code == 2:
            v = v * y
        elif code == 3:
            v = v / y
        elif code == 4:
            v = tl.math.div_rn(v.to(tl.float32), y.to(tl.float32)).to(v.dtype)
        elif code == 5:
            v = tl.sqrt(tl.abs(v.to(tl.float32))).to(v.dtype)
        elif code == 6:
            v = tl.exp(v.to(tl.float32)).to(v.dtype)
        elif code == 7:
            v = tl.log(tl.abs(v.to(tl.float32))).to(v.dtype)
        elif code == 8:
            v = tl.maximum(v, y)
        elif code == 9:
            v = tl.where(v > y, v, y * 2.0)
        elif code == 10:
            v = tl.fma(v, y, x)
        elif code == 11:
            v = v.to(tl.float16).to(v.dtype)
        elif code == 12:
            v = v.to(tl.bfloat16).to(v.dtype)
        elif code == 13:
            v = v.to(tl.float8e5).to(v.dtype)
        elif code == 14:
            v = tl.rsqrt(tl.abs(v.to(tl.float32))).to(v.dtype)
        elif code == 15:
            v = tl.sin(v.to(tl.float32)).to(v.dtype)
        elif code == 16:
            v = tl.cos(v.to(tl.float32)).to(v.dtype)
        elif code == 17:
            v = tl.erf(v.to(tl.float32)).to(v.dtype)
        elif code == 18:
            v = tl.exp2(v.to(tl.float32)).to(v.dtype)
        elif code == 19:
            v = tl.log2(tl.abs(v.to(tl.float32))).to(v.dtype)
        elif code == 20:
            v = tl.clamp(v, -2.0, 2.0)
        elif code == 21:
            v = tl.abs(v)
        elif code == 22:
            v = -v
        elif code == 23:
            v = tl.sqrt_rn(tl.abs(v.to(tl.float32))).to(v.dtype)
        elif code == 24:
            v = tl.minimum(v, y)
        else:
            v = v.to(tl.float8e4nv).to(v.dtype)
    tl.store(out_ptr + offsets, v, mask=mask)


def codes(names: list[str]) -> tuple[int, ...]:
    return tuple(_CODE[name] for name in names)


def exact_chain(names: list[str], x: float, y: float) -> mpmath.mpf | None:
    """The exact value of the chain; None where it is undefined (log 0, 0/0, overflow of
    mpmath's range, ...)."""
    with mpmath.workprec(200):
        mx, my = mpmath.mpf(x), mpmath.mpf(y)
        v = mx
        try:
            for name in names:
                v = _step(name, v, mx, my)
                if mpmath.isnan(v) or abs(v) > mpmath.mpf(2) ** 2000:
                    return None
        except (ZeroDivisionError, ValueError, OverflowError):
            return None
        return v


def _step(name: str, v: mpmath.mpf, x: mpmath.mpf, y: mpmath.mpf) -> mpmath.mpf:
    if name == "add":
        return v + y
    if name == "sub":
        return v - x
    if name == "mul":
        return v * y
    if name in ("div", "div_rn"):
        if y == 0:
            raise ZeroDivisionError
        return v / y
    if name in ("sqrt", "sqrt_rn"):
        return mpmath.sqrt(abs(v))
    if name == "exp":
        if v > 10**6:
            raise OverflowError
        return mpmath.exp(v)
    if name == "exp2":
        if v > 10**6:
            raise OverflowError
        return mpmath.power(2, v)
    if name in ("log", "log2"):
        if v == 0:
            raise ValueError
        return mpmath.log(abs(v)) if name == "log" else mpmath.log(abs(v), 2)
    if name == "max":
        return max(v, y)
    if name == "min":
        return min(v, y)
    if name == "where":
        return v if v > y else 2 * y
    if name == "fma":
        return v * y + x
    if name.startswith("to_"):
        return v
    if name == "rsqrt":
        if v == 0:
            raise ZeroDivisionError
        return 1 / mpmath.sqrt(abs(v))
    if name == "sin":
        return mpmath.sin(v)
    if name == "cos":
        return mpmath.cos(v)
    if name == "erf":
        return mpmath.erf(v)
    if name == "clamp":
        return min(max(v, mpmath.mpf(-2)), mpmath.mpf(2))
    if name == "abs":
        return abs(v)
    if name == "neg":
        return -v
    raise AssertionError(name)
