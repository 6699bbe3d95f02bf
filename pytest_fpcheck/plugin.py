"""The pytest layer: options, markers, fixtures, the report header and the run report. Hooks only.

Settings are resolved once in ``pytest_configure`` into a frozen
:class:`~pytest_fpcheck.settings.Settings` kept in ``config.stash``; a bad option stops the run
with a usage error naming it (registering and reading the options and markers, and each test's
settings under its markers: :mod:`pytest_fpcheck.options`). Everything numerical is imported
inside the hook or fixture that needs it, so loading the plugin costs (almost) nothing.

The run report (:mod:`pytest_fpcheck.report`) collects, per test, the verdicts made and the
results published (:mod:`pytest_fpcheck.assertions.sink`) under ``--fpcheck``, the appearances of
the non-finite watch, and every ``dual_delta`` marker's comparison. Under pytest-xdist each
worker hands its part to the controller through ``config.workeroutput``; the controller merges
the parts in ``pytest_testnodedown`` and alone prints the summary and writes the report. With
``--fpcheck-report`` the report also holds every test's outcome, duration and, for a failure, its
traceback and captured output (``pytest_runtest_logreport``, on the process that writes it).
When pytest-html is loaded, each test's findings appear in its page too (an ``fpcheck`` column
and an extra with the details), through pytest-html's own hooks.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .errors import DualDeltaFailure, InvalidArgument, RoundoffMismatch
from .options import MARKERS, SETTINGS_KEY, add_options, allowed_sites, read_options, settings_for
from .selection import why_not_tracked

if TYPE_CHECKING:
    from .fixture import FPCheckFixture
    from .report import RunReport

REPORT_KEY = pytest.StashKey["RunReport"]()
REPORT_PATH_KEY = pytest.StashKey["Path | None"]()
TESTS_KEY = pytest.StashKey[dict[str, dict[str, Any]]]()  # tests whose phases are under way
FOUND_KEY = pytest.StashKey[dict[str, list[tuple[str, dict[str, Any]]]]]()  # for pytest-html
SOURCES_KEY = pytest.StashKey[dict[str, "str | None"]]()  # file name -> rootdir-relative path
STARTED_KEY = pytest.StashKey[float]()
DUAL_DELTA_KEY = pytest.StashKey[Any]()
DUAL_DELTA_RERUN_KEY = pytest.StashKey[Any]()
_CASE = "_fpcheck_dual_delta_case"
_WORKER_OUTPUT = "fpcheck_report"  # the key of a worker's report part in config.workeroutput
_PARAMETER_SET = type(pytest.param(None))  # what pytest.param returns


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    import time

    config.stash[STARTED_KEY] = time.monotonic()
    config.stash[SETTINGS_KEY], config.stash[REPORT_PATH_KEY] = read_options(config)
    if config.stash[REPORT_PATH_KEY] is not None and not _is_worker(config):
        from .report.outcomes import TestOutcomes

        config.pluginmanager.register(
            TestOutcomes(config, TESTS_KEY, lambda: _report(config)), "fpcheck-test-outcomes"
        )
    if config.pluginmanager.hasplugin("html"):
        config.stash[FOUND_KEY] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per entry of a dual_delta marker's ``params``."""
    marker = metafunc.definition.get_closest_marker("dual_delta")
    if marker is None or _CASE not in metafunc.fixturenames:
        return
    from .markers import case_id, split_params

    try:
        _, params = split_params(marker.kwargs)
    except InvalidArgument:
        return  # the fixture raises it again, as an error of this test alone
    if params:
        cases = [
            p
            if isinstance(p, _PARAMETER_SET)
            else pytest.param(p, id=case_id(p) if isinstance(p, dict) else None)
            for p in params
        ]
        metafunc.parametrize(_CASE, cases, indirect=True)


@pytest.fixture(autouse=True)
def _fpcheck_dual_delta_case(request: pytest.FixtureRequest) -> Any:
    """Runs a test's dual-delta comparison (when it has the marker) before its body."""
    marker = request.node.get_closest_marker("dual_delta")
    if marker is None:
        return None
    from . import dual_delta
    from .fixture import seed_for_test
    from .markers import dual_delta_keywords, split_params

    base, _ = split_params(marker.kwargs)
    entry = getattr(request, "param", None)
    keywords = dual_delta_keywords(base, entry)
    settings = settings_for(request.node)
    keywords.setdefault("oracle", settings.oracle)
    keywords.setdefault("n", settings.dual_delta_n)
    keywords.setdefault("alpha", settings.alpha)
    custom, reference = keywords.pop("custom"), keywords.pop("reference")
    seed = seed_for_test(settings.seed, request.node.nodeid)
    result = dual_delta(custom, reference, seed=seed, **keywords)
    request.node.stash[DUAL_DELTA_KEY] = result
    request.node.stash[DUAL_DELTA_RERUN_KEY] = functools.partial(
        dual_delta, custom, reference, seed=seed, **keywords
    )
    _add_dual_delta(request.config, request.node.nodeid, result, {})
    return result


