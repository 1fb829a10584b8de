"""The trace of one run: the events an agent sent, written to disk as they arrive.

An adapter hands every event (and every log line that is not an event) to an
:class:`EventSink`. The runner's sink, :class:`RunTrace`, appends each event to the run's events
file and folds it into a :class:`TraceSummary`, so that memory stays flat however many events an
agent sends. Evaluators read the summary for counts and iterate a :class:`Trace` when they need
the events themselves (read back from the file).

Besides the agent's events, a run's trace holds the events ATP observed itself: a service (the
mock tool server) records each tool call it answered through :meth:`RunTrace.record`. Such an
event is written to the same events file, as a line that begins with the key ``recorded_by``
(the service's key: ``{"recorded_by":"tools","event_type":"tool_call",...}``), and counted in
the summary like the agent's. Recorded events are numbered on their own (0, 1, 2, ... in the
order ATP recorded them) and are never compared with the agent's sequence numbers, so they do
not make the agent's events ``out_of_order``. An agent cannot forge one: a top-level
``recorded_by`` in the agent's own events is dropped (their JSON text is written again from the
decoded event, which keeps only the protocol's fields).

When a service serves tools in a run (:meth:`RunTrace.serve_tools`), its recordings of their
calls are authoritative: ``tool_call`` events the agent reports itself for those tools are left
out of the trace (not written, not counted), with one warning, so that no call counts twice.
"""

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import msgspec

from atp.core import files
from atp.core.bounds import MAX_COUNT
from atp.core.errors import AgentError, ProtocolError, StorageError
from atp.core.protocol import (
    ErrorEvent,
    Event,
    LLMRequestEvent,
    Metrics,
    ProgressEvent,
    ToolCallEvent,
    UnknownEvent,
    decode_event,
    encode,
    make_event,
    numbers_out_of_bounds,
)
from atp.core.secrets import Masker

DEFAULT_MAX_EVENTS = 1_000_000
DEFAULT_MAX_EVENT_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_LOG_BYTES = 10 * 1024 * 1024
LOG_TAIL_LINES = 20
MAX_WARNINGS = 20
RECORDED_BY = "recorded_by"
"""The key that marks, in the events file, an event ATP recorded itself (its value: the key of
the service that recorded it)."""
_RECORDED_BY = b'"' + RECORDED_BY.encode() + b'"'


class EventSink(Protocol):
    """Where an adapter delivers what its agent sends while it works."""

    masker: Masker | None
    """The run's secrets, or ``None`` when it has none: an adapter that words agent text itself
    (a warning quoting it, a log line it cut) masks it with this before cutting it
    (:func:`atp.core.text.shorten`, :func:`~atp.core.text.piece` take it). What the adapter
    hands to :meth:`event`, :meth:`log` and :meth:`warn` is masked by the sink."""

    def event(self, event: Event, raw: bytes | None = None) -> None:
        """One decoded event; ``raw`` is its JSON text when the adapter has it (saves encoding)."""

    def events(self, events: Sequence[Event], raw: bytes | None = None) -> None:
        """Several events in the order they came; ``raw``, when given, is their JSON texts,
        one per line (the fast path for adapters reading JSON lines)."""

    def log(self, line: str) -> None:
        """One line of the agent's own log output (not an event)."""

    def warn(self, message: str) -> None:
        """Something the agent did that breaks the protocol without spoiling the run."""


class TraceLimitExceeded(AgentError):
    """The agent sent more events (or more bytes of events) than a run may hold, or an event
    with a number beyond its bound (:func:`atp.core.protocol.numbers_out_of_bounds`): the run
    fails with this reason, and the events before it are kept."""


class EventOutOfBounds(TraceLimitExceeded):
    """:meth:`TraceSummary.add` met an event with a number beyond its bound: the events before
    it (``index`` of them, the last with sequence ``last_sequence``) are folded in."""

    def __init__(self, message: str, *, index: int, last_sequence: int) -> None:
        super().__init__(message)
        self.index = index
        self.last_sequence = last_sequence


