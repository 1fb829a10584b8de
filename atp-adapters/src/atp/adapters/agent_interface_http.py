"""How the ``agent-interface`` adapter (:mod:`atp.adapters.agent_interface`) speaks HTTP with its
agent: one request and its answer read whole within a bound (:class:`AgentHttp`), the transport's
faults worded as the other network adapters word them (:mod:`atp.adapters.network`), and a
request that got no usable answer (:class:`NoAnswer`, :class:`Cut`)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import msgspec

from atp.adapters.agent_interface_settings import AgentInterfaceSettings
from atp.adapters.http import with_path
from atp.adapters.network import (
    ERROR_BODY_BYTES,
    MiB,
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
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError
from atp.core.plugins import require
from atp.core.secrets import Masker

DISCOVERY_BYTES = 4 * MiB
"""The most ATP reads of one discovery answer (``/health``, ``/agent-card``, ``/mcp/tools``; less
when ``max_message_bytes`` is less): a card or a tool list is a few kilobytes."""
INSTALL = "atp-adapters"


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


class NoAnswer(AgentError):
    """A request that got no usable answer: ``where`` (``GET http://host/health``) and why
    (``reason``)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


class Cut(NoAnswer):
    """The connection was cut before the whole answer (the agent may have exited)."""


def flooded(where: str, limit: int, setting: str = "max_message_bytes") -> NoAnswer:
    return NoAnswer(where, f"the agent sent more than {limit} bytes in one answer ({setting})")


class AgentHttp:
    """The HTTP exchanges with one agent: where it is (:attr:`urls`), its clients (:meth:`client`,
    once :meth:`prepare` has imported httpx and built the TLS context), and one request with its
    answer read whole. What its errors quote of the agent's answers is masked with the agent's
    own ``secrets`` and the ``owner`` adapter's :attr:`~atp.core.adapter.Adapter.masker`."""

    def __init__(
        self,
        settings: AgentInterfaceSettings,
        headers: dict[str, str],
        *,
        name: str,
        base_dir: Path,
        secrets: Masker,
        owner: Adapter,
    ) -> None:
        self.settings = settings
        self.headers = headers
        self.name = name
        self.base_dir = base_dir
        self.secrets = secrets
        self.owner = owner
        self.httpx: Any = None
        """httpx, once :meth:`prepare` imported it."""
        self._tls: ssl.SSLContext | None = None
        self._prepared = False
        self.endpoint = settings.endpoint
        """Where the agent is: the setting, with ``{port}`` replaced when ATP starts the server."""
        self.urls: dict[str, str] = {}
        """The URLs of the standard's paths at :attr:`endpoint`."""
        self.use_endpoint(settings.endpoint)

    def use_endpoint(self, endpoint: str) -> None:
        """Send the requests to ``endpoint`` from now on."""
        self.endpoint = endpoint
        self.urls = {
            path: with_path(endpoint, path)
            for path in ("/agent-card", "/health", "/mcp/tools", "/a2a/message")
        }

    def prepare(self) -> None:
        """Import httpx and build the TLS context, once."""
        if not self._prepared:
            self.httpx = require("httpx", install=INSTALL, feature="the agent-interface adapter")
            self._tls = tls_context(self.settings, self.base_dir, agent=self.name)
            self._prepared = True

    def client(self) -> Any:
        """A new httpx client for the agent (:func:`~atp.adapters.network.http_client`)."""
        return http_client(self.httpx, connect_timeout=self.settings.connect_timeout, tls=self._tls)

    async def get(self, client: Any, url: str) -> Answer:
        """``GET`` a discovery ``url``, whatever its status: the whole exchange within
        ``discovery_timeout`` (httpx's timeouts are per read, which an answer sent a byte at a
        time never runs out of), the answer read up to :data:`DISCOVERY_BYTES`. Raises
        :class:`NoAnswer` saying ``no answer within ... (discovery_timeout)`` when it takes longer."""
        seconds = self.settings.discovery_timeout
        try:
            with anyio.fail_after(seconds):
                return await self.exchange(client, "GET", url, None, DISCOVERY_BYTES)
        except TimeoutError:
            raise NoAnswer(
                f"GET {shown_url(url)}", f"no answer within {seconds:g} s (discovery_timeout)"
            ) from None

    async def post(self, client: Any, url: str, body: dict[str, Any]) -> Answer:
        """``POST`` JSON; an answer that is not a 2xx is the agent's refusal or failure, or (a 429,
        502, 503 or 504) a transient fault of the infrastructure."""
        answer = await self.exchange(client, "POST", url, msgspec.json.encode(body))
        if not answer.ok:
            if is_transient(answer.status):
                raise transient_fault(
                    self.name,
                    answer.where,
                    answer.status,
                    answer.phrase,
                    answer.headers,
                    answer.body,
                    masker=self.owner.masker,
                    secrets=self.secrets,
                )
            raise refusal(answer.where, answer.status, answer.phrase, answer.body)
        return answer

    async def exchange(
        self, client: Any, method: str, url: str, content: bytes | None, cap: int | None = None
    ) -> Answer:
        """:meth:`read`, its transport's errors worded as the network adapters word them
        (:func:`~atp.adapters.network.http_failure`): no connection is an AdapterError (the
        agent cannot be reached); a URL httpx will not send an AdapterError; a connection cut
        before the whole answer a :class:`Cut`."""
        httpx = self.httpx
        where = f"{method} {shown_url(url)}"
        try:
            return await self.read(client, method, url, content, None, cap)
        except request_errors(httpx) as exc:
            failure = http_failure(httpx, exc, url, connect_timeout=self.settings.connect_timeout)
            if failure.kind == "connect":
                raise unreachable(
                    self.name, url, exc, connect_timeout=self.settings.connect_timeout
                ) from None
            if failure.kind == "url":
                raise AdapterError(f"{where}: {failure.words}", retryable=False) from None
            if failure.kind == "decode":
                raise NoAnswer(where, failure.words) from None
            raise Cut(where, f"the connection was cut before the whole answer ({failure.words})") from None

    async def read(
        self, client: Any, method: str, url: str, content: bytes | None, timeout: Any, cap: int | None = None
    ) -> Answer:
        """One request and its answer read whole (bounded by ``max_message_bytes``, or ``cap``
        when less; an error answer by :data:`~atp.adapters.network.ERROR_BODY_BYTES`). Raises
        the httpx errors, and :class:`NoAnswer` for a redirect or an answer over the limit."""
        httpx = self.httpx
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
                location = answer.headers.get("location", "")
                raise NoAnswer(
                    where, redirect_words(status, location, masker=self.owner.masker, secrets=self.secrets)
                )
            if 200 <= status < 300:
                body = await read_body(answer, limit, lambda: flooded(where, limit, setting))
            else:
                body = await read_some(answer, ERROR_BODY_BYTES)
            return Answer(where, status, phrase, body, answer.headers)
