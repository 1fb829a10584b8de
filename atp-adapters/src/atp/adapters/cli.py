"""The ``cli`` adapter: any command, spoken to over the stdin/stdout transport.

The request goes to the agent's stdin as one JSON line (then stdin is closed); the response is
the last line the agent writes on stdout (or, when that line is not one, the JSON the agent
printed over several lines, pretty-printed, ending there); events are JSON lines on stderr, and
every other stderr line is kept as the agent's log. Settings::

    agents:
      - name: my-agent
        type: cli
        command: [python3, agent.py]      # a list, or a string split like a shell would
        args: [--verbose]                 # optional: arguments after the command
        cwd: .                            # default: the folder of the file defining the agent
        working_folder: per-run           # or shared: every run in cwd (see below)
        env: {LOG_LEVEL: debug}           # added to ATP's environment (inherit_env: false: only these)
        timeout: 120                      # seconds; the test's timeout_seconds applies too

:meth:`CliAdapter.start` checks once, before any run, that the command can be started at all
(its working folder exists, its program is found and executable): if not, the suite does not
start. An agent that ends without a response has the last lines of its stderr in the reason.

With ``working_folder: per-run`` (the default) every run gets a fresh folder of its own, which
ATP makes below the run directory (a copy of the test's ``workspace_fixture`` when it has one)
and sends as ``context.workspace_path``: the agent's process runs in it, and its relative
artifact paths resolve in it. What starts the agent is resolved against ``cwd`` first
(:func:`resolve_argv`: a program with a ``/``, and the first argument naming a file there, the
script of ``[python3, agent.py]``), so it starts the same from the run's folder; the process
finds ``cwd`` in ``ATP_AGENT_DIR``. When the default sends a run elsewhere and the agent ends
without a response, the reason says so. A persistent agent's process serves many runs and
stays in ``cwd``: it is to write a run's files in that run's ``context.workspace_path``.
``working_folder: shared`` runs every run in ``cwd``, as before (runs in parallel then share
its files).

The response is complete when stdout ends, or when its last line is a valid response for the
request and nothing more comes on stdout for ``EXIT_DRAIN_SECONDS`` while the agent runs on:
ATP then takes it and stops the agent (with a warning). The agent runs in its own session;
when a run ends (the agent exited, the time limit, Ctrl-C, a flood) the agent and every process
it started are sent SIGTERM, then SIGKILL after ``grace_seconds`` (see
:mod:`atp.adapters.process`).
"""

import asyncio
import os
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal, Protocol

import anyio
import msgspec

from atp.adapters.persistent import ProcessPool
from atp.adapters.process import (
    PIPE_SIZE,
    READ_SIZE,
    AgentProcess,
    Exchange,
    Failed,
    encoded,
    exit_words,
    lacks_resources,
    outcome,
    processes,
    trouble,
    with_request_environment,
)
from atp.adapters.stdio import (
    DECODE_ERRORS,
    DUPLICATE_CHECK_BYTES,
    DUPLICATE_THREAD_BYTES,
    StderrLines,
    duplicate_keys,
)
from atp.core.adapter import Adapter
from atp.core.bounds import number_in
from atp.core.errors import AdapterError, AgentError, AtpError, ProtocolError
from atp.core.ledger import ProcessLedger
from atp.core.protocol import ATPRequest, ATPResponse, decode_response, encode
from atp.core.text import shorten, shown
from atp.core.trace import EventSink

MiB = 1024 * 1024
EXIT_DRAIN_SECONDS = 1.0
"""How long ATP waits for an agent to exit after its stdout ended, for its output to end
after it exited, and how long stdout must stay quiet after a response while the agent runs on."""
MAX_GRACE_SECONDS = 600.0
EARLIER_LINES = 20
"""How many stdout lines before a last line that is no response are looked at for the response
(to say that the lines after it are the mistake)."""
MAX_BYTES = 1024 * MiB
AGENT_DIR_VARIABLE = "ATP_AGENT_DIR"
"""Set for the agent's process: the agent's own folder (its ``cwd``), wherever the run runs."""


class NoResponse(AgentError):
    """The agent ended (or was stopped) without writing a valid response on stdout."""


