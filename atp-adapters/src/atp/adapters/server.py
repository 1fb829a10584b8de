"""Agent servers that an adapter starts itself: what the ``term-sdk`` adapter (a server per run)
and the ``agent-interface`` adapter (with ``command``: one server for all the runs) share.

- **Settings**: the checks of ``command``, ``env``, ``cwd``, seconds and ``stop_grace``
  (:func:`check_command` ...), the command made ready to start from the agent's folder
  (:func:`resolve_argv`: relative paths made absolute), a free port (:func:`free_port`), whether
  a fixed port is taken by another program already (:func:`port_in_use`: ATP would drive that
  program instead), and whether the command can be started at all (:func:`check_startable`,
  before anything starts).
- **A started server** (:class:`Server`): started with the ``cli`` adapter's process machinery
  (:class:`~atp.adapters.process.AgentProcess`: a session and process group of its own, the
  process ledger, everything it starts stopped with it); its stdin closed at once; its stdout
  and stderr read as they come, line by line, to a log (a run's log, or a :class:`LogFile`),
  the last lines kept for messages; its exit noticed at once (:meth:`Server.exited`).
- **Waiting for its health** (:meth:`Server.wait_healthy`): an adapter's probe (one
  ``GET /health``) again and again until it says the server is ready, watching for an early
  exit (reported at once, with the exit code and the end of the output) and the time limit
  (:class:`NotHealthy`, with what ``/health`` last answered).
- **Stopping it** (:meth:`Server.stop`): SIGTERM to the server and everything it started, SIGKILL
  after the grace period, what it wrote meanwhile read to the log, a warning when it had to be
  killed or left processes behind.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import socket
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import IO, Annotated, Any, NamedTuple

import anyio
import msgspec

from atp.adapters.cli import MAX_GRACE_SECONDS, cannot_start, command_argv
from atp.adapters.cli import resolve_argv as resolve_argv
from atp.adapters.process import (
    READ_SIZE,
    AgentProcess,
    Environment,
    Watch,
    exit_words,
    outcome,
    processes,
    trouble,
)
from atp.core.bounds import number_in
from atp.core.errors import AdapterError, AgentError
from atp.core.ledger import ProcessLedger
from atp.core.secrets import Masker
from atp.core.text import as_text, mask, piece, shown

MAX_SECONDS = 600.0
"""The most seconds a time setting (``health_timeout`` ...) may be."""
MAX_LOG_LINE = 64 * 1024
"""A line of the server's output longer than this is cut."""
TAIL_LINES = 5
"""How many of the last lines of its output a failure of the server quotes."""
DRAIN_BYTES = 4 * 1024 * 1024
"""The most ATP reads of what is left in the server's pipes once it is stopped."""
MAX_LOG_FILE_BYTES = 64 * 1024 * 1024
"""The most a :class:`LogFile` takes; the rest of the output is read but not written."""
PORT_FIELD = "{port}"
"""Written in a command or an endpoint: the server's port."""

Seconds = Annotated[float, msgspec.Meta(gt=0, le=MAX_SECONDS)]
Grace = Annotated[float, msgspec.Meta(ge=0, le=MAX_GRACE_SECONDS)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
Log = Callable[[str], None]


# --- settings ------------------------------------------------------------------------------


def check_seconds(name: str, value: Any, *, zero: bool = False) -> None:
    """Refuse what is not a finite number of seconds in its bounds (a NaN never passes)."""
    if number_in(value, 0, MAX_SECONDS, low_open=not zero) is None:
        low = "from 0" if zero else "above 0 and"
        raise ValueError(f"{name!r} must be a number of seconds {low} at most {MAX_SECONDS:g}")


def check_whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name!r} must be a whole number from {low} to {high}")


def check_grace(value: Any) -> None:
    """``stop_grace``: seconds from 0 to :data:`~atp.adapters.cli.MAX_GRACE_SECONDS`."""
    if number_in(value, 0, MAX_GRACE_SECONDS) is None:
        raise ValueError(f"'stop_grace' must be a number of seconds from 0 to {MAX_GRACE_SECONDS:g}")


def check_command(command: str | list[str]) -> None:
    """A command that is not empty and holds no NUL byte (which no command can)."""
    argv = command_argv(command, [])
    if not argv:
        raise ValueError("'command' is empty")
    for index, arg in enumerate(argv):
        if "\0" in arg:
            where = "" if isinstance(command, str) else f"[{index}]"
            raise ValueError(f"'command{where}' holds a NUL byte (\\0), which no command can")


