"""What the network adapters (``http``, ``websocket``, ``grpc``) share: settings, TLS, decoding the
messages of one run, byte accounting and the wording of faults.

An agent reached over the network answers one ATP Request with a stream of messages: zero or more
ATP Events, then one ATP Response (over plain HTTP, the stream is the response body alone). This
module knows nothing of the transport that carries them; each adapter reads its transport and
hands what arrives to an :class:`~atp.adapters.network_messages.Incoming` (one per run), which
decodes it, delivers events to the run's sink, counts bytes and events, and words every fault
the same way. Settings common to every network agent (:class:`NetworkSettings`, which each
adapter's settings extend)::

    agents:
      - name: my-agent
        type: http                          # or websocket, grpc
        endpoint: https://agents.example.com/research
        headers: {Authorization: "Bearer ${AGENT_TOKEN}"}
        verify: true                        # TLS certificate verification (default: on)
        ca_bundle: certs/agent-ca.pem       # trust this CA (PEM), relative to the agent's folder
        connect_timeout: 10                 # seconds to connect (and finish the TLS handshake)
        max_message_bytes: 52428800         # the most an agent may send in one run (50 MiB)

Which message is which (the same rule for every transport): a JSON object with an ``event_type``
member at its top level is an ATP Event; any other message is the final ATP Response (a
transport may also mark a message as the response, like an SSE ``event: response``). Both are
decoded by :mod:`atp.core.protocol`, so the protocol's version rule holds on every message: a
message of another major version (``2.0``) fails the run. A message that is neither an event
nor a response is the agent's protocol violation; the message, uncut, is the error's evidence.

Faults, worded by the functions here so that every network adapter says the same thing:

- the agent cannot be reached (connection refused, a host name that does not resolve, a TLS
  certificate that does not verify, no connection within ``connect_timeout``):
  :class:`~atp.core.errors.AdapterError` naming the agent and the endpoint (:func:`unreachable`);
- the agent's side is overloaded or a gateway before it failed (HTTP 429, 502, 503, 504: the
  :data:`TRANSIENT_STATUSES`; gRPC ``UNAVAILABLE``, ``RESOURCE_EXHAUSTED``): a retryable
  :class:`~atp.core.errors.AdapterError`, with how long the agent asked ATP to wait
  (``Retry-After``, :func:`retry_after`) as its ``retry_after`` (:func:`transient_fault`);
- the transport refused the request (another HTTP 4xx): :class:`~atp.core.errors.AgentRefused`;
  the agent failed (another HTTP 5xx): :class:`~atp.core.errors.AgentError`; both show the
  ``error`` and ``error_code`` of a JSON error body when it has them (:func:`refusal`);
- a message that is not an ATP message, a stream cut in the middle, a stream that ends without a
  response, more than ``max_message_bytes``: :class:`~atp.core.errors.AgentError` saying where
  (method and URL) and after how many events
  (:class:`~atp.adapters.network_messages.Incoming`).

The runner's time limit cancels the adapter's ``execute``: the adapter closes its connection, and
the events delivered until then stay in the run's trace.

Health (:meth:`NetworkAdapter.health`, for ``atp validate`` and ``atp list-agents --check``): an
agent whose health check fails is ``unreachable``, saying why, when no connection to its
endpoint opens, else ``unhealthy``. The adapters that speak HTTP with httpx (``http``,
``agent-interface``, ``term-sdk``) share how their client is made (:func:`http_client`), how a
body is read within a bound (:func:`read_body`, which trusts a ``Content-Length`` over the bound
to refuse at once; :func:`read_some`), and how an httpx error is worded (:func:`http_failure`).
Agent text that ATP's own errors and warnings quote is masked and cut first (:func:`quoted`).
"""

from __future__ import annotations

import datetime
import errno
import math
import re
import socket
import ssl
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import anyio
import msgspec

