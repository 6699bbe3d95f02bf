"""The pytest layer end to end: options, validation, header, markers, fixture, opting out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]


def checked_report(path: Path) -> dict[str, Any]:
    """A report the run wrote, checked against docs/report-schema.json."""
    import json

    import jsonschema

    from pytest_fpcheck.report import read_document

    schema = json.loads((Path(__file__).parents[1] / "docs/report-schema.json").read_text())
    document = read_document(path)
    jsonschema.validate(document, schema)
    return document


def test_header_shows_the_numeric_environment(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--fpcheck", "--fpcheck-seed=7")
    result.stdout.fnmatch_lines(
        [
            "fpcheck: numpy *",
            "fpcheck: triton TRITON_INTERPRET=*, default_dot_precision=*",
            "fpcheck: enabled=True, nonfinite=warn, oracle=fp64, alpha=0.01, dual_delta_n=1000, seed=7, isolate=False",
        ]
    )
    result.assert_outcomes(passed=1)


def test_header_reads_torch_flags_under_fpcheck(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest_subprocess("--fpcheck")
    result.stdout.fnmatch_lines(
        ["fpcheck: torch device=*, float32_matmul_precision=*, cuda.matmul.allow_tf32=*"]
    )


def test_ini_options_are_read(pytester: pytest.Pytester) -> None:
    pytester.makeini(
        """
        [pytest]
        fpcheck = true
        fpcheck_nonfinite = fail
        fpcheck_alpha = 0.05
        fpcheck_dual_delta_n = 200
        fpcheck_oracle = mpmath
        fpcheck_seed = 3
        """
    )
    pytester.makepyfile(
        """
        def test_settings(fpcheck):
            s = fpcheck.settings
            assert (s.enabled, s.nonfinite, s.alpha, s.dual_delta_n, s.oracle, s.seed) == (
                True, "fail", 0.05, 200, "mpmath", 3)
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


_SETTINGS_TEST = """
def test_settings(fpcheck):
    s = fpcheck.settings
    assert (s.enabled, s.nonfinite, s.alpha, s.dual_delta_n, s.oracle, s.seed, s.isolate) == (
        True, "fail", 0.05, 200, "mpmath", 3, False)
"""
#: The same settings written in each configuration format pytest reads: pytest 9's native TOML
#: (booleans and numbers as TOML values), pyproject.toml's ini-style table (values pytest turns
#: into text, the TOML values of a newcomer's copy-paste included) and pytest.ini.
_CONFIG_FILES = {
    "tool.pytest": (
        "pyproject.toml",
        """
        [tool.pytest]
        fpcheck = true
        fpcheck_nonfinite = "fail"
        fpcheck_alpha = 0.05
        fpcheck_dual_delta_n = 200
        fpcheck_oracle = "mpmath"
        fpcheck_seed = 3
        fpcheck_isolate = false
        """,
    ),
    "tool.pytest.ini_options": (
        "pyproject.toml",
        """
        [tool.pytest.ini_options]
        fpcheck = true
        fpcheck_nonfinite = "fail"
        fpcheck_alpha = 0.05
        fpcheck_dual_delta_n = "200"
        fpcheck_oracle = "mpmath"
        fpcheck_seed = 3
        fpcheck_isolate = "no"
        """,
    ),
    "pytest.ini": (
        "pytest.ini",
        """
        [pytest]
        fpcheck = yes
        fpcheck_nonfinite = fail
        fpcheck_alpha = 0.05
        fpcheck_dual_delta_n = 200
        fpcheck_oracle = mpmath
        fpcheck_seed = 3
        fpcheck_isolate = off
        """,
    ),
}


@pytest.mark.parametrize("kind", list(_CONFIG_FILES))
def test_typed_ini_options_in_each_config_format(pytester: pytest.Pytester, kind: str) -> None:
    name, text = _CONFIG_FILES[kind]
    pytester.makefile(Path(name).suffix, **{Path(name).stem: text})
    pytester.makepyfile(_SETTINGS_TEST)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([f"configfile: {name}"])
    result.assert_outcomes(passed=1)


