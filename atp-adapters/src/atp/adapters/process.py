"""A child process whose pipes are read and written without blocking the event loop.

Adapters that speak to an agent through a process (the ``cli`` adapter; anything that runs a
command) start it with :meth:`AgentProcess.start`: in a process group of its own, its stdin,
stdout and stderr non-blocking pipes that are read and written when the event loop says they are
ready. This costs a fraction of the event loop's subprocess transports (no transport and
protocol objects, no watcher thread; the exit is seen through a pidfd on Linux). POSIX only.

Stopping an agent stops everything it started, not only its process group. On Linux:

- the first start makes ATP a child subreaper (``PR_SET_CHILD_SUBREAPER``), so what an agent
  leaves behind when it exits is reparented to ATP instead of init;
- every agent gets a token of its own in ``ATP_AGENT_TOKEN``, which its descendants inherit;
- the agent's processes are its live process tree, and ATP's own children (not agents ATP
  started) whose environment holds the agent's token, whose process group or session is the
  agent's, or that hold one of the agent's output pipes;
- they are sent SIGTERM with the group, SIGKILL after the grace period, and those that are
  ATP's children are reaped. Each is addressed through a pidfd, so a pid the system gave to
  another process meanwhile is never signalled.

Elsewhere (or without pidfds) only the process group is stopped. Every started process is
recorded in the run's process ledger (:mod:`atp.core.ledger`) while it lives.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from atp.core import ledger

READ_SIZE = 1024 * 1024
F_SETPIPE_SZ = 1031  # Linux: the size of a pipe's buffer
PR_SET_CHILD_SUBREAPER = 36  # Linux prctl option
POLL_SECONDS = 0.01
"""How often ATP looks whether the processes an agent left have ended."""
REAP_SECONDS = 2.0
"""How long ATP waits, after SIGKILL, for the agent's processes to be gone."""
KILL_ROUNDS = 3
"""How many times ATP looks again for processes started while it was killing the others."""

_LIVE: set[AgentProcess] = set()
"""Every agent process started and not yet stopped, whoever started it."""
_trees: bool | None = None
"""Whether the process tree can be stopped (Linux with /proc and pidfds); decided at the
first start, which also makes ATP a child subreaper."""


def _tree_support() -> bool:
    global _trees
    if _trees is None:
        _trees = (
            sys.platform.startswith("linux")
            and hasattr(os, "pidfd_open")
            and hasattr(signal, "pidfd_send_signal")
            and hasattr(os, "P_PIDFD")
            and os.path.isdir("/proc/self/task")
        )
        if _trees:
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            except (OSError, AttributeError):  # pragma: no cover - no libc prctl
                pass  # the live tree and the group are still found; orphans go to init
    return _trees


def _children(pid: int | str) -> list[int]:
    """The children of process ``pid`` (of every one of its threads); ``[]`` when it is gone."""
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
        data = b""
        try:
            while chunk := os.read(fd, 1 << 16):
                data += chunk
        except OSError:
            pass
        finally:
            os.close(fd)
        found.extend(int(child) for child in data.split())
    return found


def _stat(pid: int) -> tuple[int, int, int] | None:
    """The parent, process group and session of ``pid``; ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


_TOKEN_KEY = ledger.TOKEN_VARIABLE.encode() + b"="


def _token(pid: int) -> bytes | None:
    """The agent token in the environment of ``pid``; ``None`` when there is none (or it
    cannot be read: a zombie, another user's process)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_TOKEN_KEY):
            return entry[len(_TOKEN_KEY) :]
    return None


def _holds(pid: int, pipes: frozenset[str]) -> bool:
    """Whether ``pid`` has one of ``pipes`` (``pipe:[inode]`` names) open."""
    base = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(base)
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"{base}/{fd}") in pipes:
                return True
        except OSError:
            continue
    return False


def _exited(pidfds: Sequence[int]) -> set[int]:
    """Those of ``pidfds`` whose process has ended."""
    if not pidfds:
        return set()
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _ in poller.poll(0)}


