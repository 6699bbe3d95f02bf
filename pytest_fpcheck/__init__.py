"""pytest-fpcheck: honest floating-point assertions for numerical code.

Everything public is importable from here (``import pytest_fpcheck as fp``). Names resolve lazily
(PEP 562): importing this package imports neither NumPy nor any heavy backend; each submodule loads
on first use of one of its names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    DualDeltaFailure,
    FPCheckError,
    InconclusiveVerdict,
    InternalError,
    InvalidArgument,
    NonFiniteAppeared,
    NonFiniteWarning,
    OutOfBoundsAccess,
    RoundoffMismatch,
    StaleBoundsError,
    UnsupportedOperation,
)

__version__ = "0.1.0"

# name -> (module, attribute); attribute None means the module itself.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "formats": ("pytest_fpcheck.formats", None),
    "Format": ("pytest_fpcheck.formats", "Format"),
    "format_of": ("pytest_fpcheck.formats", "format_of"),
    "interval": ("pytest_fpcheck.interval", None),
    "strategies": ("pytest_fpcheck.strategies", None),
    "dual_delta": ("pytest_fpcheck.dualdelta.run", "dual_delta"),
    "assert_dual_delta": ("pytest_fpcheck.dualdelta.run", "assert_dual_delta"),
    "DualDeltaResult": ("pytest_fpcheck.dualdelta.result", "DualDeltaResult"),
    "watch_nonfinite": ("pytest_fpcheck.diagnostics.nonfinite", "watch_nonfinite"),
    "Watch": ("pytest_fpcheck.diagnostics.nonfinite", "Watch"),
    "order": ("pytest_fpcheck.diagnostics.order", None),
    "reveal_order": ("pytest_fpcheck.diagnostics.order", "reveal_order"),
    "assert_same_order": ("pytest_fpcheck.diagnostics.order", "assert_same_order"),
    "SummationTree": ("pytest_fpcheck.diagnostics.order", "SummationTree"),
    "OrderMismatch": ("pytest_fpcheck.diagnostics.order", "OrderMismatch"),
    "OrderRevealError": ("pytest_fpcheck.diagnostics.order", "OrderRevealError"),
    "NondeterministicOrder": ("pytest_fpcheck.diagnostics.order", "NondeterministicOrder"),
    "emulate": ("pytest_fpcheck.emulate", None),
    "isolate": ("pytest_fpcheck.diagnostics.isolate", "isolate"),
    "Isolation": ("pytest_fpcheck.diagnostics.isolate", "Isolation"),
    "Site": ("pytest_fpcheck.diagnostics.isolate", "Site"),
    "probe_matmul": ("pytest_fpcheck.diagnostics.probe", "probe_matmul"),
    "MatmulFeatures": ("pytest_fpcheck.diagnostics.probe", "MatmulFeatures"),
    "Bounds": ("pytest_fpcheck.interval.bounds", "Bounds"),
    "track": ("pytest_fpcheck.tracking.track", "track"),
    "Tracker": ("pytest_fpcheck.tracking.torch.mode", "Tracker"),
    "bounds_of": ("pytest_fpcheck.tracking.track", "bounds_of"),
    "roundoff_bounds": ("pytest_fpcheck.tracking.track", "roundoff_bounds"),
    "hull": ("pytest_fpcheck.tracking.track", "hull"),
    "classify": ("pytest_fpcheck.assertions.verdict", "classify"),
    "stochastic_bounds": ("pytest_fpcheck.stochastic.run", "stochastic_bounds"),
    "Verdict": ("pytest_fpcheck.assertions.verdict", "Verdict"),
    "assert_roundoff_close": ("pytest_fpcheck.assertions.roundoff", "assert_roundoff_close"),
    "compare_modules": ("pytest_fpcheck.assertions.modules", "compare_modules"),
    "assert_modules_roundoff_close": (
        "pytest_fpcheck.assertions.modules",
        "assert_modules_roundoff_close",
    ),
    "ModuleComparison": ("pytest_fpcheck.assertions.modules", "ModuleComparison"),
    "ModuleCall": ("pytest_fpcheck.assertions.modules", "ModuleCall"),
    "exact_reference": ("pytest_fpcheck.oracle.exact", "exact_reference"),
}

__all__ = [
    "Bounds",
    "DualDeltaFailure",
    "DualDeltaResult",
    "FPCheckError",
    "Format",
    "InconclusiveVerdict",
    "InternalError",
    "InvalidArgument",
    "Isolation",
    "MatmulFeatures",
    "ModuleCall",
    "ModuleComparison",
    "NonFiniteAppeared",
    "NonFiniteWarning",
    "NondeterministicOrder",
    "OrderMismatch",
    "OrderRevealError",
    "OutOfBoundsAccess",
    "RoundoffMismatch",
    "Site",
    "StaleBoundsError",
    "SummationTree",
    "Tracker",
    "UnsupportedOperation",
    "Verdict",
    "Watch",
    "__version__",
    "assert_dual_delta",
    "assert_modules_roundoff_close",
    "assert_roundoff_close",
    "assert_same_order",
    "bounds_of",
    "classify",
    "compare_modules",
    "dual_delta",
    "emulate",
    "exact_reference",
    "format_of",
    "formats",
    "hull",
    "interval",
    "isolate",
    "order",
    "probe_matmul",
    "reveal_order",
    "roundoff_bounds",
    "stochastic_bounds",
    "strategies",
    "track",
    "watch_nonfinite",
]

if TYPE_CHECKING:
    from . import emulate as emulate
    from . import formats as formats
    from . import interval as interval
    from . import strategies as strategies
    from .assertions.modules import ModuleCall as ModuleCall
    from .assertions.modules import ModuleComparison as ModuleComparison
    from .assertions.modules import assert_modules_roundoff_close as assert_modules_roundoff_close
    from .assertions.modules import compare_modules as compare_modules
    from .assertions.roundoff import assert_roundoff_close as assert_roundoff_close
    from .assertions.verdict import Verdict as Verdict
    from .assertions.verdict import classify as classify
    from .diagnostics import order as order
    from .diagnostics.isolate import Isolation as Isolation
    from .diagnostics.isolate import Site as Site
    from .diagnostics.isolate import isolate as isolate
    from .diagnostics.nonfinite import Watch as Watch
    from .diagnostics.nonfinite import watch_nonfinite as watch_nonfinite
    from .diagnostics.order import NondeterministicOrder as NondeterministicOrder
    from .diagnostics.order import OrderMismatch as OrderMismatch
    from .diagnostics.order import OrderRevealError as OrderRevealError
    from .diagnostics.order import SummationTree as SummationTree
    from .diagnostics.order import assert_same_order as assert_same_order
    from .diagnostics.order import reveal_order as reveal_order
    from .diagnostics.probe import MatmulFeatures as MatmulFeatures
    from .diagnostics.probe import probe_matmul as probe_matmul
    from .dualdelta.result import DualDeltaResult as DualDeltaResult
    from .dualdelta.run import assert_dual_delta as assert_dual_delta
    from .dualdelta.run import dual_delta as dual_delta
    from .formats import Format as Format
    from .formats import format_of as format_of
    from .interval.bounds import Bounds as Bounds
    from .oracle.exact import exact_reference as exact_reference
    from .stochastic.run import stochastic_bounds as stochastic_bounds
    from .tracking.torch.mode import Tracker as Tracker
    from .tracking.track import bounds_of as bounds_of
    from .tracking.track import hull as hull
    from .tracking.track import roundoff_bounds as roundoff_bounds
    from .tracking.track import track as track


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'pytest_fpcheck' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