def command_argv(command: str | list[str], args: list[str]) -> list[str]:
    """The argv of ``command`` (a list, or a string split like a shell would) and ``args``."""
    return [*(shlex.split(command) if isinstance(command, str) else command), *args]


def resolve_argv(command: str | list[str], folder: Path, args: list[str] | None = None) -> list[str]:
    """The argv of ``command`` (and ``args``) with what starts the agent made absolute against
    ``folder`` (the agent's folder), so that it starts the same from any working folder: the
    program when it has a ``/`` (``./bin/agent``), and the first argument that names an existing
    file there (the script: ``python3 agent.py``, ``node index.js``, ``sh run.sh``). Nothing
    after that (``--out answer.md`` stays relative: the run's own folder), no option (``-u``),
    and nothing from ``-m`` or ``-c`` on (a module, code: no script to find)."""
    argv = command_argv(command, args or [])
    program = argv[0]
    if os.sep in program and not os.path.isabs(program):
        argv[0] = str(folder / program)
    for index, arg in enumerate(argv[1:], start=1):
        if arg in ("-m", "-c"):
            break
        if arg.startswith("-") or os.path.isabs(arg):
            continue
        path = _file_in(folder, arg)
        if path is not None:
            argv[index] = path
            break
    return argv


def _file_in(folder: Path, arg: str) -> str | None:
    """The absolute path of the file ``arg`` names in ``folder``, if it names one."""
    try:
        path = folder / arg
        return str(path) if arg and path.is_file() else None
    except (OSError, ValueError):
        return None


class CliSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: str | list[str]
    args: list[str] = msgspec.field(default_factory=list)
    """Arguments after ``command`` (``command: python3`` with ``args: [agent.py]``)."""
    cwd: str | None = None
    working_folder: Literal["per-run", "shared"] | None = None
    """``per-run`` (the default): each run in a fresh folder of its own
    (``context.workspace_path``); ``shared``: every run in ``cwd``."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    inherit_env: bool = True
    grace_seconds: Annotated[float, msgspec.Meta(ge=0, le=MAX_GRACE_SECONDS)] = 3.0
    max_output_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_BYTES)] = 64 * MiB
    max_line_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_BYTES)] = 4 * MiB
    persistent: bool = False
    """One process serves many runs, one request after another (see :mod:`atp.adapters.persistent`)."""
    max_runs_per_process: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """With ``persistent``: a process is replaced by a fresh one after this many runs."""

    def __post_init__(self) -> None:
        command = self.command
        argv = command_argv(command, [])
        if not argv:
            raise ValueError("'command' is empty")
        # What the system could not take would fail every run ("embedded null byte"): refuse
        # it when the suite loads.
        for index, arg in enumerate(argv):
            if "\0" in arg:
                where = "" if isinstance(command, str) else f"[{index}]"
                raise ValueError(f"'command{where}' holds a NUL byte (\\0), which no command can")
        for index, arg in enumerate(self.args):
            if "\0" in arg:
                raise ValueError(f"'args[{index}]' holds a NUL byte (\\0), which no command can")
        if self.cwd is not None and "\0" in self.cwd:
            raise ValueError("'cwd' holds a NUL byte (\\0), which no path can")
        for key, value in self.env.items():
            if not key:
                raise ValueError("'env' has a variable with an empty name")
            if "=" in key or "\0" in key:
                what = "a NUL byte (\\0)" if "\0" in key else "'='"
                raise ValueError(f"'env' variable name {key!r} holds {what}, which no variable name can")
            if "\0" in value:
                raise ValueError(f"'env' variable {key!r} holds a NUL byte (\\0), which no value can")
        # Meta bounds are checked when settings are decoded, not when the Struct is built in
        # code; and a NaN must never pass.
        grace = self.grace_seconds
        if number_in(grace, 0, MAX_GRACE_SECONDS) is None:
            raise ValueError(f"'grace_seconds' must be a number of seconds from 0 to {MAX_GRACE_SECONDS:g}")
        for name in ("max_output_bytes", "max_line_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= MAX_BYTES:
                raise ValueError(f"{name!r} must be a whole number of bytes from 1024 to {MAX_BYTES}")
        limit = self.max_runs_per_process
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError("'max_runs_per_process' must be a whole number of runs, at least 1")
            if not self.persistent:
                raise ValueError(
                    "'max_runs_per_process' applies to persistent agents only (persistent: true)"
                )


class CliAdapter(Adapter):
    type = "cli"
    summary = "a command speaking ATP over stdin (request), stdout (response) and stderr (events)"
    Settings = CliSettings
    settings: CliSettings

    def __init__(self, settings: CliSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        argv = command_argv(settings.command, settings.args)
        self.command_line = shlex.join(argv)
        """The command as the settings give it, for messages."""
        base_dir = self.base_dir  # (absolute)
        self.cwd = (base_dir / settings.cwd).resolve() if settings.cwd else base_dir
        self.folder_per_run = settings.working_folder != "shared"
        self.default_folders = settings.working_folder is None
        """Whether the folder per run is the default (not written): a run that fails says so."""
        self.argv = resolve_argv(settings.command, self.cwd, settings.args)
        environment = dict(os.environ) if settings.inherit_env else {}
        environment.update(settings.env)
        environment[AGENT_DIR_VARIABLE] = str(self.cwd)
        self.env = environment
        self.encoded_env = encoded(environment)
        """The environment as agents are started with it (encoded once)."""
        self._aborted = False
        self.pool = ProcessPool(self) if settings.persistent else None
        """The agent's processes, when one serves many runs (``persistent: true``)."""

    async def start(self) -> None:
        """Check once, before any run, that the command can be started at all: its working
        folder exists, its program is found and is executable. Raises AdapterError (the suite
        does not start) saying why."""
        problem = await anyio.to_thread.run_sync(cannot_start, self.argv, self.cwd, self.env)
        if problem is not None:
            raise AdapterError(
                f"agent {self.name!r}: cannot start {self.command_line!r}: {problem}", retryable=False
            )

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """The agent's working folder: its relative artifact paths are relative to it (when
        the request names no workspace)."""
        return self.cwd

    def working_folder(self, request: ATPRequest) -> Path:
        """Where the process of a run runs: the run's own folder (``context.workspace_path``)
        with ``working_folder: per-run``, else ``cwd``."""
        context = request.context
        if self.folder_per_run and context is not None and context.workspace_path:
            return Path(context.workspace_path)
        return self.cwd

    def abort(self) -> None:
        """SIGKILL every agent this adapter started, and everything they started, at once."""
        self._aborted = True
        if self.pool is not None:
            self.pool.closed = True
        AgentProcess.abort_all(owner=self)

    async def aclose(self) -> None:
        """Stop the processes of a persistent agent (each idle one is told first: its stdin
        ends)."""
        if self.pool is not None:
            await self.pool.close()

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no agent is started", retryable=False)
        if self.pool is not None:
            return await self.pool.execute(request, sink)
        env = with_request_environment(self.encoded_env, request)
        folder = self.working_folder(request)
        try:
            return await run_process(self, self.argv, folder, env, request, sink)
        except NoResponse as exc:
            if self.default_folders and folder != self.cwd and not exc.hint:
                exc.hint = (
                    f"note: by default each run is in a folder of its own (context.workspace_path), "
                    f"not in the agent's cwd ({self.cwd}, given to it as ${AGENT_DIR_VARIABLE}); "
                    f"'working_folder: shared' runs every run in cwd as before"
                )
            raise


class ProcessSettings(Protocol):
    """What :func:`run_process` reads of an adapter's settings."""

    grace_seconds: float
    max_output_bytes: int
    max_line_bytes: int


class ProcessAdapter(Protocol):
    """The adapter :func:`run_process` serves: its name, its settings, its process ledger
    (:attr:`~atp.core.adapter.Adapter.processes`), and (as the owner of the processes it
    starts) itself."""

    name: str
    processes: ProcessLedger | None

    @property
    def settings(self) -> ProcessSettings: ...


