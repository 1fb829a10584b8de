"""Portability (issue 27, NFR-005): the run directory's lock on every platform (the POSIX branch
for real, the Windows branch against a stand-in ``msvcrt``), and what ATP does on a system that
lacks process groups, ``fchmod``, folder descriptors or signal delivery: the next best thing and
one warning, never a crash."""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
import sys
import time
import types
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest

from atp.core import locking, portability
from atp.core.errors import AtpError
from atp.core.records import PlannedTest, RunHeader
from atp.core.store import LOCK_FILE, RunStore
from tests.facts import says

NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def nothing_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh ATP process would: nothing warned about yet."""
    monkeypatch.setattr(portability, "_told", set())


def header() -> RunHeader:
    return RunHeader(
        run_id="r1", suite="s", agent="a", agent_type="cli", started_at=NOW,
        tests=[PlannedTest(id="t", name="t", runs=1, fingerprint="f")],
    )  # fmt: skip


def platform_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "atp.platform"]


# --- the lock, POSIX: fcntl.flock, for real ------------------------------------------------

PROBE = """
import sys
from pathlib import Path
from atp.core import locking
path = Path(sys.argv[1])
held = locking.held(path)
try:
    locking.release(locking.acquire(path))
    got = True
except locking.Locked:
    got = False
print(held, got)
"""


def other_process(path: Path) -> tuple[bool, bool]:
    """What another process finds: whether the lock is held, and whether it could take it."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=60, check=True
    )
    held, got = done.stdout.split()
    return held == "True", got == "True"


@pytest.mark.skipif(os.name != "posix", reason="the fcntl branch")
def test_the_posix_lock_keeps_another_process_and_another_open_file_out_until_released(
    tmp_path: Path,
) -> None:
    path = tmp_path / LOCK_FILE
    assert not locking.held(path) and not path.exists()  # (a probe creates nothing)
    fd = locking.acquire(path)
    assert other_process(path) == (True, False)
    with pytest.raises(locking.Locked):  # a second open file of this process neither
        locking.acquire(path)
    assert locking.held(path)
    locking.release(fd)
    assert not locking.held(path)
    assert other_process(path) == (False, True)


@pytest.mark.skipif(os.name != "posix", reason="the fcntl branch")
def test_a_run_directory_is_in_use_for_another_process_while_written(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, header())
    assert other_process(store.directory / LOCK_FILE) == (True, False)
    store.close()
    assert other_process(store.directory / LOCK_FILE) == (False, True)


# --- the lock, Windows: msvcrt.locking, against a stand-in ----------------------------------


class FakeMsvcrt(types.ModuleType):
    """``msvcrt`` as Windows has it, for the lock: ``locking(fd, mode, nbytes)`` locks (or
    unlocks) ``nbytes`` from the file's position, and raises OSError (EACCES) at once, for a
    non-blocking mode, when another open file holds them."""

    LK_UNLCK, LK_LOCK, LK_NBLCK, LK_RLCK, LK_NBRLCK = 0, 1, 2, 3, 4

    def __init__(self) -> None:
        super().__init__("msvcrt")
        self.calls: list[tuple[str, int, int]] = []
        self.holders: dict[tuple[int, int], int] = {}
        """(device, inode) of a locked file -> the fd that holds it."""

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        names = {0: "unlock", 2: "lock", 4: "lock"}
        self.calls.append((names.get(mode, f"mode {mode}"), os.lseek(fd, 0, os.SEEK_CUR), nbytes))
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
        if mode == self.LK_UNLCK:
            if self.holders.get(key) != fd:
                raise OSError(errno.EACCES, "Permission denied")
            del self.holders[key]
            return
        assert mode in (self.LK_NBLCK, self.LK_NBRLCK), "ATP must never wait for the lock"
        if key in self.holders:
            raise OSError(errno.EACCES, "Permission denied")
        self.holders[key] = fd


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> FakeMsvcrt:
    fake = FakeMsvcrt()
    monkeypatch.setattr(locking, "WINDOWS", True)
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    monkeypatch.setitem(sys.modules, "fcntl", None)  # (Windows has none: importing it fails)
    return fake


def test_the_windows_lock_locks_the_first_byte_without_waiting_and_unlocks_it(
    tmp_path: Path, windows: FakeMsvcrt
) -> None:
    path = tmp_path / LOCK_FILE
    fd = locking.acquire(path)
    os.lseek(fd, 5, os.SEEK_SET)  # (wherever the file's position is, the same byte is unlocked)
    assert windows.calls == [("lock", 0, 1)]
    with pytest.raises(locking.Locked):
        locking.acquire(path)
    assert locking.held(path)
    locking.release(fd)
    assert windows.calls[-1] == ("unlock", 0, 1) and not windows.holders
    assert not locking.held(path)
    assert windows.calls[-2:] == [("lock", 0, 1), ("unlock", 0, 1)]  # (a probe that got it lets go)


def test_a_run_directory_on_windows_is_refused_while_written_with_the_same_error(
    tmp_path: Path, windows: FakeMsvcrt
) -> None:
    store = RunStore.create(tmp_path, header())
    assert RunStore.in_use(store.directory)
    with pytest.raises(AtpError) as info:
        RunStore.open(store.directory).lock()
    says(str(info.value), store.directory, "still running")
    store.close()
    assert not RunStore.in_use(store.directory) and not windows.holders
    RunStore.reopen(store.directory).close()
    assert {call[0] for call in windows.calls} == {"lock", "unlock"}


