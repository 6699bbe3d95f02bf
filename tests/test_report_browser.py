"""The HTML report in a real browser: headless Chromium, driven by Selenium through Debian's
chromedriver, opens a report written by a pytest run, filters and sorts its tables, follows a
row's link to its details (a failed test's traceback, a verdict's plot), loads the embedded
figure, and saves a screenshot (its path is printed).

Where Chromium, its driver, selenium or matplotlib is missing the tests skip, saying what is
missing; with ``FPCHECK_REQUIRE_BROWSER=1`` (set by ``.ci/run``) they fail instead, so CI cannot
pass without having run them."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = next((p for name in ("chromium", "chromium-browser") if (p := shutil.which(name))), None)
CHROMEDRIVER = shutil.which("chromedriver")
REQUIRE = "FPCHECK_REQUIRE_BROWSER"


def _missing() -> str | None:
    """What these tests need and this machine lacks, or None."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        return "needs Chromium and its driver on PATH (Debian: apt-get install chromium chromium-driver)"
    if importlib.util.find_spec("selenium") is None:
        return "needs selenium: pip install -e '.[test]'"
    if importlib.util.find_spec("matplotlib") is None:
        return "the report's dual-delta figure needs matplotlib"
    return None


MISSING = _missing()
if MISSING is not None and os.environ.get(REQUIRE) != "1":
    pytest.skip(MISSING, allow_module_level=True)

SUITE = """
import numpy as np
import pytest
import pytest_fpcheck as fp


@pytest.mark.parametrize("scale", [1.0, 2.0, 3.0, 4.0])
def test_close(scale):
    x = np.full(8, scale, dtype=np.float32)
    expected = x.astype(np.float64) * (1 + 1e-8)
    fp.assert_roundoff_close(x, expected)
    fp.assert_roundoff_close(x[:2], expected[:2])


def test_bug():
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(np.ones(4, np.float32), np.full(4, 1.5))


def test_fails():
    print("captured <output>")
    fp.assert_roundoff_close(np.ones(4, np.float32), np.full(4, 1.5))


def test_bounded_bug():
    from pytest_fpcheck.formats import FORMATS
    from pytest_fpcheck.interval.bounds import Bounds

    actual = np.arange(1, 65, dtype=np.float32)
    value = actual.astype(np.float64)
    bounds = Bounds(value * (1 - 2.0**-20), value * (1 + 2.0**-20), value, np.float32,
                    FORMATS["float32"])
    with pytest.raises(fp.RoundoffMismatch):
        fp.assert_roundoff_close(actual, value * (1 + 2.0**-10), bounds=bounds)


def exact(x):
    return np.float32(np.sum(x.astype(np.float64)))


@pytest.mark.dual_delta(custom=exact, reference=exact, n=30,
                        inputs=lambda rng: (rng.standard_normal(64).astype(np.float32),),
                        oracle=lambda x: np.sum(x.astype(np.float64)))
def test_same_sum(dual_delta_result):
    pass
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of a small run: 8 tests (one failure), 11 verdicts (three bugs, two of
    them caught), one dual-delta comparison."""
    if MISSING is not None:  # only under FPCHECK_REQUIRE_BROWSER=1: every test errors
        pytest.fail(f"{MISSING} ({REQUIRE}=1: the browser tests must run here)", pytrace=False)
    folder = tmp_path_factory.mktemp("browser")
    (folder / "test_suite.py").write_text(textwrap.dedent(SUITE))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
         "--fpcheck", "--fpcheck-report=run.html", "test_suite.py"],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr  # test_fails fails
    return folder / "run.html"


