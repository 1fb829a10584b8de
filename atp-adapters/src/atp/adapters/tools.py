"""The mock tool server: the ``tools`` service, ATP's side of the protocol's Tool Protocol.

A test (or the suite's ``defaults``) declares the tools the agent may call; ATP serves them on
loopback for each run and tells the agent where, in the request's ``context.tools_endpoint``::

    tools:
      - name: web_search
        output: {results: [{title: "Acme", url: "https://example.com"}]}     # a fixed output
      - name: lookup
        responses:                        # by input: the first whose match fits, else the default
          - match: {input: {id: 1}}
            output: {name: "one"}
          - output: {name: "other"}       # no match: the default
      - name: flaky_api
        sequence:                         # per call, in order; the last one repeats
          - error: {code: TOOL_ERROR, message: "busy", status: 503}
          - output: {ok: true}
      - name: weather
        proxy: "https://tools.internal/weather"   # the real tool, its calls recorded
        timeout_seconds: 10                        # for the proxied call (default 30)
      - name: broken
        error: {message: "down for maintenance"}   # a fixed error
        delay_ms: 250                              # any tool: answer after this long

Exactly one of ``output``, ``error``, ``responses``, ``sequence`` and ``proxy`` per tool. An
answer (of ``responses`` or ``sequence``) is ``output`` or ``error``, and may have its own
``delay_ms``. An ``error`` is ``{code, message, status, details}``: ``code`` one of the protocol's
standard error codes (``TOOL_ERROR`` by default), ``status`` the HTTP status (by default 500 for
``TOOL_ERROR``, see :data:`DEFAULT_STATUS`).

``match: {input: PATTERN}`` fits a call whose input contains the pattern: a mapping fits a
mapping that has each of its keys with a value the pattern's value fits (other keys may be
there); a list fits a list of the same length, item by item; a number fits an equal number
(``1`` fits ``1.0``), and anything else only an equal value of its own type (``true`` is not
``1``, ``"1"`` is not ``1``; quote dates, which YAML reads as dates).

The wire, per the Tool Protocol: ``POST {tools_endpoint}/<name>``, the run's endpoint ending in
``/tools`` as the protocol's ``http://test-harness:8080/tools`` does (a call is ``POST
/runs/<token>/tools/<name>``), with the JSON body ``{"task_id": "...", "input": {...}}``. The
older spelling ``{tools_endpoint}/tools/<name>`` (``/runs/<token>/tools/tools/<name>``), of
agents written when ATP's endpoint did not end in ``/tools``, is served the same (see
:func:`tool_segment`). The answer is ``200 {"status": "success", "output": ..., "duration_ms":
12.5}`` or, with the HTTP status of the error, ``{"status": "error", "error": "...",
"error_code": "TOOL_ERROR", "error_details": {...}, "duration_ms": ...}``. A tool the test does
not declare, or one outside the request's ``constraints.allowed_tools``, is answered ``404
TOOL_NOT_FOUND`` with ``error_details: {tool, available_tools}``; a body that is not a JSON
object, ``400 INVALID_REQUEST``; another method than POST, ``405 INVALID_REQUEST``; a path that
is no tool's address, ``404 INVALID_REQUEST`` and a warning on the run.
A ``task_id`` in the body other than the run's is a warning on the run (the call is answered).

Every call to a tool address is recorded in the run's trace as a ``tool_call`` event (tool,
input, output, duration_ms, status ``success`` or ``error``, error ``CODE: message``), masked like
every event, also for agents that send no events. These recordings are authoritative: a
``tool_call`` event the agent reports itself for a tool the server answered in that run is left
out, so no call is counted twice.

One HTTP/1.1 server (keep-alive, on asyncio, HTTP parsed by h11) per ``atp test``, started on
first use, bound to 127.0.0.1 on a port the OS chooses. Each run has its own address,
``http://127.0.0.1:PORT/runs/<token>/tools`` with an unguessable token: parallel runs have separate
recordings, and the address of a run that ended answers 404. When the run ends, its connections
are closed and the calls in progress abandoned. Settings (module constants):
:data:`MAX_BODY_BYTES`, :data:`MAX_HEADER_BYTES`, :data:`READ_TIMEOUT_SECONDS`,
:data:`WRITE_TIMEOUT_SECONDS`, :data:`MAX_CONNECTIONS`.

A proxied tool gets the call's body as the agent sent it (``task_id`` and ``input``) by POST. An
answer in the Tool Protocol's form is passed on as it is; any other JSON of a 2xx answer is the
output. A non-2xx answer, a body that is not JSON or is too large, or a tool that cannot be
reached becomes a ``TOOL_ERROR`` (``TIMEOUT`` when it did not answer in time), recorded.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, cast
from urllib.parse import unquote

import anyio
import msgspec

from atp.core.error_codes import StandardCode
from atp.core.plugins import require
from atp.core.protocol import ATPRequest, ToolCallPayload
from atp.core.secrets import Masker
from atp.core.service import Recorder, Service, ServiceConfigError, with_context
from atp.core.text import shorten

HOST = "127.0.0.1"
MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request body a tool call may have (and the largest answer a proxied tool may
give): 16 MiB. A larger one is answered 413 and the connection closed."""
MAX_HEADER_BYTES = 64 * 1024
"""The largest request line and headers of a call: 64 KiB (answered 431 beyond)."""
READ_TIMEOUT_SECONDS = 30.0
"""How long a connection may take to send one whole request (and may stay idle between
requests): a slow or stuck client is disconnected after it, and never holds up another."""
WRITE_TIMEOUT_SECONDS = 30.0
"""How long a client may take to read an answer before it is disconnected."""
MAX_CONNECTIONS = 1000
"""Connections open at once, for all runs; past it, the oldest connection that has called no
tool yet is closed for a new one (else the new one is)."""
MAX_RUN_CONNECTIONS = 100
"""Connections one run's calls may come on at once: a call on one more is answered 429, so one
run's agent cannot hold the connections every run shares."""
READ_SIZE = 64 * 1024
DEFAULT_PROXY_TIMEOUT = 30.0

