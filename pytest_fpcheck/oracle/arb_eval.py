"""The ``"arb"`` oracle and ``fp.exact_reference``: a reference evaluated in ball arithmetic.

Dual-Delta paper, section 3.2.2: arbitrary precision "eliminates oracle error entirely"; ball
arithmetic (Johansson 2017) also proves it, since each result ball contains the exact result.
The rules:

* every floating input is taken at its exact value; each operation of the reference is carried
  out on Arb balls (:mod:`.arb_torch` when any argument is a PyTorch tensor, :mod:`.arb_numpy`
  otherwise), at 64 bits beyond the widest input format's precision, doubled until every result
  ball's relative radius is below ``rel_radius`` (default 2**-60) -- the precision rule of
  :func:`~pytest_fpcheck.oracle.arb_balls.adaptive`, which names the operation when a ball
  cannot be made narrow;
* :func:`arb_oracle` returns the result balls' midpoints rounded to the nearest float64 (what
  dual-delta compares against); a reference using an operation the Arb rules lack is evaluated
  by the mpmath oracle instead (from then on), and the mpmath error is shown only when mpmath
  lacks it too;
* :func:`exact_reference` returns the enclosure itself, as a :class:`~pytest_fpcheck.Bounds` of
  mode ``"exact"``: ``lo`` and ``hi`` are the balls' ends rounded outward to float64, ``value``
  the midpoints rounded to nearest. PyTorch references are also run in float64 on the way (the
  dispatch mode computes both), NumPy ones once more on their arguments promoted to float64;
  where that float64 evaluation is off by more than 2**-26
  (relative to the exact result, or absolute below 2**-1022) -- half of float64's significand
  lost, an error comparable with a float32 kernel's -- a note on the bounds calls the float64
  reference out, and every verdict judged against the bounds shows it.

python-flint (MIT; it bundles FLINT, LGPL-3) is an optional dependency (the ``arb`` extra):
this module imports it, and nothing imports this module before an Arb evaluation is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from flint import ctx
from numpy.typing import NDArray

from ..errors import InvalidArgument, describe_value
from ..formats import FORMATS, format_of
from . import arb_balls as balls
from .promote import contains_torch_tensor, is_floating_numpy, is_torch_tensor, promote_arguments
from .unsupported import UnsupportedOracleOperation

__all__ = ["arb_oracle", "exact_reference"]

_FLOAT64_WRONG = 2.0**-26
_TINY = 2.0**-1022


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: the result's balls (one array per returned array), its float64
    evaluation where one was made, and the working precision."""

    balls: list[Any]
    float64: list[NDArray[np.float64]] | None
    structure: Any
    bits: int


def _precisions(value: Any) -> list[int]:
    """The precision of each floating leaf of ``value`` (tensors, arrays, Python floats)."""
    if is_torch_tensor(value) and value.is_floating_point():
        return [format_of(value).precision]
    if is_floating_numpy(value) or isinstance(value, float):
        return [format_of(np.asarray(value)).precision]
    if isinstance(value, (tuple, list)):
        return [p for item in value for p in _precisions(item)]
    if isinstance(value, dict):
        return [p for item in value.values() for p in _precisions(item)]
    return []


def _name(function: Any) -> str:
    return str(getattr(function, "__name__", None) or function)


def _torch_evaluation(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    checked: bool = False,
) -> Evaluation:
    """One evaluation in :class:`ArbMode`; unchecked first, and checked (naming the operation
    that made a ball non-finite) when a result is not finite although every input is."""
    import torch
    from torch.utils._pytree import tree_flatten

    from .arb_torch import ArbMode

    mode = ArbMode(checked=checked)
    with mode:
        result = function(*args, **kwargs)
    leaves, structure = tree_flatten(result)
    if not leaves or not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in leaves):
        raise InvalidArgument(
            "fn",
            function,
            "a function returning a floating tensor (or a tuple / list of them): its exact "
            f"values are returned, and this one returned {describe_value(result)}",
        )
    values = [np.asarray(mode.values_of(t), dtype=object) for t in leaves]
    if not checked and not all(map(balls.all_finite, values)) and _finite_inputs((args, kwargs)):
        return _torch_evaluation(function, args, kwargs, checked=True)
    float64 = [t.detach().cpu().to(torch.float64).numpy() for t in leaves]
    return Evaluation(values, float64, structure, ctx.prec)


