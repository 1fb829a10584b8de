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
     "context": {"task_id": "...", "constraints": {...}}}

A test may set ``task.input_data.a2a_action`` to send another action (it is not put in the
payload). The answer ``{"success", "result", "error", "tools_used", ...}`` becomes the ATP
response: ``result`` a structured artifact named ``result`` (a result that is not an object is
wrapped: ``{"value": result}``; none when ``result`` is null), each name of ``tools_used`` a
``tool_call`` event (status ``success``), ``success: false`` the status ``failed`` with the
answer's ``error``. Metrics: ``tool_calls`` and ``wall_time_seconds``.

**A tool, directly**: a test whose ``task.input_data`` has ``mcp_tool: NAME`` (and optionally
``parameters: {...}``; ``NAME`` neither ``.`` nor ``..``, at most :data:`MAX_TOOL_NAME_BYTES`)
is sent as ``POST /mcp/execute/NAME`` with ``{"parameters": ...,
"context": {"task_id", "constraints"}}`` instead of a message: the tool's ``result`` becomes the
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
import itertools
import logging
import math
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, NamedTuple
from urllib.parse import quote, urlsplit

import anyio
import msgspec

from atp.adapters.http import request_headers, with_path
from atp.adapters.network import (
    ERROR_BODY_BYTES,
    MiB,
    NetworkAdapter,
    NetworkSettings,
    http_client,
    http_failure,
    is_transient,
    quoted,
    read_body,
    read_some,
    redirect_words,
    refusal,
    request_errors,
    secret_values,
    shown_url,
    tls_context,
    transient_fault,
    unreachable,
)
from atp.adapters.process import encoded, lacks_resources
from atp.adapters.server import (
    MAX_SECONDS,
    PORT_FIELD,
    Grace,
    HealthProbe,
    LogFile,
    NotHealthy,
    Port,
    Seconds,
    Server,
    abort_all,
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
    with_evidence,
)
from atp.core.adapter import AgentUnhealthy, ConformanceCheck, Health
from atp.core.errors import AdapterError, AgentError, ConfigError
from atp.core.plugins import require
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
from atp.core.text import mask
from atp.core.trace import EventSink

logger = logging.getLogger("atp.adapters.agent_interface")

STANDARD = "the Agent Interface Standard v1.0"
DEFAULT_ACTION = "execute_task"
DEFAULT_DISCOVERY_TIMEOUT = 10.0
MAX_DISCOVERY_TIMEOUT = MAX_SECONDS
DISCOVERY_BYTES = 4 * MiB
"""The most ATP reads of one discovery answer (``/health``, ``/agent-card``, ``/mcp/tools``; less
when ``max_message_bytes`` is less): a card or a tool list is a few kilobytes."""
MAX_PROBLEMS = 100
"""The most schema problems a conformance check collects (it says "over 100 problems")."""
MAX_TOOL_NAME_BYTES = 1024
"""The longest ``mcp_tool`` name (UTF-8) ATP puts in a URL."""
SHOWN_TOOLS = 10
"""How many tool names a passed ``mcp-tools`` check lists."""
ARTIFACT = "result"
"""The name of the structured artifact that holds the agent's (or the tool's) result."""
TOOL_KEY = "mcp_tool"
PARAMETERS_KEY = "parameters"
ACTION_KEY = "a2a_action"
"""Keys of ``task.input_data`` that ATP reads itself (a tool to call; another A2A action)."""
HEALTH_STATES = ("healthy", "degraded", "unhealthy")
JSON = "application/json"
PORT_VARIABLE = "PORT"
"""The variable that gives the agent server ATP starts (``command``) its port."""
SERVER = "the agent server"
"""How messages name the server ATP starts."""
HEALTH_INTERVAL = 0.1
"""Seconds between two ``GET /health`` while the server ATP started is not yet ready."""
EXIT_NOTICE_SECONDS = 0.5
"""How long a run that cannot reach the server ATP started waits to see whether it exited."""
TAIL_CHARS = 1000
"""The most of the end of the server's output a start failure quotes."""
_INSTALL = "atp-adapters"


