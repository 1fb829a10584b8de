"""`atp test` and `atp validate` against the example HTTP agent (examples/agents/http_agent.py,
FastAPI on uvicorn), as a user runs them: a real server on loopback, synchronous and streaming,
with the mock tool server answering its searches and assertions on the recorded calls."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ATP, EXAMPLES, PYTHON, write
from tests.network import Server

pytest.importorskip("fastapi", reason="the example HTTP agent is written with FastAPI")
pytest.importorskip("uvicorn", reason="the example HTTP agent is served by uvicorn")

SUITE = """
test_suite: http_agents
agents:
  - {{name: http-auto, type: http, endpoint: "http://127.0.0.1:{port}"}}
  - {{name: http-sync, type: http, endpoint: "http://127.0.0.1:{port}", stream: false}}
  - {{name: http-stream, type: http, endpoint: "http://127.0.0.1:{port}", stream: true}}
tests:
  - id: slack
    task: {{description: "Find the competitors of Slack"}}
    assertions:
      - {{type: artifact_exists, config: {{path: report.md}}}}
      - {{type: contains, config: {{path: report.md, pattern: "Microsoft Teams"}}}}
  - id: mocked_search
    task: {{description: "Find the competitors of Acme", input_data: {{company: Acme}}}}
    tools:
      - name: web_search
        responses:
          - match: {{input: {{query: "Acme competitors"}}}}
            output: {{results: [{{title: Globex}}, {{title: Initech}}]}}
          - output: {{results: []}}
    assertions:
      - {{type: contains, config: {{path: report.md, pattern: "1. Globex"}}}}
      - {{type: must_use_tools, config: {{tools: [web_search]}}}}
      - {{type: max_tool_calls, config: {{limit: 1}}}}
      - {{type: tool_called_with, config: {{tool: web_search, input: {{query: "Acme competitors"}}}}}}
      - {{type: tool_sequence, config: {{tools: [web_search], mode: exact}}}}
  - id: wrong_expectation
    task: {{description: "Find the competitors of Acme", input_data: {{company: Acme}}}}
    tools:
      - {{name: web_search, output: {{results: [{{title: Globex}}]}}}}
    assertions:
      - {{type: tool_called_with, config: {{tool: web_search, input_regex: {{query: "^Initech"}}}}}}
"""


def atp(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = Server([PYTHON, str(EXAMPLES / "agents" / "http_agent.py"), "--port", "0"])
    yield server.port
    server.stop()


@pytest.fixture
def project(tmp_path: Path, port: int) -> Path:
    write(tmp_path / "suite.yaml", SUITE.format(port=port))
    return tmp_path


@pytest.mark.parametrize("agent", ["http-auto", "http-sync", "http-stream"])
def test_a_suite_runs_against_the_http_agent_with_its_tools_mocked(project: Path, agent: str) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        f"--agent={agent}",
        "--runs=3",
        "--parallel=6",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # wrong_expectation fails, as it must
    assert f"Agent: {agent} (http)" in result.stdout
    assert "Summary: 2 passed, 1 failed, 0 skipped" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    tests = {test["id"]: test["runs"] for test in json.loads((project / "results.json").read_text())["tests"]}
    assert [run["outcome"] for run in tests["slack"]] == ["passed"] * 3
    for run in tests["mocked_search"]:
        assert run["outcome"] == "passed", run
        # The server's recording counts, once, whether or not the agent reports the call too.
        assert run["trace"]["tool_calls"] == {"web_search": 1}
        events_file = next((project / ".atp" / "runs").glob(f"*/{run['events_file']}"))
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        [call] = [event for event in events if event["event_type"] == "tool_call"]
        assert call["recorded_by"] == "tools"
        assert call["payload"]["input"] == {"query": "Acme competitors"}
        assert call["payload"]["output"] == {"results": [{"title": "Globex"}, {"title": "Initech"}]}
        assert call["task_id"] == run["task_id"]
        if agent != "http-sync":  # streamed: the agent's own events are in the trace as they came
            assert run["trace"]["by_type"]["progress"] == 2
    for run in tests["wrong_expectation"]:
        [check] = run["checks"]
        assert run["outcome"] == "failed" and not check["passed"]
        assert "query" in check["message"] and "Acme competitors" in check["message"]  # the call it saw


def test_atp_validate_passes_for_the_http_agent(project: Path) -> None:
    for agent in ("http-auto", "http-sync"):
        result = atp("validate", "--suite=suite.yaml", f"--agent={agent}", "--timeout=20", cwd=project)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("PASS") == 5 and "FAIL" not in result.stdout
