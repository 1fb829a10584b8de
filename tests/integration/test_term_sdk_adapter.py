"""The term-sdk adapter against a real Term Challenge SDK 2.0 style agent server
(tests/agents/term_sdk_agent.py), started by the adapter as a process on loopback for each run:
completion, failure, health, the protocol's errors, lost history, the time limit, stopping an
agent that ignores SIGTERM, artifacts and parallel runs."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

pytest.importorskip("httpx", reason="the term-sdk adapter needs httpx")

from atp.adapters.term_sdk import TermSdkAdapter, TermSdkSettings, instruction
from atp.core.errors import AdapterError, AgentError, AgentRefused
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Constraints, Task
from atp.core.results import RunStore, SuiteResults
from tests.conftest import AGENTS, PYTHON, write
from tests.facts import says
from tests.network import Sink, free_port, run_agent_suite, runs_by_test

AGENT = [PYTHON, str(AGENTS / "term_sdk_agent.py")]


class LogSink(Sink):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def log(self, line: str) -> None:
        self.lines.append(line)


def settings(mode: str = "", **more: Any) -> dict[str, Any]:
    env = {**({"TERM_AGENT_MODE": mode} if mode else {}), **more.pop("env", {})}
    return {"command": AGENT, "env": env, **more}


def adapter_for(options: dict[str, Any], base_dir: Path = AGENTS) -> TermSdkAdapter:
    return TermSdkAdapter(msgspec.convert(options, TermSdkSettings), name="agent", base_dir=base_dir)


def request(description: str = "complete: say hello", **constraints: Any) -> ATPRequest:
    return ATPRequest(
        version="1.0",
        task_id=str(uuid.uuid4()),
        task=Task(description=description),
        constraints=Constraints(**{"timeout_seconds": 30, **constraints}),
    )


def execute(
    options: dict[str, Any], description: str = "complete: say hello", **constraints: Any
) -> tuple[Any, LogSink, float]:
    """One run's answer (or the exception it raised), its sink and how long it took."""
    sink = LogSink()

    async def main() -> Any:
        adapter = adapter_for(options)
        await adapter.start()
        try:
            return await adapter.execute(request(description, **constraints), sink)
        except Exception as exc:  # (the test looks at it)
            return exc
        finally:
            await adapter.aclose()

    started = time.perf_counter()
    answer = anyio.run(main)
    return answer, sink, time.perf_counter() - started


def run_suite(
    tmp_path: Path, plugins: Plugins, yaml_settings: str, tests: str, **options: Any
) -> tuple[SuiteResults, RunStore]:
    return run_agent_suite("term-sdk", tmp_path, plugins, yaml_settings, tests, **options)


def yaml_settings(mode: str = "", extra: str = "", env: dict[str, str] | None = None) -> str:
    variables = {**({"TERM_AGENT_MODE": mode} if mode else {}), **(env or {})}
    return f"    command: {json.dumps(AGENT)}\n    env: {json.dumps(variables)}\n{extra}"


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def pid_of(pidfile: Path) -> int:
    return int(pidfile.read_text())


def log_of(store: RunStore, run: Any) -> str:
    return (store.directory / run.log_file).read_text()


# --- completion ----------------------------------------------------------------------------