class AgentInterfaceSettings(NetworkSettings, kw_only=True):
    schemes: ClassVar[tuple[str, ...]] = ("http", "https")
    reserved_headers: ClassVar[frozenset[str]] = frozenset(
        {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
    )

    action: str = DEFAULT_ACTION
    """The A2A ``action`` of every task (a test's ``input_data.a2a_action`` overrides it)."""
    from_agent: str = "atp"
    """The ``from_agent`` of every message."""
    to_agent: str | None = None
    """The ``to_agent`` of every message; by default the ``agent_id`` of ``GET /agent-card``."""
    payload_key: str | None = "task"
    """The payload member that holds ``task.description``; ``null``: the description is not sent."""
    input_key: str | None = None
    """``null``: the members of ``task.input_data`` are merged into the payload; a name: the
    input data is sent as that payload member (when there is any)."""
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    """Members every payload starts with (the task's own win)."""
    allow_unhealthy: bool = False
    """Test an agent whose ``/health`` says ``unhealthy`` (with a warning) instead of refusing."""
    discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT
    """Seconds each discovery or check request (``/health``, ``/agent-card``, ``/mcp/tools``)
    may take; a run's own time limit governs the rest."""
    command: str | list[str] | None = None
    """A command that starts the agent server: ATP starts it once when the adapter starts
    (before discovery) and stops it at the end. ``{port}`` in its words is the port. Relative
    paths are made absolute as for ``term-sdk`` (relative to ``cwd``, or the agent's folder)."""
    port: Port | None = None
    """With ``command``: the port the server listens on (``PORT`` in its environment, and
    ``{port}`` in the command and the endpoint). Default: a free loopback port when
    ``endpoint`` holds ``{port}``, else the endpoint's port."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """With ``command``: added to ATP's environment for the server."""
    cwd: str | None = None
    """With ``command``: the server's working folder, relative to the file defining the agent
    (default: that file's folder)."""
    health_timeout: Seconds = 15.0
    """With ``command``: seconds the server has to answer ``GET /health`` once started."""
    stop_grace: Grace = 2.0
    """With ``command``: seconds between SIGTERM and SIGKILL when the server is stopped."""

    def __post_init__(self) -> None:
        endpoint = self.endpoint
        if PORT_FIELD in endpoint:
            if self.command is None:
                raise ValueError(
                    "'endpoint' holds {port}, the port of the agent server ATP starts, but there is no "
                    "'command' to start one"
                )
            self.endpoint = endpoint.replace(PORT_FIELD, "1")  # (any port: the rest of the URL is checked)
            try:
                super().__post_init__()
            finally:
                self.endpoint = endpoint
        else:
            super().__post_init__()
        if self.command is None:
            for name in ("port", "cwd"):
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is for the agent server ATP starts: it needs 'command'")
            if self.env:
                raise ValueError("'env' is for the agent server ATP starts: it needs 'command'")
        else:
            check_command(self.command)
            check_cwd(self.cwd)
            check_env(self.env, PORT_VARIABLE)
            if self.port is not None:
                check_whole("port", self.port, 1, 65535)
            check_seconds("health_timeout", self.health_timeout)
            check_grace(self.stop_grace)
        for name in ("action", "from_agent"):
            if not getattr(self, name):
                raise ValueError(f"'{name}' is empty")
        for name in ("to_agent", "payload_key", "input_key"):
            if getattr(self, name) == "":
                raise ValueError(f"'{name}' is empty (leave it out, or null)")
        if self.input_key is not None and self.input_key == self.payload_key:
            raise ValueError("'input_key' and 'payload_key' name the same payload member")
        check_seconds("discovery_timeout", self.discovery_timeout)


# --- the standard's answers ------------------------------------------------------------------

ToolName = Annotated[str, msgspec.Meta(min_length=1)]


class A2AAnswer(msgspec.Struct, kw_only=True):
    """The answer to ``POST /a2a/message`` (fields ATP does not read are ignored)."""

    success: bool
    result: Any = None
    error: str | None = None
    tools_used: list[ToolName] = msgspec.field(default_factory=list)


class ToolAnswer(msgspec.Struct, kw_only=True):
    """The answer to ``POST /mcp/execute/{tool_name}``."""

    success: bool
    result: Any = None
    error: str | None = None


_a2a_decoder = msgspec.json.Decoder(A2AAnswer)
_tool_decoder = msgspec.json.Decoder(ToolAnswer)

_HEALTH_STATUS = {"type": "string", "enum": list(HEALTH_STATES)}
_STATUS_FIELDS: dict[str, Any] = {
    "status": _HEALTH_STATUS,
    "uptime_seconds": {"type": "integer"},
    "request_count": {"type": "integer"},
    "error_count": {"type": "integer"},
    "error_rate": {"type": "number"},
}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema: every listed field required, with its type; other fields allowed."""
    return {"type": "object", "properties": properties, "required": list(properties)}


SCHEMAS: dict[str, dict[str, Any]] = {
    "agent-card": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "GET /agent-card (Agent Interface Standard v1.0)",
        **_object(
            {
                "agent_id": {"type": "string", "minLength": 1},
                "name": {"type": "string"},
                "description": {"type": "string"},
                "capabilities": {"type": "array", "items": {"type": "string"}},
                "tags": {"type": "array", "items": {"type": "string"}},
                "tools": {
                    "type": "array",
                    "items": _object(
                        {"name": {"type": "string", "minLength": 1}, "description": {"type": "string"}}
                    ),
                },
                "status": _object(_STATUS_FIELDS),
                "metadata": _object(
                    {
                        "llm_model": {"type": "string"},
                        "semantic_tool_selection": {"type": "boolean"},
                        "version": {"type": "string"},
                    }
                ),
            }
        ),
    },
    "health": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "GET /health (Agent Interface Standard v1.0)",
        **_object(
            {
                **_STATUS_FIELDS,
                "last_error": {"type": ["string", "null"]},
                "llm_available": {"type": "boolean"},
                "timestamp": {"type": "string", "format": "date-time"},
            }
        ),
    },
    "mcp-tools": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "GET /mcp/tools (Agent Interface Standard v1.0)",
        **_object(
            {
                "tools": {
                    "type": "array",
                    "items": _object(
                        {
                            "name": {"type": "string", "minLength": 1},
                            "description": {"type": "string"},
                            "parameters": {
                                "type": "object",
                                "properties": {
                                    "type": {"const": "object"},
                                    "properties": {
                                        "type": "object",
                                        "additionalProperties": _object(
                                            {
                                                "type": {
                                                    "enum": ["string", "number", "boolean", "object", "array"]
                                                },
                                                "description": {"type": "string"},
                                            }
                                        ),
                                    },
                                    "required": {"type": "array", "items": {"type": "string"}},
                                },
                                "required": ["type", "properties", "required"],
                            },
                            "returns": {"type": "string"},
                            "examples": {"type": "array", "items": {"type": "string"}},
                        }
                    ),
                },
                "agent_id": {"type": "string"},
                "agent_name": {"type": "string"},
            }
        ),
    },
}
"""The JSON Schemas (2020-12) of the discovery answers, written from the standard: every field it
lists is required, with the type it gives (``"integer"`` an integer, ``"float"`` a number, an
ISO 8601 ``timestamp`` a date-time); fields it does not list are allowed."""

CHECKED = {
    "agent-card": ("/agent-card", "agent card schema"),
    "health": ("/health", "health schema"),
    "mcp-tools": ("/mcp/tools", "MCP tools schema"),
}
"""The conformance checks: name, the path they GET and their title."""


class Answer(NamedTuple):
    """An HTTP answer read whole (its body bounded by ``max_message_bytes``)."""

    where: str
    status: int
    phrase: str
    body: bytes
    headers: Any = None
    """The answer's headers (its ``Retry-After``)."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def _document(body: bytes) -> Any:
    """The JSON of a body; raises ValueError saying why it is not JSON."""
    try:
        return msgspec.json.decode(body)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def _json_or_none(body: bytes) -> Any:
    try:
        return _document(body)
    except ValueError:
        return None


def _health_of(document: Any, quote: Callable[[str], str] = str) -> Health | None:
    """The health a ``/health`` (or agent card ``status``) document reports, or ``None`` when it
    has no status of the standard's. ``quote`` makes its ``last_error`` (the agent's text) fit
    to be shown (masked, shortened)."""
    if not isinstance(document, dict) or document.get("status") not in HEALTH_STATES:
        return None
    parts = []
    rate, errors, requests = (
        document.get("error_rate"),
        document.get("error_count"),
        document.get("request_count"),
    )
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate):
        parts.append(f"error rate {rate:.0%}")
    if isinstance(errors, int) and isinstance(requests, int) and not isinstance(errors, bool):
        parts.append(
            f"{errors} error{'' if errors == 1 else 's'} in {requests} request{'' if requests == 1 else 's'}"
        )
    if document.get("llm_available") is False and document["status"] != "healthy":
        parts.append("LLM unavailable")
    last = document.get("last_error")
    if isinstance(last, str) and last:
        parts.append(f"last error: {quote(last)}")
    return Health(status=document["status"], detail=", ".join(parts))


