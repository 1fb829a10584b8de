"""Server-Sent Events read as the WHATWG specification defines them, fed chunk by chunk.

Lines end with CR LF, LF or a lone CR (all three are valid); a CR at the end of a chunk is held
until the next one says whether an LF follows, and counts as a line end when the stream ends. A
byte order mark at the very start of the stream is dropped. A message is dispatched at a blank
line: its ``event`` field (``message`` by default) and its ``data`` lines joined by LF; comments
(``:``), ``id`` and ``retry`` are read past.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field

__all__ = ["Message", "MessageReader"]


@dataclass
class Message:
    """One dispatched message."""

    event: str = "message"
    data: str = ""


@dataclass
class MessageReader:
    """The messages of one stream: :meth:`feed` its bytes as they come, :meth:`end` at its end.
    Raises :class:`UnicodeDecodeError` for bytes that are not UTF-8."""

    _text: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8-sig")()
    )
    _pending: str = ""
    _event: str = ""
    _data: list[str] = field(default_factory=list)

    def feed(self, chunk: bytes) -> list[Message]:
        """The messages the stream completes with ``chunk``."""
        return self._lines(self._text.decode(chunk), final=False)

    def end(self) -> list[Message]:
        """The messages completed by the end of the stream (a held CR ends a line)."""
        return self._lines(self._text.decode(b"", final=True), final=True)

    def _lines(self, text: str, *, final: bool) -> list[Message]:
        text = self._pending + text
        self._pending = ""
        if text.endswith("\r") and not final:  # (an LF may follow in the next chunk)
            text, self._pending = text[:-1], "\r"
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._pending = lines.pop() + self._pending  # the line not ended yet
        if final and self._pending:
            lines.append(self._pending.rstrip("\r"))
            self._pending = ""
        messages: list[Message] = []
        for line in lines:
            message = self._line(line)
            if message is not None:
                messages.append(message)
        return messages

    def _line(self, line: str) -> Message | None:
        if not line:
            if not self._data and not self._event:
                return None
            message = Message(event=self._event or "message", data="\n".join(self._data))
            self._event, self._data = "", []
            return message
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None
