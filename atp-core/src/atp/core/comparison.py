"""Several agents compared on one suite (``atp compare``): pure computation over each agent's
:class:`~atp.core.results.SuiteResults`, no I/O.

Per test, each agent's mean score with its 95% confidence interval, and for each pair of agents
Welch's t-test of the difference of their means (from the runs' scores). Overall, for each pair,
the paired t-test of the per-test differences of the mean scores over the tests both agents ran
(the same tasks were run by both: each test is a pair). Holm's correction is applied over the
family of every per-test pairwise test, and separately over the family of the overall ones; a
difference is *significant* when its Holm-adjusted p-value is below :data:`~atp.core.stats.ALPHA`.

Scores are ATP's 0-100 scores: higher is better. In a pair ``(a, b)``, ``delta`` is
``a - b``. What cannot be compared (a test one agent did not run, fewer than 2 runs on a side,
fewer than 2 shared tests overall) says why, and has no p-value. Every figure is finite or
``None``: the result encodes to JSON without NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from statistics import fmean
from typing import Literal

import msgspec

from atp.core.results import SuiteResults, TestResult
from atp.core.stats import (
    ALPHA,
    CONFIDENCE,
    SCORE_BOUNDS,
    Difference,
    Sample,
    Stats,
    describe,
    holm,
    paired,
    welch,
)

COMPARISON_FORMAT = "atp-comparison"
COMPARISON_VERSION = "1.0"
MIN_RUNS = 2
"""Welch's t-test needs at least this many runs of a test on each side."""
MIN_TESTS = 2
"""The paired t-test needs at least this many tests that both agents ran."""

Verdict = Literal["a_better", "b_better", "no_difference", "not_compared"]


class AgentRun(msgspec.Struct, kw_only=True):
    """Where one agent's runs are."""

    agent: str
    run_id: str
    run_dir: str | None = None
    """The run directory (``atp report`` renders it); set by the caller that knows it."""
    interrupted: bool = False
    stopped_by: str | None = None
    runs: int = 0
    """The runs that finished."""


class AgentScore(msgspec.Struct, kw_only=True):
    """One agent's score on one test (or, in :attr:`AgentComparison.agent_totals`, over the
    per-test mean scores of every test it ran)."""

    agent: str
    n: int
    """The runs (overall: the tests) the figures are taken over; 0 when there are none."""
    mean: float | None = None
    std: float | None = None
    ci_95: tuple[float, float] | None = None
    """The 95% confidence interval of the mean; ``None`` for fewer than 2 values."""
    half_width: float | None = None
    """Half the width of ``ci_95``."""


class PairTest(msgspec.Struct, kw_only=True):
    """Two agents compared on one test by Welch's t-test."""

    a: str
    b: str
    verdict: Verdict
    """After Holm's correction over every per-test pairwise test."""
    better: str | None = None
    """The agent that is significantly better after the correction, if either is."""
    significant: bool = False
    """The Holm-adjusted p-value is below the level."""
    significant_uncorrected: bool = False
    """The test's own p-value is below the level."""
    delta: float | None = None
    """mean(a) - mean(b)."""
    ci_95: tuple[float, float] | None = None
    """The 95% confidence interval of ``delta``."""
    t: float | None = None
    df: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    reason: str | None = None
    """Why the pair was not compared, or what to know about the test (no variance)."""


class TestRow(msgspec.Struct, kw_only=True):
    """One test: each agent's score (in the order of :attr:`AgentComparison.agents`) and each
    pair compared."""

    __test__ = False  # not a pytest test class

    id: str
    name: str
    scores: list[AgentScore]
    pairs: list[PairTest]


class PairResult(msgspec.Struct, kw_only=True):
    """Two agents compared over the suite: the paired t-test of their per-test mean scores."""

    a: str
    b: str
    verdict: Verdict
    """After Holm's correction over every pair's overall test."""
    better: str | None = None
    significant: bool = False
    significant_uncorrected: bool = False
    tests: int = 0
    """The tests both agents ran (the pairs of the paired test)."""
    delta: float | None = None
    """The mean over those tests of mean(a) - mean(b)."""
    ci_95: tuple[float, float] | None = None
    t: float | None = None
    df: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    a_better_tests: int = 0
    """Tests on which ``a`` is significantly better (Holm-corrected, per test)."""
    b_better_tests: int = 0
    compared_tests: int = 0
    """Tests on which the pair was compared by Welch's t-test."""
    reason: str | None = None


