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
  started) whose environment holds the agent's token, OR whose process group or session is the
  agent's (or a session one of the agent's processes started), OR that hold one of the agent's
  output pipes; with their trees. A process that sets another token is still the agent's by
  its group, session or pipes;
- they are sent SIGTERM with the group. After the grace period every process found is sent
  SIGSTOP, round after round, until a round finds no new one (a stopped process cannot start
  another; a process that keeps forking is caught this way), then SIGKILL; those that are ATP's
  children are reaped. Each is addressed through a pidfd, so a pid the system gave to another
  process meanwhile is never signalled.

Elsewhere (or without pidfds) only the process group is stopped. Every started process is
recorded in the run's process ledger (:mod:`atp.core.ledger`) while it lives.

While a run exchanges data with its agent, a :class:`Watch` calls back on the event loop when
a pipe is ready or the process exits: no task, no future per read, which keeps ATP's own cost
per agent process small.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import anyio

from atp.core import ledger

READ_SIZE = 1024 * 1024
PIPE_SIZE = 1024 * 1024
"""The stderr pipe ATP asks for (:meth:`AgentProcess.widen_stderr`): fewer wake-ups for a
chatty agent."""
F_SETPIPE_SZ = 1031  # Linux: the size of a pipe's buffer
PR_SET_CHILD_SUBREAPER = 36  # Linux prctl option
POLL_SECONDS = 0.01
"""How often ATP looks whether the processes an agent left have ended."""
REAP_SECONDS = 2.0
"""How long ATP looks for the agent's processes to stop (SIGSTOP, round after round, until a
round finds no new one), and how long it waits, after SIGKILL, for them to be gone."""

_LIVE: set[AgentProcess] = set()
_SPAWNING = threading.Lock()
"""Held while an agent process is made (forked, then its program started) and while an
agent's other processes are looked for: a child caught between the two holds every pipe of
this process, those of other agents too, and would be taken for theirs. Event loops in other
threads (a cluster worker's sessions, one per ``atp test``) start agents while one looks."""
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


Environment = Mapping[bytes, bytes]
"""An environment encoded for ``exec`` once (:func:`encoded`), not at every start."""


def encoded(env: Mapping[str, str]) -> dict[bytes, bytes]:
    """``env`` encoded as the system takes it, to start many processes with."""
    return {os.fsencode(key): os.fsencode(value) for key, value in env.items()}


SPAWN_RESOURCE_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE})
"""Why a process may not start now and may at the next try: the system is out of processes,
memory or file descriptors for the moment."""


def lacks_resources(exc: OSError) -> bool:
    """Whether a process that could not be started (``exc``) failed for lack of resources, which
    another try may find (an AdapterError then stays retryable); a program that does not exist or
    may not be run does not start at any try."""
    return exc.errno in SPAWN_RESOURCE_ERRNOS


_TOKEN_NAME = ledger.TOKEN_VARIABLE.encode()


