"""The cli adapter with real agent processes over stdin/stdout/stderr."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from atp.adapters.cli import CliAdapter, CliSettings
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.plugins import Plugins
from atp.core.results import RunStore, SuiteResults
from atp.core.runner import Runner
from atp.core.suite import load_suite
from tests.conftest import EXAMPLES, behave_agent, write
from tests.facts import says


def run_suite(
    tmp_path: Path, plugins: Plugins, command: list[str], tests: str = "", settings: str = "", **options: Any
) -> tuple[SuiteResults, RunStore]:
    tests = tests or "  - id: t\n    task: {description: do it}\n"
    text = (
        f"test_suite: integration\nagents:\n  - name: agent\n    type: cli\n    command: {command!r}\n"
        f"    grace_seconds: 1\n{settings}tests:\n{tests}"
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", **options)
    results = anyio.run(runner.run)
    assert runner.store is not None
    return results, runner.store


def only_run(results: SuiteResults) -> Any:
    return results.tests[0].runs[0]


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for whoever adopted it to reap it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" not in status


def test_protocol_documents_minimal_agent_unchanged(tmp_path: Path, plugins: Plugins) -> None:
    tests = (
        "  - id: t\n    task: {description: Say hello}\n    assertions:\n      - type: contains\n"
        "        config: {name: result, pattern: 'Processed: Say hello'}\n"
    )
    results, store = run_suite(
        tmp_path, plugins, ["python3", str(EXAMPLES / "agents" / "minimal_agent.py")], tests
    )
    run_ = only_run(results)
    assert run_.outcome == "passed" and run_.status == "completed", run_.error
    assert run_.trace.by_type == {"progress": 2}
    assert [e.payload.message for e in store.events(run_)] == ["Starting task", "Task completed"]
    assert run_.warnings == []


@pytest.fixture
def pid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where tests/agents/behave.py writes the pid of the process it leaves running."""
    path = tmp_path / "pid"
    monkeypatch.setenv("AGENT_PID_FILE", str(path))
    return path


def gone(pid_file: Path, within: float = 5.0) -> bool:
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def timed(
    tmp_path: Path, plugins: Plugins, mode: str, tests: str = ""
) -> tuple[SuiteResults, RunStore, float]:
    started = time.monotonic()
    results, store = run_suite(tmp_path, plugins, behave_agent(mode), tests)
    return results, store, time.monotonic() - started


def test_timeout_stops_the_agent_and_keeps_its_events(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    tests = "  - id: t\n    task: {description: x}\n    constraints: {timeout_seconds: 2}\n"
    results, store, elapsed = timed(tmp_path, plugins, "sleep", tests)
    run_ = only_run(results)
    assert 1.9 < elapsed < 4.5, elapsed
    assert run_.status == "timeout"
    says(run_.error, "timed out after 2 s", "stopped")
    assert [e.event_type for e in store.events(run_)] == ["tool_call", "progress"]
    assert run_.metrics.tool_calls == 1
    assert gone(pid_file, within=0)


def test_agent_ignoring_sigterm_is_killed_after_the_grace_period(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    tests = "  - id: t\n    task: {description: x}\n    constraints: {timeout_seconds: 1}\n"
    results, _, elapsed = timed(tmp_path, plugins, "sleep_ignoring_term", tests)
    assert only_run(results).status == "timeout"
    assert 1.9 < elapsed < 4.5, elapsed  # 1 s timeout + 1 s grace
    assert gone(pid_file, within=0)


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("crash", "agent exited with code 3 without writing a response on stdout"),
        (
            "garbage",
            "agent exited with code 0; its last stdout line is not an ATP response (ATP response is not valid JSON",
        ),
        ("wrong_task_id", "agent answered with task_id '11111111-2222-3333-4444-555555555555'"),
        ("version2", "ATP response: protocol version 2.0 is not supported; ATP speaks version 1.x"),
    ],
)
def test_misbehaving_agent_fails_its_run_and_the_rest_go_on(
    tmp_path: Path, plugins: Plugins, mode: str, error: str
) -> None:
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(3))
    results, _ = run_suite(tmp_path, plugins, behave_agent(mode), tests)
    assert [t.status for t in results.tests] == ["failed"] * 3
    for test in results.tests:
        run_ = test.runs[0]
        assert run_.status == "failed" and run_.error is not None and error in run_.error, run_.error


def test_crash_keeps_the_agents_log(tmp_path: Path, plugins: Plugins) -> None:
    results, store = run_suite(tmp_path, plugins, behave_agent("crash"))
    run_ = only_run(results)
    assert run_.log_tail[-1] == "RuntimeError: the agent broke"
    assert "Traceback" in store.log(run_)


def test_stdout_noise_before_the_response_is_kept_as_log(tmp_path: Path, plugins: Plugins) -> None:
    results, store = run_suite(tmp_path, plugins, behave_agent("noisy_stdout"))
    run_ = only_run(results)
    assert run_.outcome == "passed"
    assert run_.warnings == [
        "2 stdout lines before the response were kept as the agent's log; stdout is for the response: "
        "write logs to stderr"
    ]
    assert store.log(run_) == "[stdout] starting up\n[stdout] loading model\n"