def _wrapped(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else {"value": result}


def _context(request: ATPRequest) -> dict[str, Any]:
    context: dict[str, Any] = {"task_id": request.task_id}
    if request.constraints is not None:
        constraints = msgspec.to_builtins(request.constraints)
        if constraints:
            context["constraints"] = constraints
    return context


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
        self.endpoint = settings.endpoint
        """Where the agent is: the setting, with ``{port}`` replaced when ATP starts the server."""
        self.urls: dict[str, str] = {}
        self._use_endpoint(settings.endpoint)
        self.headers = request_headers(settings, JSON)  # type: ignore[arg-type]
        self.to_agent: str | None = settings.to_agent
        """The ``to_agent`` of the messages: the setting, or the card's ``agent_id`` at start."""
        self.card: dict[str, Any] | None = None
        """The agent card read at start (when it could be)."""
        self.started_health: Health | None = None
        """The agent's health at start."""
        self._client: Any = None
        self._tls: ssl.SSLContext | None = None
        self._prepared = False
        command = settings.command
        self.folder = (self.base_dir / settings.cwd).resolve() if settings.cwd else self.base_dir
        """With ``command``: the server's working folder, where relative paths are looked for."""
        self.argv = resolve_argv(command, self.folder) if command is not None else []
        self.command_line = command_line(command) if command is not None else ""
        self.env = {**os.environ, **settings.env}
        """The server's environment (``PORT`` is added at its start)."""
        self.server: Server | None = None
        """The agent server ATP started (``command``), while it runs."""
        self._log: LogFile | None = None
        self._aborted = False
        self._secrets = Masker(secret_values(settings))
        """The agent's own secrets (its headers', its endpoint's), masked in everything the adapter
        words itself, also where no run's masker is active."""

    def _quoted(self, text: str) -> str:
        """The agent's ``text`` as the adapter's errors and warnings quote it: masked, cut,
        printable (:func:`~atp.adapters.network.quoted`)."""
        return quoted(text, secrets=self._secrets)

    def _masked(self, text: str) -> str:
        """Text the adapter words (it may hold a URL with a secret query, a quote) masked with the
        agent's secrets and the run's."""
        return mask(self._secrets.text(text))

    def _warn_at_start(self, message: str) -> None:
        logger.warning("%s", self._masked(message))

    def _use_endpoint(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.urls = {
            path: with_path(endpoint, path)
            for path in ("/agent-card", "/health", "/mcp/tools", "/a2a/message")
        }

    # --- lifecycle -------------------------------------------------------------------------

    def _prepare(self) -> None:
        if not self._prepared:
            self._httpx = require("httpx", install=_INSTALL, feature="the agent-interface adapter")
            self._tls = tls_context(self.settings, self.base_dir, agent=self.name)
            self._prepared = True

    def _new_client(self) -> Any:
        return http_client(self._httpx, connect_timeout=self.settings.connect_timeout, tls=self._tls)

    async def start(self) -> None:
        """Start the agent server when ATP starts it (``command``: :meth:`_start_server`), then
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
        self._prepare()
        if self.settings.command is not None and self.server is None:
            await self._start_server()
        client = self._new_client()
        try:
            await self._discover(client)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if not isinstance(exc, AgentUnhealthy):
                    await self._stop_server()
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
        answer = await self._get(client, "/agent-card")
        if not answer.ok:
            raise AgentError(
                f"{answer.where} answered HTTP {answer.status} {answer.phrase}".rstrip(), evidence=answer.body
            )
        try:
            card = _document(answer.body)
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
            await self._stop_server()

    def abort(self) -> None:
        """SIGKILL the agent server ATP started, and everything it started, at once."""
        self._aborted = True
        abort_all(self)

    # --- the agent server ATP starts (command) -----------------------------------------------

    def _server_port(self) -> int:
        """``port``; else a free port of the endpoint's host when the endpoint holds ``{port}``;
        else the endpoint's port."""
        settings = self.settings
        if settings.port is not None:
            return settings.port
        parts = urlsplit(settings.endpoint.replace(PORT_FIELD, "1"))
        host = parts.hostname or "127.0.0.1"
        if PORT_FIELD not in settings.endpoint:
            return parts.port or (443 if parts.scheme.lower() == "https" else 80)
        try:
            return free_port(host)
        except OSError as exc:
            raise AdapterError(
                f"agent {self.name!r}: cannot find a free port on {host} for {SERVER} "
                f"({exc.strerror or exc}); give it one with 'port'",
                retryable=False,
            ) from None

    async def _start_server(self) -> None:
        """Start ``command`` in :attr:`folder` with ``PORT`` (and ``{port}``), its output to a
        temporary log file, and wait until ``GET /health`` answers. Raises AdapterError (the
        server stopped) when it cannot start, exits first or does not answer in time."""
        settings = self.settings
        await check_startable(self.argv, self.folder, self.env, agent=self.name, command=self.command_line)
        number = self._server_port()
        port = str(number)
        self._use_endpoint(settings.endpoint.replace(PORT_FIELD, port))
        await self._check_port_free(number)
        argv = [arg.replace(PORT_FIELD, port) for arg in self.argv]
        log = LogFile(self.name, self._secrets)
        try:
            server = Server.launch(
                argv, cwd=self.folder, env=encoded({**self.env, PORT_VARIABLE: port}), owner=self, what=SERVER
            )
        except OSError as exc:
            log.close()
            raise AdapterError(
                f"agent {self.name!r}: cannot start {self.command_line!r} in {self.folder}: {exc.strerror or exc}",
                retryable=lacks_resources(exc),
            ) from None
        server.log_path = log.path
        self.server, self._log = server, log
        try:
            server.read_output(log.log)
            await self._wait_healthy(server, log)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._stop_server()
            raise

    async def _check_port_free(self, port: int) -> None:
        """Refuse to start the server on a port of the endpoint that another program listens on
        already (a fixed ``port``, or the endpoint's own): discovery and every run would go to
        that program, not to the server ATP starts. A port ATP found free itself is not tested."""
        settings = self.settings
        if settings.port is None and PORT_FIELD in settings.endpoint:
            return  # (a free port, found just now)
        try:
            parts = urlsplit(self.endpoint)
            host, endpoint_port = (
                parts.hostname,
                parts.port or (443 if parts.scheme.lower() == "https" else 80),
            )
        except ValueError:
            return
        if not host or endpoint_port != port:
            return  # (the endpoint is elsewhere: a proxy in front of the server, say)
        if await anyio.to_thread.run_sync(port_in_use, host, port):
            raise AdapterError(
                f"agent {self.name!r}: port {port} on {host} (the endpoint's) is in use by another program "
                f"already: ATP would send discovery and the runs to it, not to the server it starts ('command'); "
                f"stop that program, or write {PORT_FIELD} in 'endpoint' and leave 'port' out (a free port)",
                retryable=False,
            )

    async def _wait_healthy(self, server: Server, log: LogFile) -> None:
        """Until ``GET /health`` answers: any answer but a ``503``. A server still answering
        ``503`` with a health report of the standard's at ``health_timeout`` is left to
        discovery, which refuses it as unhealthy saying what it reported."""
        httpx = self._httpx
        url = self.urls["/health"]
        reported = False
        client = self._new_client()

        async def probe(limit: float) -> HealthProbe:
            nonlocal reported
            try:
                with anyio.fail_after(limit):
                    answer = await self._read(client, "GET", url, None, None, DISCOVERY_BYTES)
            except TimeoutError:
                return HealthProbe(False, f"no answer within {limit:g} s")
            except request_errors(httpx) as exc:
                return HealthProbe(
                    False, http_failure(httpx, exc, url, connect_timeout=self.settings.connect_timeout).words
                )
            except AgentError:  # (a redirect, a flood: an answer, which discovery reports)
                return HealthProbe(True)
            if answer.status != 503:
                return HealthProbe(True)
            reported = _health_of(_json_or_none(answer.body)) is not None
            return HealthProbe(False, f"HTTP {answer.status} {answer.phrase}".rstrip(), answer.body or None)

        try:
            await server.wait_healthy(
                probe,
                url=shown_url(url),
                timeout=self.settings.health_timeout,
                interval=HEALTH_INTERVAL,
                request_timeout=self.settings.discovery_timeout,
            )
        except NotHealthy as exc:
            if reported:
                return
            log.keep = True
            raise AdapterError(
                f"agent {self.name!r}: {with_evidence(exc, secrets=self._secrets)}{self._log_end(server, log)}"
            ) from None
        except AgentError as exc:  # it exited
            log.keep = True
            raise AdapterError(
                f"agent {self.name!r}: {with_evidence(exc, TAIL_CHARS, self._secrets)}"
            ) from None
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()

    def _log_end(self, server: Server, log: LogFile) -> str:
        tail = server.output.log_tail() if server.output is not None else None
        if tail is None:
            return f"; its log ({log.path}) is empty"
        return f"; its log ({log.path}) ends with: {quoted(tail, TAIL_CHARS, secrets=self._secrets)}"

    async def _stop_server(self) -> None:
        """Stop the agent server ATP started (SIGTERM, SIGKILL after ``stop_grace``); remove its
        log unless an error named it."""
        server, self.server = self.server, None
        log, self._log = self._log, None
        if server is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await server.stop(self.settings.stop_grace, self._warn, aborted=lambda: self._aborted)
            finally:
                if log is not None:
                    log.close()

    def _warn(self, message: str) -> None:
        logger.warning("agent %r: %s", self.name, message)

    async def _server_exited(self, *, wait: bool) -> AgentError | None:
        """The agent server ATP started has exited: the error saying so (``wait``: give it
        :data:`EXIT_NOTICE_SECONDS` to be seen exiting, after a request it did not answer)."""
        server = self.server
        if server is None or server.output is None:
            return None
        if wait:
            with anyio.move_on_after(EXIT_NOTICE_SECONDS):
                await server.output.ended.wait()
        failed = server.exited("while ATP ran the tests")
        if failed is not None and self._log is not None:
            self._log.keep = True
        return failed

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
        self._prepare()
        temporary = self.settings.command is not None and self.server is None
        if temporary:
            await self._start_server()
        client = self._new_client()
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if temporary:
                    await self._stop_server()

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
            answer = await self._get(client, "/health")
        except AdapterError as exc:
            return Health(status="unreachable", detail=str(exc)), False
        except _Failed as exc:
            return Health(status="unhealthy", detail=_failed_words(exc.where, exc.reason)), False
        except AgentError as exc:
            return Health(status="unhealthy", detail=_failed_words("GET /health", exc.message)), False
        health = _health_of(_json_or_none(answer.body), self._quoted)
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
        validators = _validators()
        checks: list[ConformanceCheck] = []
        documents: dict[str, Any] = {}
        try:
            async with self._opened() as client:
                for name, (path, title) in CHECKED.items():
                    checks.append(
                        await self._conforms(client, name, path, title, validators[name], documents)
                    )
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
        return _with_notes(checks, documents)

    async def _conforms(
        self, client: Any, name: str, path: str, title: str, validator: Any, documents: dict[str, Any]
    ) -> ConformanceCheck:
        fix = f"answer GET {path} with every field {STANDARD} lists for it, of the type it gives"
        try:
            answer = await self._get(client, path)
        except (AdapterError, AgentError) as exc:
            if isinstance(exc, AgentError):  # (an answer too large, cut, late, a redirect)
                seen, message = (_with_evidence(exc),), f"GET {path} got no usable answer"
            else:
                seen, message = (str(exc),), f"GET {path} got no answer"
            return ConformanceCheck(name=name, title=title, passed=False, message=message, seen=seen, fix=fix)
        # (a large answer takes long to check: on a worker thread, the validation's time limit holds)
        return await anyio.to_thread.run_sync(
            self._conforming, answer, name, path, title, validator, documents, fix, abandon_on_cancel=True
        )

    @staticmethod
    def _conforming(
        answer: Answer, name: str, path: str, title: str, validator: Any, documents: dict[str, Any], fix: str
    ) -> ConformanceCheck:
        """The check of one answer against its schema (blocking: a worker thread)."""
        notes: tuple[str, ...] = ()
        if not answer.ok and name == "health" and _health_of(_json_or_none(answer.body)) is not None:
            # (an unhealthy agent may answer its report with a 503: the report is what counts)
            notes = (f"GET {path} answered HTTP {answer.status} with its report",)
        elif not answer.ok:
            return ConformanceCheck(
                name=name,
                title=title,
                passed=False,
                message=f"GET {path} answered HTTP {answer.status} {answer.phrase}".rstrip(),
                seen=(_text(answer.body),) if answer.body else (),
                fix=f"{STANDARD} requires GET {path}: answer it with status 200",
            )
        try:
            document = _document(answer.body)
        except ValueError as exc:
            return ConformanceCheck(
                name=name,
                title=title,
                passed=False,
                message=f"GET {path}: the answer is not JSON ({exc})",
                seen=(_text(answer.body),),
                fix=fix,
            )
        found = list(itertools.islice(validator.iter_errors(document), MAX_PROBLEMS + 1))
        errors = sorted(found[:MAX_PROBLEMS], key=lambda e: (list(map(str, e.absolute_path)), e.message))
        if errors:
            count = len(errors)
            problems = (
                f"over {MAX_PROBLEMS} problems"
                if len(found) > MAX_PROBLEMS
                else f"{count} problem{'s' if count != 1 else ''}"
            )
            return ConformanceCheck(
                name=name,
                title=title,
                passed=False,
                message=f"GET {path} breaks the standard's schema ({problems})",
                seen=tuple(f"at {error.json_path}: {error.message}" for error in errors[:5])
                + (
                    (f"... and {'over ' if len(found) > MAX_PROBLEMS else ''}{count - 5} more",)
                    if count > 5
                    else ()
                ),
                fix=fix,
            )
        documents[name] = document
        return ConformanceCheck(
            name=name, title=title, passed=True, message=_summary(name, document), notes=notes
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
        failed = await self._server_exited(wait=False)
        if failed is not None:
            raise failed
        try:
            return await self._execute(client, request, sink)
        except (AdapterError, AgentError) as exc:
            # (a server that did not answer may be exiting: it is given a moment to be seen so)
            failed = await self._server_exited(wait=isinstance(exc, (AdapterError, _Cut)))
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
        answer = await self._post(client, self.urls["/a2a/message"], message)
        seconds = time.perf_counter() - started
        try:
            reply = _a2a_decoder.decode(answer.body)
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
        url = with_path(self.endpoint, "/mcp/execute/" + quote(tool, safe=""))
        started = time.perf_counter()
        answer = await self._post(client, url, {"parameters": parameters, "context": _context(request)})
        seconds = time.perf_counter() - started
        try:
            reply = _tool_decoder.decode(answer.body)
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

    # --- HTTP ------------------------------------------------------------------------------

    async def _get(self, client: Any, path: str) -> Answer:
        """``GET`` a discovery path, whatever its status: the whole exchange within
        ``discovery_timeout`` (httpx's timeouts are per read, which an answer sent a byte at a
        time never runs out of), the answer read up to :data:`DISCOVERY_BYTES`. Raises
        :class:`_Failed` saying ``no answer within ... (discovery_timeout)`` when it takes longer."""
        seconds = self.settings.discovery_timeout
        url = self.urls[path]
        try:
            with anyio.fail_after(seconds):
                return await self._exchange(client, "GET", url, None, DISCOVERY_BYTES)
        except TimeoutError:
            raise _Failed(
                f"GET {shown_url(url)}", f"no answer within {seconds:g} s (discovery_timeout)"
            ) from None

    async def _post(self, client: Any, url: str, body: dict[str, Any]) -> Answer:
        """``POST`` JSON; an answer that is not a 2xx is the agent's refusal or failure, or (a 429,
        502, 503 or 504) a transient fault of the infrastructure."""
        answer = await self._exchange(client, "POST", url, msgspec.json.encode(body))
        if not answer.ok:
            if is_transient(answer.status):
                raise transient_fault(
                    self.name, answer.where, answer.status, answer.phrase, answer.headers, answer.body
                )
            raise refusal(answer.where, answer.status, answer.phrase, answer.body)
        return answer

    async def _exchange(
        self, client: Any, method: str, url: str, content: bytes | None, cap: int | None = None
    ) -> Answer:
        """:meth:`_read`, its transport's errors worded as the network adapters word them
        (:func:`~atp.adapters.network.http_failure`): no connection is an AdapterError (the
        agent cannot be reached); a URL httpx will not send an AdapterError; a connection cut
        before the whole answer a :class:`_Cut`."""
        httpx = self._httpx
        where = f"{method} {shown_url(url)}"
        try:
            return await self._read(client, method, url, content, None, cap)
        except request_errors(httpx) as exc:
            failure = http_failure(httpx, exc, url, connect_timeout=self.settings.connect_timeout)
            if failure.kind == "connect":
                raise unreachable(
                    self.name, url, exc, connect_timeout=self.settings.connect_timeout
                ) from None
            if failure.kind == "url":
                raise AdapterError(f"{where}: {failure.words}", retryable=False) from None
            if failure.kind == "decode":
                raise _Failed(where, failure.words) from None
            raise _Cut(where, f"the connection was cut before the whole answer ({failure.words})") from None

    async def _read(
        self, client: Any, method: str, url: str, content: bytes | None, timeout: Any, cap: int | None = None
    ) -> Answer:
        """One request and its answer read whole (bounded by ``max_message_bytes``, or ``cap``
        when less; an error answer by :data:`~atp.adapters.network.ERROR_BODY_BYTES`). Raises
        the httpx errors, and :class:`_Failed` for a redirect or an answer over the limit."""
        httpx = self._httpx
        where = f"{method} {shown_url(url)}"
        limit = self.settings.max_message_bytes
        setting = "max_message_bytes"
        if cap is not None and cap < limit:
            limit, setting = cap, f"the most ATP reads of a discovery answer, {cap // MiB} MiB"
        options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        async with client.stream(method, url, content=content, headers=self.headers, **options) as answer:
            status = answer.status_code
            phrase = httpx.codes.get_reason_phrase(status)
            if answer.is_redirect:
                raise _Failed(where, redirect_words(status, answer.headers.get("location", "")))
            if 200 <= status < 300:
                body = await read_body(answer, limit, lambda: _flooded(where, limit, setting))
            else:
                body = await read_some(answer, ERROR_BODY_BYTES)
            return Answer(where, status, phrase, body, answer.headers)


# --- helpers ---------------------------------------------------------------------------------


class _Failed(AgentError):
    """A request that got no usable answer: ``where`` (``GET http://host/health``) and why
    (``reason``)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class _Cut(_Failed):
    """The connection was cut before the whole answer (the agent may have exited)."""


def _flooded(where: str, limit: int, setting: str = "max_message_bytes") -> _Failed:
    return _Failed(where, f"the agent sent more than {limit} bytes in one answer ({setting})")


def _failed_words(where: str, reason: str) -> str:
    """A health request that failed, as its health's detail: not a report of the agent's."""
    hint = "" if "'endpoint'" in reason else "; is 'endpoint' right?"
    return f"{where} failed: {reason}{hint}"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _evidence(exc: AgentError) -> str:
    evidence = exc.evidence
    return _text(evidence) if isinstance(evidence, bytes) else str(evidence)


def _with_evidence(exc: AgentError) -> str:
    return exc.message + (f": {_evidence(exc)}" if exc.evidence is not None else "")


def _health_words(status: str) -> str:
    if status == "unknown":
        return "its health cannot be read"
    return f"reports itself {status}"


_VALIDATORS: dict[str, Any] = {}


def _validators() -> dict[str, Any]:
    """A jsonschema validator per schema of :data:`SCHEMAS` (made once; jsonschema is imported
    only when the conformance checks run)."""
    if not _VALIDATORS:
        jsonschema = require("jsonschema", install=_INSTALL, feature="the agent-interface conformance checks")
        checker = jsonschema.FormatChecker(formats=())

        @checker.checks("date-time", raises=ValueError)
        def _date_time(value: Any) -> bool:
            if isinstance(value, str):
                from datetime import datetime

                datetime.fromisoformat(value)
            return True

        for name, schema in SCHEMAS.items():
            _VALIDATORS[name] = jsonschema.Draft202012Validator(schema, format_checker=checker)
    return _VALIDATORS


def _summary(name: str, document: dict[str, Any]) -> str:
    """What a conforming answer says, in a few words."""
    if name == "agent-card":
        tools = len(document["tools"])
        return f"agent {document['agent_id']!r} ({document['name']}), {tools} tool{'s' if tools != 1 else ''}"
    if name == "health":
        health = _health_of(document)
        assert health is not None
        return f"status {health.status}" + (f": {health.detail}" if health.detail else "")
    names = [tool["name"] for tool in document["tools"]]
    shown = ", ".join(names[:SHOWN_TOOLS]) + (
        f" and {len(names) - SHOWN_TOOLS} more" if len(names) > SHOWN_TOOLS else ""
    )
    return f"{len(names)} tool{'s' if len(names) != 1 else ''}" + (f": {shown}" if names else "")


def _with_notes(checks: list[ConformanceCheck], documents: dict[str, Any]) -> list[ConformanceCheck]:
    """Notes on answers that conform but disagree: a health status its error rate does not
    bear out, an agent card whose tools are not those of ``/mcp/tools``."""
    notes: dict[str, list[str]] = {}
    health = documents.get("health")
    if health is not None:
        rate, status = health["error_rate"], health["status"]
        expected = "healthy" if rate < 0.1 else "degraded" if rate <= 0.5 else "unhealthy"
        if status != expected:
            notes.setdefault("health", []).append(
                f"status {status} with error rate {rate:.0%}: the standard calls that {expected} "
                "(healthy below 10%, degraded 10-50%, unhealthy above 50%)"
            )
    card, tools = documents.get("agent-card"), documents.get("mcp-tools")
    if card is not None and tools is not None:
        listed = sorted({tool["name"] for tool in card["tools"]})
        served = sorted({tool["name"] for tool in tools["tools"]})
        if listed != served:
            notes.setdefault("mcp-tools", []).append(
                f"the agent card lists the tools {listed}, GET /mcp/tools {served}"
            )
    if not notes:
        return checks
    return [msgspec.structs.replace(c, notes=(*c.notes, *notes.get(c.name, ()))) for c in checks]
