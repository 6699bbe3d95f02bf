"""The run's settings: parsed once from ini options and flags, frozen, overridable per test.

Each option has one parser that turns its text (a command-line flag), its ini value or a Python
value (a ``@pytest.mark.fpcheck(...)`` keyword) into a checked value, or raises
:class:`~pytest_fpcheck.errors.InvalidArgument` naming the option, the value and what is valid.
Each ini option is registered with its type (``bool``, ``int``, ``float`` or ``string``), so
pytest reads it from ``pytest.ini`` and ``[tool.pytest.ini_options]`` (text it converts) and from
``[tool.pytest]`` (pytest 9's native TOML, where ``fpcheck = true`` is a boolean) alike.
This module imports neither pytest nor any numerical library: the plugin loads it at start-up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .assertions.threshold import DEFAULT_MAX_RESOLUTION, parse_max_resolution
from .errors import InvalidArgument

__all__ = ["NONFINITE_MODES", "OPTIONS", "ORACLES", "TRACK_MODES", "IniType", "Option", "Settings"]

#: The ini types pytest registers (``parser.addini(..., type=...)``) that the options use.
IniType = Literal["bool", "int", "float", "string"]

NONFINITE_MODES = ("off", "warn", "fail")
TRACK_MODES = ("auto", "always")
ORACLES = ("fp64", "mpmath", "arb")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise InvalidArgument(name, value, "a boolean (true/false, 1/0, yes/no, on/off)")


def _parse_choice(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(name: str, value: Any) -> str:
        text = value.strip().lower() if isinstance(value, str) else value
        if text not in choices:
            raise InvalidArgument(name, value, f"one of {', '.join(choices)}")
        return str(text)

    return parse


def _parse_alpha(name: str, value: Any) -> float:
    try:
        alpha = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        alpha = None
    if alpha is None or not 0.0 < alpha < 1.0:
        raise InvalidArgument(name, value, "a significance level strictly between 0 and 1")
    return alpha


def _parse_int(minimum: int, what: str) -> Callable[[str, Any], int]:
    def parse(name: str, value: Any) -> int:
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            number = int(value)
        if number is None or number < minimum:
            raise InvalidArgument(name, value, what)
        return number

    return parse


@dataclass(frozen=True)
class Option:
    """One setting: its field name, ini name, flag, default (as ini text), parser and ini type."""

    field: str
    ini: str
    flag: str
    default: str
    help: str
    parse: Callable[[str, Any], Any]
    #: a flag without a value (``--fpcheck``), its ini option a boolean
    switch: bool = False
    #: the type pytest reads the ini option as
    ini_type: IniType = "string"


OPTIONS: tuple[Option, ...] = (
    Option(
        "enabled",
        "fpcheck",
        "--fpcheck",
        "false",
        "run every test inside fp.track() and fp.watch_nonfinite()",
        _parse_bool,
        switch=True,
        ini_type="bool",
    ),
    Option(
        "nonfinite",
        "fpcheck_nonfinite",
        "--fpcheck-nonfinite",
        "warn",
        "what a NaN/Inf appearing in a test does under --fpcheck: off, warn or fail",
        _parse_choice(NONFINITE_MODES),
    ),
    Option(
        "alpha",
        "fpcheck_alpha",
        "--fpcheck-alpha",
        "0.01",
        "significance level of dual-delta tests",
        _parse_alpha,
        ini_type="float",
    ),
    Option(
        "dual_delta_n",
        "fpcheck_dual_delta_n",
        "--fpcheck-dual-delta-n",
        "1000",
        "number of trials of a dual-delta test",
        _parse_int(2, "an int >= 2 (the number of dual-delta trials)"),
        ini_type="int",
    ),
    Option(
        "oracle",
        "fpcheck_oracle",
        "--fpcheck-oracle",
        "fp64",
        "default oracle of dual-delta tests: fp64, mpmath or arb",
        _parse_choice(ORACLES),
    ),
    Option(
        "seed",
        "fpcheck_seed",
        "--fpcheck-seed",
        "0",
        "run seed; each test's seed derives from it and the test id",
        _parse_int(0, "a non-negative int"),
        ini_type="int",
    ),
    Option(
        "isolate",
        "fpcheck_isolate",
        "--fpcheck-isolate",
        "false",
        "when a round-off or dual-delta check fails, isolate the operations that cause it "
        "(fp.isolate) and add them to the failure",
        _parse_bool,
        switch=True,
        ini_type="bool",
    ),
    Option(
        "probe",
        "fpcheck_probe",
        "--fpcheck-probe",
        "false",
        "probe this machine's torch matmuls (fp.probe_matmul) and show their features in the "
        "report header",
        _parse_bool,
        switch=True,
        ini_type="bool",
    ),
    Option(
        "max_resolution",
        "fpcheck_max_resolution",
        "--fpcheck-max-resolution",
        "0.1",
        "the worst resolution (relative deviation an enclosure flags, median over the elements) "
        "a 'roundoff' verdict may have; a wider enclosure is 'inconclusive' (below 0.5)",
        parse_max_resolution,
        ini_type="float",
    ),
    Option(
        "strict",
        "fpcheck_strict",
        "--fpcheck-strict",
        "false",
        "under --fpcheck, raise UnsupportedOperation into the test where tracking meets an "
        "operation without a rule (or fails), instead of recording a gap (a test proving "
        "coverage)",
        _parse_bool,
        switch=True,
        ini_type="bool",
    ),
    Option(
        "track",
        "fpcheck_track",
        "--fpcheck-track",
        "auto",
        "which tests --fpcheck runs inside fp.track(): auto (those whose module, a conftest.py "
        "above it or a module it imports from the rootdir names pytest_fpcheck or fpcheck, and "
        "those using the fpcheck fixture) or always",
        _parse_choice(TRACK_MODES),
    ),
)
_BY_FIELD = {option.field: option for option in OPTIONS}


@dataclass(frozen=True)
class Settings:
    """The resolved settings of a run (or of one test, after its marker's overrides)."""

    enabled: bool = False
    nonfinite: str = "warn"
    alpha: float = 0.01
    dual_delta_n: int = 1000
    oracle: str = "fp64"
    seed: int = 0
    isolate: bool = False
    probe: bool = False
    max_resolution: float = DEFAULT_MAX_RESOLUTION
    strict: bool = False
    track: str = "auto"

    @classmethod
    def from_text(cls, values: dict[str, Any]) -> Settings:
        """Build from ``{field: raw value}``; a missing field takes its option's default.

        Each value is parsed by its option's parser; errors name the ini option."""
        parsed = {
            option.field: option.parse(
                f"{option.flag} / {option.ini}", values.get(option.field, option.default)
            )
            for option in OPTIONS
        }
        return cls(**parsed)

    def with_overrides(self, overrides: Mapping[str, Any], *, source: str) -> Settings:
        """These settings with ``overrides`` (keywords of ``@pytest.mark.fpcheck``) applied.

        Unknown keywords raise ``InvalidArgument`` listing the valid ones."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            option = _BY_FIELD.get(key)
            if option is None:
                raise InvalidArgument(
                    f"{source}({key}=...)", key, f"one of {', '.join(_BY_FIELD)}, allow"
                )
            changes[key] = option.parse(f"{source}({key}=...)", value)
        return dataclasses.replace(self, **changes)
