"""How every reporter shows what makes a run's result more or less reliable: flaky tests (their
runs disagree), quarantined tests (a failure is reported but does not fail the run), the retries
of runs that met faults of the infrastructure, the budget that stopped a run, and the shard a
run is of. Agent text among them (a retry's reason) is shown escaped."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import xmlschema

from atp.core.reporter import ReportOptions
from atp.core.results import (
    Budget,
    Check,
    PlannedTest,
    Retry,
    RunHeader,
    RunResult,
    RunStore,
    Shard,
    SuiteResults,
    build_suite_results,
    results_schema,
)
from atp.reporters.console import ConsoleReporter
from atp.reporters.html import render as render_html
from atp.reporters.json_results import formatted
from atp.reporters.junit import document
from tests.conftest import FIXTURES
from tests.unit.test_html_report import Page, check_self_contained

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"
SCHEMA = xmlschema.XMLSchema(str(FIXTURES / "junit" / "JUnit.xsd"))
HOSTILE_REASON = "HTTP 503 \x1b[2J\x07<script>window.__pwned=1</script>"
EXCEEDED = "cost $1.03 exceeds max_cost_usd $1.00"
BASIS = "20251231-000000-abcdef"
MISSING = Check(name="contains:out.txt", passed=False, score=0.0, message="expected 'good'; not found")


def run(test_id: str, number: int = 1, outcome: str = "passed", **fields: Any) -> RunResult:
    values: dict[str, Any] = {"status": "completed", "score": 100.0 if outcome == "passed" else 0.0}
    values.update(fields)
    return RunResult(
        test_id=test_id,
        run_number=number,
        task_id=TID,
        outcome=outcome,  # type: ignore[arg-type]
        duration_seconds=0.5,
        started_at=NOW,
        **values,
    )


def suite(
    tmp_path: Path,
    reason: str = "HTTP 503",
    stopped_by: str | None = "budget",
    shard: Shard | None = None,
    budget: Budget | None = None,
) -> tuple[SuiteResults, RunStore]:
    """Five tests: ``steady`` passed after a retry; ``wobbly`` passed twice and failed once (flaky),
    its failed run retried on a worker; ``known_bad`` (quarantined) failed; ``held_ok``
    (quarantined) passed; ``later`` was left out when the budget was spent."""
    header = RunHeader(
        run_id="r",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=3),
        stopped_by=stopped_by,
        shard=shard if shard is not None else Shard(index=2, count=3, basis=BASIS),
        budget=budget
        if budget is not None
        else Budget(
            max_cost_usd=1.0, max_tokens=5000, spent_cost_usd=1.03, spent_tokens=1200, exceeded=EXCEEDED
        ),
        tests=[
            PlannedTest(id="steady", name="steady"),
            PlannedTest(id="wobbly", name="wobbly", runs=3),
            PlannedTest(id="known_bad", name="known_bad", quarantined=True),
            PlannedTest(id="held_ok", name="held_ok", quarantined=True),
            PlannedTest(id="later", name="later"),
        ],
    )
    store = RunStore.create(tmp_path / "runs", header)
    for result in [
        run("steady", retries=[Retry(attempt=1, reason=reason, waited_seconds=0.5)]),
        run("wobbly", 1),
        run(
            "wobbly",
            2,
            "failed",
            checks=[MISSING],
            retries=[
                Retry(attempt=1, reason="worker died", waited_seconds=1.25, where="10.0.0.7:7001"),
                Retry(attempt=2, reason="agent unreachable", waited_seconds=2.0),
            ],
        ),
        run("wobbly", 3),
        run("known_bad", outcome="failed", checks=[MISSING]),
        run("held_ok"),
    ]:
        store.append(result)
    store.close()
    return store.results(), store


def console(results: SuiteResults, store: RunStore, **options: Any) -> str:
    stream = io.StringIO()
    ConsoleReporter(ReportOptions(stream=stream, color=False, **options)).report(results, store)
    return stream.getvalue()


# --- console ------------------------------------------------------------------------------------


def test_console_marks_each_test_and_lists_the_retries_of_runs_that_did_not_pass(tmp_path: Path) -> None:
    out = console(*suite(tmp_path))
    body = out[out.index("Tests:") :].splitlines()
    assert body[1:9] == [
        "  ✓ steady     100.0/100  time 0.50s  1 retry",
        "  ✗ wobbly      66.7/100  (σ=57.7)  time 0.50s/run, 1.50s total  2/3 runs passed, very unstable, flaky, 2 retries",
        "    - run 2: contains:out.txt: expected 'good'; not found",
        "    ~ run 2: retried: attempt 1 on 10.0.0.7:7001: worker died (waited 1.25 s)",
        "    ~ run 2: retried: attempt 2: agent unreachable (waited 2 s)",
        "  ✗ known_bad    0.0/100  time 0.50s  quarantined",
        "    - contains:out.txt: expected 'good'; not found",
        "  ✓ held_ok    100.0/100  time 0.50s  quarantined",
    ]
    assert "HTTP 503" not in out  # the retry of a run that passed: only with --verbose


def test_console_says_under_the_summary_what_is_flaky_quarantined_retried_spent_and_sharded(
    tmp_path: Path,
) -> None:
    out = console(*suite(tmp_path)).splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("Summary:"))
    assert out[start : start + 7] == [
        "Summary: 2 passed, 2 failed (1 quarantined, not failing the run), 1 skipped (50.0%)",
        "Flaky: wobbly (their runs disagree: some passed, some failed)",
        "Quarantined: known_bad (failed), held_ok (passed); their failures are reported but do not fail the run",
        "Retries: 3 over 2 runs (attempts made again after faults of the infrastructure)",
        "Budget: spent $1.03 of $1.00, 1,200 of 5,000 tokens",
        f"BUDGET_EXCEEDED: {EXCEEDED}; 1 test not run — the suite is incomplete",
        f"Shard 2 of 3 (balanced by the durations of run {BASIS})",
    ]
    assert "  - later      skipped: not run: BUDGET_EXCEEDED (cost $1.03 exceeds max_cost_usd $1.00)" in out


def test_console_quiet_keeps_the_lines_under_the_summary(tmp_path: Path) -> None:
    out = console(*suite(tmp_path), quiet=True)
    assert (
        "steady" not in out.split("Summary:")[0]
        and "  ✗ known_bad    0.0/100  time 0.50s  quarantined" in out
    )
    assert (
        "Summary: 2 passed, 2 failed (1 quarantined, not failing the run), 1 skipped (50.0%) in 3.00s" in out
    )
    assert f"BUDGET_EXCEEDED: {EXCEEDED}; 1 test not run — the suite is incomplete" in out


def test_console_verbose_shows_the_retries_of_passed_runs_too(tmp_path: Path) -> None:
    out = console(*suite(tmp_path), verbose=True)
    assert "    ~ retried: attempt 1: HTTP 503 (waited 0.5 s)\n" in out
    assert "    ~ run 2: retried: attempt 1 on 10.0.0.7:7001: worker died (waited 1.25 s)\n" in out


def test_console_other_budgets_and_shards(tmp_path: Path) -> None:
    within = Budget(max_tokens=5000, spent_cost_usd=0.0042, spent_tokens=1200)
    out = console(*suite(tmp_path / "a", stopped_by=None, shard=Shard(index=1, count=4), budget=within))
    assert "Budget: spent $0.0042, 1,200 of 5,000 tokens\n" in out and "BUDGET_EXCEEDED" not in out
    assert "Shard 1 of 4 (shared by count)\n" in out
    spent_last = Budget(max_cost_usd=1.0, spent_cost_usd=1.03, exceeded=EXCEEDED)  # no run was left to stop
    out = console(*suite(tmp_path / "b", stopped_by=None, budget=spent_last))
    assert f"Budget: spent $1.03 of $1.00, 0 tokens; exceeded: {EXCEEDED}\n" in out


def test_console_all_failures_quarantined_and_ascii(tmp_path: Path) -> None:
    header = RunHeader(
        run_id="q",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW,
        tests=[
            PlannedTest(id="bad", name="bad", quarantined=True),
            PlannedTest(id="broken", name="broken", quarantined=True),
        ],
    )
    results = build_suite_results(
        header,
        [
            run("bad", outcome="failed", checks=[MISSING]),
            run("broken", outcome="error", status="failed", error="adapter raised"),
        ],
    )
    assert results.summary.ok and results.summary.quarantined == 2
    store = RunStore.create(tmp_path, header)
    out = console(results, store)
    assert (
        "Summary: 0 passed, 1 failed (quarantined, not failing the run), 0 skipped, "
        "1 error (quarantined, not failing the run) (0.0%)"
    ) in out
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    ConsoleReporter(ReportOptions(stream=stream, color=False)).report(*suite(tmp_path / "x"))
    stream.flush()
    assert f"BUDGET_EXCEEDED: {EXCEEDED}; 1 test not run - the suite is incomplete" in raw.getvalue().decode(
        "ascii"
    )


def test_console_escapes_a_hostile_reason_and_id(tmp_path: Path) -> None:
    results, store = suite(tmp_path, reason=HOSTILE_REASON)
    results.tests[1].id = "wob\x1b]0;owned\x07bly"
    out = console(results, store, verbose=True)
    assert "\x1b" not in out and "\x07" not in out
    assert (
        "    ~ retried: attempt 1: HTTP 503 \\e[2J\\x07<script>window.__pwned=1</script> (waited 0.5 s)"
        in out
    )
    assert "Flaky: wob\\e]0;owned\\x07bly (their runs disagree" in out


# --- JUnit --------------------------------------------------------------------------------------


def junit(results: SuiteResults, store: RunStore) -> ElementTree.Element:
    data = document(results, store)
    SCHEMA.validate(data.decode())
    suite_node = ElementTree.fromstring(data).find("testsuite")
    assert suite_node is not None
    return suite_node


def test_junit_writes_a_quarantined_failure_as_skipped_with_its_failure_in_system_out(tmp_path: Path) -> None:
    node = junit(*suite(tmp_path))
    cases = {case.get("name"): list(case) for case in node.iter("testcase")}
    [held] = cases["known_bad"]
    assert (
        held.tag == "skipped"
        and held.get("message") == "quarantined: contains:out.txt: expected 'good'; not found"
    )
    assert cases["held_ok"] == [] and [c.tag for c in cases["wobbly"]] == ["failure"]
    assert (node.get("tests"), node.get("failures"), node.get("errors"), node.get("skipped")) == (
        "5",
        "1",
        "0",
        "2",
    )
    out = node.findtext("system-out") or ""
    assert "5 tests: 2 passed, 2 failed, 0 errors, 1 skipped (1 of them quarantined" in out
    assert (
        "===== known_bad: quarantined failure: contains:out.txt: expected 'good'; not found =====\n"
        "the run: failed, status completed, score 0\n"
        "  - contains:out.txt (score 0): expected 'good'; not found\n"
    ) in out


def test_junit_properties_and_retries(tmp_path: Path) -> None:
    node = junit(*suite(tmp_path))
    properties = {p.get("name"): p.get("value") for p in node.iter("property")}
    assert properties["wobbly.flaky"] == "true" and "steady.flaky" not in properties
    assert properties["known_bad.quarantined"] == "true" and properties["held_ok.quarantined"] == "true"
    assert properties["steady.retries"] == "1" and properties["wobbly.retries"] == "2"
    assert "known_bad.retries" not in properties
    assert {k: v for k, v in properties.items() if k and k.startswith(("atp.budget", "atp.shard"))} == {
        "atp.budget.max_cost_usd": "1",
        "atp.budget.max_tokens": "5000",
        "atp.budget.spent_cost_usd": "1.03",
        "atp.budget.spent_tokens": "1200",
        "atp.budget.exceeded": EXCEEDED,
        "atp.shard": "2/3",
        "atp.shard.basis": BASIS,
    }
    out = node.findtext("system-out") or ""
    assert f"BUDGET_EXCEEDED: {EXCEEDED}; no run started after, tests not run are skipped\n" in out
    assert f"shard 2 of 3 (balanced by the durations of run {BASIS})\n" in out
    assert "flaky (runs disagree): wobbly\n" in out
    assert (
        "retries: 3 over 2 runs (faults of the infrastructure)\n"
        "  steady run 1: attempt 1: HTTP 503 (waited 0.5 s)\n"
        "  wobbly run 2: attempt 1 on 10.0.0.7:7001: worker died (waited 1.25 s)\n"
        "  wobbly run 2: attempt 2: agent unreachable (waited 2 s)\n"
    ) in out


def test_junit_without_budget_or_shard_has_no_such_properties(tmp_path: Path) -> None:
    header = RunHeader(
        run_id="p",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW,
        tests=[PlannedTest(id="t", name="t")],
    )
    store = RunStore.create(tmp_path, header)
    store.append(run("t"))
    store.close()
    node = junit(store.results(), store)
    names = [p.get("name") or "" for p in node.iter("property")]
    assert not [
        n for n in names if n.startswith(("atp.budget", "atp.shard")) or n.endswith((".flaky", ".retries"))
    ]
    assert "retries" not in (node.findtext("system-out") or "")


def test_junit_escapes_a_hostile_reason(tmp_path: Path) -> None:
    node = junit(*suite(tmp_path, reason=HOSTILE_REASON))
    out = node.findtext("system-out") or ""
    assert (
        "  steady run 1: attempt 1: HTTP 503 \\e[2J\\x07<script>window.__pwned=1</script> (waited 0.5 s)"
        in out
    )


# --- HTML ---------------------------------------------------------------------------------------


def test_html_carries_the_marks_and_draws_them(tmp_path: Path) -> None:
    results, store = suite(tmp_path)
    text = render_html(results, store).decode()
    page = check_self_contained(text)
    data = json.loads(page.data)["results"]
    tests = {t["id"]: t for t in data["tests"]}
    assert tests["wobbly"]["flaky"] is True and tests["known_bad"]["quarantined"] is True
    assert tests["wobbly"]["runs"][1]["retries"][0] == {
        "attempt": 1,
        "reason": "worker died",
        "waited_seconds": 1.25,
        "where": "10.0.0.7:7001",
    }
    assert (
        data["summary"]["flaky"] == 1
        and data["summary"]["quarantined"] == 1
        and data["summary"]["retries"] == 3
    )
    assert data["budget"]["exceeded"] == EXCEEDED and data["shard"] == {
        "index": 2,
        "count": 3,
        "basis": BASIS,
    }
    assert data["stopped_by"] == "budget"
    script = page.script
    for drawn in (
        '"flaky"',
        '"quarantined"',
        "flag-flaky",
        "flag-quarantined",
        '"Retries"',
        '"Budget"',
        '"Shard"',
        "BUDGET_EXCEEDED: ",
        "do not fail the run",
        "s.quarantined",
    ):
        assert drawn in script, drawn
    assert ".flag-quarantined" in page.styles[0]


def test_html_escapes_a_hostile_reason(tmp_path: Path) -> None:
    results, store = suite(tmp_path, reason=HOSTILE_REASON)
    text = render_html(results, store).decode()
    page = Page(text)
    assert text.count("<script") == 2 and "__pwned=1</script>" not in text
    assert "\\u003cscript\\u003ewindow.__pwned=1\\u003c/script\\u003e" in page.data
    data = json.loads(page.data)["results"]
    assert data["tests"][0]["runs"][0]["retries"][0]["reason"] == HOSTILE_REASON  # shown as text by the page


# --- JSON ---------------------------------------------------------------------------------------


def test_json_has_the_new_fields(tmp_path: Path) -> None:
    results, store = suite(tmp_path)
    data = json.loads(bytes(formatted(results, store)))
    jsonschema.Draft202012Validator(results_schema()).validate(data)
    assert data["format_version"] == "1.4" and data["stopped_by"] == "budget"
    assert {k: data["summary"][k] for k in ("flaky", "quarantined", "retries")} == {
        "flaky": 1,
        "quarantined": 1,
        "retries": 3,
    }
    assert data["budget"] == {
        "max_cost_usd": 1.0,
        "max_tokens": 5000,
        "spent_cost_usd": 1.03,
        "spent_tokens": 1200,
        "exceeded": EXCEEDED,
    }
    assert data["shard"] == {"index": 2, "count": 3, "basis": BASIS}
    tests = {t["id"]: t for t in data["tests"]}
    assert (tests["wobbly"]["flaky"], tests["wobbly"]["quarantined"]) == (True, False)
    assert (tests["known_bad"]["flaky"], tests["known_bad"]["quarantined"]) == (False, True)
    assert tests["steady"]["runs"][0]["retries"] == [
        {"attempt": 1, "reason": "HTTP 503", "waited_seconds": 0.5}
    ]
    assert tests["held_ok"]["runs"][0]["retries"] == []  # always written
    assert tests["later"]["skip_reason"] == f"not run: BUDGET_EXCEEDED ({EXCEEDED})"