def test_a_completed_task_gives_shell_tool_calls_artifacts_and_metrics(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    answer, sink, _ = execute(settings(env={"TERM_AGENT_PIDFILE": str(pidfile)}))
    assert answer.status == "completed" and answer.error is None, answer
    calls = [event.payload for event in sink.seen if event.event_type == "tool_call"]
    assert [call.tool for call in calls] == ["shell"] * 4
    assert [call.input for call in calls] == [
        {"command": "ls -a"},
        {"command": "echo 'Hello, World!' > hello.txt"},
        {"command": "cat hello.txt"},
        {"command": "test -f missing.txt"},
    ]
    assert calls[2].output == {"output": "Hello, World!\n", "exit_code": 0} and calls[2].status == "success"
    assert calls[3].output == {"output": "", "exit_code": 1} and calls[3].status == "error"
    assert calls[3].error == "exit code 1"
    assert sink.sequences() == list(range(len(sink.seen)))
    changes = [
        (e.payload.from_state, e.payload.to_state) for e in sink.seen if e.event_type == "state_change"
    ]
    assert changes[0] == ("idle", "started") and changes[-1][1] == "completed"
    # the file the agent wrote in its (temporary) folder, its content kept as the folder is gone
    [artifact] = answer.artifacts
    assert (
        artifact.path == "hello.txt" and artifact.size_bytes == 14 and artifact.content == "Hello, World!\n"
    )
    assert artifact.content_hash == "sha256:c98c24b677eff44860afea6f493bbaec5bb1c4cbb209c6fc2bbb47f66ff2ad31"
    assert answer.metrics.total_steps == 4 and answer.metrics.tool_calls == 4
    assert 0 < answer.metrics.wall_time_seconds < 10
    assert sink.warnings == []
    # its stderr is the run's log; its folder is removed; the process is gone
    [listening] = [line for line in sink.lines if line.startswith("term agent listening on ")]
    assert gone(pid_of(pidfile))
    folder = Path(listening.partition(" in ")[2])
    assert folder.name.startswith("atp-term-sdk-") and not folder.exists()
    assert "(mode from the instruction)" in listening


def test_a_suite_with_behaviour_and_artifact_assertions_passes(tmp_path: Path, plugins: Plugins) -> None:
    tests = """\
  - id: hello
    task: {description: "complete: write hello.txt"}
    assertions:
      - {type: must_use_tools, config: {tools: [shell]}}
      - {type: max_tool_calls, config: {limit: 4}}
      - {type: artifact_exists, config: {path: hello.txt}}
      - {type: contains, config: {path: hello.txt, pattern: "Hello, World!"}}
  - id: too_many
    task: {description: "complete: write hello.txt"}
    assertions:
      - {type: max_tool_calls, config: {limit: 3}}
"""
    results, store = run_suite(tmp_path, plugins, yaml_settings(), tests)
    runs = runs_by_test(results)
    assert runs["hello"].outcome == "passed", (runs["hello"].error, runs["hello"].checks)
    assert runs["hello"].trace.tool_calls == {"shell": 4}
    assert runs["hello"].metrics.total_steps == 4
    assert "term agent listening on" in log_of(store, runs["hello"])
    assert runs["too_many"].outcome == "failed"


def test_the_instruction_carries_input_data_and_the_constraints(tmp_path: Path) -> None:
    answer, _, _ = execute(settings("echo"), "echo the task", max_steps=7, timeout_seconds=42)
    [artifact] = answer.artifacts
    assert artifact.path == "start.json"
    assert json.loads(artifact.content) == {
        "instruction": "echo the task",
        "max_steps": 7,
        "timeout_secs": 42,
    }
    # without max_steps: the setting's (200 by default); input_data rendered after the description
    task = ATPRequest(
        version="1.0", task_id="t", task=Task(description="Sum them", input_data={"numbers": [1, 2]})
    )
    assert instruction(task) == 'Sum them\n\nInput data (JSON):\n{\n  "numbers": [\n    1,\n    2\n  ]\n}'
    answer, _, _ = execute(settings("echo", max_steps=12), "echo again")
    assert json.loads(answer.artifacts[0].content)["max_steps"] == 12


def test_a_slow_start_is_waited_through(tmp_path: Path) -> None:
    answer, _, seconds = execute(settings("slow"), "complete: later")
    assert answer.status == "completed", answer
    assert seconds >= 1.0


# --- failure -------------------------------------------------------------------------------


def test_a_failed_task_fails_the_run_with_the_agents_error(tmp_path: Path, plugins: Plugins) -> None:
    results, store = run_suite(
        tmp_path, plugins, yaml_settings(), '  - id: f\n    task: {description: "fail now"}\n'
    )
    run = results.tests[0].runs[0]
    assert run.outcome == "failed" and run.status == "failed"
    assert run.error == "RuntimeError: max steps exceeded"
    assert run.trace.tool_calls == {"shell": 1}
    calls = [e for e in store.events(run) if e.event_type == "tool_call"]
    assert calls[0].payload.input == {"command": "echo trying"}


@pytest.mark.parametrize("mode", ["unhealthy", "deaf"])
def test_an_agent_that_never_becomes_healthy_is_stopped_after_the_health_timeout(
    tmp_path: Path, mode: str
) -> None:
    pidfile = tmp_path / "pid"
    answer, _, seconds = execute(settings(mode, health_timeout=1, env={"TERM_AGENT_PIDFILE": str(pidfile)}))
    assert isinstance(answer, AgentError) and not isinstance(answer, AgentRefused)
    assert answer.message.startswith(
        "the agent did not become healthy within 1 s (health_timeout): GET http://127.0.0.1:"
    )
    if mode == "unhealthy":
        assert answer.message.endswith("/health last answered HTTP 503 Service Unavailable, saying")
        assert json.loads(answer.evidence) == {"status": "starting"}
    else:
        assert answer.message.endswith(
            "/health last answered connection refused (is the agent running and listening there?)"
        )
    assert 1.0 <= seconds < 4.0
    assert gone(pid_of(pidfile))


def test_an_agent_that_exits_at_start_is_reported_at_once_with_its_output(tmp_path: Path) -> None:
    answer, sink, seconds = execute(settings("crash"))
    assert isinstance(answer, AgentError)
    says(answer.message, "exited with code 3", "before it became healthy", "GET /health", "output")
    assert answer.evidence == "fatal: no model configured (set LLM_PROXY_URL)"
    assert seconds < 3.0  # not the 15 s health_timeout
    assert sink.lines == ["fatal: no model configured (set LLM_PROXY_URL)"]


def test_a_409_on_start_names_the_status_and_the_agents_error(tmp_path: Path, plugins: Plugins) -> None:
    # the agent runs a task of its own as soon as it serves: ATP's POST /start is a second one
    results, _ = run_suite(
        tmp_path, plugins, yaml_settings("busy"), '  - id: b\n    task: {description: "anything"}\n'
    )
    run = results.tests[0].runs[0]
    assert run.outcome == "failed"
    assert re.fullmatch(
        r"POST http://127\.0\.0\.1:\d+/start: the agent refused the request with HTTP 409 Conflict; it says a task "
        r"is already running, though ATP started it for this run and sent one POST /start: 'already running'",
        run.error,
    ), run.error


def test_a_second_start_is_refused_by_the_test_agent(tmp_path: Path) -> None:
    """What the busy agent stands for: the protocol's one task per agent."""
    import httpx

    port = free_port()
    process = __import__("subprocess").Popen(AGENT, env={**os.environ, "AGENT_PORT": str(port)}, cwd=tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                if httpx.get(base + "/health").status_code == 200:
                    break
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert httpx.post(base + "/start", json={"instruction": "forever"}).json() == {"status": "started"}
        second = httpx.post(base + "/start", json={"instruction": "forever"})
        assert second.status_code == 409 and second.json() == {"error": "already running"}
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("mode", "status", "error"),
    [
        ("reject", "400 Bad Request", "instruction required"),
        ("internal", "500 Internal Server Error", "runner not initialized"),
    ],
)
def test_400_and_500_on_start_fail_the_run(mode: str, status: str, error: str) -> None:
    answer, _, _ = execute(settings(), f"{mode} it")
    assert isinstance(answer, AgentError)
    assert isinstance(answer, AgentRefused) == (mode == "reject")
    verb = "refused the request with" if mode == "reject" else "failed with"
    assert re.fullmatch(
        rf"POST http://127\.0\.0\.1:\d+/start: the agent {verb} HTTP {status}", answer.message
    ), answer.message
    assert answer.evidence == error


# --- the time limit and stopping -----------------------------------------------------------


def test_a_timeout_while_running_stops_the_agent(tmp_path: Path, plugins: Plugins) -> None:
    pidfile = tmp_path / "pid"
    tests = (
        '  - id: slow\n    task: {description: "forever and ever"}\n    constraints: {timeout_seconds: 2}\n'
    )
    started = time.perf_counter()
    results, _ = run_suite(tmp_path, plugins, yaml_settings(env={"TERM_AGENT_PIDFILE": str(pidfile)}), tests)
    assert time.perf_counter() - started < 8
    run = results.tests[0].runs[0]
    assert run.status == "timeout" and run.outcome == "failed"
    says(run.error, "timed out after 2 s", "stopped")
    assert run.trace.tool_calls["shell"] >= 3  # the commands seen before the time ran out
    assert gone(pid_of(pidfile))


def test_an_agent_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path, plugins: Plugins) -> None:
    pidfile = tmp_path / "pid"
    env = {"TERM_AGENT_IGNORE_TERM": "1", "TERM_AGENT_PIDFILE": str(pidfile)}
    options = yaml_settings(env=env, extra="    stop_grace: 1\n")
    tests = (
        '  - id: done\n    task: {description: "complete: hello"}\n'
        '  - id: late\n    task: {description: "forever"}\n    constraints: {timeout_seconds: 1}\n'
    )
    results, _ = run_suite(tmp_path, plugins, options, tests)
    runs = runs_by_test(results)
    assert runs["done"].outcome == "passed", runs["done"].error
    assert runs["done"].warnings == [
        "the agent did not exit within 1 s of SIGTERM (stop_grace); ATP killed it"
    ]
    assert runs["done"].duration_seconds >= 1.0
    assert runs["late"].status == "timeout"
    assert "the agent did not exit within 1 s of SIGTERM (stop_grace); ATP killed it" in runs["late"].warnings
    assert gone(pid_of(pidfile))  # (the second run's agent)


