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
        env: {LOG_LEVEL: debug}           # added to ATP's environment (inherit_env: false: only these)
        timeout: 120                      # seconds; the test's timeout_seconds applies too

:meth:`CliAdapter.start` checks once, before any run, that the command can be started at all
(its working folder exists, its program is found and executable): if not, the suite does not
start. An agent that ends without a response has the last lines of its stderr in the reason.

The response is complete when stdout ends, or when its last line is a valid response for the
request and nothing more comes on stdout for ``EXIT_DRAIN_SECONDS`` while the agent runs on:
ATP then takes it and stops the agent (with a warning). The agent runs in its own session;
when a run ends (the agent exited, the time limit, Ctrl-C, a flood) the agent and every process
it started are sent SIGTERM, then SIGKILL after ``grace_seconds`` (see
:mod:`atp.adapters.process`).
"""

import math
import os
import shlex
import signal
import stat
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.abc
import msgspec

from atp.adapters.process import REAP_SECONDS, AgentProcess, Stopped
from atp.adapters.stdio import DUPLICATE_CHECK_BYTES, DUPLICATE_THREAD_BYTES, duplicate_keys
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError, AtpError, ProtocolError
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    decode_event,
    decode_event_lines,
    decode_response,
    encode,
)
from atp.core.text import PREVIEW_CHARS, piece, printable, shorten
from atp.core.trace import EventSink

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup

MiB = 1024 * 1024
PIPE_SIZE = MiB  # a larger stderr pipe means fewer wake-ups for a chatty agent
EXIT_DRAIN_SECONDS = 1.0
"""How long ATP waits for an agent to exit after its stdout ended, for its output to end
after it exited, and how long stdout must stay quiet after a response while the agent runs on."""
MAX_GRACE_SECONDS = 600.0
MAX_BYTES = 1024 * MiB
_EVENT_KEY = b'"event_type"'
_DECODE_ERRORS = (ProtocolError, ValueError, RecursionError)
"""What decoding an agent's bytes may raise (UnicodeDecodeError is a ValueError)."""
STDERR_TAIL_LINES = 5
"""When an agent ends without a response, the reason quotes at most this many of the last
lines of its stderr log (as many as fit in a preview, the last one always)."""


def command_argv(command: str | list[str], args: list[str]) -> list[str]:
    """The argv of ``command`` (a list, or a string split like a shell would) and ``args``."""
    return [*(shlex.split(command) if isinstance(command, str) else command), *args]


class CliSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: str | list[str]
    args: list[str] = msgspec.field(default_factory=list)
    """Arguments after ``command`` (``command: python3`` with ``args: [agent.py]``)."""
    cwd: str | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    inherit_env: bool = True
    grace_seconds: Annotated[float, msgspec.Meta(ge=0, le=MAX_GRACE_SECONDS)] = 3.0
    max_output_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_BYTES)] = 64 * MiB
    max_line_bytes: Annotated[int, msgspec.Meta(ge=1024, le=MAX_BYTES)] = 4 * MiB

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
        if not (isinstance(grace, (int, float)) and math.isfinite(grace) and 0 <= grace <= MAX_GRACE_SECONDS):
            raise ValueError(f"'grace_seconds' must be a number of seconds from 0 to {MAX_GRACE_SECONDS:g}")
        for name in ("max_output_bytes", "max_line_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= MAX_BYTES:
                raise ValueError(f"{name!r} must be a whole number of bytes from 1024 to {MAX_BYTES}")


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
        program = argv[0]
        if os.sep in program and not os.path.isabs(program):
            argv[0] = str(self.cwd / program)
        self.argv = argv
        environment = dict(os.environ) if settings.inherit_env else {}
        environment.update(settings.env)
        self.env = environment
        self._aborted = False

    async def start(self) -> None:
        """Check once, before any run, that the command can be started at all: its working
        folder exists, its program is found and is executable. Raises AdapterError (the suite
        does not start) saying why."""
        problem = await anyio.to_thread.run_sync(cannot_start, self.argv, self.cwd, self.env)
        if problem is not None:
            raise AdapterError(f"agent {self.name!r}: cannot start {self.command_line!r}: {problem}")

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """The agent's working folder: its relative artifact paths are relative to it."""
        return self.cwd

    def abort(self) -> None:
        """SIGKILL every agent this adapter started, and everything they started, at once."""
        self._aborted = True
        AgentProcess.abort_all(owner=self)

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no agent is started")
        try:
            process = AgentProcess.start(self.argv, cwd=self.cwd, env=self.env, owner=self)
        except OSError as exc:
            raise AdapterError(
                f"agent {self.name!r}: cannot start {shlex.join(self.argv)!r} in {self.cwd}: "
                f"{exc.strerror or exc}"
            ) from None
        exchange = _Exchange(self, process, request.task_id, sink)
        try:
            return await exchange.run(encode(request) + b"\n")
        finally:
            stopped = await process.stop(self.settings.grace_seconds)
            count = stopped.stopped + stopped.running
            if exchange.exited_alone and (count or stopped.unfinished):
                sink.warn(
                    f"the agent left {_processes(count) if count else 'processes'} running after it "
                    f"exited; {_outcome(stopped, count)}{_trouble(stopped)}"
                )
            elif (stopped.running or stopped.unfinished) and not exchange.troubled:
                # (the run was stopped: its time limit, Ctrl-C; the agent is, not all it started)
                sink.warn(f"stopping the agent: {_trouble(stopped)[2:]}")


class _Exchange:
    """One run of a cli agent: the request in, events and log from stderr, the response from
    stdout, and the decision when the agent is done."""

    def __init__(self, adapter: CliAdapter, process: AgentProcess, task_id: str, sink: EventSink) -> None:
        self.settings = adapter.settings
        self.process = process
        self.task_id = task_id
        self.sink = sink
        self.failure: AgentError | None = None
        # stdout: the bytes, where its last non-blank text ends, whether a newline follows it
        self.stdout = bytearray()
        self.text_end = 0
        self.complete = False
        self.decoded: dict[tuple[int, int], ATPResponse | ProtocolError] = {}
        """The last stdout line and the multi-line JSON it may end, decoded (the latest two)."""
        self.taken = False
        self.stdout_ended = False
        # stderr: where the next line starts; the last lines of the agent's log
        self.err_line = 1
        self.err_offset = 0
        self.err_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        # the ending
        self.progress = anyio.Event()  # stdout is done, or the agent exited
        self.exited = anyio.Event()
        self.drained = anyio.Event()  # both readers are done
        self.open_readers = 2
        self.stopped_by_atp = False
        self.exited_alone = False
        self.troubled = False  # a warning said what went wrong while stopping the agent's processes

    async def run(self, request: bytes) -> ATPResponse:
        process = self.process
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(process.write_stdin, request)
                tg.start_soon(self._reader(self._read_events, "stderr", tg))
                tg.start_soon(self._reader(self._read_stdout, "stdout", tg))
                tg.start_soon(self._watch_exit)
                await self._finish()
                tg.cancel_scope.cancel()
        except ExceptionGroup as group:
            raise _unwrap(group) from None
        if self.failure is not None:
            raise self.failure
        return await self._response()

    def _reader(
        self, read: Callable[[], Awaitable[None]], stream: str, tg: anyio.abc.TaskGroup
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        async def run() -> None:
            try:
                await read()
            except AgentError as exc:
                self._fail(exc, tg)
                return
            except ProtocolError as exc:
                self._fail(AgentError(f"the agent broke the protocol on {stream}: {exc}"), tg)
                return
            except AtpError:
                raise  # ATP's own trouble (its run directory, say), not the agent's
            except Exception as exc:
                where = (
                    f"stderr line {self.err_line}, byte offset {self.err_offset}"
                    if stream == "stderr"
                    else f"after {len(self.stdout)} bytes of stdout"
                )
                self._fail(
                    AgentError(
                        f"what the agent wrote on {stream} could not be read "
                        f"({type(exc).__name__}: {exc}; {where})"
                    ),
                    tg,
                )
                return
            self.open_readers -= 1
            if not self.open_readers:
                self.drained.set()

        return run

    def _fail(self, exc: AgentError, tg: anyio.abc.TaskGroup) -> None:
        if self.failure is None:
            self.failure = exc
        tg.cancel_scope.cancel()

    async def _watch_exit(self) -> None:
        await self.process.wait()
        self.exited.set()
        self.progress.set()

    async def _finish(self) -> None:
        """Wait until the response is complete, stop the agent if it runs on, and let the
        readers take what is left in the pipes."""
        await self.progress.wait()
        process, sink = self.process, self.sink
        if self.taken:
            also = await self._stop_agent()
            sink.warn(
                f"the agent kept running after its response (nothing more came on stdout for "
                f"{EXIT_DRAIN_SECONDS:g} s); ATP took the response and stopped the agent{also}"
            )
        elif self.stdout_ended and not self.exited.is_set():
            with anyio.move_on_after(EXIT_DRAIN_SECONDS):
                await self.exited.wait()
            if not self.exited.is_set():
                also = await self._stop_agent()
                sink.warn(
                    f"the agent closed its stdout but kept running for {EXIT_DRAIN_SECONDS:g} s; "
                    f"ATP took what it wrote there and stopped the agent{also}"
                )
        if not self.stopped_by_atp:
            self.exited_alone = True
        if self.drained.is_set():
            return
        with anyio.move_on_after(EXIT_DRAIN_SECONDS):
            await self.drained.wait()
            return
        # What the agent left running holds its output open: stop it, stop reading.
        result = await process.terminate(self.settings.grace_seconds)
        stopped = result.stopped
        if stopped:
            with anyio.move_on_after(EXIT_DRAIN_SECONDS):
                await self.drained.wait()
        agent = "was stopped" if self.stopped_by_atp else "exited"
        if stopped and self.drained.is_set():
            sink.warn(
                f"the agent {agent}, but {_processes(stopped)} it started kept its output open; "
                f"ATP stopped reading and stopped {'it' if stopped == 1 else 'them'}{_trouble(result)}"
            )
        else:
            others = f" (it stopped {_processes(stopped)} the agent left)" if stopped else ""
            sink.warn(
                f"the agent {agent}, but a process ATP cannot tell as the agent's kept its "
                f"output open; ATP stopped reading{others}{_trouble(result)}"
            )
        self.troubled = self.troubled or bool(result.running or result.unfinished)

    async def _stop_agent(self) -> str:
        self.stopped_by_atp = True
        result = await self.process.terminate(self.settings.grace_seconds)
        self.troubled = bool(result.running or result.unfinished)
        also = f" and {_processes(result.stopped)} it started" if result.stopped else ""
        return also + _trouble(result)

    # --- stdout: the response ----------------------------------------------------------------

    async def _read_stdout(self) -> None:
        process = self.process
        fd = process.stdout
        limit = self.settings.max_output_bytes
        out = self.stdout
        while True:
            if self.complete and process.popen.returncode is None:
                # A whole line is there and the agent runs: if nothing more comes for a
                # while and the line is the response, take it.
                chunk: bytes | None = None
                with anyio.move_on_after(EXIT_DRAIN_SECONDS):
                    chunk = await process.read(fd)
                if chunk is None:
                    if process.popen.poll() is None and self._is_response():
                        self.taken = True
                        break
                    chunk = await process.read(fd)
            else:
                chunk = await process.read(fd)
            if not chunk:
                self.stdout_ended = True
                break
            out += chunk
            if len(out) > limit:
                raise AgentError(f"agent flooded stdout: more than {limit} bytes")
            text = chunk.rstrip()
            if text:
                self.text_end = len(out) - len(chunk) + len(text)
                self.complete = b"\n" in chunk[len(text) :]
            elif b"\n" in chunk and self.text_end:
                self.complete = True
        self.progress.set()

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
        except _DECODE_ERRORS as exc:
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

    def _stderr_tail(self) -> str | None:
        """The last lines of the agent's stderr log, as many of the last
        :data:`STDERR_TAIL_LINES` as fit in a preview (the last one always); ``None`` when it
        wrote none."""
        lines: list[str] = []
        size = 0
        for line in reversed(self.err_tail):
            size += len(line) + 1
            if lines and size > PREVIEW_CHARS:
                break
            lines.append(line)
        return "\n".join(reversed(lines)) if lines else None

    async def _response(self) -> ATPResponse:
        sink, out = self.sink, self.stdout
        code = self.process.popen.returncode
        if self.stopped_by_atp:
            how = "kept running after its stdout ended" if self.stdout_ended else "kept running"
        else:
            how = _exit(code) if code is not None else "ended"
        tail = self._stderr_tail()
        if not self.text_end:
            if tail is not None:  # (the runner masks it, then cuts it)
                raise AgentError(
                    f"agent {how} without writing a response on stdout; its stderr ends with", evidence=tail
                )
            raise AgentError(f"agent {how} without writing a response on stdout")
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
                sink.warn(f"{len(noise)} stdout lines before the response were kept as the agent's log")
        if isinstance(result, ProtocolError):
            if tail is not None:  # a preview, masked before it is cut
                how += f" (its stderr ends with '{printable(shorten(tail))}')"
            number = out.count(b"\n", 0, start) + 1
            what = (
                "its last stdout line is not an ATP response"
                if in_block is None
                else "its stdout, read as one multi-line JSON message, is not an ATP response"
            )
            raise AgentError(
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
            sink.warn(f"agent {_exit(code)} after writing its response")
        return result

    # --- stderr: events and log ----------------------------------------------------------------

    async def _read_events(self) -> None:
        process, sink = self.process, self.sink
        max_line = self.settings.max_line_bytes
        process.widen_stderr(PIPE_SIZE)
        pending = b""
        cut = False  # the line being read was cut: the rest of it, up to its newline, is dropped
        while chunk := await process.read(process.stderr):
            if cut:
                end = chunk.find(b"\n")
                if end < 0:
                    self.err_offset += len(chunk)
                    continue
                cut = False
                self.err_line += 1
                self.err_offset += end + 1
                chunk = chunk[end + 1 :]
                if not chunk:
                    continue
            if pending:
                chunk = pending + chunk
            end = chunk.rfind(b"\n")
            if end < 0:
                pending = chunk
            else:
                pending = chunk[end + 1 :]
                self._lines(chunk[:end])
            if len(pending) > max_line:
                sink.warn(f"a stderr line longer than {max_line} bytes was cut")
                self._line(pending[:max_line], cut=True)
                self.err_offset += len(pending)
                pending = b""
                cut = True
        if pending:
            self._line(pending)

    def _lines(self, block: bytes) -> None:
        """Complete lines: all events in one decode when they are (the usual case), else each
        line on its own."""
        if block[:1] == b"{":
            try:
                events = decode_event_lines(block)
            except _DECODE_ERRORS:
                pass
            else:
                self.sink.events(events, block)
                self.err_line += block.count(b"\n") + 1
                self.err_offset += len(block) + 1
                return
        for line in block.split(b"\n"):
            self._line(line)
            self.err_line += 1
            self.err_offset += len(line) + 1

    def _line(self, line: bytes, *, cut: bool = False) -> None:
        """One stderr line at ``err_line``/``err_offset``: an event, or the agent's log. Of a
        ``cut`` line (the part kept of one over ``max_line_bytes``) no end that could begin a
        secret is logged."""
        sink = self.sink
        if line[:1] == b"{":
            try:
                event = decode_event(line)
            except _DECODE_ERRORS as exc:
                if _EVENT_KEY in line:
                    sink.warn(
                        f"stderr line {self.err_line} (byte offset {self.err_offset}) looks like "
                        f"an ATP event but is not one; it was skipped: {exc}"
                    )
            else:
                sink.event(event, line)
                return
        text = line.decode("utf-8", "replace")
        text = piece(text) if cut else text.rstrip("\r")
        sink.log(text)
        if text.strip():
            self.err_tail.append(text)


def _unwrap(group: BaseException) -> BaseException:
    """The exception to raise for an exception group of the task group: the agent's error
    when there is one, else the first exception, groups opened."""
    found: list[BaseException] = []
    stack = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, ExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        else:
            found.append(exc)
    for exc in found:
        if isinstance(exc, AgentError):
            return exc
    for exc in found:
        if isinstance(exc, AtpError):
            return exc
    return found[0] if found else group


def _processes(count: int) -> str:
    return f"{count} process" if count == 1 else f"{count} processes"


def _outcome(result: Stopped, count: int) -> str:
    """What became of the ``count`` processes an agent left running."""
    if not result.running:
        return "ATP stopped it" if count == 1 else "ATP stopped them"
    if not result.stopped:
        return "ATP could not stop it" if count == 1 else "ATP could not stop them"
    return f"ATP stopped {result.stopped} of them"


def _trouble(result: Stopped) -> str:
    """What went wrong while the agent's processes were stopped, as clauses to add to a
    warning; ``""`` when nothing did."""
    parts = []
    if result.late:
        parts.append(f"{_processes(result.late)} started while ATP was stopping the others")
    if result.running:
        parts.append(f"{_processes(result.running)} still running {REAP_SECONDS:g} s after SIGKILL")
    if result.unfinished:
        parts.append(
            f"new processes kept appearing for {REAP_SECONDS:g} s after the grace period; some may still run"
        )
    return "".join(f"; {part}" for part in parts)


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


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
