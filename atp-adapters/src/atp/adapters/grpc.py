"""The ``grpc`` adapter: an agent serving ATP's gRPC service ``atp.v1.Agent``. Settings (with
those of :mod:`atp.adapters.network`)::

    agents:
      - name: my-agent
        type: grpc
        endpoint: grpc://127.0.0.1:50051      # grpc:// plaintext, grpcs:// TLS; host:port, no path
        stream: auto                          # auto (default), true or false
        metadata: {authorization: "Bearer ${AGENT_TOKEN}"}   # sent with every call
        ca_bundle: certs/agent-ca.pem         # grpcs: trust this CA (PEM) instead of the system's
        connect_timeout: 10                   # seconds to connect; the run's time limit governs the rest
        max_message_bytes: 52428800           # the largest message, and the most one run may receive
        timeout: 120                          # seconds; the test's timeout_seconds applies too

The service is defined in ``atp/v1/agent.proto`` (in ``proto/`` next to this module, with its
generated code): ``Execute`` takes the ATP Request and answers the ATP Response (and, optionally,
the events the agent recorded); ``ExecuteStream`` answers a stream of items, each either an ATP
Event or, last, the ATP Response (a ``oneof`` says which, nothing is guessed); ``Health`` says
whether the agent takes requests. The ATP messages travel as their JSON text (``bytes`` fields),
so they are decoded, and their versions checked, as on every other transport (the .proto says
why).

- ``stream: true`` uses ``ExecuteStream``, ``stream: false`` ``Execute``; ``auto`` uses
  ``ExecuteStream`` until the agent answers it with the status ``UNIMPLEMENTED``, then ``Execute``
  for good (that run too).
- ``metadata`` (gRPC's name) and ``headers`` (the name the http and websocket adapters use) are
  the same thing: both are sent with every call, ``metadata`` winning; keys are lowercased, as
  gRPC wants them, and a key ending in ``-bin`` carries its value as UTF-8 bytes. Values of
  secret-looking keys (``authorization``, ``x-api-key``) are masked in everything ATP writes.
- ``grpcs://`` verifies the server's certificate against the system's CAs, or ``ca_bundle``'s
  only. ``verify: false`` is refused: gRPC cannot skip the check; give the certificate (or the CA
  that signed it) as ``ca_bundle``, or use ``grpc://``.
- ``max_message_bytes`` is the channel's largest message and the most one run may receive.

One channel serves every run of an ``atp test``, also with ``--parallel`` (made in
:meth:`GrpcAdapter.start`, closed in :meth:`GrpcAdapter.aclose`). A run waits at most
``connect_timeout`` for a connection. What goes wrong gives the run a reason, never a traceback,
and the other runs go on (wording shared with the other network adapters):

- the agent cannot be reached (nothing listens, the name does not resolve, TLS fails, no
  connection within ``connect_timeout``), or the server does not implement ``atp.v1.Agent``:
  :class:`~atp.core.errors.AdapterError` naming the agent and the endpoint;
- the call ends, before the agent sent anything, with ``UNAVAILABLE`` or ``RESOURCE_EXHAUSTED``
  (the agent, or a proxy before it, cannot take the call now): a retryable AdapterError, whose
  ``retry_after`` is the ``grpc-retry-pushback-ms`` of the call's trailing metadata when it has
  one (``DEADLINE_EXCEEDED`` is not one of them: it is the agent's time running out);
- the call ends with ``INVALID_ARGUMENT``: :class:`~atp.core.errors.AgentRefused` (the agent's
  graceful refusal); with another status: :class:`~atp.core.errors.AgentError` naming it, the
  agent's details as evidence;
- a message that is not an ATP Event or Response (or of another major version), a stream cut
  in the middle or ended without a response, more than ``max_message_bytes``: AgentError.

The runner's time limit cancels the call (the agent sees it cancelled); the events received
until then stay in the run's trace.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import socket
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Literal, NoReturn, Union
from urllib.parse import urlsplit

import anyio
import msgspec

from atp.adapters.network import (
    MAX_RETRY_AFTER,
    NetworkAdapter,
    NetworkSettings,
    header_value,
    quoted,
    refusal,
    secret_name,
    secret_values,
    unreachable,
)
from atp.adapters.network_messages import Incoming
from atp.core.errors import AdapterError, AgentError, MissingDependencyError, ProtocolError
from atp.core.plugins import require
from atp.core.protocol import ATPRequest, ATPResponse, decode_event, encode
from atp.core.trace import EventSink

SERVICE = "atp.v1.Agent"
MAX_GRPC_MESSAGE = 2**31 - 1
"""gRPC's own bound on one message's size (a larger ``max_message_bytes`` bounds the run only)."""
RECONNECT_BACKOFF_MS = 1000
"""The longest gRPC waits between two attempts to reconnect: an agent that comes back is found
within a second (gRPC's default would be two minutes)."""
DRAIN_SECONDS = 1.0
"""How long ATP waits, after the response of a stream, for the stream to end."""
_INSTALL = "atp-adapters[grpc]"
_FEATURE = "the grpc adapter"
_METADATA_KEY = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_CONNECT_FAILURES = ("failed to connect to all addresses", "errors resolving", "DNS resolution failed")
"""How gRPC's details begin when the channel could not connect at all (not: the agent failed)."""
PUSHBACK_KEY = "grpc-retry-pushback-ms"
"""The trailing metadata by which a server says how long, in milliseconds, a client should wait
before it tries the call again (a negative value: not to try again)."""
_PUSHBACK = re.compile(r"^\s*(-?\d+)\s*$")


class GrpcSettings(NetworkSettings, kw_only=True):
    schemes: ClassVar[tuple[str, ...]] = ("grpc", "grpcs")
    reserved_headers: ClassVar[frozenset[str]] = frozenset({"content-type", "te", "host", "user-agent"})

    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    """Sent with every call, after ``headers`` (the same thing under gRPC's name)."""
    stream: Union[bool, Literal["auto"]] = "auto"
    """``true``: ``ExecuteStream``; ``false``: ``Execute``; ``auto``: stream unless the agent
    answers ``ExecuteStream`` with ``UNIMPLEMENTED``."""

    def __post_init__(self) -> None:
        endpoint = self.endpoint
        if endpoint and "://" not in endpoint:
            raise ValueError(
                f"'endpoint' {endpoint!r} needs its scheme: grpc://{endpoint} (plaintext) or "
                f"grpcs://{endpoint} (TLS)"
            )
        super().__post_init__()
        parts = urlsplit(endpoint)
        if parts.path not in ("", "/") or parts.query or parts.username is not None:
            raise ValueError(
                f"'endpoint' {endpoint!r} must be grpc://host:port or grpcs://host:port, without a "
                f"path, query or user (the service is always {SERVICE})"
            )
        if parts.port is None:
            raise ValueError(f"'endpoint' {endpoint!r} has no port; write grpc://host:port")
        if not self.verify:
            raise ValueError(
                "'verify: false' is not possible with gRPC, which always checks the server's "
                "certificate: give the certificate (or the CA that signed it) as 'ca_bundle', or "
                "use grpc://host:port for plaintext"
            )
        if self.ca_bundle is not None and parts.scheme.lower() != "grpcs":
            raise ValueError("'ca_bundle' applies to TLS endpoints (grpcs://host:port), not to grpc://")
        for setting in ("headers", "metadata"):
            for key, value in getattr(self, setting).items():
                check_metadata(setting, key, value, self.reserved_headers)
        if self.stream not in (True, False, "auto"):
            raise ValueError("'stream' must be auto, true or false")

    @property
    def target(self) -> str:
        """The gRPC target: ``host:port`` (``[::1]:50051``)."""
        return urlsplit(self.endpoint).netloc

    @property
    def tls(self) -> bool:
        return urlsplit(self.endpoint).scheme.lower() == "grpcs"

    def call_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        """The metadata of every call: ``headers``, then ``metadata`` (which wins), keys
        lowercased; the value of a ``-bin`` key as its UTF-8 bytes."""
        merged = {key.lower(): value for key, value in self.headers.items()}
        merged.update((key.lower(), value) for key, value in self.metadata.items())
        return tuple(
            (key, value.encode() if key.endswith("-bin") else value) for key, value in merged.items()
        )


def check_metadata(setting: str, key: str, value: str, reserved: frozenset[str]) -> None:
    """Refuse, when the suite loads, metadata gRPC would refuse at every call. Raises ValueError."""
    lowered = key.lower()
    if not lowered or not set(lowered) <= _METADATA_KEY:
        raise ValueError(
            f"'{setting}' has the key {key!r}, which is not a gRPC metadata key (letters, digits, '-', '_', '.')"
        )
    if lowered.startswith("grpc-") or lowered in reserved:
        raise ValueError(f"'{setting}' may not set {key!r}: gRPC sets it")
    if not lowered.endswith("-bin") and not all(" " <= char <= "~" for char in value):
        raise ValueError(
            f"'{setting}' value of {key!r} holds a character gRPC metadata cannot carry (printable "
            f"ASCII only; a key ending in -bin carries any text)"
        )


def grpc_modules() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``grpc`` and the generated ``agent_pb2`` and ``agent_pb2_grpc``; a MissingDependencyError
    saying which ``pip install`` fixes it when they are missing or too old for the generated code."""
    # gRPC's own log lines (a failed TLS handshake, at INFO) stay off ATP's terminal unless the
    # user asks for them; the setting is read when grpc is imported, then ATP's environment (which
    # the agents it starts inherit) is left as it was.
    quiet = "grpc" not in sys.modules and "GRPC_VERBOSITY" not in os.environ
    if quiet:
        os.environ["GRPC_VERBOSITY"] = "ERROR"
    try:
        grpc = require("grpc", install=_INSTALL, feature=_FEATURE)
    finally:
        if quiet:
            del os.environ["GRPC_VERBOSITY"]
    require("google.protobuf", install=_INSTALL, feature=_FEATURE)
    try:
        from atp.adapters.proto.atp.v1 import agent_pb2, agent_pb2_grpc
    except Exception as exc:  # protobuf's VersionError, the gRPC code's RuntimeError: too old
        raise MissingDependencyError(
            f"{_FEATURE} cannot load its generated gRPC code ({type(exc).__name__}: {exc}); "
            f"install recent versions with: pip install -U '{_INSTALL}'"
        ) from None
    return grpc, agent_pb2, agent_pb2_grpc


class GrpcAdapter(NetworkAdapter):
    type = "grpc"
    summary = "an agent serving the gRPC service atp.v1.Agent: Execute, or events streamed by ExecuteStream"
    Settings = GrpcSettings
    settings: GrpcSettings

    @classmethod
    def secret_values(cls, settings: Any) -> list[str]:
        values = secret_values(settings)
        for key, value in settings.metadata.items():
            if secret_name(key):
                values.append(value)
                scheme, _, credentials = value.partition(" ")
                if credentials and scheme.lower() in ("bearer", "basic", "token", "digest"):
                    values.append(credentials)
        return values

    def __init__(self, settings: GrpcSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.endpoint = settings.endpoint.rstrip("/")
        self.metadata = settings.call_metadata()
        self.stream: bool | Literal["auto"] = settings.stream
        """``True``, ``False``, or ``"auto"`` until a run finds ``ExecuteStream`` unimplemented."""
        self._channel: Any = None
        self._stub: Any = None
        self._grpc: Any = None
        self._pb2: Any = None

    def where(self, rpc: str) -> str:
        """How messages name a call: ``grpc://127.0.0.1:50051/atp.v1.Agent/Execute``."""
        return f"{self.endpoint}/{SERVICE}/{rpc}"

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Make the channel every run shares (it connects at the first run)."""
        grpc, pb2, pb2_grpc = grpc_modules()
        settings = self.settings
        connect_ms = max(1, int(settings.connect_timeout * 1000))
        options = [
            ("grpc.max_receive_message_length", min(settings.max_message_bytes, MAX_GRPC_MESSAGE)),
            ("grpc.max_send_message_length", -1),
            # (gRPC's connect deadline is the larger of this and the backoff)
            ("grpc.min_reconnect_backoff_ms", connect_ms),
            ("grpc.initial_reconnect_backoff_ms", min(RECONNECT_BACKOFF_MS, connect_ms)),
            ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
            ("grpc.primary_user_agent", "atp"),
        ]
        if settings.tls:
            roots = None
            if settings.ca_bundle is not None:
                path = self.base_dir / settings.ca_bundle
                try:
                    roots = await anyio.Path(path).read_bytes()
                except OSError as exc:
                    raise AdapterError(
                        f"agent {self.name!r}: cannot read its ca_bundle {path}: {exc.strerror or exc}",
                        retryable=False,
                    ) from None
            credentials = grpc.ssl_channel_credentials(root_certificates=roots)
            self._channel = grpc.aio.secure_channel(settings.target, credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(settings.target, options=options)
        self._grpc, self._pb2 = grpc, pb2
        self._stub = pb2_grpc.AgentStub(self._channel)

    async def aclose(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    @property
    def opened(self) -> bool:
        return self._channel is not None

    async def healthy(self) -> bool:
        """The agent's answer to ``Health`` within ``connect_timeout``; an agent without that
        rpc (its server answers ``UNIMPLEMENTED``) is healthy, since its server answered."""
        grpc = self._grpc
        try:
            answer = await answer_of(
                self._stub.Health(
                    self._pb2.HealthRequest(), metadata=self.metadata, timeout=self.settings.connect_timeout
                )
            )
        except grpc.aio.AioRpcError as exc:
            return bool(exc.code() == grpc.StatusCode.UNIMPLEMENTED)  # (the server is there, without Health)
        return bool(answer.serving)

    # --- runs ------------------------------------------------------------------------------

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self._channel is None:
            raise AdapterError(f"agent {self.name!r}: the grpc adapter was not started", retryable=False)
        connected = await self._connect()
        message = self._pb2.ExecuteRequest(request=encode(request))
        if self.stream is not False:
            run = _Stream(self, Incoming(sink, self.where("ExecuteStream"), self.settings.max_message_bytes))
            try:
                return await run.call(message, connected)
            except _Unimplemented as exc:
                if self.stream is True:
                    raise AdapterError(
                        f"agent {self.name!r}: {self.where('ExecuteStream')} is not implemented by the "
                        f"agent ({exc}); set 'stream: false' (or 'auto') to use Execute",
                        retryable=False,
                    ) from None
                self.stream = False  # for good: this agent answers with Execute only
        return await self._unary(message, sink, connected)

    async def _connect(self) -> bool:
        """Wait, at most ``connect_timeout``, until the channel is connected or has failed to;
        whether it is connected. (A call on a failed channel fails at once, with gRPC's reason:
        refused, not resolved, TLS.)"""
        states = self._grpc.ChannelConnectivity
        channel = self._channel
        state = channel.get_state(try_to_connect=True)
        if state is states.READY:
            return True
        timeout = self.settings.connect_timeout
        with anyio.move_on_after(timeout):
            while state not in (states.READY, states.TRANSIENT_FAILURE, states.SHUTDOWN):
                await channel.wait_for_state_change(state)
                state = channel.get_state(try_to_connect=True)
            return state is states.READY
        raise unreachable(self.name, self.endpoint, TimeoutError(), connect_timeout=timeout)

    async def _unary(self, message: Any, sink: EventSink, connected: bool) -> ATPResponse:
        grpc = self._grpc
        incoming = Incoming(sink, self.where("Execute"), self.settings.max_message_bytes)
        try:
            answer = await answer_of(self._stub.Execute(message, metadata=self.metadata))
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise AdapterError(
                    f"agent {self.name!r}: {incoming.where} is not implemented ({exc.code().name}: "
                    f"{exc.details()}); does {self.endpoint} serve an ATP agent?",
                    retryable=False,
                ) from None
            self.fail(exc, incoming, connected)
        incoming.received(len(answer.response) + sum(len(raw) for raw in answer.events))
        for raw in answer.events:
            deliver(incoming, raw)
        if not answer.response:
            raise incoming.ended("the answer has no ATP Response (its 'response' field is empty),")
        return incoming.body(answer.response)

    def fail(self, exc: Any, incoming: Incoming, connected: bool) -> NoReturn:
        """Raise what a failed call means: the agent cannot be reached, or cannot take the call
        now (AdapterError), it refused the request (AgentRefused), the connection was lost, or it
        ended the call with another status (AgentError)."""
        grpc = self._grpc
        code = exc.code()
        details = exc.details() or ""
        if (
            code == grpc.StatusCode.UNAVAILABLE
            and not incoming.received_bytes
            and (not connected or details.startswith(_CONNECT_FAILURES))
        ):
            raise self.unreachable(details) from None
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise refusal(incoming.where, code.name, "", details) from None
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
            raise AgentError(
                f"{incoming.where}: the agent sent a message of more than {self.settings.max_message_bytes} "
                f"bytes (max_message_bytes), {incoming.so_far}: {details}"
            ) from None
        if (
            code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
            and not incoming.received_bytes
        ):
            raise self.transient(exc, incoming) from None
        if code == grpc.StatusCode.UNAVAILABLE:
            raise incoming.cut(f"gRPC status UNAVAILABLE: {details}") from None
        raise AgentError(
            f"{incoming.where}: the agent ended the call with the gRPC status {code.name}, {incoming.so_far}",
            evidence=details or None,
        ) from None

    def transient(self, exc: Any, incoming: Incoming) -> AdapterError:
        """The agent (or a proxy before it) ended the call, before it sent anything, with a status
        that says it cannot take the call now (``UNAVAILABLE``, ``RESOURCE_EXHAUSTED``): a
        retryable AdapterError, after the wait the call's trailing metadata asks for
        (:func:`pushback`; a negative one asks for no other try)."""
        code, details = exc.code(), exc.details() or ""
        retryable, wait = pushback(exc)
        after = ""
        if wait is not None:
            after = f" (retry after {wait:.3g} s)"
        elif not retryable:
            after = " (the agent asks for no other try)"
        said = f": {quoted(details, masker=incoming.sink.masker)}" if details else ""
        return AdapterError(
            f"agent {self.name!r}: {incoming.where} ended the call with the gRPC status {code.name}{after}{said}",
            retryable=retryable,
            retry_after=wait,
        )

    def unreachable(self, details: str) -> AdapterError:
        """The channel could not connect; gRPC's ``details`` say why."""
        lowered = details.lower()
        where = f"cannot reach agent {self.name!r} at {self.endpoint}"
        if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
            return AdapterError(
                f"{where}: its TLS certificate does not verify ({details}); give the certificate, or the "
                f"CA that signed it, as ca_bundle",
                retryable=False,
            )
        if "handshake" in lowered or "ssl" in lowered:
            return AdapterError(
                f"{where}: the TLS handshake failed ({details}); does the agent speak TLS there? (grpc:// "
                f"is plaintext)"
            )
        if not self.settings.tls and "socket closed" in lowered:
            return AdapterError(f"{where}: {details} (if the agent speaks TLS, write grpcs://)")
        # gRPC's reasons as the exceptions the shared wording knows
        cause: BaseException
        if "connection refused" in lowered:
            cause = ConnectionRefusedError(errno.ECONNREFUSED, details)
        elif "resolving" in lowered or "dns" in lowered:
            cause = socket.gaierror(socket.EAI_NONAME, details)
        elif "timed out" in lowered or "deadline" in lowered:
            cause = TimeoutError(details)
        else:
            return AdapterError(f"{where}: {details}")
        return unreachable(self.name, self.endpoint, cause, connect_timeout=self.settings.connect_timeout)


def pushback(exc: Any) -> tuple[bool, float | None]:
    """Whether a failed call (``exc``, an ``AioRpcError``) may be tried again, and after how many
    seconds: its trailing metadata's ``grpc-retry-pushback-ms`` (cut to
    :data:`~atp.adapters.network.MAX_RETRY_AFTER`); a negative value asks for no other try. No
    value, or one that is not a whole number: another try, after ATP's own backoff."""
    try:
        metadata = exc.trailing_metadata()
    except Exception:  # (no metadata to read)
        return True, None
    value = header_value(metadata, PUSHBACK_KEY)
    match = _PUSHBACK.match(value) if value is not None else None
    if match is None:
        return True, None
    milliseconds = int(match.group(1))
    if milliseconds < 0:
        return False, None
    return True, min(milliseconds / 1000, MAX_RETRY_AFTER)


class _Unimplemented(Exception):
    """``ExecuteStream`` is not implemented by the agent (gRPC status UNIMPLEMENTED)."""


class _Stream:
    """One run over ``ExecuteStream``: events to the sink as they come, then the response."""

    def __init__(self, adapter: GrpcAdapter, incoming: Incoming) -> None:
        self.adapter = adapter
        self.incoming = incoming

    async def call(self, message: Any, connected: bool) -> ATPResponse:
        adapter = self.adapter
        grpc = adapter._grpc
        incoming = self.incoming
        call = adapter._stub.ExecuteStream(message, metadata=adapter.metadata)
        try:
            try:
                response = await self._read(call)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED and not incoming.messages:
                    raise _Unimplemented(f"{exc.code().name}: {exc.details()}") from None
                adapter.fail(exc, incoming, connected)
            if response is None:
                raise incoming.ended()
            await self._drain(call)
            return response
        finally:
            call.cancel()  # (nothing once the stream ended; ends it when the run stops early)

    async def _read(self, call: Any) -> ATPResponse | None:
        eof = self.adapter._grpc.aio.EOF
        incoming = self.incoming
        while True:
            item = await call.read()
            if item is eof:
                return None
            kind = item.WhichOneof("item")
            if kind == "event":
                raw = item.event
                incoming.received(len(raw))
                deliver(incoming, raw)
            elif kind == "response":
                raw = item.response
                incoming.received(len(raw))
                return incoming.take((raw,), (True,))
            else:
                incoming.messages += 1
                raise AgentError(
                    f"{incoming.where}: the agent sent an empty item (message {incoming.messages}, "
                    f"{incoming.so_far}): neither its 'event' nor its 'response' is set"
                )

    async def _drain(self, call: Any) -> None:
        """After the response the stream must end: what more comes is ignored, with a warning."""
        grpc = self.adapter._grpc
        sink, where = self.incoming.sink, self.incoming.where
        with anyio.move_on_after(DRAIN_SECONDS):
            try:
                if await call.read() is not grpc.aio.EOF:
                    sink.warn(
                        f"{where}: the agent sent more after the ATP Response; ATP ignored it and ended the call"
                    )
            except grpc.aio.AioRpcError as exc:
                sink.warn(
                    f"{where}: the agent ended the call with the gRPC status {exc.code().name} after its "
                    f"ATP Response; the response is kept"
                )


async def answer_of(call: Any) -> Any:
    """The answer of a unary ``call``; the call is cancelled if the run stops first. Awaited
    through a shield, so that the cancellation the run sees is its own: for a cancelled call
    gRPC raises a new ``CancelledError``, which no cancel scope would recognise as its own."""
    try:
        return await asyncio.shield(asyncio.ensure_future(call))
    finally:
        call.cancel()  # (nothing once the call is done)


def deliver(incoming: Incoming, raw: bytes) -> None:
    """Decode ``raw``, which the agent sent as an ATP Event (nothing is guessed from the JSON),
    and deliver it to the run's sink with its JSON text."""
    incoming.messages += 1
    try:
        event = decode_event(raw)
    except ProtocolError as exc:
        raise incoming.broken(exc, raw) from None
    incoming.sink.event(event, raw if b"\n" not in raw else None)  # (the events file has one per line)
    incoming.events += 1
