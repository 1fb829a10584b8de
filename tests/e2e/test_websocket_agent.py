"""`atp test` and `atp validate` against the example WebSocket agent
(examples/agents/websocket_agent.py), as a user runs them: the real `atp` command, the agent a
server started beforehand, the mock tool server answering its searches, and a misbehaving
agent (tests/agents/ws_faults.py) whose failing runs leave the others alone."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTS, ATP, EXAMPLES, PYTHON, write
from tests.e2e.test_validate import assert_speaks_atp, validate
from tests.network import Server, free_port

pytest.importorskip("websockets", reason="the websocket adapter needs the websockets package")

SUITE = """
test_suite: websocket_agents
agents:
  - {{name: ws, type: websocket, endpoint: "ws://127.0.0.1:{port}"}}
  - {{name: ws-faults, type: websocket, endpoint: "ws://127.0.0.1:{faults}", max_message_bytes: 1048576}}
  - {{name: ws-down, type: websocket, endpoint: "ws://127.0.0.1:{down}/agent", connect_timeout: 2}}
tests:
  - id: slack
    task: {{description: "Find the competitors of Slack"}}
    assertions:
      - {{type: artifact_exists, config: {{path: report.md}}}}
      - {{type: contains, config: {{path: report.md, pattern: "1. Microsoft Teams"}}}}
      - {{type: sections, config: {{path: report.md, sections: ["Competitors of Slack"]}}}}
      - {{type: contains, config: {{name: competitors, pattern: "Mattermost"}}}}
      - type: schema
        config:
          name: competitors
          schema: {{type: object, required: [company, competitors], properties: {{company: {{const: Slack}}}}}}
  - id: zoom
    task: {{description: "Find the competitors of Zoom"}}
    assertions:
      - {{type: contains, config: {{path: report.md, pattern: "Slack Huddles"}}}}
      - {{type: must_use_tools, config: {{tools: [web_search]}}}}
"""

TOOLS = """
test_suite: websocket_tools
agents:
  - {{name: ws, type: websocket, endpoint: "ws://127.0.0.1:{port}"}}
tests:
  - id: mocked_search
    task: {{description: "Find the competitors of Acme", input_data: {{company: Acme}}}}
    tools:
      - name: web_search
        responses:
          - match: {{input: {{query: "Acme competitors"}}}}
            output: {{results: [{{title: Globex}}, {{title: Initech}}]}}
          - output: {{results: []}}
    assertions:
      - {{type: contains, config: {{path: report.md, pattern: "1. Globex\\n2. Initech"}}}}
      - {{type: must_use_tools, config: {{tools: [web_search]}}}}
      - {{type: tool_called_with, config: {{tool: web_search, input: {{query: "Acme competitors"}}, times: 1}}}}
      - {{type: tool_sequence, config: {{tools: [web_search], mode: exact}}}}
"""

MIXED = """
tests:
  - {id: ok_first, task: {description: ok}}
  - {id: cut, task: {description: cut 4}}
  - {id: version2, task: {description: version2}}
  - {id: huge, task: {description: huge}}
  - {id: slow, task: {description: slow}, constraints: {timeout_seconds: 1}}
  - {id: ok_last, task: {description: ok}}
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
def ports() -> Iterator[dict[str, int]]:
    agent = Server([PYTHON, str(EXAMPLES / "agents" / "websocket_agent.py"), "--port", "0"])
    try:
        faults = Server([PYTHON, str(AGENTS / "ws_faults.py"), "ok", "--port", "0"])
    except BaseException:
        agent.stop()
        raise
    yield {"port": agent.port, "faults": faults.port, "down": free_port()}
    faults.stop()
    agent.stop()


@pytest.fixture
def project(tmp_path: Path, ports: dict[str, int]) -> Path:
    write(tmp_path / "suite.yaml", SUITE.format(**ports))
    write(tmp_path / "tools.yaml", TOOLS.format(**ports))
    return tmp_path


def results_of(project: Path) -> dict[str, list[dict[str, Any]]]:
    return {test["id"]: test["runs"] for test in json.loads((project / "results.json").read_text())["tests"]}


