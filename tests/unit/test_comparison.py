"""Several agents compared (atp.core.comparison): each test's pairs by Welch's t-test and the
overall pairs by the paired t-test, held to SciPy's figures; Holm's correction over each family;
what cannot be compared and why; JSON without NaN."""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
from scipy import stats as scipy_stats

from atp.core.comparison import (
    AgentComparison,
    PairResult,
    PairTest,
    compare_agents,
    encode_comparison,
    verdict_text,
)
from atp.core.results import PlannedTest, RunHeader, RunResult, SuiteResults, build_suite_results
from atp.core.stats import holm
from tests.facts import says

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
REL = 1e-9


def normal(seed: int, mean: float, spread: float, n: int) -> list[float]:
    draw = random.Random(seed)
    return [round(draw.gauss(mean, spread), 1) for _ in range(n)]


def results(
    agent: str, tests: dict[str, list[float]], suite: str = "s", planned: list[str] | None = None
) -> SuiteResults:
    """An agent's results: each test's runs scored as given (a test with no scores planned but
    not run)."""
    ids = planned if planned is not None else list(tests)
    header = RunHeader(
        run_id=f"run-{agent}",
        suite=suite,
        agent=agent,
        agent_type="cli",
        started_at=START,
        finished_at=START + timedelta(minutes=1),
        tests=[PlannedTest(id=i, name=f"Test {i}", runs=max(len(tests.get(i, [])), 1)) for i in ids],
    )
    runs = [
        RunResult(
            test_id=test_id,
            run_number=number,
            task_id=f"{agent}-{test_id}-{number}",
            outcome="passed",
            status="completed",
            score=score,
            duration_seconds=0.1,
            started_at=START + timedelta(seconds=number),
        )
        for test_id, scores in tests.items()
        for number, score in enumerate(scores, 1)
    ]
    return build_suite_results(header, runs)


def pair_of(comparison: AgentComparison, test_id: str, a: str, b: str) -> PairTest:
    row = next(r for r in comparison.tests if r.id == test_id)
    return next(p for p in row.pairs if (p.a, p.b) == (a, b))


def overall_of(comparison: AgentComparison, a: str, b: str) -> PairResult:
    return next(p for p in comparison.overall if (p.a, p.b) == (a, b))


