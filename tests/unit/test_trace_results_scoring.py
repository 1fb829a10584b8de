from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from atp.core.errors import AtpError
from atp.core.protocol import (
    ATPResponse,
    Constraints,
    ErrorPayload,
    LLMRequestPayload,
    Metrics,
    ProgressPayload,
    ToolCallPayload,
    encode,
    make_event,
)
from atp.core.results import (
    HEADER_FILE,
    RESULTS_FILE,
    Check,
    PlannedTest,
    RunHeader,
    RunResult,
    RunStore,
    build_suite_results,
)
from atp.core.scoring import composite, cost, efficiency, score_run
from atp.core.secrets import Masker
from atp.core.suite import ScoringWeights
from atp.core.trace import RunTrace, Trace, TraceLimitExceeded, TraceSummary
from tests.facts import says

TID = "550e8400-e29b-41d4-a716-446655440000"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


# --- trace ----------------------------------------------------------------------------------


def test_summary_folds_every_event_type() -> None:
    events = [
        make_event(TID, 0, ToolCallPayload(tool="a")),
        make_event(TID, 1, ToolCallPayload(tool="a")),
        make_event(TID, 2, ToolCallPayload(tool="b")),
        make_event(TID, 3, LLMRequestPayload(input_tokens=10, output_tokens=5)),
        make_event(TID, 4, ErrorPayload(message="x", recoverable=True)),
        make_event(TID, 5, ErrorPayload(message="y")),
        make_event(TID, 6, ProgressPayload(current_step=4)),
        make_event(TID, 6, ProgressPayload(current_step=2)),
    ]
    summary = Trace.of(events).summary
    assert summary.events == 8
    assert summary.tool_calls == {"a": 2, "b": 1} and summary.tool_call_count == 3
    assert (summary.llm_calls, summary.input_tokens, summary.output_tokens) == (1, 10, 5)
    assert (summary.errors, summary.unrecoverable_errors) == (2, 1)
    assert summary.max_step == 4 and summary.out_of_order == 1
    assert summary.by_type == {"tool_call": 3, "llm_request": 1, "error": 2, "progress": 2}
    metrics = summary.metrics(1.5)
    assert metrics == Metrics(
        total_tokens=15,
        input_tokens=10,
        output_tokens=5,
        total_steps=4,
        tool_calls=3,
        llm_calls=1,
        wall_time_seconds=1.5,
    )


def test_run_trace_writes_masks_and_warns(tmp_path: Path) -> None:
    trace = RunTrace(
        TID,
        events_path=tmp_path / "e" / "x.jsonl",
        log_path=tmp_path / "l" / "x.log",
        masker=Masker(["hunter22"]),
    )
    event = make_event(TID, 0, ToolCallPayload(tool="login", input={"password": "hunter22"}))
    trace.event(event, encode(event) + b"\n")
    trace.event(make_event(TID, 1, ProgressPayload(percentage=1)))
    trace.event(make_event("another", 2, ProgressPayload()))
    trace.event(make_event("another", 3, ProgressPayload()))
    trace.log("password is hunter22")
    trace.close()
    lines = (tmp_path / "e/x.jsonl").read_bytes().splitlines()
    assert len(lines) == 2 and b"hunter22" not in lines[0] and b'"password":"***"' in lines[0]
    assert (tmp_path / "l/x.log").read_text() == "password is ***\n"
    assert trace.summary.events == 2
    says(trace.warnings[0], "sequence 2", "task_id 'another'", repr(TID), "dropped")
    says(trace.warnings[-1], "2 events", "task_id", "dropped")
    assert [e.sequence for e in trace.trace()] == [0, 1]


def test_run_trace_without_events_creates_no_files(tmp_path: Path) -> None:
    trace = RunTrace(TID, events_path=tmp_path / "e.jsonl", log_path=tmp_path / "l.log")
    trace.close()
    assert not trace.events_written and not trace.log_written and list(tmp_path.iterdir()) == []
    assert list(trace.trace()) == []


def test_run_trace_limits(tmp_path: Path) -> None:
    trace = RunTrace(TID, events_path=None, log_path=tmp_path / "l.log", max_events=2, max_log_bytes=20)
    trace.event(make_event(TID, 0, ProgressPayload()))
    trace.event(make_event(TID, 1, ProgressPayload()))
    with pytest.raises(TraceLimitExceeded, match="more than 2"):
        trace.event(make_event(TID, 2, ProgressPayload()))
    for i in range(10):
        trace.log(f"line number {i}")
    trace.close()
    # exact: where the log is cut and the marker the file ends with are the point
    assert (tmp_path / "l.log").read_text() == "line number 0\n[log truncated: more than 20 bytes]\n"
    assert trace.log_lines == 10 and list(trace.log_tail)[-1] == "line number 9"


def test_masker_ignores_short_values_and_masks_json_escaped_forms() -> None:
    masker = Masker(["abc", 'pa"ss\\word', None])  # type: ignore[list-item]
    assert not Masker(["abc"])
    assert masker.text('abc pa"ss\\word') == "abc ***"
    assert masker.bytes(json.dumps({"p": 'pa"ss\\word'}).encode()) == b'{"p": "***"}'


# --- scoring --------------------------------------------------------------------------------