def _add_dual_delta(
    config: pytest.Config, test_id: str, result: Any, context: dict[str, Any]
) -> None:
    """Report a dual-delta result, its figure drawn beside the report when there is one."""
    from .report.records import record_of

    record = record_of("dual_deltas", result, context)
    report_path = config.stash.get(REPORT_PATH_KEY, None)
    if report_path is not None:
        record["plot"] = _plot_beside(report_path, test_id, result)
    _add_entry(config, "dual_deltas", test_id, record)


def _plot_beside(report_path: Path, test_id: str, result: Any) -> str | None:
    """Draw a dual-delta result's figure next to the report (a test's second figure gets a
    ``-2`` suffix, and so on); None without matplotlib."""
    import importlib.util
    import re

    if importlib.util.find_spec("matplotlib") is None:
        return None
    folder = report_path.parent / f"{report_path.stem}-plots"
    folder.mkdir(exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_id).strip("_")
    path = folder / f"{stem}.png"
    number = 1
    while path.exists():
        number += 1
        path = folder / f"{stem}-{number}.png"
    result.plot(path)
    return str(path)


@pytest.fixture
def dual_delta_result(request: pytest.FixtureRequest, _fpcheck_dual_delta_case: Any) -> Any:
    """The DualDeltaResult of this test's ``@pytest.mark.dual_delta`` comparison."""
    if _fpcheck_dual_delta_case is None:
        raise pytest.UsageError(
            f"{request.node.nodeid}: the dual_delta_result fixture needs @pytest.mark.dual_delta(...)"
        )
    return _fpcheck_dual_delta_case


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A bad ``@pytest.mark.fpcheck`` keyword or value errors the test in its setup, before it
    runs (docs/plugin.md), as a bad ``dual_delta`` marker does at collection; found in the call
    it was a failure of the test."""
    settings_for(item)
    allowed_sites(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Collect the test's verdicts; under --fpcheck, run it inside fp.track(); fail a
    dual-delta test whose custom side is significantly worse."""
    from contextlib import ExitStack

    from .assertions.record import collecting
    from .assertions.sink import collecting as collecting_results
    from .assertions.threshold import run_default
    from .report.points import element_points

    settings = item.config.stash[SETTINGS_KEY]
    test_settings = settings_for(item)
    watches: list[Any] = []
    hook_failures: list[str] = []
    escaped: BaseException | None = None
    with ExitStack() as stack:
        verdicts = stack.enter_context(collecting(element_points))
        stack.enter_context(run_default(test_settings.max_resolution))
        if test_settings.enabled and "torch" in sys.modules:
            watches.append(_open_torch_blocks(stack, item, test_settings))
        elif test_settings.enabled:
            # nothing to watch yet: open the blocks if and when the test imports torch
            from .importhook import when_imported

            late = stack.enter_context(ExitStack())  # left where the blocks above would be

            def open_late() -> None:
                watches.append(_open_torch_blocks(late, item, test_settings))

            hook_failures = stack.enter_context(when_imported("torch", open_late))
        # entered after the plugin's own watch, left before it: what that watch hands to the
        # sink on leaving is judged by _judge_appearances, not collected as a test's own
        published = stack.enter_context(collecting_results())
        try:
            outcome = yield
        except (RoundoffMismatch, DualDeltaFailure) as failure:
            escaped = failure
            if test_settings.isolate:
                kept = len(verdicts), len(published)
                _add_isolation(item, failure, item.runtest)
                del verdicts[kept[0] :]  # the re-runs' own verdicts stay out of the report
                del published[kept[1] :]
            raise
        except BaseException as failure:
            escaped = failure
            raise
        finally:
            if settings.enabled and (verdicts or published):
                _add_results(item, verdicts, published, escaped)
    for text in hook_failures:
        _add_hook_failure(item, text)
    watch = watches[0] if watches else None
    if watch is not None:
        _judge_appearances(item, watch, test_settings.nonfinite)
    result = item.stash.get(DUAL_DELTA_KEY, None)
    if result is not None and result.failed:
        worse = DualDeltaFailure(result.failure_message(), result)
        if test_settings.isolate:
            from .diagnostics.isolate import failing_dual_delta

            _add_isolation(item, worse, failing_dual_delta(item.stash[DUAL_DELTA_RERUN_KEY]))
        raise worse
    return outcome