def test_tens_of_thousands_of_events(tmp_path: Path, plugins: Plugins) -> None:
    tests = (
        "  - id: t\n    task: {description: x}\n    assertions:\n      - type: max_tool_calls\n"
        "        config: {limit: 50000}\n"
    )
    results, store = run_suite(tmp_path, plugins, behave_agent("flood", "30000"), tests)
    run_ = only_run(results)
    assert run_.outcome == "passed" and run_.trace.events == 30000
    assert run_.trace.tool_calls == {"web_search": 30000} and run_.trace.out_of_order == 0
    assert sum(1 for _ in store.events(run_)) == 30000


def test_event_flood_beyond_the_limit_fails_and_stops_the_agent(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run_suite(tmp_path, plugins, behave_agent("flood", "5000"), max_events=1000)
    run_ = only_run(results)
    assert run_.status == "failed"
    says(run_.error, "flooded", "events", "more than 1000")


def test_overlong_stderr_line_is_cut(tmp_path: Path, plugins: Plugins) -> None:
    results, store = run_suite(
        tmp_path, plugins, behave_agent("long_line"), settings="    max_line_bytes: 1048576\n"
    )
    run_ = only_run(results)
    assert run_.outcome == "passed"
    assert run_.warnings == ["a stderr line longer than 1048576 bytes was cut"]
    assert max(len(line) for line in store.log(run_).splitlines()) <= 1048576


def test_missing_command_stops_the_suite_before_any_run(tmp_path: Path, plugins: Plugins) -> None:
    from atp.core.errors import AdapterError

    with pytest.raises(AdapterError) as info:
        run_suite(tmp_path, plugins, ["/nonexistent/agent-binary"])
    says(str(info.value), "agent 'agent'", "cannot start '/nonexistent/agent-binary'", "does not exist")


def test_cwd_env_and_relative_command(tmp_path: Path, plugins: Plugins) -> None:
    (tmp_path / "work").mkdir()
    settings = CliSettings(
        command=f"{behave_agent('env')[0]} ../agents/behave.py env", cwd="work", env={"ATP_TEST_VALUE": "42"}
    )
    adapter = CliAdapter(settings, name="a", base_dir=tmp_path)
    assert adapter.cwd == tmp_path / "work"
    relative = CliAdapter(CliSettings(command=["./agent.sh"]), name="b", base_dir=tmp_path)
    assert relative.argv == [str(tmp_path / "agent.sh")]
    isolated = CliAdapter(
        CliSettings(command=["x"], env={"ONLY": "1"}, inherit_env=False), name="c", base_dir=tmp_path
    )
    assert isolated.env == {"ONLY": "1", "ATP_AGENT_DIR": str(tmp_path)}

    command = behave_agent("env")
    text = (
        f"test_suite: s\nagents:\n  - name: agent\n    type: cli\n    command: {command!r}\n    cwd: work\n"
        "    working_folder: shared\n"  # (every run in cwd; by default each in its own folder)
        f"    env: {{ATP_TEST_VALUE: '42'}}\ntests:\n  - id: t\n    task: {{description: x}}\n"
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs")
    data = only_run(anyio.run(runner.run)).artifacts[0].data
    assert data["cwd"] == str(tmp_path / "work") and data["env"]["ATP_TEST_VALUE"] == "42"


def test_request_reaches_the_agent_as_sent(tmp_path: Path, plugins: Plugins) -> None:
    tests = (
        "  - id: t\n    task: {description: hi, input_data: {n: 1}}\n"
        "    constraints: {max_steps: 4, allowed_tools: [a]}\n"
    )
    results, _ = run_suite(tmp_path, plugins, behave_agent("echo_request"), tests, runs=2)
    requests = [r.artifacts[0].data["request"] for r in results.tests[0].runs]
    assert requests[0]["task"] == {"description": "hi", "input_data": {"n": 1}}
    assert requests[0]["constraints"] == {"max_steps": 4, "timeout_seconds": 300, "allowed_tools": ["a"]}
    assert requests[1]["metadata"] == {
        "test_id": "t",
        "run_number": 2,
        "total_runs": 2,
        "suite": "integration",
        "run_id": results.run_id,
    }
    assert requests[0]["version"] == "1.0" and requests[0]["task_id"] != requests[1]["task_id"]


def test_parallel_agent_processes(tmp_path: Path, plugins: Plugins) -> None:
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(6))
    results, _ = run_suite(tmp_path, plugins, behave_agent("ok"), tests, parallel=3)
    assert results.summary.passed == 6


def test_leftover_process_holding_the_output_is_stopped(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    results, _, elapsed = timed(tmp_path, plugins, "orphan")
    run_ = only_run(results)
    assert run_.outcome == "passed" and elapsed < 5, (run_.error, elapsed)
    assert any("kept its output open" in w for w in run_.warnings)
    assert gone(pid_file)


def test_empty_command_is_a_located_error(tmp_path: Path, plugins: Plugins) -> None:
    from atp.core.errors import SuiteError

    with pytest.raises(SuiteError, match="'command' is empty") as info:
        run_suite(tmp_path, plugins, [])
    assert info.value.path == "agents[0]" and info.value.line == 3