# --- protocol errors -----------------------------------------------------------------------


def test_five_failed_polls_fail_the_run() -> None:
    answer, _, seconds = execute(settings("broken", poll_interval=0.05))
    assert isinstance(answer, AgentError)
    assert re.fullmatch(
        r"GET http://127\.0\.0\.1:\d+/status: 5 polls in a row failed \(max_poll_errors\); "
        r"the last: HTTP 500 Internal Server Error, saying",
        answer.message,
    ), answer.message
    assert answer.evidence == "status store corrupted"
    assert seconds < 5
    answer, _, _ = execute(settings("broken", poll_interval=0.05, max_poll_errors=2))
    assert "2 polls in a row failed" in answer.message


@pytest.mark.parametrize(
    ("mode", "problem", "evidence"),
    [
        ("garbage", "(JSON is malformed: invalid character (byte 4))", b"this is not JSON {"),
        ("badshape", "(Expected `array`, got `str` - at `$.history`)", b'"history": "everything is fine"'),
    ],
)
def test_an_answer_that_is_not_the_sdks_json_fails_the_run_with_evidence(
    mode: str, problem: str, evidence: bytes
) -> None:
    answer, _, _ = execute(settings(mode))
    assert isinstance(answer, AgentError)
    assert answer.message.endswith(
        f"/status: the agent broke the protocol: its status is not the SDK's JSON {problem}"
    )
    assert evidence in answer.evidence


