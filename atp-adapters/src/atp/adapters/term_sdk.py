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

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import msgspec

from atp.adapters.network import http_client
from atp.adapters.persistent import Quiet
from atp.adapters.process import encoded, lacks_resources, with_request_environment
from atp.adapters.server import (
    NotHealthy,
    Server,
    abort_all,
    answering,
    check_startable,
    command_line,
    free_port,
    port_in_use,
    resolve_argv,
    url_host,
    with_evidence,
)
from atp.adapters.term_sdk_agent import HISTORY_ENTRIES, MAX_BODY_BYTES, TOOL, TermSdkAgent, instruction
from atp.adapters.term_sdk_settings import AGENT_PORT, TermSdkSettings
from atp.adapters.workspace import remove_tree, with_workspace_files
from atp.core.adapter import Adapter, Health
from atp.core.artifacts import encode_content
from atp.core.errors import AdapterError, AgentError
from atp.core.plugins import require
from atp.core.portability import RAW_FLAGS
from atp.core.protocol import ATPRequest, ATPResponse, FileArtifact
from atp.core.trace import EventSink

__all__ = [
    "AGENT_PORT",
    "HISTORY_ENTRIES",
    "INLINE_BUDGET",
    "INLINE_BYTES",
    "MAX_BODY_BYTES",
    "TOOL",
    "TermSdkAdapter",
    "TermSdkSettings",
    "instruction",
]

_INSTALL = "atp-adapters"
_FEATURE = "the term-sdk adapter"
INLINE_BYTES = 1024 * 1024
"""A text file of the temporary folder up to this size has its content kept in its artifact
(a file listed with a binary ``content_type``: in base64, as ATP Protocol 1.0 says)."""
INLINE_BUDGET = 8 * 1024 * 1024
"""The most content kept that way in one run."""
_T = TypeVar("_T")


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

        async def wait_for_the_started_agent(agent: TermSdkAgent) -> Health:
            started = time.perf_counter()
            try:
                await agent.wait_healthy()
            except AgentError as exc:
                if isinstance(exc, NotHealthy):
                    return Health(status="unhealthy", detail=with_evidence(exc, masker=self.masker))
                raise AdapterError(f"agent {self.name!r}: {with_evidence(exc, masker=self.masker)}") from None
            seconds = time.perf_counter() - started
            return Health(
                status="healthy",
                detail=f'GET /health said {{"status": "ok"}} {seconds:.2f} s after the start',
            )

        health: Health = await self._with_agent(None, Quiet(self.masker), wait_for_the_started_agent)
        return health

    async def health_check(self) -> bool:
        """Whether an agent **started for the check** (and stopped after it) says
        ``{"status": "ok"}`` (:meth:`health`)."""
        return (await self.health()).status == "healthy"

    # --- runs ------------------------------------------------------------------------------

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no agent is started", retryable=False)

        async def run(agent: TermSdkAgent) -> ATPResponse:
            await agent.wait_healthy()
            await agent.start_task(request)
            return await agent.follow(request)

        return await self._with_agent(request, sink, run)

    async def _with_agent(
        self, request: ATPRequest | None, sink: EventSink, body: Callable[[TermSdkAgent], Awaitable[_T]]
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
        body: Callable[[TermSdkAgent], Awaitable[_T]],
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
            result = await self._run_agent(folder, sink, body, request)
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
        self,
        folder: Path,
        sink: EventSink,
        body: Callable[[TermSdkAgent], Awaitable[_T]],
        request: ATPRequest | None,
    ) -> _T:
        """The agent started for one run (``request``; ``None``: a health check): the Term SDK's
        ``POST /start`` has no place for ``context.environment``, so the request's environment
        (the agent's ``secrets:``) is added to the process's, as the SDK's own harness does."""
        settings = self.settings
        task_id = request.task_id if request is not None else ""
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
            env = dict(with_request_environment(self.encoded_env, request))
            env[AGENT_PORT.encode()] = str(port).encode()
            try:
                server = Server.launch(self.argv, cwd=folder, env=env, owner=self, ledger=self.processes)
            except OSError as exc:
                raise AdapterError(
                    f"agent {self.name!r}: cannot start {self.command_line!r} in {folder}: {exc.strerror or exc}",
                    retryable=lacks_resources(exc),
                ) from None
            try:
                server.read_output(sink.log, sink.masker)
                timeout = settings.request_timeout
                # (no proxy between ATP and its agent: trust_env=False)
                async with http_client(
                    self._httpx, connect_timeout=timeout, timeout=timeout, trust_env=False
                ) as client:
                    base = f"http://{url_host(settings.host)}:{port}"
                    agent = TermSdkAgent(
                        settings,
                        name=self.name,
                        httpx=self._httpx,
                        client=client,
                        server=server,
                        sink=sink,
                        base=base,
                        task_id=task_id,
                    )
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
            found = _content(folder / artifact.path, artifact.content_type, min(INLINE_BYTES, budget))
            if found is None:
                left_out.append(artifact.path)
            else:
                budget -= found[1]
                artifact = msgspec.structs.replace(artifact, content=found[0])
        artifacts.append(artifact)
    if left_out:
        shown = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
        warnings.append(
            f"the agent's temporary folder is removed after the run: the content of {shown} is not kept "
            f"(not UTF-8 text nor of a binary content_type, or over {INLINE_BYTES // 1024} KiB, or past {INLINE_BUDGET // (1024 * 1024)} MiB "
            "in the run), only its size and hash"
        )
    return msgspec.structs.replace(response, artifacts=artifacts), warnings


def _content(path: Path, content_type: str | None, limit: int) -> tuple[str, int] | None:
    """The content of the regular file ``path`` (not through a link) of at most ``limit``
    bytes as an artifact's inline content (base64 for a binary ``content_type``, else its UTF-8
    text: :func:`atp.core.artifacts.encode_content`), and its size; or ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | RAW_FLAGS | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = b""
        while len(data) <= limit and (piece := os.read(fd, limit + 1 - len(data))):
            data += piece
        if len(data) > limit:
            return None
        return encode_content(data, content_type), len(data)
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