class AgentComparison(msgspec.Struct, kw_only=True):
    """Several agents compared on one suite."""

    format: str = COMPARISON_FORMAT
    version: str = COMPARISON_VERSION
    suite: str
    agents: list[str]
    alpha: float = ALPHA
    confidence: float = CONFIDENCE
    correction: Literal["holm"] = "holm"
    interrupted: bool = False
    """A run of an agent was stopped before it finished: it is compared on what finished."""
    runs: list[AgentRun] = msgspec.field(default_factory=list)
    """Each agent's run, in the order of ``agents``."""
    tests: list[TestRow] = msgspec.field(default_factory=list)
    overall: list[PairResult] = msgspec.field(default_factory=list)
    agent_totals: list[AgentScore] = msgspec.field(default_factory=list)
    """Each agent's figures over the per-test mean scores of the tests it ran."""
    problems: list[str] = msgspec.field(default_factory=list)
    """What is wrong with the runs compared (another suite, problems of a run directory)."""


def _score(agent: str, values: Sequence[float]) -> AgentScore:
    if not values:
        return AgentScore(agent=agent, n=0)
    stats: Stats = describe(values, SCORE_BOUNDS)
    return AgentScore(
        agent=agent, n=stats.n, mean=stats.mean, std=stats.std, ci_95=stats.ci_95, half_width=stats.half_width
    )


def _scores(test: TestResult | None) -> list[float]:
    return [run.score for run in test.runs] if test is not None else []


def _runs(n: int) -> str:
    return f"{n} run{'' if n == 1 else 's'}"


def _pair_test(a: str, b: str, scores_a: Sequence[float], scores_b: Sequence[float]) -> PairTest:
    short = [
        f"{name} has {_runs(len(scores))}"
        for name, scores in ((a, scores_a), (b, scores_b))
        if len(scores) < MIN_RUNS
    ]
    if short:
        missing = [name for name, scores in ((a, scores_a), (b, scores_b)) if not scores]
        if missing:
            reason = f"{' and '.join(missing)} did not run this test"
        else:
            reason = f"Welch's t-test needs at least {MIN_RUNS} runs on each side ({' and '.join(short)})"
        return PairTest(a=a, b=b, verdict="not_compared", reason=reason)
    difference = welch(Sample.of(scores_a), Sample.of(scores_b))
    return _fill(PairTest(a=a, b=b, verdict="no_difference"), difference)


def _fill(pair: PairTest, difference: Difference) -> PairTest:
    pair.delta = difference.delta
    pair.ci_95 = difference.ci_95
    pair.t = difference.t
    pair.df = difference.df
    pair.p_value = difference.p_value
    pair.significant_uncorrected = difference.p_value < ALPHA
    pair.reason = difference.note
    return pair


def _judge(item: PairTest | PairResult, adjusted: float) -> None:
    """Holm's verdict on a compared pair."""
    item.p_holm = adjusted
    item.significant = adjusted < ALPHA and item.delta is not None and item.delta != 0.0
    if item.significant and item.delta is not None:
        item.better = item.a if item.delta > 0 else item.b
        item.verdict = "a_better" if item.delta > 0 else "b_better"
    else:
        item.verdict = "no_difference"


def _overall(a: str, b: str, rows: Sequence[TestRow], index_a: int, index_b: int) -> PairResult:
    differences = []
    for row in rows:
        mean_a, mean_b = row.scores[index_a].mean, row.scores[index_b].mean
        if mean_a is not None and mean_b is not None:
            differences.append(mean_a - mean_b)
    result = PairResult(a=a, b=b, verdict="not_compared", tests=len(differences))
    if len(differences) < MIN_TESTS:
        result.reason = (
            f"the paired t-test needs at least {MIN_TESTS} tests that both agents ran "
            f"({len(differences)} {'was' if len(differences) == 1 else 'were'})"
        )
        if differences:
            result.delta = differences[0]
        return result
    difference = paired(differences)
    result.verdict = "no_difference"
    result.delta = difference.delta
    result.ci_95 = difference.ci_95
    result.t = difference.t
    result.df = difference.df
    result.p_value = difference.p_value
    result.significant_uncorrected = difference.p_value < ALPHA
    result.reason = difference.note
    return result