def test_an_override_reads_as_text(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest]\nfpcheck_dual_delta_n = 200\nfpcheck = false\n")
    pytester.makepyfile(
        "def test_n(fpcheck):\n"
        "    assert (fpcheck.settings.dual_delta_n, fpcheck.settings.enabled) == (300, True)\n"
    )
    result = pytester.runpytest("-o", "fpcheck_dual_delta_n=300", "-o", "fpcheck=1")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "pyproject.toml",
            '[tool.pytest]\nfpcheck_dual_delta_n = "many"\n',
            "ERROR: pytest-fpcheck: fpcheck_dual_delta_n: */pyproject.toml: config option "
            "'fpcheck_dual_delta_n' expects an int, got str: 'many'",
        ),
        (
            "pyproject.toml",
            '[tool.pytest]\nfpcheck = "yes"\n',
            "ERROR: pytest-fpcheck: fpcheck: */pyproject.toml: config option 'fpcheck' expects "
            "a bool, got str: 'yes'",
        ),
        (
            "pytest.ini",
            "[pytest]\nfpcheck_alpha = small\n",
            "ERROR: pytest-fpcheck: fpcheck_alpha: could not convert string to float: 'small'",
        ),
        (
            "pytest.ini",
            "[pytest]\nfpcheck_seed = 1.5\n",
            "ERROR: pytest-fpcheck: fpcheck_seed: invalid literal for int() with base 10: '1.5'",
        ),
        (
            "pyproject.toml",
            "[tool.pytest]\nfpcheck_alpha = 2\n",
            "ERROR: pytest-fpcheck: --fpcheck-alpha / fpcheck_alpha=2 (type int) is not valid: "
            "expected a significance level strictly between 0 and 1.",
        ),
    ],
)
def test_an_ini_value_of_the_wrong_type_names_the_option(
    pytester: pytest.Pytester, name: str, text: str, message: str
) -> None:
    pytester.makefile(Path(name).suffix, **{Path(name).stem: text})
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_flags_override_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfpcheck_alpha = 0.05\n")
    pytester.makepyfile("def test_alpha(fpcheck):\n    assert fpcheck.settings.alpha == 0.2\n")
    pytester.runpytest("--fpcheck-alpha=0.2").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--fpcheck-alpha=2"],
            "ERROR: pytest-fpcheck: --fpcheck-alpha / fpcheck_alpha='2' (type str) is not valid: "
            "expected a significance level strictly between 0 and 1.",
        ),
        (
            ["--fpcheck-nonfinite=loud"],
            "ERROR: pytest-fpcheck: --fpcheck-nonfinite / fpcheck_nonfinite='loud' (type str) is "
            "not valid: expected one of off, warn, fail.",
        ),
        (
            ["--fpcheck-oracle=fp128"],
            "ERROR: pytest-fpcheck: --fpcheck-oracle / fpcheck_oracle='fp128' (type str) is not "
            "valid: expected one of fp64, mpmath, arb.",
        ),
        (
            ["--fpcheck-dual-delta-n=1"],
            "ERROR: pytest-fpcheck: --fpcheck-dual-delta-n / fpcheck_dual_delta_n='1' (type str) "
            "is not valid: expected an int >= 2 (the number of dual-delta trials).",
        ),
        (
            ["--fpcheck-seed=-4"],
            "ERROR: pytest-fpcheck: --fpcheck-seed / fpcheck_seed='-4' (type str) is not valid: "
            "expected a non-negative int.",
        ),
    ],
)
def test_bad_flags_stop_the_run_with_a_usage_error(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_ini_value_names_the_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfpcheck = maybe\n")
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-fpcheck: fpcheck: invalid truth value 'maybe'"])


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.fpcheck(**overrides):*", "@pytest.mark.dual_delta(*"]
    )


def test_marker_overrides_settings_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.fpcheck(alpha=0.1)

        @pytest.mark.fpcheck(nonfinite="off", seed=9)
        def test_overridden(fpcheck):
            assert fpcheck.settings.nonfinite == "off"
            assert fpcheck.settings.seed == 9
            assert fpcheck.settings.alpha == 0.1

        def test_module_level(fpcheck):
            assert fpcheck.settings.nonfinite == "warn"
            assert fpcheck.settings.alpha == 0.1
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            "fpcheck(nonfinite='loud')",
            "InvalidArgument: @pytest.mark.fpcheck(nonfinite=...)='loud' (type str) is not valid: "
            "expected one of off, warn, fail.",
        ),
        (
            "fpcheck(colour='red')",
            "InvalidArgument: @pytest.mark.fpcheck(colour=...)='colour' (type str) is not valid: "
            "expected one of enabled, nonfinite, alpha, dual_delta_n, oracle, seed, isolate, probe, max_resolution, strict, track, allow.",
        ),
        (
            "fpcheck('off')",
            "InvalidArgument: @pytest.mark.fpcheck=('off',) (type tuple) is not valid: expected "
            "keyword arguments only, e.g. nonfinite='off'.",
        ),
    ],
)
@pytest.mark.parametrize("fixture", ["fpcheck", ""])
def test_bad_marker_errors_the_test(
    pytester: pytest.Pytester, marker: str, message: str, fixture: str
) -> None:
    """With or without the fixture (without it, a hunt found the test FAILED in its call)."""
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}
        def test_marked({fixture}):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"E   *{message}"])


