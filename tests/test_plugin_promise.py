"""The plugin's promise (issue 17), end to end: ``pytest --fpcheck`` on tests written by someone
who never heard of fpcheck changes no outcome (``torch.compile(..., fullgraph=True)`` included); what tracking could not bound is listed in the
run report and the terminal summary; ``--fpcheck-strict`` raises as before; a test that cannot
ask for a verdict is not tracked (``--fpcheck-track=auto``), and a verdict asked there anyway
says why it has no bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_fpcheck.report import read_document

pytest.importorskip("torch")

SCHEMA = json.loads((Path(__file__).parents[1] / "docs/report-schema.json").read_text())

#: tests in the style of third-party PyTorch libraries (no mention of this package anywhere)
FOREIGN = """
import pytest
import torch
import torch.nn.functional as F


@torch.library.custom_op("foreign::scaled", mutates_args=())
def scaled(x: torch.Tensor) -> torch.Tensor:
    return x * 1.5


def rotary(dim, length, base=10000):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    freqs = torch.outer(torch.arange(length).float(), inv_freq)
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1)


def test_rotary_embedding():
    table = rotary(8, 5)
    assert table.shape == (5, 8)
    assert torch.allclose(table[0, :4], torch.ones(4))


def test_cross_entropy_on_3d_logits():
    torch.manual_seed(0)
    logits = torch.randn(2, 7, 5, requires_grad=True)  # (batch, classes, positions)
    target = torch.randint(0, 7, (2, 5))
    loss = F.cross_entropy(logits, target)
    loss.backward()
    assert loss.item() > 0
    assert logits.grad.shape == logits.shape


def test_integer_work():
    codes = torch.arange(12).cumsum(0) % 5
    assert codes.max() < 5
    assert (2 ** torch.arange(6)).tolist() == [1, 2, 4, 8, 16, 32]


def test_sampling():
    torch.manual_seed(1)
    probs = torch.softmax(torch.randn(3, 6), dim=-1)
    draws = torch.multinomial(probs, 4, replacement=True)
    noise = torch.normal(torch.zeros(3), probs[:, 0])
    assert draws.shape == (3, 4)
    assert torch.isfinite(noise).all()


def test_custom_op():
    assert torch.equal(scaled(torch.ones(2)), torch.full((2,), 1.5))


def test_compiled_fullgraph():
    layer = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.GELU())
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 4)
    assert torch.allclose(compiled(x), layer(x))
    scaled = torch.compile(lambda t: torch.softmax(t * 2, -1), fullgraph=True, backend="eager")
    assert torch.allclose(scaled(x).sum(-1), torch.ones(2))


def test_sparse_and_nested_layouts():
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([3.0, 4.0]), (2, 2))
    assert (coo @ torch.ones(2, 1)).flatten().tolist() == [3.0, 4.0]
    csr = torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse_csr()
    assert (csr @ torch.ones(2, 1)).flatten().tolist() == [2.0, 3.0]
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]) * 2
    assert nested.is_nested


def test_fake_and_meta_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.randn(3, 3)
        y = x @ x
    assert y.shape == (3, 3)
    z = torch.empty(3, 4, device="meta") @ torch.empty(4, 2, device="meta")
    assert z.shape == (3, 2)


def test_a_real_failure():
    assert torch.ones(2).sum() == 3


@pytest.mark.xfail(strict=True)
def test_expected_to_fail():
    torch.mm(torch.ones(2, 3), torch.ones(2, 3))