ErrorCode = StandardCode
DEFAULT_STATUS: dict[str, int] = {
    "INVALID_REQUEST": 400,
    "TOOL_NOT_FOUND": 404,
    "TOOL_ERROR": 500,
    "LLM_ERROR": 502,
    "TIMEOUT": 504,
    "BUDGET_EXCEEDED": 429,
    "INTERNAL_ERROR": 500,
}
"""The HTTP status of each error code when the error names none."""
ERROR_CODES = frozenset(DEFAULT_STATUS)

ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}$")]
HttpStatus = Annotated[int, msgspec.Meta(ge=400, le=599)]
DelayMs = Annotated[float, msgspec.Meta(ge=0, le=600_000)]
ProxyUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s/]+", max_length=2000)]
ProxyTimeout = Annotated[float, msgspec.Meta(gt=0, le=3600)]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    pass


class ToolError(_Strict, kw_only=True):
    """An error a tool answers with."""

    code: ErrorCode = "TOOL_ERROR"
    message: str = "the tool failed"
    status: HttpStatus | None = None
    """The HTTP status (default: by code, :data:`DEFAULT_STATUS`)."""
    details: dict[str, Any] | None = None
    """Sent as ``error_details``."""

    @property
    def http_status(self) -> int:
        return self.status if self.status is not None else DEFAULT_STATUS[self.code]


class Answer(_Strict, kw_only=True):
    """One answer of a tool: an ``output`` or an ``error``."""

    output: Any = msgspec.UNSET
    error: ToolError | None = None
    delay_ms: DelayMs | None = None
    """Answer after this many milliseconds (instead of the tool's ``delay_ms``)."""

    def __post_init__(self) -> None:
        if (self.output is msgspec.UNSET) == (self.error is None):
            raise ValueError("an answer has exactly one of 'output' and 'error'")


class Match(_Strict, kw_only=True):
    input: Any
    """A pattern the call's input must contain (see the module)."""


class Response(Answer, kw_only=True):
    """An answer of ``responses``: used when ``match`` fits the call; without ``match``, the
    default."""

    match: Match | None = None