async def run_process(
    adapter: ProcessAdapter,
    argv: list[str],
    cwd: Path,
    env: Mapping[bytes, bytes],
    request: ATPRequest,
    sink: EventSink,
) -> ATPResponse:
    """One run over the stdin/stdout transport, one process: start ``argv``, send the request,
    read events and the log from stderr and the response from stdout, and stop the process
    and everything it started (with ``grace_seconds``) however the run ends. The ``cli`` and
    ``container`` adapters both run agents this way."""
    try:
        process = AgentProcess.start(argv, cwd=cwd, env=env, owner=adapter, ledger=adapter.processes)
    except OSError as exc:
        raise AdapterError(
            f"agent {adapter.name!r}: cannot start {shlex.join(argv)!r} in {cwd}: {exc.strerror or exc}",
            retryable=lacks_resources(exc),
        ) from None
    exchange = _Exchange(adapter, process, request.task_id, sink)
    try:
        return await exchange.run(encode(request) + b"\n")
    finally:
        stopped = await process.stop(adapter.settings.grace_seconds)
        count = stopped.stopped + stopped.running
        if exchange.exited_alone and (count or stopped.unfinished):
            sink.warn(
                f"the agent left {processes(count) if count else 'processes'} running after it "
                f"exited; {outcome(stopped, count)}{trouble(stopped)}"
            )
        elif (stopped.running or stopped.unfinished) and not exchange.troubled:
            # (the run was stopped: its time limit, Ctrl-C; the agent is, not all it started)
            sink.warn(f"stopping the agent: {trouble(stopped)[2:]}")


