"""The HTML report in a real browser: filters and sorting, a test's runs with their checks and
trace, hostile agent text staying text, and the time it takes at 1,000 tests and a run of
10,000 events. The stores are tests/unit/test_html_report.py's."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from atp.core.results import PlannedTest, RunHeader, RunStore, SuiteResults
from tests.unit.test_html_report import (
    HOSTILE_CLOSE,
    HOSTILE_ID,
    HOSTILE_IMG,
    HOSTILE_LINK,
    HOSTILE_SCRIPT,
    NOW,
    event,
    hostile_store,
    large_store,
    make_store,
    run_result,
    write_events,
    write_report,
)

BOUND_SECONDS = 5.0
"""What loading, filtering and opening a trace may each take at 1,000 tests and 10,000 events
(they take well under a second on a 2-core machine; the bound leaves room for a slow CI)."""


# --- helpers ------------------------------------------------------------------------------------


def browser_log(driver: Any) -> list[dict[str, Any]]:
    """The browser's console messages since the last call (none where the driver has no log)."""
    try:
        return list(driver.get_log("browser"))
    except Exception:  # a driver without the log endpoint
        return []


def wait_for(driver: Any, script: str, timeout: float = 30.0) -> Any:
    """Poll ``script`` (a JavaScript expression) until it is truthy; its value."""
    deadline = time.perf_counter() + timeout
    while True:
        value = driver.execute_script(f"return ({script});")
        if value:
            return value
        if time.perf_counter() > deadline:
            raise AssertionError(f"still false after {timeout} s: {script}")
        time.sleep(0.01)


def open_report(driver: Any, results: SuiteResults, store: RunStore, target: Path) -> float:
    """Load the report of ``results`` and wait until its table is drawn; the seconds it took."""
    write_report(results, store, target)
    browser_log(driver)  # forget earlier pages' messages
    start = time.perf_counter()
    driver.get(target.as_uri())
    wait_for(driver, "window.__atpReport && window.__atpReport.ready")
    elapsed = time.perf_counter() - start
    rows = driver.execute_script("return document.querySelectorAll('#tests-table tr.test-row').length")
    assert rows == len(results.tests)
    return elapsed


def shown(driver: Any, column: str = "test-id") -> list[str]:
    """The text of a column in the rows the filters show, in their order."""
    return list(
        driver.execute_script(
            "return Array.from(document.querySelectorAll('#tests-table tr.test-row'))"
            ".filter(r => !r.hidden).map(r => r.querySelector(arguments[0]).textContent)",
            "." + column if column == "test-id" else "td." + column,
        )
    )


def choose(driver: Any, select_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_value(value)


def type_into(driver: Any, input_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.ID, input_id)
    field.clear()
    driver.execute_script("arguments[0].dispatchEvent(new Event('input'))", field)
    if text:
        field.send_keys(text)


def click(driver: Any, css: str, index: int = 0) -> None:
    """Click the ``index``-th element matching ``css``, scrolled into view first."""
    from selenium.webdriver.common.by import By

    element = driver.find_elements(By.CSS_SELECTOR, css)[index]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def row_of(driver: Any, test_id: str) -> int:
    """The index among the table's rows of the row of ``test_id``."""
    index = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tests-table tr.test-row'))"
        ".findIndex(r => r.querySelector('.test-id').textContent === arguments[0])",
        test_id,
    )
    assert index >= 0, test_id
    return int(index)


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def page_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)


# --- tests --------------------------------------------------------------------------------------


