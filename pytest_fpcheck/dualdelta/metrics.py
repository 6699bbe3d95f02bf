"""Error metrics: the epsilon(y, y_oracle) of each trial (Dual-Delta paper, Definition 3 and
section 3.2.3).

Both outputs are first converted to float64 NumPy arrays (:func:`as_float64`: NumPy arrays of
any floating format, ml_dtypes included; PyTorch tensors of any dtype and device, copied to the
host; Python floats and nested lists) and must have the same shape. NaN and infinity positions
are compared before values (STYLE.md, principle 7): an element where the output and the oracle
hold the same non-finite value (both NaN, or the same infinity) has error 0; any other
non-finite element gives a non-finite error, which :func:`measure` refuses with a diagnosis.

The built-in metrics, with d_i = |y_i - o_i| and o the oracle's output:

* ``"max_hybrid"``: max_i d_i / (1 + |o_i|), the hybrid error of [Xie 2024] behind ``allclose``;
* ``"rel_norm"``: ||y - o||_2 / ||o||_2 over all elements (the Frobenius norm of a matrix). When
  ||o|| = 0 the error is 0 if y = o and undefined otherwise; an undefined error is refused;
* ``"max_abs"``: max_i d_i;
* ``"max_ulp"``: max_i d_i / ulp_F(o_i), the error in units in the last place of F, the format of
  the *custom* output (for both sides, so that they are comparable), where ulp_F(x) =
  2**(max(floor(log2 |x|), emin_F) - p_F + 1) (:func:`pytest_fpcheck.formats.ulp`): the spacing
  of F's grid at the exact value. A correctly rounded result has max_ulp <= 0.5.

An empty output has error 0. A callable ``metric(y, y_oracle) -> float`` receives the two
float64 arrays as they are (non-finite values included) and must return a finite number >= 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidArgument, describe_value
from ..formats import FORMATS, Format, format_of, ulp
from ..oracle.promote import is_torch_tensor

__all__ = ["METRIC_NAMES", "Metric", "as_float64", "measure", "output_format", "resolve_metric"]

Array = NDArray[np.float64]
METRIC_NAMES = ("max_hybrid", "rel_norm", "max_abs", "max_ulp")
_METRIC_EXPECTED = (
    "'max_hybrid', 'rel_norm', 'max_abs', 'max_ulp' or a callable metric(y, y_oracle) -> float"
)
_FLOAT64 = FORMATS["float64"]


def as_float64(value: Any, what: str) -> Array:
    """``value`` as a float64 NumPy array (the conversions of the module docstring)."""
    if is_torch_tensor(value):
        if value.is_complex():
            raise InvalidArgument(what, value, "real numbers, not complex ones")
        converted: Array = value.detach().to(device="cpu", dtype=_torch_float64()).numpy()
        return converted
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = np.asarray(None)
    if array.dtype.kind not in "fiub" and array.dtype.name not in FORMATS:
        raise InvalidArgument(
            what, value, "real numbers: an array, a tensor, a float or a nested list of floats"
        )
    return array.astype(np.float64, copy=False)


def _torch_float64() -> Any:
    import torch

    return torch.float64


def output_format(value: Any) -> Format:
    """The floating format of an implementation's output: its dtype's, float64 for Python
    floats and lists. Raises when the output has no floating format."""
    if is_torch_tensor(value) or isinstance(value, (np.ndarray, np.generic)):
        try:
            return format_of(value)
        except InvalidArgument:
            raise InvalidArgument(
                "metric",
                "max_ulp",
                "a metric that fits the custom output: max_ulp counts units in the last place "
                f"of custom's floating format, and custom returned {describe_value(value)}",
                hint="Use metric='max_hybrid' or 'max_abs'.",
            ) from None
    return _FLOAT64


def _agree(y: Array, oracle: Array) -> NDArray[np.bool_]:
    """Elements where output and oracle hold the same non-finite value."""
    same: NDArray[np.bool_] = (np.isnan(y) & np.isnan(oracle)) | (np.isinf(oracle) & (y == oracle))
    return same


def _maximum(values: Array) -> float:
    return float(np.max(values)) if values.size else 0.0


def _norm(values: Array) -> float:
    """The 2-norm, scaled by the largest magnitude so that squares cannot overflow."""
    largest = _maximum(np.abs(values))
    if largest == 0.0 or not math.isfinite(largest):
        return largest
    return largest * float(np.sqrt(np.sum(np.square(values / largest))))


def _hybrid_errors(y: Array, oracle: Array) -> Array:
    errors: Array = np.subtract(y, oracle, out=np.empty_like(y))
    np.abs(errors, out=errors)
    scale = np.abs(oracle)
    scale += 1.0
    errors /= scale
    return errors


def _ulp_errors(y: Array, oracle: Array, fmt: Format) -> Array:
    spacing = ulp(np.where(np.isfinite(oracle), oracle, 0.0), fmt)
    errors: Array = np.abs(y - oracle) / spacing
    return errors


def _maximum_of(errors: Callable[[], Array], y: Array, oracle: Array) -> float:
    """max of ``errors()``; when it is not finite, again with the elements where output and
    oracle hold the same non-finite value counted as 0 (the common, finite case costs no
    extra pass over the arrays)."""
    with np.errstate(invalid="ignore", over="ignore"):
        value = _maximum(errors())
        if math.isfinite(value):
            return value
        return _maximum(np.where(_agree(y, oracle), 0.0, errors()))


def max_hybrid(y: Array, oracle: Array, fmt: Format) -> float:
    """max_i |y_i - o_i| / (1 + |o_i|)."""
    return _maximum_of(lambda: _hybrid_errors(y, oracle), y, oracle)


def max_abs(y: Array, oracle: Array, fmt: Format) -> float:
    """max_i |y_i - o_i|."""
    return _maximum_of(lambda: np.abs(y - oracle), y, oracle)


def max_ulp(y: Array, oracle: Array, fmt: Format) -> float:
    """max_i |y_i - o_i| / ulp_fmt(o_i)."""
    return _maximum_of(lambda: _ulp_errors(y, oracle, fmt), y, oracle)


def rel_norm(y: Array, oracle: Array, fmt: Format) -> float:
    """||y - o|| / ||o|| (2-norm over all elements); 0 when both norms are 0, inf when only the
    oracle's is."""
    agree = _agree(y, oracle)
    with np.errstate(invalid="ignore", over="ignore"):
        error = _norm(np.where(agree, 0.0, np.abs(y - oracle)))
    size = _norm(np.where(agree, 0.0, oracle))
    if size == 0.0:
        return 0.0 if error == 0.0 else math.inf
    return error / size


