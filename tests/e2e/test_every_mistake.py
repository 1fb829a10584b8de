"""Every mistake at once, through the real `atp` command (issue 28): a suite's mistakes all
reported in one run, each with its file:line and a hint; a response missing three fields named
whole; a line printed after the response; `--resume` saying what it resumed; a schema failure
showing the value it rejected."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.conftest import write
from tests.e2e.test_atp_command import atp
from tests.facts import one_error, says

AGENT = """
import json, sys

request = json.loads(sys.stdin.readline())
mode = request["task"]["description"]
response = {
    "version": "1.0",
    "task_id": request["task_id"],
    "status": "completed",
    "artifacts": [{"type": "structured", "name": "result", "data": {"value": 42}}],
    "metrics": {"total_steps": 1},
}
if mode == "missing":
    for key in ("task_id", "status", "metrics"):
        del response[key]
print(json.dumps(response), flush=True)
if mode == "log_after":
    print("done, bye")
"""


def agent_suite(tmp_path: Path, tests: str) -> Path:
    agent = write(tmp_path / "agent.py", AGENT)
    return write(
        tmp_path / "suite.yaml",
        "test_suite: mistakes\nagents:\n"
        f"  - {{name: agent, type: cli, command: [{sys.executable!r}, {str(agent)!r}]}}\n"
        "tests:\n" + tests,
    )


def mistakes(stderr: str) -> dict[str, str]:
    """Each mistake's line of a multi-mistake error, by its `file:line: at path` start."""
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("atp: error: ") and "mistakes in" in lines[0], stderr
    found = {}
    for line in lines[1:]:
        where, _, what = line.strip().partition(": at ")
        path, _, reason = what.partition(": ")
        found[f"{where}: {path}"] = reason
    return found


def test_a_suite_with_six_mistakes_reports_all_six_with_hints_in_one_run(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        """
        test_suite: six
        defaults:
          runs_per_test: "three"
        tests:
          - id: one
            task: {description: add}
            asertions:
              - {type: contains, config: {pattern: "4"}}
          - id: two
            task: {description: add}
            expect: {status: ok}
            assertions:
              - type: contain
                config: {pattern: "4"}
              - type: contains
                pattern: "4"
              - type: contains
                config: {patern: "4"}
        """,
    )
    for command in (["test", str(suite)], ["validate", str(suite)]):
        run = atp(*command, cwd=tmp_path)
        assert run.returncode == 2, run.stdout + run.stderr
        found = mistakes(run.stderr)
        assert "6 mistakes" in run.stderr.splitlines()[0]
        at = f"{suite}:"
        says(found[f"{at}3: defaults.runs_per_test"], "'three'", "1 to 10000", "'auto'")
        says(found[f"{at}7: tests[0].asertions"], "unknown field 'asertions'", "did you mean 'assertions'")
        says(found[f"{at}11: tests[1].expect.status"], "'ok'", "'completed'", "'failed'", "'partial'")
        says(found[f"{at}13: tests[1].assertions[0].type"], "'contain'", "did you mean 'contains'")
        says(found[f"{at}16: tests[1].assertions[1].pattern"], "unknown field 'pattern'", "under 'config:'")
        says(found[f"{at}18: tests[1].assertions[2].config.patern"], "did you mean 'pattern'")
        assert len(found) == 6


def test_agents_of_the_wrong_shape_get_an_example_and_a_shortened_key_its_name(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "suite.yaml",
        "test_suite: shapes\nagents:\n  calc: {type: cli, command: [python3, agent.py]}\n"
        "tests:\n  - {id: a, task: {description: x}}\n",
    )
    run = atp("test", str(suite), cwd=tmp_path)
    assert run.returncode == 2
    one_error(run.stderr, f"{suite}:2", "at agents", "expected a list", "agents: [{name: my-agent")

    config = write(tmp_path / "conf" / "atp.config.yaml", "agents:\n  - {name: calc, type: cli}\n")
    run = atp("list-agents", cwd=config.parent)
    assert run.returncode == 2
    one_error(run.stderr, f"{config}:1", "expected a mapping", "agents: {my-agent: {type: cli")

    suite = write(
        tmp_path / "cmd" / "suite.yaml",
        "test_suite: cmd\nagents:\n  - name: calc\n    type: cli\n    cmd: [python3, agent.py]\n"
        "tests:\n  - {id: a, task: {description: x}}\n",
    )
    run = atp("test", str(suite), cwd=suite.parent)
    assert run.returncode == 2
    # one mistake: the key that is not 'command', not also "'command' is missing"
    one_error(run.stderr, f"{suite}:5", "agents[0].cmd", "did you mean 'command'")


def results_of(tmp_path: Path, suite: Path, *more: str) -> tuple[Any, dict[str, Any]]:
    out = tmp_path / "out.json"
    run = atp("test", str(suite), "--output=json", f"--output-file={out}", *more, cwd=tmp_path)
    return run, {t["id"]: t for t in json.loads(out.read_text())["tests"]}


def test_a_response_missing_three_fields_names_the_three(tmp_path: Path) -> None:
    suite = agent_suite(tmp_path, "  - {id: missing, task: {description: missing}}\n")
    run, tests = results_of(tmp_path, suite)
    assert run.returncode == 1, run.stdout + run.stderr
    error = tests["missing"]["runs"][0]["error"]
    says(error, "missing required fields", "`task_id`", "`status`", "`metrics`")


def test_a_line_printed_after_the_response_says_to_write_logs_to_stderr(tmp_path: Path) -> None:
    suite = agent_suite(tmp_path, "  - {id: after, task: {description: log_after}}\n")
    run, tests = results_of(tmp_path, suite)
    assert run.returncode == 1, run.stdout + run.stderr
    error = tests["after"]["runs"][0]["error"]
    says(error, "response is on stdout line 1", "write logs to stderr", "stdout line 2")


def test_a_schema_failure_shows_the_value_it_rejected(tmp_path: Path) -> None:
    suite = agent_suite(
        tmp_path,
        "  - id: value\n    task: {description: ok}\n    assertions:\n"
        "      - {type: schema, config: {name: result, schema: {properties: {value: {const: 41}}}}}\n",
    )
    run, tests = results_of(tmp_path, suite)
    assert run.returncode == 1, run.stdout + run.stderr
    message = tests["value"]["runs"][0]["checks"][0]["message"]
    says(message, "$.value", "41 was expected", "got 42")


def test_resume_says_which_run_directory_and_how_many_runs_were_done(tmp_path: Path) -> None:
    suite = agent_suite(tmp_path, "  - {id: three, runs_per_test: 3, task: {description: ok}}\n")
    assert atp("test", str(suite), cwd=tmp_path).returncode == 0
    (run_dir,) = (tmp_path / ".atp" / "runs").iterdir()
    header = json.loads((run_dir / "run.json").read_text())
    header["finished_at"] = None  # as if killed after its first run
    (run_dir / "run.json").write_text(json.dumps(header))
    first = (run_dir / "results.jsonl").read_text().splitlines()[0]
    (run_dir / "results.jsonl").write_text(first + "\n")

    resumed = atp("test", str(suite), f"--resume={run_dir}", cwd=tmp_path)

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    says(
        resumed.stdout, f"Resuming {run_dir.relative_to(tmp_path)}", "1 of 3 runs already done", "2 runs left"
    )
