"""The ``term-sdk`` adapter: agents built on the Term Challenge SDK 2.0, driven over their own HTTP
protocol, unchanged. Settings::

    agents:
      - name: my-agent
        type: term-sdk
        command: [python3, agent.py]   # a list, or a string split like a shell would
        port: 8765                     # optional: a free loopback port per run by default
        host: 127.0.0.1                # where ATP reaches the agent
        env: {LLM_PROXY_URL: "..."}    # added to ATP's environment
        cwd: ./work                    # optional: a shared working folder (see below)
        health_timeout: 15             # seconds for GET /health to say {"status": "ok"}
        health_interval: 0.1           # seconds between two GET /health
        poll_interval: 0.5             # seconds between two GET /status
        request_timeout: 10            # seconds for one HTTP call
        max_poll_errors: 5             # failed GET /status in a row that fail the run
        max_steps: 200                 # sent when the test's constraints give none
        stop_grace: 2                  # seconds between SIGTERM and SIGKILL

Each run starts the agent as a process of its own (:class:`~atp.adapters.server.Server`, on the
``cli`` adapter's process machinery: its own session and process group, the process ledger,
SIGTERM then SIGKILL to everything it started), with ``AGENT_PORT`` in its environment; its
stdout and stderr are the run's log. ATP then waits for ``GET /health`` to answer ``200 {"status": "ok"}``
(refused connections and ``503`` are waited through; an agent that exits is reported at once),
sends ``POST /start`` with ``instruction`` (the task's description, and its ``input_data`` as
JSON after it), ``max_steps`` and ``timeout_secs``, and polls ``GET /status``: every new entry
of the agent's ``history`` is a ``tool_call`` event of the tool ``shell``; ``completed`` and
``failed`` end the run. A ``POST /start`` that finds no connection, or that the agent answers
with a 429, 502, 503 or 504, is an infrastructure fault (a retryable AdapterError); a failed
``GET /status``, whatever the reason, is one of the ``max_poll_errors`` polls in a row a run
may have. At the end of every run, however it ends (the time limit cancels it),
the agent is stopped.

Every HTTP call is bounded as a whole by ``request_timeout`` (httpx's own timeouts are per
read: an agent that sends its answer a byte at a time would hold a call for ever): a poll that
gets no whole answer in time is a failed poll. A fixed ``port`` that another program holds
already is refused before the agent starts (ATP would drive that program instead); after the
agent is stopped, a port that still answers is a warning (something of the agent runs on).

The agent works in the run's workspace when the test has one, else in ``cwd`` when it is given
(runs then take turns, as they do with a fixed ``port``; a run that has to wait for its turn says
so in a warning), else in a fresh temporary folder that is removed once the files the agent
wrote there are read: those files are the response's artifacts
(:func:`atp.adapters.workspace.with_workspace_files`), with their text inlined when the folder
goes away. The folder is removed without recursion and without following links
(:func:`atp.adapters.workspace.remove_tree`); what cannot be removed is a warning, never the
run's error. See docs/agents-term-sdk.md.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

import anyio
import msgspec

from atp.adapters.network import (
    ERROR_BODY_BYTES,
    error_fields,
    http_client,
    http_failure,
    is_transient,
    read_body,
    refusal,
    request_errors,
    transient_fault,
    unreachable,
)
from atp.adapters.persistent import QUIET
from atp.adapters.process import encoded, lacks_resources
from atp.adapters.server import (
    Grace,
    HealthProbe,
    NotHealthy,
    Port,
    Seconds,
    Server,
    abort_all,
    answering,
    check_command,
    check_cwd,
    check_env,
    check_grace,
    check_seconds,
    check_startable,
    check_whole,
    command_line,
    free_port,
    port_in_use,
    resolve_argv,
    url_host,
    with_evidence,
)
from atp.adapters.workspace import remove_tree, with_workspace_files
from atp.core.adapter import Adapter, Health
from atp.core.errors import AdapterError, AgentError
from atp.core.plugins import require
from atp.core.protocol import (
    DEFAULT_TIMEOUT_SECONDS,
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    FileArtifact,
    Metrics,
    ProgressPayload,
    StateChangePayload,
    ToolCallPayload,
    make_event,
)
from atp.core.text import printable, shorten
from atp.core.trace import EventSink

_INSTALL = "atp-adapters"
_FEATURE = "the term-sdk adapter"
TOOL = "shell"
"""The tool every command of the agent's history is a call of."""
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The most ATP reads of one answer of the agent (a ``/status`` with its 30 history entries
is a few kilobytes)."""
INLINE_BYTES = 1024 * 1024
"""A text file of the temporary folder up to this size has its content kept in its artifact."""
INLINE_BUDGET = 8 * 1024 * 1024
"""The most content kept that way in one run."""
HISTORY_ENTRIES = 30
"""How many entries the SDK's history holds (the last commands); more is a warning."""
AGENT_PORT = "AGENT_PORT"
_T = TypeVar("_T")
_D = TypeVar("_D")