def check_cwd(cwd: str | None) -> None:
    if cwd is not None and (not cwd or "\0" in cwd):
        raise ValueError("'cwd' must be the path of a folder")


def check_env(env: Mapping[str, str], port_variable: str) -> None:
    """Variable names and values the system takes; not ``port_variable``, which ATP sets."""
    for key, value in env.items():
        if not key or "=" in key or "\0" in key:
            raise ValueError(f"'env' variable name {key!r} is not a variable name")
        if "\0" in value:
            raise ValueError(f"'env' variable {key!r} holds a NUL byte (\\0), which no value can")
        if key == port_variable:
            raise ValueError(
                f"'env' may not set {port_variable}: ATP sets it to the agent's port (use 'port')"
            )


# --- the command ---------------------------------------------------------------------------


def command_line(command: str | list[str]) -> str:
    """The command as messages show it."""
    return shlex.join(command_argv(command, []))


async def check_startable(
    argv: list[str], folder: Path, env: Mapping[str, str], *, agent: str, command: str
) -> None:
    """Raise AdapterError (nothing starts) when ``argv`` cannot be started in ``folder``: its
    program is not found or not executable, the folder does not exist."""
    problem = await anyio.to_thread.run_sync(cannot_start, argv, folder, env)
    if problem is not None:
        raise AdapterError(f"agent {agent!r}: cannot start {command!r}: {problem}", retryable=False)