def test_an_agent_that_exits_while_running_is_reported_at_once() -> None:
    answer, _, seconds = execute(settings(poll_interval=0.2), "vanish")
    assert isinstance(answer, AgentError)
    says(answer.message, "exited with code 4", "while running the task", "1 step seen", "output")
    assert answer.evidence.endswith("out of memory, bye")
    assert seconds < 5


def test_an_agent_that_stays_idle_after_start_fails_the_run() -> None:
    answer, _, _ = execute(settings(health_timeout=0.5, poll_interval=0.1), "lazy")
    assert isinstance(answer, AgentError)
    assert answer.message.endswith(
        "/status: the agent still says 'idle' 0.5 s (health_timeout) after it accepted the task with POST /start"
    )


def test_steps_missing_from_the_history_are_said_and_counted(tmp_path: Path, plugins: Plugins) -> None:
    answer, sink, _ = execute(settings("gaps"))
    assert answer.status == "completed"
    assert [e.payload.input["command"] for e in sink.seen if e.event_type == "tool_call"] == [
        "echo step 3",
        "echo step 6",
        "echo step 9",
    ]
    lost = [
        e.payload.message for e in sink.seen if e.event_type == "progress" and "history" in e.payload.message
    ]
    assert lost == [
        f"steps {a}-{b} are not in the agent's history (it holds the last commands only); ATP did not see them"
        for a, b in ((1, 2), (4, 5), (7, 8))
    ]
    assert sink.warnings == [
        "6 of the agent's 9 steps never appeared in its history (steps 1-2, 4-5, 7-8): the history holds only "
        "the last commands, and the agent ran more than that between two polls (poll_interval 0.5 s); they are "
        "counted in metrics.tool_calls but have no tool_call event"
    ]
    assert answer.metrics.tool_calls == 9 and answer.metrics.total_steps == 9
    # 40 commands at once: the history's last 30 are seen; max_tool_calls counts all 40
    tests = '  - id: burst\n    task: {description: "burst"}\n    assertions:\n      - {type: max_tool_calls, config: {limit: 35}}\n'
    results, _ = run_suite(tmp_path, plugins, yaml_settings(), tests)
    run = results.tests[0].runs[0]
    assert run.trace.tool_calls == {"shell": 30} and run.metrics.tool_calls == 40
    assert run.outcome == "failed" and "40" in run.checks[0].message
    assert run.warnings[0].startswith("10 of the agent's 40 steps never appeared in its history (steps 1-10)")


