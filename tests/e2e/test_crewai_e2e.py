"""`atp test` with `type: crewai` agents, as a user runs it: the real `atp` command and the real
CrewAI, offline (the crews think with a scripted model and call real tools). CrewAI takes
seconds to import, so each test here is one `atp test` process doing several things."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import AGENTS, ATP, EXAMPLES, ROOT, write

SUITE = f"""
test_suite: crewai_e2e
agents:
  - name: calculator-crew
    type: crewai
    module: crewai_agent
    crew: e2e_crew
    path: [{AGENTS}]
tests:
  - id: squares
    task: {{description: "Add 2 and 3 and square the sum"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [add, multiply]}}}}
      - {{type: max_tool_calls, config: {{limit: 2}}}}
      - {{type: contains, config: {{path: output.md, pattern: "The result is 25."}}}}
      - {{type: behavior, config: {{no_errors: true, max_steps: 3}}}}
      - {{type: contains, config: {{name: solve, pattern: "The result is 25."}}}}
  - id: squares_with_one_tool_call
    task: {{description: "Add 4 and 5 and square the sum"}}
    assertions:
      - {{type: max_tool_calls, config: {{limit: 1}}}}
      - {{type: contains, config: {{path: output.md, pattern: "The result is 81."}}}}
  - id: never_divides
    task: {{description: "Add 1 and 1 and square the sum"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [add, divide]}}}}
  - id: crashes
    task: {{description: "Add 1 and 2, then crash"}}
  - id: times_out
    task: {{description: "Add 1 and 2, but wait first"}}
    constraints: {{timeout_seconds: 2}}
