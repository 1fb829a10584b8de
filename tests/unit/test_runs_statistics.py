"""Several runs per test through the runner: pass rules, adaptive run counts (with and without a
baseline), statistics in the results, fingerprints."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.core.baseline import Baseline, BaselineRun, BaselineTest
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import SuiteError
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, ATPResponse, Metrics
from atp.core.results import RunStore, SuiteResults, TestResult
from atp.core.runner import Runner
from atp.core.suite import load_suite, suite_fingerprint, test_fingerprint
from atp.core.trace import EventSink
from tests.conftest import write


def noisy(request: ATPRequest, sink: EventSink) -> ATPResponse:
    """Steps drawn from N(mean, spread) seeded by the test and run: score = 100 - steps."""
    data = request.task.input_data or {}
    meta = request.metadata or {}
    draw = random.Random(f"{data.get('seed', 0)}/{meta.get('test_id')}/{meta.get('run_number')}")
    steps = max(1, min(99, round(draw.gauss(data.get("mean", 20), data.get("spread", 5)))))
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status="completed",
        artifacts=[],
        metrics=Metrics(total_steps=steps, total_tokens=steps * 100),
    )


def suite_text(tests: str, defaults: str = "") -> str:
    return f"""
test_suite: stats
defaults:
  constraints: {{max_steps: 100}}
  scoring: {{quality_weight: 0, completeness_weight: 0, cost_weight: 0, efficiency_weight: 1}}
{defaults}
agents:
  - name: agent
    type: function
    function: tests.unit.test_runs_statistics:noisy
