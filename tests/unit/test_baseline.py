"""Baselines (atp.core.baseline) and the baseline of a run's results (atp.core.results.baseline_of):
the file format, the per-test comparison by Welch's t-test, Holm's correction, what cannot be
compared and why, and the decision that fails a build."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
from scipy import stats as scipy_stats

from atp.core.baseline import (
    Baseline,
    BaselineRun,
    BaselineTest,
    Compared,
    compare,
    encode_baseline,
    read_baseline,
)
from atp.core.errors import AtpError
from atp.core.results import (
    BaselineRef,
    PlannedTest,
    RunHeader,
    RunResult,
    baseline_of,
    build_suite_results,
)
from atp.core.stats import Sample

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def entry(scores: list[float], fingerprint: str | None = None) -> BaselineTest:
    """A baseline entry with raw scores (as `atp baseline save` writes it)."""
    sample = Sample.of(scores)
    return BaselineTest(
        mean_score=sample.mean,
        std=math.sqrt(sample.variance) if len(scores) > 1 else None,
        n_runs=len(scores),
        fingerprint=fingerprint,
        runs=[BaselineRun(score=s, passed=True) for s in scores],
    )


def normal(seed: int, mean: float, spread: float, n: int) -> list[float]:
    draw = random.Random(seed)
    return [round(draw.gauss(mean, spread), 1) for _ in range(n)]


def std(values: list[float]) -> float:
    return math.sqrt(Sample.of(values).variance)


# --- the file format -------------------------------------------------------------------------


def test_encode_baseline_declares_the_format() -> None:
    data = msgspec.json.decode(encode_baseline(Baseline(suite="s")))
    assert data["format"] == "atp-baseline" and data["version"] == "1.0"


def test_a_baseline_file_round_trips(tmp_path: Path) -> None:
    baseline = Baseline(
        created_at=START,
        suite="suite",
        agent="agent",
        suite_fingerprint="abc",
        run_id="20260101-000000-abcdef",
        tests={
            "a": BaselineTest(
                mean_score=80.0,
                std=2.0,
                n_runs=2,
                ci_95=(62.0, 98.0),
                fingerprint="f1",
                runs=[
                    BaselineRun(score=78.6, passed=True, metrics={"total_tokens": 1200.0}),
                    BaselineRun(score=81.4, passed=False),
                ],
            ),
            "b": entry([50.0, 60.0, 70.0]),
        },
    )
    path = tmp_path / "baseline.json"
    path.write_bytes(encode_baseline(baseline))
    assert read_baseline(path) == baseline
    data = msgspec.json.decode(path.read_bytes())
    assert data["tests"]["a"]["runs"][0] == {
        "score": 78.6,
        "passed": True,
        "metrics": {"total_tokens": 1200.0},
    }
    assert encode_baseline(baseline).endswith(b"\n")


def test_a_design_10_1_file_compares_from_its_summary_statistics(tmp_path: Path) -> None:
    baseline_scores = normal(1, 80, 5, 10)
    current = normal(2, 75, 6, 12)
    mean, spread, n = Sample.of(baseline_scores).mean, std(baseline_scores), len(baseline_scores)
    path = tmp_path / "baseline.json"
    path.write_text(
        '{"format": "atp-baseline", "version": "1.0", "created_at": "2026-01-01T00:00:00Z", "suite": "s", '
        '"agent": "agent", "tests": {"basic": {"mean_score": %r, "std": %r, "n_runs": %d, "ci_95": [70.0, 90.0]}}}'
        % (mean, spread, n)
    )
    summary_only = read_baseline(path)
    assert summary_only.tests["basic"].runs == []
    _, from_summary = compare(summary_only, "s", [Compared(id="basic", scores=current)])
    _, from_raw = compare(
        Baseline(suite="s", tests={"basic": entry(baseline_scores)}),
        "s",
        [Compared(id="basic", scores=current)],
    )
    expected = scipy_stats.ttest_ind_from_stats(
        Sample.of(current).mean, std(current), len(current), mean, spread, n, equal_var=False
    )
    by_summary, by_raw = from_summary["basic"], from_raw["basic"]
    assert by_summary.method == "welch-summary" and by_raw.method == "welch"
    assert by_summary.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert by_raw.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert scipy_stats.ttest_ind(current, baseline_scores, equal_var=False).pvalue == pytest.approx(
        by_raw.p_value, rel=1e-9
    )
    assert by_summary.delta == pytest.approx(by_raw.delta) and by_summary.ci_95 == pytest.approx(by_raw.ci_95)
    assert by_summary.baseline_runs == n and by_summary.current_runs == len(current)


def test_the_confidence_interval_of_the_difference_matches_scipy() -> None:
    reference, current = normal(3, 70, 4, 8), normal(4, 66, 9, 8)
    _, results = compare(
        Baseline(suite="s", tests={"t": entry(reference)}), "s", [Compared(id="t", scores=current)]
    )
    result = scipy_stats.ttest_ind(current, reference, equal_var=False)
    low, high = result.confidence_interval(0.95)
    comparison = results["t"]
    assert comparison.ci_95 == pytest.approx((low, high), rel=1e-9)
    assert comparison.delta == pytest.approx(Sample.of(current).mean - Sample.of(reference).mean)
    assert comparison.delta_percent == pytest.approx(comparison.delta / Sample.of(reference).mean * 100)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{not json", "is not an ATP baseline file"),
        (b'{"format": "atp-results", "suite": "s"}', "its format is 'atp-results'"),
        (b'{"suite": "s", "version": "2.0"}', "version 2.0"),
        (
            b'{"suite": "s", "tests": {"a": {"mean_score": "high", "n_runs": 1}}}',
            "is not an ATP baseline file",
        ),
        (b'{"tests": {}}', "is not an ATP baseline file"),
        (b"\xff\xfe", "is not an ATP baseline file"),
    ],
)
def test_a_malformed_baseline_file_is_an_error_naming_it(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "broken baseline.json"
    path.write_bytes(content)
    with pytest.raises(AtpError) as raised:
        read_baseline(path)
    assert str(path) in str(raised.value) and says in str(raised.value)


def test_a_missing_baseline_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(AtpError, match="cannot read the baseline .*missing.json"):
        read_baseline(tmp_path / "missing.json")
    with pytest.raises(AtpError, match="cannot read the baseline"):
        read_baseline(tmp_path)  # a directory


# --- what cannot be compared -----------------------------------------------------------------


def test_a_baseline_of_another_suite_compares_nothing() -> None:
    baseline = Baseline(suite="other", tests={"a": entry([80, 82, 84]), "b": entry([70, 71, 72])})
    summary, results = compare(
        baseline, "mine", [Compared(id="a", scores=[50, 51, 52]), Compared(id="b", scores=[70, 71, 72])]
    )
    assert (
        len(summary.problems) == 1 and "another suite ('other'; this run is of 'mine')" in summary.problems[0]
    )
    assert summary.compared == 0 and summary.regressions == summary.regressions_holm == 0
    assert summary.failing_regressions == 0 and summary.not_in_run == []
    for comparison in results.values():
        assert comparison.verdict == comparison.verdict_holm == "not_compared"
        assert comparison.p_value is None and comparison.p_holm is None and comparison.ci_95 is None
        assert "another suite" in (comparison.reason or "")


def test_a_test_missing_on_either_side_is_said() -> None:
    baseline = Baseline(suite="s", tests={"both": entry([80, 82, 84]), "gone": entry([70, 71, 72])})
    summary, results = compare(
        baseline, "s", [Compared(id="both", scores=[81, 82, 83]), Compared(id="new", scores=[60, 61, 62])]
    )
    assert summary.not_in_run == ["gone"]
    assert set(results) == {"both", "new"}
    new = results["new"]
    assert new.verdict == "not_compared" and new.reason == "not in the baseline" and new.p_value is None
    assert new.current_mean == pytest.approx(61.0) and new.current_runs == 3 and new.baseline_mean is None
    assert results["both"].verdict == "no_change"
    assert summary.compared == 1


@pytest.mark.parametrize(
    ("reference", "current", "says"),
    [
        (entry([80.0]), [70.0, 71.0, 72.0], "the baseline has 1 run)"),
        (entry([80.0, 81.0, 82.0]), [70.0], "this run has 1)"),
        (entry([80.0]), [70.0], "the baseline has 1 run and this run has 1"),
        (
            BaselineTest(mean_score=80.0, n_runs=5),
            [70.0, 71.0],
            "the baseline has 5 runs)",
        ),  # no std, no runs
    ],
)
def test_fewer_than_2_runs_on_a_side_is_not_compared(
    reference: BaselineTest, current: list[float], says: str
) -> None:
    summary, results = compare(
        Baseline(suite="s", tests={"t": reference}), "s", [Compared(id="t", scores=current)]
    )
    comparison = results["t"]
    assert comparison.verdict == comparison.verdict_holm == "not_compared"
    assert comparison.p_value is None and comparison.p_holm is None and comparison.delta is None
    assert comparison.reason is not None and "at least 2 runs on each side" in comparison.reason
    assert says in comparison.reason and "--runs=2 or more" in comparison.reason
    assert summary.compared == 0


def test_identical_scores_on_both_sides_are_no_change_with_a_note() -> None:
    _, results = compare(
        Baseline(suite="s", tests={"t": entry([90.0] * 4)}), "s", [Compared(id="t", scores=[90.0] * 5)]
    )
    assert results["t"].verdict == "no_change" and results["t"].p_value == 1.0
    assert results["t"].reason == "every run scored the same on both sides"


def test_constant_but_lower_scores_are_a_regression() -> None:
    _, results = compare(
        Baseline(suite="s", tests={"t": entry([90.0] * 4)}), "s", [Compared(id="t", scores=[80.0] * 4)]
    )
    assert results["t"].verdict == "regression" and results["t"].p_value == 0.0
    assert "the difference is exact" in (results["t"].reason or "")


# --- verdicts, Holm's correction, the exit decision ----------------------------------------------


def test_lower_scores_are_a_regression_and_higher_an_improvement() -> None:
    baseline = Baseline(
        suite="s", tests={"down": entry(normal(5, 80, 3, 10)), "up": entry(normal(6, 60, 3, 10))}
    )
    summary, results = compare(
        baseline,
        "s",
        [Compared(id="down", scores=normal(7, 70, 3, 10)), Compared(id="up", scores=normal(8, 70, 3, 10))],
    )
    assert results["down"].verdict == results["down"].verdict_holm == "regression"
    assert results["up"].verdict == results["up"].verdict_holm == "improvement"
    assert (results["down"].delta or 0) < 0 < (results["up"].delta or 0)
    assert (
        summary.regressions,
        summary.improvements,
        summary.regressions_holm,
        summary.improvements_holm,
    ) == (1, 1, 1, 1)


def holm_family() -> tuple[Baseline, list[Compared]]:
    """50 tests: 46 unchanged, 3 a little worse (p about 0.01: significant alone, not after
    Holm's correction over 50), 1 much worse (significant either way)."""
    reference = normal(10, 80, 4, 10)
    shift = 2.9 * math.sqrt(2 * Sample.of(reference).variance / 10)  # t = 2.9 at 18 df: p about 0.01
    tests: dict[str, BaselineTest] = {}
    runs: list[Compared] = []
    for number in range(50):
        test_id = f"t{number:02d}"
        tests[test_id] = entry(reference)
        if number < 46:
            scores = list(reference)  # the same scores: p = 1
        elif number < 49:
            scores = [s - shift for s in reference]  # the same spread, a lower mean
        else:
            scores = [s - 20.0 for s in reference]
        runs.append(Compared(id=test_id, scores=scores))
    return Baseline(suite="s", tests=tests), runs


def test_holm_correction_keeps_only_what_survives_many_tests() -> None:
    baseline, runs = holm_family()
    summary, results = compare(baseline, "s", runs)
    slightly = [results[f"t{n}"] for n in (46, 47, 48)]
    for comparison in slightly:
        assert 0.001 < (comparison.p_value or 0) < 0.05
        assert comparison.verdict == "regression" and comparison.verdict_holm == "no_change"
        assert (comparison.p_holm or 0) >= 0.05
    much = results["t49"]
    assert much.verdict == much.verdict_holm == "regression"
    assert much.p_holm == pytest.approx(min(1.0, 50 * (much.p_value or 0)))
    for number in range(46):
        assert results[f"t{number:02d}"].verdict == results[f"t{number:02d}"].verdict_holm == "no_change"
    assert summary.compared == 50
    assert (summary.regressions, summary.regressions_holm) == (4, 1)
    p_values = [c.p_value or 0.0 for c in results.values()]
    order = sorted(range(50), key=lambda i: p_values[i])
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (50 - rank) * p_values[index]))
        assert list(results.values())[index].p_holm == pytest.approx(running)


