"""The cli adapter against hostile agents, real processes: agents that answer and run on, leave
process trees behind (in sessions of their own, without ATP's environment, as orphans), send
bytes the protocol does not allow, or duplicate keys; settings that are not numbers of seconds.

Every test checks what the run reports, how long it took where a hang was possible, that no
process of the agent is left (not even as a zombie of ATP's), and that the `ok` runs of the same
suite are intact.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from atp.adapters import process as process_module
from atp.adapters.cli import EXIT_DRAIN_SECONDS, CliAdapter, CliSettings
from atp.adapters.stdio import duplicate_keys
from atp.core import ledger
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Event, Task
from atp.core.results import RunStore, SuiteResults
from atp.core.runner import Runner
from atp.core.suite import load_suite
from tests.conftest import AGENTS, PYTHON, ROOT, behave_agent, write
from tests.facts import says

HOSTILE = [PYTHON, str(AGENTS / "hostile.py")]


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def pid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where tests/agents/hostile.py appends the pid of every process it starts."""
    path = tmp_path / "pids"
    monkeypatch.setenv("AGENT_PID_FILE", str(path))
    return path


def pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def exists(pid: int) -> bool:
    """Whether ``pid`` names a process at all: running, or a zombie nobody has reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition: Any, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(condition())


def assert_all_gone(pid_file: Path, expected: int) -> None:
    """Every process the agents started is gone, reaped too: ATP is a subreaper, so an agent's
    orphans were ATP's children and a zombie left here would be ATP's."""
    found = pids(pid_file)
    assert len(found) == expected, found
    assert wait_until(lambda: not any(exists(pid) for pid in found), within=3), [
        (pid, Path(f"/proc/{pid}/status").read_text().split("\n")[2]) for pid in found if exists(pid)
    ]


def run_modes(
    tmp_path: Path,
    plugins: Plugins,
    modes: list[str],
    *,
    settings: str = "",
    timeout: float = 30,
    command: list[str] | None = None,
    **options: Any,
) -> tuple[SuiteResults, RunStore, float]:
    """One suite, one test per mode (the task's description is the hostile agent's mode)."""
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: '{mode}'}}\n    constraints: {{timeout_seconds: {timeout}}}\n"
        for i, mode in enumerate(modes)
    )
    if "grace_seconds" not in settings:
        settings = f"    grace_seconds: 1\n{settings}"
    text = (
        f"test_suite: hostile\nagents:\n  - name: agent\n    type: cli\n    command: {command or HOSTILE!r}\n"
        f"{settings}tests:\n{tests}"
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", **options)
    started = time.monotonic()
    results = anyio.run(runner.run)
    assert runner.store is not None
    return results, runner.store, time.monotonic() - started


def runs(results: SuiteResults) -> list[Any]:
    return [test.runs[0] for test in results.tests]


def assert_ok(run: Any) -> None:
    assert run.outcome == "passed" and run.warnings == [], (run.error, run.warnings)


class Sink:
    """An EventSink that keeps everything."""

    masker = None

    def __init__(self) -> None:
        self.got: list[Event] = []
        self.logs: list[str] = []
        self.warnings: list[str] = []

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.got.append(event)

    def events(self, events: Any, raw: bytes | None = None) -> None:
        self.got.extend(events)

    def log(self, line: str) -> None:
        self.logs.append(line)

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def request(description: str = "x") -> ATPRequest:
    return ATPRequest(version="1.0", task_id=str(uuid.uuid4()), task=Task(description=description))


# --- 1. settings: finite, bounded --------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("grace_seconds: .inf", "expected float <= 600.0"),
        ("grace_seconds: 1.0e+300", "expected float <= 600.0"),
        ("grace_seconds: .nan", "expected float >= 0.0"),  # msgspec: NaN >= 0 is false
        ("grace_seconds: -1", "expected float >= 0.0"),
        ("max_output_bytes: 1099511627776", "expected int <= 1073741824"),
        ("max_line_bytes: 100", "expected int >= 1024"),
    ],
)
def test_settings_that_are_not_sane_numbers_are_located_errors(
    tmp_path: Path, plugins: Plugins, setting: str, message: str
) -> None:
    with pytest.raises(SuiteError) as info:
        run_modes(tmp_path, plugins, ["ok"], settings=f"    {setting}\n")
    line = 6 if setting.startswith("grace_seconds") else 7  # after the default grace_seconds line
    assert str(info.value).endswith(f"suite.yaml:{line}: at agents[0].{setting.split(':')[0]}: {message}")
    assert info.value.path == f"agents[0].{setting.split(':')[0]}"
    assert not (tmp_path / "runs").exists()  # nothing ran


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('command: ["agent", "a\\0b"]', "'command[1]' holds a NUL byte (\\0), which no command can"),
        ('command: "agent a\\0b"', "'command' holds a NUL byte (\\0), which no command can"),
        ('cwd: "work\\0"', "'cwd' holds a NUL byte (\\0), which no path can"),
        (
            'env: {"A\\0B": x}',
            "'env' variable name 'A\\x00B' holds a NUL byte (\\0), which no variable name can",
        ),
        ('env: {A: "x\\0y"}', "'env' variable 'A' holds a NUL byte (\\0), which no value can"),
        ('env: {"A=B": x}', "'env' variable name 'A=B' holds '=', which no variable name can"),
        ('env: {"": x}', "'env' has a variable with an empty name"),
    ],
)
def test_what_no_process_can_be_started_with_is_a_located_error(
    tmp_path: Path, plugins: Plugins, setting: str, message: str
) -> None:
    """A NUL byte in the command, cwd or environment, or an environment name with '=' or none:
    refused when the suite loads, not 'embedded null byte' on every run."""
    command = "" if setting.startswith("command") else f"    command: {HOSTILE!r}\n"
    text = f"test_suite: s\nagents:\n  - name: agent\n    type: cli\n{command}    {setting}\ntests:\n  - id: t\n    task: {{description: ok}}\n"
    with pytest.raises(SuiteError) as info:
        suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    assert str(info.value).endswith(message), str(info.value)
    assert info.value.path == "agents[0]" and info.value.line == 3
    with pytest.raises(ValueError, match="NUL byte|'='|empty name"):  # built in code, too
        CliSettings(**{"command": "agent", **yaml_mapping(setting)})


def yaml_mapping(setting: str) -> dict[str, Any]:
    value: dict[str, Any] = yaml.safe_load(setting)
    return value


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, -0.5])
def test_settings_built_in_code_are_checked_too(value: float) -> None:
    with pytest.raises(ValueError) as raised:
        CliSettings(command=["agent"], grace_seconds=value)
    says(str(raised.value), "'grace_seconds'", "seconds", "from 0 to 600")
    with pytest.raises(ValueError) as raised:
        CliSettings(command=["agent"], max_output_bytes=2**50)
    says(str(raised.value), "'max_output_bytes'", "whole number of bytes")
    assert CliSettings(command=["agent"], grace_seconds=600).grace_seconds == 600


# --- 2. a response, then the agent runs on -----------------------------------------------------


@pytest.mark.parametrize("mode", ["linger_open", "linger_chatty", "linger_closed"])
def test_agent_running_on_after_its_response_keeps_the_response_and_is_stopped(
    tmp_path: Path, plugins: Plugins, pid_file: Path, mode: str
) -> None:
    results, _, elapsed = run_modes(tmp_path, plugins, ["ok", mode, "ok"], timeout=30)
    first, lingering, last = runs(results)
    assert_ok(first)
    assert_ok(last)
    assert lingering.outcome == "passed" and lingering.status == "completed", lingering.error
    if mode == "linger_closed":
        assert lingering.warnings == [
            "the agent closed its stdout but kept running for 1 s; ATP took what it wrote there and stopped the agent"
        ]
    else:
        assert lingering.warnings == [
            "the agent kept running after its response (nothing more came on stdout for 1 s); "
            "ATP took the response and stopped the agent"
        ]
    assert 0.9 < lingering.duration_seconds < 3, lingering.duration_seconds  # not the 30 s limit
    assert elapsed < 8, elapsed
    assert_all_gone(pid_file, 3)


def test_agent_closing_stdout_without_a_response_fails_at_once(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    results, _, _ = run_modes(tmp_path, plugins, ["closed_silent", "ok"], timeout=30)
    silent, ok = runs(results)
    assert_ok(ok)
    assert silent.status == "failed"
    says(silent.error, "kept running", "stdout ended", "without writing a response")
    (warning,) = silent.warnings
    says(warning, "closed its stdout", "kept running for 1 s", "stopped the agent")
    assert silent.duration_seconds < 3
    assert_all_gone(pid_file, 2)


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("linger_garbage", "timed out after 2 s; the agent was stopped"),
        ("linger_wrong_task", "timed out after 2 s; the agent was stopped"),
    ],
)
def test_a_line_that_is_not_this_tasks_response_is_not_taken(
    tmp_path: Path, plugins: Plugins, pid_file: Path, mode: str, error: str
) -> None:
    results, _, _ = run_modes(tmp_path, plugins, [mode], timeout=2)
    (run,) = runs(results)
    assert run.status == "timeout" and run.error == error
    assert 1.9 < run.duration_seconds < 4
    assert_all_gone(pid_file, 1)


def test_each_response_is_decoded_once(
    tmp_path: Path, plugins: Plugins, monkeypatch: pytest.MonkeyPatch
) -> None:
    from atp.adapters import cli

    calls: list[bytes] = []
    decode = cli.decode_response

    def counting(data: bytes) -> Any:
        calls.append(data)
        return decode(data)

    monkeypatch.setattr(cli, "decode_response", counting)
    results, _, _ = run_modes(tmp_path, plugins, ["ok", "linger_open", "linger_wrong_task", "ok"], timeout=3)
    assert [r.status for r in runs(results)] == ["completed", "completed", "timeout", "completed"]
    # one each: the normal ones when stdout ends, the lingering ones when stdout falls quiet
    assert len(calls) == 4


# --- 3. a second signal: every agent killed at once --------------------------------------------


def test_abort_kills_every_agent_while_their_stops_wait_out_the_grace_period(
    tmp_path: Path, pid_file: Path
) -> None:
    settings = CliSettings(command=[*HOSTILE, "tree_ignoring_term"], grace_seconds=60)
    adapter = CliAdapter(settings, name="a", base_dir=tmp_path)
    bystander = CliAdapter(CliSettings(command=behave_agent("slow", "3")), name="b", base_dir=tmp_path)
    outcomes: dict[str, Any] = {}

    async def stopped_run(index: int) -> None:
        with anyio.move_on_after(1.0):  # the time limit: the agent ignores SIGTERM, grace is 60 s
            await adapter.execute(request(), Sink())
        outcomes[f"run{index}"] = time.monotonic()

    async def bystanding_run() -> None:
        req = request()
        response = await bystander.execute(req, Sink())
        outcomes["bystander"] = response.task_id == req.task_id and response.status == "completed"

    async def scenario() -> float:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stopped_run, 1)
            tg.start_soon(stopped_run, 2)
            tg.start_soon(bystanding_run)
            await anyio.sleep(2.0)
            assert wait_until(lambda: len(pids(pid_file)) == 4, within=5)
            assert all(exists(pid) for pid in pids(pid_file))  # still being stopped, gracefully
            aborted = time.monotonic()
            adapter.abort()
        return aborted

    started = time.monotonic()
    aborted = anyio.run(scenario)
    assert outcomes["run1"] - aborted < 1.0 and outcomes["run2"] - aborted < 1.0, outcomes
    assert time.monotonic() - started < 10
    assert outcomes["bystander"] is True  # the other adapter's agent was left alone
    assert_all_gone(pid_file, 4)
    with pytest.raises(AdapterError, match="ATP is stopping"):
        anyio.run(adapter.execute, request(), Sink())


# --- 4. the whole process tree -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "warning"),
    [
        (
            "setsid_holder",
            "the agent exited, but 1 process it started kept its output open; "
            "ATP stopped reading and stopped it",
        ),
        (
            "setsid_holder_noenv",
            "the agent exited, but 1 process it started kept its output open; "
            "ATP stopped reading and stopped it",
        ),
        (
            "double_fork",
            "the agent exited, but 1 process it started kept its output open; "
            "ATP stopped reading and stopped it",
        ),
        ("setsid_background", "the agent left 1 process running after it exited; ATP stopped it"),
    ],
)
def test_what_an_agent_leaves_running_is_stopped_whatever_session_it_is_in(
    tmp_path: Path, plugins: Plugins, pid_file: Path, mode: str, warning: str
) -> None:
    run_modes(tmp_path / "first", plugins, ["ok"])  # ATP is a subreaper from now on
    pid_file.unlink()
    # Children of this process that are not agents: one it started, one adopted as an orphan.
    own = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"], start_new_session=True)
    code = (
        "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    adopted = int(subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True).stdout)
    try:
        assert wait_until(lambda: os.getpid() in _parent_of(adopted), within=2) or sys.platform != "linux"
        results, _, elapsed = run_modes(tmp_path, plugins, ["ok", mode, "ok"])
        first, hostile, last = runs(results)
        assert_ok(first)
        assert_ok(last)
        assert hostile.outcome == "passed" and hostile.warnings == [warning], hostile.warnings
        assert elapsed < 10
        assert_all_gone(pid_file, 4)  # two ok agents, the hostile one and what it left
        # what ATP did not start and cannot tell as an agent's is neither killed nor reaped
        assert own.poll() is None and exists(adopted) and "\nState:\tZ" not in _status(adopted)
    finally:
        own.kill()
        assert own.wait(timeout=5) == -signal.SIGKILL  # still ours to reap: ATP did not take it
        os.kill(adopted, signal.SIGKILL)
        assert wait_until(lambda: _reap(adopted), within=5)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def _parent_of(pid: int) -> set[int]:
    for line in _status(pid).splitlines():
        if line.startswith("PPid:"):
            return {int(line.split()[1])}
    return set()


def _reap(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return not exists(pid)


@pytest.mark.parametrize("mode", ["sleep_tree", "tree_ignoring_term"])
def test_timeout_stops_the_agents_tree_in_another_session(
    tmp_path: Path, plugins: Plugins, pid_file: Path, mode: str
) -> None:
    results, _, elapsed = run_modes(tmp_path, plugins, [mode, "ok"], timeout=2)
    sleeper, ok = runs(results)
    assert_ok(ok)
    assert sleeper.status == "timeout"
    says(sleeper.error, "timed out after 2 s", "stopped")
    assert sleeper.duration_seconds < 4.5  # 2 s, and 1 s of grace for what ignores SIGTERM
    assert elapsed < 8
    assert_all_gone(pid_file, 3)


def test_two_tasks_waiting_for_one_agent_both_see_its_exit(tmp_path: Path) -> None:
    agent = process_module.AgentProcess.start(
        [PYTHON, "-c", "import time; time.sleep(0.3)"], cwd=tmp_path, env=os.environ
    )
    codes: list[int] = []

    async def waiter() -> None:
        codes.append(await agent.wait())

    async def scenario() -> None:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                tg.start_soon(waiter)
        stopped = await agent.stop(1)
        assert (stopped.stopped, stopped.running, stopped.late, stopped.unfinished) == (0, 0, 0, False)

    anyio.run(scenario)
    assert codes == [0, 0]


def test_parallel_agents_do_not_stop_each_other(tmp_path: Path, plugins: Plugins, pid_file: Path) -> None:
    modes = ["setsid_holder", "ok", "setsid_background", "ok", "double_fork", "ok"]
    results, _, _ = run_modes(tmp_path, plugins, modes, parallel=3)
    for mode, run in zip(modes, runs(results), strict=True):
        assert run.outcome == "passed", (mode, run.error)
        if mode == "ok":
            assert run.warnings == []
    assert_all_gone(pid_file, 9)


@pytest.mark.parametrize(
    ("mode", "warning"),
    [
        # in the agent's group and session, holding its output
        (
            "foreign_token",
            "the agent exited, but 1 process it started kept its output open; "
            "ATP stopped reading and stopped it",
        ),
        # in the agent's group and session only
        ("foreign_token_quiet", "the agent left 1 process running after it exited; ATP stopped it"),
    ],
)
def test_a_descendant_claiming_another_token_is_still_the_agents(
    tmp_path: Path, plugins: Plugins, pid_file: Path, mode: str, warning: str
) -> None:
    """A token other than the agent's does not make a process a stranger: it is in the agent's
    group and session (and may hold its pipes), so it is the agent's."""
    results, _, elapsed = run_modes(tmp_path, plugins, [mode, "ok"])
    hostile, ok = runs(results)
    assert_ok(ok)
    assert hostile.outcome == "passed" and hostile.warnings == [warning], hostile.warnings
    assert elapsed < 10
    assert_all_gone(pid_file, 3)  # the agent, its grandchild, the ok agent


