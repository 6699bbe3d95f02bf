"""The HTML report in a real browser: headless Chromium, driven by Selenium through Debian's
chromedriver, opens a report written by a pytest run, filters its table, follows a row's link to
its details, loads the embedded figure, and saves a screenshot (its path is printed)."""

from __future__ import annotations

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
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Chromium and its driver on PATH (Debian: apt-get install chromium chromium-driver)",
)
webdriver = pytest.importorskip(
    "selenium.webdriver", reason="needs selenium: pip install -e '.[test]'"
)
pytest.importorskip("matplotlib", reason="the report's dual-delta figure needs matplotlib")

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
    """The HTML report of a small run: 9 verdicts (one bug), one dual-delta comparison."""
    folder = tmp_path_factory.mktemp("browser")
    (folder / "test_suite.py").write_text(textwrap.dedent(SUITE))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider",
         "--fpcheck", "--fpcheck-report=run.html", "test_suite.py"],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return folder / "run.html"


@pytest.fixture(scope="module")
def browser(page: Path) -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.get(page.as_uri())
    try:
        yield driver
    finally:
        driver.quit()


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
    assert len(_shown(browser, "verdicts")) == 9
    words.send_keys("3.0 close")
    assert _shown(browser, "verdicts") == ["test_suite.py::test_close[3.0]"] * 2
    assert count.text == "2 of 9 shown"
    words.clear()
    words.send_keys(" ")  # clear() fires no input event; a blank query matches everything
    Select(status).select_by_value("bug")
    assert _shown(browser, "verdicts") == ["test_suite.py::test_bug"]
    Select(status).select_by_value("")
    assert count.text == "9 of 9 shown"


def test_a_row_link_opens_its_details_and_the_figure_loads(
    browser: Any, tmp_path_factory: pytest.TempPathFactory, record_property: Any
) -> None:
    from selenium.webdriver.common.by import By

    for table in ("verdicts", "dual_deltas"):
        link = browser.find_element(By.CSS_SELECTOR, f"#table-{table} tbody tr a")
        target = link.get_attribute("href").split("#")[1]
        details = browser.find_element(By.ID, target)
        assert details.get_attribute("open") is None
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
    browser.get(page.as_uri())
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
