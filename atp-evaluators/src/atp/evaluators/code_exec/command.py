"""Running a command: how it is isolated (:func:`isolation`, probed), the trampoline that sets
its limits (:func:`trampoline`), its environment (:func:`command_env`), its record in the process
ledger, killing it at its time limit and capturing its output (:func:`run_command`).

**How it runs.** In a new session (its own process group), stdin from ``/dev/null``, stdout and
stderr captured together (the last :data:`MAX_OUTPUT_BYTES` kept), with a minimal environment:
``PATH`` (ATP's, with the folder of the Python interpreter in use in front), ``HOME``,
``TMPDIR``, ``LANG``, ``PYTHONDONTWRITEBYTECODE=1``, ``ATP_AGENT_TOKEN`` (see below) and the
assertion's ``env``; no other variable of ATP's environment is passed on. A small trampoline run
by ATP's interpreter sets the command's resource limits (``RLIMIT_AS`` ``max_memory_mb``,
``RLIMIT_FSIZE`` ``max_file_mb``, ``RLIMIT_CORE`` 0, ``RLIMIT_NOFILE``
:data:`MAX_OPEN_FILES`; no ``RLIMIT_NPROC``, which counts every process of the user) and, on
Linux, asks for SIGKILL when ATP dies (``PR_SET_PDEATHSIG``), then runs the command. The process
is recorded in the run's process ledger (:mod:`atp.core.ledger`) while it runs, so that after a
``kill -9`` of ATP the next ``atp test`` or ``atp clean`` stops what is left of it.

**Isolation.** On Linux, when ``unshare`` works (probed per process until it gives a definite
answer), the command runs inside ``unshare --net --pid --fork --kill-child --mount --mount-proc
--map-current-user`` (``--map-root-user`` with a util-linux too old for ``--map-current-user``;
no user namespace for root where user namespaces are not allowed): it has no network (only a
loopback interface that is down), killing it kills every process it started, however they
detached (PID namespace), and ``/proc`` shows only its own processes, so the environment of
ATP's processes cannot be read there. That last holds only while the command is not root in its
namespaces: when ATP runs as root (or ``--map-root-user`` was needed) the command can unmount
that ``/proc`` and see the system's again. ``network: true`` leaves out ``--net``. Elsewhere the
command runs in its process group only: the check's details say ``network: "not isolated
(<why>)"``, a process that leaves the group (``setsid``) survives it, and ``/proc`` is the
system's, where the command can read the environment of ATP's own process (and of any other
process of ATP's user): a secret in ATP's environment is readable then. In every mode the
command runs as ATP's user and reads every file ATP's user may read (configuration, ``.env``
files, keys): this is isolation from the network and for cleanup, not a sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import anyio

from atp.core.ledger import TOKEN_VARIABLE, ProcessLedger, new_token
from atp.core.portability import KILL, kill_group
from atp.core.text import shorten
from atp.evaluators.code_exec.config import CommandConfig
from atp.evaluators.code_exec.folder import Folder

logger = logging.getLogger(__name__)

MAX_OUTPUT_BYTES = 1024 * 1024
"""A command's output (stdout and stderr together) is kept up to its last this many bytes."""
DRAIN_SECONDS = 2.0
"""After a command ends, how long ATP waits for the end of its output (a process it started
and that escaped its group may hold the pipe open)."""
PROBE_SECONDS = 2.0
"""How long one ``unshare`` probe may take. A probe that takes longer is not remembered: the
next command probes again."""
KILL_WAIT_SECONDS = 10.0
"""How long ATP waits for a command it killed with SIGKILL to end, before leaving it."""
MAX_OPEN_FILES = 4096
"""How many files the command may have open at once (``RLIMIT_NOFILE``)."""

UNSHARE_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--map-current-user")
"""The ``unshare`` options that isolate a command: no network, its own PID namespace (whose
processes all die with its first one, which dies with ``unshare``), its own mount namespace
with a ``/proc`` of that PID namespace, in a user namespace of its own (which an unprivileged
user may create) as ATP's user, without capabilities. The last option is swapped for
``--map-root-user`` where ``unshare`` does not know it (util-linux before 2.38), and left out
for root where user namespaces are not allowed."""


# --- isolation --------------------------------------------------------------------------------