class TraceSummary(msgspec.Struct, omit_defaults=True):
    """Counts folded from the events of one run, as they arrived."""

    events: int = 0
    by_type: dict[str, int] = msgspec.field(default_factory=dict)
    tool_calls: dict[str, int] = msgspec.field(default_factory=dict)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    errors: int = 0
    unrecoverable_errors: int = 0
    max_step: int = 0
    out_of_order: int = 0
    cost_usd: float = 0.0
    """What the ``llm_request`` events say their calls cost (their ``cost_usd``), added up."""

    @property
    def tool_call_count(self) -> int:
        return sum(self.tool_calls.values())

    def add(self, events: Sequence[Event], last_sequence: int) -> int:
        """Fold events in; returns the last sequence number seen. The numbers it adds up (tokens,
        steps) are checked against their bounds first (as
        :func:`atp.core.protocol.numbers_out_of_bounds` does): at the first event with one beyond
        them, :class:`EventOutOfBounds` is raised, the events before it folded in, it and those
        after it not. The hot path: one loop with local names, dispatch on the event's class,
        dictionary and integer work only."""
        per_class: dict[type[Any], int] = {}
        tool_calls = self.tool_calls
        out_of_order = 0
        high = MAX_COUNT
        bad: Event | None = None
        for event in events:
            cls = event.__class__
            if cls is ToolCallEvent:
                tool = event.payload.tool  # type: ignore[union-attr]
                tool_calls[tool] = tool_calls.get(tool, 0) + 1
            elif cls is LLMRequestEvent:
                payload: Any = event.payload
                sent, received, cost = payload.input_tokens, payload.output_tokens, payload.cost_usd
                if (
                    (sent is not None and (sent.__class__ is not int or not 0 <= sent <= high))
                    or (received is not None and (received.__class__ is not int or not 0 <= received <= high))
                    or (cost is not None and (cost.__class__ not in (int, float) or not 0 <= cost <= high))
                ):
                    bad = event
                    break
                if sent:
                    self.input_tokens += sent
                if received:
                    self.output_tokens += received
                if cost:
                    self.cost_usd = min(self.cost_usd + cost, high)
            elif cls is ErrorEvent:
                if event.payload.recoverable is not True:  # type: ignore[union-attr]
                    self.unrecoverable_errors += 1
            elif cls is ProgressEvent:
                step = event.payload.current_step  # type: ignore[union-attr]
                if step is not None:
                    if step.__class__ is not int or not 0 <= step <= high:
                        bad = event
                        break
                    if step > self.max_step:
                        self.max_step = step
            elif cls is UnknownEvent:
                name = event.event_type
                self.by_type[name] = self.by_type.get(name, 0) + 1
            per_class[cls] = per_class.get(cls, 0) + 1
            sequence = event.sequence
            if sequence <= last_sequence:
                out_of_order += 1
            last_sequence = sequence
        folded = self._fold(per_class, out_of_order)
        if bad is not None:
            found = numbers_out_of_bounds((bad,))
            problem = found[1] if found is not None else "a number is out of bounds"
            raise EventOutOfBounds(problem, index=folded, last_sequence=last_sequence)
        return last_sequence

    def _fold(self, per_class: dict[type[Any], int], out_of_order: int) -> int:
        """The counts of one :meth:`add` folded in; returns how many events they are."""
        by_type = self.by_type
        for cls, count in per_class.items():
            if cls is not UnknownEvent:
                name = cls.event_type
                by_type[name] = by_type.get(name, 0) + count
        if max(self.input_tokens, self.output_tokens, self.max_step) > MAX_COUNT:  # a sum of many
            self.input_tokens = min(self.input_tokens, MAX_COUNT)
            self.output_tokens = min(self.output_tokens, MAX_COUNT)
            self.max_step = min(self.max_step, MAX_COUNT)
        folded = sum(per_class.values())
        self.llm_calls += per_class.get(LLMRequestEvent, 0)
        self.errors += per_class.get(ErrorEvent, 0)
        self.events += folded
        self.out_of_order += out_of_order
        return folded

    def metrics(self, wall_time_seconds: float | None = None) -> Metrics:
        """The metrics the trace shows, for a run whose agent sent no response."""
        tokens = self.input_tokens + self.output_tokens
        return Metrics(
            total_tokens=tokens or None,
            input_tokens=self.input_tokens or None,
            output_tokens=self.output_tokens or None,
            total_steps=self.max_step or None,
            tool_calls=self.tool_call_count,
            llm_calls=self.llm_calls,
            wall_time_seconds=wall_time_seconds,
            cost_usd=self.cost_usd or None,
        )


