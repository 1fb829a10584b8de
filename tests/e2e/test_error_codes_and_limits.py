"""The protocol's error codes kept and the task's limits held while the agent runs, through the
`atp` command (tests/agents/codes_and_limits.py):

- an agent's ``error_code``, ``error_details`` and ``trace_id`` reach the JSON results, the
  console, JUnit and the HTML report, and the runs that did not pass are counted by code;
- a test that expects a failure (``expect:``) passes when the agent fails as expected and fails
  when it does not;
- an agent that keeps going past ``max_steps``, ``max_tokens`` or ``budget_usd`` is stopped within
  a second of the event that passed the limit, with the limit's code and its events kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.facts import says

AGENT = [PYTHON, str(AGENTS / "codes_and_limits.py")]


def run_suite(
    tmp_path: Path, tests: str, *options: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`atp test` of ``tests`` with JSON, JUnit and HTML outputs beside the console."""
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir(exist_ok=True)
    suite = write(
        tmp_path / "suite.yaml",
        f"test_suite: codes\nagents:\n  - name: agent\n    type: cli\n    command: {AGENT!r}\n"
        f"    cwd: {agent_dir}\n    working_folder: shared\ntests:\n{tests}",  # (its beats files in one place)
    )
    result = subprocess.run(
        [
            ATP, "test", f"--suite={suite}", "--output=json:results.json", "--output=junit:report.xml",
            "--output=html:report.html", "--output=console", "-v", *options,
        ],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert (tmp_path / "results.json").is_file(), result.stderr
    return result, json.loads((tmp_path / "results.json").read_text())


CODES = """\
  - id: missing_tool
    runs_per_test: 2
    task: {description: "Query the orders database", input_data: {mode: tool_not_found}}
  - id: model_down
    task: {description: x, input_data: {mode: llm_error}}
  - id: fine
    task: {description: x, input_data: {mode: complete}}
"""


def test_error_codes_reach_every_report_and_are_counted(tmp_path: Path) -> None:
    result, data = run_suite(tmp_path, CODES)
    assert result.returncode == 1, result.stdout + result.stderr
    tests = {test["id"]: test for test in data["tests"]}
    run = tests["missing_tool"]["runs"][0]
    assert run["outcome"] == "failed" and run["status"] == "failed"
    assert run["error_code"] == "TOOL_NOT_FOUND"
    assert run["error_details"] == {"tool": "database_query", "available_tools": ["web_search", "file_write"]}
    assert run["trace_id"] == "trace_abc123"
    assert tests["model_down"]["runs"][0]["error_code"] == "LLM_ERROR"
    assert tests["fine"]["runs"][0]["error_code"] is None and tests["fine"]["status"] == "passed"
    assert data["format_version"] == "1.4"
    assert data["summary"]["error_codes"] == {"TOOL_NOT_FOUND": 2, "LLM_ERROR": 1}
    assert tests["missing_tool"]["statistics"]["error_codes"] == {"TOOL_NOT_FOUND": 2}
    assert "error_codes" not in tests["fine"]["statistics"]

    says(result.stdout, "failed [TOOL_NOT_FOUND]: Tool 'database_query' not available")
    says(result.stdout, "failed [LLM_ERROR]: the model provider answered 529 overloaded")
    says(result.stdout, "Error codes: TOOL_NOT_FOUND 2, LLM_ERROR 1")
    says(result.stdout, "trace_abc123", "available_tools")

    root = ET.parse(tmp_path / "report.xml").getroot()
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["atp.error_codes.TOOL_NOT_FOUND"] == "2"
    assert properties["atp.error_codes.LLM_ERROR"] == "1"
    assert properties["missing_tool.error_codes"] == "TOOL_NOT_FOUND 2"
    case = next(c for c in root.iter("testcase") if c.get("name") == "model_down")
    error = case.find("error")
    assert error is not None
    says(error.get("message"), "LLM_ERROR: the model provider answered 529 overloaded")
    says(error.text, "status failed, error_code LLM_ERROR")

    html = (tmp_path / "report.html").read_text()
    embedded = html.split('<script type="application/json" id="atp-data">', 1)[1].split("</script>", 1)[0]
    assert '"error_code":"TOOL_NOT_FOUND"' in embedded.replace(" ", "")


EXPECTING = """\
  - id: expects_missing_tool
    task: {description: "Query the orders database", input_data: {mode: tool_not_found}}
    expect: {error_code: TOOL_NOT_FOUND}
  - id: expects_a_failure_gets_another_code
    task: {description: x, input_data: {mode: llm_error}}
    expect: {status: failed, error_code: TOOL_NOT_FOUND}
  - id: expects_a_failure_gets_success
    task: {description: x, input_data: {mode: complete}}
    expect: {status: failed}
"""


def test_a_test_can_expect_the_agent_to_fail_with_a_code(tmp_path: Path) -> None:
    result, data = run_suite(tmp_path, EXPECTING)
    tests = {test["id"]: test for test in data["tests"]}
    met = tests["expects_missing_tool"]
    assert met["status"] == "passed", met
    run = met["runs"][0]
    assert run["error"] is None and run["error_code"] == "TOOL_NOT_FOUND" and run["score"] == 100.0
    assert run["checks"][0]["name"] == "expect" and run["checks"][0]["passed"]
    says(run["checks"][0]["message"], "status failed with error_code TOOL_NOT_FOUND", "as the test expects")

    other = tests["expects_a_failure_gets_another_code"]["runs"][0]
    assert other["outcome"] == "failed" and not other["checks"][0]["passed"]
    says(other["checks"][0]["message"], "expected status failed with error_code TOOL_NOT_FOUND", "LLM_ERROR")

    success = tests["expects_a_failure_gets_success"]["runs"][0]
    assert success["outcome"] == "failed" and success["status"] == "completed"
    says(success["checks"][0]["message"], "expected status failed", "status completed")
    # nothing failed but the expectations: only their runs count by code
    assert data["summary"]["error_codes"] == {"LLM_ERROR": 1}
    assert result.returncode == 1


def beats(tmp_path: Path, mode: str) -> list[tuple[int, float]]:
    lines = (tmp_path / "agent" / f"beats-{mode}.log").read_text().split()
    return [(int(lines[i + 1]), float(lines[i + 2])) for i in range(0, len(lines), 3)]


def events_of(tmp_path: Path, run: dict[str, Any]) -> list[dict[str, Any]]:
    run_dir = next((tmp_path / ".atp" / "runs").iterdir())
    return [json.loads(line) for line in (run_dir / run["events_file"]).read_text().splitlines()]


LIMITS = """\
  - id: too_many_steps
    task: {description: x, input_data: {mode: steps}}
    constraints: {max_steps: 5, timeout_seconds: 60}
  - id: too_many_tokens
    task: {description: x, input_data: {mode: tokens}}
    constraints: {max_tokens: 3500, timeout_seconds: 60}
  - id: over_budget
    task: {description: x, input_data: {mode: cost}}
    constraints: {budget_usd: 1.0, timeout_seconds: 60}
"""


def test_an_agent_past_its_limits_is_stopped_within_a_second(tmp_path: Path) -> None:
    result, data = run_suite(tmp_path, LIMITS)
    assert result.returncode == 1
    tests = {test["id"]: test["runs"][0] for test in data["tests"]}
    expected = {
        # test: (mode, code, the event that passes the limit, words of the reason)
        "too_many_steps": (
            "steps",
            "MAX_STEPS_EXCEEDED",
            6,
            ("constraints.max_steps", "step 6", "at most 5"),
        ),
        "too_many_tokens": (
            "tokens",
            "MAX_TOKENS_EXCEEDED",
            4,
            ("constraints.max_tokens", "4000 tokens", "3500"),
        ),
        "over_budget": ("cost", "BUDGET_EXCEEDED", 4, ("constraints.budget_usd", "$1.2", "$1")),
    }
    for test_id, (mode, code, passing, words) in expected.items():
        run = tests[test_id]
        assert run["outcome"] == "failed" and run["status"] == "failed", run
        assert run["error_code"] == code
        says(run["error"], *words, "ATP stopped it")
        assert run["duration_seconds"] < 10, run  # not the 60 s time limit
        beat = beats(tmp_path, mode)
        passed_at = dict(beat)[passing]
        assert beat[-1][1] - passed_at < 1.0, (
            f"{test_id}: the agent went on for {beat[-1][1] - passed_at:.2f} s"
        )
        events = events_of(tmp_path, run)
        assert [e["sequence"] for e in events][:passing] == list(range(1, passing + 1))  # kept
    assert data["summary"]["error_codes"] == {
        "BUDGET_EXCEEDED": 1,
        "MAX_STEPS_EXCEEDED": 1,
        "MAX_TOKENS_EXCEEDED": 1,
    }
    says(result.stdout, "failed [MAX_STEPS_EXCEEDED]: the agent passed constraints.max_steps")


PYTHON_AGENTS = '''
import asyncio
import time

BEATS = []


async def steps(request, emit):
    """Keeps going past its steps, awaiting between them (ATP cancels it)."""
    n = 0
    while True:
        n += 1
        BEATS.append(time.time())
        emit({"event_type": "progress", "payload": {"current_step": n}})
        await asyncio.sleep(0.05)


def tokens(request, emit):
    """A plain function in a thread, spending tokens and catching everything ATP raises."""
    n = 0
    while n < 400:
        n += 1
        try:
            emit({"event_type": "llm_request", "payload": {"input_tokens": 500, "output_tokens": 500}})
        except BaseException:
            return {"status": "completed", "artifacts": [], "metrics": {}}
        time.sleep(0.05)
'''


def test_in_process_agents_past_their_limits_are_stopped(tmp_path: Path) -> None:
    """Python agents (an async function, cancelled; a plain one in a thread, whose ``emit``
    raises once its run ended) are stopped at their limits, and the run fails with the code."""
    write(tmp_path / "spenders.py", PYTHON_AGENTS)
    suite = write(
        tmp_path / "suite.yaml",
        "test_suite: in_process\nagents:\n"
        "  - {name: steps, type: python, callable: 'spenders:steps'}\n"
        "  - {name: tokens, type: python, callable: 'spenders:tokens'}\n"
        "tests:\n  - id: t\n    task: {description: x}\n"
        "    constraints: {max_steps: 3, max_tokens: 2500, timeout_seconds: 60}\n",
    )
    for agent, code in (("steps", "MAX_STEPS_EXCEEDED"), ("tokens", "MAX_TOKENS_EXCEEDED")):
        out = tmp_path / f"{agent}.json"
        result = subprocess.run(
            [ATP, "test", f"--suite={suite}", f"--agent={agent}", f"--output=json:{out}"],
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1, result.stdout + result.stderr
        run = json.loads(out.read_text())["tests"][0]["runs"][0]
        assert run["error_code"] == code and run["status"] == "failed", run
        assert run["duration_seconds"] < 5, run