def test_filters_and_sorting(driver: Any, tmp_path: Path) -> None:
    results, store = large_store(tmp_path, tests=40, events=3)
    open_report(driver, results, store, tmp_path / "report.html")
    by_id = {t.id: t for t in results.tests}
    everyone = [t.id for t in results.tests]
    assert shown(driver) == everyone
    assert driver.execute_script("return document.getElementById('filter-count').textContent") == "40 tests"

    choose(driver, "filter-status", "failed")
    failed = [t.id for t in results.tests if t.status == "failed"]
    assert failed and shown(driver) == failed
    assert {by_id[i].status for i in shown(driver)} == {"failed"}
    assert (
        driver.execute_script("return document.getElementById('filter-count').textContent")
        == f"{len(failed)} of 40 tests"
    )

    choose(driver, "filter-tag", "even")  # with the status filter still on
    assert shown(driver) == [i for i in failed if "even" in by_id[i].tags]
    choose(driver, "filter-status", "")
    assert shown(driver) == [t.id for t in results.tests if "even" in t.tags]
    choose(driver, "filter-tag", "")

    type_into(driver, "filter-text", "TEST_0017")  # case does not matter
    assert shown(driver) == ["test_0017"]
    type_into(driver, "filter-text", "does not contain 'teams'")  # a failed check's message
    assert shown(driver) == failed
    type_into(driver, "filter-text", "no such test")
    assert shown(driver) == []
    assert driver.execute_script("return !document.getElementById('tests-empty').hidden")
    type_into(driver, "filter-text", "")

    type_into(driver, "filter-score", "50")
    assert shown(driver) == [t.id for t in results.tests if t.runs and t.score >= 50]
    type_into(driver, "filter-score", "")
    assert shown(driver) == everyone

    click(driver, "th[data-sort=score]")  # highest first
    scores = [float(s) if s != "—" else -1.0 for s in shown(driver, "col-score")]
    assert scores == sorted(scores, reverse=True) and len(scores) == 40
    assert (
        driver.execute_script(
            "return document.querySelector('th[data-sort=score]').getAttribute('aria-sort')"
        )
        == "descending"
    )
    click(driver, "th[data-sort=score]")  # lowest first
    scores = [float(s) if s != "—" else -1.0 for s in shown(driver, "col-score")]
    assert scores == sorted(scores)
    click(driver, "th[data-sort=id]")
    assert shown(driver) == sorted(everyone)
    click(driver, "th[data-sort=id]")
    assert shown(driver) == sorted(everyone, reverse=True)
    click(driver, "th[data-sort=status]")
    order = {"error": 0, "failed": 1, "passed": 2, "skipped": 3}
    statuses = [order[by_id[i].status] for i in shown(driver)]
    assert statuses == sorted(statuses)
    choose(driver, "filter-status", "error")  # filters apply to the sorted rows
    assert sorted(shown(driver)) == [t.id for t in results.tests if t.status == "error"]


