"""What a run's results add up to: each test's status, score and statistics, the suite's
summary and statistics, the comparison with a baseline, and the baseline a run makes.

:func:`build_suite_results` makes the same :class:`~atp.core.records.SuiteResults` from a run
directory (:mod:`atp.core.store`) later as it did live. Nothing here reads or writes files.
"""

from statistics import fmean

from atp.core.adaptive import replay
from atp.core.baseline import (
    Baseline,
    BaselineComparison,
    BaselineRun,
    BaselineTest,
    Compared,
    compare,
    sequential_alpha,
)
from atp.core.error_codes import count_codes
from atp.core.records import (
    ALL_RUNS,
    BUDGET_EXCEEDED,
    Budget,
    PassRule,
    PlannedTest,
    RunHeader,
    RunResult,
    SuiteResults,
    SuiteStatistics,
    Summary,
    TestResult,
    TestStatistics,
    TestStatus,
    Usage,
    add_usage,
)
from atp.core.stats import (
    ALPHA,
    COMPONENT_BOUNDS,
    METRIC_BOUNDS,
    SCORE_BOUNDS,
    describe,
    k_values,
    pass_at_k,
    pass_hat_k,
)


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
        score=describe([r.score for r in runs], SCORE_BOUNDS),
        components={name: describe(values, COMPONENT_BOUNDS) for name, values in components.items()},
        metrics={name: describe(metrics[name], METRIC_BOUNDS) for name in METRIC_NAMES if name in metrics},
        pass_at_k={k: pass_at_k(n, passed, k) for k in ks},
        pass_hat_k={k: pass_hat_k(n, passed, k) for k in ks},
        error_codes=codes_of(runs),
    )


def codes_of(runs: list[RunResult]) -> dict[str, int]:
    """The runs that did not pass, counted by error code (nothing to count: no work)."""
    codes = [r.error_code for r in runs if r.error_code is not None and r.outcome != "passed"]
    return count_codes(codes) if codes else {}


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
        score=describe([t.score for t in ran], SCORE_BOUNDS),
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
    runs, by_test = _first_of_each_run(runs, problems)
    entries = baseline.tests if baseline is not None and baseline.suite == header.suite else {}
    tests, scores = _test_results(header, by_test, interrupted, entries)
    for test_id, stray in by_test.items():
        problems.append(
            f"{len(stray)} result(s) for test {test_id!r}, which this run did not plan: not counted"
        )
    comparison = _compare_with(baseline, header, tests, scores) if baseline is not None else None
    return SuiteResults(
        run_id=header.run_id,
        suite=header.suite,
        suite_file=header.suite_file,
        agent=header.agent,
        agent_type=header.agent_type,
        started_at=header.started_at,
        finished_at=header.finished_at,
        duration_seconds=_duration(header, runs),
        interrupted=interrupted,
        stopped_by=header.stopped_by,
        summary=_summary(header, tests, runs),
        tests=tests,
        problems=problems,
        plugin_failures=header.plugin_failures,
        evaluation_usage=_evaluation_usage(runs),
        statistics=suite_statistics(tests),
        suite_fingerprint=header.suite_fingerprint,
        baseline=comparison,
        shard=header.shard,
        budget=header.budget,
    )


def _first_of_each_run(
    runs: list[RunResult], problems: list[str]
) -> tuple[list[RunResult], dict[str, list[RunResult]]]:
    """The runs with each (test, run number) once, the first stored (a repeat is named in
    ``problems``), and the same runs by test id, in the order they finished."""
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
    return kept, by_test


def _test_results(
    header: RunHeader,
    by_test: dict[str, list[RunResult]],
    interrupted: bool,
    entries: dict[str, BaselineTest],
) -> tuple[list[TestResult], dict[str, list[float]]]:
    """Each planned test with its runs, taken out of ``by_test`` (what is left are runs of
    tests the run did not plan), and each one's scores in the order its runs finished."""
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
    return tests, scores


def _summary(header: RunHeader, tests: list[TestResult], runs: list[RunResult]) -> Summary:
    """How many tests passed, failed, were skipped or were errors, and the counts beside."""
    return Summary(
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
        error_codes=codes_of(runs),
    )


def _evaluation_usage(runs: list[RunResult]) -> dict[str, Usage]:
    """What the evaluators spent over the runs."""
    spent: dict[str, Usage] = {}
    for run in runs:
        add_usage(spent, run.evaluation_usage)
    return spent


def _compare_with(
    baseline: Baseline, header: RunHeader, tests: list[TestResult], scores: dict[str, list[float]]
) -> BaselineComparison:
    """The run compared with ``baseline`` as ``header.baseline`` says; each test that ran is
    given its own comparison."""
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
    return comparison


def _duration(header: RunHeader, runs: list[RunResult]) -> float:
    """From the start to the end of the run; while it has no end, to the start of its last run."""
    finished = header.finished_at
    if finished is None and runs:
        finished = max(r.started_at for r in runs)
    duration = (finished - header.started_at).total_seconds() if finished else 0.0
    return max(duration, 0.0)


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
