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

The agent's processes are found by :class:`~atp.adapters.process_tree.ProcessTree`.
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
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio

from atp.adapters.process_tree import (
    PF_EXITING,
    POLL_SECONDS,
    REAP_SECONDS,
    SPAWNING,
    ProcessTree,
    Stopped,
)
from atp.core.ledger import TOKEN_VARIABLE, ProcessLedger, new_token
from atp.core.portability import KILL, kill_group
from atp.core.protocol import ATPRequest

__all__ = [
    "F_SETPIPE_SZ",
    "PF_EXITING",
    "PIPE_SIZE",
    "POLL_SECONDS",
    "PR_SET_CHILD_SUBREAPER",
    "READ_SIZE",
    "REAP_SECONDS",
    "SPAWN_RESOURCE_ERRNOS",
    "AgentProcess",
    "Environment",
    "Exchange",
    "Failed",
    "Stopped",
    "Watch",
    "encoded",
    "exit_words",
    "lacks_resources",
    "outcome",
    "processes",
    "trouble",
    "with_request_environment",
]

READ_SIZE = 1024 * 1024
PIPE_SIZE = 1024 * 1024
"""The stderr pipe ATP asks for (:meth:`AgentProcess.widen_stderr`): fewer wake-ups for a
chatty agent."""
F_SETPIPE_SZ = 1031  # Linux: the size of a pipe's buffer
PR_SET_CHILD_SUBREAPER = 36  # Linux prctl option


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


Environment = Mapping[bytes, bytes]
"""An environment encoded for ``exec`` once (:func:`encoded`), not at every start."""


def encoded(env: Mapping[str, str]) -> dict[bytes, bytes]:
    """``env`` encoded as the system takes it, to start many processes with."""
    return {os.fsencode(key): os.fsencode(value) for key, value in env.items()}


def with_request_environment(env: Environment, request: ATPRequest | None) -> Environment:
    """``env`` with the request's ``context.environment`` added (the agent's ``secrets:``, and
    its ``env`` where an adapter sends that): what a process started for one run gets, beside
    the request itself. ``env`` itself when the request carries none."""
    context = request.context if request is not None else None
    if context is None or not context.environment:
        return env
    return {**env, **encoded(context.environment)}


SPAWN_RESOURCE_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE})
"""Why a process may not start now and may at the next try: the system is out of processes,
memory or file descriptors for the moment."""


def lacks_resources(exc: OSError) -> bool:
    """Whether a process that could not be started (``exc``) failed for lack of resources, which
    another try may find (an AdapterError then stays retryable); a program that does not exist or
    may not be run does not start at any try."""
    return exc.errno in SPAWN_RESOURCE_ERRNOS


_TOKEN_NAME = TOKEN_VARIABLE.encode()


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
        pidfd = process.pidfd
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


def _live_agents() -> set[int]:
    """The pids of the agent processes started and not yet reaped."""
    return {p.pid for p in _LIVE if p.popen.returncode is None}


