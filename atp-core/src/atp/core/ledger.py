"""Which processes a run started, kept on disk, so that a later ``atp test`` can stop what a
killed ATP left running.

Agents run in sessions of their own, so when ATP dies without a chance to stop them
(``kill -9``, a crash, a closed terminal) they run on. A :class:`ProcessLedger` writes
``<run_dir>/processes.jsonl`` while a run is in progress: a first line naming its owner (ATP's
pid and start time, and the boot it runs in), then a line for every process an adapter started
(its pid, its start time and the token in its environment). That a process ended is kept in
memory only: a recorded process that is no longer the same one (its pid gone, or another start
time) is never killed, so one write per process is enough. A clean end (every recorded process
ended) deletes the file; files of older versions may also hold ``{"ended": pid}`` lines.
:func:`stop_abandoned` finds the files whose owner is gone and kills the processes they name
that still run, with their live process trees.

The file is in the run directory, where an agent can write: it is untrusted input, and a line
in it proves nothing. ATP acts only on a process that proves ATP started it: the recorded pid
still has the recorded start time *and* its environment holds ``ATP_AGENT_TOKEN=<the recorded
token>`` (random per process); a line without a token, a process that does not carry its
token (another user's, whose environment cannot be read, never does) and a ledger of another
boot (start times count from the boot) are never acted on. A token recorded by an ATP that
still runs is left to it.

Any adapter that starts processes records them in the ledger ATP handed it
(:attr:`atp.core.adapter.Adapter.processes`; an evaluator's is
:attr:`atp.core.evaluator.EvalContext.processes`), without knowing the run directory::

    from atp.core import ledger

    token = ledger.new_token()       # give it to the process as ATP_AGENT_TOKEN
    ...start the process with that environment...
    recorder = self.processes        # None when no run is in progress
    if recorder is not None:
        recorder.started(pid, token)
    ...
    if recorder is not None:
        recorder.ended(pid)

A process is identified by its pid *and* its start time (``/proc/<pid>/stat`` field 22), so a
pid that the system gave to another process since is never killed. On systems without ``/proc``
start times are unknown, and :func:`stop_abandoned` kills nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import select
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from atp.core import files
from atp.core.portability import KILL, kill_group

LEDGER_FILE = "processes.jsonl"
TOKEN_VARIABLE = "ATP_AGENT_TOKEN"
"""The environment variable that carries a process's token; its descendants inherit it, which
is how ATP recognises them."""

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
"""Where Linux says which boot this is: start times count from it."""
PID_MAX = 1 << 22
"""The largest pid Linux gives (``PID_MAX_LIMIT``)."""
MAX_TOKEN_CHARS = 256
MAX_LINE_BYTES = 4096
"""The longest ledger line read (ATP's are under 200 bytes)."""

logger = logging.getLogger("atp.ledger")

_current: contextvars.ContextVar[ProcessLedger | None] = contextvars.ContextVar(
    "atp_process_ledger", default=None
)


def new_token() -> str:
    """A token unique to one started process (16 hex digits)."""
    return os.urandom(8).hex()


def boot_id() -> str | None:
    """The id of the boot the system is in; ``None`` when it is not known (no ``/proc``)."""
    try:
        with open(BOOT_ID_FILE, "rb") as handle:
            return handle.read(128).decode("ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def carries(pid: int, entry: bytes) -> bool:
    """Whether the environment of process ``pid`` holds ``entry`` (``ATP_AGENT_TOKEN=...``);
    ``False`` when it cannot be read (gone, or another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return entry in handle.read().split(b"\0")
    except OSError:
        return False


def _entry(token: str) -> bytes:
    return f"{TOKEN_VARIABLE}={token}".encode()


def start_time(pid: int | str) -> int | None:
    """When a process started (clock ticks after boot, ``/proc/<pid>/stat`` field 22); ``None``
    when there is no such process or the system has no ``/proc``."""
    found = _state_and_start(pid)
    return found[1] if found is not None else None


def _state_and_start(pid: int | str) -> tuple[bytes, int] | None:
    """Fields 3 (the state: ``Z`` for a zombie) and 22 of ``/proc/<pid>/stat``."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _runs(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (a zombie does not)."""
    found = _state_and_start(pid)
    return found is not None and found[1] == start and found[0] != b"Z"


def current() -> ProcessLedger | None:
    """The ledger of the run in progress, or ``None``: a fallback for a third-party helper that
    has no adapter or evaluation context at hand (ATP hands the ledger on explicitly)."""
    return _current.get()


@contextlib.contextmanager
def activate(ledger: ProcessLedger) -> Iterator[ProcessLedger]:
    """Make ``ledger`` the one :func:`current` returns inside the block (and in the tasks
    started there); close it at the end of the block."""
    token = _current.set(ledger)
    try:
        yield ledger
    finally:
        _current.reset(token)
        ledger.close()


class ProcessLedger:
    """The processes one run started, appended to ``<run_dir>/processes.jsonl``.

    The file is created with the first process recorded (a run whose adapter starts none
    writes nothing); each line is one ``write`` to a file opened with ``O_APPEND``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._running: set[int] = set()
        self._failed = False
        self._closed = False

    @classmethod
    def create(cls, run_dir: Path) -> ProcessLedger:
        return cls(run_dir / LEDGER_FILE)

    def started(self, pid: int, token: str, start: int | None = None) -> None:
        """Record a process just started (``start``: its start time, read when not given)."""
        if start is None:
            start = start_time(pid)
        self._running.add(pid)
        self._write({"pid": pid, "start": start, "token": token})

    def ended(self, pid: int) -> None:
        """Record that a process recorded with :meth:`started` is gone (and what it left), in
        memory: nothing is written (see the module's docstring)."""
        self._running.discard(pid)

    @property
    def running(self) -> frozenset[int]:
        """The pids recorded as started and not as ended."""
        return frozenset(self._running)

    def close(self) -> None:
        """Close the file; delete it when every process recorded has ended (a clean end). A
        process still recorded as running keeps the file, for :func:`stop_abandoned`."""
        if self._closed:
            return
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if not self._running:
                with contextlib.suppress(OSError):
                    self.path.unlink()

    def _write(self, record: dict[str, Any]) -> None:
        if self._failed or self._closed:
            return
        try:
            if self._fd is None:
                self._fd = files.open_append(self.path)  # never through a link an agent put there
                owner = {"owner": os.getpid(), "start": start_time("self"), "boot": boot_id()}
                os.write(self._fd, json.dumps(owner).encode() + b"\n")
            os.write(self._fd, json.dumps(record).encode() + b"\n")
        except OSError as exc:
            # The ledger is a safety net: a run goes on without it.
            self._failed = True
            logger.warning("cannot record agent processes in %s: %s", self.path, exc.strerror or exc)


class _Abandoned:
    """What one ledger file says: its owner and the processes it left recorded as running."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.owner: int | None = None
        self.owner_start: int | None = None
        self.boot: str | None = None
        self.running: dict[int, tuple[int, str]] = {}
        """Each recorded process with its start time and token (lines without them are left out)."""


def _read(run_root: Path, name: str) -> _Abandoned | None:
    """What the ledger of the run directory ``name`` says, as far as it reads; ``None`` when
    there is none, or it is not a regular file inside the run directory (a link, a FIFO)."""
    relative = f"{name}/{LEDGER_FILE}"
    try:
        handle = files.open_inside(run_root, relative)
    except OSError:
        return None
    found = _Abandoned(run_root / relative)
    with handle, contextlib.suppress(OSError):
        for number, line in enumerate(files.lines(handle, MAX_LINE_BYTES)):
            try:
                record = json.loads(line) if line is not None else None
            except ValueError:
                continue  # a line cut short when ATP was killed while writing it
            if isinstance(record, dict):
                _take(found, record, first=number == 0)
    return found


def _take(found: _Abandoned, record: dict[str, Any], first: bool) -> None:
    start = record.get("start")
    start = start if isinstance(start, int) and not isinstance(start, bool) and start >= 0 else None
    if first and _is_pid(record.get("owner")):
        found.owner, found.owner_start = record["owner"], start
        boot = record.get("boot")
        found.boot = boot if isinstance(boot, str) else None
    elif _is_pid(record.get("pid")):
        token = record.get("token")
        if start is not None and isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS:
            found.running[record["pid"]] = (start, token)
        else:  # no proof to ask the process for: never acted on
            found.running.pop(record["pid"], None)
    elif _is_pid(record.get("ended")):
        found.running.pop(record["ended"], None)


def _recent(path: Path, seconds: float = 60.0) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return False


def _is_pid(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 < value <= PID_MAX


def process_alive(pid: int, start: int | None) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (when the start time
    is unknown, whether any process has that pid)."""
    if start is not None:
        return _runs(pid, start)
    if os.name != "posix":  # no probe without a signal (Windows takes 0 as CTRL_C_EVENT): alive
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _proven(pid: int, start: int, token: str) -> bool:
    """Whether ``pid`` is the process ATP recorded: it started at ``start`` and carries ``token``
    (checked before and after its environment is read, so that a pid reused meanwhile fails)."""
    return _runs(pid, start) and carries(pid, _entry(token)) and _runs(pid, start)


def _kill_same(pid: int, start: int, token: str) -> bool:
    """SIGKILL the process group and the process ``pid``, if it is still the process that
    started at ``start`` and carries ``token``."""
    if pid == os.getpid():
        return False
    pidfd: int | None = None
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            pidfd = pidfd_open(pid)
        except OSError:
            return False
    try:
        # While the pidfd's process exists, its pid names no other process.
        if not _proven(pid, start, token):
            return False
        with contextlib.suppress(OSError):
            kill_group(pid, KILL)  # its group, while its pid still names it
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            else:
                os.kill(pid, KILL)
        except OSError:
            return False
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def children(pid: int | str) -> list[int]:
    """The children of process ``pid`` (``"self"``: of ATP), of every one of its threads, from
    ``/proc``; ``[]`` when it is gone or there is no ``/proc``."""
    base = f"/proc/{pid}/task"
    try:
        threads = os.listdir(base)
    except OSError:
        return []
    found: list[int] = []
    for thread in threads:
        try:
            fd = os.open(f"{base}/{thread}/children", os.O_RDONLY)
        except OSError:
            continue
        try:
            data = os.read(fd, 65536)
            while len(data) % 65536 == 0 and data:  # (a long list comes in pieces)
                more = os.read(fd, 65536)
                if not more:
                    break
                data += more
            found.extend(int(child) for child in data.split())
        except (OSError, ValueError):
            continue
        finally:
            os.close(fd)
    return found


def _parent(pid: int) -> int | None:
    """The parent of ``pid`` (field 4 of ``/proc/<pid>/stat``); ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    try:
        return int(data[data.rfind(b")") + 2 :].split()[1])
    except (IndexError, ValueError):
        return None


def _send(pidfd: int, sig: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, sig)
    except OSError:  # it has ended
        return False
    return True


class _Tree:
    """The processes to kill, each held by a pidfd (so a pid reused meanwhile is never
    signalled), stopped (SIGSTOP) as they are found so that none can start another while the
    rest are found."""

    def __init__(self) -> None:
        self.pidfds: dict[int, int] = {}
        self.groups: dict[int, int] = {}
        """Recorded processes whose process group is killed too: pid -> pidfd."""

    def add_recorded(self, pid: int, start: int, token: str) -> bool:
        """The recorded process ``pid``, if it still runs, started at ``start`` and carries
        ``token``, with its process group and its live tree. Returns whether it was still the
        process ATP started."""
        pidfd = self._open(pid)
        if pidfd is None:
            return False
        # While the pidfd's process exists, its pid names no other process.
        if not _proven(pid, start, token):
            os.close(pidfd)
            return False
        self._stop(pid, pidfd)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGSTOP)  # its group, while its pid still names it
        self.groups[pid] = pidfd
        self._walk(pid)
        return True

    def add_carrier(self, pid: int, entry: bytes) -> bool:
        """A process whose environment held ``entry`` (a token) when it was listed, if it
        still does, with its live tree."""
        pidfd = self._open(pid)
        if pidfd is None:
            return False
        if not carries(pid, entry):
            os.close(pidfd)
            return False
        self._stop(pid, pidfd)
        self._walk(pid)
        return True

    def kill(self) -> set[int]:
        """SIGKILL the groups, then every process; returns the pids that were killed."""
        for pid, pidfd in self.groups.items():
            if not _exited(pidfd):  # its pid still names its group
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
        killed = {pid for pid, pidfd in self.pidfds.items() if _send(pidfd, signal.SIGKILL)}
        for pidfd in self.pidfds.values():
            os.close(pidfd)
        self.pidfds.clear()
        self.groups.clear()
        return killed

    def _open(self, pid: int) -> int | None:
        if pid == os.getpid() or pid in self.pidfds:
            return None
        try:
            return os.pidfd_open(pid)
        except OSError:
            return None

    def _stop(self, pid: int, pidfd: int) -> None:
        self.pidfds[pid] = pidfd
        _send(pidfd, signal.SIGSTOP)

    def _walk(self, root: int) -> None:
        """Add the live tree of ``root`` (stopped: it starts no process meanwhile)."""
        queue = [root]
        while queue:
            parent = queue.pop()
            for pid in children(parent):
                pidfd = self._open(pid)
                if pidfd is None:
                    continue
                # Still the stopped parent's child: not a pid reused since it was listed.
                if _parent(pid) != parent:
                    os.close(pidfd)
                    continue
                self._stop(pid, pidfd)
                queue.append(pid)


def _exited(pidfd: int) -> bool:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _with_tokens(tokens: dict[str, Path]) -> dict[int, tuple[Path, bytes]]:
    """Processes whose environment holds one of ``tokens`` (token -> ledger file): the
    descendants of recorded processes, which inherited it; with the ledger file and the
    environment entry. Other users' processes are not readable, and not looked at."""
    if not tokens:
        return {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    wanted = {_entry(token): run for token, run in tokens.items()}
    me = os.getpid()
    found: dict[int, tuple[Path, bytes]] = {}
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            run = wanted.get(entry)
            if run is not None:
                found[pid] = (run, entry)
                break
    return found


def stop_abandoned(run_root: Path) -> list[str]:
    """Stop the processes that runs below ``run_root`` left running when their ATP died.

    For every ``run_root/*/processes.jsonl`` whose owner is gone, every recorded process that
    has not ended and proves it is the one ATP started (same pid and start time, and its
    recorded token in its environment) is killed (SIGKILL, its process group, itself and its
    live process tree: its descendants, whatever session or environment they have), and so is
    every process whose environment holds the token of one of them, with its tree; then the
    file is deleted. With pidfds (Linux) every process is stopped (SIGSTOP) as it is found and
    signalled through a pidfd, so none starts another meanwhile and a pid reused meanwhile is
    never signalled. A file whose owner still runs (another ``atp test`` in progress) is left
    alone, and so are the tokens it records; a file of another boot is deleted, and nothing it
    names is touched; a file or run directory that is a link is not read. Returns one message
    per run directory in which something was stopped.
    """
    ledgers, live = _abandoned(run_root)
    killed = _stop(ledgers, live)
    messages: list[str] = []
    for found in ledgers:
        with contextlib.suppress(OSError):
            found.path.unlink()
        count = killed[found.path]
        if count:
            noun = "agent process" if count == 1 else "agent processes"
            by = f"ATP process {found.owner}" if found.owner is not None else "an ATP process"
            messages.append(f"stopped {count} {noun} left running by {by} (run {found.path.parent.name})")
    return messages


def _abandoned(run_root: Path) -> tuple[list[_Abandoned], set[str]]:
    """The ledgers below ``run_root`` whose ATP is gone, and the tokens recorded by the ATPs
    still running. The ledger of another boot names no process that runs now: it is deleted."""
    try:
        with os.scandir(run_root) as entries:
            names = sorted(entry.name for entry in entries if entry.is_dir(follow_symlinks=False))
    except OSError:
        return [], set()
    boot = boot_id()
    abandoned: list[_Abandoned] = []
    live: set[str] = set()
    for name in names:
        found = _read(run_root, name)
        if found is None:
            continue
        if found.boot is not None and boot is not None and found.boot != boot:
            with contextlib.suppress(OSError):
                found.path.unlink()
            continue
        if found.owner is None and _recent(found.path):
            continue  # an ATP that has just created the file and is writing its first line
        if found.owner is not None and process_alive(found.owner, found.owner_start):
            live.update(token for _, token in found.running.values())
            continue
        abandoned.append(found)
    return abandoned, live


def _stop(ledgers: list[_Abandoned], live: set[str]) -> dict[Path, int]:
    """Kill what ``ledgers`` record (each process that proves it is ATP's, with its tree) and
    the processes that carry their tokens, but those in ``live``; how many, by ledger."""
    killed = {found.path: 0 for found in ledgers}
    tokens: dict[str, Path] = {}
    trees = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")
    tree = _Tree()
    runs: dict[int, Path] = {}
    try:  # (every process stopped is killed, whatever happens)
        for found in ledgers:
            for pid, (start, token) in found.running.items():
                if token in live:
                    continue
                tokens[token] = found.path
                if trees:
                    before = set(tree.pidfds)
                    if tree.add_recorded(pid, start, token):
                        runs.update(dict.fromkeys(set(tree.pidfds) - before, found.path))
                elif _kill_same(pid, start, token):
                    killed[found.path] += 1
        for pid, (path, entry) in _with_tokens(tokens).items():
            if pid in runs:
                continue
            if trees:
                before = set(tree.pidfds)
                if tree.add_carrier(pid, entry):
                    runs.update(dict.fromkeys(set(tree.pidfds) - before, path))
                continue
            try:
                os.kill(pid, KILL)
            except OSError:
                continue
            killed[path] += 1
    finally:
        for pid in tree.kill():
            killed[runs[pid]] += 1
    return killed