@pytest.mark.parametrize(("correction", "failing"), [("holm", 1), ("none", 4)])
def test_the_exit_decision_follows_the_correction(correction: str, failing: int) -> None:
    baseline, runs = holm_family()
    summary, _ = compare(baseline, "s", runs, correction="holm" if correction == "holm" else "none")
    assert summary.correction == correction
    assert summary.failing_regressions == failing


def test_an_unchanged_family_raises_no_alarm_after_correction_but_may_without() -> None:
    """50 tests of the same agent: by chance some p < 0.05 alone; Holm's correction keeps them quiet."""
    tests: dict[str, BaselineTest] = {}
    runs: list[Compared] = []
    for number in range(50):
        tests[f"t{number}"] = entry(normal(1000 + number, 80, 5, 8))
        runs.append(Compared(id=f"t{number}", scores=normal(2000 + number, 80, 5, 8)))
    summary, _ = compare(Baseline(suite="s", tests=tests), "s", runs)
    assert summary.regressions_holm == summary.improvements_holm == 0
    assert summary.regressions + summary.improvements >= 1  # these seeds give chance alarms uncorrected
    summary.correction = "none"
    assert summary.failing_regressions == summary.regressions


def test_a_changed_test_is_compared_and_flagged() -> None:
    baseline = Baseline(
        suite="s",
        tests={"t": entry([80, 82, 84], fingerprint="old"), "u": entry([80, 82, 84], fingerprint="same")},
    )
    _, results = compare(
        baseline,
        "s",
        [
            Compared(id="t", scores=[81, 82, 83], fingerprint="new"),
            Compared(id="u", scores=[81, 82, 83], fingerprint="same"),
        ],
    )
    assert results["t"].changed and results["t"].verdict == "no_change"
    assert "the test changed since the baseline was saved" in (results["t"].reason or "")
    assert not results["u"].changed and results["u"].reason is None