def test_efficiency_and_cost_curves() -> None:
    assert efficiency(5, 10) == 0.5 and efficiency(20, 10) == 0.0
    assert efficiency(3, 10, optimal_steps=4) == 1.0 and efficiency(7, 10, optimal_steps=4) == 0.5
    assert cost(0, 100) == 1.0 and cost(100, 100) == 0.0 and 0.4 < cost(50, 100) < 0.45
    assert cost(1, 0) == 0.0 and cost(0, 0) == 1.0


def test_composite_renormalises_over_present_components() -> None:
    weights = ScoringWeights()
    assert composite({}, weights) == 100.0
    assert composite({"completeness": 0.5}, weights) == 50.0
    assert composite({"quality": 1.0, "completeness": 0.0}, weights) == pytest.approx(
        100 * 0.4 / 0.7, abs=1e-3
    )


def response(status: str = "completed", **metrics: int) -> ATPResponse:
    return ATPResponse(version="1.0", task_id=TID, status=status, artifacts=[], metrics=Metrics(**metrics))  # type: ignore[arg-type]


def test_score_run_breakdown() -> None:
    good = Check(name="a", passed=True, score=1.0, message="")
    half = Check(name="b", passed=False, score=0.5, message="")
    constraints = Constraints(max_steps=10, max_tokens=1000)
    score, parts = score_run(
        [good, half],
        [half],
        response(total_steps=5, total_tokens=0),
        TraceSummary(),
        constraints,
        ScoringWeights(),
    )
    assert parts == {"quality": 0.5, "completeness": 0.5, "efficiency": 0.5, "cost": 1.0}
    assert score == pytest.approx(100 * (0.4 * 0.5 + 0.3 * 0.5 + 0.2 * 0.5 + 0.1 * 1.0))
    zero, parts = score_run([good], [], response("timeout"), TraceSummary(), constraints, ScoringWeights())
    assert zero == 0.0 and parts == {"completeness": 1.0}
    budget_only = score_run([], [], response(), TraceSummary(), Constraints(budget_usd=1.0), ScoringWeights())
    assert budget_only == (100.0, {})


# --- results and the run directory ----------------------------------------------------------


def result(test_id: str, n: int, outcome: str, score: float = 50.0) -> RunResult:
    return RunResult(
        test_id=test_id,
        run_number=n,
        task_id=TID,
        outcome=outcome,
        status="completed",  # type: ignore[arg-type]
        score=score,
        duration_seconds=0.5,
        started_at=NOW + timedelta(seconds=n),
    )


def header(**kw: object) -> RunHeader:
    tests = [
        PlannedTest(id="a", name="A", runs=2),
        PlannedTest(id="b", name="B"),
        PlannedTest(id="c", name="C"),
        PlannedTest(id="d", name="D", skip="later"),
    ]
    return RunHeader(run_id="r1", suite="s", agent="ag", agent_type="cli", started_at=NOW, tests=tests, **kw)  # type: ignore[arg-type]


def test_suite_results_statuses_and_summary() -> None:
    runs = [
        result("a", 2, "failed", 20),
        result("a", 1, "passed", 80),
        result("b", 1, "error"),
        result("c", 1, "passed"),
    ]
    results = build_suite_results(header(finished_at=NOW + timedelta(seconds=9), deselected=2), runs)
    a, b, c, d = results.tests
    assert (a.status, a.score, [r.run_number for r in a.runs]) == ("failed", 50.0, [1, 2])
    assert b.status == "error" and c.status == "passed"
    assert (d.status, d.skip_reason) == ("skipped", "later")
    s = results.summary
    assert (s.total, s.passed, s.failed, s.errors, s.skipped, s.deselected, s.runs) == (4, 1, 1, 1, 1, 2, 4)
    assert results.duration_seconds == 9.0 and not results.interrupted and not s.ok


def test_store_round_trip_and_cut_last_line(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, header())
    store.append(result("a", 1, "passed"))
    store.close()
    with (store.directory / "results.jsonl").open("ab") as handle:
        handle.write(b'{"test_id": "a", "run_nu')  # a crash mid-write
    reopened = RunStore.open(store.directory)
    results = reopened.results()
    assert results.interrupted and results.summary.runs == 1
    assert RunStore.latest(tmp_path) == store.directory


def test_store_errors(tmp_path: Path) -> None:
    with pytest.raises(AtpError) as info:
        RunStore.open(tmp_path)
    says(str(info.value), tmp_path, HEADER_FILE)
    with pytest.raises(AtpError) as info:
        RunStore.latest(tmp_path / "nothing")
    says(str(info.value), "no run directories", tmp_path / "nothing", "atp test")
    store = RunStore.create(tmp_path, header())
    (store.directory / "results.jsonl").write_text("garbage\n")
    assert store.read_results() == []
    [problem] = store.problems
    says(problem, f"{store.directory / RESULTS_FILE}:1", "not a run result")
    assert store.results().problems == store.problems


def test_file_names_are_safe_and_distinct(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    assert store.events_file("plain_id-1.x", 2) == "events/plain_id-1.x.2.jsonl"
    odd = store.events_file("a/b c", 1)
    assert odd.startswith("events/a_b_c-") and odd != store.events_file("a_b c", 1)
    assert store.log_file("t", 3) == "logs/t.3.log"
