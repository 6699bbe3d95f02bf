"""The pytest layer: options, markers, fixtures and the report header. Hooks only.

Settings are resolved once in ``pytest_configure`` into a frozen
:class:`~pytest_fpcheck.settings.Settings` kept in ``config.stash``; a bad option stops the run
with a usage error naming it. Everything numerical is imported inside the hook or fixture that
needs it, so loading the plugin costs (almost) nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .errors import InvalidArgument
from .settings import OPTIONS, Settings

if TYPE_CHECKING:
    from .fixture import FPCheckFixture

SETTINGS_KEY = pytest.StashKey[Settings]()

_MARKERS = (
    "fpcheck(**overrides): per-test overrides of the fpcheck options "
    "(nonfinite=, alpha=, dual_delta_n=, oracle=, seed=)",
    "dual_delta(custom, reference, inputs, oracle=, n=, params=[...]): a dual-delta accuracy "
    "test of custom against reference; one test per entry of params",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fpcheck", "floating-point checks (pytest-fpcheck)")
    for option in OPTIONS:
        if option.flag == "--fpcheck":
            group.addoption(option.flag, action="store_true", default=None, help=option.help)
        else:
            group.addoption(option.flag, dest=option.ini, default=None, help=option.help)
        parser.addini(option.ini, help=f"{option.help} (default: {option.default})")


def pytest_configure(config: pytest.Config) -> None:
    for marker in _MARKERS:
        config.addinivalue_line("markers", marker)
    raw: dict[str, Any] = {}
    for option in OPTIONS:
        flag_value = config.getoption(option.ini if option.flag != "--fpcheck" else "fpcheck")
        ini_value = config.getini(option.ini)
        if flag_value is not None:
            raw[option.field] = flag_value
        elif ini_value not in (None, "", []):
            raw[option.field] = ini_value
    try:
        config.stash[SETTINGS_KEY] = Settings.from_text(raw)
    except InvalidArgument as error:
        raise pytest.UsageError(f"pytest-fpcheck: {error}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    from .environment import numeric_environment

    settings = config.stash[SETTINGS_KEY]
    lines = numeric_environment(import_torch=settings.enabled).lines()
    lines.append(
        f"fpcheck: enabled={settings.enabled}, nonfinite={settings.nonfinite}, "
        f"oracle={settings.oracle}, alpha={settings.alpha}, "
        f"dual_delta_n={settings.dual_delta_n}, seed={settings.seed}"
    )
    return lines


def settings_for(item: pytest.Item) -> Settings:
    """The settings of one test: the run's, with its ``@pytest.mark.fpcheck`` overrides applied
    (the closest marker wins)."""
    settings = item.config.stash[SETTINGS_KEY]
    for marker in reversed(list(item.iter_markers("fpcheck"))):
        if marker.args:
            raise InvalidArgument(
                "@pytest.mark.fpcheck", marker.args, "keyword arguments only, e.g. nonfinite='off'"
            )
        settings = settings.with_overrides(marker.kwargs, source="@pytest.mark.fpcheck")
    return settings


@pytest.fixture
def fpcheck(request: pytest.FixtureRequest) -> FPCheckFixture:
    """The package's functions, bound to this test's settings (seed, alpha, oracle, n)."""
    from .fixture import FPCheckFixture

    return FPCheckFixture(settings_for(request.node), request.node.nodeid)