class Isolation(NamedTuple):
    """How commands are isolated in this process."""

    prefix: tuple[str, ...]
    """The ``unshare`` command line a command is run under; empty when there is none."""
    why: str | None = None
    """Why there is none."""


_isolation: Isolation | None = None


async def isolation() -> Isolation:
    """How commands are isolated: probed until a probe gives a definite answer (one that timed
    out is not remembered), then remembered for the process."""
    global _isolation
    if _isolation is not None:
        return _isolation
    found, definite = await _probe()
    if definite:
        _isolation = found
    return found


async def _probe() -> tuple[Isolation, bool]:
    """Whether ``unshare`` with :data:`UNSHARE_FLAGS` runs a command here (with
    ``--map-root-user`` instead of the last where ``unshare`` does not know it; without a user
    namespace for root where user namespaces are not allowed); and whether that answer is
    definite (no probe timed out)."""
    if not sys.platform.startswith("linux"):
        return Isolation((), f"network and PID namespaces are Linux's; this is {sys.platform}"), True
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation((), "the unshare command is not installed"), True
    candidates: list[tuple[str, ...]] = [
        (unshare, *UNSHARE_FLAGS),
        (unshare, *UNSHARE_FLAGS[:-1], "--map-root-user"),
    ]
    if os.geteuid() == 0:
        candidates.append((unshare, *UNSHARE_FLAGS[:-1]))
    why = "unshare failed"
    definite = True
    for prefix in candidates:
        try:
            with anyio.fail_after(PROBE_SECONDS):
                done = await anyio.run_process(
                    [*prefix, sys.executable, "-I", "-S", "-c", ""],
                    check=False,
                    stdin=subprocess.DEVNULL,
                    env={"PATH": os.environ.get("PATH", os.defpath)},
                )
        except TimeoutError:
            why = f"unshare did not finish within {PROBE_SECONDS:g} s"
            definite = False
            continue
        except OSError as exc:
            why = f"unshare cannot be started: {exc.strerror or exc}"
            continue
        if done.returncode == 0:
            return Isolation(prefix), True
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = f"unshare failed: {shorten(said[-1] if said else f'exit code {done.returncode}', 200)}"
    return Isolation((), why), definite


# --- running a command ------------------------------------------------------------------------


class Outcome(NamedTuple):
    """How a command ended and what it wrote."""

    exit_code: int | None
    """``None`` when it was killed at its time limit (negative: ended by a signal)."""
    output: str
    """The end of stdout and stderr together (:data:`MAX_OUTPUT_BYTES` at most)."""
    cut: int
    """Bytes of output before that, not kept."""
    seconds: float
    timeout: float
    network: str
    processes: str
    proc: str = ""
    """What the command's ``/proc`` shows."""
    unfinished_output: bool = False
    """Whether a process that escaped kept the output open after the command ended."""

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None


class _Tail:
    """The last ``keep`` bytes of a stream, and how many came before them."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buffer += chunk
        if len(self.buffer) > 2 * self.keep:
            del self.buffer[: -self.keep]

    def kept(self) -> bytes:
        return bytes(self.buffer[-self.keep :])


_TRAMPOLINE = """\
import os, resource, signal, sys
parent, limits = int(sys.argv[1]), sys.argv[2:sys.argv.index("--")]
argv = sys.argv[sys.argv.index("--") + 1:]
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:  # ATP died before that
        os._exit(137)
for limit in limits:
    name, value = limit.split("=")
    which = getattr(resource, "RLIMIT_" + name)
    hard = resource.getrlimit(which)[1]
    value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
    resource.setrlimit(which, (value, value))
for number in (signal.SIGPIPE, signal.SIGXFSZ):  # (Python ignores them; the command must not)
    signal.signal(number, signal.SIG_DFL)
try:
    os.execv(argv[0], argv)
except OSError as exc:
    sys.stderr.write(f"ATP cannot run {argv[0]}: {exc.strerror or exc}\\n")
    os._exit(127)