def url_host(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def free_port(host: str, taken: set[int] | frozenset[int] = frozenset()) -> int:
    """A port nothing listens on at ``host`` now, not one of ``taken`` (the ports of an
    adapter's servers in flight). Raises OSError when ``host`` cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(100):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            return port
    raise AdapterError(f"cannot find a free port on {host}")  # pragma: no cover


def port_in_use(host: str, port: int, connect_timeout: float = 0.5) -> bool:
    """Whether another program listens on ``host``:``port`` now (blocking; quick). A bind test:
    with ``SO_REUSEADDR``, so that the connections of an agent stopped a moment ago (in
    TIME_WAIT) do not count, and only a listening socket makes the bind fail. A ``host`` that is
    not this machine's, or a port this user may not bind, cannot be tested so: then whether a
    connection opens within ``connect_timeout``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
        else:
            return False
    try:
        socket.create_connection((host, port), timeout=connect_timeout).close()
    except OSError:
        return False
    return True


async def answering(host: str, port: int, seconds: float = 0.5) -> bool:
    """Whether a connection to ``host``:``port`` opens within ``seconds`` (it is closed at
    once): after an agent was stopped, a sign that something of it still runs."""
    with anyio.move_on_after(seconds):
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            return False
        await stream.aclose()
        return True
    return False


# --- the server's output -------------------------------------------------------------------


class ServerOutput:
    """The server's stdout and stderr, read as they come (callbacks on the event loop): every
    line is a line of ``log`` (stdout's marked ``[stdout]``), the last ones kept for messages.
    A line cut at :data:`MAX_LOG_LINE` is masked (``masker``, the run's or the adapter's, and
    ``secrets``, the agent's own, when given) without the end that could begin a secret
    (:func:`~atp.core.text.piece`). The process's exit is noticed at once (:attr:`ended`)."""

    def __init__(
        self, process: AgentProcess, log: Log, masker: Masker | None, secrets: Masker | None = None
    ) -> None:
        self.process = process
        self.log = log
        self.masker = masker
        self.secrets = secrets
        self.watch = Watch()
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.ended = anyio.Event()
        self._pending: dict[int, bytes] = {process.stdout: b"", process.stderr: b""}
        self._cut: set[int] = set()
        for fd in (process.stdout, process.stderr):
            self.watch.readable(fd, self._reader(fd))
        self.watch.exit(process, self._on_exit)

    def _on_exit(self) -> None:
        self.process.popen.poll()  # reap it: its exit code
        self.ended.set()

    def _reader(self, fd: int) -> Callable[[], None]:
        def read() -> None:
            try:
                chunk = os.read(fd, READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            self._take(fd, chunk)

        return read

    def _take(self, fd: int, chunk: bytes) -> None:
        if not chunk:
            self.watch.unread(fd)
            rest, self._pending[fd] = self._pending[fd], b""
            if rest:
                self._line(fd, rest)
            return
        data = self._pending[fd] + chunk
        *lines, rest = data.split(b"\n")
        for line in lines:
            self._line(fd, line)
        if len(rest) > MAX_LOG_LINE:
            self._line(fd, rest[:MAX_LOG_LINE], cut=True)
            self._cut.add(fd)
            rest = b""
        self._pending[fd] = rest

    def _line(self, fd: int, line: bytes, *, cut: bool = False) -> None:
        if fd in self._cut:  # the rest of a line that was cut
            self._cut.discard(fd)
            return
        text = line.decode("utf-8", "replace")
        if cut:  # (masked before the log masks it: a secret across the cut is masked here or not at all)
            text = (
                piece(text if self.secrets is None else self.secrets.piece(text), self.masker) + " [line cut]"
            )
        else:
            text = text.rstrip("\r")
        self.log(f"[stdout] {text}" if fd == self.process.stdout else text)
        if text.strip():
            self.tail.append(text)

    def log_tail(self) -> str | None:
        return "\n".join(self.tail) if self.tail else None

    def drain(self) -> None:
        """Take what is left in the pipes (the server is stopped), without waiting."""
        left = DRAIN_BYTES
        for fd in (self.process.stdout, self.process.stderr):
            while left > 0 and self.watch.reading(fd):
                try:
                    chunk = os.read(fd, min(READ_SIZE, left))
                except BlockingIOError:
                    break
                except OSError:
                    chunk = b""
                left -= len(chunk)
                self._take(fd, chunk)
        for fd, rest in self._pending.items():
            if rest:
                self._pending[fd] = b""
                self._line(fd, rest)

    def close(self) -> None:
        self.watch.close()


class LogFile:
    """Where a server's output goes when no run's log can take it (a server that serves every
    run of a suite): a temporary file ``atp-<agent>-XXXX.log``, its lines masked as every log
    is. :meth:`close` removes it unless :attr:`keep` (a failure pointed at it)."""

    def __init__(self, agent: str, secrets: Any = None, masker: Any = None) -> None:
        self.secrets = secrets
        """A :class:`~atp.core.secrets.Masker` of the agent's own secrets (its settings'), which
        masks its lines also where no suite's masker is given (``atp list-agents --check``)."""
        self.masker = masker
        """The suite's :class:`~atp.core.secrets.Masker` (the adapter's), or ``None``."""
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", agent)[:40] or "agent"
        fd, name = tempfile.mkstemp(prefix=f"atp-{label}-", suffix=".log")
        self.path = Path(name)
        self.keep = False
        self._file: IO[str] | None = os.fdopen(fd, "w", encoding="utf-8", errors="replace", buffering=1)
        self._size = 0

    def log(self, line: str) -> None:
        file = self._file
        if file is None or self._size > MAX_LOG_FILE_BYTES:
            return
        text = mask(line if self.secrets is None else self.secrets.text(line), self.masker) + "\n"
        self._size += len(text)
        try:
            if self._size > MAX_LOG_FILE_BYTES:
                file.write(
                    f"[ATP wrote no more of the output: the log reached {MAX_LOG_FILE_BYTES // (1024 * 1024)} MiB]\n"
                )
            else:
                file.write(text)
        except OSError:  # a full disk: the tail in memory still says how it ended
            self._size = MAX_LOG_FILE_BYTES + 1

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass
        if not self.keep:
            try:
                self.path.unlink()
            except OSError:
                pass


# --- the server ----------------------------------------------------------------------------


class HealthProbe(NamedTuple):
    """What one ``GET /health`` found: whether the server is ready, else what it answered."""

    ready: bool
    last: str = ""
    """What it answered (``HTTP 503 Service Unavailable``, ``connection refused ...``)."""
    evidence: bytes | None = None
    """The body of that answer, when it had one."""


Probe = Callable[[float], Awaitable[HealthProbe]]
"""One ``GET /health`` that takes at most the seconds it is given."""


class NotHealthy(AgentError):
    """The server did not become ready within ``health_timeout`` (it did not exit)."""


class Server:
    """One started server process: its output read (:meth:`read_output`), its health waited
    for, its end (:meth:`stop`)."""

    def __init__(self, process: AgentProcess, *, what: str = "the agent") -> None:
        self.process = process
        self.what = what
        """How messages name it ("the agent", "the agent server")."""
        self.started = time.perf_counter()
        self.output: ServerOutput | None = None
        self.log_path: Path | None = None
        """The file its whole output goes to, named in messages, when it has one."""

    @classmethod
    def launch(
        cls,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | Environment,
        owner: object,
        ledger: ProcessLedger | None = None,
        what: str = "the agent",
    ) -> Server:
        """Start ``argv`` (raises OSError). Call :meth:`read_output` next, and :meth:`stop`
        however what follows ends."""
        return cls(AgentProcess.start(argv, cwd=cwd, env=env, owner=owner, ledger=ledger), what=what)

    @property
    def pid(self) -> int:
        return self.process.pid

    def read_output(self, log: Log, masker: Masker | None, secrets: Masker | None = None) -> None:
        """Read its stdout and stderr to ``log``, line by line, from now on; close its stdin (a
        server reads none: it ends at once). ``masker`` (the run's or the adapter's) and
        ``secrets`` (the agent's own) mask a line cut at its size limit before it is logged."""
        self.output = ServerOutput(self.process, log, masker, secrets)
        self.process.close_stdin()

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the server exits meanwhile."""
        assert self.output is not None
        with anyio.move_on_after(seconds):
            await self.output.ended.wait()

    def exited(self, when: str) -> AgentError | None:
        """The server has exited: the error saying so ``when``, with its output's end; ``None``
        while it runs."""
        code = self.process.popen.poll()
        if code is None:
            return None
        assert self.output is not None
        self.output.drain()
        tail = self.output.log_tail()
        what = f"{self.what} {exit_words(code)} {when}"
        if self.log_path is not None:
            if tail is not None:
                return AgentError(f"{what}; its log ({self.log_path}) ends with", evidence=tail)
            return AgentError(f"{what}; its log ({self.log_path}) is empty")
        if tail is not None:
            return AgentError(f"{what}; its output ends with", evidence=tail)
        return AgentError(f"{what}, writing nothing")

    async def wait_healthy(
        self, probe: Probe, *, url: str, timeout: float, interval: float, request_timeout: float
    ) -> None:
        """Call ``probe`` every ``interval`` seconds until it says the server is ready, for
        ``timeout`` seconds (``health_timeout``); each call may take ``request_timeout``
        seconds. Raises the :meth:`exited` error as soon as the server exits, and
        :class:`NotHealthy` (with what ``GET url`` last answered) at the time limit."""
        when = "before it became healthy (GET /health)"
        deadline = anyio.current_time() + timeout
        last, evidence = "no answer", None
        while True:
            failed = self.exited(when)
            if failed is not None:
                raise failed
            # (the last call too has time to answer: the wait may end up to half a second late)
            limit = min(request_timeout, max(deadline - anyio.current_time(), 0.5))
            seen = await probe(limit)
            if seen.ready:
                return
            last, evidence = seen.last, seen.evidence
            left = deadline - anyio.current_time()
            if left <= 0:
                failed = self.exited(when)
                if failed is not None:
                    raise failed
                raise NotHealthy(
                    f"{self.what} did not become healthy within {timeout:g} s (health_timeout): "
                    f"GET {url} last answered {last}" + ("" if evidence is None else ", saying"),
                    evidence=evidence,
                )
            await self.pause(min(interval, left))

    async def stop(self, grace: float, warn: Log, *, aborted: Callable[[], bool] = lambda: False) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (``stop_grace``), to the server and
        everything it started; what it wrote meanwhile goes to the log. ``warn`` says when it
        had to be killed (unless ``aborted()``: everything was killed at once on purpose) and
        what became of processes it left."""
        process, output = self.process, self.output
        running = process.popen.poll() is None
        try:
            result = await process.terminate(grace)
            if output is not None:
                output.drain()
        finally:
            if output is not None:
                output.close()
            await process.stop(grace)
        code = process.popen.returncode
        if running and code == -9 and not aborted():
            warn(f"{self.what} did not exit within {grace:g} s of SIGTERM (stop_grace); ATP killed it")
        count = result.stopped + result.running
        if result.running or result.unfinished:
            warn(
                f"stopping {self.what}: {processes(count)} it started: {outcome(result, count)}{trouble(result)}"
            )


def abort_all(owner: object) -> None:
    """SIGKILL every server ``owner`` started, and everything they started, at once (the
    :meth:`Server.stop` calls in flight then finish without waiting out their grace)."""
    AgentProcess.abort_all(owner=owner)


def with_evidence(
    exc: AgentError, limit: int = 200, secrets: Masker | None = None, *, masker: Masker | None
) -> str:
    """``exc``'s message and its evidence, masked (with ``masker``, the run's or the adapter's
    :attr:`~atp.core.adapter.Adapter.masker`, and with ``secrets``, a
    :class:`~atp.core.secrets.Masker` of the agent's own settings, when given), then shortened
    and made printable, as one line (for an AdapterError, which is shown as it is)."""
    if exc.evidence is None:
        return exc.message
    text = as_text(exc.evidence)
    if secrets is not None:
        text = secrets.text(text)
    return f"{exc.message}: {shown(text, masker, limit=limit)}"
