from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from atp.core.reporter import ReportOptions
from atp.core.results import Check, PlannedTest, RunHeader, RunResult, RunStore, SuiteResults, results_schema
from atp.reporters.console import ConsoleReporter, seconds
from atp.reporters.json_results import JsonReporter
from tests.conftest import ROOT

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"


def make_store(tmp_path: Path) -> tuple[SuiteResults, RunStore]:
    header = RunHeader(
        run_id="r",
        suite="competitor_analysis",
        agent="research",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=7.4),
        deselected=1,
        tests=[
            PlannedTest(id="basic_search", name="Basic", runs=2),
            PlannedTest(id="unknown_company", name="U"),
            PlannedTest(id="later", name="L", skip="not ready"),
        ],
    )
    store = RunStore.create(tmp_path, header)
    ok = Check(
        name="contains:report.md", passed=True, score=1.0, message="report.md contains text 'x' (line 1)"
    )
    bad = Check(name="sections:report.md", passed=False, score=0.5, message="missing ['Summary']")
    (store.directory / "events").mkdir()
    (store.directory / "events" / "basic_search.1.jsonl").write_text(
        json.dumps(
            {
                "version": "1.0",
                "task_id": TID,
                "timestamp": "2026-01-01T00:00:00Z",
                "sequence": 0,
                "event_type": "progress",
                "payload": {"percentage": 5},
            }
        )
        + "\n"
    )
    for n, score in ((1, 88.0), (2, 82.0)):
        store.append(
            RunResult(
                test_id="basic_search",
                run_number=n,
                task_id=TID,
                outcome="passed",
                status="completed",
                score=score,
                duration_seconds=0.6,
                started_at=NOW,
                checks=[ok],
                events_file="events/basic_search.1.jsonl" if n == 1 else None,
                score_breakdown={"quality": 1.0},
            )
        )
    store.append(
        RunResult(
            test_id="unknown_company",
            run_number=1,
            task_id=TID,
            outcome="failed",
            status="timeout",
            score=0.0,
            duration_seconds=2.0,
            started_at=NOW,
            checks=[ok, bad],
            error="timed out after 2 s; the agent was stopped",
            warnings=["odd"],
            log_tail=["thinking...", "still thinking"],
        )
    )
    store.close()
    return store.results(), store


def render(results: SuiteResults, store: RunStore, **options: object) -> str:
    stream = io.StringIO()
    ConsoleReporter(ReportOptions(stream=stream, **options)).report(results, store)  # type: ignore[arg-type]
    return stream.getvalue()


def test_console_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    results, store = make_store(tmp_path)
    out = render(results, store)
    assert "\033[" not in out  # not a terminal: no colour
    lines = out.splitlines()
    assert lines[:6] == [
        "ATP Test Results",
        "================",
        "",
        "Suite: competitor_analysis",
        "Agent: research (cli)",
        "Runs per test: 1, 2",
    ]
    body = out[out.index("Tests:") :]
    assert body.splitlines()[1:5] == [
        "  ✓ basic_search      85.0/100  (σ=4.2)   time 0.60s/run, 1.20s total",  # every run passed: no count
        "  ✗ unknown_company    0.0/100  time 2.00s",
        "    - timeout: timed out after 2 s; the agent was stopped",
        "    - sections:report.md: missing ['Summary']",
    ]
    assert "  - later            skipped: not ready" in out
    assert "Summary: 1 passed, 1 failed, 1 skipped (50.0%); 1 deselected" in out
    assert out.rstrip().endswith("Total time: 7.40s")
    assert "contains:report.md" not in out  # passed checks only with --verbose


def test_console_verbose_shows_everything(tmp_path: Path) -> None:
    results, store = make_store(tmp_path)
    out = render(results, store, verbose=True)
    assert "    ✓ run 1: contains:report.md: report.md contains text 'x' (line 1)" in out
    assert "    ✗ sections:report.md: missing ['Summary'] (score 0.50)" in out
    assert "    ! warning: odd" in out
    assert "      | still thinking" in out
    assert "run 1: score 88.0: quality 1.00" in out
    assert "    response: status timeout, no artifacts" in out  # the failed run's response
    assert "run 1: response" not in out  # only for runs that did not pass


def test_console_colour_only_when_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results, store = make_store(tmp_path)
    assert "\033[32m" in render(results, store, color=True)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "1")
    tty = Tty()
    ConsoleReporter(ReportOptions(stream=tty)).report(results, store)
    assert "\033[3" not in tty.getvalue()


def test_console_falls_back_to_ascii(tmp_path: Path) -> None:
    results, store = make_store(tmp_path)
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    ConsoleReporter(ReportOptions(stream=stream)).report(results, store)
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert (
        "  PASS basic_search      85.0/100  (sd=4.2)   time 0.60s/run, 1.20s total" in text
        and "FAIL unknown_company" in text
    )


def test_progress_line_only_on_a_terminal(tmp_path: Path) -> None:
    results, store = make_store(tmp_path)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    reporter = ConsoleReporter(ReportOptions(stream=tty, color=False))
    reporter.atp_suite_started(store.read_header(), store.directory)
    reporter.atp_run_started()
    reporter.atp_run_finished(results.tests[1].runs[0])
    reporter.atp_suite_finished()
    assert re.search(r"running: 1/3 runs done, 0 in progress, 1 failed, \d+s elapsed", tty.getvalue())
    assert tty.getvalue().endswith("\r\033[K")  # erased when the suite finished
    plain = io.StringIO()
    quiet = ConsoleReporter(ReportOptions(stream=plain))
    quiet.atp_run_started()
    quiet.atp_run_finished(results.tests[1].runs[0])
    assert plain.getvalue() == ""  # no status line without a terminal (and no suite started)


def test_seconds_format() -> None:
    assert (seconds(0.123), seconds(12.34), seconds(125)) == ("0.12s", "12.3s", "2m05.0s")


def test_json_report_is_valid_and_includes_events(tmp_path: Path) -> None:
    results, store = make_store(tmp_path)
    target = tmp_path / "out" / "results.json"
    JsonReporter(ReportOptions(output_file=target)).report(results, store)
    data = json.loads(target.read_text())
    jsonschema.Draft202012Validator(results_schema()).validate(data)
    assert data["format"] == "atp-results" and data["format_version"] == "1.4"
    assert data["summary"] == {
        "total": 3,
        "passed": 1,
        "failed": 1,
        "skipped": 1,
        "errors": 0,
        "deselected": 1,
        "runs": 3,
        "incomplete": 0,
        "skipped_checks": 0,
        "flaky": 0,
        "quarantined": 0,
        "retries": 0,
        "error_codes": {},
    }
    first, second, _ = data["tests"]
    assert first["runs"][0]["events"][0]["payload"] == {"percentage": 5}
    assert first["runs"][1]["events"] == []
    assert second["status"] == "failed" and second["runs"][0]["status"] == "timeout"
    assert second["runs"][0]["checks"][1] == {
        "name": "sections:report.md",
        "passed": False,
        "score": 0.5,
        "message": "missing ['Summary']",
    }
    stream = io.StringIO()
    JsonReporter(ReportOptions(stream=stream)).report(results, store)
    assert json.loads(stream.getvalue()) == data


def test_committed_results_schema_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "results.schema.json").read_text())
    assert committed == results_schema(), "regenerate: python -m atp.core.results > docs/results.schema.json"
