"""The event sink of one probe of ``atp validate``: what the agent sent, counted and bounded."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec

from atp.core.text import shorten

if TYPE_CHECKING:
    from atp.core.protocol import Event
    from atp.core.secrets import Masker

__all__ = ["LOG_TAIL_LINES", "MAX_DISORDER", "MAX_WARNINGS", "SEEN_CHARS", "TASK_ID_CHARS", "ProbeSink"]

MAX_WARNINGS = 20
MAX_DISORDER = 3
"""How many places where sequence numbers do not increase are named."""
LOG_TAIL_LINES = 5
SEEN_CHARS = 300
"""How much of what an agent sent one line of the report quotes."""
TASK_ID_CHARS = 100


class ProbeSink:
    """The :class:`~atp.core.trace.EventSink` of one probe: what the agent sent, in memory and
    bounded (counts, the first problems, the last log lines), never the events themselves."""

    def __init__(self, task_id: str, masker: Masker) -> None:
        self.task_id = task_id
        self.masker: Masker | None = masker
        self.events_seen = 0
        """Events with the request's task_id."""
        self.first_sequence: int | None = None
        self.last_sequence: int | None = None
        self.disorder: list[str] = []
        self.disorder_count = 0
        self.foreign: dict[str, int] = {}
        """Events with another task_id: how many, by task_id (the first few task_ids)."""
        self.foreign_count = 0
        self.warnings: list[str] = []
        self.warning_count = 0
        self.log_tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self.recorded: dict[str, int] = {}
        """The tool calls the probed test's services answered (the mock tool server): how
        many, by tool (ATP's own observations, not the agent's events)."""

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.events((event,))

    def events(self, events: Sequence[Event], raw: bytes | None = None) -> None:
        for event in events:
            if event.task_id != self.task_id:
                self.foreign_count += 1
                other = self._kept(event.task_id, TASK_ID_CHARS)
                if other in self.foreign or len(self.foreign) < MAX_DISORDER:
                    self.foreign[other] = self.foreign.get(other, 0) + 1
                continue
            self.events_seen += 1
            sequence = event.sequence
            last = self.last_sequence
            if last is not None and sequence <= last:
                self.disorder_count += 1
                if len(self.disorder) < MAX_DISORDER:
                    kind = getattr(event, "event_type", "?")
                    self.disorder.append(
                        f"event {self.events_seen} ({kind}) has sequence {sequence}, after {last}"
                    )
            if self.first_sequence is None:
                self.first_sequence = sequence
            self.last_sequence = sequence

    def record(self, payload: msgspec.Struct, *, by: str) -> None:
        """What a service of the probed test observed (a :class:`~atp.core.service.Recorder`
        writes here): counted by tool, never checked as the agent's events."""
        tool = getattr(payload, "tool", None)
        if isinstance(tool, str) and (tool in self.recorded or len(self.recorded) < MAX_WARNINGS):
            self.recorded[tool] = self.recorded.get(tool, 0) + 1

    def serve_tools(self, names: Iterable[str]) -> None:
        """(The probe keeps no trace: the agent's own tool_call events are checked as any event.)"""

    def log(self, line: str) -> None:
        if line.strip():
            self.log_tail.append(self._kept(line))

    def warn(self, message: str) -> None:
        self.warning_count += 1
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(self._kept(message))

    def _kept(self, text: str, limit: int = SEEN_CHARS) -> str:
        """Agent text as it is kept: secrets masked first, then cut (a cut never splits one)."""
        return shorten(text, limit, self.masker)