# --- settings ------------------------------------------------------------------------------


class TermSdkSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    command: str | list[str]
    """The agent's command; a relative program or argument naming a file next to the file
    defining the agent is made absolute (the agent runs in a folder of its own)."""
    port: Port | None = None
    """The port the agent listens on (``AGENT_PORT``); a free loopback port per run when not
    given. A fixed port makes runs take turns."""
    host: Annotated[str, msgspec.Meta(min_length=1)] = "127.0.0.1"
    """Where ATP reaches the agent."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """Added to ATP's environment for the agent."""
    cwd: str | None = None
    """A working folder shared by every run without a workspace (runs then take turns);
    relative to the file defining the agent. Without it, each run gets a temporary folder."""
    health_timeout: Seconds = 15.0
    health_interval: Seconds = 0.1
    poll_interval: Seconds = 0.5
    request_timeout: Seconds = 10.0
    max_poll_errors: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 5
    max_steps: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 200
    """``max_steps`` sent to the agent when the test's constraints give none."""
    stop_grace: Grace = 2.0
    """Seconds between SIGTERM and SIGKILL when the agent is stopped."""

    def __post_init__(self) -> None:
        check_command(self.command)
        check_cwd(self.cwd)
        if self.port is not None:
            check_whole("port", self.port, 1, 65535)
        host = self.host
        if not host or any(c in host for c in "/\\@?#[] \t\r\n\0"):
            raise ValueError(
                f"'host' {host!r} is not a host name or an IP address (write IPv6 without brackets)"
            )
        check_env(self.env, AGENT_PORT)
        for name in ("health_timeout", "health_interval", "poll_interval", "request_timeout"):
            check_seconds(name, getattr(self, name))
        check_grace(self.stop_grace)
        check_whole("max_poll_errors", self.max_poll_errors, 1, 1000)
        check_whole("max_steps", self.max_steps, 1, 1_000_000)


# --- the agent's answers -------------------------------------------------------------------


class _Entry(msgspec.Struct):
    step: Annotated[int, msgspec.Meta(ge=0)]
    command: str
    output: str | None = None
    exit_code: int | None = None


class _Status(msgspec.Struct):
    status: Literal["idle", "running", "completed", "failed"]
    steps: Annotated[int, msgspec.Meta(ge=0)] | None = None
    elapsed_secs: float | None = None
    error: str | None = None
    done: bool | None = None
    history: list[_Entry] = msgspec.field(default_factory=list)


class _Started(msgspec.Struct):
    status: Literal["started"]


class _NoAnswer(Exception):
    """An HTTP call to the agent got no whole answer: ``words`` say why (no connection, none
    within ``request_timeout``, the connection cut). ``unconnected`` is the transport's error
    when no connection opened."""

    def __init__(self, words: str, unconnected: BaseException | None = None) -> None:
        super().__init__(words)
        self.words = words
        self.unconnected = unconnected


@functools.cache
def _decoder(kind: type[_D]) -> msgspec.json.Decoder[_D]:
    """A decoder of the agent's answers, made at the first run (not when ATP lists adapters)."""
    return msgspec.json.Decoder(kind)


