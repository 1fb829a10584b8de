"""The Structs of the JSON results format: what ATP records of a run, a test and a suite.

:class:`RunHeader` and :class:`RunResult` are what a run directory stores (:mod:`atp.core.store`);
:class:`TestResult` and :class:`SuiteResults` are what they add up to (:mod:`atp.core.aggregate`),
the document reporters render. Data only: nothing here reads, writes or computes.
"""

from datetime import datetime, timezone
from statistics import fmean
from typing import Annotated, Any, Literal

import msgspec

from atp.core.adaptive import Adaptive, Stop
from atp.core.baseline import BaselineComparison, Correction, TestComparison
from atp.core.protocol import Artifact, Metrics, ResponseStatus
from atp.core.stats import Stats
from atp.core.trace import TraceSummary

RESULTS_FORMAT = "atp-results"
RESULTS_FORMAT_VERSION = "1.4"

MAX_RUNS_PER_TEST = 10_000
"""The most runs one test may plan: what ``--runs``, a suite's ``runs`` and an adaptive
``max_runs`` allow. A run directory read back that plans more is refused (naming the field)."""
MAX_TESTS = 1_000_000
"""The most tests one run may plan: far more than a suite file (at most 4 MiB) can hold."""
MAX_SHARDS = 10_000
"""The most shards a suite may be split into (``--shard=K/N``)."""

RunCount = Annotated[int, msgspec.Meta(ge=1, le=MAX_RUNS_PER_TEST)]
"""A number of runs, or a run's number, within what a plan may hold."""
ShardCount = Annotated[int, msgspec.Meta(ge=1, le=MAX_SHARDS)]

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
    error_code: str | None = None
    """The agent's ``error_code`` (``TOOL_NOT_FOUND``, ...; :mod:`atp.core.error_codes`), or the
    code of what ATP stopped the run for (``TIMEOUT``, ``MAX_STEPS_EXCEEDED``, ...)."""
    error_details: dict[str, Any] | None = None
    """The agent's ``error_details``, bounded."""
    trace_id: str | None = None
    """The agent's ``trace_id``: where its own full trace is."""
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
    runs: RunCount = 1
    """The runs planned; under an adaptive plan, its ``max_runs``."""
    skip: str | None = None
    pass_rule: PassRule = ALL_RUNS
    adaptive: Adaptive | None = None
    fingerprint: str | None = None
    """What the test asks and checks, hashed (:func:`atp.core.suite.test_fingerprint`)."""
    quarantined: bool = False
    """The suite's ``quarantine:`` names the test: its failures are reported, but do not fail
    the run."""
    run_numbers: Annotated[list[RunCount], msgspec.Meta(max_length=MAX_RUNS_PER_TEST)] | None = None
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

    index: ShardCount
    """1-based."""
    count: ShardCount
    basis: str | None = None
    """The run (its id) whose durations balanced the shares; ``None``: shared by count."""
    order: Annotated[list[str], msgspec.Meta(max_length=MAX_TESTS)] = msgspec.field(default_factory=list)
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
    tests: Annotated[list[PlannedTest], msgspec.Meta(max_length=MAX_TESTS)] = msgspec.field(
        default_factory=list
    )
    plugin_failures: list[PluginFailure] = msgspec.field(default_factory=list)
    suite_fingerprint: str | None = None
    baseline: BaselineRef | None = None
    """The baseline this run is compared with (kept in the run directory as ``baseline.json``)."""
    shard: Shard | None = None
    budget: Budget | None = None
    resumed_at: list[datetime] = msgspec.field(default_factory=list)
    """When ``atp test --resume`` went on with this run (one entry per resume)."""
    merged_from: Annotated[list[str], msgspec.Meta(max_length=MAX_SHARDS)] = msgspec.field(
        default_factory=list
    )
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
    error_codes: dict[str, int] = msgspec.field(default_factory=dict)
    """The runs that did not pass, by their ``error_code`` (those with one)."""


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
    error_codes: dict[str, int] = msgspec.field(default_factory=dict)
    """The runs that did not pass, over every test, by their ``error_code`` (those with one;
    at most 50 codes, the rest under ``(other codes)``)."""

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


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
