"""Results: the Structs of the JSON results format and the run directory that stores them.

A run directory (``.atp/runs/<run-id>/``) holds:

- ``run.json``: the :class:`RunHeader` (suite, agent, the planned tests), rewritten when the run ends;
- ``results.jsonl``: one :class:`RunResult` per line, appended the moment a run finishes;
- ``events/<test>.<run>.jsonl`` and ``logs/<test>.<run>.log``: each run's events and agent log.

Every finished run is on disk before anything else looks at it, so an interrupted or crashed
``atp test`` loses no finished result, and :func:`build_suite_results` makes the same
:class:`SuiteResults` from the directory later as it did live.
"""

import contextlib
import math
import os
import re
import stat
import time
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

import msgspec

from atp.core import files
from atp.core.adaptive import Adaptive, Stop, replay
from atp.core.baseline import (
    Baseline,
    BaselineComparison,
    BaselineRun,
    BaselineTest,
    Compared,
    Correction,
    TestComparison,
    compare,
    encode_baseline,
    read_baseline,
    sequential_alpha,
)
from atp.core.errors import AtpError, StorageError
from atp.core.protocol import Artifact, Event, Metrics, ResponseStatus
from atp.core.secrets import Masker
from atp.core.stats import ALPHA, Stats, describe, k_values, pass_at_k, pass_hat_k
from atp.core.trace import TraceSummary, read_events

RESULTS_FORMAT = "atp-results"
RESULTS_FORMAT_VERSION = "1.3"

Outcome = Literal["passed", "failed", "error"]
TestStatus = Literal["passed", "failed", "skipped", "error"]


class Check(msgspec.Struct, omit_defaults=True, kw_only=True):
    """One evaluated check: its name, whether it passed, a 0-1 score, expected versus actual."""

    name: str
    passed: bool
    score: float
    message: str
    details: dict[str, Any] | None = None
    skipped: str | None = None
    """Why the check was not made (the judge had no API key, say). A skipped check has
    ``passed`` false and score 0 so that a reader unaware of skips never counts it as passed;
    ATP leaves it out of the run's outcome and score, and reports show it as skipped."""


class Usage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What an evaluator spent checking runs (an LLM judge's calls), kept apart from what the
    agent spent."""

    calls: int = 0
    """Requests made to the service."""
    cached: int = 0
    """Answers taken from a cache instead: no request, no tokens, no cost."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """``None`` when the price of what was used is not known."""

    def add(self, other: "Usage") -> None:
        self.calls += other.calls
        self.cached += other.cached
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd


def add_usage(total: dict[str, Usage], more: dict[str, Usage]) -> None:
    """Add ``more`` into ``total``, key by key."""
    for key, usage in more.items():
        total.setdefault(key, Usage()).add(usage)


class Retry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An attempt of a run that met a fault of the infrastructure (docs/reliability.md) and
    was made again: which attempt, why, and how long ATP waited before the next."""

    attempt: int
    """The attempt that met the fault (the first is 1)."""
    reason: str
    waited_seconds: float
    """The wait before the next attempt (backoff with jitter, or what the agent asked)."""
    where: str | None = None
    """Where the attempt ran, when not here (a cluster worker's address)."""


class RunResult(msgspec.Struct, kw_only=True):
    """One execution of one test against the agent."""

    __atp_unmasked__ = frozenset({"test_id", "task_id", "events_file", "log_file"})

    test_id: str
    run_number: int
    task_id: str
    outcome: Outcome
    status: ResponseStatus
    score: float
    score_breakdown: dict[str, float] = msgspec.field(default_factory=dict)
    duration_seconds: float
    started_at: datetime
    checks: list[Check] = msgspec.field(default_factory=list)
    metrics: Metrics = msgspec.field(default_factory=Metrics)
    error: str | None = None
    warnings: list[str] = msgspec.field(default_factory=list)
    trace: TraceSummary = msgspec.field(default_factory=TraceSummary)
    events_file: str | None = None
    log_file: str | None = None
    log_tail: list[str] = msgspec.field(default_factory=list)
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    evaluation_usage: dict[str, Usage] = msgspec.field(default_factory=dict)
    """What the evaluators spent on this run (an LLM judge's calls, tokens and cost), by the
    key each evaluator chose (``llm_eval/<model>``); never part of the agent's ``metrics``."""
    traceback: str | None = None
    """The traceback of the adapter plugin's exception that made this run an error (an
    evaluator's is in its check's ``details.traceback``)."""
    retries: list[Retry] = msgspec.field(default_factory=list)
    """The attempts before the one this result is of, each ended by a fault of the
    infrastructure (an agent that could not be reached, an HTTP 503, a worker that died)."""
    events: list[dict[str, Any]] | None = None
    """The trace itself, as ATP events; filled in by reporters that include it (the run
    directory keeps it in ``events_file``)."""

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed and c.skipped is None]

    @property
    def skipped_checks(self) -> list[Check]:
        return [c for c in self.checks if c.skipped is not None]