_DECODE_ERRORS = (msgspec.MsgspecError, RecursionError, UnicodeDecodeError)


def _is_ok(body: bytes) -> bool:
    """Whether a ``/health`` answer's body is ``{"status": "ok"}`` (other members allowed)."""
    try:
        document = msgspec.json.decode(body)
    except _DECODE_ERRORS:
        return False
    return isinstance(document, dict) and document.get("status") == "ok"


def instruction(request: ATPRequest) -> str:
    """What ``POST /start`` says to do: the task's description, and its ``input_data``, when it
    has some, as indented JSON after a blank line and the line ``Input data (JSON):``."""
    task = request.task
    if not task.input_data:
        return task.description
    data = json.dumps(task.input_data, indent=2, ensure_ascii=False, default=str)
    return f"{task.description}\n\nInput data (JSON):\n{data}"


def _ranges(steps: list[tuple[int, int]]) -> str:
    shown = [f"{a}" if a == b else f"{a}-{b}" for a, b in steps[:10]]
    more = f" and {len(steps) - 10} more ranges" if len(steps) > 10 else ""
    return ", ".join(shown) + more


# --- the adapter ---------------------------------------------------------------------------


class TermSdkAdapter(Adapter):
    type = "term-sdk"
    summary = "a Term Challenge SDK 2.0 agent server: a process per run, POST /start, GET /status polled"
    Settings = TermSdkSettings
    settings: TermSdkSettings
    foreign_protocol = "the Term Challenge SDK 2.0 protocol"

    def __init__(self, settings: TermSdkSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.folder = (self.base_dir / settings.cwd).resolve() if settings.cwd else self.base_dir
        """Where relative paths of the command are looked for (the agent's folder)."""
        self.cwd = self.folder if settings.cwd else None
        """The shared working folder, when ``cwd`` is given."""
        self.command_line = command_line(settings.command)
        self.argv = resolve_argv(settings.command, self.folder)
        environment = dict(os.environ)
        environment.update(settings.env)
        self.env = environment
        self.encoded_env = encoded(environment)
        self._lock: anyio.Lock | None = None
        """Runs take turns when they share a port or a folder."""
        self._ports: set[int] = set()
        self._aborted = False

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Check once, before any run, that the command can be started at all; raises
        AdapterError (the suite does not start) saying why."""
        self._httpx = require("httpx", install=_INSTALL, feature=_FEATURE)
        await check_startable(self.argv, self.folder, self.env, agent=self.name, command=self.command_line)

    def abort(self) -> None:
        """SIGKILL every agent this adapter started, and everything they started, at once."""
        self._aborted = True
        abort_all(self)

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """The run's workspace, or the shared ``cwd``; ``None`` for a temporary folder (gone
        after the run: its text files' content is in their artifacts)."""
        workspace = _workspace(request)
        if workspace is not None:
            return workspace
        return self.cwd

    async def health(self) -> Health:
        """**Starts an agent process for the check** (the SDK's agents are servers ATP starts
        per run; nothing runs between runs to ask): in a temporary folder, or ``cwd``, as a run
        starts it; waits for ``GET /health`` to say ``{"status": "ok"}`` within
        ``health_timeout``; stops it. ``healthy``, or ``unhealthy`` with what it last answered;
        AdapterError when it cannot be started, exits, or its fixed ``port`` is taken."""
        if not hasattr(self, "_httpx"):
            await self.start()

        async def wait_for_the_started_agent(agent: _Agent) -> Health:
            started = time.perf_counter()
            try:
                await agent.wait_healthy()
            except AgentError as exc:
                if isinstance(exc, NotHealthy):
                    return Health(status="unhealthy", detail=with_evidence(exc))
                raise AdapterError(f"agent {self.name!r}: {with_evidence(exc)}") from None
            seconds = time.perf_counter() - started
            return Health(
                status="healthy",
                detail=f'GET /health said {{"status": "ok"}} {seconds:.2f} s after the start',
            )

        health: Health = await self._with_agent(None, QUIET, wait_for_the_started_agent)
        return health

    async def health_check(self) -> bool:
        """Whether an agent **started for the check** (and stopped after it) says
        ``{"status": "ok"}`` (:meth:`health`)."""
        return (await self.health()).status == "healthy"

    # --- runs ------------------------------------------------------------------------------

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no agent is started", retryable=False)

        async def run(agent: _Agent) -> ATPResponse:
            await agent.wait_healthy()
            await agent.start_task(request)
            return await agent.follow(request)

        return await self._with_agent(request, sink, run)

    async def _with_agent(
        self, request: ATPRequest | None, sink: EventSink, body: Callable[[_Agent], Awaitable[_T]]
    ) -> _T:
        """Start the agent for one run (or a health check), hand it to ``body``, and stop it
        however that ends; the run's response gets the files the agent wrote as artifacts."""
        workspace = _workspace(request) if request is not None else None
        shared = self.settings.port is not None or (workspace is None and self.cwd is not None)
        if not shared:
            return await self._in_folder(request, sink, body, workspace)
        if self._lock is None:
            self._lock = anyio.Lock()
        if self._lock.locked():
            # (a run that times out while it waits says "the agent was stopped": it never started)
            shared_thing = (
                f"the fixed port {self.settings.port}"
                if self.settings.port is not None
                else f"the folder 'cwd' ({self.cwd})"
            )
            sink.warn(
                f"this run waits for its turn: the runs of agent {self.name!r} share {shared_thing} and take "
                f"turns; the wait counts against the run's time limit (leave out 'port' and 'cwd' to run in parallel)"
            )
        async with self._lock:
            return await self._in_folder(request, sink, body, workspace)

    async def _in_folder(
        self,
        request: ATPRequest | None,
        sink: EventSink,
        body: Callable[[_Agent], Awaitable[_T]],
        workspace: Path | None,
    ) -> _T:
        temporary: Path | None = None
        folder = workspace or self.cwd
        if folder is None:
            import tempfile

            temporary = folder = Path(
                await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="atp-term-sdk-"))
            )
        try:
            since = time.time_ns() - 50_000_000  # (file times come from a clock that may lag a tick)
            result = await self._run_agent(folder, sink, body, request.task_id if request is not None else "")
            if not isinstance(result, ATPResponse):
                return result
            response, warnings = await anyio.to_thread.run_sync(
                _artifacts, result, folder, since, temporary is not None, abandon_on_cancel=True
            )
            for warning in warnings:
                sink.warn(warning)
            return cast(_T, response)
        finally:
            if temporary is not None:
                with anyio.CancelScope(shield=True):
                    problem = await anyio.to_thread.run_sync(remove_tree, temporary)
                if problem is not None:  # (a warning: the run's response or error stands)
                    sink.warn(f"the agent's temporary folder could not be removed: {problem}")

    async def _run_agent(
        self, folder: Path, sink: EventSink, body: Callable[[_Agent], Awaitable[_T]], task_id: str
    ) -> _T:
        settings = self.settings
        port = settings.port
        if port is None:
            try:
                port = free_port(settings.host, self._ports)
            except OSError as exc:
                raise AdapterError(
                    f"agent {self.name!r}: cannot find a free port on {settings.host} for the agent "
                    f"({exc.strerror or exc}); give it one with 'port'",
                    retryable=False,
                ) from None
        elif await anyio.to_thread.run_sync(port_in_use, settings.host, port):
            raise AdapterError(
                f"agent {self.name!r}: port {port} on {settings.host} (the agent's 'port') is in use by another "
                f"program already: ATP would send the task to it, not to the agent it starts; stop that program, "
                f"or leave 'port' out (each run then gets a free port)",
                retryable=False,
            )
        self._ports.add(port)
        try:
            env = dict(self.encoded_env)
            env[AGENT_PORT.encode()] = str(port).encode()
            try:
                server = Server.launch(self.argv, cwd=folder, env=env, owner=self)
            except OSError as exc:
                raise AdapterError(
                    f"agent {self.name!r}: cannot start {self.command_line!r} in {folder}: {exc.strerror or exc}",
                    retryable=lacks_resources(exc),
                ) from None
            try:
                server.read_output(sink.log)
                timeout = settings.request_timeout
                # (no proxy between ATP and its agent: trust_env=False)
                async with http_client(
                    self._httpx, connect_timeout=timeout, timeout=timeout, trust_env=False
                ) as client:
                    base = f"http://{url_host(settings.host)}:{port}"
                    agent = _Agent(self, client, server, sink, base, task_id)
                    return await body(agent)
            finally:
                with anyio.CancelScope(shield=True):
                    await server.stop(self.settings.stop_grace, sink.warn, aborted=lambda: self._aborted)
                    if not self._aborted and await answering(settings.host, port):
                        sink.warn(
                            f"port {port} still answers after the agent was stopped: a process of it may have "
                            f"escaped ATP, which does not find one that left the agent's session and process group, "
                            f"dropped ATP_AGENT_TOKEN and closed its output (see docs/untrusted-agents.md)"
                        )
        finally:
            self._ports.discard(port)


