"""(issue 27) An agent written from ATP Protocol 1.0 alone (tests/agents/spec_agent.py: its
messages, its transports, its FastAPI example, context.environment, the Tool Protocol appendix)
passes `atp test` unchanged over the cli, http and websocket adapters: its secret comes in
context.environment and is in none of ATP's output, its tool calls are answered by ATP's mock
tool server and recorded, its own events are kept in the run directory, its file artifact's size
and hash hold, and without the secret it refuses with INVALID_REQUEST, as a test may expect."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.network import Server

KEY = "sk-spec-41f0a9c3-never-shown"
DIGEST = hashlib.sha256(KEY.encode()).hexdigest()
AGENT = str(AGENTS / "spec_agent.py")

SUITE = """
test_suite: spec_agent_{transport}
agents:
  - name: agent
    type: {transport}
    {where}
    secrets: [SEARCH_API_KEY]
  - name: without
    type: {transport}
    {where}
tests:
  - id: competitor_report
    tools:
      - name: web_search
        responses:
          - match: {{input: {{query: Slack competitors}}}}
            output: {{results: [{{title: Microsoft Teams}}, {{title: Discord}}]}}
          - output: {{results: []}}
      - name: file_write
        output: {{written: report.md}}
    task:
      description: Find the competitors of Slack and write a report
      input_data:
        web_search: {{query: Slack competitors}}
        file_write: {{path: report.md}}
    constraints:
      allowed_tools: [web_search, file_write]
      max_steps: 10
      max_tokens: 10000
    assertions:
      - {{type: must_use_tools, config: {{tools: [web_search, file_write]}}}}
      - {{type: tool_sequence, config: {{tools: [web_search, file_write], mode: exact}}}}
      - {{type: tool_called_with, config: {{tool: web_search, input: {{query: Slack competitors}}}}}}
      - {{type: artifact_exists, config: {{path: report.md}}}}
      - {{type: contains, config: {{path: report.md, pattern: Microsoft Teams}}}}
      - {{type: contains, config: {{name: search_results, pattern: Discord}}}}
      - {{type: contains, config: {{name: search_results, pattern: "{digest}"}}}}
      - {{type: max_steps, config: {{limit: 10}}}}
      - {{type: no_errors}}
  - id: refuses_without_the_key
    task: {{description: Search for anything}}
    expect: {{status: failed, error_code: INVALID_REQUEST}}
    assertions:
      - {{type: no_errors}}
"""


def where(transport: str, port: int) -> str:
    """The agent's settings: its command, or its endpoint (``http-sync``: POST /execute alone)."""
    if transport == "cli":
        return f"command: {json.dumps([PYTHON, AGENT, 'cli'])}"
    if transport == "http-sync":
        return f'endpoint: "http://127.0.0.1:{port}"\n    stream: false'
    return f'endpoint: "{"http" if transport == "http" else "ws"}://127.0.0.1:{port}"'


