"""What a matrix multiply does with its bits: feature-targeted probes (FTTN, paper 004 sections 5
and 6.1), exported as ``fp.probe_matmul``.

``fp.probe_matmul(matmul, in_dtype=..., out_dtype=...)`` answers, for one output element of
``matmul(A, B)`` with ``A`` of shape (16, 64) and ``B`` of shape (64, 16):

1. **the accumulation order**, by FPRev (section 5.2: multiway nodes for fused multi-term sums)
   on masked inputs whose masks and units are chosen products of normal numbers (so that flushed
   subnormals and narrow formats do not spoil the queries; FPRev section 8.1). A block test on
   the same queries first looks for chains of fused ``w``-term blocks, whose full order FPRev
   reveals only in about ``w**2`` calls per block: for ``w <= 8`` the order of the first
   ``2w + 1`` terms is revealed, wider chains are taken from the block test (``order`` is None);
2. **every other feature**, by targeted probes (:mod:`.library`) run on that order: each
   candidate model of a fused multi-term adder (extra alignment bits or exact sums, rounding of
   each addition, subnormal inputs and results kept or flushed, products exact or rounded,
   accumulator format, rounding of the final conversion) predicts each probe's result bit for bit
   (:mod:`pytest_fpcheck.emulate`); the matmul's results leave the *consistent* candidates, and
   a feature is reported only when all of them agree on it, ``None`` otherwise. A matmul that no
   candidate explains gets ``None`` everywhere.

The block width is the revealed tree's fan-out minus one (the accumulator plus ``width``
products per node; 1 for IEEE additions), cross-checked by the targeted probes, which are run
on that tree: it is reported only when some candidate reproduces every probe. A probe costs at
most 200 calls of ``matmul`` (``MatmulFeatures.calls``).

``probe_torch_matmul(device, in_dtype)`` probes ``torch.matmul`` once per process per argument
set (the plugin's ``matmul_features`` fixture and ``--fpcheck-probe`` header use it).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import InvalidArgument
from ...formats import FORMATS, Format, format_of
from .calls import Budget, Caller, result_format
from .features import MAX_CALLS, PROBE_SHAPE, MatmulFeatures, features_of
from .library import Library, next_probe, normalise
from .reveal import reveal_element_order

if TYPE_CHECKING:
    from collections.abc import Callable

    from numpy.typing import NDArray

    from .library import Candidate

__all__ = ["probe_matmul", "probe_torch_matmul"]

_VERIFY = 12  # probes run after the candidates stop splitting (see _verify)


@functools.lru_cache(maxsize=32)
def _library(
    key: Any, in_name: str, out_name: str
) -> tuple[Library, NDArray[np.int64], list[Candidate]]:
    """The probes and candidates for an order: a tree's nested form, or the width of a chain of
    blocks over the probe's k terms (cached: a probe grid shares them)."""
    from ...emulate.models import chain_plan, tree_plan
    from ..order.tree import SummationTree
    from .library import build_library, candidates, ranks

    in_fmt, out = FORMATS[in_name], FORMATS[out_name]
    if isinstance(key, int):
        plan = chain_plan(PROBE_SHAPE[1], key, with_c=False)
    else:
        plan = tree_plan(SummationTree.from_nested(key, dtype=in_fmt), with_c=False)
    library = build_library(plan, in_fmt, out)
    return library, ranks(library.predictions), candidates(in_fmt, out)


def _input_format(in_dtype: Any) -> Format:
    in_fmt = format_of(in_dtype, argument="in_dtype")
    if in_fmt.precision > 24:
        raise InvalidArgument(
            "in_dtype",
            in_dtype,
            "a format of at most 24 bits: 'float32', 'tfloat32', 'float16', 'bfloat16', "
            "'float8_e4m3fn' or 'float8_e5m2'",
            hint="float64 matmuls are IEEE on every known device; fp.reveal_order gives their order.",
        )
    return in_fmt


def probe_matmul(
    matmul: Callable[[Any, Any], Any], *, in_dtype: Any, out_dtype: Any = None
) -> MatmulFeatures:
    """The numerical features of ``matmul`` (see the module docstring and :class:`MatmulFeatures`).

    ``matmul(a, b)`` gets NumPy arrays of ``in_dtype`` (ml_dtypes for bfloat16 and float8; float32
    arrays of tfloat32 values for ``'tfloat32'``) of shapes (16, 64) and (64, 16) and returns their
    product as a NumPy array, a PyTorch tensor or nested lists. ``out_dtype`` is the format of the
    results (``'float32'``, ``'float16'`` or ``'bfloat16'``), read from them when None. At most 200
    calls are made.
    """
    if not callable(matmul):
        raise InvalidArgument("matmul", matmul, "a callable matmul(a, b) -> a @ b")
    features = _probe(matmul, _input_format(in_dtype), out_dtype)
    from ...assertions.sink import publish

    publish("probes", features, in_dtype=str(in_dtype), out_dtype=features.out_dtype)
    return features


