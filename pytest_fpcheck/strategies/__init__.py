"""Hypothesis strategies for floating-point testing (API.md section 3).

``from pytest_fpcheck import strategies as fst``. Importing this module imports Hypothesis (an
opt-in); nothing else in the package imports it.

Formats are those of :mod:`pytest_fpcheck.formats`; every ``dtype`` argument accepts what
:func:`~pytest_fpcheck.formats.format_of` accepts (a name or alias, a NumPy / ml_dtypes / PyTorch
dtype, an array). ``tfloat32`` is a compute mode, not a storage type: its values are float32
numbers on the tf32 grid (10 fraction bits, float32's exponent range), stored in float32 arrays
and tensors. :func:`float_dtypes` leaves it out for that reason.

Low-precision values are built from bit patterns (``_bitpatterns``), so that every draw lies
exactly on the format's grid without rounding or filtering. Invalid arguments raise
:class:`~pytest_fpcheck.errors.InvalidArgument` at call time, as Hypothesis' own strategies do
(``guides/api-style.rst``); no call returns an empty strategy.

:func:`masked_all_one` draws the inputs of FPRev (Revealing Floating-Point Accumulation Orders,
section 3.2), with the mask and unit of section 8.1 for formats of low dynamic range.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as xnp

from ..errors import InvalidArgument
from ..formats import FORMATS, Format, format_of, is_on_grid, mask_and_unit, numpy_dtype
from ._arguments import check_bool, check_bound, check_fraction, check_positions, check_shape
from ._bitpatterns import GridSampler, position_bounds, position_of
from ._corners import corner_list

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["arrays", "corner_values", "float_dtypes", "floats_on_grid", "masked_all_one"]

#: Share of floats_on_grid draws replaced by an allowed corner value.
SCALAR_CORNER_RATE = 1 / 16
#: Share of floats_on_grid draws replaced by NaN or an infinity, where allowed.
SPECIAL_RATE = 1 / 32
BACKENDS = ("numpy", "torch")
_WIDTHS = (8, 16, 32, 64)

# The sampler behind each strategy floats_on_grid returned, so that arrays() can rebuild it with
# its own corner fraction (and skip checking that its values lie on the grid).
_SAMPLERS: weakref.WeakKeyDictionary[st.SearchStrategy[float], GridSampler] = (
    weakref.WeakKeyDictionary()
)


def _strategy(sampler: GridSampler) -> st.SearchStrategy[float]:
    size = sampler.bytes_per_value
    strategy = st.binary(min_size=size, max_size=size).map(sampler)
    _SAMPLERS[strategy] = sampler
    return strategy


def _allowed_corners(
    fmt: Format, low: int, high: int, skip: int, specials: tuple[float, ...]
) -> tuple[float, ...]:
    """The corner values of ``fmt`` at positions [low, high], and the allowed specials."""
    kept: list[float] = []
    for value in corner_list(fmt):
        if math.isnan(value):
            keep = any(math.isnan(special) for special in specials)
        elif math.isinf(value):
            keep = value in specials
        else:
            position = position_of(value, fmt, skip)
            keep = position is not None and low <= position <= high
        if keep:
            kept.append(value)
    return tuple(kept)


def _call_text(fmt: Format, *values: Any) -> str:
    """``floats_on_grid(...)`` as it was called, with the arguments that differ from the
    defaults."""
    names = ("min_value", "max_value", "allow_nan", "allow_infinity", "allow_subnormal")
    defaults = (None, None, False, False, True)
    given = [
        f"{name}={value!r}"
        for name, value, default in zip(names, values, defaults, strict=True)
        if value is not default
    ]
    return f"floats_on_grid({', '.join([repr(fmt.name), *given])})"


def floats_on_grid(
    dtype: Any,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    allow_nan: bool = False,
    allow_infinity: bool = False,
    allow_subnormal: bool = True,
) -> st.SearchStrategy[float]:
    """Python floats exactly representable in ``dtype``, in [min_value, max_value].

    The rules, after Hypothesis' ``floats(width=...)``:

    * a bound must itself be exactly representable in ``dtype`` (it is never rounded; the
      message names the nearest value inside the range); ``min_value=-inf`` and
      ``max_value=inf`` mean no bound; -0.0 counts as less than 0.0;
    * ``allow_nan`` needs both bounds absent; ``allow_infinity`` needs a format with infinities
      (float8_e4m3fn has none) and at least one bound absent, and allows the infinity on each
      unbounded side;
    * ``allow_subnormal=False`` removes the subnormal range (its bit patterns are skipped, not
      filtered); ``True`` allows subnormals where the bounds include them.

    Draws are uniform over the allowed bit patterns (every binade as likely as the encoding
    makes it), except that about 1 draw in 16 is an allowed corner value (see
    :func:`corner_values`) and, where allowed, about 1 in 32 is NaN or an infinity. Failing
    values shrink toward the allowed value nearest 0.0.
    """
    fmt = format_of(dtype, argument="dtype")
    allow_nan = check_bool(allow_nan, "allow_nan")
    allow_infinity = check_bool(allow_infinity, "allow_infinity")
    allow_subnormal = check_bool(allow_subnormal, "allow_subnormal")
    low_bound = check_bound(min_value, "min_value", fmt)
    high_bound = check_bound(max_value, "max_value", fmt)
    if low_bound is not None and high_bound is not None:
        zeros_reversed = low_bound == high_bound == 0 and math.copysign(1, high_bound) < 0 < (
            math.copysign(1, low_bound)
        )
        if low_bound > high_bound or zeros_reversed:
            raise InvalidArgument(
                "max_value",
                max_value,
                f"a value >= min_value={min_value!r}",
                hint="-0.0 counts as less than 0.0 here, as in Hypothesis."
                if zeros_reversed
                else None,
            )
    if allow_nan and (min_value is not None or max_value is not None):
        raise InvalidArgument("allow_nan", allow_nan, "False when min_value or max_value is given")
    if allow_infinity and not fmt.has_inf:
        raise InvalidArgument(
            "allow_infinity", allow_infinity, f"False for {fmt.name}, which has no infinities"
        )
    if allow_infinity and low_bound is not None and high_bound is not None:
        raise InvalidArgument(
            "allow_infinity", allow_infinity, "False when both min_value and max_value are given"
        )
    low, high, skip = position_bounds(fmt, low_bound, high_bound, allow_subnormal=allow_subnormal)
    if low > high:
        raise InvalidArgument(
            "allow_subnormal",
            allow_subnormal,
            f"True: every {fmt.name} value from min_value={min_value!r} to "
            f"max_value={max_value!r} is subnormal",
        )
    specials: list[float] = [math.nan] if allow_nan else []
    if allow_infinity and high_bound is None:
        specials.append(math.inf)
    if allow_infinity and low_bound is None:
        specials.append(-math.inf)
    sampler = GridSampler(
        fmt=fmt,
        low=low,
        high=high,
        skip=skip,
        corners=_allowed_corners(fmt, low, high, skip, tuple(specials)),
        specials=tuple(specials),
        corner_rate=SCALAR_CORNER_RATE,
        special_rate=SPECIAL_RATE,
        label=_call_text(fmt, min_value, max_value, allow_nan, allow_infinity, allow_subnormal),
    )
    return _strategy(sampler)


def corner_values(dtype: Any) -> st.SearchStrategy[float]:
    """The corner values of ``dtype`` as Python floats, shrinking toward 0.0.

    Both zeros; +-1 and its neighbours 1 + eps and 1 - eps/2; the smallest subnormal and its
    double, the largest subnormal, the smallest normal and its successor; the largest power of
    two, the largest finite number and its predecessor; the rounding ties of casts to every
    format of lower precision (1 + u, 1 + 3u, the overflow tie max + ulp/2 and the underflow
    tie smallest_subnormal/2 of that format, where they lie on ``dtype``'s grid); each finite
    one with both signs; +-inf where the format has them; NaN.
    """
    fmt = format_of(dtype, argument="dtype")
    return st.sampled_from(corner_list(fmt))


def float_dtypes(*, min_bits: int = 8, max_bits: int = 64) -> st.SearchStrategy[str]:
    """Canonical format names (``"float64"`` ... ``"float8_e5m2"``) of storage widths in
    [min_bits, max_bits], shrinking toward float64.

    Widths are 8, 16, 32 or 64. The names are accepted as ``dtype`` by every function of the
    package. tfloat32 is left out: it is a compute mode whose values are stored as float32.
    """
    for name, bits in (("min_bits", min_bits), ("max_bits", max_bits)):
        if not isinstance(bits, int) or isinstance(bits, bool) or bits not in _WIDTHS:
            raise InvalidArgument(name, bits, "one of 8, 16, 32, 64")
    if min_bits > max_bits:
        raise InvalidArgument("max_bits", max_bits, f"a width >= min_bits={min_bits}")
    names = [
        fmt.name for fmt in FORMATS.values() if fmt.storage and min_bits <= fmt.bits <= max_bits
    ]
    return st.sampled_from(names)


def _masked_array(
    positions: tuple[int, int], *, n: int, mask: float, unit: float, dtype: np.dtype[Any]
) -> NDArray[Any]:
    values = np.full(n, unit)
    plus, minus = positions
    values[plus] = mask
    values[minus] = -mask
    return values.astype(dtype)


def _two_distinct(pair: tuple[int, int]) -> tuple[int, int]:
    """(i, j) from i in [0, n) and j' in [0, n - 1): j' skips over i, so j != i."""
    first, second = pair
    return first, second + (second >= first)


def masked_all_one(
    n: int, *, dtype: Any = "float32", positions: tuple[int, int] | None = None
) -> st.SearchStrategy[NDArray[Any]]:
    """FPRev's masked all-one arrays (section 3.2): length ``n``, +M at one index, -M at
    another, the unit everywhere else, as NumPy arrays of ``dtype``'s storage type.

    M and the unit come from :func:`~pytest_fpcheck.formats.mask_and_unit` (section 8.1: in
    float16, for instance, the unit is 2**-24 and M is 2**15), which also bounds ``n``.
    ``positions=(i, j)`` pins +M at i and -M at j; otherwise both are drawn, shrinking toward
    (0, 1). In any summation order, the sum is the unit times the number of summands not
    masked: those outside the subtree where +M and -M meet.
    """
    fmt = format_of(dtype, argument="dtype")
    mask, unit = mask_and_unit(fmt, n)
    pinned = check_positions(positions, n)
    pairs = (
        st.just(pinned)
        if pinned is not None
        else st.tuples(st.integers(0, n - 1), st.integers(0, n - 2)).map(_two_distinct)
    )
    storage = numpy_dtype(fmt)
    return pairs.map(lambda pair: _masked_array(pair, n=n, mask=mask, unit=unit, dtype=storage))


def _converter(fmt: Format, backend: str) -> Callable[[NDArray[np.float64]], Any]:
    """The function turning float64 grid values into a ``backend`` array of ``fmt``."""
    if backend == "numpy":
        storage = numpy_dtype(fmt)
        return lambda values: values.astype(storage)
    try:
        import torch
    except ImportError:
        raise ImportError(
            "arrays(backend='torch') needs PyTorch, which is not installed: "
            "pip install pytest-fpcheck[torch]"
        ) from None
    torch_dtype = getattr(torch, numpy_dtype(fmt).name)
    return lambda values: torch.from_numpy(values).to(torch_dtype)


def _checked_on_grid(values: NDArray[np.float64], fmt: Format) -> NDArray[np.float64]:
    off_grid = ~is_on_grid(values, fmt)
    if off_grid.any():
        raise InvalidArgument(
            "elements",
            float(values[off_grid][0]),
            f"values exactly representable in {fmt.name}",
            hint=f"Draw them with fst.floats_on_grid({fmt.name!r}, ...).",
        )
    return values


def arrays(
    dtype: Any,
    shape: Any,
    *,
    elements: st.SearchStrategy[float] | None = None,
    backend: str = "numpy",
    corner_fraction: float = 0.1,
) -> st.SearchStrategy[Any]:
    """Arrays of ``dtype`` and ``shape``: NumPy arrays (ml_dtypes types for bfloat16 and the
    float8 formats, float32 for tfloat32), or PyTorch tensors with ``backend="torch"``.

    ``shape`` is an int, a tuple of ints or a strategy of either. Arrays are drawn as
    Hypothesis draws them (``hypothesis.extra.numpy.arrays``): a fill value, and a few
    positions drawn separately, so large arrays stay cheap and shrink well.

    ``elements`` defaults to ``floats_on_grid(dtype, allow_nan=True, allow_infinity=<dtype has
    infinities>)``. For a :func:`floats_on_grid` strategy, each drawn value (the fill value
    included) is an allowed corner value with probability ``corner_fraction`` instead of the
    strategy's own 1/16. Any other strategy is used as it is; its values must lie on
    ``dtype``'s grid (``InvalidArgument`` when drawn otherwise).
    """
    fmt = format_of(dtype, argument="dtype")
    if backend not in BACKENDS:
        raise InvalidArgument("backend", backend, "'numpy' or 'torch'")
    fraction = check_fraction(corner_fraction, "corner_fraction")
    if elements is None:
        elements = floats_on_grid(fmt, allow_nan=True, allow_infinity=fmt.has_inf)
    elif not isinstance(elements, st.SearchStrategy):
        raise InvalidArgument("elements", elements, "None or a Hypothesis strategy of floats")
    sampler = _SAMPLERS.get(elements)
    if sampler is not None and sampler.fmt != fmt:
        raise InvalidArgument(
            "elements",
            elements,
            f"a floats_on_grid strategy of the array's format {fmt.name}, not {sampler.fmt.name}",
            hint=f"Pass fst.floats_on_grid({fmt.name!r}, ...) with the same arguments.",
        )
    if sampler is not None:
        elements = _strategy(dataclasses.replace(sampler, corner_rate=fraction))
    convert = _converter(fmt, backend)
    trusted = sampler is not None
    element_strategy = elements

    def of_shape(sides: Any) -> st.SearchStrategy[Any]:
        values = xnp.arrays(
            np.float64, check_shape(sides), elements=element_strategy, fill=element_strategy
        )
        if trusted:
            return values.map(convert)
        return values.map(lambda drawn: convert(_checked_on_grid(drawn, fmt)))

    if isinstance(shape, st.SearchStrategy):
        return shape.flatmap(of_shape)
    return of_shape(shape)
