"""The kernel's parts for big suites: retry decisions and backoff, budgets, rate limits, shard
partitions, resuming a run directory, flaky and quarantined tests in the results."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest

from atp.core.adaptive import Adaptive
from atp.core.errors import AdapterError, AgentError, ConfigError
from atp.core.limits import BudgetMeter, RateLimiter, parse_rate_limit
from atp.core.protocol import Constraints, Metrics, Task
from atp.core.results import (
    Budget,
    PlannedTest,
    RunHeader,
    RunResult,
    RunStore,
    Usage,
    build_suite_results,
    is_flaky,
)
from atp.core.resume import check_resumable, done_runs
from atp.core.retry import MAX_BACKOFF_SECONDS, MAX_RETRY_AFTER_SECONDS, backoff, infrastructure_fault
from atp.core.shard import parse_shard, partition
from atp.core.suite import Test, test_fingerprint
from tests.facts import says

NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)


def run(test_id: str = "t", number: int = 1, outcome: str = "passed", **extra: object) -> RunResult:
    return RunResult(
        test_id=test_id, run_number=number, task_id=f"{test_id}-{number}", outcome=outcome,  # type: ignore[arg-type]
        status="completed", score=100.0 if outcome == "passed" else 0.0, duration_seconds=0.1, started_at=NOW,
        **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def a_test(test_id: str, runs: int = 1, description: str = "x") -> Test:
    return Test(
        id=test_id, name=test_id, task=Task(description=description), constraints=Constraints(), runs=runs
    )


# --- retries --------------------------------------------------------------------------------


def test_only_infrastructure_faults_are_retried() -> None:
    assert infrastructure_fault(AdapterError("cannot connect")) is not None
    assert infrastructure_fault(AdapterError("503", retry_after=2.0)) == ("503", 2.0)
    assert infrastructure_fault(ConnectionRefusedError(111, "refused")) is not None
    assert infrastructure_fault(AdapterError("no such program", retryable=False)) is None
    assert infrastructure_fault(AgentError("crashed")) is None
    assert infrastructure_fault(TimeoutError()) is None
    assert infrastructure_fault(ValueError("bug")) is None


def test_backoff_doubles_with_jitter_is_capped_and_honours_retry_after() -> None:
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0)):
        waits = [backoff(attempt, 1.0) for _ in range(200)]
        assert all(base / 2 <= w <= base for w in waits)
        assert len(set(waits)) > 100  # jittered, not one value
    assert all(backoff(40, 1.0) <= MAX_BACKOFF_SECONDS for _ in range(50))
    assert backoff(1, 1.0, retry_after=7.5) == 7.5
    assert backoff(1, 1.0, retry_after=0.0) == 0.0
    assert backoff(1, 1.0, retry_after=10_000) == MAX_RETRY_AFTER_SECONDS


def test_an_adapter_error_survives_pickling_with_its_retry_fields() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(AdapterError("gone", retryable=False, retry_after=3.0)))
    assert isinstance(error, AdapterError) and str(error) == "gone"
    assert error.retryable is False and error.retry_after == 3.0


# --- budget and rate limit ------------------------------------------------------------------


def test_a_budget_counts_the_agents_and_the_judges_spending_and_says_once_when_reached() -> None:
    meter = BudgetMeter(Budget(max_cost_usd=1.0, max_tokens=10_000))
    meter.spend(run(metrics=Metrics(cost_usd=0.5, total_tokens=1000)))
    assert not meter.exceeded
    judged = run(
        metrics=Metrics(cost_usd=0.3),
        evaluation_usage={"llm_eval/m": Usage(calls=1, input_tokens=200, output_tokens=50, cost_usd=0.25)},
    )
    meter.spend(judged)
    assert meter.exceeded and meter.budget.spent_cost_usd == pytest.approx(1.05)
    assert meter.budget.spent_tokens == 1250
    first = meter.budget.exceeded
    meter.spend(run(metrics=Metrics(cost_usd=5.0)))
    assert meter.budget.exceeded == first  # what stopped it stays said as it was


def test_a_token_budget_alone() -> None:
    meter = BudgetMeter(Budget(max_tokens=100))
    meter.spend(run(metrics=Metrics(input_tokens=60, output_tokens=40)))
    assert meter.exceeded
    says(meter.budget.exceeded, "max_tokens 100", "100 tokens")


@pytest.mark.parametrize(
    ("value", "interval"),
    [(10, 0.1), ("10/s", 0.1), ("30/min", 2.0), ("2/h", 1800.0), (" 4 / second ", 0.25), ("0.5/s", 2.0)],
)
def test_rate_limits_are_read(value: object, interval: float) -> None:
    assert parse_rate_limit(value).interval == pytest.approx(interval)


@pytest.mark.parametrize("value", ["fast", "10/fortnight", 0, -1, "0/s", True, None, float("inf")])
def test_a_wrong_rate_limit_says_what_is_accepted(value: object) -> None:
    with pytest.raises(ConfigError, match="rate_limit"):
        parse_rate_limit(value)


def test_a_rate_limiter_spaces_starts_for_every_worker_sharing_it() -> None:
    limiter = RateLimiter(parse_rate_limit("20/s"))
    starts: list[float] = []

    async def worker() -> None:
        for _ in range(3):
            await limiter.acquire()
            starts.append(time.monotonic())

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(worker)

    began = time.monotonic()
    anyio.run(main)
    starts.sort()
    assert len(starts) == 12 and starts[-1] - began >= 11 * 0.05 - 0.01
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(starts))


# --- shards ---------------------------------------------------------------------------------


def shares_of(
    tests: list[Test], count: int, durations: dict[str, float] | None = None
) -> list[dict[str, list[int] | None]]:
    return partition(tests, count, lambda t: t.runs, lambda t: None, durations or {})


def test_shards_cover_every_run_exactly_once_and_are_deterministic() -> None:
    tests = [a_test(f"t{i}", runs=1 + i % 4) for i in range(25)]
    for count in (1, 2, 3, 7, 40):
        shares = shares_of(tests, count)
        assert shares == shares_of(tests, count)
        made = [(t, n) for share in shares for t, numbers in share.items() for n in numbers or []]
        assert sorted(made) == sorted((t.id, n) for t in tests for n in range(1, t.runs + 1))
        sizes = [sum(len(n or []) for n in share.values()) for share in shares]
        assert max(sizes) - min(sizes) <= 1  # by count without a basis


def test_shards_balance_by_durations() -> None:
    tests = [a_test("slow"), a_test("mid1"), a_test("mid2"), *[a_test(f"fast{i}") for i in range(6)]]
    durations = {"slow": 10.0, "mid1": 5.0, "mid2": 5.0, **{f"fast{i}": 1.0 for i in range(6)}}
    shares = shares_of(tests, 2, durations)
    loads = [sum(durations[t] for t in share) for share in shares]
    assert loads == [13.0, 13.0]
    assert list(shares[0]) == [t.id for t in tests if t.id in shares[0]]  # in the suite's order


def test_an_adaptive_test_stays_in_one_shard_and_a_skipped_one_goes_to_the_first() -> None:
    adaptive = a_test("auto", runs=20)
    skipped = Test(
        id="skipped", name="skipped", task=Task(description="x"), constraints=Constraints(), skip="later"
    )
    shares = partition(
        [adaptive, skipped, a_test("x", 3)],
        3,
        lambda t: t.runs,
        lambda t: Adaptive() if t.id == "auto" else None,
        {},
    )
    holders = [i for i, share in enumerate(shares) if "auto" in share]
    assert len(holders) == 1 and shares[holders[0]]["auto"] is None
    assert shares[0]["skipped"] is None and all("skipped" not in s for s in shares[1:])


@pytest.mark.parametrize("value", ["0/3", "4/3", "x", "1-3", "1/0", ""])
def test_a_wrong_shard_says_how_to_write_it(value: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        parse_shard(value)


# --- resume ---------------------------------------------------------------------------------


def header_for(tests: list[Test], **extra: object) -> RunHeader:
    return RunHeader(
        run_id="r1", suite="s", agent="a", agent_type="cli", started_at=NOW,
        tests=[PlannedTest(id=t.id, name=t.name, runs=t.runs, fingerprint=test_fingerprint(t)) for t in tests],
        **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def test_reopening_a_run_directory_takes_away_a_line_cut_short(tmp_path: Path) -> None:
    header = header_for([a_test("t", runs=3)])
    store = RunStore.create(tmp_path, header)
    store.append(run("t", 1))
    store.append(run("t", 2))
    store.close()
    results = store.directory / "results.jsonl"
    whole = results.read_bytes()
    results.write_bytes(whole + b'{"test_id": "t", "run_nu')  # killed mid-write
    again = RunStore.reopen(store.directory)
    assert results.read_bytes() == whole
    again.append(run("t", 3))
    again.close()
    assert [r.run_number for r in RunStore.open(store.directory).read_results()] == [1, 2, 3]
    assert RunStore.open(store.directory).results().problems == []


def test_done_runs_count_each_planned_run_once() -> None:
    header = header_for([a_test("t", runs=3)])
    done = done_runs([run("t", 1), run("t", 1, outcome="failed"), run("t", 3), run("ghost", 1)], header)
    assert {k: [(r.run_number, r.outcome) for r in v] for k, v in done.items()} == {
        "t": [(1, "passed"), (3, "passed")]
    }


def test_resuming_a_changed_suite_is_refused_unless_forced() -> None:
    header = header_for([a_test("t"), a_test("u")])
    now = {"t": a_test("t", description="changed"), "u": a_test("u")}
    with pytest.raises(ConfigError) as info:
        check_resumable(header, "s", "a", now, force=False)
    says(str(info.value), "r1", "'t'", "changed", "--force")
    check_resumable(header, "s", "a", now, force=True)
    with pytest.raises(ConfigError) as info:
        check_resumable(header, "s", "b", now, force=True)  # another agent: never
    says(str(info.value), "r1", "agent 'a'", "'b'")
    with pytest.raises(ConfigError) as info:
        check_resumable(header, "s", "a", {"t": a_test("t")}, force=False)
    says(str(info.value), "r1", "'u'")


# --- flaky and quarantined ------------------------------------------------------------------


def test_runs_that_disagree_are_flaky_errors_are_not() -> None:
    assert is_flaky([run(outcome="passed"), run(number=2, outcome="failed")])
    assert not is_flaky([run(outcome="passed"), run(number=2, outcome="error")])
    assert not is_flaky([run(outcome="failed"), run(number=2, outcome="failed")])


def test_a_quarantined_failure_does_not_make_the_summary_fail() -> None:
    header = header_for([a_test("bad"), a_test("good")], finished_at=NOW)
    header.tests[0].quarantined = True
    results = build_suite_results(header, [run("bad", outcome="failed"), run("good")])
    assert results.summary.failed == 1 and results.summary.quarantined == 1 and results.summary.ok
    header.tests[0].quarantined = False
    assert not build_suite_results(header, [run("bad", outcome="failed"), run("good")]).summary.ok


def test_tests_a_spent_budget_left_out_say_budget_exceeded() -> None:
    header = header_for([a_test("ran"), a_test("left")], finished_at=NOW, stopped_by="budget",
                        budget=Budget(max_cost_usd=1.0, spent_cost_usd=1.2, exceeded="max_cost_usd 1 reached: $1.2000 spent"))  # fmt: skip
    results = build_suite_results(header, [run("ran")])
    left = results.tests[1]
    assert left.status == "skipped"
    # the reason stored in the header is a fact given whole
    says(left.skip_reason, "BUDGET_EXCEEDED", "max_cost_usd 1 reached: $1.2000 spent")
    assert results.summary.incomplete == 1 and not results.summary.ok


def test_a_rate_limit_of_less_than_a_run_an_hour_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_rate_limit("0.5/h")
    says(str(info.value), "rate_limit", "'0.5/h'", "an hour")
    with pytest.raises(ConfigError):
        parse_rate_limit(1e-300)


def test_an_agent_reporting_fewer_tokens_than_its_events_show_spends_what_they_show() -> None:
    from atp.core.trace import TraceSummary

    meter = BudgetMeter(Budget(max_tokens=500))
    meter.spend(run(metrics=Metrics(total_tokens=0), trace=TraceSummary(input_tokens=400, output_tokens=200)))
    assert meter.budget.spent_tokens == 600 and meter.exceeded


def test_a_run_directory_in_use_is_locked_until_its_writer_closes_it(tmp_path: Path) -> None:
    from atp.core.errors import AtpError

    store = RunStore.create(tmp_path, header_for([a_test("t")]))
    assert RunStore.in_use(store.directory)
    with pytest.raises(AtpError) as info:
        RunStore.open(store.directory).lock()
    says(str(info.value), store.directory, "still running")
    store.close()
    assert not RunStore.in_use(store.directory)
    RunStore.reopen(store.directory).close()


def test_a_result_stored_twice_counts_once_and_is_a_problem() -> None:
    header = header_for([a_test("t", runs=2)], finished_at=NOW)
    results = build_suite_results(header, [run("t", 1), run("t", 1, outcome="failed"), run("t", 2)])
    assert [r.outcome for r in results.tests[0].runs] == ["passed", "passed"]
    [problem] = results.problems
    says(problem, "run 1", "test 't'", "twice", "first")