def compare_agents(
    results: Sequence[SuiteResults], run_dirs: Sequence[str | None] | None = None
) -> AgentComparison:
    """Each agent's results (one :class:`SuiteResults` per agent, of one suite, agents named
    differently) compared test by test and overall; ``run_dirs`` are recorded with them."""
    if len(results) < 2:
        raise ValueError("a comparison needs the results of at least 2 agents")
    agents = [r.agent for r in results]
    if len(set(agents)) != len(agents):
        raise ValueError(f"each agent must be named once (got {', '.join(agents)})")
    if run_dirs is not None and len(run_dirs) != len(results):
        raise ValueError("give one run directory per agent's results")
    problems: list[str] = []
    suite = results[0].suite
    for result in results[1:]:
        if result.suite != suite:
            problems.append(f"agent {result.agent!r} ran suite {result.suite!r}, not {suite!r}")
    for result in results:
        problems.extend(f"agent {result.agent!r}: {problem}" for problem in result.problems)
    by_agent: list[dict[str, TestResult]] = [{t.id: t for t in r.tests} for r in results]
    names: dict[str, str] = {}
    for result in results:
        for test in result.tests:
            names.setdefault(test.id, test.name)
    pairs = list(combinations(range(len(agents)), 2))
    rows: list[TestRow] = []
    for test_id, name in names.items():
        scores = [_scores(tests.get(test_id)) for tests in by_agent]
        rows.append(
            TestRow(
                id=test_id,
                name=name,
                scores=[_score(agent, values) for agent, values in zip(agents, scores, strict=True)],
                pairs=[_pair_test(agents[i], agents[j], scores[i], scores[j]) for i, j in pairs],
            )
        )
    family = [pair for row in rows for pair in row.pairs if pair.p_value is not None]
    for pair, adjusted in zip(family, holm([p.p_value or 0.0 for p in family]), strict=True):
        _judge(pair, adjusted)
    overall = [_overall(agents[i], agents[j], rows, i, j) for i, j in pairs]
    decided = [pair for pair in overall if pair.p_value is not None]
    for result_pair, adjusted in zip(decided, holm([p.p_value or 0.0 for p in decided]), strict=True):
        _judge(result_pair, adjusted)
    for number, (i, j) in enumerate(pairs):
        column = [row.pairs[number] for row in rows]
        overall[number].compared_tests = sum(1 for p in column if p.p_value is not None)
        overall[number].a_better_tests = sum(1 for p in column if p.better == agents[i])
        overall[number].b_better_tests = sum(1 for p in column if p.better == agents[j])
    totals = []
    for agent, tests in zip(agents, by_agent, strict=True):
        means = [fmean(_scores(t)) for t in tests.values() if t.runs]
        totals.append(_score(agent, means))
    directories = list(run_dirs) if run_dirs is not None else [None] * len(results)
    return AgentComparison(
        suite=suite,
        agents=agents,
        interrupted=any(r.interrupted or r.stopped_by is not None for r in results),
        runs=[
            AgentRun(
                agent=r.agent,
                run_id=r.run_id,
                run_dir=directory,
                interrupted=r.interrupted,
                stopped_by=r.stopped_by,
                runs=r.summary.runs,
            )
            for r, directory in zip(results, directories, strict=True)
        ],
        tests=rows,
        overall=overall,
        agent_totals=totals,
        problems=problems,
    )


def encode_comparison(comparison: AgentComparison) -> bytes:
    """The comparison as indented JSON, with a final newline."""
    return msgspec.json.format(msgspec.json.encode(comparison), indent=2) + b"\n"


def verdict_text(item: PairTest | PairResult) -> str:
    """The verdict in words: "A better than B", "no significant difference", "not compared"."""
    if item.verdict == "a_better":
        return f"{item.a} better than {item.b}"
    if item.verdict == "b_better":
        return f"{item.b} better than {item.a}"
    if item.verdict == "no_difference":
        return "no significant difference"
    return "not compared"