# --- working folders and parallel runs -----------------------------------------------------


def test_parallel_runs_have_their_own_ports_and_folders(tmp_path: Path, plugins: Plugins) -> None:
    tests = "".join(f'  - id: r{i}\n    task: {{description: "echo run {i}"}}\n' for i in range(4))
    started = time.perf_counter()
    results, store = run_suite(tmp_path, plugins, yaml_settings(), tests, parallel=4)
    seconds = time.perf_counter() - started
    ports = set()
    for index, run in enumerate(results.tests):
        [only] = run.runs
        assert only.outcome == "passed", only.error
        [artifact] = only.artifacts  # its own start.json, not the others'
        assert json.loads(artifact.content)["instruction"] == f"echo run {index}"
        ports.update(re.findall(r"listening on (\d+)", log_of(store, only)))
    assert len(ports) == 4
    assert seconds < 15


def test_a_fixed_port_makes_runs_take_turns(tmp_path: Path, plugins: Plugins) -> None:
    port = free_port()
    tests = "".join(f'  - id: r{i}\n    task: {{description: "complete: {i}"}}\n' for i in range(3))
    results, store = run_suite(
        tmp_path, plugins, yaml_settings(extra=f"    port: {port}\n"), tests, parallel=3
    )
    for test in results.tests:
        run = test.runs[0]
        assert run.outcome == "passed", run.error  # (a second agent on the port could not listen)
        assert f"listening on {port}" in log_of(store, run)
    # all three started at once; each waited for the one before it to stop its agent, and said so
    durations = sorted(test.runs[0].duration_seconds for test in results.tests)
    assert durations[2] >= 2.5 * durations[0] and durations[1] >= 1.5 * durations[0], durations
    waited = [test.runs[0].warnings for test in results.tests if test.runs[0].warnings]
    assert len(waited) == 2, waited
    assert all(
        warnings
        == [
            f"this run waits for its turn: the runs of agent 'agent' share the fixed port {port} and take turns; the "
            "wait counts against the run's time limit (leave out 'port' and 'cwd' to run in parallel)"
        ]
        for warnings in waited
    ), waited


def test_the_agent_works_in_the_runs_workspace(tmp_path: Path, plugins: Plugins) -> None:
    readme = write(tmp_path / "fixture" / "README.md", "# the project\n")
    os.utime(readme, (time.time() - 60, time.time() - 60))  # (written well before the run)
    fixture = readme.parent
    tests = f"""\
  - id: w
    task: {{description: "complete: in the workspace", workspace_fixture: {fixture}}}
    assertions:
      - {{type: contains, config: {{path: hello.txt, pattern: "Hello"}}}}
"""
    results, _ = run_suite(tmp_path, plugins, yaml_settings(), tests)
    run = results.tests[0].runs[0]
    assert run.outcome == "passed", (run.error, run.checks)
    [artifact] = run.artifacts  # the fixture's README.md is not the agent's
    assert artifact.path == "hello.txt" and artifact.content is None  # (read from the workspace)
    calls = run.trace.tool_calls
    assert calls == {"shell": 4}