class _Exchange(Exchange):
    """One run of a cli agent: the request in, events and log from stderr, the response from
    stdout, and the decision when the agent is done. Reading is done by callbacks on the event
    loop (:class:`~atp.adapters.process.Watch`); :meth:`run` waits for what they find."""

    def __init__(self, adapter: ProcessAdapter, process: AgentProcess, task_id: str, sink: EventSink) -> None:
        super().__init__(process)
        self.settings = adapter.settings
        self.task_id = task_id
        self.sink = sink
        # stdout: the bytes, where its last non-blank text ends, whether a newline follows it
        self.stdout = bytearray()
        self.text_end = 0
        self.complete = False
        self.decoded: dict[tuple[int, int], ATPResponse | ProtocolError] = {}
        """The last stdout line and the multi-line JSON it may end, decoded (the latest two)."""
        self.taken = False
        self.stdout_ended = False
        self.quiet: asyncio.TimerHandle | None = None
        """Set while stdout ends with a complete line: when it fires, the line may be taken."""
        # stderr: events and log
        self.err = StderrLines(sink, self.settings.max_line_bytes)
        self.stderr_ended = False
        self.exited = False
        # the ending
        self.stopped_by_atp = False
        self.exited_alone = False
        self.troubled = False  # a warning said what went wrong while stopping the agent's processes

    async def run(self, request: bytes) -> ATPResponse:
        process, watch = self.process, self.watch
        try:
            process.widen_stderr(PIPE_SIZE)
            watch.readable(process.stderr, self._on_stderr)
            watch.readable(process.stdout, self._on_stdout)
            watch.exit(process, self._on_exit)
            self.send(memoryview(request))
            await self._finish()
        except Failed:
            pass
        finally:
            watch.close()
            if not process.stdin_closed:
                process.close_stdin()
        if self.failure is not None:
            raise self.failure
        return await self._response()

    def _unreadable(self, stream: str, exc: Exception) -> None:
        """A callback reading ``stream`` raised ``exc``: the run's failure, by what it is."""
        if isinstance(exc, AgentError):
            self.fail(exc)
        elif isinstance(exc, ProtocolError):
            self.fail(AgentError(f"the agent broke the protocol on {stream}: {exc}"))
        elif isinstance(exc, AtpError):
            self.fail(exc)  # ATP's own trouble (its run directory, say), not the agent's
        else:
            where = (
                f"stderr line {self.err.line}, byte offset {self.err.offset}"
                if stream == "stderr"
                else f"after {len(self.stdout)} bytes of stdout"
            )
            self.fail(
                AgentError(
                    f"what the agent wrote on {stream} could not be read "
                    f"({type(exc).__name__}: {exc}; {where})"
                )
            )
        self.watch.unread(self.process.stderr if stream == "stderr" else self.process.stdout)

    # --- the callbacks ------------------------------------------------------------------------

    def sent(self) -> None:
        self.process.close_stdin()

    def _on_exit(self) -> None:
        self.exited = True
        self.process.popen.poll()  # reap it: its exit code
        self.wake()

    def _on_stderr(self) -> None:
        try:
            chunk = os.read(self.process.stderr, READ_SIZE)
            if chunk:
                self.err.feed(chunk)
                return
            self.err.finish()
        except BlockingIOError:
            return
        except Exception as exc:
            self._unreadable("stderr", exc)
            return
        self.stderr_ended = True
        self.watch.unread(self.process.stderr)
        self.wake()

    def _on_stdout(self) -> None:
        fd = self.process.stdout
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            self._unreadable("stdout", exc)
            return
        if self.quiet is not None:
            self.quiet.cancel()
            self.quiet = None
        if not chunk:
            self.stdout_ended = True
            self.watch.unread(fd)
            self.wake()
            return
        out = self.stdout
        out += chunk
        limit = self.settings.max_output_bytes
        if len(out) > limit:
            self._unreadable("stdout", AgentError(f"agent flooded stdout: more than {limit} bytes"))
            return
        text = chunk.rstrip()
        if text:
            self.text_end = len(out) - len(chunk) + len(text)
            self.complete = b"\n" in chunk[len(text) :]
        elif b"\n" in chunk and self.text_end:
            self.complete = True
        if self.complete:
            # A whole line is there: if nothing more comes for a while, the agent runs on and
            # the line is the response, take it.
            self.quiet = self.watch.later(EXIT_DRAIN_SECONDS, self._on_quiet)

    def _on_quiet(self) -> None:
        self.quiet = None
        if self.taken or self.stdout_ended or self.process.popen.poll() is not None:
            return
        try:
            taken = self._is_response()
        except Exception as exc:  # (decoding is bounded; a RecursionError is the agent's)
            self._unreadable("stdout", exc)
            return
        if taken:
            self.taken = True
            self.watch.unread(self.process.stdout)
            self.wake()

    # --- the ending ---------------------------------------------------------------------------

    def _drained(self) -> bool:
        """Whether both output streams are read to their end (or the response taken)."""
        return self.stderr_ended and (self.stdout_ended or self.taken)

    async def _finish(self) -> None:
        """Wait until the response is complete, stop the agent if it runs on, and let the
        callbacks take what is left in the pipes."""
        await self.until(lambda: self.stdout_ended or self.taken or self.exited)
        process, sink = self.process, self.sink
        if self.taken:
            also = await self._stop_agent()
            sink.warn(
                f"the agent kept running after its response (nothing more came on stdout for "
                f"{EXIT_DRAIN_SECONDS:g} s); ATP took the response and stopped the agent{also}"
            )
        elif (
            self.stdout_ended
            and not self.exited
            and not await self.until(lambda: self.exited, EXIT_DRAIN_SECONDS)
        ):
            also = await self._stop_agent()
            sink.warn(
                f"the agent closed its stdout but kept running for {EXIT_DRAIN_SECONDS:g} s; "
                f"ATP took what it wrote there and stopped the agent{also}"
            )
        if not self.stopped_by_atp:
            self.exited_alone = True
        if await self.until(self._drained, EXIT_DRAIN_SECONDS):
            return
        # What the agent left running holds its output open: stop it, stop reading.
        result = await process.terminate(self.settings.grace_seconds)
        stopped = result.stopped
        if stopped:
            await self.until(self._drained, EXIT_DRAIN_SECONDS)
        agent = "was stopped" if self.stopped_by_atp else "exited"
        if stopped and self._drained():
            sink.warn(
                f"the agent {agent}, but {processes(stopped)} it started kept its output open; "
                f"ATP stopped reading and stopped {'it' if stopped == 1 else 'them'}{trouble(result)}"
            )
        else:
            others = f" (it stopped {processes(stopped)} the agent left)" if stopped else ""
            sink.warn(
                f"the agent {agent}, but a process ATP cannot tell as the agent's kept its "
                f"output open; ATP stopped reading{others}{trouble(result)}"
            )
        self.troubled = self.troubled or bool(result.running or result.unfinished)

    async def _stop_agent(self) -> str:
        self.stopped_by_atp = True
        result = await self.process.terminate(self.settings.grace_seconds)
        self.troubled = bool(result.running or result.unfinished)
        also = f" and {processes(result.stopped)} it started" if result.stopped else ""
        return also + trouble(result)

    # --- stdout: the response ----------------------------------------------------------------

    def _last_line(self) -> tuple[int, int]:
        """Where the last non-blank stdout line starts and ends."""
        out, end = self.stdout, self.text_end
        return max(out.rfind(b"\n", 0, end), out.rfind(b"\r", 0, end)) + 1, end

    def _decode(self, start: int, end: int) -> ATPResponse | ProtocolError:
        """The stdout from ``start`` to ``end`` (its last line, or the multi-line JSON that line
        ends) decoded, once."""
        decoded = self.decoded.get((start, end))
        if decoded is not None:
            return decoded
        result: ATPResponse | ProtocolError
        try:
            result = decode_response(bytes(self.stdout[start:end]))
        except DECODE_ERRORS as exc:
            result = exc if isinstance(exc, ProtocolError) else ProtocolError(f"ATP response: {exc}")
        if len(self.decoded) >= 2:
            del self.decoded[next(iter(self.decoded))]
        self.decoded[start, end] = result
        return result

    def _block(self) -> tuple[int, int] | None:
        """Where a response written as multi-line JSON (pretty-printed) would be: from the last
        line that begins with ``{`` before the last line, to the end of the text; ``None``
        when there is no such line."""
        out = self.stdout
        last, end = self._last_line()
        if not last:
            return None
        at = out.rfind(b"\n{", 0, last)
        if at >= 0:
            return at + 1, end
        return (0, end) if out[:1] == b"{" else None

    def _closes_block(self, start: int, end: int) -> bool:
        """Whether the stdout line from ``start`` to ``end`` is the ``}`` ending multi-line JSON."""
        return bytes(self.stdout[start:end]).strip() == b"}"

    def _is_response(self) -> bool:
        start, end = self._last_line()
        result = self._decode(start, end)
        if not isinstance(result, ATPResponse) and self._closes_block(start, end):
            block = self._block()
            if block is not None:
                result = self._decode(*block)
        return isinstance(result, ATPResponse) and result.task_id == self.task_id

    def _earlier_response(self, before: int) -> int | None:
        """The stdout line number of a response to this request among the last
        :data:`EARLIER_LINES` lines before byte ``before`` (lines printed after the response),
        or ``None``."""
        out, end = self.stdout, before
        for _ in range(EARLIER_LINES):
            if end <= 0:
                return None
            start = max(out.rfind(b"\n", 0, end - 1), out.rfind(b"\r", 0, end - 1)) + 1
            line = bytes(out[start:end]).strip()
            if line.startswith(b"{"):
                try:
                    response = decode_response(line)
                except DECODE_ERRORS:
                    response = None
                if response is not None and response.task_id == self.task_id:
                    return out.count(b"\n", 0, start) + 1
            end = start
        return None

    async def _response(self) -> ATPResponse:
        sink, out = self.sink, self.stdout
        code = self.process.popen.returncode
        if self.stopped_by_atp:
            how = "kept running after its stdout ended" if self.stdout_ended else "kept running"
        else:
            how = exit_words(code) if code is not None else "ended"
        tail = self.err.log_tail()
        if not self.text_end:
            if tail is not None:  # (the runner masks it, then cuts it)
                raise NoResponse(
                    f"agent {how} without writing a response on stdout; its stderr ends with", evidence=tail
                )
            raise NoResponse(f"agent {how} without writing a response on stdout")
        start, end = self._last_line()
        result = self._decode(start, end)
        in_block: int | None = None  # where the multi-line JSON the last line ends begins
        if isinstance(result, ProtocolError):
            # A response printed as multi-line JSON (pretty-printed): read from where it begins.
            block = self._block()
            if block is not None:
                whole = self._decode(*block)
                if isinstance(whole, ATPResponse) or self._closes_block(start, end):
                    start, result = block[0], whole
                    in_block = start
        if start:
            noise = [line for line in bytes(out[:start]).splitlines() if line.strip()]
            for line in noise:
                sink.log("[stdout] " + line.decode("utf-8", "replace"))
            if noise:
                sink.warn(
                    f"{len(noise)} stdout lines before the response were kept as the agent's log; "
                    f"stdout is for the response: write logs to stderr"
                )
        if isinstance(result, ProtocolError):
            if tail is not None:  # a preview, masked before it is cut
                how += f" (its stderr ends with '{shown(tail, sink.masker)}')"
            number = out.count(b"\n", 0, start) + 1
            earlier = self._earlier_response(start) if in_block is None else None
            if earlier is not None:
                raise NoResponse(
                    f"agent {how}; its response is on stdout line {earlier}, but more came after "
                    f"it: ATP reads the response from the last stdout line, so write logs to "
                    f"stderr (stdout line {number}, byte offset {start}, is not an ATP response: {result})",
                    evidence=bytes(out[start:end]),
                )
            what = (
                "its last stdout line is not an ATP response"
                if in_block is None
                else "its stdout, read as one multi-line JSON message, is not an ATP response"
            )
            raise NoResponse(
                f"agent {how}; {what} ({result}) (stdout line {number}, byte offset {start})",
                evidence=bytes(out[start:end]),
            )
        if end - start <= DUPLICATE_CHECK_BYTES:
            line = bytes(out[start:end])
            if len(line) > DUPLICATE_THREAD_BYTES:  # parsed off the event loop
                keys = await anyio.to_thread.run_sync(duplicate_keys, line, abandon_on_cancel=True)
            else:
                keys = duplicate_keys(line)
            if keys:
                sink.warn(
                    f"the response has duplicate keys ({', '.join(keys)}); ATP used the last value of each"
                )
        if code and not self.stopped_by_atp:
            sink.warn(f"agent {exit_words(code)} after writing its response")
        return result


