"""The `atp` command against hostile agents: a second Ctrl-C, `kill -9` of ATP itself, agents
that run on after their response or send bytes the protocol does not allow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import AGENTS, ATP, PYTHON, write
from tests.e2e.test_atp_command import atp

HOSTILE = [PYTHON, str(AGENTS / "hostile.py")]


def hostile_suite(path: Path, modes: list[str], *, timeout: float = 60, grace: float = 1) -> Path:
    """One test per mode (the task's description is the hostile agent's mode)."""
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: '{mode}'}}\n    constraints: {{timeout_seconds: {timeout}}}\n"
        for i, mode in enumerate(modes)
    )
    return write(
        path,
        f"test_suite: hostile\nagents:\n  - name: agent\n    type: cli\n    command: {HOSTILE!r}\n"
        f"    grace_seconds: {grace}\ntests:\n{tests}",
    )


def pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def running(pid: int) -> bool:
    """Running: not gone, and not a zombie waiting for whoever adopted it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def wait_until(condition: object, within: float) -> bool:
    deadline = time.monotonic() + within
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


def reap_if_ours(pid: int) -> None:
    """An agent of a killed ATP may have been adopted by this process (when it is a subreaper)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def start_atp(suite: Path, cwd: Path, pid_file: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1", "AGENT_PID_FILE": str(pid_file)}
    return subprocess.Popen(
        [ATP, "test", f"--suite={suite}", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_kills_every_agent_at_once(tmp_path: Path, second: signal.Signals) -> None:
    # Agents that ignore SIGTERM, with a child in a session of its own that ignores it too,
    # and 60 s of grace: the first Ctrl-C would wait a minute for them.
    suite = hostile_suite(tmp_path / "suite.yaml", ["tree_ignoring_term", "tree_ignoring_term"], grace=60)
    pid_file = tmp_path / "pids"
    process = start_atp(suite, tmp_path, pid_file, "--parallel=2")
    try:
        assert wait_until(lambda: len(pids(pid_file)) == 4, within=30), pids(pid_file)
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        time.sleep(1.5)
        assert process.poll() is None  # waiting out the grace period of the agents
        assert all(running(pid) for pid in pids(pid_file))
        process.send_signal(second)
        signalled = time.monotonic()
        _, stderr = process.communicate(timeout=30)
        assert time.monotonic() - signalled < 5
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert f"stopping every agent at once (a second {second.name})" in stderr
    assert "finished runs are kept in" in stderr
    assert wait_until(lambda: not any(running(pid) for pid in pids(pid_file)), within=3)


def test_agents_of_a_killed_atp_are_stopped_by_the_next_atp_test(tmp_path: Path) -> None:
    """`kill -9` of ATP leaves its agents (in sessions of their own) running; the next
    `atp test` with the same run directory root stops them."""
    pid_file = tmp_path / "pids"
    sleeping = hostile_suite(tmp_path / "sleeping.yaml", ["sleep_tree"])
    first = start_atp(sleeping, tmp_path, pid_file)
    try:
        assert wait_until(lambda: len(pids(pid_file)) == 2, within=30), pids(pid_file)
        ledgers = list((tmp_path / ".atp" / "runs").glob("*/processes.jsonl"))
        assert len(ledgers) == 1
        first.kill()
        first.communicate(timeout=30)
        agent, child = pids(pid_file)
        time.sleep(0.5)
        assert running(agent) and running(child)  # the agent and its child run on

        quick = hostile_suite(tmp_path / "quick.yaml", ["ok"])
        second = atp("test", f"--suite={quick}", cwd=tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr
        run_name = ledgers[0].parent.name
        assert (
            f"atp: warning: stopped 2 agent processes left running by ATP process {first.pid} "
            f"(run {run_name})"
        ) in second.stderr
        assert "1 passed, 0 failed" in second.stdout
        assert wait_until(lambda: not running(agent) and not running(child), within=5)
        assert not ledgers[0].exists()
        assert not list((tmp_path / ".atp" / "runs").glob("*/processes.jsonl"))  # the clean run left none
    finally:
        for pid in pids(pid_file):
            if running(pid):
                os.kill(pid, signal.SIGKILL)
            reap_if_ours(pid)


def test_children_without_token_of_a_killed_atps_agents_are_stopped_by_the_next_atp_test(
    tmp_path: Path,
) -> None:
    """The agents of a `kill -9`ed ATP started children in sessions of their own with an empty
    environment (no token to find them by); the agents still run, so the next `atp test` walks
    their live trees and stops the children too."""
    pid_file = tmp_path / "pids"
    suite = hostile_suite(tmp_path / "trees.yaml", ["tree_noenv", "tree_noenv"])
    first = start_atp(suite, tmp_path, pid_file, "--parallel=2")
    try:
        assert wait_until(lambda: len(pids(pid_file)) == 4, within=30), pids(pid_file)
        (ledger,) = (tmp_path / ".atp" / "runs").glob("*/processes.jsonl")
        time.sleep(2)
        first.kill()
        first.communicate(timeout=30)
        time.sleep(0.3)
        assert all(running(pid) for pid in pids(pid_file))  # two agents and their children run on

        quick = hostile_suite(tmp_path / "quick.yaml", ["ok"])
        started = time.monotonic()
        second = atp("test", f"--suite={quick}", cwd=tmp_path)
        assert second.returncode == 0, second.stdout + second.stderr
        assert time.monotonic() - started < 20
        assert (
            f"atp: warning: stopped 4 agent processes left running by ATP process {first.pid} "
            f"(run {ledger.parent.name})"
        ) in second.stderr, second.stderr
        assert not list((tmp_path / ".atp" / "runs").glob("*/processes.jsonl"))
        assert "1 passed, 0 failed" in second.stdout
        assert wait_until(lambda: not any(running(pid) for pid in pids(pid_file)), within=5)
    finally:
        for pid in pids(pid_file):
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        for pid in pids(pid_file):
            assert wait_until(lambda pid=pid: reaped(pid), within=5), pid  # not even a zombie of ours


def reaped(pid: int) -> bool:
    """``pid`` is gone, or a zombie that is not this process's to reap (init reaps it)."""
    reap_if_ours(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[0] == "Z" and int(fields[1]) != os.getpid()


def test_agent_running_on_after_its_response_passes_quickly(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    suite = hostile_suite(tmp_path / "suite.yaml", ["linger_open", "ok", "setsid_holder"])
    started = time.monotonic()
    result = atp(
        "test",
        f"--suite={suite}",
        "--output=json",
        "--output-file=results.json",
        cwd=tmp_path,
        env={"AGENT_PID_FILE": str(pid_file)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 20  # not the 60 s limit
    data = json.loads((tmp_path / "results.json").read_text())
    lingering, ok, holder = (test["runs"][0] for test in data["tests"])
    assert lingering["status"] == "completed" and lingering["duration_seconds"] < 5
    assert "ATP took the response and stopped the agent" in lingering["warnings"][0]
    assert ok["warnings"] == [] and ok["outcome"] == "passed"
    assert holder["warnings"] == [
        "the agent exited, but 1 process it started kept its output open; ATP stopped reading and stopped it"
    ]
    assert len(pids(pid_file)) == 4
    assert wait_until(lambda: not any(running(pid) for pid in pids(pid_file)), within=3)


def test_bytes_the_protocol_does_not_allow_are_the_agents_failure(tmp_path: Path) -> None:
    suite = hostile_suite(tmp_path / "suite.yaml", ["bad_utf8_response", "bad_utf8_event", "ok"])
    result = atp("test", f"--suite={suite}", "--output=json", "--output-file=results.json", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "raised" not in result.stdout + result.stderr
    data = json.loads((tmp_path / "results.json").read_text())
    bad_response, bad_event, ok = (test["runs"][0] for test in data["tests"])
    assert bad_response["outcome"] == "failed"
    assert bad_response["error"].startswith(
        "agent exited with code 0; its last stdout line is not an ATP response (ATP response is not valid UTF-8"
    )
    assert bad_event["outcome"] == "passed" and bad_event["warnings"][0].startswith(
        "stderr line 2 (byte offset "
    )
    assert ok["outcome"] == "passed"


SECRET = "Zq8-hush-VmT4-secret-Rw9xK2"


def test_a_secret_at_the_cut_of_a_long_stderr_line_shows_no_part_of_it(tmp_path: Path) -> None:
    """A stderr line over `max_line_bytes` cut inside a secret: the part kept ends before
    anything that could begin the secret, and the rest of that line (which arrives later) is
    dropped, not logged as a line of its own."""
    write(tmp_path / "atp.config.yaml", "secrets:\n  key: ${THE_KEY}\n")
    suite = write(
        tmp_path / "suite.yaml",
        f"test_suite: secrets\nagents:\n  - name: agent\n    type: cli\n    command: {HOSTILE!r}\n"
        "    max_line_bytes: 1024\n"
        "tests:\n  - id: cut\n    task: {description: secret_cut 1015}\n"
        "    assertions:\n      - type: artifact_exists\n        config: {path: missing.md}\n"  # fails: -v shows the log
        "  - id: ok\n    task: {description: ok}\n",
    )
    pid_file = tmp_path / "pids"
    result = atp(
        "test",
        f"--suite={suite}",
        "-v",
        "--output=console",
        "--output=json",
        "--output-file=results.json",
        cwd=tmp_path,
        env={"THE_KEY": SECRET, "AGENT_PID_FILE": str(pid_file)},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(pids(pid_file)) == 2 and all(
        wait_until(lambda pid=pid: reaped(pid), within=5) for pid in pids(pid_file)
    )
    assert "a stderr line longer than 1024 bytes was cut" in result.stdout
    assert "xxxxxxxxxx" in result.stdout  # the log tail is shown
    written = {path: path.read_bytes() for path in (tmp_path / ".atp").rglob("*") if path.is_file()}
    written[tmp_path / "results.json"] = (tmp_path / "results.json").read_bytes()
    (log,) = [data for path, data in written.items() if path.name.endswith(".log")]
    lines = log.decode().splitlines()
    assert len(lines) == 1 and set(lines[0]) == {"x"} and 900 < len(lines[0]) <= 1015, lines  # no "y" line
    # no 6 characters of the secret, from its start (a cut) or its end (the rest of the line)
    pieces = [SECRET[:6], SECRET[-6:], SECRET[10:16]]
    for name, text in [
        ("stdout", result.stdout.encode()),
        ("stderr", result.stderr.encode()),
        *written.items(),
    ]:
        assert not any(piece.encode() in text for piece in pieces), name
