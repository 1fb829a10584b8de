"""The ``websocket`` adapter: an agent behind a WebSocket endpoint. Settings (with those of
:mod:`atp.adapters.network`)::

    agents:
      - name: my-agent
        type: websocket
        endpoint: ws://127.0.0.1:8765        # ws:// or wss://, the exact URL ATP connects to
        headers: {Authorization: "Bearer ${AGENT_TOKEN}"}   # sent with the opening handshake
        verify: true                         # TLS certificate verification; ca_bundle: a PEM file
        connect_timeout: 10                  # seconds for the connection and its handshake
        max_message_bytes: 52428800          # the most the agent may send in one run (and in one message)
        timeout: 120                         # seconds; the test's timeout_seconds applies too

The wire format: every run opens its own connection to ``endpoint`` and sends the ATP Request
as one text message. The agent answers with messages (text, or binary holding UTF-8 JSON), each
one JSON message: ATP Events as they happen, then the ATP Response (a message without an
``event_type``), the last message ATP reads. ATP then closes the connection (code 1000), and
closes it too when the run ends otherwise: a fault, its time limit (the events received until
then stay in the trace).

The agent closing the connection before its response fails the run: with code 1003, 1007 or
1008 (it refuses the request: unsupported, invalid, against its policy) as a refusal
(:class:`~atp.core.errors.AgentRefused`, like an HTTP 4xx), with any other code or without a
close (the connection dropped) as the agent's failure, saying after how many events. A
handshake the agent answers with an HTTP error (a 401, a 500; a 503, an infrastructure fault that
is tried again) is worded like the ``http`` adapter's answer. Other faults and their wording: see :mod:`atp.adapters.network`.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, ClassVar

from atp.adapters.network import (
    NetworkAdapter,
    NetworkSettings,
    is_transient,
    refusal,
    shown_url,
    tls_context,
    transient_fault,
    unreachable,
)
from atp.adapters.network_messages import Incoming
from atp.core.errors import AdapterError, AgentError, AgentRefused
from atp.core.plugins import require
from atp.core.protocol import ATPRequest, ATPResponse, encode
from atp.core.trace import EventSink

CLOSE_SECONDS = 2.0
"""How long ATP waits for the agent to answer its closing handshake."""
REFUSING_CLOSE_CODES = {1003: "unsupported data", 1007: "invalid data", 1008: "policy violation"}
"""Close codes by which an agent refuses the request it was sent."""
CLOSE_CODE_NAMES = {
    1000: "normal closure",
    1001: "going away",
    1011: "internal error",
    1012: "service restart",
    1013: "try again later",
}
_INSTALL = "atp-adapters"


class WebSocketSettings(NetworkSettings, kw_only=True):
    schemes: ClassVar[tuple[str, ...]] = ("ws", "wss")
    reserved_headers: ClassVar[frozenset[str]] = frozenset(
        {
            "host",
            "connection",
            "upgrade",
            "content-length",
            "transfer-encoding",
            "sec-websocket-key",
            "sec-websocket-version",
            "sec-websocket-extensions",
            "sec-websocket-accept",
        }
    )


class WebSocketAdapter(NetworkAdapter):
    type = "websocket"
    summary = (
        "an agent behind a WebSocket endpoint: the request as a message, events and the response as messages"
    )
    Settings = WebSocketSettings
    settings: WebSocketSettings

    def __init__(self, settings: WebSocketSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.where = shown_url(settings.endpoint)
        self.headers = {"User-Agent": "atp", **settings.headers}
        self._tls: ssl.SSLContext | None = None
        self._started = False

    async def start(self) -> None:
        """Import the client and make the TLS context every run shares."""
        self._ws = require("websockets.asyncio.client", install=_INSTALL, feature="the websocket adapter")
        self._errors = require("websockets.exceptions", install=_INSTALL, feature="the websocket adapter")
        self._tls = tls_context(self.settings, self.base_dir, agent=self.name)
        self._started = True

    async def _connect(self) -> Any:
        """A connection to the agent, or the error saying why there is none."""
        settings, errors = self.settings, self._errors
        headers = {name: value for name, value in self.headers.items() if name.lower() != "user-agent"}
        try:
            return await self._ws.connect(
                settings.endpoint,
                additional_headers=headers,
                user_agent_header=self.headers.get("User-Agent", "atp"),
                ssl=self._tls,
                open_timeout=settings.connect_timeout,
                close_timeout=CLOSE_SECONDS,
                max_size=settings.max_message_bytes,
                max_queue=64,
            )
        except errors.InvalidStatus as exc:
            answer = exc.response
            where = f"GET {self.where} (WebSocket handshake)"
            if is_transient(answer.status_code):
                raise transient_fault(
                    self.name,
                    where,
                    answer.status_code,
                    answer.reason_phrase,
                    answer.headers,
                    answer.body or b"",
                    masker=self.masker,
                ) from None
            raise refusal(where, answer.status_code, answer.reason_phrase, answer.body or b"") from None
        except (
            OSError,
            TimeoutError,
            getattr(errors, "ProxyError", OSError),
        ) as exc:  # (ProxyError: websockets 15)
            if self._tls is not None and type(exc) is ConnectionResetError and not exc.args:
                # asyncio's bare error for a server that closed during the TLS handshake
                raise AdapterError(
                    f"cannot reach agent {self.name!r} at {self.where}: the TLS handshake failed (the server "
                    f"closed the connection); does the agent speak TLS there?"
                ) from None
            raise unreachable(
                self.name, settings.endpoint, exc, connect_timeout=settings.connect_timeout
            ) from None
        except errors.InvalidHandshake as exc:
            raise AgentError(
                f"{self.where}: the WebSocket handshake failed ({exc}); is a WebSocket server listening there?"
            ) from None

    async def health_check(self) -> bool:
        """Whether a WebSocket connection to the agent opens (it is closed again at once)."""
        if not self._started:
            await self.start()
        try:
            connection = await self._connect()
        except (AdapterError, AgentError):
            return False
        await connection.close()
        return True

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if not self._started:
            raise AdapterError(f"agent {self.name!r}: the websocket adapter was not started", retryable=False)
        incoming = Incoming(sink, self.where, self.settings.max_message_bytes)
        connection = await self._connect()
        closed = False
        try:
            try:
                await connection.send(encode(request).decode())  # (a str: a text frame, in websockets 13 too)
                while True:
                    data = await connection.recv(decode=False)
                    incoming.received(len(data))
                    response = incoming.take((data,))
                    if response is not None:
                        break
            except self._errors.ConnectionClosed as exc:
                raise self._closed(exc, incoming) from None
            await connection.close()
            closed = True
            return response
        finally:
            if not closed:
                # A fault or the run's time limit: no waiting for the agent's goodbye.
                connection.transport.close()

    def _closed(self, exc: Any, incoming: Incoming) -> AgentError:
        """The connection closed before the response (``exc``, a ConnectionClosed)."""
        sent, received = exc.sent, exc.rcvd
        if sent is not None and sent.code == 1009:  # ATP refused a message over max_size
            return incoming.flooded()
        if received is None:
            return incoming.cut(str(exc))
        code, reason = received.code, received.reason
        if code in REFUSING_CLOSE_CODES:
            return AgentRefused(
                f"{incoming.where}: the agent refused the request: it closed the connection with code "
                f"{code} ({REFUSING_CLOSE_CODES[code]}) {incoming.so_far}",
                status=code,
                evidence=reason or None,
            )
        name = CLOSE_CODE_NAMES.get(code, "")
        how = f"the agent closed the connection (code {code}{', ' + name if name else ''})"
        if code in (1000, 1001):
            return (
                incoming.ended(how) if not reason else AgentError(str(incoming.ended(how)), evidence=reason)
            )
        return AgentError(
            f"{incoming.where}: {how} {incoming.so_far} without an ATP Response", evidence=reason or None
        )