"""
"""What runs a command (by ATP's interpreter, ``-I -S``): it sets the parent-death signal (so
the command is killed when ATP is, however ATP ends; strictly, when the thread that started it
ends, which is the event loop's) and the resource limits, then replaces itself with the command
(``execv``: the same process, the same pid). It leaves SIGPIPE and SIGXFSZ as the command would
have them (Python ignores both, and an ignored signal stays ignored across ``exec``)."""


def trampoline(config: CommandConfig) -> list[str]:
    """The command line that runs a command under :data:`_TRAMPOLINE` with ``config``'s limits
    (the command follows it)."""
    limits = ["CORE=0", f"NOFILE={MAX_OPEN_FILES}"]
    if config.max_memory_mb:
        limits.append(f"AS={config.max_memory_mb * 1024 * 1024}")
    if config.max_file_mb:
        limits.append(f"FSIZE={config.max_file_mb * 1024 * 1024}")
    return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(os.getpid()), *limits, "--"]


class _Command:
    """A started command: its process (which ATP alone reaps, so that until it does, the
    command's pid, which is also its process group's id, names no other process), a pidfd for
    it where there are pidfds, and its record in ``processes`` (the run's process ledger; ``None``:
    none is kept)."""

    def __init__(
        self, popen: subprocess.Popen[bytes], token: str, processes: ProcessLedger | None = None
    ) -> None:
        self.popen = popen
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(popen.pid)  # (it cannot have been reaped yet: only ATP reaps it)
        self.ledger = processes
        if self.ledger is not None:
            self.ledger.started(popen.pid, token)

    def exited(self) -> bool:
        """Whether it has ended (not reaping it, where the system can tell without)."""
        if self.popen.returncode is not None:
            return True
        if self.pidfd is not None:
            return _readable(self.pidfd)
        waitid = getattr(os, "waitid", None)
        if waitid is None:  # (then it is reaped as it is found ended: no group kill after that)
            return self.popen.poll() is not None
        try:
            return waitid(os.P_PID, self.popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    async def ended(self) -> None:
        """Until it has ended (not reaping it)."""
        if self.pidfd is not None and self.popen.returncode is None:
            await anyio.wait_readable(self.pidfd)
            return
        while not self.exited():
            await anyio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL its process group and it, while it is not reaped (alive or a zombie: its pid
        names its group still). Once reaped, nothing is signalled."""
        if self.popen.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill_group(self.popen.pid, KILL)  # (without process groups, the command alone, below)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.popen.pid, KILL)

    def reap(self) -> int | None:
        """Its exit code, reaping it once it has ended; ``None`` while it runs."""
        if not self.exited():
            return None
        code = self.popen.wait()
        if self.ledger is not None:
            self.ledger.ended(self.popen.pid)
        return code

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self.popen.stdout is not None:
            self.popen.stdout.close()


def _readable(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class _Isolated(NamedTuple):
    """How one command is isolated, for its check's details."""

    prefix: tuple[str, ...]
    """The ``unshare`` command line it runs under (empty: none)."""
    network: str
    processes: str
    proc: str


def _isolated_as(isolated: Isolation, network: bool) -> _Isolated:
    """How a command runs with the isolation there is, its network allowed or not."""
    if isolated.prefix:
        prefix = tuple(a for a in isolated.prefix if a != "--net") if network else isolated.prefix
        net = "allowed (network: true)" if network else "isolated (a network namespace of its own)"
        processes = "PID namespace (every process the command started ends with it)"
        proc = (
            "the namespace's own, but the command is root there and could unmount it"
            if os.geteuid() == 0 or "--map-root-user" in prefix
            else "the namespace's own (ATP's processes are not in it)"
        )
        return _Isolated(prefix, net, processes, proc)
    net = "allowed (network: true)" if network else f"not isolated ({isolated.why})"
    processes = f"process group (no PID namespace: {isolated.why})"
    proc = "the system's (the command can read the environment of ATP's processes)"
    return _Isolated((), net, processes, proc)


class _Output:
    """The output of a started command (stdout and stderr together), read as it comes: its last
    :data:`MAX_OUTPUT_BYTES` kept; :attr:`read_all` is set once the pipe was read to its end."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdout is not None
        self.fd = popen.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.tail = _Tail(MAX_OUTPUT_BYTES)
        self.read_all = anyio.Event()

    async def read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            except OSError:
                break
            if not chunk:
                break
            self.tail.add(chunk)
        self.read_all.set()


async def _wind_up(command: _Command, output: _Output) -> int | None:
    """Once the command has ended or its time is up: kill its leftovers (or itself, at its time
    limit) before it is reaped, wait for it to end, reap it, and wait a little for the end of its
    output. Its exit code (``None`` when it did not end)."""
    command.kill()
    with anyio.move_on_after(KILL_WAIT_SECONDS):
        await command.ended()
    code = command.reap()
    with anyio.move_on_after(DRAIN_SECONDS):
        await output.read_all.wait()
    return code


async def _make_sure_ended(command: _Command) -> None:
    """Kill, and reap, a command still running however :func:`run_command` ended (cancelled
    included); then close what ATP holds of it."""
    with anyio.CancelScope(shield=True):
        if command.popen.returncode is None:
            command.kill()
            with anyio.move_on_after(KILL_WAIT_SECONDS):
                await command.ended()
            if command.reap() is None:
                logger.warning("a command ATP killed (pid %s) has not ended yet", command.popen.pid)
        command.close()


async def run_command(
    argv: list[str],
    folder: Folder,
    env: Mapping[str, str],
    timeout: float,
    network: bool,
    config: CommandConfig,
    *,
    processes: ProcessLedger | None = None,
) -> Outcome:
    """Run ``argv`` in ``folder.work`` (see the module's docstring), under :func:`trampoline`
    and the isolation there is; killed after ``timeout`` seconds, its process group killed
    once it has ended (its leftovers, before it is reaped), and killed whatever happens when
    this is cancelled. It is recorded in ``processes`` (the run's process ledger, from
    :attr:`~atp.core.evaluator.EvalContext.processes`) while it runs; ``None``: it is recorded
    nowhere. OSError when it cannot be started (as on a system that is not POSIX)."""
    if os.name != "posix":
        raise OSError(
            errno.ENOSYS,
            "a command is run under resource limits and its output read through a non-blocking "
            f"pipe, which need a POSIX system (Linux, macOS); this is {sys.platform} (see docs/platforms.md)",
        )
    isolated = _isolated_as(await isolation(), network)
    token = new_token()
    started = anyio.current_time()
    popen = subprocess.Popen(
        [*trampoline(config), *isolated.prefix, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=folder.work,
        env={**env, TOKEN_VARIABLE: token},
        start_new_session=True,
    )
    command = _Command(popen, token, processes)
    output = _Output(popen)
    code: int | None = None
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(output.read)
            with anyio.move_on_after(timeout) as limit:
                await command.ended()
            seconds = anyio.current_time() - started
            code = await _wind_up(command, output)
            tasks.cancel_scope.cancel()
    finally:
        await _make_sure_ended(command)
    kept = output.tail.kept()
    return Outcome(
        exit_code=None if limit.cancelled_caught else code,
        output=kept.decode("utf-8", "replace"),
        cut=output.tail.total - len(kept),
        seconds=seconds,
        timeout=timeout,
        network=isolated.network,
        processes=isolated.processes,
        proc=isolated.proc,
        unfinished_output=not output.read_all.is_set(),
    )


def command_env(folder: Folder, python: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The minimal environment of a command: no variable of ATP's own but ``PATH`` (with
    ``python``'s folder in front) and ``LANG`` (:func:`run_command` adds ``ATP_AGENT_TOKEN``)."""
    path = os.environ.get("PATH") or os.defpath
    if os.path.isabs(python):  # (never an empty entry: that would be the command's folder)
        path = os.pathsep.join([os.path.dirname(python), path])
    return {
        "PATH": path,
        "HOME": str(folder.home),
        "TMPDIR": str(folder.tmp),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


def find_program(name: str, path: str, base: Path) -> tuple[str | None, str | None]:
    """The program ``name`` names, as an absolute path, or why there is none: a name without a
    slash is looked up on ``path``; a relative path is relative to ``base``."""
    if "/" not in name and os.sep not in name:
        found = shutil.which(name, path=path)
        if found is None:
            return None, f"{name!r} was not found on the PATH ({shorten(path, 300)})"
        return os.path.abspath(found), None
    candidate = os.path.join(base, name)
    if not os.path.isfile(candidate):
        return None, f"{name!r} is not a file"
    if not os.access(candidate, os.X_OK):
        return None, f"{name!r} is not executable"
    return os.path.abspath(candidate), None
