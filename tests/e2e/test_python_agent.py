"""`atp test` with `type: python` agents, as a user runs it: the real `atp` command, the agent a
module next to the suite (no `path:`), ATP started from another folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ATP, write


def atp(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)  # the agent's module is found through the suite's folder only
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


SYNC_AGENT = """
import time


def run(request, emit):
    emit({"event_type": "tool_call", "payload": {"tool": "web_search", "input": {"q": "hello"}}})
    time.sleep(0.01)  # a blocking call: this function runs in a worker thread
    if "crash" in request.task.description:
        raise ValueError("asked to crash")
    emit({"event_type": "progress", "payload": {"message": "writing", "percentage": 90}})
    return {
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"text": "hello world"}}],
        "metrics": {"total_steps": 2},
    }
"""

ASYNC_AGENT = """
import anyio

from atp.core.protocol import ATPResponse, Metrics, StructuredArtifact, ToolCallPayload, make_event


async def run(request, emit):
    emit(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    await anyio.sleep(0.01)
    if "crash" in request.task.description:
        raise ValueError("asked to crash")
    return ATPResponse(version="1.0", task_id=request.task_id, status="completed",
                       artifacts=[StructuredArtifact(name="result", data={"text": "hello world"})],
                       metrics=Metrics(total_steps=2))
"""

BROKEN_AGENT = """
import os

KEY = os.environ["NO_SUCH_VARIABLE_FOR_THE_AGENT"]


def run(request, emit):
    raise AssertionError("never imported")
"""

HANGING_AGENT = """
import threading


def run(request, emit):
    if "hang" in request.task.description:
        threading.Event().wait()  # forever: no timeout can stop a thread
    return {"status": "completed", "artifacts": [{"type": "structured", "name": "result", "data": {}}],
            "metrics": {}}
"""

SUITE = """
test_suite: python_agents
agents:
  - {name: sync-agent, type: python, callable: sync_agent:run}
  - {name: async-agent, type: python, callable: async_agent:run}
  - {name: broken-agent, type: python, callable: broken_agent:run}
  - {name: missing-agent, type: python, callable: no_such_agent_module:run}
tests:
  - id: answers
    tags: [ok]
    task: {description: "say hello"}
    assertions:
      - {type: artifact_exists, config: {name: result}}
      - {type: contains, config: {name: result, pattern: hello}}
      - {type: must_use_tools, config: {tools: [web_search]}}
  - id: wrong_answer
    task: {description: "say goodbye"}
    assertions:
      - {type: contains, config: {name: result, pattern: goodbye}}
  - id: crashes
    task: {description: "crash now"}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The suite and its agents in suites/; ATP runs from the folder above."""
    suites = tmp_path / "suites"
    write(suites / "suite.yaml", SUITE)
    write(suites / "sync_agent.py", SYNC_AGENT)
    write(suites / "async_agent.py", ASYNC_AGENT)
    write(suites / "broken_agent.py", BROKEN_AGENT)
    write(suites / "hanging_agent.py", HANGING_AGENT)
    return tmp_path


@pytest.mark.parametrize("agent", ["sync-agent", "async-agent"])
def test_a_python_agent_next_to_the_suite_passes_and_fails_tests(project: Path, agent: str) -> None:
    module = agent.replace("-", "_")
    result = atp(
        "test",
        "--suite=suites/suite.yaml",
        f"--agent={agent}",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert f"Agent: {agent} (python)" in out
    assert "  ✓ answers" in out and "  ✗ wrong_answer" in out and "  ✗ crashes" in out
    source = SYNC_AGENT if agent == "sync-agent" else ASYNC_AGENT
    line = source.lstrip("\n").splitlines().index('        raise ValueError("asked to crash")') + 1
    assert (
        f"    - failed: the agent function {module}:run raised ValueError: asked to crash (at {module}.py:{line})"
        in out
    )
    assert "Summary: 1 passed, 2 failed, 0 skipped" in out
    assert "Traceback" not in result.stderr
    results = json.loads((project / "results.json").read_text())
    runs = {test["id"]: test["runs"][0] for test in results["tests"]}
    assert runs["answers"]["trace"]["tool_calls"] == {"web_search": 1}
    # the traceback of the crash is in the run's log
    run_dir = next((project / ".atp" / "runs").iterdir())
    log = (run_dir / runs["crashes"]["log_file"]).read_text()
    assert log.startswith("Traceback (most recent call last):") and log.endswith(
        "ValueError: asked to crash\n"
    )


def test_the_passing_tests_alone_exit_0(project: Path) -> None:
    result = atp("test", "--suite=suites/suite.yaml", "--agent=sync-agent", "--tags=ok", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Summary: 1 passed, 0 failed, 0 skipped" in result.stdout


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            "broken-agent",
            "atp: error: agent 'broken-agent': cannot import 'broken_agent:run': importing module "
            "'broken_agent' raised KeyError: 'NO_SUCH_VARIABLE_FOR_THE_AGENT' (at broken_agent.py:3)",
        ),
        (
            "missing-agent",
            "atp: error: agent 'missing-agent': cannot import 'no_such_agent_module:run': no module "
            "named 'no_such_agent_module' in the folders Python looks in ({suites} (the agent's folder), ",
        ),
    ],
)
def test_an_agent_that_cannot_be_imported_stops_the_suite_with_exit_2(
    project: Path, agent: str, message: str
) -> None:
    result = atp("test", "--suite=suites/suite.yaml", f"--agent={agent}", cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(message.format(suites=project / "suites"))
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert "✓" not in result.stdout and "✗" not in result.stdout


def test_a_function_that_never_returns_times_out_and_atp_still_exits(project: Path) -> None:
    write(
        project / "suites" / "hang.yaml",
        """
        test_suite: hang
        agents:
          - {name: hanging-agent, type: python, callable: hanging_agent:run, timeout: 1}
        tests:
          - id: hangs
            task: {description: "hang"}
          - id: answers
            task: {description: "answer"}
        """,
    )
    result = atp("test", "--suite=suites/hang.yaml", cwd=project, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "  ✗ hangs" in result.stdout and "  ✓ answers" in result.stdout
    assert "timed out after 1 s" in result.stdout


def test_atp_plugins_lists_the_python_adapter(tmp_path: Path) -> None:
    result = atp("plugins", cwd=tmp_path)
    assert result.returncode == 0 and "adapters: cli, python" in result.stdout
