"""The error model of Triton's floating-point operations, as compiled and as interpreted.

An interval rule must hold for every way the operation may run: Triton's interpreter (NumPy in
the operand's format) and the compiled kernel on NVIDIA and AMD GPUs. Each entry below is the
largest of the documented errors, with its source:

* Element-wise ``+ - *``, ``fma``, ``div_rn``/``fdiv(ieee_rounding=True)``, ``sqrt_rn``, casts:
  correctly rounded in IEEE hardware and in NumPy. Triton fuses ``a * b + c`` into an FMA by
  default (``enable_fp_fusion``); an interval that encloses the exact product encloses the fused
  result too, so no allowance is needed.
* ``x / y`` (``create_fdiv``): ``div.full.f32``, at most 2 ULP over the full range (PTX ISA,
  "div"); ``fdiv(approx=True)``: ``div.approx.f32``, 2 ULP for |y| in [2**-126, 2**126], and on
  AMD ``llvm.amdgcn.fdiv.fast``, 2.5 ULP without subnormals (``triton.language.math.fdiv``).
  Outside that range of |y| the quotient may be flushed to zero: the rule adds zero there.
* ``exp``: for float32, ``ex2.approx.f32(x * log2(e))`` (Triton's ``ExpOpConversionApprox``),
  2 ULP for ``ex2`` (PTX ISA, "ex2": max relative error 2**-22.5) plus the effect of rounding
  ``x * log2(e)``: a relative error of at most |x| * 2u * (1 + 2u) in the result; NumPy's SIMD
  float32 ``exp`` is within 2.52 ULP. Other formats call libdevice (``__nv_expf``, 2 ULP).
* ``exp2``: ``ex2.approx``, 2**-22.5 relative (2 ULP), subnormal results flushed.
* ``log``, ``log2``: ``lg2.approx.f32`` has an absolute error of 2**-22.6 (PTX ISA, "lg2"),
  relative error unbounded near 1; NumPy's SIMD float32 ``log`` is within 3.83 ULP. Rule: 4 ULP
  plus 2**-21 absolute.
* ``sin``, ``cos``: ``sin.approx.f32``/``cos.approx.f32`` have an absolute error of 2**-20.5 in
  [-100 pi, 100 pi] (PTX ISA), unspecified beyond; NumPy's float32 ``sin``/``cos`` are within
  1.49 ULP. Rule: 2 ULP plus 2**-20 absolute, and [-1, 1] where |x| > 100 pi.
* ``sqrt`` (not ``sqrt_rn``): ``sqrt.approx.f32``, relative error 2**-23 (PTX ISA): 2 ULP.
  ``rsqrt``: ``rsqrt.approx.f32``, 2**-22.9: 2 ULP (the interpreter computes 1 / sqrt(x), two
  correctly rounded steps: within 1.5 ULP).
* ``erf``: libdevice ``erff``, 2 ULP (CUDA C Programming Guide, "Mathematical Functions"); the
  interpreter evaluates ``math.erf`` in float64 and rounds.
* Subnormal results of approximate functions may be flushed to zero (the ``.ftz`` forms): every
  approximate function's allowance includes the format's smallest normal number.

Edit :data:`TRITON_ERRORS` (``name -> (ulps, absolute)``) for other targets.
"""

from __future__ import annotations

__all__ = ["APPROX_DIV_RANGE", "SIN_COS_RANGE", "TRITON_ERRORS"]

#: Allowance of each approximate operation: (ULPs of the evaluating format, absolute error).
TRITON_ERRORS: dict[str, tuple[float, float]] = {
    "exp": (3.0, 0.0),
    "exp2": (2.0, 0.0),
    "log": (4.0, 2.0**-21),
    "log2": (4.0, 2.0**-21),
    "sin": (2.0, 2.0**-20),
    "cos": (2.0, 2.0**-20),
    "sqrt": (2.0, 0.0),
    "rsqrt": (2.0, 0.0),
    "erf": (2.0, 0.0),
    "div": (2.0, 0.0),
    "approx_div": (3.0, 0.0),
}

#: |y| range in which ``div.approx.f32`` keeps its error bound.
APPROX_DIV_RANGE = (2.0**-126, 2.0**126)

#: |x| beyond which ``sin.approx``/``cos.approx`` have no documented error.
SIN_COS_RANGE = 100 * 3.141592653589793
