"""`atp test` with `type: langgraph` agents, as a user runs it: the real `atp` command, real
LangGraph graphs (tests/agents/langgraph_agent.py, examples/langgraph/) whose scripted fake chat
model calls real tools, judged by behaviour assertions on the translated events."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph adapter needs atp-adapters[langgraph]")

from tests.conftest import AGENTS, ATP, EXAMPLES, write

SUITE = f"""
test_suite: langgraph_e2e
agents:
  - name: react
    type: langgraph
    module: langgraph_agent
    graph: graph
    path: [{AGENTS}]
  - name: crashing
    type: langgraph
    module: langgraph_agent
    graph: raising_graph
    path: [{AGENTS}]
  - name: looping
    type: langgraph
    module: langgraph_agent
    graph: looping_graph
    path: [{AGENTS}]
    config: {{recursion_limit: 4}}
tests:
  - id: calculates
    task: {{description: "add 2 and 3, multiply 4 and 5"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [add, multiply]}}}}
      - {{type: max_tool_calls, config: {{limit: 2}}}}
      - {{type: tool_called_with, config: {{tool: add, input: {{a: 2, b: 3}}}}}}
      - {{type: contains, config: {{path: answer.md, pattern: "The answer is 20"}}}}
  - id: too_many_tools
    task: {{description: "add 1 and 1, add 2 and 2, multiply 3 and 3"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [add]}}}}
      - {{type: max_tool_calls, config: {{limit: 2}}}}
  - id: never_divides
    task: {{description: "multiply 6 and 7"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [divide]}}}}
      - {{type: contains, config: {{path: answer.md, pattern: "42"}}}}