class Tool(_Strict, kw_only=True):
    """A tool the agent may call, and how it answers."""

    name: ToolName
    description: str | None = None
    output: Any = msgspec.UNSET
    error: ToolError | None = None
    responses: Annotated[list[Response], msgspec.Meta(min_length=1)] | None = None
    sequence: Annotated[list[Answer], msgspec.Meta(min_length=1)] | None = None
    proxy: ProxyUrl | None = None
    timeout_seconds: ProxyTimeout | None = None
    """How long a proxied call may take (default 30 s)."""
    delay_ms: DelayMs = 0

    def __post_init__(self) -> None:
        given = [
            key
            for key, value in (
                ("output", self.output is not msgspec.UNSET),
                ("error", self.error is not None),
                ("responses", self.responses is not None),
                ("sequence", self.sequence is not None),
                ("proxy", self.proxy is not None),
            )
            if value
        ]
        if len(given) != 1:
            what = f"has {' and '.join(map(repr, given))}" if given else "has none"
            raise ValueError(
                f"tool {self.name!r} {what}: a tool has exactly one of 'output', 'error', 'responses', "
                f"'sequence' and 'proxy'"
            )
        if self.timeout_seconds is not None and self.proxy is None:
            raise ValueError(f"tool {self.name!r}: 'timeout_seconds' is for a tool with 'proxy'")
        if self.responses is not None and sum(r.match is None for r in self.responses) > 1:
            raise ValueError(f"tool {self.name!r} has more than one response without 'match' (the default)")