class Trace:
    """What evaluators see of a run's events: the summary, and the events to iterate."""

    def __init__(self, summary: TraceSummary, events: Callable[[], Iterable[Event]]) -> None:
        self.summary = summary
        self._events = events

    @classmethod
    def of(cls, events: Iterable[Event]) -> "Trace":
        """A trace held in memory (for tests and in-process tools)."""
        kept = list(events)
        summary = TraceSummary()
        summary.add(kept, -1)
        return cls(summary, lambda: kept)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events())


def encode_text(value: str) -> bytes:
    """``value`` as a JSON string."""
    return msgspec.json.encode(value)


MAX_EVENT_LINE_BYTES = 1024 * 1024 * 1024
"""The longest events file line read back (an agent's ``max_line_bytes`` is at most 1 GiB)."""


def read_events(path: Path, masker: Masker | None = None, *, root: Path | None = None) -> Iterator[Event]:
    """The events of an events file, in the order they arrived, masked again with ``masker``
    (the file is in a run directory an agent can write to); a damaged line (the end of a file
    cut short when ATP was killed, or edited to hold a number out of bounds), or one longer than
    :data:`MAX_EVENT_LINE_BYTES`, is skipped. The file is opened without following a link
    below ``root`` (by default, its folder; :func:`atp.core.files.open_inside`): none are read
    when it is not a regular file there."""
    root = path.parent if root is None else root
    try:
        handle = files.open_inside(root, path.relative_to(root).as_posix())
    except (OSError, ValueError):
        return
    with handle:
        for line in files.lines(handle, MAX_EVENT_LINE_BYTES):
            if line is not None and line.strip():
                try:
                    event = decode_event(line)
                except ProtocolError:
                    continue
                if numbers_out_of_bounds((event,)) is None:
                    yield masker.value(event) if masker and not masker.clean_json(line) else event


