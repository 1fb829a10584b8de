"""atp.core.ledger: the processes of a run on disk, and stopping those a dead ATP left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from atp.core import ledger
from atp.core.ledger import LEDGER_FILE, TOKEN_VARIABLE, ProcessLedger, start_time, stop_abandoned

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes to play the agents; whatever is left of them is killed and reaped after."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def sleeper(
    sleepers: list[subprocess.Popen[bytes]], token: str | None = None, **options: object
) -> subprocess.Popen[bytes]:
    """A process playing an agent; with ``token``, carrying it as an agent ATP starts does (once
    this returns, its environment shows it)."""
    options.setdefault("start_new_session", True)
    if token is not None:
        options["env"] = {**os.environ, TOKEN_VARIABLE: token}
    process = subprocess.Popen(SLEEP, **options)  # type: ignore[call-overload]
    sleepers.append(process)
    if token is not None:
        wait_for_token(process.pid, token)
    return process


def wait_for_token(pid: int, token: str) -> None:
    """Until ``pid`` has exec'd: before, /proc shows its parent's environment."""
    deadline = time.monotonic() + 10
    while token.encode() not in Path(f"/proc/{pid}/environ").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)


def gone(process: subprocess.Popen[bytes], within: float = 5.0) -> bool:
    try:
        process.wait(timeout=within)
    except subprocess.TimeoutExpired:
        return False
    return True


def dead_owner() -> tuple[int, int]:
    """The pid and start time of a process that has ended."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; sys.stdout.write(open('/proc/self/stat').read())"],
        stdout=subprocess.PIPE,
    )
    stat = process.communicate()[0]
    fields = stat[stat.rfind(b")") + 2 :].split()
    return process.pid, int(fields[19])


def owner_line(pid: int, start: int | None) -> dict[str, object]:
    """The first line of a ledger, as ATP writes it (with the boot it runs in)."""
    return {"owner": pid, "start": start, "boot": ledger.boot_id()}