def _probe(matmul: Callable[[Any, Any], Any], in_fmt: Format, out_dtype: Any) -> MatmulFeatures:
    caller = Caller(matmul, in_fmt)
    out = result_format(caller, out_dtype)
    try:
        tree, width, notes = reveal_element_order(caller, in_fmt, out)
    except Budget:
        tree, width, notes = None, None, [f"the order needed more than {MAX_CALLS} calls"]
    if tree is not None and width is None:
        plan_key: Any = tree.to_nested()
    elif width is not None:
        plan_key = width
    else:
        return features_of(in_fmt, out, [], None, None, caller.calls, notes)
    library, ranked, cands = _library(plan_key, in_fmt.name, out.name)
    alive = np.arange(len(cands))
    while caller.calls < MAX_CALLS:
        j = next_probe(ranked, alive)
        if j is None:
            break
        same = _agreeing(caller, library, alive, j)
        if not same.any():
            notes.append(
                f"no fused multi-term model explains the result of a {library.kinds[j]!r} probe; "
                "every feature but the order is unknown"
            )
        alive = alive[same]
        if alive.size == 0:
            break
    alive = _verify(caller, library, alive, notes)
    consistent = [cands[c] for c in alive.tolist()]
    if width is None and tree is not None and tree.root != tree.n:
        width = tree.fanout() - 1
    elif tree is not None and tree.root == tree.n:
        notes.append(f"all {tree.n} terms meet in one fused sum: the width is at least {tree.n}")
    return features_of(in_fmt, out, consistent, tree, width, caller.calls, notes)


def _agreeing(
    caller: Caller, library: Library, alive: NDArray[np.int64], j: int
) -> NDArray[np.bool_]:
    """Run probe ``j``: for each candidate in ``alive``, whether it predicted the result (NaN
    predicting NaN)."""
    observed = normalise(np.array([caller(library.a[j], library.b[j])]))[0]
    predicted = library.predictions[alive, j]
    return (predicted == observed) | (np.isnan(predicted) & np.isnan(observed))  # type: ignore[no-any-return]


def _verify(
    caller: Caller, library: Library, alive: NDArray[np.int64], notes: list[str]
) -> NDArray[np.int64]:
    """Run up to ``_VERIFY`` more probes, one of each kind in turn, that the consistent candidates
    all predict alike: a matmul outside the model family is caught instead of being described by
    the first model that survived the splitting probes."""
    if alive.size == 0:
        return alive
    kinds = sorted(set(library.kinds))
    by_kind = {kind: [j for j, k in enumerate(library.kinds) if k == kind] for kind in kinds}
    run = 0
    for round_ in range(_VERIFY):
        for kind in kinds:
            if run >= _VERIFY or caller.calls >= MAX_CALLS or alive.size == 0:
                return alive
            probes = by_kind[kind]
            if round_ >= len(probes):
                continue
            j = probes[(round_ * 7919) % len(probes)]
            same = _agreeing(caller, library, alive, j)
            run += 1
            if not same.all():
                notes.append(
                    f"a {kind!r} probe contradicts {int((~same).sum())} of the models left: "
                    "no model of the family explains the matmul; every feature but the order "
                    "is unknown"
                )
                return alive[:0]
    return alive


def _torch_matmul(device: str, in_fmt: Format) -> Callable[[Any, Any], Any]:
    import torch

    from ..order.adapters import to_torch

    def matmul(a: NDArray[Any], b: NDArray[Any]) -> Any:
        ta, tb = to_torch(a, device), to_torch(b, device)
        if in_fmt.name != "tfloat32":
            return torch.matmul(ta, tb)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(ta, tb)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before

    return matmul


@functools.cache
def _probe_torch(device: str, in_name: str, out_name: str | None) -> MatmulFeatures:
    return probe_matmul(
        _torch_matmul(device, FORMATS[in_name]), in_dtype=in_name, out_dtype=out_name
    )


def probe_torch_matmul(device: str, in_dtype: Any, out_dtype: Any = None) -> MatmulFeatures:
    """:func:`probe_matmul` of ``torch.matmul`` on ``device`` (``'cpu'``, ``'cuda'``,
    ``'cuda:1'``...), once per process for each argument set. ``in_dtype='tfloat32'`` probes
    float32 matmuls with ``torch.backends.cuda.matmul.allow_tf32`` set during the calls."""
    if not isinstance(device, str) or not device:
        raise InvalidArgument("device", device, "a torch device name such as 'cpu' or 'cuda'")
    in_fmt = _input_format(in_dtype)
    out_name = None if out_dtype is None else format_of(out_dtype, argument="out_dtype").name
    return _probe_torch(device, in_fmt.name, out_name)