def _open_torch_blocks(stack: Any, item: pytest.Item, test_settings: Any) -> Any:
    """Enter the test's PyTorch blocks on ``stack`` (an ExitStack): the collection of its gaps,
    ``fp.track()`` where the test is tracked (or the note why not), the non-finite watch.
    Returns the watch, or None when it is off."""
    from .tracking.core import gaps

    found = stack.enter_context(gaps.collecting())
    stack.callback(_add_gaps, item, found)  # after the tracker hands its gaps over
    why_not = why_not_tracked(item, test_settings)
    if why_not is None:
        from .tracking.core.store import STORE
        from .tracking.track import track

        stack.callback(STORE.sweep)  # the test's dead bounds go with it
        stack.enter_context(track(strict=test_settings.strict))
    else:
        stack.enter_context(gaps.untracked(why_not))
    if test_settings.nonfinite == "off":
        return None
    from .diagnostics.nonfinite import watch_nonfinite

    return stack.enter_context(watch_nonfinite())


def _add_hook_failure(item: pytest.Item, failure: str) -> None:
    """Report that the blocks could not be opened when the test imported torch (a bug of
    this package; the test ran without them)."""
    from .report.records import record_of
    from .tracking.core.gaps import INTERNAL_FAILURE, Gap

    gap = Gap(
        op="import torch",
        reason=INTERNAL_FAILURE,
        count=1,
        site="import torch in the test",
        source=None,
        message="pytest-fpcheck could not open its blocks when the test imported torch; "
        "the rest of the test ran without them",
        traceback=failure,
    )
    _add_entry(item.config, "gaps", item.nodeid, record_of("gaps", gap))


def _add_gaps(item: pytest.Item, found: list[Any]) -> None:
    """Report what tracking could not bound in the test: one entry per operation and reason
    (counts over the test's trackers added up)."""
    from .report.records import record_of
    from .tracking.core.gaps import merge

    merged: dict[Any, Any] = {}
    merge(merged, found)
    for gap in merged.values():
        _add_entry(item.config, "gaps", item.nodeid, record_of("gaps", gap))


def _add_isolation(item: pytest.Item, failure: AssertionError, call: Any) -> None:
    """--fpcheck-isolate: find the operation sites whose float64 computation makes the failing
    ``call`` pass, add them to the failure's message and the run report."""
    from .diagnostics.isolate import isolate_test_call, isolation_note

    isolation = isolate_test_call(call, type(failure))
    failure.add_note(isolation_note(isolation))
    if item.config.stash[SETTINGS_KEY].enabled:
        from .report.records import record_of

        record = record_of("isolations", isolation, {"enhance": "float64"})
        _add_entry(item.config, "isolations", item.nodeid, record)


def _add_results(
    item: pytest.Item, verdicts: Any, published: list[Any], escaped: BaseException | None
) -> None:
    """Report what a test made: its verdicts (a bug whose RoundoffMismatch did not escape the
    test was caught: ``caught``), then each published result as its kind's record (a
    dual-delta result with its figure)."""
    from .report.records import provenance_sites, record_of, verdict_record

    uncaught = set()
    while escaped is not None:  # the failure, and what it was raised from or during
        if isinstance(escaped, RoundoffMismatch):
            uncaught.add(id(escaped.verdict))
        escaped = escaped.__cause__ or escaped.__context__
    elements = getattr(verdicts, "elements", {})
    resolve = functools.partial(_source_path, item)
    for verdict in verdicts:
        if hasattr(verdict, "judged"):  # a ModuleComparison: its calls' verdicts
            _add_module_comparison(item, verdict, id(verdict) not in uncaught)
            continue
        record = verdict_record(verdict)
        if verdict.kind == "bug" and id(verdict) not in uncaught:
            record["caught"] = True
        sites = provenance_sites(verdict.provenance, resolve)
        if sites:
            record["provenance_sites"] = sites
        if id(verdict) in elements:
            record["points"] = elements[id(verdict)]
        _add_entry(item.config, "verdicts", item.nodeid, record)
    for kind, result, context in published:
        if kind == "dual_deltas":
            _add_dual_delta(item.config, item.nodeid, result, context)
        elif kind == "appearances":  # from a watch_nonfinite() of the test's own
            record = record_of(kind, result, {"watch": "test", **context})
            _add_entry(item.config, kind, item.nodeid, record)
        else:
            _add_entry(item.config, kind, item.nodeid, record_of(kind, result, context))