from atp.adapters.network_messages import Incoming as Incoming
from atp.adapters.network_messages import decode_message as decode_message
from atp.adapters.network_messages import events_word as events_word
from atp.adapters.network_messages import is_event as is_event
from atp.core.adapter import Adapter, Health
from atp.core.agentenv import is_variable_name
from atp.core.bounds import number_in
from atp.core.errors import AdapterError, AgentError, AgentRefused
from atp.core.retry import MAX_RETRY_AFTER_SECONDS
from atp.core.secrets import Masker
from atp.core.text import as_text, shown

MiB = 1024 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 50 * MiB
MIN_MESSAGE_BYTES = 1024
MAX_MESSAGE_BYTES = 4096 * MiB
DEFAULT_CONNECT_TIMEOUT = 10.0
MAX_CONNECT_TIMEOUT = 600.0
ERROR_BODY_BYTES = 64 * 1024
"""How much of an error answer (an HTTP 500's body) ATP reads to show what it says."""
KEEPALIVE_CONNECTIONS = 1000
"""Idle connections an HTTP client keeps open for the next runs: more than ``--parallel`` ever
asks, so that runs reuse connections instead of opening new ones."""
KEEPALIVE_SECONDS = 60.0
QUOTE_CHARS = 200
"""The most of an agent's text (an Location header, a health report's ``last_error``) that an
error or a warning ATP words itself quotes, after secrets are masked."""

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})
"""Headers whose values are always secrets."""
SECRET_NAME_HINTS = ("token", "key", "secret", "password", "passwd", "auth", "credential", "session")
"""A header (or URL query parameter) whose name holds one of these has a secret value."""
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
"""An HTTP header name (RFC 9110 ``token``)."""
_CODE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
"""An ``error_code`` ATP shows in a message itself (other text goes to the evidence)."""
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
"""HTTP statuses that say the agent cannot take the request now, not that it refuses it: too
many requests, a gateway before it that failed or timed out, a service unavailable for the
moment. A run they answer is an infrastructure fault, tried again (:func:`transient_fault`)."""
MAX_RETRY_AFTER = MAX_RETRY_AFTER_SECONDS
"""The longest wait, in seconds, ATP takes from an agent's ``Retry-After`` (a longer one is cut
to this)."""
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$")
"""A ``Retry-After`` (or ``retry-after-ms``) in delta-seconds: a whole or decimal number."""


class NetworkSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The settings of every network agent; an adapter's Settings extend it (and set
    :attr:`schemes`, the URL schemes its ``endpoint`` may have)."""

    schemes: ClassVar[tuple[str, ...]] = ()
    """The URL schemes ``endpoint`` may have (``("http", "https")``); empty: any URL."""
    reserved_headers: ClassVar[frozenset[str]] = frozenset()
    """Headers (lowercase) the transport sets itself, which ``headers`` may not."""

    endpoint: str
    """Where the agent listens (``https://host:8000/agent``)."""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Sent with every request (an ``Authorization`` header, say); their values of secret-looking
    names are masked in everything ATP writes."""
    verify: bool = True
    """Verify the agent's TLS certificate (and host name)."""
    ca_bundle: str | None = None
    """A PEM file of CA certificates to trust for the agent, relative to the agent's folder."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds to connect to the agent (including the TLS handshake); the run's time limit
    governs the rest."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """The most the agent may send in one run (events and response together)."""
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """Plain values sent in ``context.environment`` of every request, beside the secrets the
    agent's ``secrets:`` names (:mod:`atp.core.agentenv`)."""
    ENV_IN_REQUESTS: ClassVar[bool] = True
    """Whether ``env`` is what requests carry (an adapter whose ``env`` means something else,
    the environment of a server ATP starts, says no)."""

    def __post_init__(self) -> None:
        check_settings(self)


def check_settings(settings: NetworkSettings) -> None:
    """Refuse, when the suite loads, what would fail every run: an endpoint of another scheme or
    without a host, NUL bytes, header names and values no HTTP request can carry, timeouts and
    limits that are not finite numbers in their bounds. Raises ValueError saying which setting."""
    endpoint = settings.endpoint
    schemes = settings.schemes
    if not endpoint:
        raise ValueError("'endpoint' is empty")
    if any(c in endpoint for c in "\0\r\n\t "):
        raise ValueError("'endpoint' holds a space or a control character, which no URL can")
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"'endpoint' {endpoint!r} is not a valid URL: {exc}") from None
    if schemes and parts.scheme.lower() not in schemes:
        raise ValueError(
            f"'endpoint' {endpoint!r} must be a URL starting with "
            + " or ".join(f"{scheme}://" for scheme in schemes)
        )
    if schemes and not parts.hostname:
        raise ValueError(f"'endpoint' {endpoint!r} names no host")
    if port == 0:
        raise ValueError(f"'endpoint' {endpoint!r} has port 0, which no agent can listen on")
    if parts.fragment:
        raise ValueError(f"'endpoint' {endpoint!r} has a #fragment, which is never sent to a server")
    reserved = settings.reserved_headers
    for name, value in settings.headers.items():
        if not _TOKEN.match(name):
            raise ValueError(f"'headers' has the name {name!r}, which is not a valid HTTP header name")
        if name.lower() in reserved:
            raise ValueError(
                f"'headers' may not set {name!r}: the {'/'.join(schemes) or 'transport'} adapter sets it"
            )
        if any(c in value for c in "\0\r\n"):
            raise ValueError(
                f"'headers' value of {name!r} holds a line break or NUL byte, which no header can"
            )
    if settings.ENV_IN_REQUESTS:
        for key, value in settings.env.items():
            check_variable(key, value)
    if settings.ca_bundle is not None:
        if not settings.ca_bundle or "\0" in settings.ca_bundle:
            raise ValueError("'ca_bundle' must be the path of a PEM file")
        if not settings.verify:
            raise ValueError("'ca_bundle' has no effect with 'verify: false'; remove one of them")
    if number_in(settings.connect_timeout, 0, MAX_CONNECT_TIMEOUT, low_open=True) is None:
        raise ValueError(
            f"'connect_timeout' must be a number of seconds above 0 and at most {MAX_CONNECT_TIMEOUT:g}"
        )
    limit = settings.max_message_bytes
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not MIN_MESSAGE_BYTES <= limit <= MAX_MESSAGE_BYTES
    ):
        raise ValueError(
            f"'max_message_bytes' must be a whole number of bytes from {MIN_MESSAGE_BYTES} to {MAX_MESSAGE_BYTES}"
        )


def check_variable(key: str, value: str) -> None:
    """An ``env`` entry a request's ``context.environment`` (and a process's environment) can
    carry: a variable name, a value without NUL bytes. Raises ValueError."""
    if not is_variable_name(key):
        raise ValueError(
            f"'env' has the name {key[:80]!r}, which is not an environment variable name "
            f"(letters, digits and _, not starting with a digit)"
        )
    if "\0" in value:
        raise ValueError(f"'env' variable {key!r} holds a NUL byte (\\0), which no value can")


def secret_values(settings: NetworkSettings) -> list[str]:
    """The values ATP must mask for these settings: headers whose names say they are secrets
    (``Authorization``, ``Cookie``, ``X-Api-Key``, any name with ``token``, ``key``, ``secret``,
    ``auth`` ...), the password of an endpoint like ``https://user:password@host``, and the values
    of its query parameters with such names (``?api_key=...``). For an adapter's
    :meth:`~atp.core.adapter.Adapter.secret_values`."""
    values: list[str] = []
    for name, value in settings.headers.items():
        if secret_name(name):
            values.append(value)
            scheme, _, credentials = value.partition(" ")
            if credentials and scheme.lower() in ("bearer", "basic", "token", "digest"):
                values.append(credentials)  # (also masked when the agent echoes it alone)
    try:
        parts = urlsplit(settings.endpoint)
        if parts.password:
            values.append(parts.password)
        values.extend(value for name, value in parse_qsl(parts.query) if secret_name(name) and value)
    except ValueError:
        pass
    return values


