"""The JSON lines an agent writes on a stream, for adapters that read them (stdio, containers).

:class:`StderrLines` cuts what an agent writes on stderr into lines: each line that is an ATP
event goes to the run's sink as an event, every other line is the agent's log. Lines are
numbered (and their byte offsets counted) for messages; a line longer than the limit is cut,
and the rest of it dropped.

ATP decodes protocol messages with msgspec, which takes the last value of a key that appears
twice in one object, silently. :func:`duplicate_keys` finds such keys, so an adapter can warn
about a response like ``{"status": "failed", ..., "status": "completed"}``. It parses with the
standard library (slower than msgspec), so adapters call it on lines up to
:data:`DUPLICATE_CHECK_BYTES` only, and off the event loop (``anyio.to_thread``) on lines over
:data:`DUPLICATE_THREAD_BYTES`. Its time is linear in the size of the line.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from typing import Any, TypeAlias

from atp.core.errors import ProtocolError
from atp.core.protocol import decode_event, decode_event_lines
from atp.core.text import PREVIEW_CHARS, piece
from atp.core.trace import EventSink

DUPLICATE_CHECK_BYTES = 1024 * 1024
"""Lines longer than this are not checked for duplicate keys."""
DUPLICATE_THREAD_BYTES = 64 * 1024
"""Lines longer than this are checked on a worker thread, not on the event loop."""
MAX_PATHS = 10
"""How many duplicated keys :func:`duplicate_keys` names at most."""
STDERR_TAIL_LINES = 5
"""When an agent ends without a response, the reason quotes at most this many of the last
lines of its stderr log (as many as fit in a preview, the last one always)."""
DECODE_ERRORS = (ProtocolError, ValueError, RecursionError)
"""What decoding an agent's bytes may raise (UnicodeDecodeError is a ValueError)."""
_EVENT_KEY = b'"event_type"'


class StderrLines:
    """What an agent writes on stderr, fed chunk by chunk: events to ``sink``, other lines to
    its log. ``sink`` may be changed between chunks (an agent serving one run after another)."""

    __slots__ = ("cut", "line", "max_line", "offset", "pending", "sink", "tail")

    def __init__(self, sink: EventSink, max_line: int) -> None:
        self.sink = sink
        self.max_line = max_line
        self.line = 1
        """The number of the line being read (from 1), for messages."""
        self.offset = 0
        """The byte offset where that line starts."""
        self.pending = b""
        self.cut = False
        """The line being read was cut: the rest of it, up to its newline, is dropped."""
        self.tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        """The last non-blank lines of the agent's log."""

    def feed(self, chunk: bytes) -> None:
        """Take ``chunk``: every line it completes is an event or a log line now."""
        if self.cut:
            end = chunk.find(b"\n")
            if end < 0:
                self.offset += len(chunk)
                return
            self.cut = False
            self.line += 1
            self.offset += end + 1
            chunk = chunk[end + 1 :]
            if not chunk:
                return
        if self.pending:
            chunk = self.pending + chunk
        end = chunk.rfind(b"\n")
        if end < 0:
            self.pending = chunk
        else:
            self.pending = chunk[end + 1 :]
            self._lines(chunk[:end])
        if len(self.pending) > self.max_line:
            self.sink.warn(f"a stderr line longer than {self.max_line} bytes was cut")
            self._line(self.pending[: self.max_line], cut=True)
            self.offset += len(self.pending)
            self.pending = b""
            self.cut = True

    def finish(self) -> None:
        """The stream ended: its last line, when it had no newline."""
        if self.pending:
            pending, self.pending = self.pending, b""
            self._line(pending)

    def log_tail(self) -> str | None:
        """The last lines of the agent's log, as many of the last :data:`STDERR_TAIL_LINES` as
        fit in a preview (the last one always); ``None`` when it wrote none."""
        lines: list[str] = []
        size = 0
        for line in reversed(self.tail):
            size += len(line) + 1
            if lines and size > PREVIEW_CHARS:
                break
            lines.append(line)
        return "\n".join(reversed(lines)) if lines else None

    def _lines(self, block: bytes) -> None:
        """Complete lines: all events in one decode when they are (the usual case), else each
        line on its own."""
        if block[:1] == b"{":
            try:
                events = decode_event_lines(block)
            except DECODE_ERRORS:
                pass
            else:
                self.sink.events(events, block)
                self.line += block.count(b"\n") + 1
                self.offset += len(block) + 1
                return
        for line in block.split(b"\n"):
            self._line(line)
            self.line += 1
            self.offset += len(line) + 1

    def _line(self, line: bytes, *, cut: bool = False) -> None:
        """One line at ``line``/``offset``: an event, or the agent's log. Of a ``cut`` line (the
        part kept of one over ``max_line``) no end that could begin a secret is logged."""
        sink = self.sink
        if line[:1] == b"{":
            try:
                event = decode_event(line)
            except DECODE_ERRORS as exc:
                if _EVENT_KEY in line:
                    sink.warn(
                        f"stderr line {self.line} (byte offset {self.offset}) looks like "
                        f"an ATP event but is not one; it was skipped: {exc}"
                    )
            else:
                sink.event(event, line)
                return
        text = line.decode("utf-8", "replace")
        text = piece(text, sink.masker) if cut else text.rstrip("\r")
        sink.log(text)
        if text.strip():
            self.tail.append(text)


class _Object(dict[str, Any]):
    """A JSON object some of whose keys appeared more than once."""

    duplicated: dict[str, None]
    """The keys that appeared more than once, in the order they first did so (a dict: an
    ordered set)."""


def duplicate_keys(data: bytes | str) -> list[str]:
    """The keys that appear more than once in one JSON object of ``data``, as paths like
    ``$.status`` or ``$.artifacts[0].name`` in the order they come (at most
    :data:`MAX_PATHS`); ``[]`` when there are none, or when ``data`` is not JSON the standard
    library reads."""
    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        obj: dict[str, Any] = dict(items)
        if len(obj) == len(items):
            return obj
        found = True
        seen: set[str] = set()
        duplicated: dict[str, None] = {}
        for key, _ in items:
            if key in seen:
                duplicated[key] = None
            else:
                seen.add(key)
        marked = _Object(obj)
        marked.duplicated = duplicated
        return marked

    try:
        document = json.loads(data, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return []
    if not found:
        return []
    # Where a value is: (its key or index, where its container is); a path is spelled only for
    # the duplicates named, so deep nesting under long keys costs no more than the data.
    paths: list[str] = []
    stack: list[tuple[Any, _Where]] = [(document, None)]
    while stack and len(paths) < MAX_PATHS:
        value, where = stack.pop()
        if isinstance(value, dict):
            if isinstance(value, _Object):
                paths.extend(
                    _path((key, where)) for key in itertools.islice(value.duplicated, MAX_PATHS - len(paths))
                )
            stack.extend((item, (key, where)) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((item, (index, where)) for index, item in reversed(list(enumerate(value))))
    return paths


_Where: TypeAlias = "tuple[str | int, _Where] | None"


def _path(where: _Where) -> str:
    """``$.a.b[0]["c d"]`` for where a value is."""
    parts: list[str] = []
    while where is not None:
        step, where = where
        if isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            parts.append(f".{step}" if step.isidentifier() else f"[{json.dumps(step)}]")
    return "$" + "".join(reversed(parts))
