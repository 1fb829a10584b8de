"""The processes an agent started, found and stopped (for :class:`~atp.adapters.process.AgentProcess`,
on Linux with /proc and pidfds): what /proc says of a process (:func:`proc_stat`, :func:`proc_state`, its
agent token, its pipes), the agent's other processes as ATP finds them (:class:`ProcessTree`:
its live tree, and ATP's children that are the agent's by token, process group, session or
pipes), and what stopping them did (:class:`Stopped`).

Every process found is held through a pidfd, so a pid the system gave to another process
meanwhile is never signalled; :data:`SPAWNING` keeps a look from seeing an agent half-made."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import anyio

from atp.core import ledger

POLL_SECONDS = 0.01
"""How often ATP looks whether the processes an agent left have ended."""
REAP_SECONDS = 2.0
"""How long ATP looks for the agent's processes to stop (SIGSTOP, round after round, until a
round finds no new one), and how long it waits, after SIGKILL, for them to be gone."""
SPAWNING = threading.Lock()
"""Held while an agent process is made (forked, then its program started) and while an
agent's other processes are looked for: a child caught between the two holds every pipe of
this process, those of other agents too, and would be taken for theirs. Event loops in other
threads (a cluster worker's sessions, one per ``atp test``) start agents while one looks."""
PF_EXITING = 0x4  # Linux: the process is exiting (field 9 of /proc/<pid>/stat)


class Stat(NamedTuple):
    parent: int
    group: int
    session: int
    ending: bool
    """It is exiting, or has ended (a zombie): its environment and files are gone."""
    zombie: bool


STOPPED = (b"T", b"t", b"Z", b"X", b"")


def proc_state(pid: int) -> bytes:
    """The state of ``pid`` (``T``: stopped, ``Z``: a zombie ...); ``b""`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return b""
    return data[data.rfind(b")") + 2 :][:1]


def proc_stat(pid: int) -> Stat | None:
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
        return Stat(int(fields[1]), int(fields[2]), int(fields[3]), ending, zombie)
    except (IndexError, ValueError):
        return None


_TOKEN_KEY = ledger.TOKEN_VARIABLE.encode() + b"="


def token_of(pid: int) -> bytes | None:
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


def holds(pid: int, pipes: frozenset[str]) -> bool:
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


def exited(pidfds: Sequence[int]) -> set[int]:
    """Those of ``pidfds`` whose process has ended."""
    if not pidfds:
        return set()
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _ in poller.poll(0)}


class Stopped:
    """What one :meth:`~atp.adapters.process.AgentProcess.terminate` did besides stopping the agent."""

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


class ProcessTree:
    """The other processes of one agent (its pid, its token ``token``, its ``popen``) as ATP
    finds them, each held through a pidfd while it is not reaped. ``live_agents`` gives the pids
    of the agents that run now (whose processes are theirs, not this agent's)."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        *,
        token: str | None,
        live_agents: Callable[[], set[int]],
    ) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.token = token
        self._live_agents = live_agents
        self.others: dict[int, int] = {}
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
        self.doubts = 0
        """How many of those the last :meth:`find` saw first, or saw not yet ended."""
        self.stopping = False
        """Whether each process found is sent SIGSTOP at once (while ATP kills them)."""
        self._ending: set[int] = set()
        """Processes found while they were exiting (not yet ended)."""
        self.pipes: frozenset[str] | None = None
        """The agent's output pipes (``pipe:[inode]``): a process that holds one is the agent's."""

    def group_alive(self) -> bool:
        """Whether a member of the agent's process group that was found is alive (which keeps
        the group's id from being reused); ``False`` when none was found."""
        pidfds = [self.others[pid] for pid in self._group_members if self.others[pid] >= 0]
        return len(exited(pidfds)) < len(pidfds)

    def close(self) -> None:
        """Close the pidfds of the processes found (they are no longer watched)."""
        for pid, pidfd in self.others.items():
            if pidfd >= 0:
                os.close(pidfd)
                self.others[pid] = -1

    def settled(self) -> bool:
        """Whether every process found has stopped (SIGSTOP) or ended. One that was exiting
        when it was found, or between two looks, leaves its children to ATP only once it has
        ended."""
        if self.popen.returncode is None and proc_state(self.pid) not in STOPPED:
            return False  # (not reaped: its pid is still the agent's)
        pidfds = {pid: fd for pid, fd in self.others.items() if fd >= 0}
        ended = exited(list(pidfds.values()))
        return all(fd in ended or proc_state(pid) in STOPPED for pid, fd in pidfds.items())

    def report(self, known: set[int], first: set[int], unfinished: bool) -> Stopped:
        """What :meth:`~atp.adapters.process.AgentProcess.terminate` did: ``known`` were found
        before it, ``first`` by its first look."""
        pidfds = {pid: fd for pid, fd in self.others.items() if fd >= 0}
        ended = exited(list(pidfds.values()))
        running = {pid for pid, fd in pidfds.items() if fd not in ended}
        found = [pid for pid in self.others if pid not in known and pid in self._running_when_found]
        return Stopped(
            stopped=sum(pid not in running for pid in found),
            running=len(running),
            late=sum(pid not in first for pid in found),
            unfinished=unfinished,
        )

    def send(self, pids: Iterable[int], sig: int) -> None:
        """Signal those of the agent's other processes ``pids`` that are not reaped."""
        others = self.others
        for pid in pids:
            pidfd = others[pid]
            if pidfd >= 0:
                try:
                    signal.pidfd_send_signal(pidfd, sig)
                except OSError:  # gone already
                    pass

    def running(self) -> bool:
        """Whether one of the processes found has not ended."""
        pidfds = [fd for fd in self.others.values() if fd >= 0]
        return len(exited(pidfds)) < len(pidfds)

    async def look(self, deadline: float) -> None:
        """:meth:`find`, again while what it finds is ending and nothing found runs:
        a process that forks and exits while ATP looks leaves its child to ATP only once it
        has ended, after ATP listed its children; a later look finds it."""
        while True:
            ending = self._still_ending()  # (before the look: see AgentProcess._kill_all)
            new = self.find()
            if any(pid in self._running_when_found for pid in new):
                return
            if not (new or self.doubts or ending) or anyio.current_time() >= deadline:
                return
            await anyio.sleep(POLL_SECONDS / 10)

    def _still_ending(self) -> bool:
        """Whether one of the processes found exiting has not yet ended."""
        others = self.others
        pidfds = {pid: others[pid] for pid in self._ending if others.get(pid, -1) >= 0}
        ended = exited(list(pidfds.values()))
        self._ending = {pid for pid, fd in pidfds.items() if fd not in ended}
        return bool(self._ending)

    def find(self) -> list[int]:
        """Add the agent's other processes to :attr:`others`: its live tree, and ATP's children
        that are the agent's (orphans reparented to ATP, the subreaper) with their trees.
        Returns those added; :attr:`doubts` says how many of ATP's children it could not tell
        as the agent's or not because they are ending (seen for the first time, or not yet
        ended)."""
        with SPAWNING:
            return self._find_now()

    def _find_now(self) -> list[int]:
        agents = self._live_agents()
        # Another live agent with the agent's pid (reused once the agent was reaped), or with
        # the id of a session learned from the agent's processes: its session is not the agent's.
        foreign = agents - {self.pid} if self.popen.returncode is None else agents
        found: list[int] = []
        if self.popen.returncode is None:
            found.extend(pid for pid in ledger.children(self.pid) if self._adopt(pid, parent=self.pid))
        me = os.getpid()
        strangers = [pid for pid in ledger.children("self") if pid not in agents and not self._found(pid)]
        self.doubts = 0
        # (those found ended have no children: theirs went to ATP)
        queue = [pid for pid, pidfd in self.others.items() if pidfd >= 0 and pid in self._running_when_found]
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
        return self.others.get(pid, -1) >= 0

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
        stat = proc_stat(pid)
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
                self.doubts += 1
            return 0
        assert stat is not None
        self.others[pid] = pidfd
        if self.stopping:
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

    def _belongs(self, pid: int, stat: Stat, foreign: set[int]) -> bool | None:
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
        token = token_of(pid)
        if self.token is not None and token == self.token.encode():
            return True
        if self.pipes is not None and holds(pid, self.pipes):
            return True
        return None if stat.ending else False

    async def reap(self) -> None:
        """Wait (a bounded time) until every other process found is gone, reaping those that
        are ATP's children; others' zombies are their parents' to reap."""
        pending = {pid: fd for pid, fd in self.others.items() if fd >= 0}
        deadline = anyio.current_time() + REAP_SECONDS
        while pending:
            for pid, pidfd in list(pending.items()):
                try:
                    reaped = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
                except ChildProcessError:  # not ATP's child: done once it has exited
                    reaped = None
                    if pidfd not in exited([pidfd]):
                        continue
                    # A zombie becomes ATP's child when its parent (another of the agent's
                    # processes, dying too) is gone; a zombie whose parent lives on is its.
                    stat = proc_stat(pid)
                    if stat is not None and (stat.parent == os.getpid() or stat.parent in self.others):
                        continue
                else:
                    if reaped is None:
                        continue  # ATP's child, not dead yet
                os.close(pidfd)
                self.others[pid] = -1
                del pending[pid]
            if not pending or anyio.current_time() >= deadline:
                break
            await anyio.sleep(POLL_SECONDS)