def test_a_lock_file_that_cannot_be_opened_is_a_storage_error_not_a_busy_run(
    tmp_path: Path, windows: FakeMsvcrt
) -> None:
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / LOCK_FILE).mkdir()  # (a folder where the lock file goes)
    with pytest.raises(AtpError) as info:
        RunStore(tmp_path / "r1").lock()
    says(str(info.value), "cannot lock", LOCK_FILE)
    assert windows.calls == []


# --- process groups --------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="agent processes need POSIX pipes")
def test_without_process_groups_an_agent_alone_is_stopped_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from atp.adapters import process

    monkeypatch.delattr(os, "killpg")
    monkeypatch.delattr(os, "setsid")
    monkeypatch.setattr(process, "_trees", False)  # (and no process trees: not Linux)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]

    async def main() -> list[int | None]:
        codes = []
        for _ in range(2):
            agent = process.AgentProcess.start(sleep, cwd=tmp_path, env=os.environ)
            started = time.monotonic()
            await agent.stop(grace_seconds=5)
            assert time.monotonic() - started < 4  # SIGTERM ended it: no wait for the grace period
            codes.append(agent.returncode)
        return codes

    with caplog.at_level(logging.WARNING):
        codes = anyio.run(main)
    assert codes == [-15, -15]
    (warning,) = platform_warnings(caplog)  # one, for the two agents
    says(warning, "os.killpg", sys.platform)


def test_the_kill_signal_where_there_is_no_sigkill(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import signal

    monkeypatch.delattr(signal, "SIGKILL")
    try:
        assert importlib.reload(portability).KILL == signal.SIGTERM
    finally:
        monkeypatch.undo()
        importlib.reload(portability)
    assert portability.KILL == signal.SIGKILL


def test_where_no_signal_probes_a_process_an_abandoned_ledger_owner_counts_as_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from atp.core import ledger

    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(os, "name", "nt")
    alive = ledger.process_alive(4242, None)
    monkeypatch.undo()
    assert alive and sent == []  # (Windows would take signal 0 as CTRL_C_EVENT)


def test_not_on_posix_an_agent_process_or_command_is_refused_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from atp.adapters.process import AgentProcess

    monkeypatch.setattr(os, "name", "nt")
    with pytest.raises(OSError) as info:
        AgentProcess.start([sys.executable, "-c", ""], cwd=tmp_path, env={})
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSYS
    says(info.value.strerror, "POSIX", sys.platform, "docs/platforms.md")


# --- files and folders -----------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_without_fchmod_a_file_replaced_keeps_its_permissions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from atp.core.files import write_atomic

    target = tmp_path / "run.json"
    target.write_bytes(b"old")
    target.chmod(0o600)
    monkeypatch.delattr(os, "fchmod")
    write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n" and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_without_folder_descriptors_a_tree_is_removed_by_path_and_no_link_is_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from atp.core import tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    root = tmp_path / "root"
    deep = root.joinpath(*["d"] * 150)  # (deeper than Python's recursion would like)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("x")
    (root / "read-only.txt").write_text("x")
    (root / "read-only.txt").chmod(0o444)
    try:
        (root / "link").symlink_to(outside, target_is_directory=True)
    except OSError:  # pragma: no cover - Windows without the right to make links
        pytest.skip("this system lets this user make no symbolic link")
    removed: list[str] = []
    real_unlink = os.unlink
    monkeypatch.setattr(os, "supports_dir_fd", set())
    monkeypatch.setattr(os, "unlink", lambda path, **kw: (removed.append(str(path)), real_unlink(path, **kw)))
    assert tree.remove_tree(root) is None
    monkeypatch.undo()
    assert not root.exists() and (outside / "keep.txt").read_text() == "keep"
    assert str(root / "link") in removed  # (by path: the fallback, not the descriptors)


def test_without_signal_delivery_to_the_event_loop_ctrl_c_is_said_to_be_abrupt_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from atp.core.signals import watch_signals

    class Unsupported:
        """As asyncio's loop on Windows: the receiver is made, adding its handlers fails."""

        def __init__(self, *signals: int) -> None:
            pass

        def __enter__(self) -> None:
            raise NotImplementedError

        def __exit__(self, *exc: object) -> None:
            raise AssertionError("never entered")

    monkeypatch.setattr(anyio, "open_signal_receiver", Unsupported)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            anyio.run(watch_signals, lambda n: None, lambda n: None)
    (warning,) = platform_warnings(caplog)
    says(warning, "Ctrl-C", sys.platform)


def test_the_platforms_recipe_runs_the_portability_tests_on_macos_and_windows() -> None:
    import yaml

    from tests.conftest import ROOT

    recipe = yaml.safe_load((ROOT / "examples/platforms/github-actions-unit-tests.yml").read_text())
    (job,) = recipe["jobs"].values()
    assert set(job["strategy"]["matrix"]["os"]) == {"macos-latest", "windows-latest"}
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert any(Path(__file__).relative_to(ROOT).as_posix() in run for run in runs)
    assert "requirements-dev.txt" in runs[0] and (ROOT / "requirements-dev.txt").is_file()
