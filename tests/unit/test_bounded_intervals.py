"""The kernel describes each bounded quantity with its bounds, so every report shows one
interval within them: a test's score 0-100, its components 0-1, its metrics 0 and up, the
suite's score 0-100 (docs/statistics.md, "Bounded quantities")."""

from __future__ import annotations

from datetime import datetime, timezone

from atp.core.results import PlannedTest, RunResult, make_test_result, suite_statistics
from atp.core.stats import describe

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"


def run(test_id: str, number: int, score: float, duration: float = 0.5) -> RunResult:
    return RunResult(
        test_id=test_id,
        run_number=number,
        task_id=TID,
        outcome="passed" if score >= 50 else "failed",
        status="completed",
        score=score,
        score_breakdown={"completeness": score / 100},
        duration_seconds=duration,
        started_at=NOW,
    )


def test_a_tests_intervals_stay_within_their_bounds() -> None:
    runs = [run("t", 1, 100.0, 0.1), run("t", 2, 100.0, 0.1), run("t", 3, 70.0, 9.0)]
    result = make_test_result(PlannedTest(id="t", name="t", runs=3), runs, False)
    stats = result.statistics
    assert stats is not None and stats.score.ci_95 is not None
    unbounded = describe([100.0, 100.0, 70.0]).ci_95
    assert unbounded is not None and unbounded[1] > 100  # what Student's t alone gives
    assert stats.score.ci_95 == (unbounded[0], 100.0)
    component = stats.components["completeness"].ci_95
    assert component is not None and component[1] == 1.0
    wall = stats.metrics["wall_time_seconds"].ci_95
    assert wall is not None and wall[0] == 0.0  # a time is never negative
    assert stats.score.half_width == (100.0 - unbounded[0]) / 2  # half the width shown


def test_the_suites_interval_stays_within_0_to_100() -> None:
    tests = [
        make_test_result(PlannedTest(id=i, name=i), [run(i, 1, score)], False)
        for i, score in (("a", 100.0), ("b", 100.0), ("c", 60.0))
    ]
    ci = suite_statistics(tests).score
    assert ci is not None and ci.ci_95 is not None
    assert ci.ci_95[1] == 100.0 and ci.ci_95[0] < ci.mean
