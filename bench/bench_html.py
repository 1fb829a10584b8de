"""What the file reports cost: the html, junit and json reporters over a run of many tests with
one long trace, and the HTML report in a real headless Chromium.

The run is the one the HTML report's tests use (tests/unit/test_html_report.py, ``large_store``):
tests of every status with tags, one or two runs each, the first test's run with a trace of
``--events`` events of every type. For each reporter: the time to write its file (median of
``--repeat``) and the file's size. Then, when Selenium and Debian's chromium and chromedriver
are installed: the seconds to load the HTML report and draw its table, filter it by status,
and open the long trace (its first 500 events), then to draw every event.

    .venv/bin/python bench/bench_html.py [--tests 1000] [--events 10000] [--repeat 5] [--no-browser]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Timer

from atp.core.reporter import ReportOptions
from atp.core.results import RunStore, SuiteResults
from atp.reporters.html import HtmlReporter
from atp.reporters.json_results import JsonReporter
from atp.reporters.junit import JunitReporter
from tests.unit.test_html_report import large_store

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def write(
    reporter: type[Any], results: SuiteResults, store: RunStore, target: Path, repeat: int
) -> tuple[float, int]:
    times = []
    for _ in range(repeat):
        with Timer() as timer:
            reporter(ReportOptions(output_file=target)).report(results, store)
        times.append(timer.seconds)
    return statistics.median(times), target.stat().st_size


def wait_for(driver: Any, script: str, timeout: float = 120.0) -> None:
    deadline = time.perf_counter() + timeout
    while not driver.execute_script(f"return ({script});"):
        if time.perf_counter() > deadline:
            raise SystemExit(f"still false after {timeout} s: {script}")
        time.sleep(0.01)


def browse(report: Path, failed: int, tests: int, events: int) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        with Timer() as load:
            driver.get(report.as_uri())
            wait_for(driver, "window.__atpReport && window.__atpReport.ready")
        with Timer() as filtering:
            Select(driver.find_element(By.ID, "filter-status")).select_by_value("failed")
            wait_for(
                driver,
                f"document.getElementById('filter-count').textContent === '{failed:,} of {tests:,} tests'",
            )
        Select(driver.find_element(By.ID, "filter-status")).select_by_value("")
        first = driver.find_elements(By.CSS_SELECTOR, "#tests-table tr.test-row")[0]
        first.click()
        driver.find_element(By.CSS_SELECTOR, "tr.test-detail details.run > summary").click()
        shown = min(500, events)
        with Timer() as trace:
            driver.find_element(By.CSS_SELECTOR, "details.run details.trace > summary").click()
            wait_for(driver, f"document.querySelectorAll('details.trace .event').length === {shown}")
        every = None
        if events > shown:
            with Timer() as every:
                driver.find_element(By.CSS_SELECTOR, "details.trace .more button.show-all").click()
                wait_for(driver, f"document.querySelectorAll('details.trace .event').length === {events}")
    finally:
        driver.quit()
    print(f"chromium: load and draw the table {load.seconds:.2f} s")
    print(f"chromium: filter by status         {filtering.seconds:.2f} s")
    print(f"chromium: open the trace ({shown} events) {trace.seconds:.2f} s")
    if every is not None:
        print(f"chromium: draw all {events:,} events  {every.seconds:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results, store = large_store(Path(folder), tests=args.tests, events=args.events)
        print(f"{args.tests:,} tests, a run of {args.events:,} events")
        for reporter, name in (
            (HtmlReporter, "report.html"),
            (JunitReporter, "report.xml"),
            (JsonReporter, "results.json"),
        ):
            seconds, size = write(reporter, results, store, Path(folder) / name, args.repeat)
            print(
                f"{reporter.name:5}: written in {seconds * 1000:7.1f} ms (median of {args.repeat}), {size / 1e6:.2f} MB"
            )
        if not args.no_browser:
            failed = sum(t.status == "failed" for t in results.tests)
            browse(Path(folder) / "report.html", failed, args.tests, args.events)


if __name__ == "__main__":
    main()