def test_a_tests_runs_checks_and_trace(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    results, store = make_store(tmp_path)
    open_report(driver, results, store, tmp_path / "report.html")
    click(driver, "#tests-table tr.test-row", row_of(driver, "basic_search"))
    wait_for(
        driver, "document.querySelector('tr.test-detail') && !document.querySelector('tr.test-detail').hidden"
    )
    detail = driver.find_element(By.CSS_SELECTOR, "tr.test-detail")
    assert "Mean score" in detail.text and "87.5" in detail.text and "CI 95" in detail.text
    assert "stable" in detail.text and "100% (2 of 2)" in detail.text
    assert "regression" in detail.text  # against the baseline
    assert len(detail.find_elements(By.CSS_SELECTOR, "details.run")) == 2

    click(driver, "tr.test-detail details.run > summary")  # run 1
    wait_for(driver, "document.querySelector('details.run .checks-table')")
    checks = driver.find_element(By.CSS_SELECTOR, "details.run .checks-table")
    assert "contains:report.md" in checks.text and "report.md contains 'Teams' (line 3)" in checks.text
    unmade = checks.find_element(By.CSS_SELECTOR, "tr.check.skipped")  # never shown as passed or failed
    assert "llm_eval:clarity" in unmade.text and "—" in unmade.text
    assert (
        unmade.find_element(By.CSS_SELECTOR, ".check-skipped").get_attribute("title")
        == "skipped: the LLM judge has no API key"
    )

    click(driver, "details.run details.trace > summary")
    wait_for(driver, "document.querySelectorAll('details.trace .event').length === 9")
    tool = driver.find_element(By.CSS_SELECTOR, "details.trace .event.ev-tool_call")
    assert "web_search" in tool.text and "success" in tool.text and "+1.200s" in tool.text
    assert '{"query":"video conferencing market"}' in tool.find_element(By.CSS_SELECTOR, ".io.input").text
    assert '"Teams"' in tool.find_element(By.CSS_SELECTOR, ".io.output").text
    trace = driver.find_element(By.CSS_SELECTOR, "details.trace").text
    for expected in (
        "gpt-test",
        "in 120 · out 30",
        "I should search the web first",
        "idle → searching",
        "RateLimit: slow down",
        "50%",
        "custom_thing",
        "recorded by ATP (tools)",
        "calendar",
    ):
        assert expected in trace, expected

    # the trace's type filter
    driver.execute_script("document.querySelector('details.trace input[data-type=tool_call]').click()")
    wait_for(driver, "document.querySelectorAll('details.trace .event').length === 7")
    assert not driver.find_elements(By.CSS_SELECTOR, "details.trace .event.ev-tool_call")

    artifacts = driver.find_element(By.CSS_SELECTOR, "details.run .artifacts")
    assert "Market report" in artifacts.find_element(By.CSS_SELECTOR, ".markdown h1").text
    link = artifacts.find_element(By.CSS_SELECTOR, ".markdown a")
    assert link.get_attribute("href") == "https://example.com/teams" and link.text == "the source"
    assert '"Microsoft Teams"' in artifacts.text and "/tmp/big.bin" in artifacts.text

    # a failed test: its one run opens at once, with its failed check, details and log
    click(driver, "#tests-table tr.test-row", row_of(driver, "unknown_company"))
    wait_for(driver, "document.querySelectorAll('tr.test-detail').length === 2")
    failed = driver.find_elements(By.CSS_SELECTOR, "tr.test-detail")[1]
    assert "timed out after 2 s; the agent was stopped" in failed.text
    assert "missing ['Summary']" in failed.text and "the agent sent 2 events out of order" in failed.text
    failed.find_element(By.CSS_SELECTOR, "details.check-details > summary").click()
    wait_for(driver, "document.querySelector('details.check-details pre')")
    assert '"Overview"' in failed.find_element(By.CSS_SELECTOR, "details.check-details pre").text
    assert "still thinking" in failed.find_element(By.CSS_SELECTOR, "details.log").text
    assert not [e for e in browser_log(driver) if e.get("level") == "SEVERE"]


OPEN_EVERYTHING = """
let opened = 0;
document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; opened++; });
document.querySelectorAll('#tests-table tr.test-row:not(.open)').forEach(r => { r.click(); opened++; });
document.querySelectorAll('.clip-note button').forEach(b => { b.click(); opened++; });
return opened;
"""


def test_agent_text_stays_text(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    results, store = hostile_store(tmp_path)
    open_report(driver, results, store, tmp_path / "report.html")
    for _ in range(10):  # each opened part may hold more to open (drawn when it opens)
        if not driver.execute_script(OPEN_EVERYTHING):
            break
        time.sleep(0.2)
    wait_for(driver, "document.querySelectorAll('details.trace .event').length === 9")
    text = page_text(driver)
    for hostile in (HOSTILE_SCRIPT, HOSTILE_IMG, HOSTILE_CLOSE, HOSTILE_ID):
        assert hostile in text, hostile
    assert HOSTILE_LINK in text and "[y](JaVaScRiPt:window.__pwned=1)" in text
    assert driver.title == f"ATP report: suite {HOSTILE_SCRIPT}"
    click(driver, "details.run .artifacts .artifact button")  # the markdown's source, as written
    assert HOSTILE_LINK in driver.find_element(By.CSS_SELECTOR, "pre.markdown-source").text

    assert driver.execute_script("return window.__pwned") is None
    counts = driver.execute_script(
        "return [document.querySelectorAll('script').length, document.querySelectorAll('img, iframe, object, embed').length,"
        " Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length]"
    )
    assert counts == [2, 0, 0]
    links = driver.execute_script("return Array.from(document.querySelectorAll('a')).map(a => a.href)")
    assert links == ["https://example.com/ok"]  # of the markdown's links, only the web one is a link
    # the page's own script ran (the table is drawn) and nothing was refused by the CSP
    messages = [str(e.get("message", "")) for e in browser_log(driver)]
    assert not [m for m in messages if "Content Security Policy" in m or "Refused" in m], messages


@pytest.fixture(scope="module")
def large_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[SuiteResults, RunStore, Path]:
    folder = tmp_path_factory.mktemp("large")
    results, store = large_store(folder)
    return results, store, folder / "report.html"


def test_1000_tests_and_a_run_of_10000_events(
    driver: Any, large_report: tuple[SuiteResults, RunStore, Path]
) -> None:
    from selenium.webdriver.common.by import By

    results, store, target = large_report
    load = open_report(driver, results, store, target)
    size = target.stat().st_size
    render_ms = driver.execute_script("return window.__atpReport.renderMs")

    failed = sum(t.status == "failed" for t in results.tests)

    def filter_failed() -> None:
        choose(driver, "filter-status", "failed")
        wait_for(driver, f"document.getElementById('filter-count').textContent === '{failed} of 1,000 tests'")

    filtering = timed(filter_failed)

    def search() -> None:  # with the status filter still on
        type_into(driver, "filter-text", "number 901")
        wait_for(driver, "document.getElementById('filter-count').textContent === '1 of 1,000 tests'")

    searching = timed(search)
    assert shown(driver) == ["test_0901"]
    type_into(driver, "filter-text", "")
    choose(driver, "filter-status", "")
    sorting = timed(lambda: click(driver, "th[data-sort=score]"))
    click(driver, "th[data-sort=id]")
    click(driver, "th[data-sort=id]")  # back to the first test first
    click(driver, "#tests-table tr.test-row", row_of(driver, "test_0000"))
    click(driver, "tr.test-detail details.run > summary")
    wait_for(driver, "document.querySelector('details.run details.trace')")

    def open_trace() -> None:
        click(driver, "details.run details.trace > summary")
        wait_for(driver, "document.querySelectorAll('details.trace .event').length === 500")

    tracing = timed(open_trace)
    summary = driver.find_element(By.CSS_SELECTOR, "details.trace > summary").text
    assert "10,000 events" in summary
    assert "showing 500 of 10,000 events" in driver.find_element(By.CSS_SELECTOR, "details.trace .more").text

    def show_all() -> None:
        click(driver, "details.trace .more button.show-all")
        wait_for(driver, "document.querySelectorAll('details.trace .event').length === 10000", timeout=120)

    everything = timed(show_all)
    last = driver.find_elements(By.CSS_SELECTOR, "details.trace .event")[-1]
    assert "#9999" in last.text and "+2499.750s" in last.text
    print(
        f"\nhtml report, 1,000 tests and a run of 10,000 events ({size / 1e6:.2f} MB): "
        f"load and draw the table {load:.2f} s (script {render_ms / 1000:.2f} s), filter by status {filtering:.2f} s, "
        f"search {searching:.2f} s, sort by score {sorting:.2f} s, open the trace (first 500 events) {tracing:.2f} s, "
        f"show all 10,000 events {everything:.2f} s"
    )
    for what, seconds in (
        ("load", load),
        ("filter", filtering),
        ("search", searching),
        ("sort", sorting),
        ("trace", tracing),
    ):
        assert seconds < BOUND_SECONDS, f"{what} took {seconds:.2f} s"
    assert everything < 6 * BOUND_SECONDS


def test_event_types_named_like_object_members_are_listed_and_drawn(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    names = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "tool_call"]
    header = RunHeader(
        run_id="proto",
        suite="proto",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        tests=[PlannedTest(id="t", name="t")],
    )
    store = RunStore.create(tmp_path / "runs", header)
    trace = [
        event(i, name, {"tool": "x"} if name == "tool_call" else {"n": i}, at=i)
        for i, name in enumerate(names)
    ]
    store.append(run_result("t", events_file=write_events(store, "t", 1, trace)))
    store.close()
    open_report(driver, store.results(), store, tmp_path / "report.html")
    # the report's one test is open at once, and so is its one run
    wait_for(
        driver,
        "document.querySelector('tr.test-detail details.run[open]') && !document.querySelector('tr.test-detail').hidden",
    )
    wait_for(driver, "document.querySelector('details.run details.trace')")
    click(driver, "details.run details.trace > summary")
    wait_for(driver, f"document.querySelectorAll('details.trace .event').length === {len(names)}")
    chips = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "details.trace .type-chip")]
    assert chips == [f"{name} (1)" if name != "tool_call" else "tool call (1)" for name in names]
    driver.execute_script("document.querySelector('details.trace input[data-type=toString]').click()")
    wait_for(driver, f"document.querySelectorAll('details.trace .event').length === {len(names) - 1}")
    assert not [e for e in browser_log(driver) if e.get("level") == "SEVERE"]


