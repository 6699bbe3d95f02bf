"""What the ``dual_delta`` marker means, apart from the hooks that apply it (API section 8).

``@pytest.mark.dual_delta(custom=..., reference=..., inputs=..., oracle=..., n=..., metric=...,
alpha=..., params=[...])`` makes a test a dual-delta comparison: before the test body runs, the
comparison is made (its result is the ``dual_delta_result`` fixture); after the body, the test
fails if the custom implementation is significantly less accurate or less stable. Each entry of
``params`` (a dict of the same keywords, or ``pytest.param(dict, id=...)``) makes one test with
those keywords overriding the marker's; ids are built from the entries' keys and values.
``oracle``, ``n`` and ``alpha`` default to the run's settings; the seed derives from the run seed
and the test id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InvalidArgument

__all__ = ["DUAL_DELTA_KEYWORDS", "case_id", "dual_delta_keywords", "split_params"]

DUAL_DELTA_KEYWORDS = ("custom", "reference", "inputs", "oracle", "n", "metric", "alpha")
_SOURCE = "@pytest.mark.dual_delta"


def _check_keys(values: Mapping[str, Any], where: str) -> None:
    for key in values:
        if key not in DUAL_DELTA_KEYWORDS:
            raise InvalidArgument(
                f"{where}({key}=...)", key, f"one of {', '.join(DUAL_DELTA_KEYWORDS)}"
            )


def split_params(marker_kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """(the marker's own keywords, its params entries); validates both."""
    kwargs = dict(marker_kwargs)
    params = kwargs.pop("params", None)
    _check_keys(kwargs, _SOURCE)
    if params is None:
        return kwargs, []
    if not isinstance(params, (list, tuple)) or not params:
        raise InvalidArgument(
            f"{_SOURCE}(params=...)", params, "a non-empty list of dicts of the marker's keywords"
        )
    return kwargs, list(params)


def _label(value: Any) -> str:
    name = getattr(value, "__name__", None)
    if name is not None and callable(value):
        return str(name)
    text = repr(value)
    return text if len(text) <= 20 else text[:17] + "..."


def case_id(entry: Mapping[str, Any]) -> str:
    """A readable test id for one params entry: ``key=value`` pairs joined by ``-``."""
    return "-".join(f"{key}={_label(value)}" for key, value in entry.items())


def dual_delta_keywords(base: Mapping[str, Any], entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The marker's keywords with one params entry applied; custom, reference and inputs are
    required."""
    if entry is not None:
        if not isinstance(entry, Mapping):
            raise InvalidArgument(
                f"{_SOURCE}(params=[...])", entry, "dicts of the marker's keywords"
            )
        _check_keys(entry, f"{_SOURCE}(params=[...])")
    merged = {**base, **(entry or {})}
    missing = [k for k in ("custom", "reference", "inputs") if k not in merged]
    if missing:
        raise InvalidArgument(
            _SOURCE,
            tuple(sorted(merged)),
            f"the keywords custom, reference and inputs (missing: {', '.join(missing)})",
        )
    return merged