def test_atp_test_runs_a_suite_against_the_websocket_agent(project: Path) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=ws",
        "--runs=3",
        "--parallel=4",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Agent: ws (websocket)" in result.stdout
    assert "Summary: 2 passed, 0 failed, 0 skipped" in result.stdout
    assert result.stderr.strip() == "json results written to results.json", result.stderr
    runs = results_of(project)
    for run in runs["slack"] + runs["zoom"]:
        assert run["outcome"] == "passed", run
        assert [check["passed"] for check in run["checks"]] == [True] * len(run["checks"]) and run["checks"]
        assert run["trace"]["events"] == 4 and run["trace"]["tool_calls"] == {"web_search": 1}
    report = next(artifact for artifact in runs["slack"][0]["artifacts"] if artifact["type"] == "file")
    assert report["content"].startswith("# Competitors of Slack\n\n1. Microsoft Teams\n")


def test_the_agent_calls_the_tools_the_suite_declares(project: Path) -> None:
    result = atp(
        "test",
        "--suite=tools.yaml",
        "--runs=2",
        "--parallel=2",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Summary: 1 passed, 0 failed, 0 skipped" in result.stdout
    for run in results_of(project)["mocked_search"]:
        assert run["outcome"] == "passed", run
        assert [(check["name"], check["passed"]) for check in run["checks"]] == [
            ("contains:report.md", True),
            ("must_use_tools", True),
            ("tool_called_with:web_search", True),
            ("tool_sequence:exact", True),
        ]
        # the server's recording of the call, once (the agent's own tool_call event for it is left out)
        assert run["trace"]["tool_calls"] == {"web_search": 1}
        events_file = next((project / ".atp" / "runs").glob(f"*/{run['events_file']}"))
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        [call] = [event for event in events if event["event_type"] == "tool_call"]
        assert call["recorded_by"] == "tools" and call["task_id"] == run["task_id"]
        assert call["payload"]["input"] == {"query": "Acme competitors"}
        assert call["payload"]["output"] == {"results": [{"title": "Globex"}, {"title": "Initech"}]}
        assert [event["event_type"] for event in events if "recorded_by" not in event] == [
            "progress",
            "llm_request",
            "progress",
        ]


def test_failing_runs_of_a_misbehaving_agent_leave_the_others_alone(
    project: Path, ports: dict[str, int]
) -> None:
    suite = write(project / "mixed.yaml", (project / "suite.yaml").read_text().split("tests:")[0] + MIXED)
    result = atp(
        "test",
        f"--suite={suite.name}",
        "--agent=ws-faults",
        "--parallel=3",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Summary: 2 passed, 4 failed, 0 skipped" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    runs = {test_id: runs[0] for test_id, runs in results_of(project).items()}
    where = f"ws://127.0.0.1:{ports['faults']}"
    assert [runs[test_id]["outcome"] for test_id in ("ok_first", "ok_last")] == ["passed", "passed"]
    assert runs["cut"]["error"].startswith(
        f"{where}: the connection was cut after 4 events, before an ATP Response"
    )
    assert runs["cut"]["trace"]["events"] == 4
    assert runs["version2"]["error"].startswith(
        f"{where}: the agent broke the protocol in message 2 (after 1 event): ATP response: protocol version 2.0 "
        f"is not supported; ATP speaks version 1.x"
    )
    assert runs["huge"]["error"] == (
        f"{where}: the agent sent more than 1048576 bytes in one run (max_message_bytes), after 1 event"
    )
    assert (runs["slow"]["status"], runs["slow"]["error"]) == (
        "timeout",
        "timed out after 1 s; the agent was stopped",
    )
    assert runs["slow"]["trace"]["events"] == 2


def test_an_agent_that_is_not_listening_fails_each_run_with_its_endpoint(
    project: Path, ports: dict[str, int]
) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=ws-down",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Summary: 0 passed, 0 failed, 0 skipped, 2 errors" in result.stdout
    assert [runs[0]["error"] for runs in results_of(project).values()] == [
        f"cannot reach agent 'ws-down' at ws://127.0.0.1:{ports['down']}/agent: connection refused "
        f"(is the agent running and listening there?)"
    ] * 2


def test_atp_validate_passes_the_example_agent(project: Path) -> None:
    result = validate("suite.yaml", "--agent=ws", cwd=project)
    assert_speaks_atp(result)
    assert result.stdout.startswith("Agent: ws (websocket), each probe within 30 s\n")