def atp(*args: str, cwd: Path, key: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SEARCH_API_KEY"}
    env.update({"NO_COLOR": "1"}, **({"SEARCH_API_KEY": KEY} if key else {}))
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", params=["cli", "http", "http-sync", "websocket"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    """The transport (``http``: POST /execute/stream, ATP's default; ``http-sync``: POST
    /execute) and the port of the agent's server."""
    transport = request.param
    if transport == "cli":
        yield transport, 0
        return
    if transport.startswith("http"):
        pytest.importorskip("fastapi", reason="the http agent is written with FastAPI, as the spec's example")
        pytest.importorskip("uvicorn", reason="the http agent is served by uvicorn")
    server = Server([PYTHON, AGENT, transport.split("-")[0]])
    yield transport, server.port
    server.stop()


@pytest.fixture
def project(tmp_path: Path, served: tuple[str, int]) -> Path:
    transport, port = served
    kind = transport.split("-")[0]
    text = SUITE.format(transport=kind, where=where(transport, port), digest=DIGEST)
    write(tmp_path / "suite.yaml", text)
    return tmp_path


def written(project: Path) -> dict[str, str]:
    """Every file ATP wrote in the project (the suite aside), by path."""
    return {
        str(path.relative_to(project)): path.read_text(errors="replace")
        for path in project.rglob("*")
        if path.is_file() and path.name != "suite.yaml"
    }


def only_run(project: Path) -> dict[str, Any]:
    [test] = json.loads((project / "results.json").read_text())["tests"]
    [run] = test["runs"]
    return dict(run)


def test_the_agent_passes_with_its_tools_and_secret(project: Path, served: tuple[str, int]) -> None:
    """Every check passes: the tools called as the appendix shows, the mocked output in both
    artifacts, the file artifact's size and sha256 verified, the agent's metrics kept."""
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=agent",
        "--test=competitor_report",
        "-v",
        "--output=console,json:results.json,html:report.html,junit:report.xml",
        cwd=project,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  ✓ competitor_report" in result.stdout and "warning" not in result.stdout.lower()
    run = only_run(project)
    assert run["status"] == "completed" and run["outcome"] == "passed", run["error"]
    assert [c["passed"] for c in run["checks"]] == [True] * 9, run["checks"]
    # ATP's tool server answered both calls; the agent's own tool_call events are the same calls
    assert run["trace"]["tool_calls"] == {"web_search": 1, "file_write": 1}
    [report] = [a for a in run["artifacts"] if a.get("path") == "report.md"]
    assert "Microsoft Teams" in report["content"] and "Discord" in report["content"]
    assert report["content_hash"] == "sha256:" + hashlib.sha256(report["content"].encode()).hexdigest()
    metrics = run["metrics"]
    assert (metrics["total_tokens"], metrics["llm_calls"], metrics["tool_calls"], metrics["total_steps"]) == (
        2820,
        2,
        2,
        4,
    )
    # the events the agent sent are in the run directory, in its sequence from 0; its own
    # tool_call events (4 and 6) give way to the calls ATP's tool server recorded, in their place
    # (docs/tool-mocking.md, "An agent that also reports its calls")
    files = written(project)
    [events] = [text for name, text in files.items() if "/events/" in name]
    kept = [json.loads(line) for line in events.splitlines()]
    order = [(e.get("recorded_by", "agent"), e["sequence"], e["event_type"]) for e in kept]
    if served[0] == "http-sync":  # POST /execute answers with the response alone, no events
        assert order == [("tools", 0, "tool_call"), ("tools", 1, "tool_call")]
    else:
        assert order == [
            ("agent", 0, "progress"),
            ("agent", 1, "reasoning"),
            ("agent", 2, "llm_request"),
            ("agent", 3, "progress"),
            ("tools", 0, "tool_call"),
            ("agent", 5, "progress"),
            ("tools", 1, "tool_call"),
            ("agent", 7, "progress"),
            ("agent", 8, "llm_request"),
            ("agent", 9, "artifact_created"),
        ]
        assert kept[8]["payload"]["model"] == "spec-model-1" and kept[7]["payload"]["current_step"] == 4
    assert [e["event_type"] for e in run["events"]] == [e["event_type"] for e in kept]
    search = next(e for e in kept if e.get("recorded_by") == "tools")
    assert search["payload"]["output"] == {"results": [{"title": "Microsoft Teams"}, {"title": "Discord"}]}
    # the secret: the agent got it (its hash matched), and no output holds it
    assert {"results.json", "report.html", "report.xml"} <= set(files)
    for name, text in {"stdout": result.stdout, "stderr": result.stderr, **files}.items():
        assert KEY not in text and KEY[3:-3] not in text, name


def test_without_the_secret_the_agent_refuses_as_expected(project: Path) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=without",
        "--test=refuses_without_the_key",
        "--output=console,json:results.json",
        cwd=project,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run(project)
    assert run["status"] == "failed" and run["outcome"] == "passed", run
    assert run["error_code"] == "INVALID_REQUEST" and run["error_details"] == {"missing": ["SEARCH_API_KEY"]}
    assert [(c["name"], c["passed"]) for c in run["checks"]] == [("expect", True), ("no_errors", True)]
    answered = run["checks"][0]["details"]["actual"]
    assert answered["error"] == "SEARCH_API_KEY is missing from context.environment"
    # the same test against the agent that has its key: it completes, so the expectation fails
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=agent",
        "--test=refuses_without_the_key",
        "--output=json:results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    run = only_run(project)
    assert run["status"] == "completed" and run["outcome"] == "failed"


def test_validate_probes_with_the_tests_tools_and_the_secret(project: Path, served: tuple[str, int]) -> None:
    """`atp validate suite.yaml` probes with the test's task, its context.environment and its
    tool server started, as `atp test` runs it: the agent (no /health endpoint over http, as the
    protocol asks for none) passes every check, and the secret is shown nowhere."""
    result = atp("validate", "suite.yaml", "--agent=agent", "--test=competitor_report", cwd=project)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "note: the test's services (tools) are started for the probe, as for a run" in result.stdout
    assert re.search(r"PASS +reachable ", result.stdout), output
    assert re.search(r"PASS +answers a probe +status completed", result.stdout), output
    events = "no events" if served[0] == "http-sync" else "10 valid events, sequence 0 to 9"
    assert re.search(rf"PASS +events +{events}", result.stdout), output
    assert "note: the test's tool server answered the agent's calls: web_search, file_write" in result.stdout
    assert re.search(r"PASS +refuses a malformed request ", result.stdout), output
    assert result.stdout.rstrip().endswith("All 5 checks passed: agent speaks ATP."), output
    assert KEY not in output and KEY[3:-3] not in output
