"""The ``cli`` adapter: any command, spoken to over the stdin/stdout transport.

The request goes to the agent's stdin as one JSON line (then stdin is closed); the response is
the last line the agent writes on stdout; events are JSON lines on stderr, and every other
stderr line is kept as the agent's log. Settings::

    agents:
      - name: my-agent
        type: cli
        command: [python3, agent.py]      # a list, or a string split like a shell would
        cwd: .                            # default: the folder of the file defining the agent
        env: {LOG_LEVEL: debug}           # added to ATP's environment (inherit_env: false: only these)
        timeout: 120                      # seconds; the test's timeout_seconds applies too

The agent runs in its own process group; when a run ends (time limit, Ctrl-C, flood) the
whole group is sent SIGTERM, then SIGKILL after ``grace_seconds``.
"""

import os
import shlex
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import anyio
import msgspec

from atp.adapters.process import AgentProcess
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError, ProtocolError
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    decode_event,
    decode_event_lines,
    decode_response,
    encode,
)
from atp.core.trace import EventSink

MiB = 1024 * 1024
PIPE_SIZE = MiB  # a larger stderr pipe means fewer wake-ups for a chatty agent
EXIT_DRAIN_SECONDS = 1.0
_EVENT_KEY = b'"event_type"'


class CliSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: str | list[str]
    cwd: str | None = None
    env: dict[str, str] = msgspec.field(default_factory=dict)
    inherit_env: bool = True
    grace_seconds: Annotated[float, msgspec.Meta(ge=0)] = 3.0
    max_output_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 64 * MiB
    max_line_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 4 * MiB

    def __post_init__(self) -> None:
        command = self.command
        if not (shlex.split(command) if isinstance(command, str) else command):
            raise ValueError("'command' is empty")


class CliAdapter(Adapter):
    type = "cli"
    summary = "a command speaking ATP over stdin (request), stdout (response) and stderr (events)"
    Settings = CliSettings
    settings: CliSettings

    def __init__(self, settings: CliSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        command = settings.command
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        self.cwd = (base_dir / settings.cwd).resolve() if settings.cwd else base_dir
        program = argv[0]
        if os.sep in program and not os.path.isabs(program):
            argv[0] = str(self.cwd / program)
        self.argv = argv
        environment = dict(os.environ) if settings.inherit_env else {}
        environment.update(settings.env)
        self.env = environment

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        try:
            process = AgentProcess.start(self.argv, cwd=self.cwd, env=self.env)
        except OSError as exc:
            raise AdapterError(
                f"agent {self.name!r}: cannot start {shlex.join(self.argv)!r} in {self.cwd}: "
                f"{exc.strerror or exc}"
            ) from None
        failure: list[AgentError] = []
        stdout = bytearray()
        readers = [2]
        drained = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:

                def reader(job: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
                    async def run() -> None:
                        try:
                            await job()
                        except AgentError as exc:
                            failure.append(exc)
                            tg.cancel_scope.cancel()
                        readers[0] -= 1
                        if not readers[0]:
                            drained.set()

                    return run

                async def watch_exit() -> None:
                    """Something the agent started may hold its output open after it exits:
                    stop reading a moment after the agent is gone."""
                    await process.wait()
                    with anyio.move_on_after(EXIT_DRAIN_SECONDS):
                        await drained.wait()
                        return
                    sink.warn(
                        "the agent exited, but a process it started kept its output open; "
                        "ATP stopped reading and stopped that process"
                    )
                    tg.cancel_scope.cancel()

                tg.start_soon(process.write_stdin, encode(request) + b"\n")
                tg.start_soon(reader(lambda: self._read_events(process, sink)))
                tg.start_soon(reader(lambda: self._read_stdout(process, stdout)))
                tg.start_soon(watch_exit)
            if failure:
                raise failure[0]
            code = await process.wait()
        finally:
            await process.stop(self.settings.grace_seconds)
        return self._response(bytes(stdout), code, sink)

    # --- the two output streams ------------------------------------------------------------

    async def _read_stdout(self, process: AgentProcess, into: bytearray) -> None:
        limit = self.settings.max_output_bytes
        while chunk := await process.read(process.stdout):
            into += chunk
            if len(into) > limit:
                raise AgentError(f"agent flooded stdout: more than {limit} bytes")

    async def _read_events(self, process: AgentProcess, sink: EventSink) -> None:
        max_line = self.settings.max_line_bytes
        process.widen_stderr(PIPE_SIZE)
        pending = b""
        while chunk := await process.read(process.stderr):
            if pending:
                chunk = pending + chunk
            end = chunk.rfind(b"\n")
            if end < 0:
                pending = chunk
            else:
                pending = chunk[end + 1 :]
                self._lines(chunk[:end], sink)
            if len(pending) > max_line:
                sink.warn(f"a stderr line longer than {max_line} bytes was cut")
                self._line(pending[:max_line], sink)
                pending = b""
        if pending:
            self._line(pending, sink)

    def _lines(self, block: bytes, sink: EventSink) -> None:
        """Complete lines: all events in one decode when they are (the usual case), else each
        line on its own."""
        if block[:1] == b"{":
            try:
                events = decode_event_lines(block)
            except ProtocolError:
                pass
            else:
                sink.events(events, block)
                return
        for line in block.split(b"\n"):
            self._line(line, sink)

    @staticmethod
    def _line(line: bytes, sink: EventSink) -> None:
        if line[:1] == b"{":
            try:
                event = decode_event(line)
            except ProtocolError as exc:
                if _EVENT_KEY in line:
                    sink.warn(f"a stderr line looks like an ATP event but is not one: {exc}")
            else:
                sink.event(event, line)
                return
        sink.log(line.decode("utf-8", "replace").rstrip("\r"))

    def _response(self, stdout: bytes, code: int, sink: EventSink) -> ATPResponse:
        lines = [line for line in stdout.splitlines() if line.strip()]
        if not lines:
            raise AgentError(f"agent {_exit(code)} without writing a response on stdout")
        for noise in lines[:-1]:
            sink.log("[stdout] " + noise.decode("utf-8", "replace"))
        if len(lines) > 1:
            sink.warn(f"{len(lines) - 1} stdout lines before the response were kept as the agent's log")
        try:
            response = decode_response(lines[-1])
        except ProtocolError as exc:
            preview = lines[-1][:200].decode("utf-8", "replace")
            raise AgentError(
                f"agent {_exit(code)}; its last stdout line is not an ATP response ({exc}): {preview!r}"
            ) from None
        if code != 0:
            sink.warn(f"agent {_exit(code)} after writing its response")
        return response


def _exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"

