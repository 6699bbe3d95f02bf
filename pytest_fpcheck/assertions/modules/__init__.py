"""Module-by-module checks (API section 9; RENDER section III-C, layer-level analysis made
automatic): :func:`compare_modules` and :func:`assert_modules_roundoff_close`.

:mod:`.reference` records the reference run, :mod:`.replay` runs each module call of the custom
model on the recorded inputs under tracking, :mod:`.result` holds what comes back and
:mod:`.structure` walks what modules take and return. Importing this package imports torch.
"""

from .compare import assert_modules_roundoff_close, compare_modules
from .result import ModuleCall, ModuleComparison

__all__ = ["ModuleCall", "ModuleComparison", "assert_modules_roundoff_close", "compare_modules"]
