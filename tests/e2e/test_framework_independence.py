"""Framework independence (REQ-001, ADR-001): one suite file, examples/frameworks/suite.yaml,
run unchanged with only `--agent` changed, against a native ATP agent and the example agents of
the langgraph, crewai, term-sdk and agent-interface adapters. Every run must pass the same
tests with the same checks, and its trace must hold the tool call that did the arithmetic,
whatever the framework calls the tool."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ATP, EXAMPLES, ROOT

SUITE = EXAMPLES / "frameworks" / "suite.yaml"

TESTS = {"adds_two_numbers": "passed", "adds_larger_numbers": "passed"}
"""The suite's tests, and the status each must have for every agent."""
CHECKS = ["the_answer", "behavior:min_tool_calls", "behavior:max_tool_calls", "behavior:no_errors"]
"""The checks of every run: the same for every agent."""
NUMBERS = {"adds_two_numbers": (17, 25), "adds_larger_numbers": (1234, 5678)}

AGENTS = {
    # agent: (its adapter, the tool that does the arithmetic, how many calls of it a run makes)
    "native": ("cli", "add", 1),
    "langgraph": ("langgraph", "add", 1),
    "crewai": ("crewai", "calculator", 1),
    "term-sdk": ("term-sdk", "shell", 2),  # computes into answer.txt, then reads it back
    "agent-interface": ("agent-interface", "add", 1),
}


def atp(*args: str, data: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The real `atp`, from the repository's root as the suite's comments say to run it;
    CrewAI's own files go to ``data``."""
    env = {**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": str(data)}
    for variable in ("PYTHONPATH", "CREWAI_DISABLE_TELEMETRY", "CREWAI_TRACING_ENABLED"):
        env.pop(variable, None)
    return subprocess.run([ATP, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def tool_calls(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [event["payload"] for event in run["events"] if event["event_type"] == "tool_call"]


def test_the_suite_defines_one_agent_of_each_kind() -> None:
    text = SUITE.read_text()
    for name, (adapter, _, _) in AGENTS.items():
        assert f"  - name: {name}\n    type: {adapter}\n" in text


@pytest.mark.parametrize("agent", list(AGENTS))
def test_the_same_suite_passes_for_every_agent(agent: str, tmp_path: Path) -> None:
    adapter, tool, calls = AGENTS[agent]
    results = tmp_path / "results.json"
    result = atp(
        "test",
        f"--suite={SUITE.relative_to(ROOT)}",
        f"--agent={agent}",
        f"--run-dir={tmp_path / 'runs'}",
        f"--output=console,json:{results}",
        data=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Agent: {agent} ({adapter})" in result.stdout
    assert "Summary: 2 passed, 0 failed, 0 skipped (100.0%)" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr

    report = json.loads(results.read_text())
    assert (report["suite"], report["agent"], report["agent_type"]) == (
        "framework_independence",
        agent,
        adapter,
    )
    assert {test["id"]: test["status"] for test in report["tests"]} == TESTS
    for test in report["tests"]:
        [run] = test["runs"]
        assert [check["name"] for check in run["checks"]] == CHECKS
        assert all(check["passed"] for check in run["checks"]), run["checks"]
        # the tool call that did the arithmetic, in the trace and in the metrics
        assert run["trace"]["tool_calls"] == {tool: calls}
        assert run["metrics"]["tool_calls"] == calls
        made = tool_calls(run)
        assert [call["tool"] for call in made] == [tool] * calls
        a, b = NUMBERS[test["id"]]
        if agent in ("native", "langgraph"):
            assert made[0]["input"] == {"a": a, "b": b}
        elif agent == "crewai":
            assert made[0]["input"] == {"expression": f"{a} + {b}"}
        elif agent == "term-sdk":
            assert made[0]["input"] == {"command": f"echo $(( {a} + {b} )) > answer.txt"}
            assert made[1]["output"]["output"].strip() == str(a + b)
        # (an Agent Interface answer names the tools it used, without their inputs)
