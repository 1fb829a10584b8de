"""`atp test` against the example gRPC agent (examples/agents/grpc_agent.py), as a user runs it:
the real `atp` command, the agent a server started beforehand, streaming and unary."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ATP, EXAMPLES, PYTHON, write
from tests.network import Server, free_port

pytest.importorskip("grpc", reason="the grpc adapter needs atp-adapters[grpc]")

SUITE = """
test_suite: grpc_agents
agents:
  - {{name: grpc-stream, type: grpc, endpoint: "grpc://127.0.0.1:{port}", stream: true}}
  - {{name: grpc-unary, type: grpc, endpoint: "grpc://127.0.0.1:{port}", stream: false}}
  - {{name: grpc-down, type: grpc, endpoint: "grpc://127.0.0.1:{down}", connect_timeout: 2}}
tests:
  - id: slack
    task: {{description: "Find the top 3 competitors of Slack", input_data: {{company: Slack, top: 3}}}}
    assertions:
      - {{type: artifact_exists, config: {{path: report.md}}}}
      - {{type: contains, config: {{path: report.md, pattern: "Microsoft Teams"}}}}
      - {{type: must_use_tools, config: {{tools: [web_search]}}}}
  - id: zoom_top3
    task: {{description: "Find the top 3 competitors of Zoom", input_data: {{top: 3}}}}
    assertions:
      - {{type: contains, config: {{path: report.md, pattern: "Slack Huddles"}}}}
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
    server = Server([PYTHON, str(EXAMPLES / "agents" / "grpc_agent.py"), "--port", "0"])
    yield server.port
    server.stop()


@pytest.fixture
def project(tmp_path: Path, port: int) -> Path:
    write(tmp_path / "suite.yaml", SUITE.format(port=port, down=free_port()))
    return tmp_path


@pytest.mark.parametrize("agent", ["grpc-stream", "grpc-unary"])
def test_atp_test_runs_a_suite_against_the_grpc_agent(project: Path, agent: str) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        f"--agent={agent}",
        "--runs=2",
        "--parallel=2",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # zoom_top3 fails its assertion
    out = result.stdout
    assert f"Agent: {agent} (grpc)" in out
    assert "  ✓ slack" in out and "  ✗ zoom_top3" in out
    assert "Summary: 1 passed, 1 failed, 0 skipped" in out
    assert result.stderr.strip() == "json results written to results.json", (
        result.stderr
    )  # no traceback, no gRPC log
    results = json.loads((project / "results.json").read_text())
    runs = {test["id"]: test["runs"] for test in results["tests"]}
    assert [run["outcome"] for run in runs["slack"]] == ["passed", "passed"]
    for run in runs["slack"]:
        assert run["trace"]["tool_calls"] == {"web_search": 1, "file_write": 1}
        assert run["trace"]["events"] == 8
        report = next(artifact for artifact in run["artifacts"] if artifact["type"] == "file")
        assert report["content"].startswith("# Competitor analysis: Slack\n")
        assert "3. Google Chat: 12% market share" in report["content"]
    for run in runs["zoom_top3"]:  # the agent completed; Slack Huddles is fourth, not in its top 3
        assert (run["outcome"], run["status"]) == ("failed", "completed")
        assert [check["passed"] for check in run["checks"]] == [False]


def test_an_agent_that_is_not_listening_fails_each_run_with_its_endpoint(project: Path) -> None:
    suite = (project / "suite.yaml").read_text()
    down = suite.split('grpc-down, type: grpc, endpoint: "')[1].split('"')[0]
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=grpc-down",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Summary: 0 passed, 0 failed, 0 skipped, 2 errors" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    results = json.loads((project / "results.json").read_text())
    errors = [test["runs"][0]["error"] for test in results["tests"]]
    assert (
        errors
        == [
            f"cannot reach agent 'grpc-down' at {down}: connection refused (is the agent running and listening there?)"
        ]
        * 2
    )


def test_atp_plugins_lists_the_grpc_adapter(tmp_path: Path) -> None:
    result = atp("plugins", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("adapters:"))
    assert "grpc" in line.split(":", 1)[1].replace(",", " ").split()


@pytest.mark.parametrize("agent", ["grpc-stream", "grpc-unary"])
def test_atp_validate_passes_the_example_agent(project: Path, agent: str) -> None:
    result = atp("validate", "suite.yaml", f"--agent={agent}", "--json", cwd=project, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["type"] == "grpc"
    assert {check["name"]: check["outcome"] for check in report["checks"]} == {
        "reachable": "passed",
        "probe": "passed",
        "events": "passed",
        "malformed": "passed",
        "version": "passed",
    }