class NetworkAdapter(Adapter):
    """The base of the network adapters: the secrets of their settings masked, and a health
    check that opens the adapter's connection first when it was not started (``atp validate``
    asks before any run) and closes it again. A subclass says whether it :attr:`opened` and how
    it checks (:meth:`healthy`)."""

    @classmethod
    def secret_values(cls, settings: Any) -> list[str]:
        return secret_values(settings)

    @classmethod
    def request_environment(cls, settings: Any) -> dict[str, str]:
        return dict(settings.env) if settings.ENV_IN_REQUESTS else {}

    @property
    def opened(self) -> bool:
        """Whether :meth:`start` made what the runs share (a client, a channel)."""
        return True

    async def healthy(self) -> bool:
        """Whether the agent answers, with the adapter started."""
        return True

    async def health_check(self) -> bool:
        if self.opened:
            return await self.healthy()
        await self.start()
        try:
            return await self.healthy()
        finally:
            await self.aclose()

    async def health(self) -> Health:
        """``healthy`` when the health check passes. When it does not: ``unreachable``, saying
        why, when no connection to the endpoint's host and port opens within ``connect_timeout``
        (refused, a host name that does not resolve); else ``unhealthy`` (something answers
        there, but not as a healthy agent). An adapter that knows more overrides it."""
        if await self.health_check():
            return Health(status="healthy")
        endpoint = self.settings.endpoint
        failure = await connect_test(endpoint, self.settings.connect_timeout)
        if failure is not None:
            return Health(
                status="unreachable",
                detail=f"cannot reach agent {self.name!r} at {shown_url(endpoint)}: {failure}",
            )
        return Health(
            status="unhealthy",
            detail=f"a connection to {shown_url(endpoint)} opens, but the agent's health check fails there",
        )


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


