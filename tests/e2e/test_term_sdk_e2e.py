"""`atp test` and `atp validate` with Term Challenge SDK 2.0 agents (`type: term-sdk`), as a user
runs them: the example agent's suite (examples/term_sdk), and a suite of behaviour and artifact
assertions against the test agent (tests/agents/term_sdk_agent.py), each run a real agent
process on a loopback port of its own."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, EXAMPLES, PYTHON, write

pytest.importorskip("httpx", reason="the term-sdk adapter needs httpx")

SUITE = """
test_suite: term_sdk_e2e
defaults: {{timeout_seconds: 30}}
agents:
  - name: terminal
    type: term-sdk
    command: {command}
    poll_interval: 0.1
tests:
  - id: hello
    task: {{description: "complete: write hello.txt"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [shell]}}}}
      - {{type: max_tool_calls, config: {{limit: 4}}}}
      - {{type: artifact_exists, config: {{path: hello.txt}}}}
      - {{type: contains, config: {{path: hello.txt, pattern: "Hello, World!"}}}}
  - id: frugal
    task: {{description: "complete: write hello.txt in two commands"}}
    assertions:
      - {{type: max_tool_calls, config: {{limit: 2}}}}
  - id: gives_up
    task: {{description: "fail at once"}}
    assertions:
      - {{type: must_use_tools, config: {{tools: [shell]}}}}
"""


def atp(
    *args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_example_suite_passes(tmp_path: Path) -> None:
    result = atp(
        "test",
        f"--suite={EXAMPLES / 'term_sdk' / 'suite.yaml'}",
        f"--run-dir={tmp_path / 'runs'}",
        "--runs=2",
        "--parallel=4",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Agent: term-sdk-agent (term-sdk)" in result.stdout
    assert "  ✓ hello_file" in result.stdout and "  ✓ notes_file" in result.stdout
    assert "Summary: 2 passed, 0 failed, 0 skipped" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / ".atp").exists()


def test_atp_validate_passes_for_the_example_agent(tmp_path: Path) -> None:
    result = atp("validate", f"--suite={EXAMPLES / 'term_sdk' / 'suite.yaml'}", "--timeout=20", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  reachable" in result.stdout and "PASS  answers a probe" in result.stdout
    assert "FAIL" not in result.stdout
    assert "the agent speaks the Term Challenge SDK 2.0 protocol, not ATP" in result.stdout


def test_behaviour_and_artifact_assertions_on_a_term_sdk_agent(tmp_path: Path) -> None:
    write(
        tmp_path / "suite.yaml", SUITE.format(command=json.dumps([PYTHON, str(AGENTS / "term_sdk_agent.py")]))
    )
    result = atp(
        "test",
        "--suite=suite.yaml",
        "--runs=2",
        "--parallel=4",
        "--run-dir=runs",
        "--output=console,json",
        "--output-file=results.json",
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr  # frugal and gives_up fail, as they must
    out = result.stdout
    assert "Agent: terminal (term-sdk)" in out
    assert "Summary: 1 passed, 2 failed, 0 skipped" in out
    assert "Traceback" not in out + result.stderr
    tests = {
        test["id"]: test["runs"] for test in json.loads((tmp_path / "results.json").read_text())["tests"]
    }
    for run in tests["hello"]:
        assert run["outcome"] == "passed", run
        assert run["trace"]["tool_calls"] == {"shell": 4}
        assert run["metrics"]["tool_calls"] == 4 and run["metrics"]["total_steps"] == 4
        [artifact] = run["artifacts"]
        assert artifact["path"] == "hello.txt" and artifact["content"] == "Hello, World!\n"
        events_file = next((tmp_path / "runs").glob(f"*/{run['events_file']}"))
        events = [json.loads(line) for line in events_file.read_text().splitlines()]
        commands = [e["payload"]["input"]["command"] for e in events if e["event_type"] == "tool_call"]
        assert commands == [
            "ls -a",
            "echo 'Hello, World!' > hello.txt",
            "cat hello.txt",
            "test -f missing.txt",
        ]
        assert all(e["task_id"] == run["task_id"] for e in events)
    for run in tests["frugal"]:
        [check] = run["checks"]
        assert run["outcome"] == "failed" and not check["passed"]
        assert "4" in check["message"]
    for run in tests["gives_up"]:
        assert run["outcome"] == "failed" and run["status"] == "failed"
        assert run["error"] == "RuntimeError: max steps exceeded"
    assert "RuntimeError: max steps exceeded" in out


def test_deep_folders_and_a_fixed_port_another_program_holds(tmp_path: Path) -> None:
    """An agent nesting folders 1,200 deep: the run passes, with a warning, and its temporary
    folder is gone (Python 3.11's recursive os.walk and shutil.rmtree failed it). A fixed port
    another program holds: the run fails naming the port; no agent is driven."""
    import socket

    temp = tmp_path / "temp"
    temp.mkdir()
    command = json.dumps([PYTHON, str(AGENTS / "term_sdk_agent.py")])
    with socket.socket() as imposter:
        imposter.bind(("127.0.0.1", 0))
        imposter.listen()
        port = imposter.getsockname()[1]
        write(
            tmp_path / "suite.yaml",
            f"""
test_suite: term_sdk_hostile
defaults: {{timeout_seconds: 30}}
agents:
  - {{name: terminal, type: term-sdk, command: {command}, poll_interval: 0.1}}
  - {{name: fixed, type: term-sdk, command: {command}, poll_interval: 0.1, port: {port}}}
tests:
  - id: deep
    task: {{description: "deep"}}
""",
        )
        deep = atp(
            "test",
            "--suite=suite.yaml",
            "--agent=terminal",
            "--run-dir=runs",
            "-v",
            cwd=tmp_path,
            env={"TMPDIR": str(temp)},
        )
        taken = atp("test", "--suite=suite.yaml", "--agent=fixed", "--run-dir=runs", cwd=tmp_path)
    assert deep.returncode == 0, deep.stdout + deep.stderr
    assert "the workspace has folders more than 100 levels deep" in deep.stdout
    assert list(temp.iterdir()) == []
    assert "Traceback" not in deep.stdout + deep.stderr + taken.stdout + taken.stderr
    assert taken.returncode == 1, taken.stdout + taken.stderr
    assert (
        f"port {port} on 127.0.0.1 (the agent's 'port') is in use by another program already" in taken.stdout
    )
