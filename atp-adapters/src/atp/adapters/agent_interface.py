"""The ``agent-interface`` adapter: an agent that implements the Agent Interface Standard v1.0
(``GET /agent-card``, ``GET /health``, ``GET /mcp/tools``, ``POST /mcp/execute/{tool}`` and
``POST /a2a/message``), driven unchanged. Settings (with those of :mod:`atp.adapters.network`)::

    agents:
      - name: weather
        type: agent-interface
        endpoint: http://127.0.0.1:8000      # the agent's base URL, http:// or https://
        action: execute_task                 # the A2A action of every task (default execute_task)
        from_agent: atp                      # who the A2A messages are from (default atp)
        to_agent: weather-001                # default: the agent_id of GET /agent-card
        payload_key: task                    # the payload member for task.description (null: none)
        input_key: null                      # null: task.input_data merged into the payload;
                                             #   a name: input_data as that payload member
        payload: {}                          # fixed members every payload starts with
        allow_unhealthy: false               # test an agent whose /health says unhealthy
        discovery_timeout: 10                # seconds for each GET of discovery and checks
        headers: {Authorization: "Bearer ${AGENT_TOKEN}"}
        # optional: a server ATP starts itself, once, and stops at the end; {port} in the
        # command and the endpoint (http://127.0.0.1:{port}) is its port
        command: ["${ATP_PYTHON}", agent.py, --port, "{port}"]
        port: 8000                           # default: the endpoint's, or a free one for {port}
        env: {MODEL: small}                  # added to ATP's environment (PORT is set too)
        cwd: ./server                        # its working folder (default: the agent's folder)
        health_timeout: 15                   # seconds for GET /health to answer
        stop_grace: 2                        # seconds between SIGTERM and SIGKILL

**A server ATP starts** (``command``): before discovery, :meth:`AgentInterfaceAdapter.start`
starts ``command`` once for all the runs (:class:`~atp.adapters.server.Server`, on the ``cli``
adapter's process machinery, as the ``term-sdk`` adapter starts its agents) in ``cwd`` (default:
the folder of the file defining the agent), with ``PORT`` in its environment and ``{port}`` in
its words and in ``endpoint`` replaced by the port; then waits until ``GET /health`` answers
(refused connections and ``503`` are waited through for ``health_timeout``; an exit is reported
at once, with its exit code and the end of its output). Its stdout and stderr go to a temporary
log file (:class:`~atp.adapters.server.LogFile`; no run's log can take a server that serves all
of them), which errors name and quote the end of; it is removed at the end unless an error named
it. :meth:`AgentInterfaceAdapter.aclose` stops the server (SIGTERM, SIGKILL after
``stop_grace``), :meth:`AgentInterfaceAdapter.abort` kills it at once. A server that exits while
the runs go on fails the runs that follow, saying so.

**Discovery** (:meth:`AgentInterfaceAdapter.start`): ``GET /health`` then ``GET /agent-card``,
each bounded as a whole by ``discovery_timeout`` (httpx's timeouts are per read: an agent that
sends its answer a byte at a time would hold discovery for ever) and read up to
:data:`DISCOVERY_BYTES`. An agent whose health says ``unhealthy`` is refused
(:class:`~atp.core.adapter.AgentUnhealthy`, saying what it reported) unless
``allow_unhealthy: true``; so is one whose ``GET /health`` fails (an HTTP error without a report,
a redirect, no answer in time), saying that the request failed, not that the agent reported
anything. ``degraded``, a health report that cannot be read, and an unhealthy agent tested anyway
are warnings. The card's ``agent_id`` becomes the messages' ``to_agent`` (unless ``to_agent`` is
set; then a card that cannot be read is a warning only). Everything ATP says at start reaches the
terminal as it is (an ``atp: error:``, a warning), so the agent's text in it (a ``last_error``, a
card) is masked with the agent's own secrets (its ``headers``) and the run's, then cut to
:data:`~atp.adapters.network.QUOTE_CHARS` characters (:func:`~atp.adapters.network.quoted`).

**A task** is one A2A message, ``POST /a2a/message``::

    {"from_agent": "atp", "to_agent": "<agent_id>", "action": "<action>",
     "payload": {**payload, "<payload_key>": task.description, **task.input_data},
     "message_type": "REQUEST",
     "context": {"task_id": "...", "constraints": {...}, "environment": {...}}}

A test may set ``task.input_data.a2a_action`` to send another action (it is not put in the
payload). The answer ``{"success", "result", "error", "tools_used", ...}`` becomes the ATP
response: ``result`` a structured artifact named ``result`` (a result that is not an object is
wrapped: ``{"value": result}``; none when ``result`` is null), each name of ``tools_used`` a
``tool_call`` event (status ``success``), ``success: false`` the status ``failed`` with the
answer's ``error``. Metrics: ``tool_calls`` and ``wall_time_seconds``. The standard's
``context`` is an open object: ``environment`` there is the request's ``context.environment``
(the agent's ``secrets:``; this adapter's ``env`` is the started server's environment, not
sent), left out when there is none.

**A tool, directly**: a test whose ``task.input_data`` has ``mcp_tool: NAME`` (and optionally
``parameters: {...}``; ``NAME`` neither ``.`` nor ``..``, at most :data:`MAX_TOOL_NAME_BYTES`)
is sent as ``POST /mcp/execute/NAME`` with ``{"parameters": ...,
"context": {"task_id", "constraints", "environment"}}`` instead of a message: the tool's ``result`` becomes the
``result`` artifact, the call one ``tool_call`` event (input, output, duration, status
``success`` or ``error``), ``success: false`` the status ``failed``.

Faults are worded as the other network adapters word them (:mod:`atp.adapters.network`): an
agent that cannot be reached, and an HTTP 429, 502, 503 or 504 (the agent cannot take the
request now), is an :class:`~atp.core.errors.AdapterError` (tried again); another HTTP 4xx an
:class:`~atp.core.errors.AgentRefused`, another 5xx, an answer that is not JSON or not of the
standard's shape an :class:`~atp.core.errors.AgentError` with the answer as evidence.

For ``atp validate`` and ``atp list-agents --check``: :meth:`AgentInterfaceAdapter.health` is
the agent's own status; :meth:`AgentInterfaceAdapter.conformance` checks ``/agent-card``,
``/health`` and ``/mcp/tools`` against the standard's schemas (:data:`SCHEMAS`; every field the
standard lists is required, with the type it gives; more fields are allowed), on a worker thread
(the validation's time limit holds however large the answer) and counting at most
:data:`MAX_PROBLEMS` problems; and ATP's own ``malformed`` and ``version`` checks are skipped
(:attr:`foreign_protocol`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import msgspec

from atp.adapters.agent_interface_http import DISCOVERY_BYTES, AgentHttp, Answer, Cut, NoAnswer
from atp.adapters.agent_interface_server import (
    EXIT_NOTICE_SECONDS,
    HEALTH_INTERVAL,
    SERVER,
    TAIL_CHARS,
    ServerKeeper,
)
from atp.adapters.agent_interface_settings import (
    DEFAULT_ACTION,
    DEFAULT_DISCOVERY_TIMEOUT,
    MAX_DISCOVERY_TIMEOUT,
    PORT_VARIABLE,
    AgentInterfaceSettings,
)
from atp.adapters.agent_interface_standard import (
    CHECKED,
    HEALTH_STATES,
    MAX_PROBLEMS,
    SCHEMAS,
    SHOWN_TOOLS,
    STANDARD,
    A2AAnswer,
    ToolAnswer,
    ToolName,
    a2a_decoder,
    conforming,
    health_of,
    json_of,
    json_or_none,
    tool_decoder,
    validators,
    with_notes,
)
from atp.adapters.http import request_headers, with_path
from atp.adapters.network import NetworkAdapter, quoted, secret_values, shown_url
from atp.adapters.server import Server
from atp.core.adapter import AgentUnhealthy, ConformanceCheck, Health
from atp.core.errors import AdapterError, AgentError, ConfigError
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    Event,
    Metrics,
    StructuredArtifact,
    ToolCallPayload,
    make_event,
)
from atp.core.secrets import Masker
from atp.core.text import as_text, mask
from atp.core.trace import EventSink

__all__ = [
    "ACTION_KEY",
    "ARTIFACT",
    "CHECKED",
    "DEFAULT_ACTION",
    "DEFAULT_DISCOVERY_TIMEOUT",
    "DISCOVERY_BYTES",
    "EXIT_NOTICE_SECONDS",
    "HEALTH_INTERVAL",
    "HEALTH_STATES",
    "JSON",
    "MAX_DISCOVERY_TIMEOUT",
    "MAX_PROBLEMS",
    "MAX_TOOL_NAME_BYTES",
    "PARAMETERS_KEY",
    "PORT_VARIABLE",
    "SCHEMAS",
    "SERVER",
    "SHOWN_TOOLS",
    "STANDARD",
    "TAIL_CHARS",
    "TOOL_KEY",
    "A2AAnswer",
    "AgentInterfaceAdapter",
    "AgentInterfaceSettings",
    "Answer",
    "ToolAnswer",
    "ToolName",
]

logger = logging.getLogger("atp.adapters.agent_interface")

MAX_TOOL_NAME_BYTES = 1024
"""The longest ``mcp_tool`` name (UTF-8) ATP puts in a URL."""
ARTIFACT = "result"
"""The name of the structured artifact that holds the agent's (or the tool's) result."""
TOOL_KEY = "mcp_tool"
PARAMETERS_KEY = "parameters"
ACTION_KEY = "a2a_action"
"""Keys of ``task.input_data`` that ATP reads itself (a tool to call; another A2A action)."""
JSON = "application/json"


# --- the adapter -----------------------------------------------------------------------------


class AgentInterfaceAdapter(NetworkAdapter):
    type = "agent-interface"
    summary = (
        "an Agent Interface Standard v1.0 agent: discovery by /agent-card and /health, tasks as "
        "POST /a2a/message, tools by POST /mcp/execute"
    )
    Settings = AgentInterfaceSettings
    settings: AgentInterfaceSettings
    foreign_protocol = STANDARD

    def __init__(self, settings: AgentInterfaceSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.headers = request_headers(settings, JSON)
        self.to_agent: str | None = settings.to_agent
        """The ``to_agent`` of the messages: the setting, or the card's ``agent_id`` at start."""
        self.card: dict[str, Any] | None = None
        """The agent card read at start (when it could be)."""
        self.started_health: Health | None = None
        """The agent's health at start."""
        self._client: Any = None
        self._secrets = Masker(secret_values(settings))
        """The agent's own secrets (its headers', its endpoint's), masked in everything the adapter
        words itself, also where no run's masker is active."""
        self.http = AgentHttp(
            settings, self.headers, name=name, base_dir=self.base_dir, secrets=self._secrets, owner=self
        )
        """The HTTP exchanges with the agent (and where it is)."""
        self.keeper = ServerKeeper(
            settings, name=name, base_dir=self.base_dir, http=self.http, secrets=self._secrets, owner=self
        )
        """The agent server ATP starts (``command``)."""

    @property
    def endpoint(self) -> str:
        """Where the agent is: the setting, with ``{port}`` replaced when ATP starts the server."""
        return self.http.endpoint

    @property
    def server(self) -> Server | None:
        """The agent server ATP started (``command``), while it runs."""
        return self.keeper.server

    def _quoted(self, text: str) -> str:
        """The agent's ``text`` as the adapter's errors and warnings quote it: masked, cut,
        printable (:func:`~atp.adapters.network.quoted`)."""
        return quoted(text, masker=self.masker, secrets=self._secrets)

    def _masked(self, text: str) -> str:
        """Text the adapter words (it may hold a URL with a secret query, a quote) masked with the
        agent's secrets and the run's."""
        return mask(self._secrets.text(text), self.masker)

    def _warn_at_start(self, message: str) -> None:
        logger.warning("%s", self._masked(message))

    async def start(self) -> None:
        """Start the agent server when ATP starts it (``command``: :meth:`~atp.adapters.agent_interface_server.ServerKeeper.start`), then
        discover the agent: its health (an unhealthy agent is refused unless
        ``allow_unhealthy``), then its card (whose ``agent_id`` becomes ``to_agent``). A server
        refused as unhealthy runs on until :meth:`aclose` (``atp validate`` still checks its
        answers); one that failed otherwise is stopped. The errors are masked (the agent's
        secrets and the run's): ``atp test`` prints them as they are."""
        try:
            await self._start()
        except AgentUnhealthy as exc:
            raise AgentUnhealthy(
                self._masked(str(exc)),
                health=Health(status=exc.health.status, detail=self._masked(exc.health.detail)),
            ) from None
        except AdapterError as exc:
            raise AdapterError(
                self._masked(str(exc)), retryable=exc.retryable, retry_after=exc.retry_after
            ) from None

    async def _start(self) -> None:
        self.http.prepare()
        if self.settings.command is not None and self.server is None:
            await self.keeper.start()
        client = self.http.client()
        try:
            await self._discover(client)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if not isinstance(exc, AgentUnhealthy):
                    await self.keeper.stop()
            raise
        self._client = client

    async def _discover(self, client: Any) -> None:
        name, where = self.name, shown_url(self.endpoint)
        health, reported = await self._checked_health(client)
        self.started_health = health
        if health.status == "unreachable":
            raise AdapterError(health.detail)
        detail = f" ({health.detail})" if health.detail else ""
        if health.status == "unhealthy":
            if reported:
                what = f"agent {name!r} at {where} reports itself unhealthy{detail}"
                refused = "an unhealthy agent"
            else:  # (no report: the request failed)
                what = f"agent {name!r}: its health cannot be checked: {health.detail}"
                refused = "an agent whose health check fails"
            then = " " if what.endswith("?") else "; "
            if not self.settings.allow_unhealthy:
                raise AgentUnhealthy(
                    f"{what}{then}ATP does not test {refused} unless its settings say allow_unhealthy: true",
                    health=health,
                )
            self._warn_at_start(
                f"{what}{then}{'I' if then == ' ' else 'i'}t is tested anyway (allow_unhealthy)"
            )
        elif health.status != "healthy":
            self._warn_at_start(f"agent {name!r}: {_health_words(health.status)}{detail}; its runs go on")
        try:
            self.card = await self._card(client)
        except AgentError as exc:
            said = f": {self._quoted(_evidence(exc))}" if exc.evidence is not None else ""
            if self.to_agent is None:
                raise AdapterError(
                    f"agent {name!r}: discovery failed: {exc.message}; is an Agent Interface Standard agent at "
                    f"{where}? (to_agent in its settings makes the card optional){said}",
                    retryable=False,
                ) from None
            self._warn_at_start(f"agent {name!r}: {exc.message}{said}; to_agent {self.to_agent!r} is used")
            return
        if self.to_agent is None:
            self.to_agent = self.card["agent_id"]

    async def _card(self, client: Any) -> dict[str, Any]:
        answer = await self.http.get(client, self.http.urls["/agent-card"])
        if not answer.ok:
            raise AgentError(
                f"{answer.where} answered HTTP {answer.status} {answer.phrase}".rstrip(), evidence=answer.body
            )
        try:
            card = json_of(answer.body)
        except ValueError as exc:
            raise AgentError(
                f"{answer.where}: the agent card is not JSON ({exc})", evidence=answer.body
            ) from None
        agent_id = card.get("agent_id") if isinstance(card, dict) else None
        if not isinstance(agent_id, str) or not agent_id:
            raise AgentError(f"{answer.where}: the agent card has no agent_id", evidence=answer.body)
        assert isinstance(card, dict)
        return card

    async def aclose(self) -> None:
        """Close the client; stop the agent server ATP started."""
        client, self._client = self._client, None
        try:
            if client is not None:
                await client.aclose()
        finally:
            await self.keeper.stop()

    def abort(self) -> None:
        """SIGKILL the agent server ATP started, and everything it started, at once."""
        self.keeper.abort()

    @property
    def opened(self) -> bool:
        return self._client is not None

    @contextlib.asynccontextmanager
    async def _opened(self) -> AsyncIterator[Any]:
        """The started adapter's client, or one made for the moment (closed after), with the
        agent server started for the moment when ATP starts it and it does not run. Raises
        AdapterError when that server cannot be started."""
        if self._client is not None:
            yield self._client
            return
        self.http.prepare()
        temporary = self.settings.command is not None and self.server is None
        if temporary:
            await self.keeper.start()
        client = self.http.client()
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if temporary:
                    await self.keeper.stop()

    # --- health and conformance --------------------------------------------------------------

    async def health(self) -> Health:
        """What ``GET /health`` says: its ``status`` with the error rate and last error;
        ``unreachable`` when nothing answers; ``unhealthy`` for an HTTP error or no answer in
        ``discovery_timeout``; ``unknown`` for a 2xx answer without a status of the standard's.
        An agent server ATP starts that cannot be started is ``unreachable``, saying why."""
        try:
            async with self._opened() as client:
                health, _ = await self._checked_health(client)
                return health
        except AdapterError as exc:
            return Health(status="unreachable", detail=self._masked(str(exc)))

    async def health_check(self) -> bool:
        return (await self.health()).usable

    async def _checked_health(self, client: Any) -> tuple[Health, bool]:
        """The agent's health, and whether it is its own report (else: the request failed, or
        its answer holds no status of the standard's). A request that fails (an HTTP error
        without a report, a redirect, no whole answer within ``discovery_timeout``) is
        ``unhealthy``, saying so: ``GET .../health failed: ...; is 'endpoint' right?``."""
        try:
            answer = await self.http.get(client, self.http.urls["/health"])
        except AdapterError as exc:
            return Health(status="unreachable", detail=str(exc)), False
        except NoAnswer as exc:
            return Health(status="unhealthy", detail=_failed_words(exc.where, exc.reason)), False
        except AgentError as exc:
            return Health(status="unhealthy", detail=_failed_words("GET /health", exc.message)), False
        health = health_of(json_or_none(answer.body), self._quoted)
        if health is not None:
            return health, True
        if not answer.ok:
            return Health(
                status="unhealthy",
                detail=_failed_words(answer.where, f"HTTP {answer.status} {answer.phrase}".rstrip()),
            ), False
        return Health(
            status="unknown",
            detail=f"{answer.where} answered without a status of the standard's (healthy, degraded or unhealthy)",
        ), False

    async def conformance(self) -> list[ConformanceCheck]:
        """``/agent-card``, ``/health`` and ``/mcp/tools`` against :data:`SCHEMAS`."""
        checkers = validators()
        checks: list[ConformanceCheck] = []
        documents: dict[str, Any] = {}
        try:
            async with self._opened() as client:
                for name, (path, title) in CHECKED.items():
                    checks.append(await self._conforms(client, name, path, title, checkers[name], documents))
        except AdapterError as exc:  # (the agent server ATP starts cannot be started)
            return [
                ConformanceCheck(
                    name=name,
                    title=title,
                    passed=False,
                    message=f"GET {path} got no answer",
                    seen=(str(exc),),
                    fix=f"answer GET {path} with every field {STANDARD} lists for it, of the type it gives",
                )
                for name, (path, title) in CHECKED.items()
            ]
        return with_notes(checks, documents)

    async def _conforms(
        self, client: Any, name: str, path: str, title: str, validator: Any, documents: dict[str, Any]
    ) -> ConformanceCheck:
        fix = f"answer GET {path} with every field {STANDARD} lists for it, of the type it gives"
        try:
            answer = await self.http.get(client, self.http.urls[path])
        except (AdapterError, AgentError) as exc:
            if isinstance(exc, AgentError):  # (an answer too large, cut, late, a redirect)
                seen, message = (_with_evidence(exc),), f"GET {path} got no usable answer"
            else:
                seen, message = (str(exc),), f"GET {path} got no answer"
            return ConformanceCheck(name=name, title=title, passed=False, message=message, seen=seen, fix=fix)
        # (a large answer takes long to check: on a worker thread, the validation's time limit holds)
        return await anyio.to_thread.run_sync(
            conforming, answer, name, path, title, validator, documents, fix, abandon_on_cancel=True
        )

    # --- runs ------------------------------------------------------------------------------

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        client = self._client
        if client is None:
            raise AdapterError(
                f"agent {self.name!r}: the agent-interface adapter was not started", retryable=False
            )
        if self.server is None:
            return await self._execute(client, request, sink)
        failed = await self.keeper.exited(wait=False)
        if failed is not None:
            raise failed
        try:
            return await self._execute(client, request, sink)
        except (AdapterError, AgentError) as exc:
            # (a server that did not answer may be exiting: it is given a moment to be seen so)
            failed = await self.keeper.exited(wait=isinstance(exc, (AdapterError, Cut)))
            if failed is not None:
                raise failed from None
            raise

    async def _execute(self, client: Any, request: ATPRequest, sink: EventSink) -> ATPResponse:
        data = dict(request.task.input_data or {})
        if TOOL_KEY in data:
            return await self._call_tool(client, request, data, sink)
        action = data.pop(ACTION_KEY, self.settings.action)
        if not isinstance(action, str) or not action:
            raise ConfigError(
                f"task.input_data.{ACTION_KEY} must be the name of an A2A action, not {action!r}"
            )
        settings = self.settings
        payload: dict[str, Any] = dict(settings.payload)
        if settings.payload_key is not None:
            payload[settings.payload_key] = request.task.description
        if settings.input_key is None:
            payload.update(data)
        elif data:
            payload[settings.input_key] = data
        message = {
            "from_agent": settings.from_agent,
            "to_agent": self.to_agent,
            "action": action,
            "payload": payload,
            "message_type": "REQUEST",
            "context": _context(request),
        }
        started = time.perf_counter()
        answer = await self.http.post(client, self.http.urls["/a2a/message"], message)
        seconds = time.perf_counter() - started
        try:
            reply = a2a_decoder.decode(answer.body)
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
            raise AgentError(
                f"{answer.where}: the agent's answer is not an A2A response ({exc})", evidence=answer.body
            ) from None
        events: list[Event] = [
            make_event(request.task_id, sequence, ToolCallPayload(tool=tool, status="success"))
            for sequence, tool in enumerate(reply.tools_used)
        ]
        if events:
            sink.events(events)
        return self._response(request, reply.success, reply.result, reply.error, len(events), seconds)

    async def _call_tool(
        self, client: Any, request: ATPRequest, data: dict[str, Any], sink: EventSink
    ) -> ATPResponse:
        tool, parameters = data.get(TOOL_KEY), data.get(PARAMETERS_KEY, {})
        if not isinstance(tool, str) or not tool:
            raise ConfigError(
                f"task.input_data.{TOOL_KEY} must be the name of the tool to call, not {tool!r}"
            )
        if not isinstance(parameters, dict):
            raise ConfigError(f"task.input_data.{PARAMETERS_KEY} must be an object (the tool's parameters)")
        if tool in (".", ".."):
            raise ConfigError(
                f"task.input_data.{TOOL_KEY} {tool!r} is not a tool name: in the URL /mcp/execute/{tool} it would "
                f"name another path"
            )
        if len(tool.encode("utf-8", "surrogatepass")) > MAX_TOOL_NAME_BYTES:
            raise ConfigError(
                f"task.input_data.{TOOL_KEY} is {len(tool)} characters long; a tool name ATP puts in a URL may "
                f"have at most {MAX_TOOL_NAME_BYTES} bytes"
            )
        url = with_path(self.http.endpoint, "/mcp/execute/" + quote(tool, safe=""))
        started = time.perf_counter()
        answer = await self.http.post(client, url, {"parameters": parameters, "context": _context(request)})
        seconds = time.perf_counter() - started
        try:
            reply = tool_decoder.decode(answer.body)
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
            raise AgentError(
                f"{answer.where}: the agent's answer is not a tool result ({exc})", evidence=answer.body
            ) from None
        payload = ToolCallPayload(
            tool=tool,
            input=parameters,
            output=reply.result,
            duration_ms=round(seconds * 1000, 3),
            status="success" if reply.success else "error",
            error=None if reply.success else reply.error,
        )
        sink.event(make_event(request.task_id, 0, payload))
        return self._response(request, reply.success, reply.result, reply.error, 1, seconds)

    @staticmethod
    def _response(
        request: ATPRequest, success: bool, result: Any, error: str | None, tool_calls: int, seconds: float
    ) -> ATPResponse:
        artifacts: list[Any] = (
            [] if result is None else [StructuredArtifact(name=ARTIFACT, data=_wrapped(result))]
        )
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="completed" if success else "failed",
            artifacts=artifacts,
            metrics=Metrics(tool_calls=tool_calls, wall_time_seconds=round(seconds, 6)),
            error=None if success else (error or "the agent answered success: false without an error"),
        )


# --- helpers ---------------------------------------------------------------------------------


def _failed_words(where: str, reason: str) -> str:
    """A health request that failed, as its health's detail: not a report of the agent's."""
    hint = "" if "'endpoint'" in reason else "; is 'endpoint' right?"
    return f"{where} failed: {reason}{hint}"


def _evidence(exc: AgentError) -> str:
    evidence = exc.evidence
    return as_text(evidence) if isinstance(evidence, bytes) else str(evidence)


def _with_evidence(exc: AgentError) -> str:
    return exc.message + (f": {_evidence(exc)}" if exc.evidence is not None else "")


def _health_words(status: str) -> str:
    if status == "unknown":
        return "its health cannot be read"
    return f"reports itself {status}"


def _wrapped(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else {"value": result}


def _context(request: ATPRequest) -> dict[str, Any]:
    context: dict[str, Any] = {"task_id": request.task_id}
    if request.constraints is not None:
        constraints = msgspec.to_builtins(request.constraints)
        if constraints:
            context["constraints"] = constraints
    if request.context is not None and request.context.environment:
        context["environment"] = dict(request.context.environment)
    return context
