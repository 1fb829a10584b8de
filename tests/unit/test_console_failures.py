"""The console reporter shows failures with their evidence: the agent's error first, follow-on
checks folded, failures common to several runs once, and with --verbose the response itself."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from atp.core.protocol import FileArtifact, ReferenceArtifact, StructuredArtifact
from atp.core.reporter import ReportOptions
from atp.core.results import (
    Check,
    PlannedTest,
    RunHeader,
    RunResult,
    RunStore,
    SuiteResults,
    build_suite_results,
)
from atp.reporters.console import ConsoleReporter, plural, preview, which_runs

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TID = "550e8400-e29b-41d4-a716-446655440000"
NO_REPORT = "expected artifact 'report.md'; the agent produced no artifacts"
CRASH = "agent exited with code 3 without writing a response on stdout"


def failed(name: str, message: str = NO_REPORT) -> Check:
    return Check(name=name, passed=False, score=0.0, message=message)


def ok(name: str) -> Check:
    return Check(name=name, passed=True, score=1.0, message=f"{name} is fine")


def run(number: int, outcome: str = "failed", test_id: str = "t", **fields: Any) -> RunResult:
    values: dict[str, Any] = {"status": "completed", "score": 0.0 if outcome != "passed" else 100.0}
    values.update(fields)
    return RunResult(
        test_id=test_id,
        run_number=number,
        task_id=TID,
        outcome=outcome,  # type: ignore[arg-type]
        duration_seconds=0.5,
        started_at=NOW,
        **values,
    )


def crashed(number: int, test_id: str = "t") -> RunResult:
    return run(
        number,
        test_id=test_id,
        status="failed",
        error=CRASH,
        log_tail=["Traceback ...", "RuntimeError: broke"],
        checks=[
            failed("artifact_exists:report.md"),
            failed("contains:report.md"),
            failed("sections:report.md"),
            failed("behavior:must_use_tools", "expected calls to web_search; not called: web_search"),
        ],
    )


def results_of(
    tmp_path: Path,
    runs: list[RunResult],
    planned: dict[str, int] | None = None,
    problems: list[str] | None = None,
    deselected: int = 0,
) -> tuple[SuiteResults, RunStore]:
    planned = planned or {"t": len(runs)}
    header = RunHeader(
        run_id="r",
        suite="s",
        agent="a",
        agent_type="cli",
        started_at=NOW,
        finished_at=NOW + timedelta(seconds=1),
        deselected=deselected,
        tests=[PlannedTest(id=i, name=i, runs=n) for i, n in planned.items()],
    )
    store = RunStore.create(tmp_path, header)
    return build_suite_results(header, runs, problems), store


def render(results: SuiteResults, store: RunStore, verbose: bool = False) -> str:
    stream = io.StringIO()
    ConsoleReporter(ReportOptions(stream=stream, verbose=verbose, color=False)).report(results, store)
    return stream.getvalue()


def test_checks_failing_only_because_the_agent_failed_are_folded_under_its_error(tmp_path: Path) -> None:
    out = render(*results_of(tmp_path, [crashed(1)]))
    body = out[out.index("Tests:") :].splitlines()
    assert body[1:5] == [
        "  ✗ t    0.0/100  time 0.50s",
        f"    - failed: {CRASH}",
        "    - 3 checks not met: the agent failed and produced no artifacts "
        "(artifact_exists:report.md, contains:report.md, sections:report.md)",
        "    - behavior:must_use_tools: expected calls to web_search; not called: web_search",
    ]
    assert body[5] == ""
    # --verbose shows every check as it is
    verbose = render(*results_of(tmp_path / "v", [crashed(1)]), verbose=True)
    assert "not met" not in verbose
    assert (
        f"    ✗ contains:report.md: {NO_REPORT}" in verbose
        and f"    ✗ sections:report.md: {NO_REPORT}" in verbose
    )


def test_folding_says_how_the_agent_failed(tmp_path: Path) -> None:
    timed_out = run(
        1,
        status="timeout",
        error="timed out after 2 s; the agent was stopped",
        checks=[failed("a"), failed("b", "no artifact 'x.md'")],
    )
    out = render(*results_of(tmp_path, [timed_out]))
    assert (
        "    - timeout: timed out after 2 s; the agent was stopped\n"
        "    - 2 checks not met: the agent timed out and produced no artifacts (a, b)\n" in out
    )


def test_a_check_saying_in_its_details_that_nothing_was_produced_is_folded_too(tmp_path: Path) -> None:
    detailed = Check(
        name="word_count:result",
        passed=False,
        score=0.0,
        message="nothing to count",
        details={"produced": []},
    )
    crash = run(1, status="failed", error=CRASH, checks=[failed("artifact_exists:report.md"), detailed])
    out = render(*results_of(tmp_path, [crash]))
    assert (
        "    - 2 checks not met: the agent failed and produced no artifacts "
        "(artifact_exists:report.md, word_count:result)\n" in out
    )


def test_checks_are_not_folded_when_the_agent_answered_or_one_alone_failed(tmp_path: Path) -> None:
    answered = run(1, checks=[failed("artifact_exists:report.md"), failed("contains:report.md")])
    one = run(1, test_id="u", status="failed", error=CRASH, checks=[failed("artifact_exists:report.md")])
    with_artifacts = run(
        1,
        test_id="w",
        status="failed",
        error="gave up",
        artifacts=[FileArtifact(path="notes.md", content="x")],
        checks=[
            failed("artifact_exists:report.md", "expected artifact 'report.md'; the agent produced notes.md"),
            failed("contains:report.md", "expected ..."),
        ],
    )
    out = render(*results_of(tmp_path, [answered, one, with_artifacts], {"t": 1, "u": 1, "w": 1}))
    assert "not met" not in out
    assert f"    - artifact_exists:report.md: {NO_REPORT}\n    - contains:report.md: {NO_REPORT}\n" in out
    assert f"    - failed: {CRASH}\n    - artifact_exists:report.md: {NO_REPORT}\n" in out
    assert "    - failed: gave up\n    - artifact_exists:report.md: expected artifact" in out


def test_a_failure_seen_in_several_runs_is_shown_once_with_its_runs(tmp_path: Path) -> None:
    missing = failed("contains:report.md", "expected text 'Slack'; not found in 120 characters")
    other = failed("contains:report.md", "expected text 'Slack'; not found in 99 characters")
    runs = [
        run(1, checks=[missing]),
        run(2, "passed", checks=[ok("contains:report.md")]),
        run(3, checks=[missing]),
        run(4, checks=[other]),
    ]
    out = render(*results_of(tmp_path, runs))
    body = out[out.index("Tests:") :].splitlines()
    assert (
        body[1]
        == "  ✗ t   25.0/100  (σ=50.0)  time 0.50s/run, 2.00s total  1/4 runs passed, very unstable, flaky"
    )
    assert body[2:4] == [
        "    - runs 1,3: contains:report.md: expected text 'Slack'; not found in 120 characters",
        "    - run 4: contains:report.md: expected text 'Slack'; not found in 99 characters",
    ]
    crashes = render(*results_of(tmp_path / "c", [crashed(n) for n in (1, 2, 3)]))
    assert f"    - runs 1-3: failed: {CRASH}\n    - runs 1-3: 3 checks not met: the agent failed" in crashes
    assert crashes.count(CRASH) == 1 and "0/3 runs passed" in crashes


def test_a_test_with_runs_missing_says_so(tmp_path: Path) -> None:
    out = render(*results_of(tmp_path, [run(1, "passed")], {"t": 3}))
    assert "  ✓ t  100.0/100            time 0.50s  1/1 run passed, 2 not run\n" in out  # one run: no spread


def test_verbose_shows_the_response_of_each_run_that_did_not_pass(tmp_path: Path) -> None:
    long_text = "# Report\n" + "\n".join(f"line {i} \x1b[2J" for i in range(1, 40))
    shown = "# Report\n" + "\n".join(f"line {i} \x1b[2J" for i in range(1, 5))  # five lines
    artifacts = [
        FileArtifact(path="report.md", content_type="text/markdown", content=long_text),
        FileArtifact(path="big.bin", size_bytes=2048),
        StructuredArtifact(name="result", data={"answer": "x" * 500}),
        ReferenceArtifact(path="s3://bucket/out.csv", size_bytes=1),
    ]
    failing = run(
        1,
        status="failed",
        error="gave up halfway",
        artifacts=artifacts,
        checks=[failed("contains:report.md", "expected text 'Slack'; not found")],
        log_tail=["bye"],
    )
    passing = run(2, "passed", artifacts=artifacts, checks=[ok("contains:report.md")])
    out = render(*results_of(tmp_path, [failing, passing]), verbose=True)
    expected = [
        "    - run 1: failed: gave up halfway",
        "    ✗ run 1: contains:report.md: expected text 'Slack'; not found",
        "    run 1: response: status failed, 4 artifacts:",
        f"      report.md (file, text/markdown, {len(long_text)} chars)",
        "        | # Report",
        "        | line 1 \\e[2J",
        "        | line 2 \\e[2J",
        "        | line 3 \\e[2J",
        f"        | line 4 \\e[2J… ({len(long_text) - len(shown)} more characters)",
        "      big.bin (file, 2048 bytes, no content sent)",
        "      result (structured, 513 chars of JSON)",
        f'        | {{"answer":"{"x" * 289}… (213 more characters)',
        "      s3://bucket/out.csv (reference, 1 byte)",
        "    run 1: agent log (last 1 line):",
        "      | bye",
    ]
    lines = out.splitlines()
    start = lines.index(expected[0])
    assert lines[start : start + len(expected)] == expected
    assert "run 2: response" not in out  # a run that passed needs no evidence
    assert "\x1b" not in out


def test_verbose_lists_at_most_ten_artifacts(tmp_path: Path) -> None:
    many = [FileArtifact(path=f"f{i}.txt", content="") for i in range(13)]
    out = render(
        *results_of(tmp_path, [run(1, status="partial", error="ran out", artifacts=many)]), verbose=True
    )
    assert "    response: status partial, 13 artifacts:\n" in out
    assert "      f9.txt (file, 0 chars)" in out and "f10.txt" not in out
    assert "      … and 3 more artifacts" in out


def test_counts_are_worded_in_the_singular_and_plural(tmp_path: Path) -> None:
    errored = run(1, "error", test_id="e", status="failed", error="adapter raised")
    results, store = results_of(tmp_path, [errored], {"e": 1}, problems=["damaged line"], deselected=2)
    out = render(results, store)
    assert (
        "Summary: 0 passed, 0 failed, 0 skipped, 1 error (0.0%); 2 deselected, 1 problem with the run directory"
        in out
    )
    assert "tags" not in out.lower()  # deselected by --tags or --test alike
    errored2 = run(1, "error", test_id="f", status="failed", error="adapter raised")
    results, store = results_of(tmp_path / "2", [errored, errored2], {"e": 1, "f": 1}, problems=["a", "b"])
    out = render(results, store)
    assert "2 errors (0.0%); 2 problems with the run directory" in out
    assert (plural(1, "run"), plural(2, "run"), plural(0, "check")) == ("1 run", "2 runs", "0 checks")


def test_which_runs_and_preview() -> None:
    assert [which_runs(n) for n in ([2], [1, 3], [1, 2], [1, 2, 3], [1, 2, 3, 5, 7, 8, 9, 10])] == [
        "run 2",
        "runs 1,3",
        "runs 1,2",
        "runs 1-3",
        "runs 1-3,5,7-10",
    ]
    assert preview("one\ntwo\n") == ["one", "two"]
    assert preview("a\tb\r") == ["a\\tb\\r"]
    assert preview("x" * 301) == ["x" * 300 + "… (1 more characters)"]
    assert preview("") == [""]
