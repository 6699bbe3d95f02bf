"""Reference models of matrix-multiply hardware (FTTN: paper 004, sections 5 and 6.1; FPRev
section 5.2.1), exported as ``fp.emulate``.

``fused_matmul(a, b, c=None, *, width, extra_bits, rounding, out_dtype, subnormals="keep")``
computes ``a @ b + c`` the way matrix units (NVIDIA Tensor Cores, AMD Matrix Cores) are found to:

* **products are exact**: ``a_ij * b_jk`` is formed without rounding (FPRev 5.2.1, first bullet;
  Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330,
  2021, section 4);
* **width** (block-FMA size): the running sum and the next ``width`` products are added by one
  fused multi-term adder; FPRev's revealed trees are (4+1)-way on V100, (8+1)-way on A100 and
  (16+1)-way on H100 (FPRev section 6.2, corroborating Fasi et al. and Li et al., "FTTN:
  Feature-Targeted Testing for Numerical Properties of NVIDIA & AMD Matrix Accelerators", CCGrid
  2024). ``width=1`` is a chain of two-term fused adds; with ``extra_bits=None`` it is a chain of
  IEEE fused multiply-adds, as CPUs compute;
* **extra_bits**: the terms of one addition are aligned to the largest exponent and their
  significands truncated (toward zero) ``extra_bits`` bits below the output precision: the
  guard bits the adder keeps (paper 004 section 6.1 "GRS bits shared within each block"; Fasi et
  al. found 0 extra bits for fp32 accumulation on V100/T4/A100, later work 3 on Hopper). ``None``
  keeps every bit: the exact sum is rounded once (IEEE);
* **rounding** of the normalised block sum into ``out_dtype``: ``"nearest-even"``,
  ``"toward-zero"`` (the truncation Fasi et al. observed on V100, T4 and A100), ``"down"`` or
  ``"up"`` (the directions FTTN's T_rnd_dir test tells apart, paper 004 section 5, Figure 2);
* **subnormals**: ``"keep"``, or ``"flush"``, ``"flush-inputs"``, ``"flush-outputs"`` (subnormal
  inputs, or results of an addition, read or written as zero: FTTN's subnormal tests; AMD MI100's
  flushing of fp16 subnormals).

``ieee_matmul(a, b, c=None, *, out_dtype, order=None, fma=True, rounding="nearest-even",
subnormals="keep")`` is the IEEE 754 model for comparison: products added one at a time (with or
without FMA) in the sequential order or any :class:`~pytest_fpcheck.SummationTree`.

Both return NumPy arrays of ``out_dtype`` and accept NumPy arrays (ml_dtypes for bfloat16 and
float8) or PyTorch tensors of formats of at most 24 bits. The sums are evaluated by a Numba kernel
compiled on the first call (about two seconds; then cached on disk), exactly (see
``_kernel``). ``fp.probe_matmul`` uses the same kernel to predict what each candidate model would
return on its probes.
"""

from __future__ import annotations

from .models import fused_matmul, ieee_matmul

__all__ = ["fused_matmul", "ieee_matmul"]