def test_fixture_seed_derives_from_run_seed_and_test_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_fpcheck.fixture import seed_for_test

        def test_a(fpcheck, request):
            assert fpcheck.seed == seed_for_test(5, request.node.nodeid)

        def test_b(fpcheck):
            assert fpcheck.seed != seed_for_test(5, "test_fixture_seed_derives_from_run_seed_and_test_id.py::test_a")
        """
    )
    pytester.runpytest("--fpcheck-seed=5").assert_outcomes(passed=2)


def test_seed_for_test_is_stable_across_processes() -> None:
    from pytest_fpcheck.fixture import seed_for_test

    assert seed_for_test(0, "tests/test_x.py::test_y") == 4194964198
    assert seed_for_test(1, "tests/test_x.py::test_y") != seed_for_test(
        0, "tests/test_x.py::test_y"
    )
    assert 0 <= seed_for_test(2**40, "t") < 2**32


def test_fixture_exposes_the_package_functions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import pytest_fpcheck as fp

        def test_passthrough(fpcheck):
            assert fpcheck.format_of is fp.format_of
            with pytest.raises(AttributeError, match="the fpcheck fixture has no attribute 'nope'"):
                fpcheck.nope
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


def test_plugin_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_uses_fixture(fpcheck): pass")
    result = pytester.runpytest("-p", "no:fpcheck")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'fpcheck' not found*"])
    result = pytester.runpytest("-p", "no:fpcheck", "--fpcheck")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


TRACKED_TEST = """
import torch
import pytest_fpcheck as fp

def test_half_matmul():
    torch.manual_seed(0)
    x = torch.randn(16, 64, dtype=torch.float16)
    w = torch.randn(64, 8, dtype=torch.float16)
    y = x @ w  # tracked: the plugin runs the test inside fp.track()
    assert fp.bounds_of(y) is not None
    fp.assert_roundoff_close(y, (x.double() @ w.double()))

def test_planted_bug():
    x = torch.ones(4)
    y = x * 3
    fp.assert_roundoff_close(y, torch.full((4,), 3.5))
"""


def test_fpcheck_tracks_tests_and_summarises_verdicts(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(test_tracked=TRACKED_TEST)
    report = pytester.path / "out.json"
    result = pytester.runpytest_subprocess("--fpcheck", f"--fpcheck-report={report}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= fpcheck: round-off verdicts =*",
            "verdict              outside dtype            radius  test",
            "bug                    4 / 4 float32               0  test_tracked.py::test_planted_bug",
            "roundoff             0 / 128 float16           0.166  test_tracked.py::test_half_matmul",
            "radius: median radius of the round-off enclosure, in ULPs of the result's format",
            "2 verdicts: 1 bug, 1 roundoff",
        ]
    )

    document = checked_report(report)
    assert document["schema"] == {"name": "pytest-fpcheck-report", "version": 3}
    assert document["counts"]["verdicts"] == {"bug": 1, "roundoff": 1}
    assert document["run"]["workers"] == 0
    assert {v["test"] for v in document["verdicts"]} == {
        "test_tracked.py::test_half_matmul",
        "test_tracked.py::test_planted_bug",
    }
    assert document["settings"]["enabled"] is True
    assert "numpy" in document["environment"]["versions"]


def test_without_fpcheck_nothing_is_tracked_or_printed(pytester: pytest.Pytester) -> None:
    pytest.importorskip("torch")
    pytester.makepyfile(
        """
        import torch
        import pytest_fpcheck as fp

        def test_untracked():
            y = torch.ones(3) * 3
            assert fp.bounds_of(y) is None
            assert fp.assert_roundoff_close(y, torch.full((3,), 3.0)).kind == "exact"
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    assert "round-off verdicts" not in result.stdout.str()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "out.txt",
            "--fpcheck-report='out.txt' (type str) is not valid: expected a path ending in .json or .html.",
        ),
        (
            "missing/out.json",
            "--fpcheck-report='missing/out.json' (type str) is not valid: expected a path in an existing directory (missing is not one).",
        ),
    ],
)
def test_bad_report_path(pytester: pytest.Pytester, value: str, message: str) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest(f"--fpcheck-report={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-fpcheck: {message}"])