class AgentProcess:
    """One started agent process and its three pipes."""

    def __init__(
        self, popen: subprocess.Popen[bytes], *, token: str | None = None, owner: object = None
    ) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.token = token
        self.owner = owner
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        self._files = (popen.stdin, popen.stdout, popen.stderr)
        self.stdin, self.stdout, self.stderr = (f.fileno() for f in self._files)
        for fd in (self.stdin, self.stdout, self.stderr):
            os.set_blocking(fd, False)
        self._pidfd: int | None = None
        self._pidfd_waited = False
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            try:
                self._pidfd = pidfd_open(self.pid)
            except OSError:  # pragma: no cover - kernels before 5.3
                self._pidfd = None
        self._others: dict[int, int] = {}
        """The agent's other processes found so far: pid -> pidfd (closed once it is reaped)."""
        self._group_members: list[int] = []
        """Those of them in the agent's process group."""
        self._aborted = False
        self._closed = False
        self._pipes: frozenset[str] | None = None
        self._ledger = ledger.current()
        if self._ledger is not None and token is not None:
            self._ledger.started(self.pid, token)
        _LIVE.add(self)

    @classmethod
    def start(
        cls, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], owner: object = None
    ) -> AgentProcess:
        """Start ``argv`` in a new session (its own process group), with a token of its own in
        ``ATP_AGENT_TOKEN``; raises :class:`OSError`. ``owner`` (the adapter) is who may
        :meth:`abort_all` it."""
        trees = _tree_support()
        token = ledger.new_token()
        environment = dict(env)
        environment[ledger.TOKEN_VARIABLE] = token
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=environment,
            start_new_session=True,
            bufsize=0,
        )
        process = cls(popen, token=token, owner=owner)
        if trees:
            process._pipes = frozenset(
                f"pipe:[{os.fstat(fd).st_ino}]" for fd in (process.stdout, process.stderr)
            )
        return process

    @staticmethod
    def abort_all(owner: object = None) -> int:
        """SIGKILL every live agent process ``owner`` started (every one when ``None``) and
        everything they started, at once; the :meth:`stop` calls in flight then finish without
        waiting out their grace period. Returns how many agents were killed."""
        victims = [p for p in _LIVE if owner is None or p.owner is owner]
        for process in victims:
            process.kill()
        return len(victims)

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    # --- pipes -------------------------------------------------------------------------------

    async def write_stdin(self, data: bytes) -> None:
        """Write all of ``data``, then close stdin. An agent that exits or closes its stdin
        first is not an error here: what it wrote says why."""
        view = memoryview(data)
        try:
            while view:
                try:
                    written = os.write(self.stdin, view)
                except BlockingIOError:
                    await anyio.wait_writable(self.stdin)
                    continue
                view = view[written:]
        except OSError:  # BrokenPipeError and the like
            pass
        finally:
            self._files[0].close()

    @staticmethod
    async def read(fd: int) -> bytes:
        """What the pipe holds now (up to 1 MiB), waiting for it if need be; ``b""`` at its end."""
        while True:
            try:
                return os.read(fd, READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(fd)

    def widen_stderr(self, size: int) -> None:
        """Ask Linux for a larger stderr pipe, so a chatty agent is read in fewer pieces."""
        try:
            import fcntl

            fcntl.fcntl(self.stderr, F_SETPIPE_SZ, size)
        except (ImportError, OSError):
            pass  # elsewhere, or refused: the default size stays

    # --- the end -----------------------------------------------------------------------------

    async def wait(self) -> int:
        """Wait for the process to exit and return its exit code (negative: killed by a signal)."""
        code = self.popen.poll()
        if code is not None:
            return code
        pidfd = self._pidfd
        if pidfd is not None:
            if self._pidfd_waited:  # another task waits on the pidfd: wait on a copy of it
                copy = os.dup(pidfd)
                try:
                    await anyio.wait_readable(copy)
                finally:
                    os.close(copy)
            else:
                self._pidfd_waited = True
                try:
                    await anyio.wait_readable(pidfd)
                finally:
                    self._pidfd_waited = False
            return self.popen.wait()
        return await anyio.to_thread.run_sync(self.popen.wait, abandon_on_cancel=True)

    def signal_group(self, sig: int) -> None:
        """Signal the agent's process group. Once the agent is reaped its pid could name another
        group, so with process trees (where the group's members are found one by one) this is
        done only while the agent is not reaped, or a member found is alive (which keeps the
        group's id from being reused)."""
        if self.popen.returncode is not None and _trees:
            pidfds = [self._others[pid] for pid in self._group_members if self._others[pid] >= 0]
            if len(_exited(pidfds)) == len(pidfds):  # none alive (or none found)
                return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """SIGKILL the agent and every process of it found, now (synchronous)."""
        self._aborted = True
        if _trees and not self._closed:
            self._find_others()
        self._signal_all(signal.SIGKILL)

    async def stop(self, grace_seconds: float) -> int:
        """:meth:`terminate`, then close the pipes. Returns what :meth:`terminate` returns."""
        try:
            return await self.terminate(grace_seconds)
        finally:
            self.close()

    async def terminate(self, grace_seconds: float) -> int:
        """Stop the agent and every process it started: SIGTERM, SIGKILL after the grace period
        (or at once after :meth:`kill`), and reap those that are ATP's children. The pipes stay
        open (the readers may still drain them). Returns how many processes besides the agent
        this call found and stopped."""
        with anyio.CancelScope(shield=True):
            before = len(self._others)
            trees = bool(_trees) and not self._closed
            if trees:
                self._find_others()
            if self.popen.poll() is None or self._running_others():
                self._signal_all(signal.SIGTERM)
                with anyio.move_on_after(grace_seconds):
                    if self.popen.returncode is None:
                        await self.wait()
                    while not self._aborted and self._running_others():
                        await anyio.sleep(POLL_SECONDS)
                for _ in range(KILL_ROUNDS):  # SIGKILL, also to what started meanwhile
                    found = len(self._others)
                    if trees:
                        self._find_others()
                    self._signal_all(signal.SIGKILL)
                    if not trees or len(self._others) == found:
                        break
            else:  # nothing runs: what the group may still hold (without process trees)
                self._signal_all(signal.SIGKILL)
            if self.popen.poll() is None:
                await self.wait()
            await self._reap()
        return len(self._others) - before

    def close(self) -> None:
        """Close the pipes and the pidfds; the process is no longer a live agent."""
        if self._closed:
            return
        self._closed = True
        for file in self._files:
            file.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        for pid, pidfd in self._others.items():
            if pidfd >= 0:
                os.close(pidfd)
                self._others[pid] = -1
        _LIVE.discard(self)
        if self._ledger is not None and self.popen.poll() is not None:
            # (an agent that could not be stopped stays in the ledger, for the next ATP)
            self._ledger.ended(self.pid)

    # --- the agent's other processes ----------------------------------------------------------

    def _signal_all(self, sig: int) -> None:
        self.signal_group(sig)
        for pidfd in self._others.values():
            if pidfd >= 0:
                try:
                    signal.pidfd_send_signal(pidfd, sig)
                except OSError:  # gone already
                    pass

    def _running_others(self) -> bool:
        pidfds = [fd for fd in self._others.values() if fd >= 0]
        return len(_exited(pidfds)) < len(pidfds)

    def _find_others(self) -> None:
        """Add the agent's other processes to ``_others``: its live tree, and ATP's children
        that are the agent's (orphans reparented to ATP, the subreaper) with their trees."""
        agents = {p.pid for p in _LIVE if p.popen.returncode is None}
        others = self._others
        if self.popen.returncode is None:
            for pid in _children(self.pid):
                self._adopt(pid, parent=self.pid)
        me = os.getpid()
        for pid in _children("self"):
            if pid not in agents and pid not in others:
                self._adopt(pid, parent=me, check=True)
        queue = [pid for pid, pidfd in others.items() if pidfd >= 0]
        while queue:
            parent = queue.pop()
            for pid in _children(parent):
                if pid not in others and pid not in agents and self._adopt(pid, parent=parent):
                    queue.append(pid)

    def _adopt(self, pid: int, *, parent: int, check: bool = False) -> int:
        """Open a pidfd on ``pid`` and keep it when ``pid`` is still ``parent``'s child (and,
        with ``check``, is the agent's by its token, group, session or pipes). Returns ``pid``
        when kept, else 0."""
        if pid in self._others:
            return 0
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return 0
        # While the pidfd's process exists its pid names no other process: read /proc now.
        stat = _stat(pid)
        if stat is None or stat[0] != parent or (check and not self._belongs(pid, stat)):
            os.close(pidfd)
            return 0
        self._others[pid] = pidfd
        if stat[1] == self.pid:
            self._group_members.append(pid)
        return pid

    def _belongs(self, pid: int, stat: tuple[int, int, int]) -> bool:
        token = _token(pid)
        if token is not None:
            return self.token is not None and token == self.token.encode()
        if self.pid in (stat[1], stat[2]):
            return True
        return self._pipes is not None and _holds(pid, self._pipes)

    async def _reap(self) -> None:
        """Wait (a bounded time) until every other process found is gone, reaping those that
        are ATP's children; others' zombies are their parents' to reap."""
        pending = {pid: fd for pid, fd in self._others.items() if fd >= 0}
        deadline = anyio.current_time() + REAP_SECONDS
        while pending:
            for pid, pidfd in list(pending.items()):
                try:
                    reaped = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
                except ChildProcessError:  # not ATP's child: done once it has exited
                    reaped = None
                    if pidfd not in _exited([pidfd]):
                        continue
                    # A zombie becomes ATP's child when its parent (another of the agent's
                    # processes, dying too) is gone; a zombie whose parent lives on is its.
                    stat = _stat(pid)
                    if stat is not None and (stat[0] == os.getpid() or stat[0] in self._others):
                        continue
                else:
                    if reaped is None:
                        continue  # ATP's child, not dead yet
                os.close(pidfd)
                self._others[pid] = -1
                del pending[pid]
            if not pending or anyio.current_time() >= deadline:
                break
            await anyio.sleep(POLL_SECONDS)