"""


def atp(*args: str, cwd: Path, data: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The real `atp`; CrewAI's own files (its latest kickoff's outputs) go to ``data``."""
    env = {**os.environ, "NO_COLOR": "1", "XDG_DATA_HOME": str(data)}
    for variable in ("PYTHONPATH", "CREWAI_DISABLE_TELEMETRY", "CREWAI_TRACING_ENABLED"):
        env.pop(variable, None)  # the adapter switches telemetry off itself
    return subprocess.run([ATP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def runs_of(results: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(results.read_text())
    return {test["id"]: test["runs"][0] for test in data["tests"]}


def payloads(run: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
    return [event["payload"] for event in run["events"] if event["event_type"] == event_type]


def test_a_crew_passes_and_fails_behaviour_and_output_checks(tmp_path: Path) -> None:
    """Five tests, two at a time: the tool calls CrewAI reported are what `must_use_tools` and
    `max_tool_calls` count, the final output is what `contains` reads, and the JSON results
    hold each run's events and metrics; a crew that raises fails its run with the exception; a
    crew still running at its time limit (its tool waits a minute) times out, and `atp` ends
    without waiting for it."""
    write(tmp_path / "suite.yaml", SUITE)
    started = time.monotonic()
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--parallel=2",
        "--output=console,json",
        "--output-file=results.json",
        cwd=tmp_path,
        data=tmp_path / "crewai-data",
    )
    assert time.monotonic() - started < 40
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "Agent: calculator-crew (crewai)" in out
    assert "  ✓ squares" in out and "  ✗ squares_with_one_tool_call" in out
    assert "  ✗ never_divides" in out and "  ✗ crashes" in out and "  ✗ times_out" in out
    assert "Summary: 1 passed, 4 failed, 0 skipped" in out
    assert "    - max_tool_calls: expected at most 1 tool calls; made 2 (add ×1, multiply ×1)" in out
    assert (
        "    - must_use_tools: expected calls to add, divide; not called: divide (called: add ×1, multiply ×1)"
        in out
    )
    source = (AGENTS / "crewai_agent.py").read_text().splitlines()
    line = next(number for number, text in enumerate(source, 1) if "raise step" in text)
    where = AGENTS / "crewai_agent.py"  # (outside the suite's folder: named in full)
    assert (
        f"    - failed: the crew crewai_agent:e2e_crew raised RuntimeError: asked to crash (at {where}:{line})"
        in out
    )
    assert "Traceback" not in result.stderr

    runs = runs_of(tmp_path / "results.json")
    squares = runs["squares"]
    assert squares["outcome"] == "passed" and squares["status"] == "completed"
    assert squares["metrics"] == {
        "total_tokens": 360,
        "input_tokens": 300,
        "output_tokens": 60,
        "total_steps": 3,
        "tool_calls": 2,
        "llm_calls": 3,
        "wall_time_seconds": squares["metrics"]["wall_time_seconds"],
    }
    assert squares["trace"]["tool_calls"] == {"add": 1, "multiply": 1}
    assert squares["trace"]["by_type"] == {
        "state_change": 1,
        "llm_request": 3,
        "tool_call": 2,
        "reasoning": 3,
        "progress": 1,
    }
    assert [(t["tool"], t["input"], t["output"], t["status"]) for t in payloads(squares, "tool_call")] == [
        ("add", {"a": 2, "b": 3}, "5", "success"),
        ("multiply", {"a": 5, "b": 5}, "25", "success"),
    ]
    assert {
        (c["model"], c["input_tokens"], c["output_tokens"]) for c in payloads(squares, "llm_request")
    } == {("scripted/e2e", 100, 20)}
    assert payloads(squares, "state_change") == [{"to_state": "Calculator", "reason": "task: solve"}]
    assert [(a.get("path") or a.get("name")) for a in squares["artifacts"]] == ["output.md", "solve"]
    assert squares["artifacts"][0]["content"] == "The result is 25."

    other = runs["squares_with_one_tool_call"]  # ran beside another run: its own events only
    assert [t["input"] for t in payloads(other, "tool_call")] == [{"a": 4, "b": 5}, {"a": 9, "b": 9}]
    assert {event["task_id"] for event in other["events"]} == {other["task_id"]}

    crashed = runs["crashes"]
    assert crashed["outcome"] == "failed"
    assert crashed["error"].startswith("the crew crewai_agent:e2e_crew raised RuntimeError: asked to crash")
    errors = payloads(crashed, "error")
    assert errors[-1] == {"error_type": "RuntimeError", "message": "asked to crash", "recoverable": False}
    assert crashed["trace"]["unrecoverable_errors"] == 1
    timed_out = runs["times_out"]
    assert timed_out["status"] == "timeout"
    assert [event["event_type"] for event in timed_out["events"]] == ["state_change", "llm_request"]
    assert timed_out["warnings"] == [
        "the crew crewai_agent:e2e_crew was still running when its run ended; Python cannot stop a thread, "
        "so it runs on in the background (what it does from now on is not recorded)"
    ]
    run_dir = next((tmp_path / ".atp" / "runs").iterdir())
    log = (run_dir / crashed["log_file"]).read_text()
    assert log.startswith("Traceback (most recent call last):") and log.endswith(
        "RuntimeError: asked to crash\n"
    )
    assert list((tmp_path / "crewai-data").iterdir())  # CrewAI's own files, not in the home folder


HOSTILE = f"""
test_suite: crewai_hostile
agents:
  - name: hostile-crew
    type: crewai
    module: crewai_agent
    crew: flood_crew
    path: [{AGENTS}]
  - name: human-crew
    type: crewai
    module: crewai_agent
    crew: human_input_crew
    path: [{AGENTS}]
  - name: exiting-crew
    type: crewai
    module: crewai_agent
    crew: exiting_tool_crew
    path: [{AGENTS}]
tests:
  - id: t
    task: {{description: "Add 1 and 2"}}
    constraints: {{timeout_seconds: 50}}
"""

TELEMETRY_ON = f"""
test_suite: crewai_telemetry
agents:
  - name: traced-crew
    type: crewai
    module: crewai_agent
    crew: calculator_crew
    path: [{AGENTS}]
    telemetry: true
tests:
  - id: t
    task: {{description: "2 and 3"}}
"""


def test_a_flood_ends_its_run_at_once_and_human_input_is_refused(tmp_path: Path) -> None:
    """With `limits: {max_events: 20}`, a crew that floods ATP (and would then wait a minute)
    fails its run at once with the flood, not at its time limit; a crew asking for human input
    is refused without reading ATP's stdin; a tool that exits is a failed call. A later suite's
    agent with `telemetry: true` is warned that the first crewai agent decided."""
    write(tmp_path / "atp.config.yaml", "limits: {max_events: 20}\n")
    write(tmp_path / "hostile.yaml", HOSTILE)
    write(tmp_path / "telemetry.yaml", TELEMETRY_ON)
    results: dict[str, dict[str, Any]] = {}
    for agent in ("hostile-crew", "human-crew", "exiting-crew"):
        started = time.monotonic()
        result = atp(
            "test",
            "--suite=hostile.yaml",
            f"--agent={agent}",
            "--output=console,json",
            f"--output-file={agent}.json",
            cwd=tmp_path,
            data=tmp_path / "crewai-data",
        )
        assert time.monotonic() - started < 40, agent
        assert result.returncode == 1, result.stdout + result.stderr
        results[agent] = runs_of(tmp_path / f"{agent}.json")["t"]
    flooded = results["hostile-crew"]
    assert (flooded["status"], flooded["error"]) == (
        "failed",
        "agent flooded ATP with events: more than 20 in one run",
    )
    assert flooded["warnings"] == [
        "the crew crewai_agent:flood_crew was still running when its run ended; Python cannot stop a thread, "
        "so it runs on in the background (what it does from now on is not recorded)"
    ]
    human = results["human-crew"]
    assert human["error"].startswith(
        "the crew crewai_agent:human_input_crew has a task that asks for human input"
    )
    assert [e["event_type"] for e in human["events"]] == ["error"]
    exiting = results["exiting-crew"]
    assert exiting["error"].startswith("the crew crewai_agent:exiting_tool_crew called sys.exit(3)")
    assert [(t["status"], t["error"]) for t in payloads(exiting, "tool_call")] == [
        ("error", "the tool did not return")
    ]

    write(
        tmp_path / "quiet.yaml",
        TELEMETRY_ON.replace("traced-crew", "quiet-crew").replace("    telemetry: true\n", ""),
    )
    result = atp(
        "test", "--suite=quiet.yaml", "--suite=telemetry.yaml", cwd=tmp_path, data=tmp_path / "crewai-data"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "atp: warning: agent 'traced-crew': 'telemetry: true' has no effect: CrewAI's telemetry and tracing were "
        "already switched off for this atp process by agent 'quiet-crew'"
    ) in result.stderr, result.stdout + result.stderr


def test_the_example_suite_passes(tmp_path: Path) -> None:
    """examples/crewai, as its suite says to run it (from the repository's root)."""
    result = atp(
        "test",
        f"--suite={EXAMPLES / 'crewai' / 'suite.yaml'}",
        f"--run-dir={tmp_path / 'runs'}",
        "--output=console,json",
        f"--output-file={tmp_path / 'results.json'}",
        cwd=ROOT,
        data=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Agent: research-crew (crewai)" in result.stdout
    assert "Summary: 2 passed, 0 failed, 0 skipped (100.0%)" in result.stdout
    runs = runs_of(tmp_path / "results.json")
    slack = runs["slack_competitors"]
    assert slack["trace"]["tool_calls"] == {"read_table": 1, "calculator": 1}
    assert (
        slack["metrics"]["llm_calls"],
        slack["metrics"]["tool_calls"],
        slack["metrics"]["input_tokens"],
    ) == (4, 2, 600)
    assert [p["to_state"] for p in payloads(slack, "state_change")] == ["Market analyst", "Report writer"]
    assert [p["input"] for p in payloads(slack, "tool_call")] == [
        {"name": "market.csv"},
        {"expression": "44 + 12 + 9"},
    ]
    assert [(a.get("path") or a.get("name")) for a in slack["artifacts"]] == [
        "output.md",
        "research",
        "report",
    ]
    research = next(a for a in slack["artifacts"] if a.get("name") == "research")
    assert research["data"]["json"] == {
        "company": "Slack",
        "market": "team chat",
        "combined_share": 65.0,
        "competitors": {"Microsoft Teams": 44.0, "Google Chat": 12.0, "Discord": 9.0},
    }