def write_ledger(run_dir: Path, lines: list[dict[str, object]]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LEDGER_FILE
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_start_time_is_field_22_of_stat() -> None:
    mine = start_time(os.getpid())
    assert mine is not None and mine == start_time("self")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    later = start_time(child.pid)
    child.wait()
    assert later is not None and later >= mine
    assert start_time(child.pid) is None  # gone
    assert start_time(2**22 + 12345) is None


def test_ledger_records_owner_and_processes_and_keeps_their_end_in_memory(tmp_path: Path) -> None:
    recorder = ProcessLedger.create(tmp_path)
    assert not (tmp_path / LEDGER_FILE).exists()  # nothing recorded, no file
    recorder.started(1234, "aa" * 8, start=42)
    recorder.started(1235, "bb" * 8, start=43)
    recorder.ended(1234)
    recorder.ended(1234)
    lines = [json.loads(line) for line in (tmp_path / LEDGER_FILE).read_text().splitlines()]
    assert lines == [  # one write per process: an ended one is told by its pid and start time
        {"owner": os.getpid(), "start": start_time("self"), "boot": ledger.boot_id()},
        {"pid": 1234, "start": 42, "token": "aa" * 8},
        {"pid": 1235, "start": 43, "token": "bb" * 8},
    ]
    assert recorder.running == {1235}
    recorder.close()
    assert (tmp_path / LEDGER_FILE).exists()  # 1235 has not ended: kept for the next ATP


def test_a_clean_end_deletes_the_ledger_and_a_run_without_processes_writes_none(tmp_path: Path) -> None:
    recorder = ProcessLedger.create(tmp_path)
    recorder.started(os.getpid(), "cc" * 8)
    assert json.loads((tmp_path / LEDGER_FILE).read_text().splitlines()[1])["start"] == start_time("self")
    recorder.ended(os.getpid())
    recorder.close()
    recorder.close()
    assert not (tmp_path / LEDGER_FILE).exists()
    empty = ProcessLedger.create(tmp_path / "other")
    empty.close()
    assert not (tmp_path / "other").exists()


def test_a_ledger_that_cannot_be_written_does_not_stop_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = ProcessLedger.create(tmp_path / "missing-directory")
    recorder.started(1234, "dd" * 8, start=1)
    recorder.ended(1234)
    recorder.close()
    assert "cannot record agent processes" in caplog.text


def test_current_is_the_activated_ledger_in_tasks_too(tmp_path: Path) -> None:
    recorder = ProcessLedger.create(tmp_path)
    seen: list[object] = []

    async def task() -> None:
        seen.append(ledger.current())

    async def main() -> None:
        assert ledger.current() is None
        with ledger.activate(recorder) as active:
            assert active is recorder and ledger.current() is recorder
            recorder.started(os.getpid(), "ee" * 8)
            async with anyio.create_task_group() as tg:
                tg.start_soon(task)
            recorder.ended(os.getpid())
        assert ledger.current() is None

    anyio.run(main)
    assert seen == [recorder]
    assert not (tmp_path / LEDGER_FILE).exists()  # activate closed it, cleanly


def test_processes_of_a_dead_atp_are_killed_and_the_file_removed(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    owner, owner_start = dead_owner()
    token = ledger.new_token()
    agent = sleeper(sleepers, token)
    ended = sleeper(sleepers, "ff" * 8)
    child = sleeper(sleepers, token)  # a descendant, by its token
    path = write_ledger(
        tmp_path / "20260101-000000-aaaaaa",
        [
            owner_line(owner, owner_start),
            {"pid": agent.pid, "start": start_time(agent.pid), "token": token},
            {"pid": ended.pid, "start": start_time(ended.pid), "token": "ff" * 8},
            {"ended": ended.pid},
        ],
    )
    messages = stop_abandoned(tmp_path)
    assert messages == [
        f"stopped 2 agent processes left running by ATP process {owner} (run 20260101-000000-aaaaaa)"
    ]
    assert gone(agent) and agent.returncode == -signal.SIGKILL
    assert gone(child) and child.returncode == -signal.SIGKILL
    assert ended.poll() is None  # recorded as ended: not the dead ATP's any more
    assert not path.exists()
    assert stop_abandoned(tmp_path) == []


def test_the_process_group_of_a_recorded_process_is_killed(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    if sys.version_info < (3, 11):
        pytest.skip("process_group needs Python 3.11")
    owner, owner_start = dead_owner()
    leader = sleeper(sleepers, "ab" * 8, start_new_session=False, process_group=0)
    member = subprocess.Popen(SLEEP, process_group=leader.pid)  # in the leader's group
    sleepers.append(member)
    write_ledger(
        tmp_path / "run",
        [
            owner_line(owner, owner_start),
            {"pid": leader.pid, "start": start_time(leader.pid), "token": "ab" * 8},
        ],
    )
    assert stop_abandoned(tmp_path) == [
        f"stopped 1 agent process left running by ATP process {owner} (run run)"
    ]
    assert gone(leader) and gone(member) and member.returncode == -signal.SIGKILL


def test_a_reused_pid_is_never_killed(tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]) -> None:
    owner, owner_start = dead_owner()
    stranger = sleeper(sleepers)  # another process: it does not carry the recorded token
    stranger_start = start_time(stranger.pid)
    assert stranger_start is not None
    path = write_ledger(
        tmp_path / "run",
        [
            owner_line(owner, owner_start),
            # the pid of the recorded process, now a different process (another start time)
            {"pid": stranger.pid, "start": stranger_start - 1, "token": "12" * 8},
        ],
    )
    assert stop_abandoned(tmp_path) == []
    time.sleep(0.1)
    assert stranger.poll() is None
    assert not path.exists()


def test_the_ledger_of_a_running_atp_is_left_alone(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    agent = sleeper(sleepers, "34" * 8)
    # the owner runs (this process), or a process with its pid and start time does
    path = write_ledger(
        tmp_path / "run",
        [
            owner_line(os.getpid(), start_time("self")),
            {"pid": agent.pid, "start": start_time(agent.pid), "token": "34" * 8},
        ],
    )
    assert stop_abandoned(tmp_path) == []
    assert agent.poll() is None and path.exists()
    # the same pid with another start time is another process: the owner is gone
    path.write_text(
        path.read_text().replace(f'"start": {start_time("self")},', f'"start": {start_time("self") - 1},', 1)
    )  # type: ignore[operator]
    assert len(stop_abandoned(tmp_path)) == 1
    assert gone(agent)


def test_damaged_ledgers_are_read_as_far_as_they_go(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    owner, owner_start = dead_owner()
    agent = sleeper(sleepers, "56" * 8)
    path = tmp_path / "run" / LEDGER_FILE
    path.parent.mkdir()
    path.write_text(
        json.dumps(owner_line(owner, owner_start))
        + "\n"
        + "[1, 2]\n"
        + '{"pid": true}\n'
        + '{"pid": "12"}\n'
        + json.dumps({"pid": agent.pid, "start": start_time(agent.pid), "token": "56" * 8})
        + "\n"
        + '{"ended": 99'  # cut short by kill -9
    )
    assert len(stop_abandoned(tmp_path)) == 1 and gone(agent)
    fresh = tmp_path / "new" / LEDGER_FILE
    fresh.parent.mkdir()
    fresh.write_text("")  # an ATP that is writing its first line right now
    assert stop_abandoned(tmp_path) == [] and fresh.exists()
    os.utime(fresh, (time.time() - 3600, time.time() - 3600))
    assert stop_abandoned(tmp_path) == [] and not fresh.exists()
    assert stop_abandoned(tmp_path / "does-not-exist") == []


def test_an_atp_that_is_a_zombie_is_gone(tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]) -> None:
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    sleepers.append(zombie)
    zombie_start = start_time(zombie.pid)
    assert zombie_start is not None
    deadline = time.monotonic() + 5
    while "\nState:\tZ" not in Path(f"/proc/{zombie.pid}/status").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)  # killed, not yet reaped by its parent (this process)
    agent = sleeper(sleepers, "78" * 8)
    write_ledger(
        tmp_path / "run",
        [
            owner_line(zombie.pid, zombie_start),
            {"pid": agent.pid, "start": start_time(agent.pid), "token": "78" * 8},
        ],
    )
    assert stop_abandoned(tmp_path) == [
        f"stopped 1 agent process left running by ATP process {zombie.pid} (run run)"
    ]
    assert gone(agent)


def test_the_live_tree_of_a_recorded_process_is_killed_whatever_its_session_and_environment(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """A recorded agent's child that started a session of its own and cleared its environment
    (no token, not in the agent's group), and that child's own child: found in the agent's live
    tree, stopped as found, killed through pidfds."""
    if not hasattr(os, "pidfd_open"):
        pytest.skip("needs pidfds")
    owner, owner_start = dead_owner()
    child = (
        "import os, sys, time\npid = os.fork()\nif pid: print(os.getpid(), pid, flush=True)\ntime.sleep(60)"
    )
    code = (
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}], "
        "start_new_session=True, env={})\ntime.sleep(60)"
    )
    agent = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,
        stdout=subprocess.PIPE,
        env={**os.environ, TOKEN_VARIABLE: "9a" * 8},
    )
    sleepers.append(agent)
    assert agent.stdout is not None
    descendants = [int(pid) for pid in agent.stdout.readline().split()]
    assert len(descendants) == 2 and all(_runs(pid) for pid in descendants)
    assert all(TOKEN_VARIABLE.encode() not in _environ(pid) for pid in descendants)
    path = write_ledger(
        tmp_path / "run",
        [
            owner_line(owner, owner_start),
            {"pid": agent.pid, "start": start_time(agent.pid), "token": "9a" * 8},
        ],
    )
    started = time.monotonic()
    assert stop_abandoned(tmp_path) == [
        f"stopped 3 agent processes left running by ATP process {owner} (run run)"
    ]
    assert time.monotonic() - started < 2
    assert gone(agent) and agent.returncode == -signal.SIGKILL
    assert _ended(descendants), [(pid, _state(pid)) for pid in descendants]
    assert not path.exists()


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rfind(")") + 2 :].split()[0]


def _runs(pid: int) -> bool:
    return _state(pid) not in ("gone", "Z")


def _ended(pids: list[int], within: float = 5.0) -> bool:
    """Every one of ``pids`` is gone; a zombie of this process (which may be a subreaper, when
    other tests started agents in it) is reaped here, so none is left as ours."""
    deadline = time.monotonic() + within
    while True:
        for pid in pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        if all(_state(pid) == "gone" or (_state(pid) == "Z" and _parent(pid) != os.getpid()) for pid in pids):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rfind(")") + 2 :].split()[1])