def matches(pattern: Any, value: Any) -> bool:
    """Whether ``value`` (a call's input) contains ``pattern`` (see the module). Recursion is
    bounded by the pattern, which comes from the suite (at most 64 levels deep)."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and matches(item, value[key]) for key, item in pattern.items()
        )
    if isinstance(pattern, list):
        return isinstance(value, list) and len(pattern) == len(value) and all(map(matches, pattern, value))
    if isinstance(pattern, bool) or isinstance(value, bool):
        return pattern is value
    if isinstance(pattern, (int, float)) and isinstance(value, (int, float)):
        return bool(pattern == value)
    return type(pattern) is type(value) and bool(pattern == value)


class ToolServer(Service):
    """The ``tools`` service (see the module)."""

    key = "tools"
    summary = "mock tools on loopback for the agent (context.tools_endpoint), every call recorded"
    Config = list[Tool]

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._port = 0
        self._runs: dict[str, _Run] = {}
        self._connections: dict[_Connection, None] = {}
        """The open connections, oldest first."""
        self._client: Any = None

    @classmethod
    def check(cls, config: list[Tool]) -> None:
        seen: dict[str, int] = {}
        for index, tool in enumerate(config):
            if tool.name in seen:
                raise ServiceConfigError(
                    f"duplicate tool name {tool.name!r} (first declared at tools[{seen[tool.name]}])",
                    (index, "name"),
                )
            seen[tool.name] = index

    async def start(self) -> None:
        require("h11", install="atp-adapters", feature="the mock tool server")
        self._server = await asyncio.start_server(self._serve, host=HOST, port=0)
        self._port = self._server.sockets[0].getsockname()[1]

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self._port}"

    @asynccontextmanager
    async def run(
        self, config: list[Tool], request: ATPRequest, recorder: Recorder
    ) -> AsyncIterator[ATPRequest]:
        if self._server is None:
            await self.start()
        allowed = request.constraints.allowed_tools if request.constraints is not None else None
        token = secrets.token_urlsafe(24)
        run = _Run(token, request.task_id, {tool.name: tool for tool in config}, allowed, recorder)
        recorder.serve_tools(run.tools)
        self._runs[token] = run
        try:
            yield with_context(request, tools_endpoint=f"{self.base_url}/runs/{token}/tools")
        finally:
            del self._runs[token]
            run.close()

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._connections):
            connection.close()
        if server is not None:
            await server.wait_closed()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # --- HTTP ---------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests answered one after the other (keep-alive) until the client
        closes it, breaks HTTP, is too slow, or the runs it called end."""
        task = asyncio.current_task()
        if task is None or self._server is None or not self._room():
            writer.close()
            return
        h11 = require("h11", install="atp-adapters", feature="the mock tool server")
        connection = _Connection(writer, task)
        self._connections[connection] = None
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        try:
            while True:
                try:
                    received = await asyncio.wait_for(_read(h11, conn, reader), READ_TIMEOUT_SECONDS)
                except asyncio.TimeoutError:
                    break
                except _TooLarge as exc:
                    await _send(h11, conn, writer, 413, _error_body("INVALID_REQUEST", str(exc)))
                    break
                except h11.RemoteProtocolError as exc:
                    status = getattr(exc, "error_status_hint", 400)
                    await _send(
                        h11,
                        conn,
                        writer,
                        status,
                        _error_body("INVALID_REQUEST", f"not valid HTTP/1.1: {exc}"),
                    )
                    break
                if received is None:
                    break
                connection.busy = True
                status, body = await self._answer(connection, *received)
                connection.busy = False
                if not await _send(h11, conn, writer, status, body) or conn.our_state is not h11.DONE:
                    break
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    break
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:  # the run ended (or the server closes): the call is abandoned
            pass
        finally:
            connection.close()
            self._connections.pop(connection, None)

    def _room(self) -> bool:
        """Whether another connection may open: below :data:`MAX_CONNECTIONS`, or once the
        oldest connection that never called a tool is closed (connections held open idle, by
        one run's agent or by anyone, never keep another run's agent out)."""
        if len(self._connections) < MAX_CONNECTIONS:
            return True
        idle = next((c for c in self._connections if not c.runs and not c.busy), None)
        if idle is None:
            return False
        idle.close()
        self._connections.pop(idle, None)
        return True

    async def _answer(self, connection: _Connection, request: Any, body: bytes) -> tuple[int, dict[str, Any]]:
        """The status and body of the answer to one request (recorded when it is a tool call)."""
        started = time.perf_counter()
        path = request.target.split(b"?", 1)[0]
        parts = path.split(b"/")
        run = (
            self._runs.get(parts[2].decode("ascii", "replace"))
            if len(parts) > 2 and parts[1] == b"runs"
            else None
        )
        if run is None or run.closed:
            return 404, _error_body(
                "TOOL_NOT_FOUND",
                "no run is served at this address (the run has ended, or the address is wrong)",
            )
        if connection not in run.connections and len(run.connections) >= MAX_RUN_CONNECTIONS:
            run.warn_once(
                "connections",
                f"the agent opened more than {MAX_RUN_CONNECTIONS} connections to the tool server at "
                f"once; the calls on the others were refused (429)",
            )
            return 429, _error_body("INVALID_REQUEST", f"at most {MAX_RUN_CONNECTIONS} connections per run")
        run.connections.add(connection)
        connection.runs.add(run)
        segment = tool_segment(parts)
        if segment is None:
            run.warn_once(
                "path",
                f"the agent asked the tool server for {shorten_path(path, run.masker)}, which is no tool's address",
            )
            return 404, _error_body("INVALID_REQUEST", "a tool is called at {tools_endpoint}/<name>")
        name = unquote(segment.decode("ascii", "replace"))
        shown = shorten(name, 200, run.masker)
        if request.method != b"POST":
            answer = _error(
                "INVALID_REQUEST",
                f"a tool is called with POST, not {request.method.decode('ascii', 'replace')}",
                405,
            )
            return run.finish(name, None, answer, started)
        try:
            call = msgspec.json.decode(body) if body else None
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError) as exc:
            return run.finish(
                name, None, _error("INVALID_REQUEST", f"the body is not valid JSON: {exc}"), started
            )
        if not isinstance(call, dict):
            answer = _error(
                "INVALID_REQUEST", 'the body must be a JSON object: {"task_id": "...", "input": {...}}'
            )
            return run.finish(name, call, answer, started)
        tool_input = call.get("input", {})
        task_id = call.get("task_id")
        if task_id != run.task_id:
            said = "no task_id" if task_id is None else f"task_id {shorten_path(str(task_id), run.masker)}"
            run.warn_once(
                "task_id", f"a call of tool {shown!r} carried {said}, not the run's task_id {run.task_id!r}"
            )
        tool = run.tools.get(name)
        if tool is None or (run.allowed is not None and name not in run.allowed):
            available = run.available()
            why = "is not declared for this test" if tool is None else "is not in the request's allowed_tools"
            answer = _error(
                "TOOL_NOT_FOUND",
                f"tool {shown!r} is not available: it {why}",
                details={"tool": name, "available_tools": available},
            )
            return run.finish(name, tool_input, answer, started)
        answer = await self._tool_answer(run, tool, call, tool_input)
        delay = answer.delay_ms if answer.delay_ms is not None else tool.delay_ms
        if delay:
            await asyncio.sleep(delay / 1000)
        return run.finish(name, tool_input, answer, started)

    async def _tool_answer(self, run: _Run, tool: Tool, call: dict[str, Any], tool_input: Any) -> Answer:
        if tool.output is not msgspec.UNSET or tool.error is not None:
            return Answer(output=tool.output) if tool.error is None else Answer(error=tool.error)
        if tool.responses is not None:
            default = None
            for response in tool.responses:
                if response.match is None:
                    default = default or response
                elif matches(response.match.input, tool_input):
                    return response
            if default is not None:
                return default
            return _error(
                "INVALID_REQUEST",
                f"no response of tool {tool.name!r} matches this input (and it has no default)",
            )
        if tool.sequence is not None:
            count = run.calls.get(tool.name, 0)
            run.calls[tool.name] = count + 1
            return tool.sequence[min(count, len(tool.sequence) - 1)]
        assert tool.proxy is not None
        return await self._proxy(
            tool.proxy, tool.timeout_seconds or DEFAULT_PROXY_TIMEOUT, call, run.task_id, tool_input
        )

    async def _proxy(
        self, url: str, timeout: float, call: dict[str, Any], task_id: str, tool_input: Any
    ) -> Answer:
        """The answer of the real tool at ``url`` to the call (see the module)."""
        httpx = require("httpx", install="atp-adapters", feature="the mock tool server's proxy")
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        body = msgspec.json.encode({"task_id": call.get("task_id", task_id), "input": tool_input})
        try:
            # (the whole call within the time limit: httpx's timeout bounds each read alone, so a
            # tool dripping a byte at a time would pass it)
            with anyio.fail_after(timeout):
                async with self._client.stream(
                    "POST", url, content=body, headers={"content-type": "application/json"}, timeout=timeout
                ) as reply:
                    data = bytearray()
                    async for chunk in reply.aiter_bytes():
                        data += chunk
                        if len(data) > MAX_BODY_BYTES:
                            return _error(
                                "TOOL_ERROR",
                                f"the tool at {url} answered more than {MAX_BODY_BYTES} bytes",
                                502,
                            )
                    status = reply.status_code
        except (httpx.TimeoutException, TimeoutError):
            return _error("TIMEOUT", f"the tool at {url} did not answer within {timeout:g} s")
        except httpx.HTTPError as exc:
            return _error(
                "TOOL_ERROR", f"the tool at {url} could not be reached: {type(exc).__name__}: {exc}", 502
            )
        try:
            answer = msgspec.json.decode(bytes(data))
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            return _error(
                "TOOL_ERROR", f"the tool at {url} answered HTTP {status} with a body that is not JSON", 502
            )
        protocol = isinstance(answer, dict) and answer.get("status") in ("success", "error")
        if 200 <= status < 300 and not (protocol and answer["status"] == "error"):
            return Answer(output=answer.get("output") if protocol else answer)
        code = answer.get("error_code") if isinstance(answer, dict) else None
        message = answer.get("error") if isinstance(answer, dict) else None
        details = answer.get("error_details") if isinstance(answer, dict) else None
        return _error(
            cast(ErrorCode, code) if code in ERROR_CODES else "TOOL_ERROR",
            message if isinstance(message, str) else f"the tool at {url} answered HTTP {status}",
            status if 400 <= status <= 599 else 502,
            details=details if isinstance(details, dict) else None,
        )