DUAL_DELTA_TESTS = """
import numpy as np
import pytest

def exact_sum(x):
    return np.float32(np.sum(x.astype(np.float64)))

def naive_sum(x):
    total = np.float32(0)
    for v in x:
        total = np.float32(total + v)
    return total

def float16_sum(x):
    return np.float32(np.sum(x.astype(np.float16), dtype=np.float16))

def oracle(x):
    return np.sum(x.astype(np.float64))

def vectors(rng):
    return (rng.standard_normal(256).astype(np.float32),)

@pytest.mark.dual_delta(custom=naive_sum, reference=exact_sum, inputs=vectors, n=60, oracle=oracle)
def test_naive_sum(dual_delta_result):
    assert dual_delta_result.delta_custom.shape == (60,)

@pytest.mark.dual_delta(reference=exact_sum, inputs=vectors, n=60, oracle=oracle,
                        params=[{"custom": exact_sum}, {"custom": float16_sum}])
def test_params(dual_delta_result):
    pass
"""


def test_dual_delta_marker_expands_params_and_fails_worse_implementations(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_dd=DUAL_DELTA_TESTS)
    report = pytester.path / "run.json"
    result = pytester.runpytest("-v", "--fpcheck-oracle=fp64", f"--fpcheck-report={report}")
    output = result.stdout.str()
    assert "test_dd.py::test_params[custom=exact_sum] PASSED" in output
    assert "test_dd.py::test_params[custom=float16_sum] FAILED" in output
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 2  # the naive loop and the float16 sum are both less accurate
    assert outcomes["passed"] == 1
    result.stdout.fnmatch_lines(["*DualDeltaFailure*", "*= fpcheck: dual-delta comparisons =*"])

    entries = checked_report(report)["dual_deltas"]
    assert len(entries) == 3
    assert {e["accuracy"] for e in entries} == {"equivalent", "custom_less_accurate"}
    for entry in entries:
        assert entry["plot"].endswith(".png")
        assert Path(entry["plot"]).exists()


