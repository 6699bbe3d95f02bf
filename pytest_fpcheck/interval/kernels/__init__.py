"""Fused passes of the interval engine: one compiled loop per rule instead of a chain of NumPy
passes (RENDER section II-C's outward rounding, done element by element as each endpoint is
produced).

Every kernel evaluates the same float64 expressions as the NumPy formulation it replaces, with
the same outward steps (:func:`..rounding.next_up` / :func:`..rounding.next_down` are bit-exact
``nextafter``), so the enclosures are those of the documented rules; only the number of passes
over memory changes. Kernels work on flat arrays: :func:`flat_views` turns a (possibly
transposed) array into a flat one without copying where its memory allows.

Scalar helpers that need "a float64 number at least as large as the exact value" of a
non-negative quantity use :func:`bump`: ``r (1 + 2**-51)`` is at least one float64 step above
a normal ``r`` (the product's exact value exceeds the next float64), and ``r + 2**-1022`` above
a tiny one. Kernels keep subnormal operands out of their arithmetic (a subnormal operand costs
a microcode assist of a hundred cycles on x86): allowances below 2**-1022 are raised to it.

Each kernel is a loop (``*_loop``) and a factory that compiles it for one setting of its
switches (``fast32``, and the rule's variant: a point operand, a subtraction, an addend), the
switches being constants of the compiled code: numba does not hoist a branch on an argument out
of a loop, and such a branch costs these loops up to half their speed. A setting is compiled
when first used, so a run compiles only the variants it needs. ``fast32``
(the result format is float32) rounds endpoints by the hardware's conversion
(:func:`..rounding.float32_directed`, bit-identical to the general path).

Every compiled function goes through :func:`pytest_fpcheck.interval.jit.jit`: Numba is imported
when a kernel is first needed, not with this package; the machine code is cached in the user's
cache folder (``$FPCHECK_CACHE_DIR``, else ``~/.cache/pytest-fpcheck``), never in the package,
under a digest of every compiled source (an edit of a helper inlined from another file, such as
:mod:`pytest_fpcheck.interval.rounding`, compiles afresh); and a kernel with an exact NumPy twin
(:mod:`pytest_fpcheck.interval.fallbacks`) answers with it while a background thread loads or
compiles the kernel, so no caller waits for a compilation.

Modules, each beside the rules it serves: :mod:`.base` (what every kernel shares, and the
records' summary), :mod:`.elementwise`, :mod:`.linalg`, :mod:`.composite`, :mod:`.softmax`,
:mod:`.normalisation`, :mod:`.scatter`.
"""

from __future__ import annotations

from .base import (
    FormatArgs,
    broadcast_flat,
    bump,
    empty_like_order,
    flat,
    flat_views,
    format_args,
    join_computed,
    outward,
    outward_step,
    summary,
)
from .composite import (
    gelu_erf_bounds,
    gelu_erf_derivative_bounds,
    silu_backward_bounds,
    tanh_backward_bounds,
    unimodal_bounds,
)
from .elementwise import add_bounds, div_bounds, library_bounds, mul_bounds, power_bounds
from .linalg import (
    any_subnormal,
    float32_magnitudes,
    matmul_epilogue,
    radius_share,
    split_float32,
    split_operand,
    sum_ends,
)
from .normalisation import moments_rows, normalise_rows
from .scatter import accumulated_bounds, row_sums
from .softmax import log_softmax_backward_bounds, log_softmax_bounds, softmax_bounds

__all__ = [
    "FormatArgs",
    "accumulated_bounds",
    "add_bounds",
    "any_subnormal",
    "broadcast_flat",
    "bump",
    "div_bounds",
    "empty_like_order",
    "flat",
    "flat_views",
    "float32_magnitudes",
    "format_args",
    "gelu_erf_bounds",
    "gelu_erf_derivative_bounds",
    "join_computed",
    "library_bounds",
    "log_softmax_backward_bounds",
    "log_softmax_bounds",
    "matmul_epilogue",
    "moments_rows",
    "mul_bounds",
    "normalise_rows",
    "outward",
    "outward_step",
    "power_bounds",
    "radius_share",
    "row_sums",
    "silu_backward_bounds",
    "softmax_bounds",
    "split_float32",
    "split_operand",
    "sum_ends",
    "summary",
    "tanh_backward_bounds",
    "unimodal_bounds",
]