def test_a_cwd_is_the_agents_shared_working_folder(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "old.txt").write_text("from before\n")
    os.utime(work / "old.txt", (time.time() - 60, time.time() - 60))
    options = settings(cwd="work")
    sink = LogSink()

    async def main() -> Any:
        adapter = TermSdkAdapter(msgspec.convert(options, TermSdkSettings), name="agent", base_dir=tmp_path)
        await adapter.start()
        assert adapter.artifact_dir(request()) == work
        return await adapter.execute(request(), sink)

    answer = anyio.run(main)
    assert answer.status == "completed"
    assert [a.path for a in answer.artifacts] == ["hello.txt"] and answer.artifacts[0].content is None
    assert (work / "hello.txt").read_text() == "Hello, World!\n"


# --- health_check, start and settings ------------------------------------------------------


@pytest.mark.parametrize(("mode", "expected"), [("", True), ("unhealthy", False), ("crash", AdapterError)])
def test_health_check_starts_the_agent_and_stops_it(tmp_path: Path, mode: str, expected: Any) -> None:
    pidfile = tmp_path / "pid"
    adapter = adapter_for(settings(mode, health_timeout=0.5, env={"TERM_AGENT_PIDFILE": str(pidfile)}))

    async def main() -> Any:
        try:
            return await adapter.health_check()
        except Exception as exc:
            return exc

    answer = anyio.run(main)
    if isinstance(expected, bool):
        assert answer is expected
        health = anyio.run(adapter.health)
        assert health.status == ("healthy" if expected else "unhealthy")
        if not expected:
            assert health.detail.endswith(
                'last answered HTTP 503 Service Unavailable, saying: {"status": "starting"}'
            )
    else:
        assert isinstance(answer, AdapterError)
        says(
            str(answer),
            "agent 'agent'",
            "exited with code 3",
            "before it became healthy",
            "GET /health",
            "fatal: no model configured (set LLM_PROXY_URL)",
        )
    assert gone(pid_of(pidfile))


def test_a_command_that_cannot_start_stops_the_suite(tmp_path: Path) -> None:
    adapter = adapter_for({"command": ["./no-such-agent"]}, base_dir=tmp_path)
    with pytest.raises(AdapterError) as raised:
        anyio.run(adapter.start)
    says(str(raised.value), "cannot start './no-such-agent'", f"{tmp_path}/no-such-agent", "does not exist")


def test_relative_paths_of_the_command_are_the_agents_folder(tmp_path: Path) -> None:
    write(tmp_path / "agent.py", "")
    (tmp_path / "pkg").mkdir()
    adapter = adapter_for({"command": "python3 agent.py --flag . other ../x -m pkg"}, base_dir=tmp_path)
    assert adapter.argv == [
        "python3",
        str(tmp_path / "agent.py"),
        "--flag",
        ".",
        "other",
        "../x",
        "-m",
        "pkg",
    ]
    # the program, and the first file named (the script): not a folder, nor what follows it
    adapter = adapter_for({"command": ["./bin/agent", "pkg", "agent.py", "agent.py"]}, base_dir=tmp_path)
    assert adapter.argv == [str(tmp_path / "bin" / "agent"), "pkg", str(tmp_path / "agent.py"), "agent.py"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"command": []}, "'command' is empty"),
        ({"command": "a", "env": {"AGENT_PORT": "1"}}, "'env' may not set AGENT_PORT"),
        ({"command": "a", "health_timeout": 0}, "Expected `float` > 0.0 - at `$.health_timeout`"),
        ({"command": "a", "poll_interval": float("nan")}, "Expected `float` > 0.0 - at `$.poll_interval`"),
        ({"command": "a", "port": 70000}, "Expected `int` <= 65535 - at `$.port`"),
        ({"command": "a", "host": "http://x"}, "'host' 'http://x' is not a host name"),
        ({"command": "a", "max_poll_errors": 0}, "Expected `int` >= 1 - at `$.max_poll_errors`"),
        ({"command": "a", "stop_grace": -1}, "Expected `float` >= 0.0 - at `$.stop_grace`"),
        ({"command": "a", "timeout_secs": 3}, "Object contains unknown field `timeout_secs`"),
    ],
)
def test_settings_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert(options, TermSdkSettings)
    assert message in str(raised.value)