"""

OUTCOMES = {"passed": 8, "failed": 1, "xfailed": 1}


def _report(path: Path) -> dict[str, Any]:
    document = read_document(path)
    jsonschema.validate(document, SCHEMA)
    return document


@pytest.mark.parametrize(
    "flags",
    [(), ("--fpcheck",), ("--fpcheck", "--fpcheck-track=always")],
    ids=["plain", "fpcheck", "tracked"],
)
def test_foreign_tests_keep_their_outcomes(pytester: pytest.Pytester, flags) -> None:
    pytester.makepyfile(test_foreign=FOREIGN)
    result = pytester.runpytest_subprocess("-p", "no:xdist", *flags)
    result.assert_outcomes(**OUTCOMES)


def test_gaps_are_listed_with_count_and_first_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_foreign=FOREIGN)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck", "--fpcheck-track=always", "--fpcheck-report=run.json"
    )
    result.assert_outcomes(**OUTCOMES)
    document = _report(pytester.path / "run.json")
    gaps = [g for g in document["gaps"] if g["op"] == "foreign.scaled.default"]
    assert len(gaps) == 1
    (gap,) = gaps
    assert gap["test"] == "test_foreign.py::test_custom_op"
    assert gap["reason"] == "no rule"
    assert gap["count"] == 1
    assert Path(gap["file"]).name == "test_foreign.py"
    lines = (pytester.path / "test_foreign.py").read_text().splitlines()
    assert lines[gap["line"] - 1] == (
        "    assert torch.equal(scaled(torch.ones(2)), torch.full((2,), 1.5))"
    )
    assert document["counts"]["gaps"]["no rule"] >= 1
    compiled = {g["op"]: g for g in document["gaps"] if g["reason"] == "torch.compile region"}
    assert set(compiled) == {"torch.compile(Sequential)", "torch.compile(<lambda>)"}
    assert all(g["test"] == "test_foreign.py::test_compiled_fullgraph" for g in compiled.values())
    assert lines[compiled["torch.compile(Sequential)"]["line"] - 1] == (
        "    assert torch.allclose(compiled(x), layer(x))"
    )
    assert "internal failure" not in document["counts"]["gaps"]  # no tracker bug met here
    result.stdout.fnmatch_lines(
        [
            "*fpcheck: operations tracking could not bound*",
            "*no rule*foreign.scaled.default*1*test_foreign.py:*",
        ]
    )


def test_strict_raises_into_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_foreign=FOREIGN)
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--fpcheck", "--fpcheck-track=always", "--fpcheck-strict",
        "-k", "custom_op",
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*UnsupportedOperation*foreign.scaled.default*"])
    pytester.makeini("[pytest]\nfpcheck = true\nfpcheck_track = always\nfpcheck_strict = true\n")
    pytester.runpytest_subprocess("-p", "no:xdist", "-k", "custom_op").assert_outcomes(failed=1)
    pytester.makeini("[pytest]\nfpcheck_strict = maybe\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.stderr.fnmatch_lines(["*fpcheck_strict*"])


def test_only_tests_that_can_ask_for_a_verdict_are_tracked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        helper="""
        import pytest_fpcheck as fp

        def bounded(t):
            return fp.bounds_of(t) is not None
        """,
        test_own="""
        import torch
        import pytest_fpcheck as fp

        def test_module_names_the_package():
            assert fp.bounds_of(torch.ones(3) / 3) is not None

        def test_forced_off_by_nothing(fpcheck):
            assert fp.bounds_of(torch.ones(3) / 3) is not None
        """,
        test_helper="""
        import torch
        from helper import bounded

        def test_through_a_helper_module():
            assert bounded(torch.ones(3) / 3)
        """,
        test_foreign="""
        import importlib
        import torch

        api = importlib.import_module("pytest_" + "fp" + "check")

        def test_untracked():
            x = torch.ones(3) / 3
            assert api.bounds_of(x) is None
            verdict = api.classify(x, x.double() * (1 + 1e-9))
            assert verdict.kind == "close"
            assert any("did not track this test" in note for note in verdict.notes)
        """,
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--fpcheck", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--fpcheck-track=bogus", "--fpcheck")
    result.stderr.fnmatch_lines(["*--fpcheck-track / fpcheck_track*one of auto, always*"])


#: a test that imports torch in its body: no conftest or module-level import loads it first
LATE_IMPORT = """
import sys


def test_a_never_uses_torch():
    assert "torch" not in sys.modules


def test_b_imports_torch():
    assert "torch" not in sys.modules
    import torch
    import pytest_fpcheck as fp

    assert fp.bounds_of(torch.linspace(0, 1, 5) * 3) is not None  # tracked
    assert torch.isnan(torch.zeros(2) / torch.zeros(2)).all()  # watched
"""


def test_a_test_that_imports_torch_in_its_body_is_watched_and_tracked(
    pytester: pytest.Pytester,
) -> None:
    """The plugin's header imports torch under --fpcheck, but not with --no-header: then torch
    is first imported inside a test, which opens the blocks there."""
    pytester.makepyfile(test_late=LATE_IMPORT)
    flags = ("-p", "no:xdist", "-p", "no:cacheprovider", "--no-header", "--fpcheck")
    result = pytester.runpytest_subprocess(*flags, "--fpcheck-nonfinite=fail")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["E *NonFiniteAppeared: *", "E *NaN appeared in aten.div at test_late.py:14*"]
    )
    # the default (warn) changes no outcome: a warning, and the test passes
    result = pytester.runpytest_subprocess(*flags)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        ["*NonFiniteWarning*", "*NaN appeared in aten.div at test_late.py:14*"]
    )


def test_blocks_that_fail_to_open_at_the_import_change_no_outcome(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_late=LATE_IMPORT.replace("assert fp.bounds_of", "fp.bounds_of"))
    pytester.makeconftest(
        """
        import pytest_fpcheck.plugin as plugin


        def _broken(*args):
            raise RuntimeError("broken on purpose")


        plugin._open_torch_blocks = _broken
        """
    )
    report = tmp_path / "run.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "-p", "no:cacheprovider", "--no-header", "--fpcheck",
        "--fpcheck-nonfinite=fail", f"--fpcheck-report={report}",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    (gap,) = _report(report)["gaps"]
    assert gap["test"] == "test_late.py::test_b_imports_torch"
    assert (gap["op"], gap["reason"], gap["count"]) == ("import torch", "internal failure", 1)
    assert "RuntimeError: broken on purpose" in gap["traceback"]