async def connect_test(url: str, connect_timeout: float) -> str | None:
    """Why no TCP connection to the host and port of ``url`` opens within ``connect_timeout``
    (:func:`connect_failure`'s words), or ``None`` when one does (it is closed at once); also
    ``None`` when the URL names no port and its scheme has no default one."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    if not host or port is None:
        return None

    def connect() -> None:
        socket.create_connection((host, port), timeout=connect_timeout).close()

    try:
        with anyio.fail_after(connect_timeout + 1):
            await anyio.to_thread.run_sync(connect, abandon_on_cancel=True)
    except (OSError, TimeoutError) as exc:
        return connect_failure(exc, url, connect_timeout)
    return None


def secret_name(name: str) -> bool:
    """Whether a header or query parameter of this name carries a secret."""
    lower = name.lower()
    return lower in SECRET_HEADERS or any(hint in lower for hint in SECRET_NAME_HINTS)


def shown_url(url: str) -> str:
    """``url`` as messages show it: without the ``user:password@`` part."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def tls_context(settings: NetworkSettings, base_dir: Path, *, agent: str) -> ssl.SSLContext | None:
    """The TLS context for the agent, or ``None`` when its endpoint does not use TLS (its
    scheme is not ``https``, ``wss`` or ``grpcs``). With ``verify`` the system's CAs (and
    certifi's, when installed) are trusted, or only ``ca_bundle``'s when it is given; without,
    any certificate is accepted. Build it once per adapter (loading CAs takes milliseconds).
    Raises AdapterError when ``ca_bundle`` cannot be read."""
    scheme = urlsplit(settings.endpoint).scheme.lower()
    if scheme not in ("https", "wss", "grpcs"):
        return None
    if not settings.verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if settings.ca_bundle is not None:
        path = base_dir / settings.ca_bundle
        try:
            return ssl.create_default_context(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise AdapterError(
                f"agent {agent!r}: cannot read its ca_bundle {path}: {reason}", retryable=False
            ) from None
    context = ssl.create_default_context()
    try:
        import certifi

        context.load_verify_locations(certifi.where())
    except (ImportError, OSError, ssl.SSLError):
        pass
    return context


# --- HTTP (httpx): the http, agent-interface and term-sdk adapters ---------------------------


def http_client(
    httpx: Any,
    *,
    connect_timeout: float,
    timeout: float | None = None,
    tls: ssl.SSLContext | None = None,
    trust_env: bool = True,
) -> Any:
    """An ``httpx.AsyncClient`` for one agent: ``connect_timeout`` seconds to connect, ``timeout``
    for each read and write (``None``: the caller bounds the exchange; httpx's timeouts are per
    read, so a caller that must bound a whole answer wraps it in ``anyio.fail_after``), a pool
    of keep-alive connections for the next runs (``--parallel`` bounds the runs in flight), and
    redirects never followed. ``tls`` is the context of an ``https`` endpoint
    (:func:`tls_context`); without one, a context that trusts nothing is made in microseconds
    (where loading every CA takes milliseconds): an ``http`` URL never uses it.
    ``trust_env=False``: no proxy from the environment (ATP and an agent it started itself)."""
    verify = tls if tls is not None else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return httpx.AsyncClient(
        verify=verify,
        timeout=httpx.Timeout(timeout, connect=connect_timeout),
        limits=httpx.Limits(
            max_connections=None,
            max_keepalive_connections=KEEPALIVE_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_SECONDS,
        ),
        follow_redirects=False,
        trust_env=trust_env,
    )


def request_errors(httpx: Any) -> tuple[type[BaseException], ...]:
    """What sending a request with httpx may raise besides the run's own errors: its transport
    and protocol errors, and ``InvalidURL`` (a URL httpx will not send, which is not an
    ``HTTPError``)."""
    return (httpx.HTTPError, httpx.InvalidURL)


async def read_body(answer: Any, limit: int, flooded: Callable[[], Exception]) -> bytes:
    """The whole body of a streamed httpx answer, at most ``limit`` bytes: ``flooded()`` is
    raised as soon as its ``Content-Length`` or what arrived says it is larger (nothing more is
    read)."""
    length = answer.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise flooded()
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise flooded()
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_some(answer: Any, limit: int = ERROR_BODY_BYTES) -> bytes:
    """At most ``limit`` bytes of an answer's body (an error answer's, to show what it says);
    the rest is left unread."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)[:limit]


class HttpFailure(NamedTuple):
    """What went wrong with one HTTP request (:func:`http_failure`)."""

    kind: Literal["connect", "timeout", "decode", "url", "cut"]
    """``connect``: no connection (the agent cannot be reached); ``timeout``: no answer within a
    read or write timeout; ``decode``: an answer whose content encoding is broken; ``url``: a
    URL httpx will not send; ``cut``: the connection broke (or another transport error)."""
    words: str


def http_failure(
    httpx: Any,
    exc: BaseException,
    url: str,
    *,
    connect_timeout: float | None = None,
    timeout: str | None = None,
) -> HttpFailure:
    """An httpx error of a request to ``url`` in words: :func:`connect_failure`'s for no
    connection; ``timeout`` (``no answer within 10 s (request_timeout)``) for a read or write
    timeout when given (else it is a ``cut``)."""
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol)):
        return HttpFailure("url", f"ATP cannot send a request to this URL ({exc})")
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError)):
        return HttpFailure("connect", connect_failure(exc, url, connect_timeout))
    if isinstance(exc, httpx.TimeoutException) and timeout is not None:
        return HttpFailure("timeout", timeout)
    if isinstance(exc, httpx.DecodingError):
        return HttpFailure("decode", f"the agent's answer cannot be decoded ({exc})")
    return HttpFailure("cut", (str(exc) or type(exc).__name__).rstrip("."))


def redirect_words(
    status: int, location: str, *, masker: Masker | None, secrets: Masker | None = None
) -> str:
    """A redirect answer (status ``status`` to ``location``, agent text: masked with ``masker``,
    the run's or the adapter's, and ``secrets``, then shortened: :func:`quoted`) in words."""
    where = quoted(shown_url(location), masker=masker, secrets=secrets)
    return (
        f"the agent answered with a redirect (HTTP {status}) to {where!r}; ATP does not "
        f"follow redirects: set 'endpoint' to where the agent is"
    )


# --- faults ----------------------------------------------------------------------------------


def quoted(
    text: str, limit: int = QUOTE_CHARS, *, masker: Masker | None, secrets: Masker | None = None
) -> str:
    """Agent text as an error or a warning ATP words itself may quote it: its secrets masked
    (``masker``, the run's or the adapter's :attr:`~atp.core.adapter.Adapter.masker`, and
    ``secrets``, a :class:`~atp.core.secrets.Masker` of the agent's own settings, when given),
    then shortened to ``limit`` characters and made printable. Text that reaches the terminal
    as it is (an ``atp: error:``, a warning) needs this: only evidence of an AgentError is
    masked by the runner."""
    if secrets is not None:
        text = secrets.text(text)
    return shown(text, masker, limit=limit)


def unreachable(
    agent: str, url: str, exc: BaseException, *, connect_timeout: float | None = None
) -> AdapterError:
    """The agent at ``url`` cannot be reached: ``exc`` (or what it wraps: httpx and websockets
    wrap the OSError) as words a user can act on. Retryable (the agent may be there at the next
    try), but for a TLS certificate that does not verify: that takes a change of settings."""
    certificate = any(isinstance(cause, ssl.SSLCertVerificationError) for cause in _causes(exc))
    return AdapterError(
        f"cannot reach agent {agent!r} at {shown_url(url)}: {connect_failure(exc, url, connect_timeout)}",
        retryable=not certificate,
    )


def is_transient(status: int) -> bool:
    """Whether an agent's HTTP ``status`` is a fault of the infrastructure that another try may
    not meet (one of :data:`TRANSIENT_STATUSES`), not the agent's answer to the request."""
    return status in TRANSIENT_STATUSES


def retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """How long, in seconds, an answer's ``headers`` ask the client to wait before it tries again:
    ``retry-after-ms`` (milliseconds) when it is there and a number, else ``Retry-After``, in
    delta-seconds (``2``, ``1.5``) or as an HTTP-date (the seconds from ``now``, the current
    time by default; a date past gives 0). At most :data:`MAX_RETRY_AFTER`; ``None`` when
    neither header is there or makes sense. ``headers``: any mapping of header names (httpx's,
    websockets', a dict) or a sequence of ``(name, value)`` pairs."""
    milliseconds = _delay(header_value(headers, "retry-after-ms"))
    if milliseconds is not None:
        return min(milliseconds / 1000, MAX_RETRY_AFTER)
    value = header_value(headers, "retry-after")
    if value is None:
        return None
    seconds = _delay(value)
    if seconds is not None:
        return min(seconds, MAX_RETRY_AFTER)
    try:
        date = parsedate_to_datetime(value.strip())
        if date.tzinfo is None:  # (an asctime date: HTTP-dates are GMT)
            date = date.replace(tzinfo=datetime.timezone.utc)
        seconds = date.timestamp() - (time.time() if now is None else now)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _delay(value: str | None) -> float | None:
    """A header's delta-seconds as a number, or ``None``."""
    if value is None:
        return None
    match = _DELAY.match(value)
    if match is None:
        return None
    return float(match.group(1))  # (too many digits: inf, which the caller cuts)


def header_value(headers: Any, name: str) -> str | None:
    """The value of the header (or gRPC metadata key) ``name``, lowercase, in ``headers`` (a
    mapping of names, or a sequence of ``(name, value)`` pairs), or ``None``."""
    if headers is None:
        return None
    value: Any = None
    getter = getattr(headers, "get", None)
    if getter is not None:
        try:
            value = getter(name)
        except Exception:  # (websockets' headers: a name given twice)
            value = None
    if value is None:
        pairs = headers.items() if hasattr(headers, "items") else headers
        try:
            value = next((v for k, v in pairs if str(k).lower() == name), None)
        except (TypeError, ValueError):
            return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value if isinstance(value, str) else None


def transient_fault(
    agent: str,
    where: str,
    status: int,
    phrase: str,
    headers: Any,
    body: bytes | str,
    *,
    masker: Masker | None,
    secrets: Masker | None = None,
) -> AdapterError:
    """The agent answered the request ``where`` (``POST http://host/execute``) with a transient
    HTTP ``status`` (:func:`is_transient`): a retryable AdapterError, with the wait its
    ``headers`` ask for (:func:`retry_after`), naming the request and the status, and quoting
    the start of its ``body`` (masked with ``masker`` and ``secrets``, cut, made printable:
    :func:`quoted`)."""
    wait = retry_after(headers)
    answer = f"{status} {phrase}".rstrip()
    after = f" (retry after {wait:.3g} s)" if wait is not None else ""
    text = as_text(body).strip()
    said = f": {quoted(text, masker=masker, secrets=secrets)}" if text else ""
    return AdapterError(
        f"agent {agent!r}: {where} answered {answer}{after}{said}", retryable=True, retry_after=wait
    )


def connect_failure(exc: BaseException, url: str, connect_timeout: float | None = None) -> str:
    """Why connecting to ``url`` failed, from ``exc`` and the exceptions it wraps."""
    host = urlsplit(url).hostname or url
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"its TLS certificate does not verify ({cause.verify_message or cause.reason}); give the CA "
                f"that signed it as ca_bundle, or set verify: false"
            )
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake failed ({cause.reason or cause}); does the agent speak TLS there?"
        if isinstance(cause, socket.gaierror):
            return f"the host name {host!r} cannot be resolved ({cause.strerror or cause})"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (is the agent running and listening there?)"
        if isinstance(cause, TimeoutError) or type(cause).__name__ in ("ConnectTimeout", "TimeoutError"):
            after = f" within {connect_timeout:g} s (connect_timeout)" if connect_timeout is not None else ""
            return f"no connection{after}"
        if isinstance(cause, OSError) and cause.errno is not None:
            return f"{cause.strerror or errno.errorcode.get(cause.errno, cause.errno)}"
    text = str(exc)
    if "Name or service not known" in text or "nodename nor servname" in text:
        return f"the host name {host!r} cannot be resolved ({text})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first (at most 10)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(found) < 10 and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def error_fields(body: bytes | str) -> tuple[str | None, str | None]:
    """The ``error`` and ``error_code`` strings of a JSON error body (``{"error": "...",
    "error_code": "INVALID_REQUEST"}``, also as ATP Response fields), each ``None`` when absent."""
    if not body or body[:1] not in (b"{", "{"):
        return None, None
    try:
        document = msgspec.json.decode(body)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        return None, None
    if not isinstance(document, dict):
        return None, None
    error, code = document.get("error"), document.get("error_code")
    if isinstance(error, dict):  # {"error": {"message": ..., "code": ...}}
        code = code if code is not None else error.get("code")
        error = error.get("message")
    return (error if isinstance(error, str) else None), (str(code) if isinstance(code, (str, int)) else None)


def refusal(where: str, status: int | str, phrase: str, body: bytes | str, *, hint: str = "") -> AgentError:
    """The agent answered the request ``where`` (``POST http://host/execute``) with a failure of
    its transport, ``status`` (an HTTP status, a gRPC code) and ``body``. A 4xx (or a code the
    transport reserves for bad requests) is an :class:`AgentRefused`; anything else an
    :class:`AgentError`. The ``error`` of a JSON body is the evidence (the body itself, without
    one); a plain ``error_code`` is shown in the message."""
    error, code = error_fields(body)
    shown = f" (error_code {code})" if code is not None and _CODE.match(code) else ""
    evidence: str | bytes | None = error if error is not None else (body or None)
    answer = f"{status} {phrase}".rstrip()
    if isinstance(status, int) and 400 <= status < 500:
        return AgentRefused(
            f"{where}: the agent refused the request with HTTP {answer}{shown}{hint}",
            status=status,
            evidence=evidence,
        )
    if isinstance(status, int):
        return AgentError(f"{where}: the agent failed with HTTP {answer}{shown}{hint}", evidence=evidence)
    return AgentRefused(
        f"{where}: the agent refused the request with {answer}{shown}{hint}", status=status, evidence=evidence
    )