tests:
{tests}
"""


def a_test(test_id: str, mean: float = 20, spread: float = 5, seed: int = 0, extra: str = "") -> str:
    return (
        f"  - id: {test_id}\n"
        f"    task: {{description: go, input_data: {{mean: {mean}, spread: {spread}, seed: {seed}}}}}\n"
        + "".join(f"    {line}\n" for line in extra.splitlines() if line)
    )


def run(tmp_path: Path, plugins: Plugins, text: str, **options: Any) -> tuple[SuiteResults, Runner]:
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", **options)
    return anyio.run(runner.run), runner


def by_id(results: SuiteResults) -> dict[str, TestResult]:
    return {t.id: t for t in results.tests}


# --- the pass rule ------------------------------------------------------------------------------


def test_pass_rules_decide_a_test_of_several_runs(tmp_path: Path, plugins: Plugins) -> None:
    # scores about 80 ± 10: some runs fall under max_steps-based checks, none fail outright
    tests = (
        a_test("all_runs", spread=15, extra="assertions: [{type: max_steps, config: {limit: 25}}]")
        + a_test(
            "most_runs",
            spread=15,
            extra="assertions: [{type: max_steps, config: {limit: 25}}]\npass_rule: {pass_rate: 0.5}",
        )
        + a_test(
            "mean_score",
            spread=15,
            extra="assertions: [{type: max_steps, config: {limit: 25}}]\npass_rule: {min_score: 60}",
        )
        + a_test("high_bar", spread=15, extra="pass_rule: {min_score: 95}")
    )
    results, _ = run(tmp_path, plugins, suite_text(tests, "  runs_per_test: 8"))
    tests_ = by_id(results)
    all_runs = tests_["all_runs"]
    passed = sum(r.outcome == "passed" for r in all_runs.runs)
    assert 0 < passed < 8, "the agent's spread makes some runs fail the check"
    assert all_runs.status == "failed" and all_runs.pass_rule.rule == "all"
    assert tests_["most_runs"].status == (
        "passed" if sum(r.outcome == "passed" for r in tests_["most_runs"].runs) >= 4 else "failed"
    )
    assert tests_["mean_score"].status == "passed" and tests_["mean_score"].statistics is not None
    assert tests_["mean_score"].statistics.score.mean >= 60
    assert tests_["high_bar"].status == "failed"
    assert tests_["high_bar"].pass_rule.describe() == "the mean score is at least 95"
    assert results.summary.failed == 2 or results.summary.failed == 3


def test_pass_rule_errors_are_located(tmp_path: Path, plugins: Plugins) -> None:
    text = suite_text(a_test("x", extra="pass_rule: {pass_rate: 0.5, min_score: 3}"))
    with pytest.raises(SuiteError) as caught:
        load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    assert caught.value.path == "tests[0].pass_rule" and "exactly one" in str(caught.value)
    text = suite_text(a_test("x", extra="pass_rule: {pass_rate: 1.5}"))
    with pytest.raises(SuiteError) as caught:
        load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    assert caught.value.path == "tests[0].pass_rule.pass_rate"
    text = suite_text(a_test("x"), "  runs_per_test: auto\n  min_runs: 9\n  max_runs: 4")
    with pytest.raises(SuiteError) as caught:
        load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    assert caught.value.path == "defaults.min_runs" and "more than max_runs" in str(caught.value)
    text = suite_text(a_test("x", extra="runs_per_test: sometimes"))
    with pytest.raises(SuiteError) as caught:
        load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    assert caught.value.path == "tests[0].runs_per_test"


# --- statistics in the results ------------------------------------------------------------------


def test_results_carry_statistics_of_score_components_and_metrics(tmp_path: Path, plugins: Plugins) -> None:
    results, runner = run(
        tmp_path,
        plugins,
        suite_text(a_test("t") + a_test("single", extra="runs_per_test: 1"), "  runs_per_test: 6"),
    )
    test = by_id(results)["t"]
    stats = test.statistics
    assert stats is not None and stats.runs == 6 and stats.passed_runs == 6 and stats.pass_rate == 1.0
    scores = [r.score for r in test.runs]
    assert stats.score.mean == pytest.approx(sum(scores) / 6) and stats.score.min == min(scores)
    assert set(stats.components) == {"efficiency"}, "only the components that counted"
    steps = [r.metrics.total_steps for r in test.runs]
    assert stats.metrics["total_steps"].mean == pytest.approx(sum(steps) / 6)  # type: ignore[arg-type]
    assert stats.metrics["total_tokens"].max == max(steps) * 100  # type: ignore[type-var, operator]
    assert stats.components["efficiency"].mean == pytest.approx(stats.score.mean / 100)
    assert stats.pass_at_k == {1: 1.0, 3: 1.0, 5: 1.0, 6: 1.0}
    single = by_id(results)["single"].statistics
    assert single is not None and single.score.std is None and single.score.ci_95 is None
    assert results.statistics is not None and results.statistics.pass_at_k == {1: 1.0}, "k every test allows"
    assert runner.store is not None
    assert RunStore.open(runner.store.directory).results() == results


# --- adaptive run counts --------------------------------------------------------------------------


class Finished:
    def __init__(self) -> None:
        self.tests: list[TestResult] = []

    @hookimpl
    def atp_test_finished(self, result: TestResult) -> None:
        self.tests.append(result)


@pytest.mark.parametrize("parallel", [1, 4])
def test_auto_runs_until_the_interval_is_narrow(tmp_path: Path, plugins: Plugins, parallel: int) -> None:
    tests = a_test("steady", spread=1) + a_test("wild", spread=30) + a_test("fixed", extra="runs_per_test: 2")
    defaults = "  runs_per_test: auto\n  min_runs: 3\n  max_runs: 12\n  ci_width: 3"
    spy = Finished()
    plugins.register(spy, name="finished-spy")
    try:
        results, runner = run(tmp_path, plugins, suite_text(tests, defaults), parallel=parallel)
    finally:
        plugins.unregister(name="finished-spy")
    steady, wild, fixed = (by_id(results)[i] for i in ("steady", "wild", "fixed"))
    assert steady.stop is not None and steady.stop.reason == "ci_width"
    assert 3 <= steady.stop.runs < 12 and len(steady.runs) <= steady.stop.runs + parallel - 1
    assert steady.statistics is not None and steady.statistics.score.half_width is not None
    assert wild.stop is not None and wild.stop.reason == "max_runs" and len(wild.runs) == 12
    assert fixed.stop is None and len(fixed.runs) == 2 and fixed.adaptive is None
    assert sorted(r.run_number for r in steady.runs) == list(range(1, len(steady.runs) + 1))
    assert results.summary.incomplete == 0 and results.summary.passed == 3
    # every test is announced finished once, with all its runs
    assert sorted((t.id, len(t.runs)) for t in spy.tests) == sorted(
        (t.id, len(t.runs)) for t in results.tests
    )
    # atp report replays the same decisions from the run directory
    assert runner.store is not None
    assert RunStore.open(runner.store.directory).results() == results


def test_runs_auto_from_the_command_line_overrides_a_fixed_count(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(
        tmp_path,
        plugins,
        suite_text(a_test("t", spread=1), "  runs_per_test: 7\n  max_runs: 10"),
        runs="auto",
    )
    test = results.tests[0]
    assert test.adaptive is not None and test.adaptive.max_runs == 10 and test.stop is not None
    assert len(test.runs) == test.stop.runs < 7


def baseline_for(test_ids: list[str], mean: float, spread: float, runs: int = 15, seed: int = 99) -> Baseline:
    draw = random.Random(seed)
    return Baseline(
        suite="stats",
        tests={
            i: BaselineTest(
                mean_score=mean,
                n_runs=runs,
                runs=[BaselineRun(score=min(100.0, max(0.0, draw.gauss(mean, spread)))) for _ in range(runs)],
            )
            for i in test_ids
        },
    )


def test_auto_with_a_baseline_stops_once_decided(tmp_path: Path, plugins: Plugins) -> None:
    # baseline about 80 ± 5; "worse" scores about 55, "same" about 80
    tests = a_test("worse", mean=45) + a_test("same", mean=20, seed=3) + a_test("new")
    defaults = "  runs_per_test: auto\n  min_runs: 3\n  max_runs: 20\n  min_effect: 10"
    baseline = baseline_for(["worse", "same"], 80, 5)
    results, runner = run(tmp_path, plugins, suite_text(tests, defaults), baseline=baseline)
    worse, same, new = (by_id(results)[i] for i in ("worse", "same", "new"))
    assert worse.stop is not None and worse.stop.reason == "regression" and worse.stop.runs < 20
    assert (
        worse.baseline is not None
        and worse.baseline.verdict == "regression"
        and worse.baseline.method == "sequential"
    )
    assert same.stop is not None and same.stop.reason == "equivalent" and same.stop.runs < 20
    assert same.baseline is not None and same.baseline.verdict == "no_change"
    assert new.stop is not None and new.stop.reason in ("ci_width", "max_runs")
    assert new.baseline is not None and new.baseline.verdict == "not_compared"
    assert results.baseline is not None and results.baseline.regressions == 1
    assert runner.store is not None
    stored = RunStore.open(runner.store.directory)
    assert (runner.store.directory / "baseline.json").is_file()
    assert stored.results() == results


def test_fixed_runs_compared_with_a_baseline(tmp_path: Path, plugins: Plugins) -> None:
    tests = (
        a_test("worse", mean=40) + a_test("same", mean=20, seed=5) + a_test("one", extra="runs_per_test: 1")
    )
    baseline = baseline_for(["worse", "same", "one", "gone"], 80, 5)
    results, _ = run(tmp_path, plugins, suite_text(tests, "  runs_per_test: 8"), baseline=baseline)
    comparison = results.baseline
    assert comparison is not None and comparison.not_in_run == ["gone"]
    worse, same, one = (by_id(results)[i].baseline for i in ("worse", "same", "one"))
    assert worse is not None and worse.verdict == "regression" and worse.method == "welch"
    assert (
        worse.p_value is not None and worse.p_value < 0.001 and worse.delta is not None and worse.delta < -10
    )
    assert worse.p_holm is not None and worse.p_holm >= worse.p_value and worse.verdict_holm == "regression"
    assert same is not None and same.verdict == "no_change"
    assert one is not None and one.verdict == "not_compared" and one.p_value is None
    assert one.reason is not None and "at least 2 runs" in one.reason


def test_baseline_of_another_suite_is_not_compared(tmp_path: Path, plugins: Plugins) -> None:
    baseline = baseline_for(["t"], 80, 5)
    baseline.suite = "other"
    results, _ = run(tmp_path, plugins, suite_text(a_test("t"), "  runs_per_test: 3"), baseline=baseline)
    assert results.baseline is not None and "another suite" in " ".join(results.baseline.problems)
    assert results.tests[0].baseline is not None and results.tests[0].baseline.p_value is None


# --- fingerprints --------------------------------------------------------------------------------


def test_fingerprint_follows_what_a_test_asks_and_checks(tmp_path: Path, plugins: Plugins) -> None:
    def fingerprints(extra: str, name: str = "t") -> tuple[str, str]:
        text = suite_text(a_test("t", extra=extra))
        suite = load_suite(write(tmp_path / f"{name}.yaml", text), plugins.evaluators)
        return test_fingerprint(suite.tests[0]), suite_fingerprint(suite.tests)

    plain = fingerprints("")
    assert fingerprints("tags: [x]\nruns_per_test: 5\npass_rule: {pass_rate: 0.5}", "same") == plain
    assert fingerprints("assertions: [{type: max_steps, config: {limit: 25}}]", "checks")[0] != plain[0]
    assert fingerprints("constraints: {max_steps: 50}", "limits")[0] != plain[0]
    assert len(plain[0]) == 16