"""


def atp(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)  # the agent's module is found through the agent's `path` only
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def runs(results: dict[str, Any]) -> dict[str, Any]:
    return {test["id"]: test["runs"][0] for test in results["tests"]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "suite.yaml", SUITE)
    return tmp_path


def test_behaviour_assertions_judge_the_events_of_a_langgraph_agent(project: Path) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--agent=react",
        "--parallel=3",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "Agent: react (langgraph)" in out
    assert "  ✓ calculates" in out and "  ✗ too_many_tools" in out and "  ✗ never_divides" in out
    assert "    - max_tool_calls: expected at most 2 tool calls; made 3 (add ×2, multiply ×1)" in out
    assert "    - must_use_tools: expected calls to divide; not called: divide (called: multiply ×1)" in out
    assert "Summary: 1 passed, 2 failed, 0 skipped" in out
    found = runs(json.loads((project / "results.json").read_text()))
    run = found["calculates"]
    assert run["trace"]["tool_calls"] == {"add": 1, "multiply": 1}
    assert run["metrics"] == {
        "total_tokens": 60,
        "input_tokens": 42,
        "output_tokens": 18,
        "total_steps": 3,
        "tool_calls": 2,
        "llm_calls": 2,
        "wall_time_seconds": run["metrics"]["wall_time_seconds"],
    }
    run_dir = next((project / ".atp" / "runs").iterdir())
    events = [json.loads(line) for line in (run_dir / run["events_file"]).read_text().splitlines()]
    assert [event["sequence"] for event in events] == list(range(8))
    assert {event["task_id"] for event in events} == {run["task_id"]}
    assert [event["payload"]["to_state"] for event in events if event["event_type"] == "state_change"] == [
        "agent",
        "tools",
        "agent",
        "__end__",
    ]
    calls = sorted(
        (event["payload"] for event in events if event["event_type"] == "tool_call"), key=lambda p: p["tool"]
    )
    assert [(call["tool"], call["input"], call["output"], call["status"]) for call in calls] == [
        ("add", {"a": 2.0, "b": 3.0}, "5.0", "success"),
        ("multiply", {"a": 4.0, "b": 5.0}, "20.0", "success"),
    ]
    assert all(isinstance(call["duration_ms"], float) for call in calls)
    llm = [event["payload"] for event in events if event["event_type"] == "llm_request"]
    assert [(call["model"], call["input_tokens"], call["output_tokens"]) for call in llm] == [
        ("scripted-model", 12, 8),
        ("scripted-model", 30, 10),
    ]
    assert found["too_many_tools"]["metrics"]["tool_calls"] == 3


@pytest.mark.parametrize(
    ("agent", "error"),
    [
        ("crashing", "the graph raised ValueError: the model said no in node 'crash' (at "),
        (
            "looping",
            "the graph hit its recursion limit of 4 steps without reaching its end (GraphRecursionError)",
        ),
    ],
)
def test_a_graph_that_fails_fails_its_runs_with_an_error_event(project: Path, agent: str, error: str) -> None:
    result = atp(
        "test",
        "--suite=suite.yaml",
        f"--agent={agent}",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"    - failed: {error}" in result.stdout
    assert "Traceback" not in result.stderr
    run = runs(json.loads((project / "results.json").read_text()))["calculates"]
    assert run["status"] == "failed" and run["error"].startswith(error)
    assert run["trace"]["by_type"]["error"] == 1
    assert run["metrics"]["total_steps"] == (2 if agent == "crashing" else 4)
    if agent == "crashing":
        run_dir = next((project / ".atp" / "runs").iterdir())
        log = (run_dir / run["log_file"]).read_text()
        assert log.startswith("Traceback (most recent call last):") and "ValueError: the model said no" in log


def test_the_example_suite_passes(tmp_path: Path) -> None:
    result = atp("test", f"--suite={EXAMPLES / 'langgraph' / 'suite.yaml'}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Agent: langgraph-calculator (langgraph)" in result.stdout
    assert "Summary: 3 passed, 0 failed, 0 skipped (100.0%)" in result.stdout


def test_an_agent_module_that_is_not_there_stops_the_suite_with_exit_2(project: Path) -> None:
    write(
        project / "missing.yaml",
        """
        test_suite: missing
        agents:
          - {name: g, type: langgraph, module: no_such_graph_module}
        tests:
          - id: t
            task: {description: x}
        """,
    )
    result = atp("test", "--suite=missing.yaml", cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "atp: error: agent 'g': cannot import 'no_such_graph_module:graph': no module named 'no_such_graph_module'"
    )
    assert "Traceback" not in result.stderr


def test_a_plain_def_node_that_never_returns_times_out_and_atp_still_exits(project: Path) -> None:
    write(
        project / "stuck.yaml",
        f"""
        test_suite: stuck
        agents:
          - {{name: stuck, type: langgraph, module: langgraph_agent, graph: stuck_graph, path: [{AGENTS}], timeout: 1}}
        tests:
          - id: hangs
            task: {{description: "hang"}}
        """,
    )
    result = atp("test", "--suite=stuck.yaml", cwd=project, timeout=50)  # its thread waits 60 s
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "  ✗ hangs" in result.stdout
        and "    - timeout: timed out after 1 s; the agent was stopped" in result.stdout
    )


def test_sys_exit_in_a_node_fails_its_runs_and_atp_goes_on(project: Path) -> None:
    write(
        project / "exits.yaml",
        f"""
        test_suite: exits
        agents:
          - {{name: exits, type: langgraph, module: langgraph_agent, graph: async_exiting_graph, path: [{AGENTS}]}}
        tests:
          - id: first
            task: {{description: "one"}}
          - id: second
            task: {{description: "two"}}
        """,
    )
    result = atp("test", "--suite=exits.yaml", cwd=project, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.count("    - failed: the graph called sys.exit(4) (at ") == 2
    assert "Summary: 0 passed, 2 failed, 0 skipped" in result.stdout


def test_an_async_node_blocking_in_sync_code_times_out_on_time_and_atp_exits(project: Path) -> None:
    write(
        project / "ablock.yaml",
        f"""
        test_suite: ablock
        agents:
          - {{name: ablock, type: langgraph, module: langgraph_agent, graph: async_blocking_graph, path: [{AGENTS}], timeout: 2}}
        tests:
          - id: blocks
            task: {{description: "block"}}
          - id: blocks_too
            task: {{description: "block"}}
        """,
    )
    started = time.monotonic()
    result = atp(
        "test",
        "--suite=ablock.yaml",
        "--output=console,json",
        "--output-file=results.json",
        cwd=project,
        timeout=50,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.count("timeout: timed out after 2 s; the agent was stopped") == 2
    assert elapsed < 15  # not the 120 s the node blocks
    for run in runs(json.loads((project / "results.json").read_text())).values():
        assert run["metrics"]["wall_time_seconds"] < 2.6