@pytest.fixture(scope="module")
def browser(page: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    load(driver, page)
    try:
        yield driver
    finally:
        driver.quit()


def load(driver: Any, page: Path) -> None:
    """Open ``page`` and wait for its script to have drawn the tables (the data is inflated
    asynchronously)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return document.body.dataset.ready") == "yes"
    )


def _shown(browser: Any, table: str) -> list[str]:
    """The test ids of the rows of ``table`` the filters leave visible."""
    ids: list[str] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'))"
        ".filter(r => !r.hidden).map(r => r.cells[0].textContent)",
        f"#table-{table}",
    )
    return ids


def test_the_verdict_table_filters_by_words_and_status(browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    bar = browser.find_element(By.CSS_SELECTOR, '.filters[data-table="table-verdicts"]')
    words, status, count = (bar.find_element(By.CLASS_NAME, c) for c in ("q", "s", "shown"))
    assert len(_shown(browser, "verdicts")) == 11
    words.send_keys("3.0 close")
    assert _shown(browser, "verdicts") == ["test_suite.py::test_close[3.0]"] * 2
    assert count.text == "2 of 11 shown"
    words.clear()
    words.send_keys(" ")  # clear() fires no input event; a blank query matches everything
    Select(status).select_by_value("expected-bug")
    assert _shown(browser, "verdicts") == [
        "test_suite.py::test_bounded_bug",
        "test_suite.py::test_bug",
    ]
    Select(status).select_by_value("")
    assert count.text == "11 of 11 shown"


def test_the_tests_come_first_with_their_outcomes_and_sort_by_a_column(browser: Any) -> None:
    from selenium.webdriver.common.by import By

    sections = browser.execute_script(
        "return Array.from(document.querySelectorAll('main > section')).map(s => s.id)"
    )
    assert sections == ["tests", "verdicts", "dual_deltas", "environment"]
    totals = browser.find_element(By.CLASS_NAME, "totals").text.splitlines()
    assert totals == [
        "8 tests",
        "1 failed",
        "2 expected-bug",
        "5 passed",
        "11 round-off verdicts: 1 bug, 8 close, 2 expected-bug",
        "1 dual-delta comparisons: 1 equivalent",
    ]
    assert _shown(browser, "tests")[0] == "test_suite.py::test_fails"  # the failure first
    outcome = browser.find_element(By.CSS_SELECTOR, "#table-tests thead th:nth-child(2)")
    outcome.click()
    outcomes = browser.execute_script(
        "return Array.from(document.querySelectorAll('#table-tests tbody tr'))"
        ".map(r => r.cells[1].textContent)"
    )
    assert outcomes == sorted(outcomes)
    assert outcome.get_attribute("aria-sort") == "ascending"
    outcome.click()
    assert outcome.get_attribute("aria-sort") == "descending"
    duration = browser.find_element(By.CSS_SELECTOR, "#table-tests thead th:nth-child(3)")
    duration.click()  # numerically
    seconds = browser.execute_script(
        "return Array.from(document.querySelectorAll('#table-tests tbody tr'))"
        ".map(r => parseFloat(r.cells[2].textContent))"
    )
    assert seconds == sorted(seconds)


def test_a_failed_tests_details_show_its_traceback_and_output(browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.execute_script("window.scrollTo(0, 0)")
    link = browser.find_element(By.LINK_TEXT, "test_suite.py::test_fails")
    target = link.get_attribute("href").split("#")[1]
    link.click()
    details = browser.find_element(By.ID, target)
    assert details.get_attribute("open") == "true"
    texts = [pre.text for pre in details.find_elements(By.TAG_NAME, "pre")]
    assert "RoundoffMismatch" in texts[0]
    assert texts[1] == "captured <output>"


def test_a_verdicts_details_draw_its_plot(browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.execute_script("window.scrollTo(0, 0)")
    rows = browser.find_elements(By.CSS_SELECTOR, "#table-verdicts tbody tr a")
    [link] = [a for a in rows if a.text == "test_suite.py::test_bounded_bug"]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    details = browser.find_element(By.ID, link.get_attribute("href").split("#")[1])
    plot = details.find_element(By.CSS_SELECTOR, "svg.plot")
    assert plot.is_displayed()
    assert plot.size["width"] == 300
    title = plot.find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert "48 of 64 elements" in title
    assert "Worst element" in details.text


def test_a_row_link_opens_its_details_and_the_figure_loads(
    browser: Any, tmp_path_factory: pytest.TempPathFactory, record_property: Any
) -> None:
    from selenium.webdriver.common.by import By

    for table in ("verdicts", "dual_deltas"):
        link = browser.find_element(By.CSS_SELECTOR, f"#table-{table} tbody tr a")
        target = link.get_attribute("href").split("#")[1]
        details = browser.find_element(By.ID, target)
        assert details.get_attribute("open") is None
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        assert details.get_attribute("open") == "true"
        assert details.find_element(By.TAG_NAME, "table").is_displayed()
    figure = browser.find_element(By.CSS_SELECTOR, "img.plot")
    size = browser.execute_script(
        "return arguments[0].decode().then(() => [arguments[0].naturalWidth,"
        " arguments[0].naturalHeight])",
        figure,
    )
    assert size == [1100, 850]  # the four panels, 11 x 8.5 inches at 100 dpi
    assert figure.is_displayed()
    shot = tmp_path_factory.mktemp("screenshots") / "report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    record_property("screenshot", str(shot))  # in --junitxml
    print(f"screenshot of the HTML report: {shot}")  # shown with -s or -rP


def test_a_long_table_lists_a_page_and_makes_details_on_demand(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from selenium.webdriver.common.by import By

    from pytest_fpcheck.report import RunReport
    from pytest_fpcheck.report.html import INLINE_DETAILS, PAGE_ROWS

    report = RunReport()
    count = max(PAGE_ROWS, INLINE_DETAILS) + 100
    for i in range(count):
        record = {"kind": "bug" if i == count - 1 else "roundoff", "outside": 0, "total": 4}
        report.add_verdict(f"t.py::test[{i:04d}]", {**record, "dtype": "float32"})
    page = tmp_path_factory.mktemp("long") / "long.html"
    report.write(page, environment={}, settings={})
    load(browser, page)
    shown = browser.find_element(By.CSS_SELECTOR, ".shown")
    assert shown.text == f"{count} of {count} shown (the first {PAGE_ROWS} listed)"
    assert len(_shown(browser, "verdicts")) == PAGE_ROWS
    browser.find_element(By.ID, "more-verdicts").click()
    assert len(_shown(browser, "verdicts")) == count
    assert not browser.find_element(By.ID, "more-verdicts").is_displayed()
    browser.execute_script("window.scrollTo(0, 0)")  # the table's sticky header hides no row
    link = browser.find_element(By.CSS_SELECTOR, "#table-verdicts tbody tr a")
    assert link.text == f"t.py::test[{count - 1:04d}]"  # the bug, first
    target = link.get_attribute("href").split("#")[1]
    assert browser.find_elements(By.ID, target) == []
    link.click()
    details = browser.find_element(By.ID, target)
    assert details.get_attribute("open") == "true"
    assert details.find_element(By.TAG_NAME, "summary").text == f"bug t.py::test[{count - 1:04d}]"
    assert browser.get_log("browser") == []  # no script error on the way