_BUILT_IN: dict[str, Callable[[Array, Array, Format], float]] = {
    "max_hybrid": max_hybrid,
    "rel_norm": rel_norm,
    "max_abs": max_abs,
    "max_ulp": max_ulp,
}


@dataclass(frozen=True)
class Metric:
    """A resolved metric: its name, ``function(y, y_oracle, custom_format) -> float``, and
    whether it needs the custom output's format."""

    name: str
    function: Callable[[Array, Array, Format], float]
    needs_format: bool


def _user_metric(user: Callable[[Array, Array], Any], y: Array, oracle: Array, fmt: Format) -> Any:
    """A user's ``metric(y, oracle)`` (module level, so that trials on a process pool pickle
    it wherever the user's function pickles)."""
    return user(y, oracle)


def resolve_metric(metric: Any) -> Metric:
    """The :class:`Metric` named by ``metric``, or wrapping a callable one."""
    if isinstance(metric, str) and metric in _BUILT_IN:
        return Metric(metric, _BUILT_IN[metric], needs_format=metric == "max_ulp")
    if callable(metric) and not isinstance(metric, str):
        return Metric(
            getattr(metric, "__name__", repr(metric)),
            functools.partial(_user_metric, metric),
            needs_format=False,
        )
    raise InvalidArgument("metric", metric, _METRIC_EXPECTED)


def _nonfinite_reason(y: Array, oracle: Array) -> str:
    bad = ~_agree(y, oracle) & ~(np.isfinite(y) & np.isfinite(oracle))
    if not bad.any():
        return ""
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), y.shape))
    return (
        f"; the output holds {y[index].item()!r} at index {index} where the oracle holds "
        f"{oracle[index].item()!r}"
    )


def measure(metric: Metric, y: Array, oracle: Array, fmt: Format, side: str, trial: int) -> float:
    """``metric`` of one output against the oracle's, checked: same shapes, and a finite real
    number >= 0 as the result (otherwise InvalidArgument with the reason)."""
    if y.shape != oracle.shape:
        raise InvalidArgument(
            f"{side} output on trial {trial}",
            y,
            f"an array of the oracle output's shape {oracle.shape}",
        )
    raw = metric.function(y, oracle, fmt)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InvalidArgument(
            f"metric {metric.name!r} on trial {trial}", raw, "a real number (a float)"
        ) from None
    if math.isfinite(value) and value >= 0.0:
        return value
    reason = _nonfinite_reason(y, oracle)
    if not reason and metric.name == "rel_norm" and _norm(oracle) == 0.0:
        reason = "; the oracle's output is zero, so ||y - y_o|| / ||y_o|| is undefined"
    raise InvalidArgument(
        f"delta_{side}[{trial}]",
        value,
        f"a finite error >= 0 from metric {metric.name!r}{reason}",
        hint=(
            "Dual-delta statistics need finite errors: narrow the inputs, use "
            "metric='max_hybrid' (defined wherever the outputs are finite), or find where the "
            "value appears with fp.watch_nonfinite()."
        ),
    )