def test_fpcheck_fixture_binds_dual_delta_to_the_run_settings(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import numpy as np

        def test_bound(fpcheck):
            result = fpcheck.dual_delta(
                lambda x: np.float32(x.sum()), lambda x: np.float32(x.sum()),
                inputs=lambda rng: (rng.standard_normal(8).astype(np.float32),),
                oracle=lambda x: x.astype(np.float64).sum(),
            )
            assert result.n == 40
            assert result.alpha == 0.05
            assert result.seed == fpcheck.seed
            assert result.accuracy == "equivalent"
        """
    )
    pytester.runpytest_subprocess(
        "--fpcheck-dual-delta-n=40", "--fpcheck-alpha=0.05"
    ).assert_outcomes(passed=1)


def test_dual_delta_marker_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dual_delta(custom=abs, reference=abs, inputs=lambda rng: (1.0,), speed=3)
        def test_bad(): pass

        @pytest.mark.dual_delta(custom=abs, inputs=lambda rng: (1.0,))
        def test_missing(): pass

        def test_fixture_without_marker(dual_delta_result): pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.dual_delta(speed=...)='speed' (type str) is not valid: expected one of custom, reference, inputs, oracle, n, metric, alpha.*",
            "*expected the keywords custom, reference and inputs (missing: reference).*",
            "*the dual_delta_result fixture needs @pytest.mark.dual_delta(...)*",
        ]
    )


NONFINITE_TESTS = """
import pytest
import torch

def hidden_nan():
    x = torch.tensor([1.0, -1.0, 4.0])
    y = torch.sqrt(x)                      # NaN appears here
    return torch.nan_to_num(y, nan=0.0)    # and is hidden here

def test_hidden():
    assert torch.isfinite(hidden_nan()).all()

@pytest.mark.fpcheck(nonfinite="off")
def test_opted_out():
    hidden_nan()

@pytest.mark.fpcheck(allow=["aten.sqrt*"])
def test_allowed():
    hidden_nan()

def test_clean():
    torch.ones(3).exp()
"""


def test_nonfinite_warn_is_the_default_under_fpcheck(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nf=NONFINITE_TESTS)
    report = pytester.path / "run.json"
    result = pytester.runpytest_subprocess(
        "--fpcheck", f"--fpcheck-report={report}", "-W", "default"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*NonFiniteWarning: non-finite values appeared in this test:",
            "*NaN appeared in aten.sqrt at test_nf.py:6 [[]FP32[]]: 1 value in 1 call",
            "*= fpcheck: non-finite values that appeared =*",
            "kind  op                        values  test",
            "NaN   aten.sqrt                      1  test_nf.py::test_hidden",
            "    at test_nf.py:6: y = torch.sqrt(x)                      # NaN appears here",
            "1 appearance: 1 nan",
        ]
    )

    entries = checked_report(report)["appearances"]
    assert [(e["test"], e["kind"], e["op"], e["count"]) for e in entries] == [
        ("test_nf.py::test_hidden", "nan", "aten.sqrt", 1)
    ]
    assert (
        entries[0]["summary"]
        == "NaN appeared in aten.sqrt at test_nf.py:6 [FP32]: 1 value in 1 call"
    )


def test_nonfinite_fail_fails_a_test_whose_assertions_passed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nf=NONFINITE_TESTS)
    result = pytester.runpytest_subprocess("--fpcheck", "--fpcheck-nonfinite=fail")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*NonFiniteAppeared: non-finite values appeared in this test:*"])


def test_bad_allow_list(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest, torch

        @pytest.mark.fpcheck(allow="aten.sqrt")
        def test_bad():
            torch.ones(2).exp()
        """
    )
    result = pytester.runpytest_subprocess("--fpcheck")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.fpcheck(allow=...)='aten.sqrt' (type str) is not valid: expected a list of fnmatch patterns (strings).*"
        ]
    )


def test_fpcheck_isolate_appends_the_culprit_sites_to_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import torch
        import pytest_fpcheck as fp

        def shifted(x):
            big = x + 1e5
            return big - 1e5

        def test_cancellation():
            torch.manual_seed(0)
            x = torch.rand(16) + 0.5
            fp.assert_roundoff_close(shifted(x), x.double(), rtol=1e-4, atol=1e-4)
        """
    )
    result = pytester.runpytest_subprocess("--fpcheck-isolate", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*isolate (CIEL): 2 of 3 operation sites, in float64, resolve the inconsistency*",
            "*aten.add #1 at test_fpcheck_isolate_appends_the_culprit_sites_to_a_failure.py:5*",
            "*aten.sub #2 at test_fpcheck_isolate_appends_the_culprit_sites_to_a_failure.py:6*",
        ]
    )
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    plain.assert_outcomes(failed=1)
    assert "isolate (CIEL)" not in plain.stdout.str()


def test_fpcheck_probe_shows_the_features_and_the_fixture_probes_on_demand(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_features(matmul_features):
            features = matmul_features("cpu", "float16")
            assert features.products_exact is True
            assert features.in_dtype == "float16"
            assert matmul_features("cpu", "float16") is features  # probed once per run
        """
    )
    result = pytester.runpytest_subprocess("--fpcheck-probe", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "fpcheck probe cpu matmul float32->float32: width=* rounding=*",
            "fpcheck probe cpu matmul float16->float16: width=* rounding=*",
            "fpcheck probe cpu matmul bfloat16->bfloat16: width=* rounding=*",
        ]
    )