def cannot_start(argv: list[str], cwd: Path, env: Mapping[str, str]) -> str | None:
    """Why ``argv`` cannot be started in ``cwd`` with ``env`` (what ``exec`` would refuse),
    or ``None`` when it can. A program without a ``/`` is looked for on the ``PATH`` of
    ``env`` (relative entries relative to ``cwd``, as the started process sees them)."""
    try:
        if not cwd.is_dir():
            return f"its working folder {cwd} {'is not a folder' if cwd.exists() else 'does not exist'}"
        if not os.access(cwd, os.X_OK):
            return f"its working folder {cwd} cannot be entered (permission denied)"
        program = argv[0]
        if os.sep in program:
            return _not_runnable(Path(program))
        path = os.get_exec_path(dict(env))
        not_executable: Path | None = None
        for folder in path:
            candidate = cwd / folder / program
            if candidate.is_file():
                if os.access(candidate, os.X_OK):
                    return _not_runnable(candidate)
                not_executable = not_executable or candidate
        if not_executable is not None:
            return f"{not_executable} is not executable"
        hint = ""
        if (cwd / program).exists():
            hint = f"; the working folder {cwd} has {program}: write ./{program} to run it"
        return f"{program!r} is not found on PATH ({shorten(os.pathsep.join(path), 300)}){hint}"
    except OSError as exc:  # (a file where a folder should be, a loop of links: exec fails too)
        where = exc.filename if exc.filename is not None else argv[0]
        return f"{where}: {exc.strerror or exc}"


def _not_runnable(program: Path) -> str | None:
    """Why the file ``program`` cannot be executed, or ``None``. A script whose first line
    names an interpreter (``#!/usr/bin/python3``) that does not exist cannot be either."""
    try:
        info = program.stat()
    except FileNotFoundError:
        return f"{program} does not exist"
    if stat.S_ISDIR(info.st_mode):
        return f"{program} is a folder, not a program"
    if not stat.S_ISREG(info.st_mode):
        return None  # (a device or a FIFO: exec says what it says)
    if not os.access(program, os.X_OK):
        return f"{program} is not executable (chmod +x it, or put its interpreter first in 'command')"
    try:
        with open(program, "rb") as handle:
            head = handle.read(256)
    except OSError:
        return None
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].split()
        interpreter = os.fsdecode(words[0]) if words else ""
        if interpreter.startswith("/") and not (
            os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)
        ):
            return f"{program} names the interpreter {interpreter} on its first line, which does not exist"
    return None