def _add_module_comparison(item: pytest.Item, comparison: Any, caught: bool) -> None:
    """fp.compare_modules: each judged tensor of each module call as a verdict entry naming
    its module (``module``, ``module_class``, ``call``, ``label``); a report that has a
    ``modules`` kind gets the comparison's own record too."""
    from .report.kinds import kind_named
    from .report.records import verdict_record

    for call, label, verdict in comparison.judged():
        record = verdict_record(
            verdict, module=call.name, module_class=call.module_class, call=call.index, label=label
        )
        if verdict.kind == "bug" and caught:
            record["caught"] = True
        _add_entry(item.config, "verdicts", item.nodeid, record)
    if kind_named("modules") is not None:
        _add_entry(item.config, "modules", item.nodeid, comparison.to_dict())


def _add_entry(config: pytest.Config, kind: str, test_id: str, record: dict[str, Any]) -> None:
    """Add one entry to the run report, and keep it for the test's pytest-html row."""
    _report(config).add(kind, test_id, record)
    if FOUND_KEY in config.stash:
        config.stash[FOUND_KEY].setdefault(test_id, []).append((kind, record))


def _source_path(item: pytest.Item, name: str) -> str | None:
    """The rootdir-relative path of the source file called ``name`` in a provenance site: the
    test's own file, or the one module imported from under the rootdir with that name (None
    when there is none or more than one). The imported modules are searched once per name."""
    import os

    rootdir = item.config.rootpath
    if item.path.name == name:
        return (
            item.path.relative_to(rootdir).as_posix() if item.path.is_relative_to(rootdir) else None
        )
    known = item.config.stash.setdefault(SOURCES_KEY, {})
    if name not in known:
        found = {
            Path(file).resolve()
            for module in list(sys.modules.values())
            if (file := getattr(module, "__file__", None)) and os.path.basename(file) == name
        }
        inside = [path for path in found if path.is_relative_to(rootdir)]
        known[name] = inside[0].relative_to(rootdir).as_posix() if len(inside) == 1 else None
    return known[name]


#: What counts as a non-finite value for fpcheck_nonfinite (subnormals are finite: the watch
#: reports them, the plugin does not warn about them).
_JUDGED_KINDS = ("nan", "inf", "div0")
#: Operations that write a constant the program chose (a causal mask's -inf, a NaN fill): what
#: they produce is intended, not an appearance.
_CONSTANT_OPS = (
    "aten.scalar_tensor",
    "aten.full",
    "aten.full_like",
    "aten.new_full",
    "aten.fill",
    "aten.fill_",
    "aten.masked_fill",
    "aten.masked_fill_",
    "aten.lift_fresh",
    "aten.lift_fresh_copy",
)


def _judge_appearances(item: pytest.Item, watch: Any, mode: str) -> None:
    """Record the test's NaN, Inf and division-by-zero appearances (not constants the program
    wrote, not allowed sites); warn about them, or fail the test."""
    import fnmatch
    import warnings

    patterns = allowed_sites(item)
    appeared = [
        event
        for event in watch.appearances()
        if event.kind in _JUDGED_KINDS
        and event.op not in _CONSTANT_OPS
        and not any(fnmatch.fnmatch(f"{event.op} at {event.location}", p) for p in patterns)
    ]
    if not appeared:
        return
    from .report.records import appearance_record

    for event in appeared:
        record = appearance_record(event, watch="plugin")
        _add_entry(item.config, "appearances", item.nodeid, record)
    text = "non-finite values appeared in this test:\n" + "\n".join(
        f"  {event.summary()}" for event in appeared
    )
    if mode == "fail":
        from .errors import NonFiniteAppeared

        raise NonFiniteAppeared(
            text + "\n(allow expected sites with @pytest.mark.fpcheck(allow=[...]))"
        )
    from .errors import NonFiniteWarning

    # attributed to the test's own definition, not to this hook
    line = (item.location[1] or 0) + 1
    warnings.warn_explicit(NonFiniteWarning(text), NonFiniteWarning, str(item.path), line)