def _finite_inputs(value: Any) -> bool:
    """Whether every floating tensor in ``value`` (at any depth) is finite."""
    if is_torch_tensor(value):
        return not value.is_floating_point() or bool(value.isfinite().all())
    if isinstance(value, (tuple, list)):
        return all(_finite_inputs(item) for item in value)
    if isinstance(value, dict):
        return all(_finite_inputs(item) for item in value.values())
    return not isinstance(value, float) or math.isfinite(value)


def _numpy_evaluation(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Evaluation:
    from .arb_numpy import to_ball_array

    def promote(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(promote(item) for item in value)
        return to_ball_array(value)

    result = function(*promote(args), **kwargs)
    leaves = list(result) if isinstance(result, tuple) else [result]
    values = [np.asarray(leaf, dtype=object) for leaf in leaves]
    return Evaluation(values, None, tuple if isinstance(result, tuple) else None, ctx.prec)


def _evaluate(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    rel_radius: float,
    max_bits: int,
) -> Evaluation:
    first = balls.start_bits(_precisions((args, kwargs)))
    if contains_torch_tensor((args, kwargs)):
        promoted = promote_arguments(args), promote_arguments(kwargs)

        def attempt() -> Evaluation:
            return _torch_evaluation(function, *promoted)
    else:

        def attempt() -> Evaluation:
            return _numpy_evaluation(function, args, kwargs)

    return balls.adaptive(
        attempt,
        lambda evaluation: evaluation.balls,
        first_bits=min(first, max_bits),
        rel_radius=rel_radius,
        max_bits=max_bits,
        what=f"the result of {_name(function)}",
    )


def _check_options(rel_radius: Any, max_bits: Any) -> None:
    if (
        not isinstance(rel_radius, float)
        or not 0.0 < rel_radius < 1.0
        or not math.isfinite(rel_radius)
    ):
        raise InvalidArgument(
            "rel_radius", rel_radius, "a float in (0, 1): the largest relative radius accepted"
        )
    if not isinstance(max_bits, int) or isinstance(max_bits, bool) or max_bits < 64:
        raise InvalidArgument(
            "max_bits", max_bits, "an int >= 64 (the highest working precision, in bits)"
        )


def arb_oracle(
    reference: Callable[..., Any],
    *,
    rel_radius: float = balls.DEFAULT_REL_RADIUS,
    max_bits: int = balls.DEFAULT_MAX_BITS,
) -> Callable[..., Any]:
    """The Arb evaluation of ``reference``: ``oracle(*args)`` returns the result's balls'
    midpoints as a float64 NumPy array (rules in the module docstring)."""
    _check_options(rel_radius, max_bits)
    return _ArbOracle(reference, rel_radius, max_bits)


class _ArbOracle:
    """:func:`arb_oracle`'s callable: an instance, not a closure, so that it pickles wherever
    ``reference`` does (trials on a process pool). A reference Arb cannot evaluate falls back
    to mpmath, once for all later calls."""

    def __init__(self, reference: Callable[..., Any], rel_radius: float, max_bits: int) -> None:
        self.reference, self.rel_radius, self.max_bits = reference, rel_radius, max_bits
        self.fallback: Callable[..., Any] | None = None
        self.__name__ = self.__qualname__ = f"arb({_name(reference)})"

    def __call__(self, *args: Any) -> Any:
        reference = self.reference
        if self.fallback is not None:
            return self.fallback(*args)
        try:
            evaluation = _evaluate(reference, args, {}, self.rel_radius, self.max_bits)
        except UnsupportedOracleOperation as error:
            from .mpmath_eval import mpmath_oracle

            mpmath = mpmath_oracle(reference)
            try:
                result = mpmath(*args)
            except UnsupportedOracleOperation:
                raise error from None
            self.fallback = mpmath
            return result
        if evaluation.structure is not None and len(evaluation.balls) != 1:
            raise InvalidArgument(
                "reference",
                reference,
                "a function returning one array: the arb oracle returns that array's exact "
                f"values, and this one returned {len(evaluation.balls)}",
            )
        return balls.nearest(evaluation.balls[0])


def _float64_note(
    name: str, computed: NDArray[np.float64], exact: NDArray[np.float64]
) -> str | None:
    """The note calling out a float64 evaluation that is off (module docstring), or None."""
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(computed - exact)
        scale = np.maximum(np.abs(exact), _TINY)
        relative = np.where(computed == exact, 0.0, error / scale)
    relative = np.where(np.isnan(relative), np.inf, relative)
    wrong = relative > _FLOAT64_WRONG
    if not wrong.any():
        return None
    worst = int(np.argmax(relative))
    index = tuple(int(i) for i in np.unravel_index(worst, exact.shape))
    return (
        f"the float64 evaluation of {name} is off by more than 2**-26 (relative) at "
        f"{int(wrong.sum())} / {exact.size} elements; worst at index {index}: "
        f"{float(computed.flat[worst])!r} against the exact {float(exact.flat[worst])!r} "
        f"(relative error "
        f"{relative.flat[worst]:.3g}): a float64 reference is wrong there"
    )


def _numpy_float64(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[NDArray[np.float64]]:
    """The float64 evaluation of a NumPy function: on its arguments promoted to float64."""
    result = function(*promote_arguments(args), **kwargs)
    leaves = list(result) if isinstance(result, tuple) else [result]
    return [np.asarray(leaf, dtype=np.float64) for leaf in leaves]


def exact_reference(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """An enclosure of the mathematically exact result of ``fn(*args, **kwargs)``, every
    operation of ``fn`` carried out in Arb ball arithmetic: a :class:`~pytest_fpcheck.Bounds`
    of mode ``"exact"`` (a tuple of them when ``fn`` returns several arrays). Pass it as
    ``expected=`` to :func:`~pytest_fpcheck.classify` or
    :func:`~pytest_fpcheck.assert_roundoff_close` to judge a kernel against the exact result.
    Rules in the module docstring."""
    from ..interval.bounds import Bounds

    if not callable(fn):
        raise InvalidArgument("fn", fn, "a callable fn(*args, **kwargs) returning its result")
    evaluation = _evaluate(fn, args, kwargs, balls.DEFAULT_REL_RADIUS, balls.DEFAULT_MAX_BITS)
    name = _name(fn)
    float64 = evaluation.float64 or _numpy_float64(fn, args, kwargs)
    results = []
    for index, values in enumerate(evaluation.balls):
        lo, hi = balls.enclosure(values)
        value = balls.nearest(values)
        notes = [
            f"the exact result of {name}: Arb ball arithmetic at {evaluation.bits} bits, every "
            f"finite ball's relative radius below {balls.DEFAULT_REL_RADIUS:.3g}"
        ]
        note = _float64_note(name, float64[index], value)
        if note is not None:
            notes.append(note)
        results.append(
            Bounds(
                lo=lo,
                hi=hi,
                value=value,
                dtype=np.dtype(np.float64),
                format=FORMATS["float64"],
                mode="exact",
                notes=tuple(notes),
            )
        )
    return tuple(results) if _is_sequence(evaluation) else results[0]


def _is_sequence(evaluation: Evaluation) -> bool:
    structure = evaluation.structure
    return structure is tuple or getattr(structure, "type", None) in (tuple, list)