def test_settings_built_in_code_are_checked_too() -> None:
    with pytest.raises(ValueError) as raised:
        TermSdkSettings(command="a", poll_interval=float("nan"))
    says(str(raised.value), "'poll_interval'", "seconds", "above 0", "600")
    with pytest.raises(ValueError) as raised:
        TermSdkSettings(command="a", stop_grace=-1)
    says(str(raised.value), "'stop_grace'", "seconds", "from 0 to 600")


def test_settings_in_a_suite_file_are_refused_with_their_line(tmp_path: Path, plugins: Plugins) -> None:
    from atp.core.config import agent_definitions, load_config, resolve_agent
    from atp.core.errors import SuiteError
    from atp.core.suite import load_suite

    suite = write(
        tmp_path / "suite.yaml",
        """
        test_suite: s
        agents:
          - name: agent
            type: term-sdk
            command: [python3, agent.py]
            poll_interval: -1
        tests:
          - {id: t, task: {description: x}}
    """,
    )
    loaded = load_suite(suite, plugins.evaluators)
    with pytest.raises(SuiteError, match="poll_interval"):
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), loaded)["agent"], plugins.adapters)


# --- hostile agents: deep folders, slow answers, fixed ports, step numbers, escapes ----------


def test_a_folder_nested_thousands_deep_is_walked_and_removed_without_recursion(tmp_path: Path) -> None:
    """Python 3.11's os.walk and shutil.rmtree recurse: 1,200 folders deep raised RecursionError,
    which replaced the run's response and left the temporary folder behind."""
    answer, sink, _ = execute(settings("deep"))
    assert not isinstance(answer, BaseException), answer
    assert answer.status == "completed"
    assert [a.path for a in answer.artifacts] == ["top.txt"]  # (leaf.txt is too deep to be listed)
    assert answer.artifacts[0].content == "top\n"
    assert sink.warnings == [
        "the workspace has folders more than 100 levels deep (1 of them); the files in them are not listed as artifacts"
    ]
    [listening] = [line for line in sink.lines if line.startswith("term agent listening on ")]
    assert not Path(listening.partition(" in ")[2]).exists()


def test_a_clean_up_that_fails_is_a_warning_not_the_runs_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import atp.adapters.term_sdk as term_sdk

    monkeypatch.setattr(
        term_sdk, "remove_tree", lambda folder: f"{folder}: 1 thing in it could not be removed (busy)"
    )
    answer, sink, _ = execute(settings())
    assert not isinstance(answer, BaseException), answer
    assert answer.status == "completed"
    [warning] = sink.warnings
    assert warning.startswith("the agent's temporary folder could not be removed: ") and warning.endswith(
        "(busy)"
    )


def test_workspace_files_and_remove_tree_survive_deep_locked_and_linked_folders(tmp_path: Path) -> None:
    from atp.adapters.workspace import MAX_DEPTH, remove_tree, with_workspace_files
    from atp.core.protocol import ATPResponse, Metrics

    root = tmp_path / "work"
    root.mkdir()
    outside = write(tmp_path / "outside" / "keep.txt", "keep\n")
    folder = os.open(root, os.O_RDONLY)
    for _ in range(3000):  # (its path is longer than PATH_MAX: only names relative to a folder reach it)
        os.mkdir("dd", dir_fd=folder)
        inner = os.open("dd", os.O_RDONLY, dir_fd=folder)
        os.close(folder)
        folder = inner
    os.close(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, dir_fd=folder))
    os.fchmod(folder, 0o500)  # (read-only: its file cannot be removed until it is opened up)
    os.close(folder)
    write(root / "a" / "shallow.txt", "shallow\n")
    (root / "locked").mkdir()
    write(root / "locked" / "inner.txt", "x")
    (root / "locked").chmod(0)
    (root / "link-out").symlink_to(outside.parent)
    (root / "file-link").symlink_to(outside)
    response = ATPResponse(version="1.0", task_id="t", status="completed", artifacts=[], metrics=Metrics())
    completed, warnings = with_workspace_files(response, root, 0)
    paths = [a.path for a in completed.artifacts]
    assert "a/shallow.txt" in paths and "link-out/keep.txt" not in paths and "file-link" not in paths
    assert not any(path.endswith("leaf.txt") for path in paths)
    assert f"the workspace has folders more than {MAX_DEPTH} levels deep (1 of them)" in warnings[-1]
    assert remove_tree(root) is None
    assert not root.exists()
    assert outside.read_text() == "keep\n"  # (links are removed, never followed)
    assert remove_tree(root) is None  # (nothing left to remove: not an error)


