"""The threshold of an "inconclusive" verdict (issue 20; :mod:`.resolution` has the rule): the
worst resolution a "roundoff" verdict may have, a relative deviation below 1/2.

The default is :data:`DEFAULT_MAX_RESOLUTION`; a run sets its own with the
``fpcheck_max_resolution`` ini option (``--fpcheck-max-resolution``), which the plugin installs
around each test with :func:`run_default` (a context variable: per thread and per task). This
module imports nothing numerical: the settings parse the option with it at start-up.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from ..errors import InvalidArgument

__all__ = [
    "DEFAULT_MAX_RESOLUTION",
    "FACTOR_TWO",
    "check_max_resolution",
    "current_max_resolution",
    "parse_max_resolution",
    "run_default",
]

DEFAULT_MAX_RESOLUTION = 0.1
#: a factor of 2 either way (2 * value, value / 2) is a relative deviation of at least 1/2
FACTOR_TWO = 0.5

_RUN_DEFAULT: contextvars.ContextVar[float] = contextvars.ContextVar(
    "fpcheck_max_resolution", default=DEFAULT_MAX_RESOLUTION
)


def check_max_resolution(value: object, name: str = "max_resolution") -> float:
    """``value`` as a threshold: a number in ``(0, 1/2)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < FACTOR_TWO:
        raise InvalidArgument(
            name,
            value,
            "a relative deviation strictly between 0 and 0.5 (above it a 'roundoff' verdict "
            "could come from an enclosure that cannot reject a factor of 2)",
        )
    return float(value)


def current_max_resolution(value: float | None = None) -> float:
    """``value`` checked, or the run's default when it is None."""
    return _RUN_DEFAULT.get() if value is None else check_max_resolution(value)


@contextlib.contextmanager
def run_default(value: float) -> Iterator[None]:
    """Make ``value`` the default threshold inside the block (the plugin, around each test)."""
    token = _RUN_DEFAULT.set(check_max_resolution(value, "fpcheck_max_resolution"))
    try:
        yield
    finally:
        _RUN_DEFAULT.reset(token)


def parse_max_resolution(name: str, value: object) -> float:
    """The option's parser: a number, or its text, checked by :func:`check_max_resolution`."""
    if isinstance(value, str):
        try:
            return check_max_resolution(float(value), name)
        except ValueError:
            pass
    return check_max_resolution(value, name)