def _report(config: pytest.Config) -> RunReport:
    from .report import RunReport

    if REPORT_KEY not in config.stash:
        config.stash[REPORT_KEY] = RunReport()
    return config.stash[REPORT_KEY]


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workeroutput")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One table per kind of result (bugs and appearances first), 100 columns wide; -v widens
    the tables and lists every row. Entries exist only under --fpcheck or a dual_delta marker.
    Last, the path of the report written (relative to the current directory when below it)."""
    if _is_worker(config):
        return
    from .report.terminal import sections

    wide = config.get_verbosity() > 0
    entries = config.stash[REPORT_KEY].entries if REPORT_KEY in config.stash else {}
    for title, lines in sections(entries, width=160 if wide else 100, wide=wide):
        terminalreporter.write_sep("=", f"fpcheck: {title}")
        for line in lines:
            terminalreporter.write_line(line)
    path = config.stash.get(REPORT_PATH_KEY, None)
    if path is not None and path.is_file():
        shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
        terminalreporter.write_line(f"fpcheck: run report written to {shown}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist, on the controller: merge the report part of a worker that finished."""
    part = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT)
    if part:
        _report(node.config).merge(part)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the report (on a worker: hand its part to the controller instead)."""
    config = session.config
    if _is_worker(config):
        if REPORT_KEY in config.stash:
            config.workeroutput[_WORKER_OUTPUT] = config.stash[REPORT_KEY].part()  # type: ignore[attr-defined]
        return
    path = config.stash.get(REPORT_PATH_KEY, None)
    if path is None:
        return
    import time

    from .environment import numeric_environment

    report = _report(config)
    for test_id, record in config.stash.get(TESTS_KEY, {}).items():  # an interrupted run's
        report.add_test(test_id, record)
    settings = config.stash[SETTINGS_KEY]
    report.write(
        path,
        environment=numeric_environment(import_torch=settings.enabled).to_dict(),
        settings=dataclasses.asdict(settings),
        run={
            "rootdir": str(config.rootpath),
            "duration": round(time.monotonic() - config.stash[STARTED_KEY], 3),
            "exitstatus": int(session.exitstatus),
        },
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, Any]:
    """With pytest-html: the test's findings ride on its report (``fpcheck``, and an HTML
    extra with their details), so that they reach pytest-html's page, through xdist too."""
    report = yield
    if report.when != "call" or FOUND_KEY not in item.config.stash:
        return report
    found = item.config.stash[FOUND_KEY].pop(item.nodeid, None)
    if found:
        from .report.html import findings_fragment, findings_summary

        report.fpcheck = findings_summary(found)
        extras = list(getattr(report, "extras", []))
        extras.append(
            {"name": "fpcheck", "format_type": "html", "content": findings_fragment(found),
             "mime_type": None, "extension": None}
        )  # fmt: skip
        report.extras = extras
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_header(cells: list[str]) -> None:
    """pytest-html: an ``fpcheck`` column after the test's id."""
    cells.insert(2, '<th class="sortable" data-column-type="fpcheck">fpcheck</th>')


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_table_row(report: pytest.TestReport, cells: list[str]) -> None:
    """pytest-html: the test's findings (``2 verdicts: 1 bug, 1 roundoff``), or nothing."""
    from html import escape

    cells.insert(2, f'<td class="col-fpcheck">{escape(getattr(report, "fpcheck", ""))}</td>')


def pytest_report_header(config: pytest.Config) -> list[str]:
    from .environment import numeric_environment

    settings = config.stash[SETTINGS_KEY]
    lines = numeric_environment(import_torch=settings.enabled).lines()
    lines.append(
        f"fpcheck: enabled={settings.enabled}, nonfinite={settings.nonfinite}, "
        f"oracle={settings.oracle}, alpha={settings.alpha}, "
        f"dual_delta_n={settings.dual_delta_n}, seed={settings.seed}, "
        f"isolate={settings.isolate}"
    )
    if settings.probe:
        lines.extend(_probed_features())
    return lines


def _probed_features() -> list[str]:
    """--fpcheck-probe: one header line per probed torch matmul (CPU, and CUDA when present)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return ["fpcheck probes: torch is not installed, nothing to probe"]
    import torch

    from .diagnostics.probe import probe_torch_matmul

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    return [
        f"fpcheck probe {device} {probe_torch_matmul(device, dtype).header()}"
        for device in devices
        for dtype in ("float32", "float16", "bfloat16")
    ]


@pytest.fixture(scope="session")
def matmul_features() -> Any:
    """``matmul_features(device="cpu", dtype="float32", out_dtype=None)``: the probed
    :class:`~pytest_fpcheck.MatmulFeatures` of torch's matmul there, probed once per run."""
    from .diagnostics.probe import probe_torch_matmul

    def features(device: str = "cpu", dtype: Any = "float32", out_dtype: Any = None) -> Any:
        return probe_torch_matmul(device, dtype, out_dtype)

    return features


@pytest.fixture
def fpcheck(request: pytest.FixtureRequest) -> FPCheckFixture:
    """The package's functions, bound to this test's settings (seed, alpha, oracle, n)."""
    from .fixture import FPCheckFixture

    return FPCheckFixture(settings_for(request.node), request.node.nodeid)