def test_an_unknown_fingerprint_is_not_a_change() -> None:
    baseline = Baseline(suite="s", tests={"t": entry([80, 82, 84])})
    _, results = compare(baseline, "s", [Compared(id="t", scores=[81, 82, 83], fingerprint="new")])
    assert not results["t"].changed


# --- the baseline of a run's results -------------------------------------------------------------


def run_result(test_id: str, number: int, score: float, outcome: str = "passed") -> RunResult:
    return RunResult(
        test_id=test_id,
        run_number=number,
        task_id=f"{test_id}-{number}",
        outcome=outcome,  # type: ignore[arg-type]
        status="completed",
        score=score,
        duration_seconds=0.5,
        started_at=START + timedelta(seconds=number),
    )


def header(**changes: object) -> RunHeader:
    values: dict[str, object] = {
        "run_id": "20260101-000000-abcdef",
        "suite": "s",
        "agent": "agent",
        "agent_type": "cli",
        "started_at": START,
        "finished_at": START + timedelta(minutes=1),
        "suite_fingerprint": "sfp",
        "tests": [
            PlannedTest(id="a", name="a", runs=3, fingerprint="fa"),
            PlannedTest(id="b", name="b", runs=3, fingerprint="fb"),
            PlannedTest(id="c", name="c", runs=3, skip="not today"),
        ],
    }
    values.update(changes)
    return RunHeader(**values)  # type: ignore[arg-type]


