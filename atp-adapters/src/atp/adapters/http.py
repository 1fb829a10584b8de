"""The ``http`` adapter: an agent behind an HTTP endpoint, answering synchronously or streaming its
events as Server-Sent Events (SSE). Settings (with those of :mod:`atp.adapters.network`)::

    agents:
      - name: my-agent
        type: http
        endpoint: http://127.0.0.1:8000      # http:// or https://
        stream: auto                         # auto (default), true or false
        headers: {Authorization: "Bearer ${AGENT_TOKEN}"}
        verify: true                         # TLS certificate verification; ca_bundle: a PEM file
        connect_timeout: 10                  # seconds to connect; the run's time limit governs the rest
        max_message_bytes: 52428800          # the most the agent may send in one run
        timeout: 120                         # seconds; the test's timeout_seconds applies too

The wire format:

- ``POST {endpoint}/execute`` with the ATP Request as its JSON body (``Content-Type:
  application/json``, ``Accept: application/vnd.atp.v1+json``): the agent answers with the ATP
  Response as its body (synchronous mode, ``stream: false``).
- ``POST {endpoint}/execute/stream`` with the same body (``Accept: text/event-stream,
  application/vnd.atp.v1+json``): the agent answers with an SSE stream (``Content-Type:
  text/event-stream``) whose messages each hold one JSON message in their ``data``: ATP Events
  as they happen, then the ATP Response, the last message ATP reads (``stream: true``). A
  message is the response when it has no ``event_type`` member or when its SSE event name is
  ``response`` (``event: response``); messages without data (keep-alives, comments) are ignored.
- ``stream: auto`` streams when the agent offers it: the first run posts to
  ``/execute/stream``, and when the agent answers 404 or 405 every run (this one too) uses
  ``/execute`` from then on. The decision is made once per ``atp test``, while the other runs
  wait for it.
- Whatever the URL, the answer's ``Content-Type`` says how it is read: ``text/event-stream`` as
  a stream, anything else as one ATP Response.
- ``GET {endpoint}/health`` for :meth:`HttpAdapter.health` and ``health_check`` (a 404, 405 or
  501 counts as healthy: the agent answered, it just has no health endpoint, which the protocol
  does not ask for; a server made only for its POSTs answers 405 or 501): ``unreachable`` when no
  connection opens, ``unhealthy`` saying what failed otherwise (an HTTP status, a redirect, no
  answer within :data:`HEALTH_SECONDS`).

One ``httpx.AsyncClient`` (one pool of keep-alive connections) per agent serves every run, also
with ``--parallel``; it is made in :meth:`HttpAdapter.start` and closed in
:meth:`HttpAdapter.aclose`. Redirects are not followed. When a run's time limit cancels it, its
connection is closed (the agent sees the client go); the events it sent stay in the trace.
Faults and their wording: see :mod:`atp.adapters.network`.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Literal, Union
from urllib.parse import urlsplit, urlunsplit

import anyio

from atp.adapters.network import (
    NetworkAdapter,
    NetworkSettings,
    http_client,
    http_failure,
    is_transient,
    read_body,
    read_some,
    redirect_words,
    refusal,
    request_errors,
    shown_url,
    tls_context,
    transient_fault,
    unreachable,
)
from atp.adapters.network_messages import Incoming
from atp.adapters.sse import MessageReader
from atp.core.adapter import Health
from atp.core.errors import AdapterError, AgentError, ProtocolError
from atp.core.plugins import require
from atp.core.protocol import ATPRequest, ATPResponse, encode
from atp.core.trace import EventSink

ATP_JSON = "application/vnd.atp.v1+json"
EVENT_STREAM = "text/event-stream"
HEALTH_SECONDS = 10.0
"""How long :meth:`HttpAdapter.health` waits for the agent's answer."""
NO_HEALTH_ENDPOINT = frozenset({404, 405, 501})
"""Answers to ``GET /health`` that say the agent has none (the protocol asks only for its two
POSTs): not found, method not allowed, not implemented (Python's ``http.server`` without a
``do_GET``). The agent answered, so it is there: healthy."""
FALLBACK_STATUSES = (404, 405)
"""Answers to ``/execute/stream`` that make ``stream: auto`` use ``/execute``."""
FINISH_BYTES = 64 * 1024
FINISH_SECONDS = 0.05
"""How much, and how long, ATP reads of a stream after its response for the stream's end."""
_INSTALL = "atp-adapters"


class HttpSettings(NetworkSettings, kw_only=True):
    schemes: ClassVar[tuple[str, ...]] = ("http", "https")
    reserved_headers: ClassVar[frozenset[str]] = frozenset(
        {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
    )

    stream: Union[bool, Literal["auto"]] = "auto"
    """``true``: events as Server-Sent Events from ``/execute/stream``; ``false``: one response
    from ``/execute``; ``auto``: stream when the agent offers it."""


def with_path(endpoint: str, suffix: str) -> str:
    """``endpoint`` with ``suffix`` added to its path (its query, when it has one, kept)."""
    parts = urlsplit(endpoint)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix))