def test_retries_flaky_and_quarantined_tests_are_drawn(driver: Any, tmp_path: Path) -> None:
    from datetime import timedelta

    from selenium.webdriver.common.by import By

    from atp.core.results import Budget, Retry

    header = RunHeader(
        run_id="reliability", suite="s", agent="a", agent_type="http", started_at=NOW,
        finished_at=NOW + timedelta(seconds=3), stopped_by="budget",
        budget=Budget(max_cost_usd=1.0, spent_cost_usd=1.2, exceeded="max_cost_usd 1 reached: $1.2000 spent"),
        tests=[
            PlannedTest(id="wobbly", name="Wobbly", runs=2),
            PlannedTest(id="held", name="Held", quarantined=True),
            PlannedTest(id="left", name="Left"),
        ],
    )  # fmt: skip
    store = RunStore.create(tmp_path / "runs", header)
    retry = Retry(
        attempt=1,
        reason=f"agent 'a': POST http://x/execute answered 503 {HOSTILE_SCRIPT}",
        waited_seconds=0.5,
    )
    store.append(run_result("wobbly", 1, retries=[retry]))
    store.append(run_result("wobbly", 2, outcome="failed", score=0.0, error="wrong"))
    store.append(run_result("held", 1, outcome="failed", score=0.0, error="known bad"))
    store.close()
    open_report(driver, store.results(), store, tmp_path / "report.html")
    text = page_text(driver)
    assert "BUDGET_EXCEEDED: max_cost_usd 1 reached" in text and "Quarantined" in text and "Flaky" in text
    badges = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tests-table .badge')).map(b => b.textContent)"
    )
    assert "flaky" in badges and "quarantined" in badges
    click(driver, "#tests-table tr.test-row", row_of(driver, "wobbly"))
    wait_for(
        driver, "document.querySelector('tr.test-detail') && !document.querySelector('tr.test-detail').hidden"
    )
    click(driver, "tr.test-detail details.run > summary")  # run 1, retried once
    wait_for(driver, "document.querySelector('details.run .retries-table')")
    table = driver.find_element(By.CSS_SELECTOR, "details.run .retries-table").text
    assert "503" in table and HOSTILE_SCRIPT in table and "0.50 s" in table
    assert driver.execute_script("return window.__pwned") is None
    assert (
        driver.execute_script(
            "return document.querySelectorAll('details.run .checks-table, details.run .checks').length"
        )
        >= 1
    )