class Watch:
    """Callbacks on the (asyncio) event loop while one exchange with an agent lasts: when a
    pipe is readable or writable, when the process has exited, after a delay. :meth:`close`
    removes every one of them."""

    __slots__ = ("_exit", "_readers", "_timers", "_writers", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._readers: list[int] = []
        self._writers: list[int] = []
        self._timers: list[asyncio.TimerHandle] = []
        self._exit: tuple[int, Callable[[], None]] | None = None

    def readable(self, fd: int, callback: Callable[[], None]) -> None:
        self.loop.add_reader(fd, callback)
        self._readers.append(fd)

    def writable(self, fd: int, callback: Callable[[], None]) -> None:
        self.loop.add_writer(fd, callback)
        self._writers.append(fd)

    def reading(self, fd: int) -> bool:
        return fd in self._readers

    def unread(self, fd: int) -> None:
        if fd in self._readers:
            self._readers.remove(fd)
            self.loop.remove_reader(fd)

    def unwrite(self, fd: int) -> None:
        if fd in self._writers:
            self._writers.remove(fd)
            self.loop.remove_writer(fd)

    def later(self, seconds: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        handle = self.loop.call_later(seconds, callback)
        self._timers.append(handle)
        return handle

    def exit(self, process: AgentProcess, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when ``process`` has exited (not reaped: see
        :meth:`AgentProcess.wait`)."""
        pidfd = process._pidfd
        if pidfd is None:  # no pidfd: look now and then

            def look() -> None:
                if process.popen.poll() is None:
                    self.later(POLL_SECONDS, look)
                else:
                    callback()

            self.later(POLL_SECONDS, look)
            return

        def exited() -> None:
            self.unread(pidfd)
            callback()

        self.readable(pidfd, exited)

    def close(self) -> None:
        for fd in self._readers:
            self.loop.remove_reader(fd)
        for fd in self._writers:
            self.loop.remove_writer(fd)
        for handle in self._timers:
            handle.cancel()
        self._readers.clear()
        self._writers.clear()
        self._timers.clear()


class Failed(Exception):
    """An exchange stopped waiting: its :attr:`Exchange.failure` says why."""


class Exchange:
    """What an adapter's exchange with an agent process shares: a :class:`Watch` whose
    callbacks record what they find, :meth:`until` to wait for it, the request written as the
    stdin pipe takes it. Subclasses say what is done once the request is written
    (:meth:`sent`)."""

    def __init__(self, process: AgentProcess) -> None:
        self.process = process
        self.watch = Watch()
        self.failure: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.request: memoryview | None = None

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def until(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``condition()`` holds (``True``) or ``timeout`` seconds passed (``False``);
        raises :class:`Failed` when a callback failed the run."""
        loop = self.watch.loop
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self.failure is not None:
                raise Failed
            if condition():
                return True
            if deadline is not None and loop.time() >= deadline:
                return False
            waiter = self.waiter = loop.create_future()
            timer = loop.call_at(deadline, self.wake) if deadline is not None else None
            try:
                await waiter
            finally:
                self.waiter = None
                if timer is not None:
                    timer.cancel()

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self.wake()

    def send(self, rest: memoryview) -> None:
        """Write the request, as much as the pipe takes now; the rest when it is writable."""
        process = self.process
        left = process.write_some(rest)
        if left:
            if self.request is None:
                self.watch.writable(process.stdin, self._on_stdin)
            self.request = left
            return
        self.request = None
        self.watch.unwrite(process.stdin)
        self.sent()  # (all of it, or the agent stopped reading: what it wrote says why)

    def sent(self) -> None:
        """The request is written (or the agent took no more of it)."""

    def _on_stdin(self) -> None:
        if self.request is not None:
            self.send(self.request)


PF_EXITING = 0x4  # Linux: the process is exiting (field 9 of /proc/<pid>/stat)


class _Stat(NamedTuple):
    parent: int
    group: int
    session: int
    ending: bool
    """It is exiting, or has ended (a zombie): its environment and files are gone."""
    zombie: bool


_STOPPED = (b"T", b"t", b"Z", b"X", b"")


def _state(pid: int) -> bytes:
    """The state of ``pid`` (``T``: stopped, ``Z``: a zombie ...); ``b""`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return b""
    return data[data.rfind(b")") + 2 :][:1]


def _stat(pid: int) -> _Stat | None:
    """The parent, process group and session of ``pid``, and whether it is ending; ``None``
    when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        zombie = fields[0] in (b"Z", b"X")
        ending = zombie or bool(int(fields[6]) & PF_EXITING)
        return _Stat(int(fields[1]), int(fields[2]), int(fields[3]), ending, zombie)
    except (IndexError, ValueError):
        return None


_TOKEN_KEY = ledger.TOKEN_VARIABLE.encode() + b"="


def _token(pid: int) -> bytes | None:
    """The agent token in the environment of ``pid``; ``None`` when there is none, ``b""``
    when there is no environment to read (a process that is exiting or has ended, another
    user's process)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return b""
    if not environ:
        return b""
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


class Stopped:
    """What one :meth:`AgentProcess.terminate` did besides stopping the agent."""

    __slots__ = ("late", "running", "stopped", "unfinished")

    def __init__(self, stopped: int = 0, running: int = 0, late: int = 0, unfinished: bool = False) -> None:
        self.stopped = stopped
        """Processes of the agent this call found running, and that are gone now."""
        self.running = running
        """Processes of the agent found (by this call or an earlier one) that still run: ATP
        could not stop them within :data:`REAP_SECONDS` of SIGKILL."""
        self.late = late
        """Of the processes this call found, those that were started while it was stopping the
        others (a process that keeps forking)."""
        self.unfinished = unfinished
        """Whether new processes were still being found when ATP stopped looking
        (:data:`REAP_SECONDS` after the grace period): some may run on unseen."""

    def __repr__(self) -> str:
        return (
            f"Stopped(stopped={self.stopped}, running={self.running}, late={self.late}, "
            f"unfinished={self.unfinished})"
        )


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
        self._running_when_found: set[int] = set()
        """Those of them that had not ended when they were found."""
        self._sessions: set[int] = {self.pid}
        """The sessions that are the agent's: its own, and those its processes started."""
        self._doubted: set[int] = set()
        """ATP's children that were ending when they were seen, and could not be told as the
        agent's (the environment of a process that is exiting cannot be read)."""
        self._doubts = 0
        """How many of those the last :meth:`_find_others` saw first, or saw not yet ended."""
        self._stopping = False
        """Whether each process found is sent SIGSTOP at once (while ATP kills them)."""
        self._ending: set[int] = set()
        """Processes found while they were exiting (not yet ended)."""
        self._aborted = False
        self._closed = False
        self._pipes: frozenset[str] | None = None
        self._ledger = ledger.current()
        if self._ledger is not None and token is not None:
            self._ledger.started(self.pid, token)
        _LIVE.add(self)

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | Environment,
        owner: object = None,
    ) -> AgentProcess:
        """Start ``argv`` in a new session (its own process group), with a token of its own in
        ``ATP_AGENT_TOKEN``; raises :class:`OSError`. ``env`` is best :func:`encoded` once by
        a caller that starts many. ``owner`` (the adapter) is who may :meth:`abort_all` it."""
        trees = _tree_support()
        token = ledger.new_token()
        first = next(iter(env), b"")
        environment: dict[bytes, bytes] = (
            dict(env) if isinstance(first, bytes) else encoded(env)  # type: ignore[arg-type]
        )
        environment[_TOKEN_NAME] = token.encode()
        with _SPAWNING:  # another thread's look for an agent's processes never sees it half-made
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

    @property
    def stdin_closed(self) -> bool:
        return self._files[0].closed

    def close_stdin(self) -> None:
        self._files[0].close()

    def write_some(self, data: memoryview) -> memoryview | None:
        """Write what the stdin pipe takes now of ``data``, without waiting; returns the rest
        (empty when all is written), or ``None`` when the agent cannot take any more (it closed
        its stdin or exited: what it wrote says why)."""
        try:
            while data:
                data = data[os.write(self.stdin, data) :]
        except BlockingIOError:
            pass
        except OSError:  # BrokenPipeError and the like
            return None
        return data

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

    async def stop(self, grace_seconds: float) -> Stopped:
        """:meth:`terminate`, then close the pipes. Returns what :meth:`terminate` returns."""
        try:
            if _trees and not self._closed and not self._others and self.popen.returncode is not None:
                # The usual end: the agent exited by itself and was reaped, and nothing of it
                # was found before. When a look finds nothing either, there is nothing to stop.
                if not self._find_others() and not self._doubts:
                    return Stopped()
                return await self.terminate(grace_seconds, known=set())  # (what it found is new)
            return await self.terminate(grace_seconds)
        finally:
            self.close()

    async def terminate(self, grace_seconds: float, *, known: set[int] | None = None) -> Stopped:
        """Stop the agent and every process it started: SIGTERM; after the grace period (or at
        once after :meth:`kill`) SIGSTOP to every process found, round after round until a round
        finds no new one, then SIGKILL; and reap those that are ATP's children. The pipes stay
        open (the readers may still drain them). Returns what this call found and stopped
        besides the agent (``known``: the processes found before it, when not all found are)."""
        with anyio.CancelScope(shield=True):
            known = set(self._others) if known is None else known
            trees = bool(_trees) and not self._closed
            if trees:
                await self._look(anyio.current_time() + REAP_SECONDS)
            first = set(self._others)
            unfinished = False
            # (what this call found may have ended already, leaving children not yet found)
            if self.popen.poll() is None or first - known or self._running_others():
                self._signal_all(signal.SIGTERM)
                with anyio.move_on_after(grace_seconds):
                    if self.popen.returncode is None:
                        await self.wait()
                    while not self._aborted and self._running_others():
                        await anyio.sleep(POLL_SECONDS)
                unfinished = await self._kill_all(trees)
            else:  # nothing runs: what the group may still hold (without process trees)
                self._signal_all(signal.SIGKILL)
            if self.popen.poll() is None:
                await self.wait()
            await self._reap()
            report = self._report(known, first, unfinished)
        return report

    async def _kill_all(self, trees: bool) -> bool:
        """SIGKILL the agent and every process of it. With process trees, every process found
        is first sent SIGSTOP, and ATP looks again, until a round finds no new process and
        every process found has stopped or ended: a stopped process cannot start another, so
        one that keeps forking (its child goes on while it exits) is caught too. Returns
        whether :data:`REAP_SECONDS` passed while new processes were still being found."""
        unfinished = False
        if trees:
            deadline = anyio.current_time() + REAP_SECONDS
            self._signal_all(signal.SIGSTOP)
            self._stopping = True  # from now on each process is stopped as soon as it is found
            while True:
                # Settled first: a process that ends after a look leaves its children to ATP
                # after that look (and before it is a zombie).
                settled = self._settled()
                new = self._find_others()
                if not (new or self._doubts) and settled:
                    break
                self.signal_group(signal.SIGSTOP)
                if anyio.current_time() >= deadline:
                    unfinished = bool(new)
                    break
                await anyio.sleep(0 if new else POLL_SECONDS / 10)
        self._signal_all(signal.SIGKILL)
        if unfinished:  # what started since, once more
            self._signal(self._find_others(), signal.SIGKILL)
        return unfinished

    def _settled(self) -> bool:
        """Whether every process found has stopped (SIGSTOP) or ended. One that was exiting
        when it was found, or between two looks, leaves its children to ATP only once it has
        ended."""
        if self.popen.returncode is None and _state(self.pid) not in _STOPPED:
            return False  # (not reaped: its pid is still the agent's)
        pidfds = {pid: fd for pid, fd in self._others.items() if fd >= 0}
        ended = _exited(list(pidfds.values()))
        return all(fd in ended or _state(pid) in _STOPPED for pid, fd in pidfds.items())

    def _report(self, known: set[int], first: set[int], unfinished: bool) -> Stopped:
        """What :meth:`terminate` did: ``known`` were found before it, ``first`` by its first
        look."""
        pidfds = {pid: fd for pid, fd in self._others.items() if fd >= 0}
        ended = _exited(list(pidfds.values()))
        running = {pid for pid, fd in pidfds.items() if fd not in ended}
        found = [pid for pid in self._others if pid not in known and pid in self._running_when_found]
        return Stopped(
            stopped=sum(pid not in running for pid in found),
            running=len(running),
            late=sum(pid not in first for pid in found),
            unfinished=unfinished,
        )

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
        self._signal(self._others, sig)

    def _signal(self, pids: Iterable[int], sig: int) -> None:
        """Signal those of the agent's other processes ``pids`` that are not reaped."""
        others = self._others
        for pid in pids:
            pidfd = others[pid]
            if pidfd >= 0:
                try:
                    signal.pidfd_send_signal(pidfd, sig)
                except OSError:  # gone already
                    pass

    def _running_others(self) -> bool:
        pidfds = [fd for fd in self._others.values() if fd >= 0]
        return len(_exited(pidfds)) < len(pidfds)

    async def _look(self, deadline: float) -> None:
        """:meth:`_find_others`, again while what it finds is ending and nothing found runs:
        a process that forks and exits while ATP looks leaves its child to ATP only once it
        has ended, after ATP listed its children; a later look finds it."""
        while True:
            ending = self._still_ending()  # (before the look: see _kill_all)
            new = self._find_others()
            if any(pid in self._running_when_found for pid in new):
                return
            if not (new or self._doubts or ending) or anyio.current_time() >= deadline:
                return
            await anyio.sleep(POLL_SECONDS / 10)

    def _still_ending(self) -> bool:
        """Whether one of the processes found exiting has not yet ended."""
        others = self._others
        pidfds = {pid: others[pid] for pid in self._ending if others.get(pid, -1) >= 0}
        ended = _exited(list(pidfds.values()))
        self._ending = {pid for pid, fd in pidfds.items() if fd not in ended}
        return bool(self._ending)

    def _find_others(self) -> list[int]:
        """Add the agent's other processes to ``_others``: its live tree, and ATP's children
        that are the agent's (orphans reparented to ATP, the subreaper) with their trees.
        Returns those added; :attr:`_doubts` says how many of ATP's children it could not tell
        as the agent's or not because they are ending (seen for the first time, or not yet
        ended)."""
        with _SPAWNING:
            return self._find_others_now()

    def _find_others_now(self) -> list[int]:
        agents = {p.pid for p in _LIVE if p.popen.returncode is None}
        # Another live agent with the agent's pid (reused once the agent was reaped), or with
        # the id of a session learned from the agent's processes: its session is not the agent's.
        foreign = agents - {self.pid} if self.popen.returncode is None else agents
        found: list[int] = []
        if self.popen.returncode is None:
            found.extend(pid for pid in ledger.children(self.pid) if self._adopt(pid, parent=self.pid))
        me = os.getpid()
        strangers = [pid for pid in ledger.children("self") if pid not in agents and not self._found(pid)]
        self._doubts = 0
        # (those found ended have no children: theirs went to ATP)
        queue = [pid for pid, pidfd in self._others.items() if pidfd >= 0 and pid in self._running_when_found]
        sessions = -1
        while sessions != len(self._sessions):  # again when one of the agent's sessions is new
            sessions = len(self._sessions)
            rest = []
            for pid in strangers:
                if self._adopt(pid, parent=me, foreign=foreign):
                    found.append(pid)
                    if pid in self._running_when_found:
                        queue.append(pid)
                else:
                    rest.append(pid)
            strangers = rest
            while queue:
                parent = queue.pop()
                for pid in ledger.children(parent):
                    if pid not in agents and self._adopt(pid, parent=parent):
                        found.append(pid)
                        if pid in self._running_when_found:
                            queue.append(pid)
        return found

    def _found(self, pid: int) -> bool:
        """Whether ``pid`` is one of the agent's other processes found and not yet reaped."""
        return self._others.get(pid, -1) >= 0

    def _adopt(self, pid: int, *, parent: int, foreign: set[int] | None = None) -> int:
        """Open a pidfd on ``pid`` and keep it when ``pid`` is still ``parent``'s child (and,
        with ``foreign``, is the agent's by :meth:`_belongs`). Returns ``pid`` when kept, else
        0."""
        if self._found(pid):
            return 0
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return 0
        # While the pidfd's process exists its pid names no other process: read /proc now.
        stat = _stat(pid)
        mine = (
            stat is not None
            and stat.parent == parent
            and (foreign is None or self._belongs(pid, stat, foreign))
        )
        if not mine:
            os.close(pidfd)
            if stat is not None and mine is None and (pid not in self._doubted or not stat.zombie):
                # Ending, with no environment or files left to tell it by: its children (the
                # agent's, maybe) come to ATP once it has ended. Look again until then.
                self._doubted.add(pid)
                self._doubts += 1
            return 0
        assert stat is not None
        self._others[pid] = pidfd
        if self._stopping:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGSTOP)
            except OSError:  # it has ended
                pass
        if stat.group == self.pid:
            self._group_members.append(pid)
        if not stat.ending:
            self._running_when_found.add(pid)
        elif not stat.zombie:
            self._ending.add(pid)
        if stat.session != os.getsid(0):
            self._sessions.add(stat.session)  # a session the agent's process is in is the agent's
        return pid

    def _belongs(self, pid: int, stat: _Stat, foreign: set[int]) -> bool | None:
        """Whether ATP's child ``pid`` is the agent's: it carries the agent's token, OR it is in
        the agent's process group or one of the agent's sessions, OR it holds one of the
        agent's output pipes. (A process that sets another token is the agent's all the same.)
        ``None`` when it is not, as far as can be told: it is exiting or has ended, and has no
        environment or files left to tell it by."""
        group, session = stat.group, stat.session
        if (
            (group == self.pid or session in self._sessions)
            and group not in foreign
            and session not in foreign
        ):
            return True
        token = _token(pid)
        if self.token is not None and token == self.token.encode():
            return True
        if self._pipes is not None and _holds(pid, self._pipes):
            return True
        return None if stat.ending else False

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
                    if stat is not None and (stat.parent == os.getpid() or stat.parent in self._others):
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


# --- words for what happened to an agent's processes -------------------------------------


def processes(count: int) -> str:
    """ "1 process", "2 processes"."""
    return f"{count} process" if count == 1 else f"{count} processes"


def outcome(result: Stopped, count: int) -> str:
    """What became of the ``count`` processes an agent left running."""
    if not result.running:
        return "ATP stopped it" if count == 1 else "ATP stopped them"
    if not result.stopped:
        return "ATP could not stop it" if count == 1 else "ATP could not stop them"
    return f"ATP stopped {result.stopped} of them"


def trouble(result: Stopped) -> str:
    """What went wrong while the agent's processes were stopped, as clauses to add to a
    warning; ``""`` when nothing did."""
    parts = []
    if result.late:
        parts.append(f"{processes(result.late)} started while ATP was stopping the others")
    if result.running:
        parts.append(f"{processes(result.running)} still running {REAP_SECONDS:g} s after SIGKILL")
    if result.unfinished:
        parts.append(
            f"new processes kept appearing for {REAP_SECONDS:g} s after the grace period; some may still run"
        )
    return "".join(f"; {part}" for part in parts)


def exit_words(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
