"""The plugin's options, ini keys and markers: registering them with pytest, reading them once
into the run's frozen :class:`~pytest_fpcheck.settings.Settings` (kept in ``config.stash``
under :data:`SETTINGS_KEY`), and each test's settings under its ``@pytest.mark.fpcheck``
overrides.

An option's command-line flag wins over its ini key, which wins over the option's own default
(the parsers and defaults are :data:`~pytest_fpcheck.settings.OPTIONS`). A value that cannot be
read stops the run with a usage error naming the option, the value and what is valid. This
module imports pytest and the settings only, so loading the plugin stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .errors import InvalidArgument
from .settings import OPTIONS, Settings

__all__ = [
    "MARKERS",
    "SETTINGS_KEY",
    "add_options",
    "allowed_sites",
    "read_options",
    "settings_for",
]

SETTINGS_KEY = pytest.StashKey[Settings]()
_REPORT_SUFFIXES = (".json", ".html")

#: the markers the plugin registers (``config.addinivalue_line("markers", ...)``)
MARKERS = (
    "fpcheck(**overrides): per-test overrides of the fpcheck options "
    "(nonfinite=, alpha=, dual_delta_n=, oracle=, seed=, isolate=, max_resolution=)",
    "dual_delta(custom, reference, inputs, oracle=, n=, params=[...]): a dual-delta accuracy "
    "test of custom against reference; one test per entry of params",
)


def add_options(parser: pytest.Parser) -> None:
    """Register each option's flag and ini key (the ini key typed, unset by default so that
    the option's own default applies), and ``--fpcheck-report``."""
    group = parser.getgroup("fpcheck", "floating-point checks (pytest-fpcheck)")
    for option in OPTIONS:
        if option.switch:
            group.addoption(
                option.flag, action="store_true", dest=option.ini, default=None, help=option.help
            )
        else:
            group.addoption(option.flag, dest=option.ini, default=None, help=option.help)
        parser.addini(
            option.ini,
            help=f"{option.help} (default: {option.default})",
            type=option.ini_type,
            default=None,  # unset: the option's own default applies
        )
    group.addoption(
        "--fpcheck-report",
        dest="fpcheck_report",
        default=None,
        metavar="PATH",
        help="write the run report to PATH: JSON (.json) or a self-contained HTML page (.html)",
    )


def read_options(config: pytest.Config) -> tuple[Settings, Path | None]:
    """The run's settings (each option from its flag, else its ini key, else its default) and
    the absolute path of the report to write (None without ``--fpcheck-report``); a bad value
    raises :class:`pytest.UsageError` naming it."""
    raw: dict[str, Any] = {}
    for option in OPTIONS:
        flag_value = config.getoption(option.ini)
        try:
            ini_value = config.getini(option.ini)
        except pytest.UsageError as error:  # a value pytest cannot read as the option's type
            raise pytest.UsageError(f"pytest-fpcheck: {option.ini}: {error}") from None
        if flag_value is not None:
            raw[option.field] = flag_value
        elif ini_value not in (None, ""):
            raw[option.field] = ini_value
    try:
        return Settings.from_text(raw), _report_path(config.getoption("fpcheck_report"))
    except InvalidArgument as error:
        raise pytest.UsageError(f"pytest-fpcheck: {error}") from None


def _report_path(value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if path.suffix not in _REPORT_SUFFIXES:
        raise InvalidArgument("--fpcheck-report", value, "a path ending in .json or .html")
    if not path.parent.resolve().is_dir():
        raise InvalidArgument(
            "--fpcheck-report", value, f"a path in an existing directory ({path.parent} is not one)"
        )
    return path.resolve()  # xdist workers may run elsewhere; plots are written beside it


def settings_for(item: pytest.Item) -> Settings:
    """The settings of one test: the run's, with its ``@pytest.mark.fpcheck`` overrides applied
    (the closest marker wins). ``allow=`` is read by :func:`allowed_sites`."""
    settings = item.config.stash[SETTINGS_KEY]
    for marker in reversed(list(item.iter_markers("fpcheck"))):
        if marker.args:
            raise InvalidArgument(
                "@pytest.mark.fpcheck", marker.args, "keyword arguments only, e.g. nonfinite='off'"
            )
        overrides = {k: v for k, v in marker.kwargs.items() if k != "allow"}
        settings = settings.with_overrides(overrides, source="@pytest.mark.fpcheck")
    return settings


def allowed_sites(item: pytest.Item) -> tuple[str, ...]:
    """``@pytest.mark.fpcheck(allow=[...])``: fnmatch patterns of expected non-finite sites,
    matched against "op at file:line in module" (e.g. "aten.log*", "*model.py:12*")."""
    patterns: list[str] = []
    for marker in item.iter_markers("fpcheck"):
        allow = marker.kwargs.get("allow", ())
        if isinstance(allow, str) or not all(isinstance(p, str) for p in allow):
            raise InvalidArgument(
                "@pytest.mark.fpcheck(allow=...)", allow, "a list of fnmatch patterns (strings)"
            )
        patterns.extend(allow)
    return tuple(patterns)
