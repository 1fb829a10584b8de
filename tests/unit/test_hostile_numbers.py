"""Numbers from outside, at each way in (issue 26): for any number (integers of any size,
floats with NaN, infinities and -0.0, negatives, booleans), ATP neither raises an internal error
nor lets a limit pass. The ways in: token counts in events, an agent's metrics, an evaluator's
usage (a judge's), a budget adding up a run, a baseline file, a float option of a command."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atp.cli.app import BoundedFloat
from atp.core.baseline import Compared, compare_test, read_baseline
from atp.core.bounds import MAX_COUNT, number_in, shown_number
from atp.core.errors import AtpError, ProtocolError
from atp.core.evaluator import CannotEvaluate, EvalContext
from atp.core.limits import MAX_SPENT, BudgetMeter, spent
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    LLMRequestPayload,
    Metrics,
    ProgressPayload,
    ToolCallPayload,
    decode_event,
    make_event,
    sane_metrics,
)
from atp.core.results import Budget, RunResult, Usage
from atp.core.testing import make_test, response, run_evaluator
from atp.core.trace import RunTrace, Trace, TraceLimitExceeded, read_events
from atp.evaluators.behavior import MaxSteps
from tests.facts import says

TID = "00000000-0000-0000-0000-000000000000"
SETTINGS = settings(max_examples=200, deadline=None)

NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.sampled_from([0, 1, -1, MAX_COUNT, MAX_COUNT + 1, 2 * MAX_COUNT, 10**400, -(10**400)]),
    st.floats(),
    st.sampled_from(
        [-0.0, 0.5, 1e15, 1e15 * (1 + 1e-15), 2e15, 1e308, float("nan"), float("inf"), -float("inf")]
    ),
    st.booleans(),
)
"""Any number a hostile sender may put where ATP expects one."""


def within(value: object, *, integer: bool) -> bool:
    return number_in(value, 0, MAX_COUNT, integer=integer) is not None


def result(metrics: Metrics | None = None, usage: dict[str, Usage] | None = None) -> RunResult:
    return RunResult(
        test_id="t",
        run_number=1,
        task_id=TID,
        outcome="passed",
        status="completed",
        score=100.0,
        duration_seconds=0.1,
        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        metrics=metrics or Metrics(),
        evaluation_usage=usage or {},
    )


# --- token counts in events ------------------------------------------------------------------


@SETTINGS
@given(NUMBERS, st.sampled_from(["input_tokens", "output_tokens"]))
def test_a_token_count_in_an_event_is_counted_within_bounds_or_fails_the_run(value: Any, field: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        trace = RunTrace(TID, events_path=path, log_path=None)
        first = make_event(TID, 0, ToolCallPayload(tool="search"))
        sent = make_event(TID, 1, LLMRequestPayload(**{field: value}))
        if within(value, integer=True):
            trace.events([first, sent])
            assert getattr(trace.summary, field) == (value if value > 0 else 0)
        else:
            with pytest.raises(TraceLimitExceeded) as caught:
                trace.events([first, sent])
            says(str(caught.value), "event 1 (llm_request)", f"payload.{field} = {shown_number(value)}")
            assert trace.summary.events == 1  # the event before it is kept
        trace.close()
        assert 0 <= getattr(trace.summary, field) <= MAX_COUNT
        assert len(list(read_events(path))) == trace.summary.events  # the events file reads back


@SETTINGS
@given(st.integers(min_value=-(10**500), max_value=10**500))
def test_a_token_count_from_json_decodes_and_is_bounded_when_it_reaches_a_trace(value: int) -> None:
    line = json.dumps(
        {
            "version": "1.0",
            "task_id": TID,
            "timestamp": "2026-01-01T00:00:00Z",
            "sequence": 0,
            "event_type": "llm_request",
            "payload": {"input_tokens": value},
        }
    )
    try:
        event = decode_event(line)
    except ProtocolError:
        return
    trace = RunTrace(TID, events_path=None, log_path=None)
    if within(value, integer=True):
        trace.event(event, line.encode())
    else:
        with pytest.raises(TraceLimitExceeded):
            trace.event(event, line.encode())
    assert 0 <= trace.summary.input_tokens <= MAX_COUNT


def test_many_events_never_sum_beyond_the_bound_and_a_file_edited_by_hand_reads_back(tmp_path: Path) -> None:
    events = [make_event(TID, i, LLMRequestPayload(input_tokens=MAX_COUNT)) for i in range(5)]
    summary = Trace.of(events).summary
    assert summary.input_tokens == MAX_COUNT and summary.llm_calls == 5
    with pytest.raises(TraceLimitExceeded, match="payload.current_step"):
        Trace.of([make_event(TID, 5, ProgressPayload(current_step=10**30))])
    good = '{"version":"1.0","task_id":"t","timestamp":"2026-01-01T00:00:00Z","sequence":0,"event_type":"llm_request","payload":{"input_tokens":5}}'
    edited = good.replace('"input_tokens":5', f'"input_tokens":{10**400}')
    path = tmp_path / "events.jsonl"
    path.write_text(f"{good}\n{edited}\n{good}\n")
    assert len(list(read_events(path))) == 2


@SETTINGS
@given(
    NUMBERS,
    st.sampled_from(
        [
            ("tool_call", "duration_ms", 1e15),
            ("llm_request", "temperature", 1e15),
            ("progress", "percentage", 100),
            ("progress", "total_steps", 1e15),
            ("artifact_created", "size_bytes", 1e15),
            ("error", "retry_after_ms", 1e15),
            ("progress", "sequence", 1e15),
        ]
    ),
)
def test_any_other_number_of_an_event_is_bounded_where_it_is_decoded(
    value: Any, where: tuple[str, str, float]
) -> None:
    event_type, field, high = where
    message: dict[str, Any] = {
        "version": "1.0",
        "task_id": TID,
        "timestamp": "2026-01-01T00:00:00Z",
        "sequence": 0,
        "event_type": event_type,
        "payload": {"tool": "t"} if event_type == "tool_call" else {},
    }
    if field == "sequence":
        message["sequence"] = value
    else:
        message["payload"][field] = value
    try:
        text = json.dumps(message, allow_nan=False)
    except ValueError:  # NaN and infinities are not JSON
        return
    try:
        event = decode_event(text)
    except ProtocolError as exc:
        says(str(exc), field)
        assert (
            number_in(value, 0, high) is None
            or isinstance(value, bool)
            or (isinstance(value, float) and field in ("sequence", "total_steps", "size_bytes"))
        )
        return
    got = event.sequence if field == "sequence" else getattr(event.payload, field)
    assert number_in(got, 0, high) is not None


# --- an agent's metrics ----------------------------------------------------------------------


@SETTINGS
@given(NUMBERS, st.sampled_from(sorted(Metrics.__struct_fields__)))
def test_a_metric_out_of_bounds_counts_as_the_most_and_is_a_problem(value: Any, field: str) -> None:
    counts = field not in ("wall_time_seconds", "cost_usd")
    checked, problems = sane_metrics(Metrics(**{field: value}))
    kept = getattr(checked, field)
    assert within(kept, integer=counts)
    if within(value, integer=counts):
        assert kept == value and problems == []
    else:
        assert kept == MAX_COUNT
        (problem,) = problems
        says(problem, f"metrics.{field} = {shown_number(value)}", "out of bounds")
    # no limit passes on it: a budget counts it whole, max_steps sees it
    meter = BudgetMeter(Budget(max_cost_usd=1.0, max_tokens=1000))
    meter.spend(result(checked))
    if field in ("cost_usd", "total_tokens") and not within(value, integer=counts):
        assert meter.exceeded
    if field == "total_steps":
        (check,) = run_evaluator(MaxSteps, {"limit": 5}, response(metrics=checked))
        assert check.passed is (within(value, integer=True) and value <= 5)


# --- an evaluator's usage (a judge's) and the budget -------------------------------------------


@SETTINGS
@given(NUMBERS, st.sampled_from(["calls", "cached", "input_tokens", "output_tokens", "cost_usd"]))
def test_usage_out_of_bounds_cannot_cancel_what_the_agent_spent(value: Any, field: str) -> None:
    test = make_test()
    ctx = EvalContext(
        test=test,
        request=ATPRequest(version=PROTOCOL_VERSION, task_id=TID, task=test.task),
        response=response(),
        trace=Trace.of([]),
    )
    good = within(value, integer=field != "cost_usd")
    if good:
        ctx.add_usage("llm_eval/m", **{field: value})
    else:
        with pytest.raises(CannotEvaluate) as caught:
            ctx.add_usage("llm_eval/m", **{field: value})
        says(str(caught.value), "llm_eval/m", f"{field} = {shown_number(value)}")
    usage = ctx.usage["llm_eval/m"]
    for name in ("calls", "cached", "input_tokens", "output_tokens"):
        assert within(getattr(usage, name), integer=True)
    assert usage.cost_usd is None or within(usage.cost_usd, integer=False)
    meter = BudgetMeter(Budget(max_cost_usd=1.0, max_tokens=1000))
    meter.spend(result(Metrics(total_tokens=500, cost_usd=0.5), ctx.usage))
    assert meter.budget.spent_tokens >= 500 and meter.budget.spent_cost_usd >= 0.5
    if not good and field != "calls" and field != "cached":
        assert meter.exceeded


@SETTINGS
@given(NUMBERS, NUMBERS)
def test_a_budget_adds_any_figures_without_raising_and_never_less(cost: Any, tokens: Any) -> None:
    """Results read back (a resumed run, a worker's) reach the meter unchecked: a figure out of
    bounds counts as the most, never as less than nothing."""
    meter = BudgetMeter(Budget(max_cost_usd=1.0, max_tokens=1000))
    usage = {"judge": Usage(input_tokens=tokens, cost_usd=cost)}
    meter.spend(result(Metrics(cost_usd=cost, total_tokens=tokens), usage))
    assert 0 <= meter.budget.spent_cost_usd <= MAX_SPENT and 0 <= meter.budget.spent_tokens <= MAX_SPENT
    if not within(cost, integer=False) or not within(tokens, integer=False):
        assert meter.exceeded
    assert spent(None) == 0.0 and spent(-1) == MAX_SPENT


# --- a baseline file --------------------------------------------------------------------------


@SETTINGS
@given(NUMBERS, st.sampled_from(["mean_score", "std", "n_runs", "score", "metric", "ci"]))
def test_a_baseline_number_out_of_bounds_is_an_atp_error_naming_the_field(value: Any, field: str) -> None:
    entry: dict[str, Any] = {"mean_score": 80.0, "std": 3.0, "n_runs": 2}
    runs = [{"score": 80.0, "metrics": {"total_tokens": 5}}, {"score": 84.0}]
    if field in ("mean_score", "std", "n_runs"):
        entry[field] = value
    elif field == "score":
        entry["runs"] = [{**runs[0], "score": value}, runs[1]]
    elif field == "metric":
        entry["runs"] = [{**runs[0], "metrics": {"total_tokens": value}}, runs[1]]
    else:
        entry["ci_95"] = [value, 90.0]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "baseline.json"
        path.write_text(json.dumps({"format": "atp-baseline", "suite": "s", "tests": {"t": entry}}))
        try:
            baseline = read_baseline(path)
        except AtpError as exc:
            says(str(exc), path)
            return
    reference = baseline.tests["t"]
    for checked in (reference.mean_score, reference.std, *(run.score for run in reference.runs)):
        assert checked is None or number_in(checked, 0, 100) is not None
    assert 1 <= reference.n_runs <= 1_000_000
    # a 50-point drop, compared: figures, never an overflow
    comparison = compare_test(Compared(id="t", scores=[30.0, 31.0, 29.0]), reference)
    assert comparison.p_value is None or 0 <= comparison.p_value <= 1


def test_a_50_point_drop_against_a_summary_baseline_is_a_regression(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    entry = {"mean_score": 80.0, "std": 3.0, "n_runs": 1_000_000}
    path.write_text(json.dumps({"format": "atp-baseline", "suite": "s", "tests": {"t": entry}}))
    comparison = compare_test(Compared(id="t", scores=[30.0, 31.0, 29.0]), read_baseline(path).tests["t"])
    assert comparison.verdict == "regression"


# --- a float option of a command ----------------------------------------------------------------


@SETTINGS
@given(st.one_of(st.text(max_size=20), NUMBERS.map(str), st.floats().map(repr)))
def test_a_bounded_float_option_takes_a_finite_number_in_range_or_is_a_usage_error(text: str) -> None:
    option = BoundedFloat(0, 3600, low_open=True)
    try:
        value = option.convert(text, None, None)
    except click.BadParameter as exc:
        says(exc.format_message(), "is not")
        return
    assert isinstance(value, float) and 0 < value <= 3600


def test_every_float_option_of_every_command_is_bounded() -> None:
    from atp.cli.main import cli

    ctx = click.Context(cli)
    found: list[str] = []

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, f"{path} {name}")
        for param in command.params:
            if isinstance(param.type, click.types.FloatParamType):
                found.append(f"{path} {param.name}")
                assert isinstance(param.type, BoundedFloat), f"{path} {param.name} is not a BoundedFloat"

    walk(cli, "atp")
    assert {"atp validate timeout", "atp judge calibrate min_kappa", "atp test max_cost_usd"} <= set(found)