class PassRule(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a test with several runs passes: ``all`` of its runs pass (the default), at least a
    ``pass_rate`` of them (0-1), or their mean score is at least ``min_score`` (0-100). A test
    with a run that could not be evaluated (an error) is an error whatever the rule."""

    rule: Literal["all", "pass_rate", "min_score"] = "all"
    threshold: float | None = None

    def passes(self, runs: list["RunResult"]) -> bool:
        if self.rule == "pass_rate":
            return sum(r.outcome == "passed" for r in runs) / len(runs) >= (self.threshold or 0.0)
        if self.rule == "min_score":
            return fmean(r.score for r in runs) >= (self.threshold or 0.0)
        return all(r.outcome == "passed" for r in runs)

    def describe(self) -> str:
        if self.rule == "pass_rate":
            return f"at least {(self.threshold or 0.0) * 100:g}% of the runs pass"
        if self.rule == "min_score":
            return f"the mean score is at least {self.threshold or 0.0:g}"
        return "every run passes"


ALL_RUNS = PassRule()


class PlannedTest(msgspec.Struct, kw_only=True):
    """A selected test as the run planned it."""

    __atp_unmasked__ = frozenset({"id", "fingerprint"})

    id: str
    name: str
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    runs: int = 1
    """The runs planned; under an adaptive plan, its ``max_runs``."""
    skip: str | None = None
    pass_rule: PassRule = ALL_RUNS
    adaptive: Adaptive | None = None
    fingerprint: str | None = None
    """What the test asks and checks, hashed (:func:`atp.core.suite.test_fingerprint`)."""
    quarantined: bool = False
    """The suite's ``quarantine:`` names the test: its failures are reported, but do not fail
    the run."""
    run_numbers: list[int] | None = None
    """The numbers of the runs this run directory makes, when not all of ``1..runs``: a
    shard's share (``atp test --shard``)."""

    def share(self) -> list[int]:
        """The run numbers this directory is to hold."""
        return self.run_numbers if self.run_numbers is not None else list(range(1, self.runs + 1))


class PluginFailure(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A plugin that raised outside any one run's checks (a lifecycle hook, say)."""

    plugin: str
    where: str
    """What ATP was calling: ``atp_run_finished``, ``reporter json``, ..."""
    message: str
    traceback: str | None = None


class BaselineRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """How a run is compared with its baseline."""

    file: str
    correction: Correction = "holm"
    fail_on_regression: bool = True


STOPPED_BY = ("SIGINT", "SIGTERM", "fail-fast", "storage", "budget", "executor")
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
"""The reason of the runs a spent budget left out (the protocol's error code of that name)."""


class Shard(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One of ``count`` parts of a suite's runs (``atp test --shard=index/count``)."""

    index: int
    """1-based."""
    count: int
    basis: str | None = None
    """The run (its id) whose durations balanced the shares; ``None``: shared by count."""
    order: list[str] = msgspec.field(default_factory=list)
    """Every selected test's id, in the suite's order: the order of the merged results."""


class Budget(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What one ``atp test`` may spend, what it spent, and what stopped it."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    spent_cost_usd: float = 0.0
    """The agents' reported cost plus the evaluators' (an LLM judge's), over the finished runs."""
    spent_tokens: int = 0
    exceeded: str | None = None
    """What was exceeded and by how much, once it was: no run started after."""


class RunHeader(msgspec.Struct, kw_only=True):
    """What a run directory is about; written when the run starts and again when it ends."""

    __atp_unmasked__ = frozenset({"format", "format_version", "run_id"})

    format: str = RESULTS_FORMAT
    format_version: str = RESULTS_FORMAT_VERSION
    run_id: str
    suite: str
    suite_file: str | None = None
    agent: str
    agent_type: str
    started_at: datetime
    finished_at: datetime | None = None
    interrupted: bool = False
    stopped_by: str | None = None
    """What stopped the run before every planned run ran: ``SIGINT``, ``SIGTERM``,
    ``fail-fast`` or ``storage`` (the run directory could not take more)."""
    deselected: int = 0
    tests: list[PlannedTest] = msgspec.field(default_factory=list)
    plugin_failures: list[PluginFailure] = msgspec.field(default_factory=list)
    suite_fingerprint: str | None = None
    baseline: BaselineRef | None = None
    """The baseline this run is compared with (kept in the run directory as ``baseline.json``)."""
    shard: Shard | None = None
    budget: Budget | None = None
    resumed_at: list[datetime] = msgspec.field(default_factory=list)
    """When ``atp test --resume`` went on with this run (one entry per resume)."""
    merged_from: list[str] = msgspec.field(default_factory=list)
    """The run ids of the shards ``atp merge`` combined into this run directory."""


class TestStatistics(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a test's runs add up to (docs/statistics.md)."""

    __test__ = False

    runs: int
    passed_runs: int
    pass_rate: float
    score: Stats
    components: dict[str, Stats] = msgspec.field(default_factory=dict)
    """The composite score's components (0-1 each), over the runs where each counted."""
    metrics: dict[str, Stats] = msgspec.field(default_factory=dict)
    """Tokens, steps, tool calls, LLM calls, wall time (ATP's measure) and cost, over the runs
    that report each."""
    pass_at_k: dict[int, float] = msgspec.field(default_factory=dict)
    """The chance that at least one of k runs passes, for k in 1, 3, 5, 10, ... and n."""
    pass_hat_k: dict[int, float] = msgspec.field(default_factory=dict)
    """The chance that all of k runs pass (pass^k)."""


class SuiteStatistics(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The suite's figures over its tests that ran."""

    score: Stats | None = None
    """Over the tests' mean scores."""
    pass_at_k: dict[int, float] = msgspec.field(default_factory=dict)
    """The mean over the tests, for the k that every test's runs allow."""
    pass_hat_k: dict[int, float] = msgspec.field(default_factory=dict)
    unstable: list[str] = msgspec.field(default_factory=list)
    """The tests whose score is unstable or critical (coefficient of variation 0.15 or more)."""


class TestResult(msgspec.Struct, kw_only=True):
    """A test with all its runs and the status they add up to."""

    __test__ = False  # not a pytest test class

    id: str
    name: str
    description: str | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    status: TestStatus
    score: float
    duration_seconds: float
    runs: list[RunResult] = msgspec.field(default_factory=list)
    planned_runs: int = 1
    skip_reason: str | None = None
    pass_rule: PassRule = ALL_RUNS
    statistics: TestStatistics | None = None
    adaptive: Adaptive | None = None
    stop: Stop | None = None
    """Why an adaptive test stopped running (``None`` while it has not)."""
    baseline: TestComparison | None = None
    """This test compared with the baseline, when the run has one."""
    fingerprint: str | None = None
    flaky: bool = False
    """Its runs disagree: at least one passed and at least one failed."""
    quarantined: bool = False
    """The suite quarantines it: a failure is reported, but does not fail the run."""

    @property
    def retries(self) -> int:
        """The attempts its runs made again after a fault of the infrastructure."""
        return sum(len(run.retries) for run in self.runs)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for run in self.runs for c in run.failed_checks]

    @property
    def skipped_checks(self) -> list[Check]:
        return [c for run in self.runs for c in run.skipped_checks]


class Summary(msgspec.Struct, kw_only=True):
    total: int
    passed: int
    failed: int
    skipped: int
    errors: int
    deselected: int = 0
    runs: int = 0
    incomplete: int = 0
    """Tests (not skipped by the suite) with fewer runs than planned: interrupted, stopped."""
    skipped_checks: int = 0
    """Checks not made in the runs (an LLM judge without an API key, say)."""
    flaky: int = 0
    """Tests whose runs disagree (some passed, some failed)."""
    quarantined: int = 0
    """Quarantined tests that failed or were errors: reported, not failing the run."""
    retries: int = 0
    """Attempts made again after faults of the infrastructure, over every run."""

    @property
    def ok(self) -> bool:
        """Every test that was to run ran all its runs, and none failed (but quarantined ones)."""
        return self.failed + self.errors - self.quarantined == 0 and self.incomplete == 0


class SuiteResults(msgspec.Struct, kw_only=True):
    """The results of one ``atp test``: the JSON results format (version 1.0)."""

    format: str = RESULTS_FORMAT
    format_version: str = RESULTS_FORMAT_VERSION
    run_id: str
    suite: str
    suite_file: str | None = None
    agent: str
    agent_type: str
    started_at: datetime
    finished_at: datetime | None = None
    duration_seconds: float
    interrupted: bool = False
    stopped_by: str | None = None
    summary: Summary
    tests: list[TestResult] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    """What is wrong with the run directory itself (a damaged line, a result for a test the
    run did not plan); a run with problems does not count as passed."""
    plugin_failures: list[PluginFailure] = msgspec.field(default_factory=list)
    """Plugins that raised outside a run's checks; the tests' results stand."""
    statistics: SuiteStatistics | None = None
    suite_fingerprint: str | None = None
    baseline: BaselineComparison | None = None
    """The run compared with its baseline (each test's comparison is on the test)."""
    evaluation_usage: dict[str, Usage] = msgspec.field(default_factory=dict)
    """What the evaluators spent over all runs (the runs' ``evaluation_usage`` added up)."""
    shard: Shard | None = None
    """The part of the suite's runs these results are of (``atp test --shard``)."""
    budget: Budget | None = None
    """The budget of the run, what it spent, and whether it stopped the run."""


def status_of_runs(runs: list[RunResult], rule: PassRule = ALL_RUNS) -> TestStatus:
    """Any run could not be evaluated: error; otherwise passed or failed by the test's pass
    rule (by default, every run must pass)."""
    if any(r.outcome == "error" for r in runs):
        return "error"
    return "passed" if rule.passes(runs) else "failed"


def unchecked_reason(run: RunResult) -> str | None:
    """Why a run that passed was not really checked: every check it has was skipped, or a
    ``critical`` one was (its test is then skipped with this reason, never passed)."""
    if run.outcome != "passed" or not run.checks:
        return None
    skipped = run.skipped_checks
    if not skipped:
        return None
    if len(skipped) == len(run.checks):
        return f"not checked: every check was skipped ({skipped[0].name}: {skipped[0].skipped})"
    critical = next((c for c in skipped if (c.details or {}).get("critical")), None)
    if critical is not None:
        return f"not checked: the critical check {critical.name} was skipped ({critical.skipped})"
    return None


METRIC_NAMES = ("total_tokens", "total_steps", "tool_calls", "llm_calls", "wall_time_seconds", "cost_usd")


def run_metrics(run: RunResult) -> dict[str, float]:
    """The measurements of a run that statistics are taken of: what the agent reported, else
    what its events showed; wall time is ATP's own measure of the run."""
    metrics, trace = run.metrics, run.trace
    found: dict[str, float] = {"wall_time_seconds": run.duration_seconds}
    tokens = metrics.total_tokens
    if tokens is None and (metrics.input_tokens is not None or metrics.output_tokens is not None):
        tokens = (metrics.input_tokens or 0) + (metrics.output_tokens or 0)
    if tokens is None and (trace.input_tokens or trace.output_tokens):
        tokens = trace.input_tokens + trace.output_tokens
    if tokens is not None:
        found["total_tokens"] = tokens
    steps = metrics.total_steps if metrics.total_steps is not None else (trace.max_step or None)
    if steps is not None:
        found["total_steps"] = steps
    found["tool_calls"] = metrics.tool_calls if metrics.tool_calls is not None else trace.tool_call_count
    found["llm_calls"] = metrics.llm_calls if metrics.llm_calls is not None else trace.llm_calls
    if metrics.cost_usd is not None:
        found["cost_usd"] = metrics.cost_usd
    return found


def test_statistics(runs: list[RunResult]) -> TestStatistics:
    """The statistics of a test's runs (at least one)."""
    n = len(runs)
    passed = sum(r.outcome == "passed" for r in runs)
    components: dict[str, list[float]] = {}
    metrics: dict[str, list[float]] = {}
    for run in runs:
        for name, value in run.score_breakdown.items():
            components.setdefault(name, []).append(value)
        for name, value in run_metrics(run).items():
            metrics.setdefault(name, []).append(value)
    ks = k_values(n)
    return TestStatistics(
        runs=n,
        passed_runs=passed,
        pass_rate=passed / n,
        score=describe([r.score for r in runs]),
        components={name: describe(values) for name, values in components.items()},
        metrics={name: describe(metrics[name]) for name in METRIC_NAMES if name in metrics},
        pass_at_k={k: pass_at_k(n, passed, k) for k in ks},
        pass_hat_k={k: pass_hat_k(n, passed, k) for k in ks},
    )


test_statistics.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def suite_statistics(tests: list[TestResult]) -> SuiteStatistics:
    ran = [t for t in tests if t.statistics is not None]
    if not ran:
        return SuiteStatistics()
    having = [t.statistics for t in ran if t.statistics is not None]
    ks = k_values(min(s.runs for s in having))  # every test has runs enough for these
    at_k = {k: fmean(pass_at_k(s.runs, s.passed_runs, k) for s in having) for k in ks}
    hat_k = {k: fmean(pass_hat_k(s.runs, s.passed_runs, k) for s in having) for k in ks}
    return SuiteStatistics(
        score=describe([t.score for t in ran]),
        pass_at_k=at_k,
        pass_hat_k=hat_k,
        unstable=[
            t.id
            for t in ran
            if t.statistics is not None and t.statistics.score.stability in ("unstable", "critical")
        ],
    )


_NOT_RUN = {
    "fail-fast": "not run: --fail-fast stopped the suite at the first failure",
    "storage": "not run: the run directory could not take more results",
    "executor": "not run: the executor's cluster was lost (atp test --resume makes them once it is back)",
}


def make_test_result(
    planned: PlannedTest,
    runs: list[RunResult],
    interrupted: bool,
    stopped_by: str | None = None,
    baseline: BaselineTest | None = None,
    alpha: float = ALPHA,
    budget: Budget | None = None,
) -> TestResult:
    """A planned test and its runs (in the order they finished), with the status, score and
    statistics they add up to; an adaptive test's stop is replayed (against the test's
    ``baseline`` entry, when there is one)."""
    stop = None
    if planned.adaptive is not None and runs:
        sample = baseline.sample() if baseline is not None else None
        stop = replay(planned.adaptive, [r.score for r in runs], sample, alpha)
    runs = sorted(runs, key=lambda r: r.run_number)
    if runs:
        status = status_of_runs(runs, planned.pass_rule)
        skip_reason = None
        unchecked = (
            next((why for why in map(unchecked_reason, runs) if why), None) if status == "passed" else None
        )
        if unchecked is not None:  # what decides the test was not checked: it did not pass
            status, skip_reason = "skipped", unchecked
    else:
        status = "skipped"
        skip_reason = (
            planned.skip
            or _not_run(stopped_by, budget)
            or ("not run: the run was interrupted" if interrupted else "not run")
        )
    return TestResult(
        id=planned.id,
        name=planned.name,
        description=planned.description,
        tags=planned.tags,
        status=status,
        score=fmean(r.score for r in runs) if runs else 0.0,
        duration_seconds=sum(r.duration_seconds for r in runs),
        runs=runs,
        planned_runs=len(planned.run_numbers) if planned.run_numbers is not None else planned.runs,
        skip_reason=skip_reason,
        pass_rule=planned.pass_rule,
        statistics=test_statistics(runs) if runs else None,
        adaptive=planned.adaptive,
        stop=stop,
        fingerprint=planned.fingerprint,
        flaky=is_flaky(runs),
        quarantined=planned.quarantined,
    )


def _not_run(stopped_by: str | None, budget: Budget | None) -> str | None:
    if stopped_by == "budget":
        spent = f" ({budget.exceeded})" if budget is not None and budget.exceeded else ""
        return f"not run: {BUDGET_EXCEEDED}{spent}"
    return _NOT_RUN.get(stopped_by or "")


def is_flaky(runs: list[RunResult]) -> bool:
    """Runs that disagree: at least one passed and at least one failed (a run that could not be
    evaluated, an error, says nothing about the agent)."""
    outcomes = {run.outcome for run in runs}
    return "passed" in outcomes and "failed" in outcomes


def is_incomplete(planned: PlannedTest, test: TestResult) -> bool:
    """A test (not skipped by the suite) with fewer runs than planned: under an adaptive plan,
    one that neither decided to stop nor reached ``max_runs``."""
    wanted = len(planned.run_numbers) if planned.run_numbers is not None else planned.runs
    if planned.skip is not None or len(test.runs) >= wanted:
        return False
    return planned.adaptive is None or test.stop is None


def build_suite_results(
    header: RunHeader,
    runs: list[RunResult],
    problems: list[str] | None = None,
    baseline: Baseline | None = None,
) -> SuiteResults:
    """Group run results (in the order they finished) under the planned tests, count the
    summary and take the statistics; ``problems`` are what reading the run directory found
    wrong (results of unplanned tests are added). With a ``baseline``, each test is compared
    with it as ``header.baseline`` says."""
    interrupted = header.interrupted or header.finished_at is None
    problems = list(problems or ())
    by_test: dict[str, list[RunResult]] = {}
    seen: set[tuple[str, int]] = set()
    kept = []
    for run in runs:
        key = (run.test_id, run.run_number)
        if key in seen:
            problems.append(f"run {run.run_number} of test {run.test_id!r} is stored twice; the first counts")
            continue
        seen.add(key)
        kept.append(run)
        by_test.setdefault(run.test_id, []).append(run)
    runs = kept
    entries = baseline.tests if baseline is not None and baseline.suite == header.suite else {}
    alpha = sequential_alpha(
        sum(1 for p in header.tests if p.adaptive is not None and p.skip is None and p.id in entries),
        header.baseline.correction if header.baseline is not None else "holm",
    )
    scores: dict[str, list[float]] = {}
    tests = []
    for planned in header.tests:
        mine = by_test.pop(planned.id, [])
        scores[planned.id] = [r.score for r in mine]
        tests.append(
            make_test_result(
                planned, mine, interrupted, header.stopped_by, entries.get(planned.id), alpha, header.budget
            )
        )
    for test_id, stray in by_test.items():
        problems.append(
            f"{len(stray)} result(s) for test {test_id!r}, which this run did not plan: not counted"
        )
    summary = Summary(
        total=len(tests),
        passed=sum(t.status == "passed" for t in tests),
        failed=sum(t.status == "failed" for t in tests),
        skipped=sum(t.status == "skipped" for t in tests),
        errors=sum(t.status == "error" for t in tests),
        deselected=header.deselected,
        runs=len(runs),
        incomplete=sum(
            1 for planned, test in zip(header.tests, tests, strict=True) if is_incomplete(planned, test)
        ),
        skipped_checks=sum(len(r.skipped_checks) for r in runs),
        flaky=sum(t.flaky for t in tests),
        quarantined=sum(t.quarantined and t.status in ("failed", "error") for t in tests),
        retries=sum(len(r.retries) for r in runs),
    )
    spent: dict[str, Usage] = {}
    for run in runs:
        add_usage(spent, run.evaluation_usage)
    comparison = None
    if baseline is not None:
        reference = header.baseline
        comparison, by_id = compare(
            baseline,
            header.suite,
            [
                Compared(
                    id=p.id, scores=scores[p.id], fingerprint=p.fingerprint, adaptive=p.adaptive, stop=t.stop
                )
                for p, t in zip(header.tests, tests, strict=True)
                if t.runs
            ],
            file=reference.file if reference is not None else None,
            correction=reference.correction if reference is not None else "holm",
            fail_on_regression=reference.fail_on_regression if reference is not None else True,
        )
        for test in tests:
            test.baseline = by_id.get(test.id)
    finished = header.finished_at
    if finished is None and runs:
        finished = max(r.started_at for r in runs)
    duration = (finished - header.started_at).total_seconds() if finished else 0.0
    return SuiteResults(
        run_id=header.run_id,
        suite=header.suite,
        suite_file=header.suite_file,
        agent=header.agent,
        agent_type=header.agent_type,
        started_at=header.started_at,
        finished_at=header.finished_at,
        duration_seconds=max(duration, 0.0),
        interrupted=interrupted,
        stopped_by=header.stopped_by,
        summary=summary,
        tests=tests,
        problems=problems,
        plugin_failures=header.plugin_failures,
        evaluation_usage=spent,
        statistics=suite_statistics(tests),
        suite_fingerprint=header.suite_fingerprint,
        baseline=comparison,
        shard=header.shard,
        budget=header.budget,
    )


def baseline_of(results: SuiteResults) -> Baseline:
    """The baseline file of a run's results: each test that ran, with its runs' scores,
    outcomes and metrics (design 10.1, extended)."""
    tests: dict[str, BaselineTest] = {}
    for test in results.tests:
        stats = test.statistics
        if stats is None:
            continue
        tests[test.id] = BaselineTest(
            mean_score=stats.score.mean,
            std=stats.score.std,
            n_runs=stats.runs,
            ci_95=stats.score.ci_95,
            fingerprint=test.fingerprint,
            runs=[
                BaselineRun(score=run.score, passed=run.outcome == "passed", metrics=run_metrics(run))
                for run in test.runs
            ],
        )
    return Baseline(
        created_at=results.finished_at or results.started_at,
        suite=results.suite,
        agent=results.agent,
        suite_fingerprint=results.suite_fingerprint,
        run_id=results.run_id,
        tests=tests,
    )


# --- the run directory ---------------------------------------------------------------------

HEADER_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
LOCK_FILE = "run.lock"
"""Locked by the ``atp test`` writing the directory while it runs (released when it ends or
dies): a second ``atp test --resume`` of a run still going is refused."""
BASELINE_FILE = "baseline.json"
RUN_FILES = (HEADER_FILE, RESULTS_FILE)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_STEM_CHARS = 80
_encoder = msgspec.json.Encoder()
_header_decoder = msgspec.json.Decoder(RunHeader)
_result_decoder = msgspec.json.Decoder(RunResult)
_line_decoder = msgspec.json.Decoder(dict[str, Any])
_lines_decoder = msgspec.json.Decoder(list[dict[str, Any]])


class _Started(msgspec.Struct):
    started_at: datetime
    suite: str = ""
    run_id: str = ""
    merged_from: list[str] = msgspec.field(default_factory=list)


_started_decoder = msgspec.json.Decoder(_Started)


def _unstorable(result: RunResult, exc: BaseException) -> RunResult:
    """What is stored for a run whose result could not be written readably."""
    return RunResult(
        test_id=result.test_id,
        run_number=result.run_number,
        task_id=result.task_id,
        outcome="error",
        status="failed",
        score=0.0,
        duration_seconds=result.duration_seconds if math.isfinite(result.duration_seconds) else 0.0,
        started_at=result.started_at,
        error=f"ATP could not store this run's result readably ({type(exc).__name__}: {exc})",
        events_file=result.events_file,
        log_file=result.log_file,
    )


def stored_runs(root: Path) -> list[tuple[Path, RunHeader]]:
    """The run directories below ``root`` whose ``run.json`` reads, with their headers, the
    one that started last first (a directory's name breaks a tie)."""
    found = []
    for path in root.iterdir() if root.is_dir() else ():
        try:
            if not (path / HEADER_FILE).is_file():
                continue
            header = _header_decoder.decode(files.read_bytes(path / HEADER_FILE))
        except (OSError, msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            continue
        found.append((path, header))
    found.sort(key=lambda item: (_utc(item[1].started_at), item[0].name), reverse=True)
    return found


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def new_run_id() -> str:
    """Sortable by start time (UTC), unique across concurrent runs."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(3).hex()


def _file_stem(test_id: str, run_number: int) -> str:
    """A file name for a test's run: the id's safe characters, at most 80 of them, and a
    checksum of the id when anything was replaced or cut (ids may be any text)."""
    safe = _SAFE.sub("_", test_id)[:MAX_STEM_CHARS]
    if safe != test_id:
        safe += f"-{zlib.crc32(test_id.encode('utf-8', 'surrogatepass')):08x}"
    return f"{safe}.{run_number}"


def events_path(test_id: str, run_number: int) -> str:
    """Where a run's events go, relative to its run directory."""
    return f"events/{_file_stem(test_id, run_number)}.jsonl"


def log_path(test_id: str, run_number: int) -> str:
    """Where a run's agent log goes, relative to its run directory."""
    return f"logs/{_file_stem(test_id, run_number)}.log"


def workspace_path(test_id: str, run_number: int) -> str:
    """Where the fresh workspace of a run whose test has a ``workspace_fixture`` goes (kept
    with the results, as the agent left it), relative to its run directory."""
    return f"workspaces/{_file_stem(test_id, run_number)}"


def _storage_error(what: str, path: Path, exc: OSError) -> StorageError:
    return StorageError(f"cannot {what} {path}: {files.reason(exc)}")


class RunStore:
    """One run directory: written by the runner while it runs, read by ``atp report`` later."""

    def __init__(self, directory: Path, masker: Masker | None = None) -> None:
        self.directory = directory
        self._masker = masker if masker else None
        self._results_fd: int | None = None
        self._lock_fd: int | None = None
        self.problems: list[str] = []
        """What reading found damaged (filled by :meth:`read_results` and :meth:`event_lines`)."""

    @classmethod
    def create(
        cls, root: Path, header: RunHeader, masker: Masker | None = None, baseline: Baseline | None = None
    ) -> "RunStore":
        directory = root / header.run_id
        try:
            directory.mkdir(parents=True, exist_ok=False)
        except OSError as exc:
            raise _storage_error("create the run directory", directory, exc) from None
        store = cls(directory, masker)
        store.lock()
        if baseline is not None:  # kept with the run, so that 'atp report' compares alike
            try:
                files.write_new(directory / BASELINE_FILE, encode_baseline(baseline))
            except OSError as exc:
                raise _storage_error("write", directory / BASELINE_FILE, exc) from None
        store.write_header(header)
        return store

    @classmethod
    def reopen(cls, directory: Path, masker: Masker | None = None) -> "RunStore":
        """A run directory to append more results to, locked for this process and repaired
        (:meth:`repair`)."""
        store = cls.open(directory, masker)
        store.lock()
        store.repair()
        return store

    def repair(self) -> None:
        """Take away the damaged result lines (one cut short when ATP was killed mid-write, one
        changed by hand), each named in :attr:`problems`: their runs are made again. A last
        line that lacks its newline gets it, so that the next result starts a line."""
        path = self.directory / RESULTS_FILE
        try:
            data = files.read_bytes(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _storage_error("read", path, exc) from None
        store = self
        kept: list[bytes] = []
        for number, line in enumerate(data.splitlines(keepends=True), 1):
            if not line.strip():
                continue
            try:
                _result_decoder.decode(line)
            except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
                how = "was cut short" if not line.endswith(b"\n") else "is not a run result"
                store.problems.append(f"{path}:{number} {how}; it is taken away and its run made again")
                continue
            kept.append(line if line.endswith(b"\n") else line + b"\n")
        if store.problems or (data and not data.endswith(b"\n")):
            partial = path.with_suffix(".jsonl.partial")
            try:
                files.write_new(partial, b"".join(kept))
                os.replace(partial, path)
            except OSError as exc:
                raise _storage_error("repair", path, exc) from None

    def lock(self) -> None:
        """Hold the directory's lock while this process writes it; an AtpError when another
        ``atp test`` holds it (the run is still going)."""
        import fcntl

        path = self.directory / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise _storage_error("lock", path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise AtpError(
                f"{self.directory} is being written by another atp test that is still running; "
                f"resume it once that one has ended (or stop it)"
            ) from None
        self._lock_fd = fd

    @staticmethod
    def in_use(directory: Path) -> bool:
        """Whether another process holds the directory's lock (its run is still going)."""
        import fcntl

        try:
            fd = os.open(directory / LOCK_FILE, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
        return False

    @classmethod
    def open(cls, directory: Path, masker: Masker | None = None) -> "RunStore":
        header = directory / HEADER_FILE
        try:
            mode = header.stat().st_mode
        except OSError:
            raise AtpError(f"{directory} is not an ATP run directory (it has no {HEADER_FILE})") from None
        if not stat.S_ISREG(mode):
            raise AtpError(f"cannot read {header}: it is {files.kind(mode)}, not a regular file")
        return cls(directory, masker)

    @staticmethod
    def latest(root: Path, suite: str | None = None) -> Path:
        """The run directory below ``root`` that started last (by the start time it records),
        of the suite named ``suite`` when given; shards merged into a run (``atp merge``) are
        left out for it."""
        newest: tuple[datetime, str] | None = None
        found: Path | None = None
        candidates = [p for p in root.iterdir() if (p / HEADER_FILE).is_file()] if root.is_dir() else []
        heads: dict[Path, _Started] = {}
        for path in candidates:
            try:
                heads[path] = _started_decoder.decode(files.read_bytes(path / HEADER_FILE))
            except (OSError, msgspec.MsgspecError):
                continue
        merged = {run_id for head in heads.values() for run_id in head.merged_from}
        for path, head in heads.items():
            if suite is not None and head.suite != suite:
                continue
            if head.run_id in merged:  # a shard: the run it was merged into stands for it
                continue
            started = head.started_at
            if started.tzinfo is None:
                started = started.replace(tzinfo=timezone.utc)
            key = (started, path.name)
            if newest is None or key > newest:
                newest, found = key, path
        if found is None:
            of = f" of suite {suite!r}" if suite is not None else ""
            raise AtpError(f"no run directories{of} in {root}; run 'atp test' first or name one")
        return found

    # --- writing ---

    def _encode(self, value: Any, decoder: msgspec.json.Decoder[Any]) -> bytes:
        """``value`` masked and encoded, checked to decode back: ATP never writes a line it
        cannot read."""
        if self._masker is not None:
            value = self._masker.value(value)
        data = _encoder.encode(value)
        decoder.decode(data)
        return data

    def write_header(self, header: RunHeader) -> None:
        target = self.directory / HEADER_FILE
        partial = target.with_suffix(".json.partial")
        data = self._encode(header, _header_decoder) + b"\n"
        try:
            files.write_new(partial, data)
            os.replace(partial, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise _storage_error("write", target, exc) from None

    def append(self, result: RunResult) -> None:
        """Append one finished run: a single write, durable once this returns. A result that
        cannot be written readably becomes an error result saying why."""
        try:
            data = self._encode(result, _result_decoder)
        except (msgspec.MsgspecError, TypeError, ValueError, OverflowError) as exc:
            data = self._encode(_unstorable(result, exc), _result_decoder)
        path = self.directory / RESULTS_FILE
        try:
            if self._results_fd is None:
                self._results_fd = files.open_append(path)
            line = data + b"\n"
            end = os.lseek(self._results_fd, 0, os.SEEK_END)
            done = 0
            try:
                while done < len(line):  # a short write is followed by the write that says why
                    done += os.write(self._results_fd, line[done:])
            finally:
                if done != len(line):  # a full disk mid-line: take the piece back
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._results_fd, end)
        except OSError as exc:
            raise _storage_error("append a result to", path, exc) from None

    def close(self) -> None:
        if self._results_fd is not None:
            os.close(self._results_fd)
            self._results_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def events_file(self, test_id: str, run_number: int) -> str:
        return events_path(test_id, run_number)

    def log_file(self, test_id: str, run_number: int) -> str:
        return log_path(test_id, run_number)

    def workspace(self, test_id: str, run_number: int) -> Path:
        return self.directory / workspace_path(test_id, run_number)

    # --- reading ---

    def read_header(self) -> RunHeader:
        path = self.directory / HEADER_FILE
        try:
            return _header_decoder.decode(files.read_bytes(path))
        except OSError as exc:
            raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
            raise AtpError(f"cannot read {path}: {exc}") from None

    def read_results(self) -> list[RunResult]:
        """Every readable result; a damaged line (cut short when ATP was killed mid-write, or
        changed by hand) is skipped and recorded in :attr:`problems`."""
        path = self.directory / RESULTS_FILE
        results = []
        try:
            with files.open_read(path) as handle:
                for number, line in enumerate(handle, 1):
                    if not line.strip():
                        continue
                    try:
                        results.append(_result_decoder.decode(line))
                    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
                        how = "is not a run result" if line.endswith(b"\n") else "was cut short"
                        self.problems.append(f"{path}:{number} {how} ({exc}); that run is not counted")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AtpError(f"cannot read {path}: {files.reason(exc)}") from None
        return results

    def baseline(self) -> Baseline | None:
        """The baseline the run was compared with (``baseline.json``), if any."""
        path = self.directory / BASELINE_FILE
        if not path.exists():
            return None
        try:
            return read_baseline(path)
        except AtpError as exc:
            self.problems.append(f"{exc}; the run is not compared with it")
            return None

    def results(self, baseline: Baseline | None = None) -> SuiteResults:
        """The results the directory holds, compared with ``baseline`` (by default, the one
        the run was made with)."""
        self.problems = []
        runs = self.read_results()
        header = self.read_header()
        if baseline is None:
            baseline = self.baseline()
        return build_suite_results(header, runs, self.problems, baseline)

    def events(self, run: RunResult) -> Iterator[Event]:
        """The events of a run, read back from its events file (damaged lines skipped)."""
        if run.events_file is None:
            return iter(())
        return read_events(self.directory / run.events_file)

    def event_lines(self, run: RunResult) -> list[bytes]:
        """A run's events as the JSON lines stored, each checked to be an event; a damaged
        line is left out and recorded in :attr:`problems`."""
        if run.events_file is None:
            return []
        path = self.directory / run.events_file
        try:
            lines = [line.strip() for line in files.read_bytes(path).splitlines() if line.strip()]
        except OSError as exc:
            self.problems.append(f"cannot read {path}: {files.reason(exc)}")
            return []
        try:
            _lines_decoder.decode(b"[" + b",".join(lines) + b"]")
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            kept = []
            for number, line in enumerate(lines, 1):
                try:
                    _line_decoder.decode(line)
                except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
                    self.problems.append(f"{path}: event {number} is damaged ({exc}); left out")
                else:
                    kept.append(line)
            lines = kept
        return lines

    def log(self, run: RunResult) -> str:
        if run.log_file is None:
            return ""
        path = self.directory / run.log_file
        try:
            return files.read_bytes(path).decode("utf-8", "replace")
        except OSError as exc:
            self.problems.append(f"cannot read {path}: {files.reason(exc)}")
            return ""


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def results_schema() -> dict[str, Any]:
    """The JSON Schema of the JSON results format (docs/results.schema.json)."""
    schema: dict[str, Any] = msgspec.json.schema(SuiteResults)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"ATP results, format {RESULTS_FORMAT_VERSION}"
    return schema


if __name__ == "__main__":  # python -m atp.core.results > docs/results.schema.json
    print(msgspec.json.format(msgspec.json.encode(results_schema()), indent=2).decode())
