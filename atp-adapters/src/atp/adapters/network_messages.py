"""The messages of one run of a network agent (``http``, ``websocket``, ``grpc``; see
:mod:`atp.adapters.network`): which message is an ATP Event and which the ATP Response
(:func:`decode_message`), and what one run receives (:class:`Incoming`): its messages decoded,
its events delivered to the run's sink, its bytes and events counted, and its faults worded
with where it was and how far it got."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from atp.core.errors import AgentError, ProtocolError
from atp.core.protocol import ATPResponse, Event, decode_event, decode_event_lines, decode_response
from atp.core.trace import EventSink

_EVENT_KEY = b'"event_type"'


class _Kind(msgspec.Struct):
    event_type: Any = msgspec.UNSET


_kind_decoder = msgspec.json.Decoder(_Kind)


def is_event(data: bytes | str) -> bool:
    """Whether the JSON object ``data`` has an ``event_type`` at its top level (an ATP Event),
    not somewhere inside (a response whose artifact mentions it)."""
    present = '"event_type"' in data if isinstance(data, str) else _EVENT_KEY in data
    if not present:
        return False
    try:
        return _kind_decoder.decode(data).event_type is not msgspec.UNSET
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        return True  # (not JSON: the event decoder says what is wrong with it)


def decode_message(data: bytes | str, *, final: bool = False) -> Event | ATPResponse:
    """One message of an agent's stream: an ATP Event when it has an ``event_type``, else the
    ATP Response (always the response when the transport marked it ``final``). Raises
    ProtocolError, naming the message kind, the field and what was expected."""
    if not final and is_event(data):
        return decode_event(data)
    return decode_response(data)


def events_word(count: int) -> str:
    return f"{count} event{'' if count == 1 else 's'}"


class Incoming:
    """What one run receives from a network agent: its messages decoded, its events delivered
    to ``sink``, its bytes and events counted, and its faults worded with ``where`` (``POST
    http://127.0.0.1:8000/execute/stream``, ``ws://127.0.0.1:8765``) and how far it got.

    The adapter calls :meth:`received` with the size of everything it reads (before decoding,
    so that the limit holds while a message is still arriving), then :meth:`take` with the
    messages that have arrived (one, or a batch: events are decoded and delivered in one call),
    until it returns the response; or :meth:`body` with a whole body that must be the response.
    """

    __slots__ = ("events", "limit", "messages", "received_bytes", "sink", "where")

    def __init__(self, sink: EventSink, where: str, limit: int) -> None:
        self.sink = sink
        self.where = where
        self.limit = limit
        self.events = 0
        """Events delivered to the sink so far."""
        self.messages = 0
        """Messages taken so far (events, and the response or the message that broke the run)."""
        self.received_bytes = 0

    @property
    def so_far(self) -> str:
        """How far the run got: ``after 3 events``, ``before any event``."""
        return f"after {events_word(self.events)}" if self.events else "before any event"

    def received(self, size: int) -> None:
        """Count ``size`` more bytes; past the limit the run fails."""
        self.received_bytes += size
        if self.received_bytes > self.limit:
            raise self.flooded()

    def flooded(self) -> AgentError:
        return AgentError(
            f"{self.where}: the agent sent more than {self.limit} bytes in one run "
            f"(max_message_bytes), {self.so_far}"
        )

    def take(
        self, messages: Sequence[bytes | str], final: Sequence[bool] | None = None
    ) -> ATPResponse | None:
        """Decode the ``messages`` that arrived (in order), deliver the events among them and
        return the response when one is there (what follows it is ignored, with a warning).
        ``final[i]`` marks a message the transport says is the response. Events that come
        together as JSON without line breaks are decoded and delivered in one call."""
        count = len(messages)
        start = 0
        # The fast path: the messages before the first one the transport marks as the response,
        # but trailing non-events, decoded in one call.
        end = count
        if final is not None and True in final:
            end = list(final).index(True)
        while end > start and not _looks_event(messages[end - 1]):
            end -= 1
        if end - start > 1:
            start = self._batch(messages, end)
        for index in range(start, count):
            data = messages[index]
            marked = final is not None and final[index]
            self.messages += 1
            try:
                message = decode_message(data, final=marked)
            except ProtocolError as exc:
                raise self.broken(exc, data) from None
            if isinstance(message, ATPResponse):
                left = count - index - 1
                if left:
                    self.sink.warn(
                        f"{self.where}: {left} message{'' if left == 1 else 's'} after the ATP Response "
                        f"{'was' if left == 1 else 'were'} ignored"
                    )
                return message
            raw = data.encode() if isinstance(data, str) else data
            self.sink.event(message, raw if b"\n" not in raw else None)
            self.events += 1
        return None

    def _batch(self, messages: Sequence[bytes | str], end: int) -> int:
        """Decode ``messages[:end]`` as events in one call and deliver them; returns how many were
        (0 when one of them is not a known event, or holds a line break: then they are taken
        one by one, for precise messages and unknown event types)."""
        parts = [m.encode() if isinstance(m, str) else m for m in messages[:end]]
        if any(b"\n" in part or part[:1] != b"{" for part in parts):
            return 0
        raw = b"\n".join(parts)
        try:
            events = decode_event_lines(raw)
        except (ProtocolError, ValueError, RecursionError):
            return 0
        self.sink.events(events, raw)
        self.events += end
        self.messages += end
        return end

    def body(self, data: bytes) -> ATPResponse:
        """A whole body that must be the ATP Response (a synchronous answer)."""
        self.messages += 1
        try:
            return decode_response(data)
        except ProtocolError as exc:
            raise AgentError(
                f"{self.where}: the agent broke the protocol: its answer is not an ATP Response ({exc})",
                evidence=data,
            ) from None

    def broken(self, exc: ProtocolError, data: bytes | str) -> AgentError:
        """Message number :attr:`messages` is not an ATP message."""
        return AgentError(
            f"{self.where}: the agent broke the protocol in message {self.messages} ({self.so_far}): {exc}",
            evidence=data,
        )

    def cut(self, detail: str) -> AgentError:
        """The connection broke before the response."""
        return AgentError(
            f"{self.where}: the connection was cut {self.so_far}, before an ATP Response ({detail})"
        )

    def ended(self, how: str = "the stream ended") -> AgentError:
        """The agent ended its stream (cleanly) without sending the response."""
        return AgentError(f"{self.where}: {how} {self.so_far} without an ATP Response")


def _looks_event(data: bytes | str) -> bool:
    return _EVENT_KEY in data if isinstance(data, bytes) else '"event_type"' in data