class AgentProcess:
    """One started agent process and its three pipes."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        *,
        token: str | None = None,
        owner: object = None,
        ledger: ProcessLedger | None = None,
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
        self._tree = ProcessTree(popen, token=token, live_agents=_live_agents)
        """The agent's other processes, as ATP finds them."""
        self._aborted = False
        self._closed = False
        self._ledger = ledger
        if ledger is not None and token is not None:
            ledger.started(self.pid, token)
        _LIVE.add(self)

    @classmethod
    def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | Environment,
        owner: object = None,
        ledger: ProcessLedger | None = None,
    ) -> AgentProcess:
        """Start ``argv`` in a new session (its own process group), with a token of its own in
        ``ATP_AGENT_TOKEN``; raises :class:`OSError`. ``env`` is best :func:`encoded` once by
        a caller that starts many. ``owner`` (the adapter) is who may :meth:`abort_all` it;
        ``ledger`` (the adapter's :attr:`~atp.core.adapter.Adapter.processes`) records it while
        it lives."""
        if os.name != "posix":
            raise OSError(
                errno.ENOSYS,
                "an agent process is run over non-blocking stdin/stdout pipes, which need a POSIX "
                f"system (Linux, macOS); this is {sys.platform} (see docs/platforms.md)",
            )
        trees = _tree_support()
        token = new_token()
        first = next(iter(env), b"")
        environment: dict[bytes, bytes] = (
            dict(env) if isinstance(first, bytes) else encoded(env)  # type: ignore[arg-type]
        )
        environment[_TOKEN_NAME] = token.encode()
        with SPAWNING:  # another thread's look for an agent's processes never sees it half-made
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
            process = cls(popen, token=token, owner=owner, ledger=ledger)
        if trees:
            process._tree.pipes = frozenset(
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

    @property
    def pidfd(self) -> int | None:
        """A pidfd of the agent's process (readable once it has exited), or ``None``."""
        return self._pidfd

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
        if self.popen.returncode is not None and _trees and not self._tree.group_alive():
            return  # (none alive, or none found)
        try:
            if not kill_group(self.pid, sig) and self.popen.poll() is None:
                self.popen.send_signal(sig)  # no process groups here: the agent alone
        except (ProcessLookupError, PermissionError):
            pass
        except ValueError:  # pragma: no cover - a signal Windows has no means to send
            pass

    def kill(self) -> None:
        """SIGKILL the agent and every process of it found, now (synchronous)."""
        self._aborted = True
        if _trees and not self._closed:
            self._tree.find()
        self._signal_all(KILL)

    async def stop(self, grace_seconds: float) -> Stopped:
        """:meth:`terminate`, then close the pipes. Returns what :meth:`terminate` returns."""
        try:
            if _trees and not self._closed and not self._tree.others and self.popen.returncode is not None:
                # The usual end: the agent exited by itself and was reaped, and nothing of it
                # was found before. When a look finds nothing either, there is nothing to stop.
                if not self._tree.find() and not self._tree.doubts:
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
            tree = self._tree
            known = set(tree.others) if known is None else known
            trees = bool(_trees) and not self._closed
            if trees:
                await tree.look(anyio.current_time() + REAP_SECONDS)
            first = set(tree.others)
            unfinished = False
            # (what this call found may have ended already, leaving children not yet found)
            if self.popen.poll() is None or first - known or tree.running():
                self._signal_all(signal.SIGTERM)
                with anyio.move_on_after(grace_seconds):
                    if self.popen.returncode is None:
                        await self.wait()
                    while not self._aborted and tree.running():
                        await anyio.sleep(POLL_SECONDS)
                unfinished = await self._kill_all(trees)
            else:  # nothing runs: what the group may still hold (without process trees)
                self._signal_all(KILL)
            if self.popen.poll() is None:
                await self.wait()
            await tree.reap()
            report = tree.report(known, first, unfinished)
        return report

    async def _kill_all(self, trees: bool) -> bool:
        """SIGKILL the agent and every process of it. With process trees, every process found
        is first sent SIGSTOP, and ATP looks again, until a round finds no new process and
        every process found has stopped or ended: a stopped process cannot start another, so
        one that keeps forking (its child goes on while it exits) is caught too. Returns
        whether :data:`REAP_SECONDS` passed while new processes were still being found."""
        unfinished = False
        tree = self._tree
        if trees:
            deadline = anyio.current_time() + REAP_SECONDS
            self._signal_all(signal.SIGSTOP)
            tree.stopping = True  # from now on each process is stopped as soon as it is found
            while True:
                # Settled first: a process that ends after a look leaves its children to ATP
                # after that look (and before it is a zombie).
                settled = tree.settled()
                new = tree.find()
                if not (new or tree.doubts) and settled:
                    break
                self.signal_group(signal.SIGSTOP)
                if anyio.current_time() >= deadline:
                    unfinished = bool(new)
                    break
                await anyio.sleep(0 if new else POLL_SECONDS / 10)
        self._signal_all(KILL)
        if unfinished:  # what started since, once more
            tree.send(tree.find(), KILL)
        return unfinished

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
        self._tree.close()
        _LIVE.discard(self)
        if self._ledger is not None and self.popen.poll() is not None:
            # (an agent that could not be stopped stays in the ledger, for the next ATP)
            self._ledger.ended(self.pid)

    def _signal_all(self, sig: int) -> None:
        self.signal_group(sig)
        self._tree.send(self._tree.others, sig)


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