class _TooLarge(Exception):
    pass


class _Connection:
    """One client connection: closed (and its work abandoned) when a run it called ends."""

    __slots__ = ("busy", "closed", "runs", "task", "writer")

    def __init__(self, writer: asyncio.StreamWriter, task: asyncio.Task[Any]) -> None:
        self.writer = writer
        self.task = task
        self.runs: set[_Run] = set()
        self.closed = False
        self.busy = False
        """Whether a request of it is being read or answered."""

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.writer.close()
        for run in self.runs:
            run.connections.discard(self)
        if self.task is not asyncio.current_task():
            self.task.cancel()


class _Run:
    """One run the server serves: its tools, its calls so far, its connections."""

    def __init__(
        self, token: str, task_id: str, tools: dict[str, Tool], allowed: list[str] | None, recorder: Recorder
    ) -> None:
        self.token = token
        self.task_id = task_id
        self.tools = tools
        self.allowed = frozenset(allowed) if allowed is not None else None
        self.recorder = recorder
        self.masker: Masker | None = recorder.masker
        """The run's secrets (its trace's), masked in what the warnings quote of the agent before
        it is cut (a :class:`~atp.core.service.Recorder` has no masker of its own to ask)."""
        self.calls: dict[str, int] = {}
        self.connections: set[_Connection] = set()
        self.warned: set[str] = set()
        self.closed = False

    def available(self) -> list[str]:
        return [name for name in self.tools if self.allowed is None or name in self.allowed]

    def warn_once(self, topic: str, message: str) -> None:
        if topic not in self.warned:
            self.warned.add(topic)
            self.recorder.warn(message)

    def finish(
        self, tool: str, tool_input: Any, answer: Answer, started: float
    ) -> tuple[int, dict[str, Any]]:
        """Record the call and give the status and body of its answer."""
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        error = answer.error
        if not self.closed:
            self.recorder.record(
                ToolCallPayload(
                    tool=tool,
                    input=tool_input,
                    output=answer.output if error is None else None,
                    duration_ms=duration_ms,
                    status="success" if error is None else "error",
                    error=f"{error.code}: {error.message}" if error is not None else None,
                )
            )
        if error is None:
            return 200, {"status": "success", "output": answer.output, "duration_ms": duration_ms}
        body = _error_body(error.code, error.message, error.details)
        body["duration_ms"] = duration_ms
        return error.http_status, body

    def close(self) -> None:
        self.closed = True
        for connection in list(self.connections):
            connection.close()