def _session(sid: int) -> list[int]:
    """The processes of session ``sid``, zombies too."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[3]) == sid:
                found.append(int(name))
    return found


@pytest.mark.parametrize("mode", ["hopper 3000", "hopper_linger 3000"])
def test_a_process_that_keeps_forking_is_stopped(
    tmp_path: Path, plugins: Plugins, pid_file: Path, mode: str
) -> None:
    """A hopper (a session of its own, SIGTERM ignored, fork and exit every 5 ms, 3000 times:
    15 s on its own) is stopped with the run, whether the agent exits at once or runs into its
    time limit (the hopper leaving hundreds of ended processes to ATP meanwhile): the processes
    found are stopped (SIGSTOP) as they are found until a round finds no new one, then killed;
    nothing of it is left, not even a zombie of ATP's."""
    started = time.monotonic()
    results, _, elapsed = run_modes(tmp_path, plugins, [mode, "ok"], timeout=2)
    hostile, ok = runs(results)
    assert_ok(ok)
    if mode.startswith("hopper_linger"):
        assert hostile.status == "timeout"
        says(hostile.error, "timed out after 2 s", "stopped")
        assert hostile.duration_seconds < 3.5 and hostile.warnings == [], hostile.warnings
    else:
        assert hostile.outcome == "passed", hostile.error
        (warning,) = hostile.warnings
        # how many it takes depends on when ATP looks; what it says must be what happened
        assert re.fullmatch(
            r"the agent left (1 process|\d+ processes) running after it exited; ATP stopped (it|them)"
            r"(; (1 process|\d+ processes) started while ATP was stopping the others)?",
            warning,
        ), warning
    agent, first_hop, ok_agent = pids(pid_file)
    assert wait_until(lambda: not _session(first_hop), within=3), [  # (zombies too)
        (pid, _status(pid).split("\n")[1], _parent_of(pid)) for pid in _session(first_hop)
    ]
    assert not any(exists(pid) for pid in (agent, first_hop, ok_agent))
    assert elapsed < 8 and time.monotonic() - started < 11  # not the hopper's 15 s