RUNS = [
    run_result("a", 1, 80.0),
    run_result("a", 3, 90.0),
    run_result("a", 2, 85.0),
    run_result("b", 1, 40.0, "failed"),
    run_result("b", 2, 60.0),
    run_result("b", 3, 50.0, "failed"),
]


def test_baseline_of_a_run_keeps_each_test_that_ran_with_its_runs() -> None:
    results = build_suite_results(header(), RUNS)
    baseline = baseline_of(results)
    assert baseline.suite == "s" and baseline.agent == "agent" and baseline.run_id == "20260101-000000-abcdef"
    assert baseline.suite_fingerprint == "sfp" and baseline.created_at == START + timedelta(minutes=1)
    assert list(baseline.tests) == ["a", "b"]  # c was skipped: nothing to keep
    a, b = baseline.tests["a"], baseline.tests["b"]
    assert [r.score for r in a.runs] == [80.0, 85.0, 90.0]  # by run number
    assert a.mean_score == pytest.approx(85.0) and a.std == pytest.approx(5.0) and a.n_runs == 3
    assert a.ci_95 is not None and a.ci_95 == pytest.approx(
        scipy_stats.t.interval(0.95, 2, loc=85.0, scale=5.0 / math.sqrt(3))
    )
    assert a.fingerprint == "fa"
    assert [r.passed for r in b.runs] == [False, True, False]
    assert a.runs[0].metrics["wall_time_seconds"] == 0.5