def test_each_call_is_bounded_as_a_whole_by_the_request_timeout() -> None:
    """httpx's timeouts are per read: an agent sending its status a byte every 0.2 s held a poll
    for ever, and only the run's own time limit ended it."""
    options = settings("slowloris", request_timeout=0.5, max_poll_errors=2, poll_interval=0.05)
    answer, _, seconds = execute(options, timeout_seconds=60)
    assert isinstance(answer, AgentError)
    assert re.fullmatch(
        r"GET http://127\.0\.0\.1:\d+/status: 2 polls in a row failed \(max_poll_errors\); the last: no answer "
        r"within 0\.5 s \(request_timeout\)(, after \d+ steps? seen)?",
        answer.message,
    ), answer.message
    assert seconds < 6


def test_a_fixed_port_another_program_holds_is_refused_before_the_agent_starts(tmp_path: Path) -> None:
    import socket

    pidfile = tmp_path / "pid"
    with socket.socket() as imposter:
        imposter.bind(("127.0.0.1", 0))
        imposter.listen()
        port = imposter.getsockname()[1]
        answer, _, seconds = execute(settings(port=port, env={"TERM_AGENT_PIDFILE": str(pidfile)}))
    assert isinstance(answer, AdapterError)
    says(
        str(answer),
        "agent 'agent'",
        f"port {port} on 127.0.0.1",
        "the agent's 'port'",
        "in use by another program",
        "leave 'port' out",
    )
    assert not pidfile.exists()  # (the agent was never started)
    assert seconds < 3


def test_step_numbers_are_bounded_by_max_steps_and_what_was_seen() -> None:
    answer, sink, _ = execute(settings("bigsteps"), max_steps=20)
    assert answer.status == "completed"
    calls = [e for e in sink.seen if e.event_type == "tool_call"]
    assert len(calls) == 35
    # the steps the agent claims beyond what it can have run never reach the metrics or the events
    assert answer.metrics.total_steps == 35 and answer.metrics.tool_calls == 35
    assert all(e.payload.current_step <= 35 for e in sink.seen if e.event_type == "progress")
    assert sink.warnings == [
        "the agent reported step 1000000000000, more than the max_steps 20 ATP sent with POST /start (where the "
        "SDK stops an agent); ATP counts at most 35 steps (the higher of max_steps and the 35 history entries it saw)",
        "the agent's history held 35 entries in one GET /status; the SDK keeps the last 30 (ATP took every entry)",
    ]
    negative, _, _ = execute(settings("negative"))
    assert isinstance(negative, AgentError)
    assert (
        "its status is not the SDK's JSON (Expected `int` >= 0 - at `$.history[0].step`)" in negative.message
    )


def test_a_port_that_still_answers_after_the_stop_is_a_warning(tmp_path: Path) -> None:
    """A process that leaves ATP's reach (double fork, a session of its own, no ATP_AGENT_TOKEN,
    its output closed) is not found; ATP cannot stop it, but says that the port still answers."""
    import signal

    pidfile = tmp_path / "escaped"
    answer, sink, _ = execute(settings("escape", env={"TERM_AGENT_ESCAPE_PIDFILE": str(pidfile)}))
    try:
        assert answer.status == "completed", answer
        [warning] = sink.warnings
        assert re.fullmatch(
            r"port \d+ still answers after the agent was stopped: a process of it may have escaped ATP, which does "
            r"not find one that left the agent's session and process group, dropped ATP_AGENT_TOKEN and closed its "
            r"output \(see docs/untrusted-agents\.md\)",
            warning,
        ), warning
    finally:
        deadline = time.monotonic() + 5
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        escaped = pid_of(pidfile)
        os.kill(escaped, signal.SIGKILL)
        try:
            os.waitpid(escaped, 0)  # (ATP, the subreaper of its agents' orphans, is its parent)
        except ChildProcessError:
            pass