# --- 5. the process ledger with a real adapter ------------------------------------------------------

LEDGER_SCRIPT = """
import sys, uuid
from pathlib import Path
import anyio
from atp.adapters.cli import CliAdapter, CliSettings
from atp.core import ledger
from atp.core.protocol import ATPRequest, Task

run_dir = Path(sys.argv[1])
run_dir.mkdir(parents=True)
adapter = CliAdapter(CliSettings(command=sys.argv[2:]), name="a", base_dir=run_dir)

class Sink:
    masker = None
    def event(self, event, raw=None): pass
    def events(self, events, raw=None): pass
    def log(self, line): pass
    def warn(self, message): pass

async def main():
    await adapter.open(processes=ledger.ProcessLedger.create(run_dir))
    request = ATPRequest(version="1.0", task_id=str(uuid.uuid4()), task=Task(description="x"))
    await adapter.execute(request, Sink())

anyio.run(main)
"""


def test_agents_of_a_killed_atp_are_stopped_from_its_ledger(tmp_path: Path, pid_file: Path) -> None:
    run_dir = tmp_path / "runs" / "20260101-000000-abcdef"
    script = write(tmp_path / "atp_like.py", LEDGER_SCRIPT)
    owner = subprocess.Popen(
        [PYTHON, str(script), str(run_dir), *HOSTILE, "sleep_tree"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert wait_until(lambda: len(pids(pid_file)) == 2, within=15)
    lines = (run_dir / ledger.LEDGER_FILE).read_text().splitlines()
    assert (
        len(lines) == 2 and f'"owner": {owner.pid}' in lines[0] and f'"pid": {pids(pid_file)[0]}' in lines[1]
    )
    assert ledger.stop_abandoned(tmp_path / "runs") == []  # its ATP runs: not abandoned
    owner.kill()
    owner.wait()
    agent, child = pids(pid_file)
    time.sleep(0.3)
    assert exists(agent) and exists(child) and "\nState:\tZ" not in _status(agent)  # they run on
    messages = ledger.stop_abandoned(tmp_path / "runs")
    assert messages == [
        f"stopped 2 agent processes left running by ATP process {owner.pid} (run {run_dir.name})"
    ]
    assert wait_until(lambda: all(_reap(pid) for pid in (agent, child)), within=5)
    assert not (run_dir / ledger.LEDGER_FILE).exists()


def test_a_clean_run_leaves_no_ledger(tmp_path: Path, pid_file: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    adapter = CliAdapter(CliSettings(command=[*HOSTILE, "setsid_holder"]), name="a", base_dir=tmp_path)

    async def scenario() -> None:
        recorder = ledger.ProcessLedger.create(run_dir)
        await adapter.open(processes=recorder)  # (handed over: no context variable is set)
        await adapter.execute(request(), Sink())
        assert (run_dir / ledger.LEDGER_FILE).exists() and not recorder.running
        recorder.close()

    anyio.run(scenario)
    assert not (run_dir / ledger.LEDGER_FILE).exists()
    assert_all_gone(pid_file, 2)


# --- 6. bytes the protocol does not allow ----------------------------------------------------------


def test_invalid_utf8_in_the_response_fails_the_run_as_the_agents(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    results, _, _ = run_modes(tmp_path, plugins, ["ok", "bad_utf8_response", "deep_response", "ok"])
    first, bad, deep, last = runs(results)
    assert_ok(first)
    assert_ok(last)
    for run in (bad, deep):
        assert run.outcome == "failed" and run.status == "failed", run.error
        assert run.error.startswith(
            "agent exited with code 0; its last stdout line is not an ATP response (ATP response "
        )
        assert "(stdout line 1, byte offset 0): '{" in run.error  # the line itself, as evidence
        assert "raised" not in run.error
    assert "(ATP response is not valid UTF-8: byte " in bad.error and '"data": {"text": "caf' in bad.error
    assert "(ATP response is nested too deeply" in deep.error


def test_invalid_event_lines_are_skipped_and_the_response_kept(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    results, store, _ = run_modes(tmp_path, plugins, ["bad_utf8_event", "deep_event", "ok"])
    bad, deep, ok = runs(results)
    assert_ok(ok)
    assert bad.outcome == "passed" and bad.trace.events == 2
    assert [e.sequence for e in store.events(bad)] == [0, 2]
    (warning,) = bad.warnings
    offset = len(_event_line(bad.task_id, 0)) + 1
    assert warning.startswith(
        f"stderr line 2 (byte offset {offset}) looks like an ATP event but is not one; it was skipped: "
    )
    assert deep.outcome == "passed" and deep.trace.events == 1
    (warning,) = deep.warnings
    assert warning.startswith(
        "stderr line 1 (byte offset 0) looks like an ATP event but is not one; it was skipped: "
    )


def _event_line(task_id: str, sequence: int) -> bytes:
    sys.path.insert(0, str(AGENTS))
    try:
        import hostile  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(AGENTS))
    return hostile.event(task_id, sequence).encode()


def test_the_whole_bad_line_is_the_evidence_uncut(tmp_path: Path) -> None:
    adapter = CliAdapter(
        CliSettings(command=[*HOSTILE, "long_garbage", "100000"]), name="a", base_dir=tmp_path
    )
    with pytest.raises(AgentError) as info:
        anyio.run(adapter.execute, request(), Sink())
    assert info.value.evidence == b"g" * 100000
    assert "(stdout line 1, byte offset 0)" in info.value.message
    assert "ggg" not in info.value.message


def test_anything_unexpected_while_reading_is_the_agents_error(tmp_path: Path) -> None:
    class Fragile(Sink):
        def events(self, events: Any, raw: bytes | None = None) -> None:
            raise ValueError("cannot take these")

    adapter = CliAdapter(CliSettings(command=[*HOSTILE, "ok"]), name="a", base_dir=tmp_path)
    with pytest.raises(AgentError) as info:  # not an exception group, not a ValueError
        anyio.run(adapter.execute, request(), Fragile())
    assert info.value.message.startswith(
        "what the agent wrote on stderr could not be read (ValueError: cannot take these; stderr line 1, byte offset 0)"
    )


# --- 7. duplicate keys ------------------------------------------------------------------------------


def test_duplicate_keys_in_a_response_are_warned_about(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    results, _, _ = run_modes(tmp_path, plugins, ["duplicate_keys", "big_duplicate_keys", "ok"])
    dup, big, ok = runs(results)
    assert_ok(ok)
    assert dup.outcome == "passed"  # the last value wins, as in msgspec
    assert dup.warnings == [
        "the response has duplicate keys ($.status, $.artifacts[0].data.a); ATP used the last value of each"
    ]
    assert big.outcome == "passed" and big.warnings == []  # over 1 MiB: not checked


def test_checking_a_big_response_for_duplicate_keys_blocks_no_other_run(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    """52,000 keys twice each in one object (0.84 MB): found in linear time, off the event
    loop, so the other run's 2 s time limit fires on time."""
    results, _, elapsed = run_modes(
        tmp_path, plugins, ["many_duplicate_keys", "sleeper"], timeout=2, parallel=2
    )
    dup, sleeper = runs(results)
    assert dup.outcome == "passed", dup.error
    assert dup.warnings == [
        "the response has duplicate keys ("
        + ", ".join(f'$.artifacts[0].data["{i}"]' for i in range(10))
        + "); ATP used the last value of each"
    ]
    assert sleeper.status == "timeout"
    says(sleeper.error, "timed out after 2 s", "stopped")
    assert sleeper.duration_seconds < 3, sleeper.duration_seconds
    assert elapsed < 6
    assert_all_gone(pid_file, 2)


def test_duplicate_keys_function() -> None:
    assert duplicate_keys(b'{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}, "a": 2}') == ["$.a", "$.b.c[1].d"]
    assert duplicate_keys(b'{"a b": 1, "a b": 2}') == ['$["a b"]']
    assert duplicate_keys(b'{"a": 1, "b": 2}') == []
    assert duplicate_keys(b"not json") == []
    assert duplicate_keys(b"[" * 100000 + b"]" * 100000) == []
    many = "{" + ", ".join(f'"k{i}": 1, "k{i}": 2' for i in range(30)) + "}"
    assert duplicate_keys(many) == [f"$.k{i}" for i in range(10)]


# --- 8. relative artifact paths are the agent's working folder's -------------------------------


def test_relative_artifact_paths_resolve_against_the_agents_working_folder(
    tmp_path: Path, plugins: Plugins, pid_file: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tests = (
        "  - id: t\n    task: {description: write_file}\n    assertions:\n"
        "      - type: contains\n        config: {path: report.md, pattern: written by the agent}\n"
    )
    text = (
        f"test_suite: s\nagents:\n  - name: agent\n    type: cli\n    command: {HOSTILE!r}\n"
        f"    cwd: work\n    working_folder: shared\ntests:\n{tests}"  # (a run's own folder: test_run_folders)
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs")
    (run,) = runs(anyio.run(runner.run))
    assert run.outcome == "passed", (run.error, [c.message for c in run.checks])
    assert (work / "report.md").is_file() and not (ROOT / "report.md").exists()
    adapter = CliAdapter(CliSettings(command=["x"], cwd="work"), name="a", base_dir=tmp_path)
    assert adapter.artifact_dir(request()) == work


def test_process_trees_are_supported_here() -> None:
    """The tests above check the Linux design; say so when it does not apply."""
    if sys.platform.startswith("linux"):
        assert process_module._tree_support() is True
    assert EXIT_DRAIN_SECONDS == 1.0