def _workspace(request: ATPRequest | None) -> Path | None:
    context = request.context if request is not None else None
    if context is not None and context.workspace_path:
        return Path(context.workspace_path)
    return None


class _Agent:
    """One started agent and ATP's exchange with it: health, ``/start``, ``/status``."""

    def __init__(
        self,
        adapter: TermSdkAdapter,
        client: Any,
        server: Server,
        sink: EventSink,
        base: str,
        task_id: str,
    ) -> None:
        self.settings = adapter.settings
        self.name = adapter.name
        self.task_id = task_id
        self.httpx = adapter._httpx
        self.client = client
        self.server = server
        self.sink = sink
        self.base = base
        self.started = server.started
        self.sequence = 0
        self.last_step: int | None = None
        self.seen = 0
        """History entries turned into tool_call events."""
        self.lost: list[tuple[int, int]] = []
        """Steps the agent's history never showed ATP (first, last)."""
        self.max_steps = adapter.settings.max_steps
        """The ``max_steps`` sent with ``POST /start``: the SDK stops an agent there."""
        self.beyond: int | None = None
        """The highest step number the agent reported past :attr:`max_steps` (a warning)."""
        self.longest_history = 0
        """The most entries one ``/status`` history held (the SDK keeps 30)."""

    # --- HTTP --------------------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, Any]:
        """One HTTP call, the whole of it within ``request_timeout``: the status, the body (at
        most :data:`MAX_BODY_BYTES`) and the headers. Raises :class:`_NoAnswer` saying why there
        is no whole answer (no connection, none within ``request_timeout``, a connection cut),
        and AgentError for a body over the limit."""
        url = self.base + path
        headers = {"Accept": "application/json", "User-Agent": "atp"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        timeout = self.settings.request_timeout
        try:
            # (httpx's timeouts are per read: an answer sent a byte at a time would never end)
            with anyio.fail_after(timeout):
                async with self.client.stream(method, url, content=body, headers=headers) as answer:
                    data = await read_body(
                        answer,
                        MAX_BODY_BYTES,
                        lambda: AgentError(
                            f"{method} {url}: the agent's answer is larger than {MAX_BODY_BYTES} bytes"
                        ),
                    )
                    return answer.status_code, data, answer.headers
        except TimeoutError:
            raise _NoAnswer(f"no answer within {timeout:g} s (request_timeout)") from None
        except request_errors(self.httpx) as exc:
            failure = http_failure(
                self.httpx,
                exc,
                url,
                connect_timeout=timeout,
                timeout=f"no answer within {timeout:g} s (request_timeout)",
            )
            raise _NoAnswer(failure.words, exc if failure.kind == "connect" else None) from None

    def _phrase(self, status: int) -> str:
        phrase: str = self.httpx.codes.get_reason_phrase(status)
        return f"{status} {phrase}".rstrip()

    # --- waiting -----------------------------------------------------------------------------

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the agent exits meanwhile."""
        await self.server.pause(seconds)

    def _exited(self, when: str) -> AgentError | None:
        """The agent has exited: the error saying so ``when``, with its output's end."""
        return self.server.exited(when)

    async def wait_healthy(self) -> None:
        """Poll ``GET /health`` until it answers ``200 {"status": "ok"}``; refused connections
        and other answers (``503`` while the agent starts) are waited through, for
        ``health_timeout`` seconds."""
        settings = self.settings
        url = self.base + "/health"

        async def probe(limit: float) -> HealthProbe:
            try:
                with anyio.fail_after(limit):
                    status, body, _ = await self._call("GET", "/health")
            except TimeoutError:
                return HealthProbe(False, f"no answer within {limit:g} s")
            except _NoAnswer as exc:
                return HealthProbe(False, exc.words)
            if status == 200 and _is_ok(body):
                return HealthProbe(True)
            return HealthProbe(False, f"HTTP {self._phrase(status)}", body[:ERROR_BODY_BYTES] or None)

        await self.server.wait_healthy(
            probe,
            url=url,
            timeout=settings.health_timeout,
            interval=settings.health_interval,
            request_timeout=settings.request_timeout,
        )

    # --- the task ----------------------------------------------------------------------------

    async def start_task(self, request: ATPRequest) -> None:
        """``POST /start`` with the instruction, ``max_steps`` and ``timeout_secs``."""
        constraints = request.constraints
        max_steps = (
            constraints.max_steps
            if constraints is not None and constraints.max_steps
            else self.settings.max_steps
        )
        self.max_steps = max_steps
        timeout = (
            constraints.timeout_seconds
            if constraints is not None and constraints.timeout_seconds
            else DEFAULT_TIMEOUT_SECONDS
        )
        body = msgspec.json.encode(
            {"instruction": instruction(request), "max_steps": max_steps, "timeout_secs": timeout}
        )
        url = self.base + "/start"
        where = f"POST {url}"
        try:
            status, answer, headers = await self._call("POST", "/start", body)
        except _NoAnswer as exc:
            failed = self._exited("while ATP sent POST /start")
            if failed is not None:
                raise failed from None
            if exc.unconnected is not None:
                raise unreachable(
                    self.name, url, exc.unconnected, connect_timeout=self.settings.request_timeout
                ) from None
            raise AgentError(f"{where}: {exc.words}") from None
        if is_transient(status):
            phrase = self.httpx.codes.get_reason_phrase(status)
            raise transient_fault(self.name, where, status, phrase, headers, answer[:ERROR_BODY_BYTES])
        if not 200 <= status < 300:
            hint = ""
            if status == 409:
                hint = "; it says a task is already running, though ATP started it for this run and sent one POST /start"
            raise refusal(
                where,
                status,
                self.httpx.codes.get_reason_phrase(status),
                answer[:ERROR_BODY_BYTES],
                hint=hint,
            )
        try:
            _decoder(_Started).decode(answer)
        except _DECODE_ERRORS as exc:
            raise AgentError(
                f'{where}: the agent broke the protocol: its answer (HTTP {status}) is not {{"status": "started"}} ({exc})',
                evidence=answer,
            ) from None
        self._event(
            StateChangePayload(from_state="idle", to_state="started", reason="POST /start accepted the task")
        )

    async def follow(self, request: ATPRequest) -> ATPResponse:
        """Poll ``GET /status`` until the agent says ``completed`` or ``failed``; each new
        history entry is a ``tool_call`` event as it is seen. A poll without a whole answer
        within ``request_timeout`` is a failed poll."""
        settings = self.settings
        url = self.base + "/status"
        where = f"GET {url}"
        errors, last_failure, failure_evidence = 0, "", None
        state = "started"
        steps_shown = -1
        accepted = anyio.current_time()
        while True:
            failed = self._exited(f"while running the task{self._so_far()}")
            if failed is not None:
                raise failed
            report: _Status | None = None
            try:
                status, body, _ = await self._call("GET", "/status")
            except _NoAnswer as exc:
                failed = self._exited(f"while running the task{self._so_far()}")
                if failed is not None:
                    raise failed from None
                last_failure, failure_evidence = exc.words, None
            else:
                if status == 200:
                    try:
                        report = _decoder(_Status).decode(body)
                    except _DECODE_ERRORS as exc:
                        raise AgentError(
                            f"{where}: the agent broke the protocol{self._so_far()}: its status is not "
                            f"the SDK's JSON ({exc})",
                            evidence=body,
                        ) from None
                else:
                    error, _ = error_fields(body[:ERROR_BODY_BYTES])
                    last_failure = f"HTTP {self._phrase(status)}"
                    failure_evidence = error if error is not None else (body[:ERROR_BODY_BYTES] or None)
            if report is None:
                errors += 1
                if errors >= settings.max_poll_errors:
                    raise AgentError(
                        f"{where}: {errors} polls in a row failed (max_poll_errors){self._so_far()}; "
                        f"the last: {last_failure}" + ("" if failure_evidence is None else ", saying"),
                        evidence=failure_evidence,
                    )
            else:
                if errors:
                    self.sink.warn(
                        f"{where} failed {errors} times in a row ({last_failure}); then the agent answered again"
                    )
                errors = 0
                final = report.status in ("completed", "failed")
                if report.status != state and not final:
                    self._event(StateChangePayload(from_state=state, to_state=report.status))
                self._history(report)  # (the commands ran before the agent finished)
                if report.status != state and final:
                    self._event(StateChangePayload(from_state=state, to_state=report.status))
                state = report.status
                if final:
                    return self._response(request, report)
                steps = self._bounded(report.steps if report.steps is not None else (self.last_step or 0))
                if report.status == "running" and steps != steps_shown:
                    steps_shown = steps
                    elapsed = f", {report.elapsed_secs:g} s" if report.elapsed_secs is not None else ""
                    self._event(
                        ProgressPayload(
                            current_step=steps,
                            message=f"running: {steps} step{'' if steps == 1 else 's'}{elapsed}",
                        )
                    )
                if report.status == "idle" and anyio.current_time() - accepted > settings.health_timeout:
                    raise AgentError(
                        f"{where}: the agent still says 'idle' {settings.health_timeout:g} s (health_timeout) after "
                        f"it accepted the task with POST /start"
                    )
            await self._pause(settings.poll_interval)

    def _so_far(self) -> str:
        return f", after {self.seen} step{'' if self.seen == 1 else 's'} seen" if self.seen else ""

    def _event(self, payload: msgspec.Struct) -> None:
        self.sink.event(make_event(self.task_id, self.sequence, payload))
        self.sequence += 1

    def _history(self, report: _Status) -> None:
        """The entries of ``report.history`` not seen before (by ``step``), as ``tool_call``
        events; steps that went missing (the history holds the last 30 commands only, and the
        agent ran more between two polls) said with a progress event, their numbers bounded
        (:meth:`_bounded`)."""
        if len(report.history) > HISTORY_ENTRIES:
            self.longest_history = max(self.longest_history, len(report.history))
        entries = sorted(
            (e for e in report.history if self.last_step is None or e.step > self.last_step),
            key=lambda e: e.step,
        )
        events = []
        for entry in entries:
            if self.last_step is not None and entry.step <= self.last_step:
                continue  # (the same step twice in one history)
            first = 1 if self.last_step is None else self.last_step + 1
            self.seen += 1
            self._bounded(entry.step)  # (a step past max_steps is noted for a warning)
            gap = self._bounded(entry.step - 1)
            if gap >= first:
                events.append(self._lost(first, gap))
            self.last_step = entry.step
            code = entry.exit_code
            payload = ToolCallPayload(
                tool=TOOL,
                input={"command": entry.command},
                output={"output": entry.output, "exit_code": code},
                status="success" if code == 0 else "error",
                error=None if code == 0 else (f"exit code {code}" if code is not None else "no exit code"),
            )
            events.append(make_event(self.task_id, self.sequence, payload))
            self.sequence += 1
        if events:
            self.sink.events(events)

    def _bounded(self, step: int) -> int:
        """``step`` (a step number or count the agent reported), at most the most steps it can
        have run: the ``max_steps`` ATP sent (the SDK stops an agent there) or the history
        entries ATP saw, whichever is higher. A number past that is noted for a warning, and
        never reaches the metrics or the events."""
        limit = max(self.max_steps, self.seen)
        if step <= limit:
            return step
        self.beyond = step if self.beyond is None else max(self.beyond, step)
        return limit

    def _lost(self, first: int, last: int) -> Any:
        self.lost.append((first, last))
        what = f"step {first} is" if first == last else f"steps {first}-{last} are"
        payload = ProgressPayload(
            current_step=last,
            message=f"{what} not in the agent's history (it holds the last commands only); ATP did not see them",
        )
        event = make_event(self.task_id, self.sequence, payload)
        self.sequence += 1
        return event

    def _response(self, request: ATPRequest, report: _Status) -> ATPResponse:
        steps = self._bounded(report.steps if report.steps is not None else (self.last_step or 0))
        top = self.last_step or 0
        if steps > top:
            self.sink.events([self._lost(top + 1, steps)])
        if self.beyond is not None:
            self.sink.warn(
                f"the agent reported step {self.beyond}, more than the max_steps {self.max_steps} ATP sent with "
                f"POST /start (where the SDK stops an agent); ATP counts at most {max(self.max_steps, self.seen)} steps (the higher of "
                f"max_steps and the {self.seen} history entries it saw)"
            )
        if self.longest_history:
            self.sink.warn(
                f"the agent's history held {self.longest_history} entries in one GET /status; the SDK keeps the "
                f"last {HISTORY_ENTRIES} (ATP took every entry)"
            )
        if self.lost:
            count = sum(b - a + 1 for a, b in self.lost)
            self.sink.warn(
                f"{count} of the agent's {steps} steps never appeared in its history (steps {_ranges(self.lost)}): "
                f"the history holds only the last commands, and the agent ran more than that between two polls "
                f"(poll_interval {self.settings.poll_interval:g} s); they are counted in metrics.tool_calls but have "
                f"no tool_call event"
            )
        error = None
        if report.status == "failed":
            error = report.error or "the agent reported status 'failed' without an error"
        elif report.error:
            self.sink.warn(
                f"the agent reported status 'completed' with an error: {printable(shorten(report.error))}"
            )
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="completed" if report.status == "completed" else "failed",
            artifacts=[],
            metrics=Metrics(
                total_steps=steps,
                tool_calls=max(steps, self.seen),
                wall_time_seconds=round(time.perf_counter() - self.started, 6),
            ),
            error=error,
        )