class RunTrace:
    """The runner's sink for one run: events to a file and a summary, logs bounded, warnings kept.

    Files are opened on first use, so a run without events creates none.
    """

    def __init__(
        self,
        task_id: str,
        *,
        events_path: Path | None,
        log_path: Path | None,
        masker: Masker | None = None,
        on_event: Callable[[Event], None] | None = None,
        max_events: int = DEFAULT_MAX_EVENTS,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
    ) -> None:
        self.task_id = task_id
        self.summary = TraceSummary()
        self.warnings: list[str] = []
        self.log_tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self.log_lines = 0
        self._events_path = events_path
        self._log_path = log_path
        self.masker = masker if masker else None
        """The run's secrets (the protocol's :attr:`EventSink.masker`)."""
        self._on_event = on_event
        self._max_events = max_events
        self._max_event_bytes = max_event_bytes
        self._event_bytes = 0
        self._max_log_bytes = max_log_bytes
        self.storage_error: StorageError | None = None
        """Set when the run directory could not be written: the suite must stop."""
        self._log_bytes = 0
        self._events_file: IO[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._last_sequence = -1
        self._foreign = 0
        self._served: set[str] | None = None
        """Tools a service answers in this run (the agent's own tool_call events for them are left out)."""
        self._recorded = 0
        self._record_refused = False
        self._closed = False
        self._watch: Callable[[TraceSummary], None] | None = None

    # --- EventSink -----------------------------------------------------------------------

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.events((event,), raw)

    def events(self, events: Sequence[Event], raw: bytes | None = None) -> None:
        task_id = self.task_id
        for event in events:
            if event.task_id != task_id:
                self._drop_foreign(events)
                return
        if self._served is not None:
            kept = self._not_served(events)
            if kept is not None:
                events, raw = kept, None
                if not events:
                    return
        if raw is not None and (_RECORDED_BY in raw or b"\\u" in raw):
            raw = None  # it may spell ``recorded_by``: written again from the decoded events
        room = self._max_events - self.summary.events
        if len(events) > room:
            self.events(events[:room])
            raise TraceLimitExceeded(
                f"agent flooded ATP with events: more than {self._max_events} in one run"
            )
        data = self._data(events, raw)
        self._event_bytes += len(data)
        if self._event_bytes > self._max_event_bytes:
            raise TraceLimitExceeded(
                f"agent flooded ATP with events: more than {self._max_event_bytes} bytes of events in one run"
            )
        try:
            self._last_sequence = self.summary.add(events, self._last_sequence)
        except EventOutOfBounds as bad:  # the events before it are kept, written as the rest
            self._event_bytes -= len(data)
            self._last_sequence = bad.last_sequence
            events = events[: bad.index]
            if events:
                data = self._data(events, None)
                self._event_bytes += len(data)
                self._write_event_data(data)
                self._announce(events)
            raise TraceLimitExceeded(f"the agent sent an event with a number out of bounds: {bad}") from None
        self._write_event_data(data)
        self._announce(events)
        if self._watch is not None:
            self._watch(self.summary)

    def watch(self, check: Callable[[TraceSummary], None] | None) -> None:
        """Have ``check`` see the summary each time events were added to it (the agent's, or
        ATP's own record): how a run's limits are held to while the agent runs
        (:class:`atp.core.run_limits.RunLimits`)."""
        self._watch = check

    def _data(self, events: Sequence[Event], raw: bytes | None) -> bytes:
        """The lines of ``events`` for the events file: ``raw`` when it can be written as it is,
        else the events encoded again (masked)."""
        masker = self.masker
        if raw is not None and masker is not None and not masker.clean_json(raw):
            raw = None  # a secret may be in there, in some spelling: mask the decoded events
        if raw is not None:
            return raw if raw.endswith(b"\n") else raw + b"\n"
        if masker is not None:
            return b"\n".join(encode(masker.value(event)) for event in events) + b"\n"
        return b"\n".join(encode(event) for event in events) + b"\n"

    def _announce(self, events: Sequence[Event]) -> None:
        on_event = self._on_event
        if on_event is not None:
            for event in events:
                on_event(event)

    def _not_served(self, events: Sequence[Event]) -> list[Event] | None:
        """``events`` without the agent's tool_call events of tools a service answers, or
        ``None`` when there is none of those."""
        served = self._served
        assert served is not None
        kept: list[Event] | None = None
        for index, event in enumerate(events):
            if event.__class__ is ToolCallEvent and event.payload.tool in served:
                if kept is None:
                    kept = list(events[:index])
            elif kept is not None:
                kept.append(event)
        return kept

    # --- what ATP observed itself ------------------------------------------------------------

    def serve_tools(self, names: Iterable[str]) -> None:
        """A service answers the tools ``names`` in this run: its recordings of their calls
        are authoritative, and the agent's own tool_call events for them are left out."""
        if self._served is None:
            self._served = set()
        self._served.update(names)

    def record(self, payload: msgspec.Struct, *, by: str) -> Event | None:
        """Record an event ATP observed itself (``by``: the key of the service that did),
        built from its typed payload: written to the events file marked ``recorded_by`` and
        counted in the summary, numbered apart from the agent's events (see the module). A
        tool call makes its tool one the service answers (:meth:`serve_tools`). Returns the
        event, or ``None`` when it was not kept: the run has ended, or the run's event limits
        are reached (warned about once; it is still counted in the summary, so that a limit
        on tool calls or a forbidden tool holds however many events came first)."""
        if self._closed or self.storage_error is not None:
            return None
        event = make_event(self.task_id, self._recorded, payload)
        if isinstance(event, ToolCallEvent):
            self.serve_tools((event.payload.tool,))
        written = self.masker.value(event) if self.masker is not None else event
        data = b'{"' + RECORDED_BY.encode() + b'":' + encode_text(by) + b"," + encode(written)[1:] + b"\n"
        if self.summary.events >= self._max_events or self._event_bytes + len(data) > self._max_event_bytes:
            if not self._record_refused:
                self._record_refused = True
                self.warn(
                    f"the run reached its event limits; what service {by!r} observed after that "
                    f"is counted but not recorded"
                )
            self.summary.add((event,), -1)
            if self._watch is not None:
                self._watch(self.summary)
            return None
        self._recorded += 1
        self._event_bytes += len(data)
        self.summary.add((event,), -1)  # -1: never out of order, the agent's order is untouched
        self._write_event_data(data)
        if self._on_event is not None:
            self._on_event(event)
        if self._watch is not None:
            self._watch(self.summary)
        return event

    def _write_event_data(self, data: bytes) -> None:
        try:
            handle = self._events_file
            if handle is None:
                handle = self._events_file = self._open(self._events_path)
            if handle is not None:
                handle.write(data)
        except OSError as exc:
            self._storage_failed(self._events_path, exc)

    def _storage_failed(self, path: Path | None, exc: OSError) -> None:
        self.storage_error = StorageError(f"cannot write {path}: {files.reason(exc)}")
        raise self.storage_error from None

    def _drop_foreign(self, events: Sequence[Event]) -> None:
        """Events with another task_id are dropped (and said so); the others are kept."""
        for event in events:
            if event.task_id == self.task_id:
                self.events((event,))
                continue
            self._foreign += 1
            if self._foreign == 1:
                self.warn(
                    f"event with sequence {event.sequence} has task_id {event.task_id!r}, "
                    f"expected {self.task_id!r}; such events are dropped"
                )

    def log(self, line: str) -> None:
        if self.masker is not None:
            line = self.masker.text(line)
        self.log_lines += 1
        self.log_tail.append(line)
        data = line.encode("utf-8", "replace") + b"\n"
        if self._log_bytes >= self._max_log_bytes:
            return
        self._log_bytes += len(data)
        try:
            handle = self._log_file
            if handle is None:
                handle = self._log_file = self._open(self._log_path)
            if handle is None:
                return
            if self._log_bytes >= self._max_log_bytes:
                handle.write(b"[log truncated: more than %d bytes]\n" % self._max_log_bytes)
            else:
                handle.write(data)
        except OSError as exc:
            self._storage_failed(self._log_path, exc)

    def warn(self, message: str) -> None:
        if self.masker is not None:
            message = self.masker.text(message)
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)

    # --- after the run -------------------------------------------------------------------

    @property
    def events_written(self) -> bool:
        return self._events_file is not None

    @property
    def log_written(self) -> bool:
        return self._log_file is not None

    def close(self) -> None:
        self._closed = True
        if self.summary.out_of_order:
            self.warn(f"{self.summary.out_of_order} events arrived out of sequence order")
        if self._foreign > 1:
            self.warn(f"{self._foreign} events with another task_id were dropped")
        for handle, path in ((self._events_file, self._events_path), (self._log_file, self._log_path)):
            if handle is not None:
                try:
                    handle.close()
                except OSError as exc:  # the buffered rest could not be written
                    if self.storage_error is None:
                        self.storage_error = StorageError(f"cannot write {path}: {exc.strerror or exc}")

    def trace(self) -> Trace:
        path = self._events_path
        if path is None or self._events_file is None:
            return Trace(self.summary, tuple)
        return Trace(self.summary, lambda: read_events(path, self.masker))

    @staticmethod
    def _open(path: Path | None) -> IO[bytes] | None:
        if path is None:
            return None
        try:
            fd = files.open_append(path)
        except FileNotFoundError:  # the first run's file: its folder is made then
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = files.open_append(path)
        return open(fd, "ab", buffering=64 * 1024)