def _error(
    code: ErrorCode, message: str, status: int | None = None, *, details: dict[str, Any] | None = None
) -> Answer:
    return Answer(error=ToolError(code=code, message=message, status=status, details=details))


def _error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"status": "error", "error": message, "error_code": code}
    if details is not None:
        body["error_details"] = details
    return body


def tool_segment(parts: list[bytes]) -> bytes | None:
    """The tool's name (still percent-encoded) in the segments of a path of a run,
    ``["", "runs", token, ...]``, or ``None`` when the path is no tool's address. A tool is
    called at ``/runs/<token>/tools/<name>`` (``{tools_endpoint}/<name>``, the protocol's
    spelling) or at ``/runs/<token>/tools/tools/<name>`` (``{tools_endpoint}/tools/<name>``, the
    older one). Unambiguous: a name has no ``/``, so ``/runs/<token>/tools/tools`` calls the tool
    named ``tools``, and a path of six segments is always the older spelling."""
    rest = parts[3:]
    if len(rest) == 2 and rest[0] == b"tools" and rest[1]:  # {tools_endpoint}/<name>
        return rest[1]
    if len(rest) == 3 and rest[:2] == [b"tools", b"tools"] and rest[2]:  # {tools_endpoint}/tools/<name>
        return rest[2]
    return None


def shorten_path(path: bytes | str, masker: Masker | None) -> str:
    """A path (or value) the agent sent, quoted for a warning: its secrets masked (``masker``,
    the run's) before it is cut to 200 characters, escaped."""
    text = path.decode("utf-8", "replace") if isinstance(path, bytes) else path
    return repr(shorten(text, 200, masker))


async def _read(h11: Any, conn: Any, reader: asyncio.StreamReader) -> tuple[Any, bytes] | None:
    """The next request and its body, or ``None`` when the client closed the connection."""
    request = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ_SIZE))
            continue
        if isinstance(event, h11.Request):
            request = event
            for name, value in event.headers:
                if name == b"content-length" and int(value) > MAX_BODY_BYTES:
                    raise _TooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes")
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise _TooLarge(f"the body is larger than {MAX_BODY_BYTES} bytes")
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None


async def _send(h11: Any, conn: Any, writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> bool:
    """Send one answer; ``False`` when it could not be (the connection is then closed)."""
    data = msgspec.json.encode(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    try:
        if conn.their_state is not h11.DONE:
            headers.append((b"connection", b"close"))
        out = conn.send(h11.Response(status_code=status, headers=headers))
        out += conn.send(h11.Data(data=data))
        out += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError:
        return False
    writer.write(out)
    try:
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_SECONDS)
    except (asyncio.TimeoutError, ConnectionError, OSError):
        return False
    return True