def request_headers(settings: NetworkSettings, accept: str) -> dict[str, str]:
    """The headers of one request: ATP's, then the agent's ``headers`` (which win)."""
    headers = {"Content-Type": "application/json", "Accept": accept, "User-Agent": "atp"}
    given = {name.lower() for name in settings.headers}
    headers = {name: value for name, value in headers.items() if name.lower() not in given}
    headers.update(settings.headers)
    return headers


async def _finish(chunks: AsyncIterator[bytes], errors: type[Exception]) -> None:
    """Read the end of a stream after its response, when it comes at once (an agent ends its
    stream right after the response): its connection then goes back to the pool for the next
    run, where a stream left unfinished has its connection closed. What an agent sends after
    the response is not decoded; more than :data:`FINISH_BYTES`, or no end within
    :data:`FINISH_SECONDS`, and the connection is closed. The run has its response: a
    transport error now (``errors``, the agent dropping the connection) changes nothing."""
    left = FINISH_BYTES
    with anyio.move_on_after(FINISH_SECONDS):
        try:
            async for chunk in chunks:
                left -= len(chunk)
                if left < 0:
                    break
        except errors:
            pass


class HttpAdapter(NetworkAdapter):
    type = "http"
    summary = "an agent behind an HTTP endpoint: POST /execute, or events as Server-Sent Events from /execute/stream"
    Settings = HttpSettings
    settings: HttpSettings

    def __init__(self, settings: HttpSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        endpoint = settings.endpoint
        self.urls = {False: with_path(endpoint, "/execute"), True: with_path(endpoint, "/execute/stream")}
        """The URL of each mode (streaming: ``True``)."""
        self.health_url = with_path(endpoint, "/health")
        self.headers = {
            False: request_headers(settings, ATP_JSON),
            True: request_headers(settings, f"{EVENT_STREAM}, {ATP_JSON}"),
        }
        self._stream: bool | None = None if settings.stream == "auto" else bool(settings.stream)
        """Whether runs stream; ``None`` until a run of ``stream: auto`` finds out."""
        self._deciding: anyio.Event | None = None
        """Set while a run finds out whether the agent streams; the others wait for it."""
        self._client: Any = None
        self._tls: ssl.SSLContext | None = None

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Make the client (and its TLS context) every run shares."""
        self._httpx = require("httpx", install=_INSTALL, feature="the http adapter")
        self._tls = tls_context(self.settings, self.base_dir, agent=self.name)
        self._client = self._new_client()

    def _new_client(self) -> Any:
        return http_client(self._httpx, connect_timeout=self.settings.connect_timeout, tls=self._tls)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    @property
    def opened(self) -> bool:
        return self._client is not None

    async def healthy(self) -> bool:
        """Whether ``GET {endpoint}/health`` answers (2xx, or :data:`NO_HEALTH_ENDPOINT`: no
        health endpoint, but the agent is there) within :data:`HEALTH_SECONDS`."""
        return (await self._health()).status == "healthy"

    async def health(self) -> Health:
        """``GET {endpoint}/health`` (the client opened for the moment when the adapter was not
        started): ``healthy`` for a 2xx or a 404; ``unreachable`` when no connection opens
        (saying why); ``unhealthy`` saying what failed: another HTTP status, a redirect, no whole
        answer within :data:`HEALTH_SECONDS`."""
        if self.opened:
            return await self._health()
        await self.start()
        try:
            return await self._health()
        finally:
            await self.aclose()

    async def _health(self) -> Health:
        httpx = self._httpx
        url = self.health_url
        where = f"GET {shown_url(url)}"
        try:
            with anyio.fail_after(HEALTH_SECONDS):
                async with self._client.stream(
                    "GET",
                    url,
                    headers=self.headers[False],
                    timeout=httpx.Timeout(HEALTH_SECONDS, connect=self.settings.connect_timeout),
                ) as answer:
                    status, location = answer.status_code, answer.headers.get("location", "")
        except TimeoutError:
            return Health(status="unhealthy", detail=f"{where} failed: no answer within {HEALTH_SECONDS:g} s")
        except request_errors(httpx) as exc:
            failure = http_failure(httpx, exc, url, connect_timeout=self.settings.connect_timeout)
            if failure.kind == "connect":
                return Health(
                    status="unreachable",
                    detail=str(
                        unreachable(self.name, url, exc, connect_timeout=self.settings.connect_timeout)
                    ),
                )
            return Health(status="unhealthy", detail=f"{where} failed: {failure.words}")
        if 200 <= status < 300 or status in NO_HEALTH_ENDPOINT:
            return Health(status="healthy")
        if 300 <= status < 400:
            said = redirect_words(status, location, masker=self.masker)
            return Health(status="unhealthy", detail=f"{where} failed: {said}")
        phrase = httpx.codes.get_reason_phrase(status)
        return Health(status="unhealthy", detail=f"{where} answered HTTP {status} {phrase}".rstrip())

    # --- runs ------------------------------------------------------------------------------

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        client = self._client
        if client is None:
            raise AdapterError(f"agent {self.name!r}: the http adapter was not started", retryable=False)
        body = encode(request)
        while self._stream is None:
            deciding = self._deciding
            if deciding is None:
                return await self._probe(client, body, sink)
            await deciding.wait()
        return await self._post(client, self._stream, body, sink)

    async def _probe(self, client: Any, body: bytes, sink: EventSink) -> ATPResponse:
        """A run of ``stream: auto`` while nobody knows whether the agent streams: it posts to
        ``/execute/stream``, and its answer decides for every run. If it says nothing (the
        agent cannot be reached, fails, or the run is cancelled), the next run tries again."""
        deciding = self._deciding = anyio.Event()
        try:
            return await self._post(client, True, body, sink, probe=deciding)
        finally:
            self._decided(deciding)

    def _decided(self, deciding: anyio.Event) -> None:
        if self._deciding is deciding:
            self._deciding = None
        deciding.set()

    async def _post(
        self, client: Any, stream: bool, body: bytes, sink: EventSink, probe: anyio.Event | None = None
    ) -> ATPResponse:
        url = self.urls[stream]
        incoming = Incoming(sink, f"POST {shown_url(url)}", self.settings.max_message_bytes)
        httpx = self._httpx
        try:
            async with client.stream("POST", url, content=body, headers=self.headers[stream]) as answer:
                if probe is not None:
                    status = answer.status_code
                    if status in FALLBACK_STATUSES:
                        self._stream = False
                    elif answer.is_success:
                        self._stream = True
                    if self._stream is not None:
                        self._decided(probe)
                if probe is None or self._stream is not False:
                    return await self._read(answer, incoming, stream)
        except request_errors(httpx) as exc:
            raise self._fault(exc, url, incoming) from None
        return await self._post(client, False, body, sink)  # (the agent does not stream)

    def _fault(self, exc: BaseException, url: str, incoming: Incoming) -> Exception:
        """An httpx error as what happened to the run (:func:`~atp.adapters.network.http_failure`)."""
        failure = http_failure(self._httpx, exc, url, connect_timeout=self.settings.connect_timeout)
        if failure.kind == "connect":
            return unreachable(self.name, url, exc, connect_timeout=self.settings.connect_timeout)
        if failure.kind == "url":
            return AdapterError(f"{incoming.where}: {failure.words}", retryable=False)
        if failure.kind == "decode":
            return AgentError(f"{incoming.where}: {failure.words}, {incoming.so_far}")
        return incoming.cut(failure.words)

    async def _read(self, answer: Any, incoming: Incoming, stream: bool) -> ATPResponse:
        status = answer.status_code
        masker = incoming.sink.masker
        if not answer.is_success:
            if answer.is_redirect:
                location = answer.headers.get("location", "")
                raise AgentError(f"{incoming.where}: {redirect_words(status, location, masker=masker)}")
            data = await read_some(answer)
            phrase = self._httpx.codes.get_reason_phrase(status)
            if is_transient(status):  # (overloaded, or a gateway before the agent failed)
                raise transient_fault(
                    self.name, incoming.where, status, phrase, answer.headers, data, masker=masker
                )
            hint = ""
            if stream and status in FALLBACK_STATUSES and self.settings.stream is True:
                hint = "; the agent has no streaming endpoint: set 'stream: false' (or 'auto')"
            raise refusal(incoming.where, status, phrase, data, hint=hint)
        if EVENT_STREAM in answer.headers.get("content-type", "").lower():
            return await self._read_events(answer, incoming)
        data = await read_body(answer, incoming.limit - incoming.received_bytes, incoming.flooded)
        incoming.received(len(data))
        return incoming.body(data)

    async def _read_events(self, answer: Any, incoming: Incoming) -> ATPResponse:
        """An SSE stream: the messages of each network read decoded and delivered together,
        until the response (any valid line ending, a leading byte order mark dropped)."""
        reader = MessageReader()
        chunks = answer.aiter_bytes()
        async for chunk in chunks:
            incoming.received(len(chunk))
            response = self._take(reader, incoming, chunk)
            if response is not None:
                await _finish(chunks, self._httpx.HTTPError)
                return response
        response = self._take(reader, incoming, None)
        if response is not None:
            return response
        raise incoming.ended()

    @staticmethod
    def _take(reader: MessageReader, incoming: Incoming, chunk: bytes | None) -> ATPResponse | None:
        """The messages ``chunk`` completes (``None``: the stream's end) handed to ``incoming``;
        the response, once one came."""
        try:
            messages = reader.feed(chunk) if chunk is not None else reader.end()
        except UnicodeDecodeError as exc:
            raise incoming.broken(
                ProtocolError(f"the event stream is not valid UTF-8 ({exc.reason})"), chunk or b""
            ) from None
        found = [message for message in messages if message.data]
        if not found:
            return None
        return incoming.take([m.data for m in found], [m.event == "response" for m in found])