def no_nan(comparison: AgentComparison) -> dict[str, Any]:
    """The comparison's JSON, read back refusing NaN and infinities."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in the comparison's JSON")

    data: dict[str, Any] = json.loads(encode_comparison(comparison), parse_constant=refuse)
    return data


TESTS = ("alpha", "beta", "gamma", "delta", "epsilon")


@pytest.fixture
def three() -> tuple[list[SuiteResults], dict[str, dict[str, list[float]]]]:
    """Three agents on five tests, 7 to 9 runs each: good (about 80), worse (about 66, wider),
    same (about 80)."""
    scores: dict[str, dict[str, list[float]]] = {"good": {}, "worse": {}, "same": {}}
    for number, test_id in enumerate(TESTS):
        scores["good"][test_id] = normal(10 + number, 80 + number, 5, 8)
        scores["worse"][test_id] = normal(20 + number, 66 + number, 7, 9)
        scores["same"][test_id] = normal(30 + number, 80 + number, 5, 7)
    return [results(agent, tests) for agent, tests in scores.items()], scores


# --- per test: Welch's t-test ------------------------------------------------------------------


def test_each_pair_of_each_test_is_welchs_t_test_as_scipy_computes_it(three: Any) -> None:
    suite_results, scores = three
    comparison = compare_agents(suite_results)
    assert comparison.agents == ["good", "worse", "same"]
    assert [(p.a, p.b) for p in comparison.overall] == [
        ("good", "worse"),
        ("good", "same"),
        ("worse", "same"),
    ]
    for test_id in TESTS:
        for a, b in (("good", "worse"), ("good", "same"), ("worse", "same")):
            pair = pair_of(comparison, test_id, a, b)
            expected = scipy_stats.ttest_ind(scores[a][test_id], scores[b][test_id], equal_var=False)
            interval = expected.confidence_interval(0.95)
            assert pair.verdict != "not_compared"
            assert pair.delta == pytest.approx(
                sum(scores[a][test_id]) / len(scores[a][test_id])
                - sum(scores[b][test_id]) / len(scores[b][test_id]),
                rel=REL,
            )
            assert pair.t == pytest.approx(expected.statistic, rel=1e-9)
            assert pair.df == pytest.approx(expected.df, rel=1e-9)
            assert pair.p_value == pytest.approx(expected.pvalue, rel=1e-7)
            assert pair.ci_95 is not None
            assert pair.ci_95[0] == pytest.approx(interval.low, rel=1e-7)
            assert pair.ci_95[1] == pytest.approx(interval.high, rel=1e-7)
            assert pair.significant_uncorrected == (expected.pvalue < 0.05)


def test_each_agents_mean_and_interval_per_test(three: Any) -> None:
    suite_results, scores = three
    comparison = compare_agents(suite_results)
    for row in comparison.tests:
        assert row.name == f"Test {row.id}"
        for score in row.scores:
            values = scores[score.agent][row.id]
            expected = scipy_stats.t.interval(
                0.95, len(values) - 1, loc=sum(values) / len(values), scale=scipy_stats.sem(values)
            )
            assert score.n == len(values)
            assert score.mean == pytest.approx(sum(values) / len(values), rel=REL)
            assert score.ci_95 is not None and score.half_width is not None
            assert score.ci_95[0] == pytest.approx(expected[0], rel=1e-7)
            assert score.ci_95[1] == pytest.approx(expected[1], rel=1e-7)
            assert score.half_width == pytest.approx((expected[1] - expected[0]) / 2, rel=1e-7)


# --- overall: the paired t-test ----------------------------------------------------------------


def test_each_overall_pair_is_the_paired_t_test_of_the_tests_mean_scores_as_scipy_computes_it(
    three: Any,
) -> None:
    suite_results, scores = three
    comparison = compare_agents(suite_results)
    for a, b in (("good", "worse"), ("good", "same"), ("worse", "same")):
        means_a = [sum(scores[a][t]) / len(scores[a][t]) for t in TESTS]
        means_b = [sum(scores[b][t]) / len(scores[b][t]) for t in TESTS]
        expected = scipy_stats.ttest_rel(means_a, means_b)
        interval = expected.confidence_interval(0.95)
        pair = overall_of(comparison, a, b)
        assert pair.tests == len(TESTS)
        assert pair.delta == pytest.approx(sum(means_a) / len(TESTS) - sum(means_b) / len(TESTS), rel=1e-9)
        assert pair.t == pytest.approx(expected.statistic, rel=1e-9)
        assert pair.df == expected.df == len(TESTS) - 1
        assert pair.p_value == pytest.approx(expected.pvalue, rel=1e-7)
        assert pair.ci_95 is not None
        assert pair.ci_95[0] == pytest.approx(interval.low, rel=1e-7)
        assert pair.ci_95[1] == pytest.approx(interval.high, rel=1e-7)
        assert pair.compared_tests == len(TESTS)


def test_the_better_agent_is_found_and_like_agents_are_not_told_apart(three: Any) -> None:
    comparison = compare_agents(three[0])
    good_worse = overall_of(comparison, "good", "worse")
    assert good_worse.significant and good_worse.verdict == "a_better" and good_worse.better == "good"
    assert verdict_text(good_worse) == "good better than worse"
    worse_same = overall_of(comparison, "worse", "same")
    assert worse_same.verdict == "b_better" and worse_same.better == "same"
    assert verdict_text(worse_same) == "same better than worse"
    good_same = overall_of(comparison, "good", "same")
    assert not good_same.significant and good_same.verdict == "no_difference" and good_same.better is None
    assert verdict_text(good_same) == "no significant difference"
    assert good_same.a_better_tests == good_same.b_better_tests == 0
    assert good_worse.a_better_tests >= 3 and good_worse.b_better_tests == 0


def test_the_agents_totals_are_over_the_tests_mean_scores(three: Any) -> None:
    suite_results, scores = three
    comparison = compare_agents(suite_results, ["/runs/1", "/runs/2", "/runs/3"])
    for total in comparison.agent_totals:
        means = [sum(scores[total.agent][t]) / len(scores[total.agent][t]) for t in TESTS]
        assert total.n == len(TESTS)
        assert total.mean == pytest.approx(sum(means) / len(means), rel=REL)
    assert [(r.agent, r.run_id, r.run_dir, r.runs) for r in comparison.runs] == [
        ("good", "run-good", "/runs/1", 40),
        ("worse", "run-worse", "/runs/2", 45),
        ("same", "run-same", "/runs/3", 35),
    ]
    assert comparison.suite == "s" and not comparison.interrupted and not comparison.problems


# --- Holm's correction -------------------------------------------------------------------------


def test_holm_is_applied_over_every_per_test_pair_and_separately_over_the_overall_pairs(three: Any) -> None:
    comparison = compare_agents(three[0])
    family = [p for row in comparison.tests for p in row.pairs]
    assert all(p.p_value is not None for p in family)
    adjusted = holm([p.p_value or 0.0 for p in family])
    for pair, expected in zip(family, adjusted, strict=True):
        assert pair.p_holm == pytest.approx(expected, rel=1e-12)
        assert pair.p_holm is not None and pair.p_value is not None and pair.p_holm >= pair.p_value
        assert pair.significant == (expected < 0.05)
    overall = holm([p.p_value or 0.0 for p in comparison.overall])
    for pair, expected in zip(comparison.overall, overall, strict=True):
        assert pair.p_holm == pytest.approx(expected, rel=1e-12)
        assert pair.significant == (expected < 0.05)


def test_holm_takes_back_a_difference_that_is_significant_on_its_own_only() -> None:
    """Four tests: one whose p is about 0.03 alone (significant), three with no difference;
    Holm multiplies the smallest p by 4, above 0.05."""
    a = {"t1": [70.0, 72.0, 74.0, 71.0, 73.0, 75.0], **{f"t{i}": [70.0, 75.0, 72.0, 71.0] for i in (2, 3, 4)}}
    b = {"t1": [69.0, 71.0, 70.0, 68.0, 72.0, 70.5], **{f"t{i}": [71.0, 74.0, 72.0, 71.0] for i in (2, 3, 4)}}
    comparison = compare_agents([results("a", a), results("b", b)])
    pair = pair_of(comparison, "t1", "a", "b")
    expected = scipy_stats.ttest_ind(a["t1"], b["t1"], equal_var=False).pvalue
    assert 0.0125 < expected < 0.05
    assert pair.p_value == pytest.approx(expected, rel=1e-7)
    assert pair.significant_uncorrected and not pair.significant
    assert pair.p_holm == pytest.approx(min(1.0, 4 * expected), rel=1e-7)
    assert pair.verdict == "no_difference" and pair.better is None


# --- what cannot be compared ------------------------------------------------------------------


def test_one_run_a_side_is_not_compared_and_says_why() -> None:
    comparison = compare_agents(
        [
            results("a", {"t1": [80.0], "t2": [70.0, 72.0]}),
            results("b", {"t1": [60.0, 62.0], "t2": [71.0, 69.0]}),
        ]
    )
    pair = pair_of(comparison, "t1", "a", "b")
    assert pair.verdict == "not_compared" and not pair.significant
    assert pair.p_value is None and pair.p_holm is None and pair.delta is None and pair.t is None
    says(pair.reason, "Welch's t-test", "at least 2 runs", "a has 1 run")
    row = next(r for r in comparison.tests if r.id == "t1")
    assert row.scores[0].n == 1 and row.scores[0].mean == 80.0
    assert row.scores[0].std is None and row.scores[0].ci_95 is None and row.scores[0].half_width is None
    # the other test alone makes the per-test family; the overall pair uses both tests' means
    assert pair_of(comparison, "t2", "a", "b").p_holm == pair_of(comparison, "t2", "a", "b").p_value
    overall = overall_of(comparison, "a", "b")
    assert overall.tests == 2 and overall.p_value is not None and overall.compared_tests == 1
    data = no_nan(comparison)
    assert data["tests"][0]["pairs"][0]["p_value"] is None


def test_a_test_only_one_agent_ran_is_not_compared() -> None:
    comparison = compare_agents(
        [
            results("a", {"t1": [80.0, 82.0], "t2": [70.0, 72.0], "t3": [60.0, 65.0]}),
            results("b", {"t1": [60.0, 62.0], "t2": [71.0, 69.0]}, planned=["t1", "t2", "t3"]),
        ]
    )
    assert [r.id for r in comparison.tests] == ["t1", "t2", "t3"]
    pair = pair_of(comparison, "t3", "a", "b")
    assert pair.verdict == "not_compared"
    says(pair.reason, "b did not run")
    row = comparison.tests[2]
    assert row.scores[1].n == 0 and row.scores[1].mean is None
    overall = overall_of(comparison, "a", "b")
    assert overall.tests == 2  # the tests both ran
    assert comparison.agent_totals[0].n == 3 and comparison.agent_totals[1].n == 2
    no_nan(comparison)


def test_a_test_missing_from_an_agents_results_is_listed_all_the_same() -> None:
    comparison = compare_agents(
        [
            results("a", {"t1": [80.0, 82.0]}),
            results("b", {"t1": [60.0, 62.0], "t2": [71.0, 69.0]}),
        ]
    )
    assert [r.id for r in comparison.tests] == ["t1", "t2"]
    says(pair_of(comparison, "t2", "a", "b").reason, "a did not run")
    overall = overall_of(comparison, "a", "b")
    assert overall.verdict == "not_compared" and overall.p_value is None
    says(overall.reason, "paired t-test", "at least 2 tests", "both agents", "1 was")
    assert overall.delta == pytest.approx(20.0)
    assert verdict_text(overall) == "not compared"
    no_nan(comparison)


def test_identical_scores_give_defined_figures() -> None:
    comparison = compare_agents(
        [
            results("a", {"t1": [80.0, 80.0, 80.0], "t2": [70.0, 70.0]}),
            results("b", {"t1": [80.0, 80.0], "t2": [70.0, 70.0, 70.0]}),
        ]
    )
    for test_id in ("t1", "t2"):
        pair = pair_of(comparison, test_id, "a", "b")
        assert pair.delta == 0.0 and pair.p_value == 1.0 and pair.ci_95 == (0.0, 0.0)
        assert pair.t is None and pair.df is None
        assert pair.verdict == "no_difference" and pair.reason == "every run scored the same on both sides"
    score = comparison.tests[0].scores[0]
    assert score.std == 0.0 and score.ci_95 == (80.0, 80.0) and score.half_width == 0.0
    overall = overall_of(comparison, "a", "b")
    assert overall.delta == 0.0 and overall.p_value == 1.0 and overall.t is None
    assert overall.verdict == "no_difference" and overall.reason == "every pair is equal"
    no_nan(comparison)


def test_constant_scores_that_differ_are_an_exact_difference() -> None:
    comparison = compare_agents(
        [
            results("a", {"t1": [90.0, 90.0], "t2": [80.0, 80.0]}),
            results("b", {"t1": [80.0, 80.0], "t2": [70.0, 70.0]}),
        ]
    )
    pair = pair_of(comparison, "t1", "a", "b")
    assert pair.delta == 10.0 and pair.p_value == 0.0 and pair.p_holm == 0.0
    assert pair.significant and pair.better == "a"
    overall = overall_of(comparison, "a", "b")
    assert overall.delta == 10.0 and overall.p_value == 0.0 and overall.significant and overall.better == "a"
    assert overall.reason == "every pair differs by the same amount"
    no_nan(comparison)


def test_nothing_run_at_all_gives_defined_output() -> None:
    comparison = compare_agents(
        [
            results("a", {}, planned=["t1"]),
            results("b", {}, planned=["t1"]),
        ]
    )
    says(comparison.tests[0].pairs[0].reason, "a and b did not run")
    assert comparison.agent_totals[0].n == 0 and comparison.agent_totals[0].mean is None
    overall = overall_of(comparison, "a", "b")
    assert overall.tests == 0 and overall.delta is None and overall.verdict == "not_compared"
    data = no_nan(comparison)
    assert data["overall"][0]["p_value"] is None


def test_runs_of_another_suite_and_interrupted_runs_are_said() -> None:
    a = results("a", {"t1": [80.0, 82.0]})
    b = results("b", {"t1": [60.0, 62.0]}, suite="other")
    b.interrupted = True
    b.stopped_by = "SIGINT"
    comparison = compare_agents([a, b])
    assert comparison.problems == ["agent 'b' ran suite 'other', not 's'"]
    assert comparison.interrupted and comparison.runs[1].stopped_by == "SIGINT"


def test_the_comparison_needs_two_differently_named_agents() -> None:
    one = results("a", {"t1": [80.0, 82.0]})
    with pytest.raises(ValueError, match="at least 2 agents"):
        compare_agents([one])
    with pytest.raises(ValueError, match="named once"):
        compare_agents([one, results("a", {"t1": [80.0, 82.0]})])
    with pytest.raises(ValueError, match="one run directory per agent"):
        compare_agents([one, results("b", {"t1": [80.0, 82.0]})], ["/only/one"])


def test_the_json_decodes_back_into_the_struct(three: Any) -> None:
    comparison = compare_agents(three[0], ["/r/1", "/r/2", "/r/3"])
    data = encode_comparison(comparison)
    assert data.endswith(b"\n")
    decoded = msgspec.json.decode(data, type=AgentComparison)
    assert decoded == comparison
    document = no_nan(comparison)
    assert document["format"] == "atp-comparison" and document["correction"] == "holm"
    assert all(math.isfinite(p["p_value"]) for row in document["tests"] for p in row["pairs"])