def test_a_run_compared_with_its_own_baseline_has_no_change(tmp_path: Path) -> None:
    results = build_suite_results(header(), RUNS)
    path = tmp_path / "baseline.json"
    path.write_bytes(encode_baseline(baseline_of(results)))
    again = build_suite_results(header(), RUNS, baseline=read_baseline(path))
    assert again.baseline is not None and again.baseline.compared == 2 and again.baseline.not_in_run == []
    for test in again.tests[:2]:
        assert (
            test.baseline is not None
            and test.baseline.verdict == "no_change"
            and test.baseline.p_value == 1.0
        )
    assert again.tests[2].baseline is None  # skipped: not compared at all


def test_the_header_baseline_ref_sets_the_correction_and_the_exit_decision() -> None:
    reference = Baseline(suite="s", tests={"a": entry([110.0, 111.0, 112.0]), "b": entry([50.0, 50.5, 49.5])})
    ref = BaselineRef(file="b.json", correction="none", fail_on_regression=False)
    results = build_suite_results(header(baseline=ref), RUNS, baseline=reference)
    comparison = results.baseline
    assert comparison is not None
    assert (comparison.file, comparison.correction, comparison.fail_on_regression) == (
        "b.json",
        "none",
        False,
    )
    assert results.tests[0].baseline is not None and results.tests[0].baseline.verdict == "regression"
    assert comparison.failing_regressions == comparison.regressions == 1
    default = build_suite_results(header(), RUNS, baseline=reference).baseline
    assert default is not None and default.correction == "holm" and default.fail_on_regression
