"""The console reporter shows the kernel's statistics: a test's spread (σ) and stability, its pass
rule, why an adaptive test stopped, with --verbose the interval, components, metrics and pass@k,
the comparison with a baseline per test and over the run, and the suite's pass rates; the JSON
reporter writes all of it, valid against the results schema."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from atp.core.adaptive import Adaptive
from atp.core.baseline import Baseline, BaselineRun, BaselineTest
from atp.core.protocol import Metrics
from atp.core.reporter import ReportOptions
from atp.core.results import (
    BaselineRef,
    PassRule,
    PlannedTest,
    RunHeader,
    RunResult,
    RunStore,
    SuiteResults,
    build_suite_results,
    results_schema,
)
from atp.reporters.console import ConsoleReporter, p_text
from atp.reporters.json_results import JsonReporter

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"
ESC = re.compile(r"\x1b\[[0-9;]*m")


def run(test_id: str, number: int, score: float, passed: bool = True, **fields: Any) -> RunResult:
    return RunResult(
        test_id=test_id,
        run_number=number,
        task_id=TID,
        outcome="passed" if passed else "failed",
        status="completed",
        score=score,
        duration_seconds=0.5,
        started_at=NOW,
        **fields,
    )


def runs_of(
    test_id: str, scores: list[float], failed: tuple[int, ...] = (), **fields: Any
) -> list[RunResult]:
    return [run(test_id, n, s, n not in failed, **fields) for n, s in enumerate(scores, 1)]


def planned(test_id: str, runs: int = 5, **fields: Any) -> PlannedTest:
    return PlannedTest(id=test_id, name=test_id, runs=runs, **fields)


def results_of(
    tests: list[PlannedTest],
    runs: list[RunResult],
    baseline: Baseline | None = None,
    correction: str = "holm",
    finished: bool = True,
) -> SuiteResults:
    header = RunHeader(
        run_id="r",
        suite="s",
        agent="new",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=3) if finished else None,
        tests=tests,
        baseline=BaselineRef(file="base.json", correction=correction) if baseline is not None else None,  # type: ignore[arg-type]
    )
    return build_suite_results(header, runs, baseline=baseline)


def render(results: SuiteResults, tmp_path: Path, verbose: bool = False, **options: Any) -> str:
    stream = options.pop("stream", None) or io.StringIO()
    options.setdefault("color", False)
    ConsoleReporter(ReportOptions(stream=stream, verbose=verbose, **options)).report(
        results, RunStore(tmp_path)
    )
    if not isinstance(stream, io.StringIO):
        return ""
    text = stream.getvalue()
    assert "nan" not in text.lower().replace("nano", "")  # no figure is ever NaN
    return text


def line_of(out: str, test_id: str) -> str:
    (found,) = [
        line
        for line in out.splitlines()
        if line.startswith(("  ✓ ", "  ✗ ", "  ! ")) and line.split()[1] == test_id and "/100" in line
    ]
    return found


def body_of(out: str) -> list[str]:
    return out[out.index("Tests:") :].splitlines()


def baseline_of(**tests: list[float]) -> Baseline:
    return Baseline(
        created_at=NOW,
        suite="s",
        agent="old",
        tests={
            i: BaselineTest(mean_score=sum(s) / len(s), n_runs=len(s), runs=[BaselineRun(score=x) for x in s])
            for i, s in tests.items()
        },
    )


# --- the line of a test ------------------------------------------------------------------------


def test_several_runs_show_the_spread_and_no_count_when_every_run_passed(tmp_path: Path) -> None:
    results = results_of([planned("t")], runs_of("t", [80, 90, 70, 85, 75]))
    out = render(results, tmp_path)
    assert body_of(out)[1] == "  ✓ t   80.0/100  (σ=7.9)   time 0.50s/run, 2.50s total  moderate"
    assert "runs passed" not in out  # every run passed under the rule 'all': the ✓ says it


def test_the_spread_is_the_kernels_sample_std(tmp_path: Path) -> None:
    results = results_of([planned("t", 2)], runs_of("t", [88, 82]))
    assert results.tests[0].statistics is not None
    results.tests[0].statistics.score.std = 12.34  # whatever the kernel says is shown, not recomputed
    assert "(σ=12.3)" in render(results, tmp_path)


def test_the_stability_level_is_shown_when_not_stable(tmp_path: Path) -> None:
    tests = [planned(i) for i in ("steady", "moderate", "unstable", "critical")]
    runs = [
        *runs_of("steady", [80, 81, 80, 79, 80]),
        *runs_of("moderate", [80, 90, 70, 85, 75]),
        *runs_of("unstable", [90, 60, 95, 70, 100]),
        *runs_of("critical", [50, 80, 30, 70, 90]),
    ]
    results = results_of(tests, runs)
    out = render(results, tmp_path)
    assert line_of(out, "steady").endswith("time 0.50s/run, 2.50s total")  # stable: nothing said
    assert line_of(out, "moderate").endswith("  moderate")
    assert line_of(out, "unstable").endswith("  unstable")
    assert line_of(out, "critical").endswith("  very unstable")
    coloured = render(results, tmp_path, color=True)
    assert "\033[33munstable\033[0m" in coloured and "\033[31mvery unstable\033[0m" in coloured
    # the summary lists the unstable tests with their level
    assert "Unstable: unstable (unstable), critical (very unstable)" in out


def test_one_run_shows_no_spread(tmp_path: Path) -> None:
    results = results_of(
        [planned("one", 1), planned("cut", 3)], [run("one", 1, 70.0), run("cut", 1, 90.0)], finished=False
    )
    out = render(results, tmp_path)
    assert line_of(out, "one") == "  ✓ one   70.0/100  time 0.50s"
    assert line_of(out, "cut") == "  ✓ cut   90.0/100            time 0.50s  1/1 run passed, 2 not run"
    assert "σ" not in out and "sd=" not in out
    verbose = render(results, tmp_path, verbose=True)
    assert "95% CI" not in verbose and "pass@" not in verbose.split("Summary:")[0]  # a spread needs two runs


def test_the_pass_rule_is_said_with_the_count(tmp_path: Path) -> None:
    tests = [
        planned("rate", pass_rule=PassRule(rule="pass_rate", threshold=0.8)),
        planned("mean", pass_rule=PassRule(rule="min_score", threshold=60)),
        planned("all"),
    ]
    runs = [
        *runs_of("rate", [80, 80, 80, 80, 20], failed=(5,)),
        *runs_of("mean", [70, 70, 70, 70, 60]),
        *runs_of("all", [80, 80, 80, 80, 20], failed=(5,)),
    ]
    out = render(results_of(tests, runs), tmp_path)
    assert line_of(out, "rate").startswith(
        "  ✓ rate   68.0/100  (σ=26.8)  time 0.50s/run, 2.50s total  4/5 runs passed (rule: ≥80%)"
    )
    assert line_of(out, "mean").startswith(
        "  ✓ mean   68.0/100  (σ=4.5)   time 0.50s/run, 2.50s total  5/5 runs passed (rule: mean ≥60)"
    )
    assert line_of(out, "all").startswith(
        "  ✗ all    68.0/100  (σ=26.8)  time 0.50s/run, 2.50s total  4/5 runs passed, very unstable"
    )
    verbose = render(results_of(tests, runs), tmp_path, verbose=True)
    assert "    pass rule: at least 80% of the runs pass\n" in verbose
    assert "    pass rule: the mean score is at least 60\n" in verbose


def test_an_adaptive_test_says_how_many_runs_it_took_and_why_not_that_some_were_not_run(
    tmp_path: Path,
) -> None:
    plan = Adaptive(min_runs=3, max_runs=20, ci_width=5)
    tests = [planned("auto", 20, adaptive=plan), planned("late", 20, adaptive=plan)]
    runs = [*runs_of("auto", [80, 81, 80]), *runs_of("late", [80, 81, 80, 82, 79])]  # 'late': 2 in flight
    results = results_of(tests, runs)
    assert results.tests[0].stop is not None and results.tests[0].stop.runs == 3
    out = render(results, tmp_path)
    assert line_of(out, "auto").endswith(
        "time 0.50s/run, 1.50s total  took 3 runs (95% interval ±1.4 ≤ ±5 points)"
    )
    assert line_of(out, "late").endswith(
        "time 0.50s/run, 2.50s total  took 5 runs (decided after 3: 95% interval ±1.4 ≤ ±5 points)"
    )
    assert "not run" not in out and "not finished" not in out
    assert "Runs per test: auto (3-20)\n" in out
    assert "Summary: 2 passed, 0 failed, 0 skipped (100.0%)\n" in out


def test_an_adaptive_test_that_did_not_reach_its_stop_is_not_finished(tmp_path: Path) -> None:
    tests = [planned("auto", 20, adaptive=Adaptive(min_runs=3, max_runs=20))]
    results = results_of(tests, runs_of("auto", [80, 81]), finished=False)
    assert results.tests[0].stop is None
    out = render(results, tmp_path)
    assert line_of(out, "auto").endswith("2/2 runs passed, not finished: stopped before its rule decided")
    assert "18 not run" not in out


def test_an_adaptive_test_in_ascii_spells_its_symbols(tmp_path: Path) -> None:
    tests = [planned("auto", 20, adaptive=Adaptive(min_runs=3, max_runs=20, ci_width=5))]
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    render(results_of(tests, runs_of("auto", [80, 81, 80])), tmp_path, verbose=True, stream=stream)
    stream.flush()
    text = raw.getvalue().decode("ascii")  # nothing it could not encode
    assert "(sd=0.6)" in text and "took 3 runs (95% interval +/-1.4 <= +/-5 points)" in text


# --- --verbose -----------------------------------------------------------------------------------


def test_verbose_shows_the_interval_components_metrics_and_pass_at_k(tmp_path: Path) -> None:
    metrics = Metrics(total_tokens=1200, total_steps=12, tool_calls=3, llm_calls=4, cost_usd=0.0125)
    breakdowns = [
        {"quality": 0.8, "completeness": 1.0, "efficiency": 0.7},
        {"quality": 0.9, "completeness": 1.0},
        {"quality": 0.7, "completeness": 0.5, "efficiency": 0.8},
        {"quality": 0.8, "completeness": 1.0},
        {"quality": 0.9, "completeness": 1.0, "efficiency": 0.9},
    ]
    runs = [
        run("t", n, s, n != 3, score_breakdown=b, metrics=metrics)
        for n, (s, b) in enumerate(zip([80, 90, 70, 85, 75], breakdowns, strict=True), 1)
    ]
    out = render(results_of([planned("t")], runs), tmp_path, verbose=True)
    body = body_of(out)
    assert (
        body[1] == "  ✗ t   80.0/100  (σ=7.9)   time 0.50s/run, 2.50s total  4/5 runs passed, moderate, flaky"
    )
    assert body[2:6] == [
        "    score: 95% CI [70.2, 89.8], median 80.0, min 70.0, max 90.0, CV 0.10 (moderate)",
        "    components (mean): quality 0.82, completeness 0.90, efficiency 0.80 (3 of 5 runs); "
        "not counted: cost (no token or cost limit, or usage unknown)",
        "    metrics (mean): 1,200 tokens, 12.0 steps, 3.0 tool calls, 4.0 LLM calls, wall time 0.50s, cost $0.0125",
        "    pass@1 0.80, pass@3 1.00, pass@5 1.00; pass^3 0.40, pass^5 0.00",
    ]
    assert (
        body[6] == "    run 1: score 80.0: quality 0.80, completeness 1.00, efficiency 0.70"
    )  # then each run
    assert "pass rule" not in out  # the default rule goes without saying


def test_verbose_says_when_no_component_counted_and_a_cv_is_undefined(tmp_path: Path) -> None:
    out = render(results_of([planned("zero", 2)], runs_of("zero", [0, 0])), tmp_path, verbose=True)
    assert (
        "    components (mean): none counted; not counted: quality (no quality checks), completeness (no checks), "
        "efficiency (no max_steps, or steps unknown), cost (no token or cost limit, or usage unknown)"
    ) in out
    # a mean of 0 with a spread: the CV and the stability level are undefined, shown as —
    spread = results_of([planned("z", 2)], [run("z", 1, 0.0), run("z", 2, 0.0)])
    assert spread.tests[0].statistics is not None
    score = spread.tests[0].statistics.score
    score.std, score.cv, score.stability = 1.0, None, None  # as the kernel gives a mean 0 with a spread
    out = render(spread, tmp_path, verbose=True)
    assert "CV —\n" in out and line_of(out, "z").endswith("time 0.50s/run, 1.00s total")


# --- the baseline --------------------------------------------------------------------------------


def test_each_test_says_its_verdict_and_the_run_its_counts(tmp_path: Path) -> None:
    baseline = baseline_of(
        worse=[80, 82, 78, 81, 79], better=[60, 62, 58, 61, 59], once=[70, 71], gone=[50, 51]
    )
    tests = [planned("worse"), planned("better"), planned("new"), planned("once", 1)]
    runs = [
        *runs_of("worse", [70, 72, 68, 71, 69]),
        *runs_of("better", [70, 72, 68, 71, 69]),
        *runs_of("new", [70, 72, 68, 71, 69]),
        run("once", 1, 70.0),
    ]
    results = results_of(tests, runs, baseline)
    out = render(results, tmp_path)
    body = body_of(out)
    p = p_text(results.tests[0].baseline.p_value if results.tests[0].baseline else None)
    holm = p_text(results.tests[0].baseline.p_holm if results.tests[0].baseline else None)
    assert p == "8.5e-06" and holm == "1.7e-05"
    assert body[2] == f"    baseline: regression -10.0 (-12.5%) p={p}, Holm p={holm}"
    assert body[4] == f"    baseline: improvement +10.0 (+16.7%) p={p}, Holm p={holm}"
    assert body[6] == "    baseline: not compared: not in the baseline"
    assert body[8] == (
        "    baseline: not compared: a comparison needs at least 2 runs on each side (this run has 1); "
        "run with --runs=2 or more"
    )
    summary = out[out.index("Summary:") :].splitlines()
    assert summary[2] == (
        "Baseline: base.json (old, 2026-01-01 00:00 UTC): 1 regression, 1 improvement, 0 unchanged, "
        "2 not compared; regressions fail the run"
    )
    assert summary[3] == "  in the baseline but not in this run: gone"
    assert summary[-1].startswith("Total time: ")
    coloured = render(results, tmp_path, color=True)
    assert f"\033[31m    baseline: regression -10.0 (-12.5%) p={p}, Holm p={holm}\033[0m" in coloured
    assert "\033[32m    baseline: improvement +10.0" in coloured
    assert "\033[2m    baseline: not compared: not in the baseline\033[0m" in coloured
    assert "\033[31m1 regression\033[0m, \033[32m1 improvement\033[0m, 0 unchanged" in coloured


def test_verbose_adds_the_interval_of_the_difference(tmp_path: Path) -> None:
    results = results_of(
        [planned("worse")], runs_of("worse", [70, 72, 68, 71, 69]), baseline_of(worse=[80, 82, 78, 81, 79])
    )
    out = render(results, tmp_path, verbose=True)
    assert (
        "      95% CI of the difference [-12.3, -7.7]; baseline 80.0 (5 runs), this run 70.0 (5 runs); "
        "Welch's t-test on the runs' scores\n"
    ) in out


def test_a_verdict_that_holms_correction_changes_says_both(tmp_path: Path) -> None:
    baseline = baseline_of(edge=[80, 84, 76, 82, 78], same=[80, 85, 75, 82, 79], also=[81, 85, 75, 82, 78])
    tests = [planned("edge"), planned("same"), planned("also")]
    runs = [
        *runs_of("edge", [75, 79, 71, 77, 73]),
        *runs_of("same", [80, 84, 76, 82, 78]),
        *runs_of("also", [80, 84, 76, 82, 78]),
    ]
    results = results_of(tests, runs, baseline)
    out = render(results, tmp_path)
    assert line_of(out, "edge")  # the test's line, then its verdict
    assert (
        "    baseline: no significant change -5.0 (-6.2%) after Holm's correction; regression before it "
        "(p=0.037, Holm p=0.11)\n"
    ) in out
    assert "    baseline: no significant change -0.2 (-0.2%) p=0.93, Holm p=1\n" in out
    assert (
        "Baseline: base.json (old, 2026-01-01 00:00 UTC): 0 regressions, 0 improvements, 3 unchanged, 0 not compared "
        "(with Holm's correction; without it 1 regression, 0 improvements)\n"
    ) in out
    assert "\033[33m    baseline: no significant change -5.0" in render(results, tmp_path, color=True)
    # --correction=none: each test's own verdict counts, and fails the run
    raw = render(results_of(tests, runs, baseline, correction="none"), tmp_path)
    assert (
        "    baseline: regression -5.0 (-6.2%) (p=0.037, Holm p=0.11); not significant after Holm's correction\n"
        in raw
    )
    assert ": 1 regression, 0 improvements, 2 unchanged, 0 not compared; regressions fail the run\n" in raw


def test_a_baseline_of_another_suite_is_a_problem_and_compares_nothing(tmp_path: Path) -> None:
    other = baseline_of(t=[80, 81])
    other.suite = "elsewhere\x1b[2J"
    results = results_of([planned("t", 2)], runs_of("t", [80, 81]), other)
    out = render(results, tmp_path)
    assert "    baseline: not compared: the baseline is of another suite ('elsewhere\\x1b[2J')\n" in out
    assert "  Problem with the baseline: the baseline is of another suite" in out
    assert ": 0 regressions, 0 improvements, 0 unchanged, 1 not compared\n" in out
    assert "\x1b[2J" not in out


def test_an_adaptive_test_compared_sequentially_says_so(tmp_path: Path) -> None:
    plan = Adaptive(min_runs=3, max_runs=20)
    results = results_of(
        [planned("auto", 20, adaptive=plan)],
        runs_of("auto", [60, 60.5, 59.5]),
        baseline_of(auto=[80, 82, 78, 81, 79, 80, 81, 79, 80, 80]),
    )
    out = render(results, tmp_path)
    assert results.tests[0].stop is not None and results.tests[0].stop.reason == "regression"
    assert "took 3 runs (regression of -20.0 points decided (p = " in line_of(out, "auto")
    assert "    baseline: regression -20.0 (-25.0%) by the sequential rule (Welch p=" in out


# --- the suite, colour and safety ------------------------------------------------------------------


def test_the_summary_gives_the_suites_pass_rates_when_tests_ran_several_runs(tmp_path: Path) -> None:
    tests = [planned("a"), planned("b", 3)]
    runs = [*runs_of("a", [80, 80, 80, 80, 20], failed=(5,)), *runs_of("b", [90, 91, 92])]
    out = render(results_of(tests, runs), tmp_path)
    # pass^3: the largest k both tests' runs allow; a: C(4,3)/C(5,3) = 0.4, b: 1 -> 0.70
    assert "\nPass rates: pass@1 0.90, pass^3 0.70 (mean over 2 tests)\n" in out
    single = render(results_of([planned("one", 1)], [run("one", 1, 80.0)]), tmp_path)
    assert "Pass rates" not in single and "Unstable" not in single


def test_no_colour_off_a_terminal_or_with_no_color(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = results_of(
        [planned("worse"), planned("wild")],
        [*runs_of("worse", [70, 72, 68, 71, 69]), *runs_of("wild", [50, 80, 30, 70, 90])],
        baseline_of(worse=[80, 82, 78, 81, 79]),
    )
    monkeypatch.delenv("NO_COLOR", raising=False)
    plain = io.StringIO()
    ConsoleReporter(ReportOptions(stream=plain, verbose=True)).report(results, RunStore(tmp_path))
    assert "\033" not in plain.getvalue() and "baseline: regression" in plain.getvalue()

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("NO_COLOR", "1")
    tty = Tty()
    ConsoleReporter(ReportOptions(stream=tty, verbose=True)).report(results, RunStore(tmp_path))
    assert "\033" not in tty.getvalue() and tty.getvalue() == plain.getvalue()
    monkeypatch.delenv("NO_COLOR")
    coloured = Tty()
    ConsoleReporter(ReportOptions(stream=coloured, verbose=True)).report(results, RunStore(tmp_path))
    assert "\033[" in coloured.getvalue() and ESC.sub("", coloured.getvalue()) == plain.getvalue()


def test_ids_from_the_suite_and_the_baseline_are_escaped(tmp_path: Path) -> None:
    evil = "x\x1b]0;pwned\x07"
    baseline = baseline_of(**{evil: [50.0, 80, 30, 70, 90], "gone\x1b[2J": [1.0, 2]})
    results = results_of([planned(evil)], runs_of(evil, [50, 80, 30, 70, 90]), baseline)
    out = render(results, tmp_path, verbose=True)
    assert "\x1b" not in out and "\x07" not in out
    assert "Unstable: x\\e]0;pwned\\x07 (very unstable)" in out
    assert "  in the baseline but not in this run: gone\\e[2J" in out


def test_the_live_line_and_status_of_an_adaptive_run(tmp_path: Path) -> None:
    plan = Adaptive(min_runs=3, max_runs=20, ci_width=5)
    header = RunHeader(
        run_id="r",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        tests=[planned("auto", 20, adaptive=plan)],
    )
    stream = io.StringIO()
    reporter = ConsoleReporter(ReportOptions(stream=stream))
    reporter.atp_suite_started(header, tmp_path)
    assert "Runs per test: auto (3-20)\n" in stream.getvalue()
    assert "Running 1 test (up to 20 runs):\n" in stream.getvalue()
    from atp.core.results import make_test_result

    reporter.atp_test_finished(make_test_result(header.tests[0], runs_of("auto", [80, 81, 80]), False))
    assert stream.getvalue().endswith(
        "  ✓ auto   80.3/100  (σ=0.6)   time 0.50s/run, 1.50s total  took 3 runs (95% interval ±1.4 ≤ ±5 points)\n"
    )
    from atp.reporters.console import StatusLine

    status = StatusLine(io.StringIO(), lambda text: text, 20, up_to=True)
    assert status.text().startswith("running: 0 of at most 20 runs done, 0 in progress, 0 failed, ")


# --- JSON ------------------------------------------------------------------------------------------


def test_json_holds_statistics_stop_and_the_comparison_and_is_valid(tmp_path: Path) -> None:
    plan = Adaptive(min_runs=3, max_runs=20, ci_width=5)
    tests = [
        planned("auto", 20, adaptive=plan),
        planned("worse"),
        planned("rate", pass_rule=PassRule(rule="pass_rate", threshold=0.8)),
    ]
    metrics = Metrics(total_tokens=1200, total_steps=12, cost_usd=0.01)
    runs = [
        *runs_of("auto", [80, 81, 80]),
        *runs_of("worse", [70, 72, 68, 71, 69], metrics=metrics, score_breakdown={"quality": 0.7}),
        *runs_of("rate", [80, 80, 80, 80, 20], failed=(5,)),
    ]
    results = results_of(tests, runs, baseline_of(worse=[80, 82, 78, 81, 79], gone=[1, 2]))
    target = tmp_path / "results.json"
    JsonReporter(ReportOptions(output_file=target)).report(results, RunStore(tmp_path))
    data = json.loads(target.read_text())
    jsonschema.Draft202012Validator(results_schema()).validate(data)
    auto, worse, rate = data["tests"]
    assert auto["stop"] == {
        "runs": 3,
        "reason": "ci_width",
        "message": "95% interval ±1.4 ≤ ±5 points after 3 runs",
    }
    assert auto["adaptive"]["max_runs"] == 20 and auto["baseline"]["verdict"] == "not_compared"
    stats = worse["statistics"]
    assert stats["runs"] == 5 and stats["score"]["mean"] == 70.0 and stats["score"]["stability"] == "stable"
    assert stats["components"]["quality"]["mean"] == pytest.approx(0.7)
    assert stats["metrics"]["total_tokens"]["mean"] == 1200 and stats["metrics"]["cost_usd"]["mean"] == 0.01
    assert stats["pass_at_k"] == {"1": 1.0, "3": 1.0, "5": 1.0} and stats["pass_hat_k"]["5"] == 1.0
    assert worse["baseline"]["verdict"] == "regression" and worse["baseline"]["verdict_holm"] == "regression"
    assert worse["baseline"]["ci_95"] == pytest.approx([-12.306, -7.694], abs=1e-3)
    assert (
        rate["pass_rule"] == {"rule": "pass_rate", "threshold": 0.8}
        and rate["statistics"]["pass_rate"] == 0.8
    )
    assert data["baseline"]["file"] == "base.json" and data["baseline"]["not_in_run"] == ["gone"]
    assert data["baseline"]["regressions_holm"] == 1 and data["baseline"]["compared"] == 1
    assert data["statistics"]["pass_at_k"]["1"] == pytest.approx((1 + 1 + 0.8) / 3)
    assert set(data["statistics"]) >= {"score", "pass_at_k", "pass_hat_k"}