def test_a_very_variable_score_reads_very_unstable_and_its_interval_stays_within_100(
    driver: Any, tmp_path: Path
) -> None:
    """The results' stability ``critical`` is shown as "very unstable" (it is not a critical
    check), and the interval of scores 100, 100, 70 ends at 100, not at 133."""
    from datetime import timedelta

    from selenium.webdriver.common.by import By

    header = RunHeader(
        run_id="words", suite="s", agent="a", agent_type="cli", started_at=NOW,
        finished_at=NOW + timedelta(seconds=3),
        tests=[PlannedTest(id="wobbly", name="Wobbly", runs=3), PlannedTest(id="a", name="A"),
               PlannedTest(id="b", name="B")],
    )  # fmt: skip
    store = RunStore.create(tmp_path / "runs", header)
    for number, score in enumerate((100.0, 100.0, 40.0), 1):
        store.append(run_result("wobbly", number, score=score, outcome="passed" if score > 50 else "failed"))
    store.append(run_result("a"))
    store.append(run_result("b"))
    store.close()
    results = store.results()
    assert (
        results.tests[0].statistics is not None and results.tests[0].statistics.score.stability == "critical"
    )
    suite = results.statistics.score
    assert suite is not None and suite.ci_95 is not None and suite.ci_95[1] == 100.0
    open_report(driver, results, store, tmp_path / "report.html")
    assert "– 100.0" in page_text(driver)  # the suite's statistics: 80, 100, 100 (Student's t: to 122.0)
    assert "122.0" not in page_text(driver)
    title = driver.execute_script(
        "return document.querySelectorAll('#tests-table tr.test-row')[arguments[0]]"
        ".querySelector('td.col-duration').title",
        row_of(driver, "wobbly"),
    )
    assert title == "the total of its 3 runs; 1.00s per run"
    click(driver, "#tests-table tr.test-row", row_of(driver, "wobbly"))
    wait_for(
        driver, "document.querySelector('tr.test-detail') && !document.querySelector('tr.test-detail').hidden"
    )
    detail = driver.find_element(By.CSS_SELECTOR, "tr.test-detail").text
    assert "very unstable (CV" in detail and "critical" not in detail
    assert "– 100.0" in detail and "133" not in detail
