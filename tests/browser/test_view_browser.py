"""`atp view` in a real browser: the list of runs, a test's trend chart, and a run's HTML report
opened from the list, its script running under the report's own policy while the agent's hostile
test id stays text."""

from __future__ import annotations

from typing import Any

from tests.browser.test_html_report_browser import browser_log, wait_for
from tests.e2e.test_view import HOSTILE, Viewer, viewer  # noqa: F401  (the viewer fixture)


def test_from_the_list_of_runs_to_a_trend_and_a_report(driver: Any, viewer: Viewer) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    base = f"http://127.0.0.1:{viewer.port}/"
    browser_log(driver)  # forget earlier pages' messages
    driver.get(base)
    rows = driver.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 2 and all("noisy" in row.text and "100%" in row.text for row in rows)

    driver.find_element(By.LINK_TEXT, "trend").click()
    wait_for(driver, "document.querySelectorAll('svg').length === 2")
    assert len(driver.find_elements(By.CSS_SELECTOR, "svg circle")) == 4
    assert HOSTILE in driver.find_element(By.TAG_NAME, "body").text  # shown as text

    driver.get(base)
    link = driver.find_elements(By.CSS_SELECTOR, "a[href$='/report.html']")[0]
    link.click()
    wait_for(driver, "window.__atpReport && window.__atpReport.ready")
    ids = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tests-table .test-id')).map(e => e.textContent)"
    )
    assert sorted(ids) == sorted(["summarise", HOSTILE])
    assert driver.execute_script("return window.__pwned") is None
    assert not [e for e in browser_log(driver) if e.get("level") == "SEVERE"]