def _artifacts(
    response: ATPResponse, folder: Path, since: int, inline: bool
) -> tuple[ATPResponse, list[str]]:
    """The files the agent wrote in ``folder`` since ``since`` as the response's artifacts;
    with ``inline`` (a temporary folder, removed after the run) the content of each text file
    up to :data:`INLINE_BYTES` kept in its artifact (blocking: a worker thread)."""
    response, warnings = with_workspace_files(response, folder, since)
    if not inline:
        return response, warnings
    budget = INLINE_BUDGET
    artifacts: list[Any] = []
    left_out: list[str] = []
    for artifact in response.artifacts:
        if isinstance(artifact, FileArtifact) and artifact.content is None:
            text = None
            size = artifact.size_bytes or 0
            if size <= min(INLINE_BYTES, budget):
                text = _text(folder / artifact.path)
            if text is None:
                left_out.append(artifact.path)
            else:
                budget -= size
                artifact = msgspec.structs.replace(artifact, content=text)
        artifacts.append(artifact)
    if left_out:
        shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        warnings.append(
            f"the agent's temporary folder is removed after the run: the content of {shown} is not kept "
            f"(not UTF-8 text, or over {INLINE_BYTES // 1024} KiB, or past {INLINE_BUDGET // (1024 * 1024)} MiB "
            "in the run), only its size and hash"
        )
    return msgspec.structs.replace(response, artifacts=artifacts), warnings


def _text(path: Path) -> str | None:
    """The UTF-8 text of the regular file ``path`` (not through a link), or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= INLINE_BYTES and (piece := os.read(fd, INLINE_BYTES + 1 - len(data))):
            data += piece
        if len(data) > INLINE_BYTES:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
