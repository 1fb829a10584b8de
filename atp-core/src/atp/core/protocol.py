"""ATP Protocol 1.0: the request, response and event messages as msgspec Structs.

Wire messages are tolerant of unknown fields (a higher minor version may add some) and omit
fields left at their default when encoded. Artifacts are a tagged union on ``type``; events are
a tagged union on ``event_type`` whose ``payload`` is typed per event type. An event type this
version does not know (added by a higher minor version) decodes as :class:`UnknownEvent`.

Decode with :func:`decode_request`, :func:`decode_response` and :func:`decode_event`: they turn
any decoding failure into a :class:`~atp.core.errors.ProtocolError` naming the message, the field
and what was expected, and reject a message whose major version is not 1.
"""

import collections.abc
import re
from datetime import datetime, timezone
from typing import Annotated, Any, ClassVar, Literal, Union

import msgspec

from atp.core.bounds import MAX_COUNT, number_in, shown_number
from atp.core.errors import ProtocolError
from atp.core.mistakes import message_path, type_at
from atp.core.spelling import describe

PROTOCOL_VERSION = "1.0"
"""The version ATP writes in every message it sends (``version``)."""
PROTOCOL_MAJOR = 1
"""The major version ATP accepts: a message of version ``1.x`` (any minor) is read."""
MAX_NESTING = 900
"""Messages nested deeper than this (about Python's recursion limit) are refused as protocol
violations; ATP's own processing of agent data stays within it."""


class Message(msgspec.Struct, omit_defaults=True, kw_only=True, gc=False):
    """Base of every wire Struct: unknown fields are ignored, defaults are not encoded."""


# --- request -------------------------------------------------------------------------------

Description = Annotated[str, msgspec.Meta(min_length=1, max_length=10000)]
"""A task's description: 1 to 10,000 characters."""
MaxSteps = Annotated[int, msgspec.Meta(ge=1, le=1000)]
"""``constraints.max_steps``: 1 to 1,000."""
MaxTokens = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
"""``constraints.max_tokens``: 1 to 10,000,000."""
TimeoutSeconds = Annotated[int, msgspec.Meta(ge=1, le=86400)]
"""A time limit in whole seconds: 1 to 86,400 (a day)."""
Budget = Annotated[float, msgspec.Meta(ge=0)]
"""``constraints.budget_usd``: US dollars, 0 or more."""
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
"""A count in a message that ATP does not add up (an artifact's size, a progress event's
``total_steps``): an integer from 0 to 10^15; a message with one beyond is not valid."""
Measure = Annotated[float, msgspec.Meta(ge=0, le=float(MAX_COUNT))]
"""A duration in milliseconds, a temperature: a number from 0 to 10^15; a message with one
beyond is not valid."""
Percentage = Annotated[float, msgspec.Meta(ge=0, le=100)]
"""A progress event's ``percentage``: 0 to 100."""

DEFAULT_TIMEOUT_SECONDS = 300
"""The time limit of a run whose constraints give no ``timeout_seconds``."""


class ExpectedArtifact(Message, kw_only=True):
    """A hint of what the agent should produce (``task.expected_artifacts``): its ``type``
    (``file`` or ``structured``), its ``format`` (``markdown``, ``csv``, ...) and its ``name``
    (a file name, or a structured artifact's name). Hints only: what the agent produced is
    checked by the test's assertions, not against these."""

    type: Literal["file", "structured"] | None = None
    format: str | None = None
    name: str | None = None


class Task(Message, kw_only=True):
    """What the agent is asked: ``description`` in natural language, ``input_data`` the
    structured input it works on, ``expected_artifacts`` hints of what it should produce."""

    description: Description
    input_data: dict[str, Any] | None = None
    expected_artifacts: list[ExpectedArtifact] | None = None


class Constraints(Message, kw_only=True):
    """Limits the agent is asked to keep to. ``timeout_seconds`` (wall-clock, default
    :data:`DEFAULT_TIMEOUT_SECONDS`) is also enforced: ATP cancels the run when it is up.
    ``max_steps``, ``max_tokens`` (LLM tokens) and ``budget_usd`` are the agent's to keep; the
    score's efficiency and cost components measure the run against them.
    ``allowed_tools``: the tools the agent may call (``None``: all of them)."""

    max_steps: MaxSteps | None = None
    max_tokens: MaxTokens | None = None
    timeout_seconds: TimeoutSeconds | None = None
    allowed_tools: list[str] | None = None
    budget_usd: Budget | None = None


class Context(Message, kw_only=True):
    """Where the agent runs: ``tools_endpoint`` the URL of the tools ATP serves it (the
    protocol's Tool Protocol: ``POST <endpoint>/<tool>``), ``workspace_path`` the folder it
    works in (its relative artifact paths are relative to it), ``environment`` variables it
    gets (secrets go here, never in the task; ATP masks known secrets in what it writes)."""

    tools_endpoint: str | None = None
    workspace_path: str | None = None
    environment: dict[str, str] | None = None


class ATPRequest(Message, kw_only=True):
    """A task for an agent. ``task_id`` is fresh for every run (a UUID): the response and
    every event of the run carry it. ``metadata`` is for tracing (ATP's runner sends
    ``test_id``, ``run_number`` and ``total_runs``, among others)."""

    version: str
    task_id: str
    task: Task
    constraints: Constraints | None = None
    context: Context | None = None
    metadata: dict[str, Any] | None = None


# --- response ------------------------------------------------------------------------------


class FileArtifact(Message, tag_field="type", tag="file", kw_only=True):
    """A file the agent produced (``type: file``). ``path`` is relative to the workspace (or
    the agent's working folder); ``content`` is the file's content inline: its text, or base64
    when ``content_type`` (a MIME type) is binary, as the spec says; without it, evaluators read
    the file. ``size_bytes`` is its size in bytes, ``content_hash`` ``sha256:<hex>`` of them;
    the runner checks both (:mod:`atp.core.artifacts` has the rule)."""

    path: str
    content_type: str | None = None
    size_bytes: Count | None = None
    content_hash: str | None = None
    content: str | None = None


class StructuredArtifact(Message, tag_field="type", tag="structured", kw_only=True):
    """Data the agent produced (``type: structured``): ``data`` under ``name``; ``schema``
    names the shape it claims to follow (``competitor_list``, say; ATP does not read it)."""

    name: str
    data: dict[str, Any]
    schema: str | None = None


class ReferenceArtifact(Message, tag_field="type", tag="reference", kw_only=True):
    """A large file the agent produced, named by ``path`` and never sent inline
    (``type: reference``); the other fields are as a :class:`FileArtifact`'s."""

    path: str
    content_type: str | None = None
    size_bytes: Count | None = None
    content_hash: str | None = None


Artifact = Union[FileArtifact, StructuredArtifact, ReferenceArtifact]
"""Any artifact; decoded by its ``type`` field."""

ResponseStatus = Literal["completed", "failed", "timeout", "cancelled", "partial"]
"""How the agent says its task ended: ``completed``; ``failed`` (with ``error``);
``timeout`` (it ran out of time); ``cancelled``; ``partial`` (it did part of the task)."""
RESPONSE_STATUSES: tuple[str, ...] = ("completed", "failed", "timeout", "cancelled", "partial")
"""The values of :data:`ResponseStatus`, in order."""


class Metrics(Message, kw_only=True):
    """What the agent reports it spent on the task, each figure optional: LLM tokens (in
    all, input, output), steps, tool calls and LLM calls (counts), ``wall_time_seconds``
    and ``cost_usd`` (US dollars). Untrusted: :func:`sane_metrics` checks them against their
    bounds before anything scores them."""

    total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_steps: int | None = None
    tool_calls: int | None = None
    llm_calls: int | None = None
    wall_time_seconds: float | None = None
    cost_usd: float | None = None


MAX_METRIC = float(MAX_COUNT)
"""The largest count or measurement a metric (or a number in an event) may have: 10^15. More
is no measurement: statistics of such values overflow."""

COUNT_METRICS = frozenset(
    {"total_tokens", "input_tokens", "output_tokens", "total_steps", "tool_calls", "llm_calls"}
)
"""The metrics that are counts (integers); the others are measurements (seconds, dollars)."""


def sane_metrics(metrics: Metrics) -> tuple[Metrics, list[str]]:
    """``metrics`` with every value no measurement can have (negative, NaN, infinite, beyond
    :data:`MAX_METRIC`, or a count that is not an integer) counted as :data:`MAX_METRIC`, and
    one problem per such value, naming the field and the value. Agents are untrusted: scoring,
    limits and statistics only ever see numbers within bounds, and an out-of-bounds value is
    never dropped (a dropped ``total_steps`` would let ``max_steps`` pass, a dropped
    ``cost_usd`` a budget): the caller fails the run with the problems as evidence."""
    problems: list[str] = []
    changes: dict[str, float] = {}
    for name in Metrics.__struct_fields__:
        value = getattr(metrics, name)
        if value is None:
            continue
        counts = name in COUNT_METRICS
        if number_in(value, 0, MAX_METRIC, integer=counts) is None:
            changes[name] = MAX_COUNT if counts else MAX_METRIC
            kind = "a count: an integer" if counts else "a measurement: a number"
            problems.append(
                f"metrics.{name} = {shown_number(value)} is out of bounds ({kind} from 0 to 1e15); "
                f"it counts as 1e15"
            )
    if changes:
        metrics = msgspec.structs.replace(metrics, **changes)
    return metrics, problems


class ATPResponse(Message, kw_only=True):
    """What an agent produced for a task: ``task_id`` is the request's, ``artifacts`` may be
    empty. ``error`` says why when ``status`` is ``failed``; ``error_code`` (``TOOL_NOT_FOUND``,
    ``TIMEOUT``, ... in the spec's list) and ``error_details`` are optional detail of it.
    ``trace_id`` refers to the agent's own full trace, if it keeps one."""

    version: str
    task_id: str
    status: ResponseStatus
    artifacts: list[Artifact]
    metrics: Metrics
    error: str | None = None
    trace_id: str | None = None
    error_code: str | None = None
    error_details: dict[str, Any] | None = None


# --- events --------------------------------------------------------------------------------


class ToolCallPayload(Message, kw_only=True):
    """A tool call (``tool_call``): the ``tool``'s name, its ``input`` and ``output`` (any
    JSON), ``duration_ms`` in milliseconds, ``status`` (``success``, ...) and ``error``."""

    tool: str
    input: Any = None
    output: Any = None
    duration_ms: Measure | None = None
    status: str | None = None
    error: str | None = None


class LLMRequestPayload(Message, kw_only=True):
    """A call to an LLM (``llm_request``): the ``model``, tokens sent and received,
    ``duration_ms`` in milliseconds, the ``temperature`` and why it stopped (``stop_reason``,
    ``end_turn`` say). Its tokens add up to the trace's token counts. ``cost_usd``, what the call
    cost in US dollars, is ATP's extension of the payload: the costs add up to the trace's, which
    ``constraints.budget_usd`` is held to while the agent runs."""

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    duration_ms: Measure | None = None
    temperature: Measure | None = None
    stop_reason: str | None = None


class ReasoningPayload(Message, kw_only=True):
    """The agent's reasoning (``reasoning``, optional): a ``thought``, a ``plan`` of steps,
    and the ``step`` (phase) it is in."""

    thought: str | None = None
    plan: list[str] | None = None
    step: str | None = None


class StateChangePayload(Message, kw_only=True):
    """The agent moved from one state of its own to another (``state_change``), and why."""

    from_state: str | None = None
    to_state: str | None = None
    reason: str | None = None


class ArtifactCreatedPayload(Message, kw_only=True):
    """The agent produced an artifact during the run (``artifact_created``): its type
    (``file``, ...), ``path`` or ``name``, and size. The response's ``artifacts`` are what
    evaluators check."""

    artifact_type: str | None = None
    path: str | None = None
    name: str | None = None
    size_bytes: Count | None = None


class ErrorPayload(Message, kw_only=True):
    """An error the agent met (``error``): its kind (``error_type``), ``message``, whether it
    is ``recoverable`` (anything but ``True`` counts as unrecoverable in the trace's summary)
    and when to try again (``retry_after_ms``, milliseconds)."""

    error_type: str | None = None
    message: str | None = None
    recoverable: bool | None = None
    retry_after_ms: Measure | None = None


class ProgressPayload(Message, kw_only=True):
    """How far the agent is (``progress``): step ``current_step`` of ``total_steps``,
    ``percentage`` (0-100) and a ``message``."""

    current_step: int | None = None
    total_steps: Count | None = None
    percentage: Percentage | None = None
    message: str | None = None


Sequence = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
"""An event's ``sequence``: 0 to 10^15, increasing through a run's events (an event that
does not increase it is counted out of order)."""


class _EventFields(Message, tag_field="event_type", kw_only=True):
    """The fields of every event: the protocol ``version``, the run's ``task_id`` (an event
    with another is dropped), when it happened (``timestamp``, ISO 8601 on the wire) and its
    ``sequence`` number in the run."""

    __atp_unmasked__ = frozenset({"version", "task_id"})

    version: str
    task_id: str
    timestamp: datetime
    sequence: Sequence


class ToolCallEvent(_EventFields, tag="tool_call", kw_only=True):
    """An event (``event_type: tool_call``): a tool call (:class:`ToolCallPayload`)."""

    event_type: ClassVar[str] = "tool_call"
    payload: ToolCallPayload


class LLMRequestEvent(_EventFields, tag="llm_request", kw_only=True):
    """An event (``event_type: llm_request``): a call to an LLM (:class:`LLMRequestPayload`)."""

    event_type: ClassVar[str] = "llm_request"
    payload: LLMRequestPayload


class ReasoningEvent(_EventFields, tag="reasoning", kw_only=True):
    """An event (``event_type: reasoning``): the agent's reasoning (:class:`ReasoningPayload`)."""

    event_type: ClassVar[str] = "reasoning"
    payload: ReasoningPayload


class StateChangeEvent(_EventFields, tag="state_change", kw_only=True):
    """An event (``event_type: state_change``): a change of the agent's state (:class:`StateChangePayload`)."""

    event_type: ClassVar[str] = "state_change"
    payload: StateChangePayload


class ArtifactCreatedEvent(_EventFields, tag="artifact_created", kw_only=True):
    """An event (``event_type: artifact_created``): an artifact produced (:class:`ArtifactCreatedPayload`)."""

    event_type: ClassVar[str] = "artifact_created"
    payload: ArtifactCreatedPayload


class ErrorEvent(_EventFields, tag="error", kw_only=True):
    """An event (``event_type: error``): an error the agent met (:class:`ErrorPayload`)."""

    event_type: ClassVar[str] = "error"
    payload: ErrorPayload


class ProgressEvent(_EventFields, tag="progress", kw_only=True):
    """An event (``event_type: progress``): the agent's progress (:class:`ProgressPayload`)."""

    event_type: ClassVar[str] = "progress"
    payload: ProgressPayload


class UnknownEvent(Message, kw_only=True):
    """An event of a type this protocol version does not define (sent by a newer minor version)."""

    __atp_unmasked__ = frozenset({"version", "task_id"})

    version: str
    task_id: str
    timestamp: datetime
    sequence: Sequence
    event_type: str
    payload: dict[str, Any]


KnownEvent = Union[
    ToolCallEvent,
    LLMRequestEvent,
    ReasoningEvent,
    StateChangeEvent,
    ArtifactCreatedEvent,
    ErrorEvent,
    ProgressEvent,
]
"""An event of a type ATP Protocol 1.0 defines; decoded by its ``event_type`` field."""
Event = Union[KnownEvent, UnknownEvent]
"""Any event, of a known type or not: what a trace holds and ``atp_event`` receives."""

EVENT_TYPES: dict[str, type[Any]] = {
    cls.event_type: cls
    for cls in (
        ToolCallEvent,
        LLMRequestEvent,
        ReasoningEvent,
        StateChangeEvent,
        ArtifactCreatedEvent,
        ErrorEvent,
        ProgressEvent,
    )
}
"""The class of each known event type, by ``event_type``."""


def make_event(
    task_id: str,
    sequence: int,
    payload: msgspec.Struct,
    *,
    timestamp: datetime | None = None,
) -> Event:
    """Build an event from its typed payload (the event type follows from the payload's type)."""
    cls = _EVENT_BY_PAYLOAD[type(payload)]
    ts = timestamp if timestamp is not None else datetime.now(timezone.utc)
    event: Event = cls(
        version=PROTOCOL_VERSION, task_id=task_id, timestamp=ts, sequence=sequence, payload=payload
    )
    return event


_EVENT_BY_PAYLOAD: dict[type[Any], type[Any]] = {
    ToolCallPayload: ToolCallEvent,
    LLMRequestPayload: LLMRequestEvent,
    ReasoningPayload: ReasoningEvent,
    StateChangePayload: StateChangeEvent,
    ArtifactCreatedPayload: ArtifactCreatedEvent,
    ErrorPayload: ErrorEvent,
    ProgressPayload: ProgressEvent,
}


# --- numbers in events ----------------------------------------------------------------------

_COUNTED: dict[type[Any], tuple[str, ...]] = {
    LLMRequestEvent: ("input_tokens", "output_tokens"),
    ProgressEvent: ("current_step",),
}
_MEASURED: dict[type[Any], tuple[str, ...]] = {LLMRequestEvent: ("cost_usd",)}
"""The measurements of events that ATP adds up (a run's cost): any number, checked as
:data:`_COUNTED`'s are, but need not be integers."""
"""The numbers of events that ATP adds up or holds against a limit (a run's tokens, its steps),
by event type. Their types take any integer, so that an event with one out of bounds reaches
the trace, which fails the run (:class:`atp.core.trace.TraceLimitExceeded`): dropped as invalid,
the event would let a budget or ``max_steps`` pass. The other numbers of events are bounded
where they are decoded (:data:`Count`, :data:`Measure`, :data:`Percentage`, :data:`Sequence`):
an event with one out of bounds is not valid."""


def numbers_out_of_bounds(events: collections.abc.Sequence[Event]) -> tuple[int, str] | None:
    """The first of ``events`` with a number ATP adds up (:data:`_COUNTED`) out of bounds (an
    integer from 0 to :data:`MAX_METRIC`), and what is wrong with it (the event's sequence and
    type, the field, the value); ``None`` when there is none. :class:`atp.core.trace.TraceSummary`
    makes the same check where it adds the numbers up."""
    for index, event in enumerate(events):
        for name in _MEASURED.get(event.__class__, ()):
            value = getattr(event.payload, name)
            if value is not None and (
                value.__class__ not in (int, float) or number_in(value, 0, MAX_METRIC) is None
            ):
                return index, (
                    f"event {shown_number(event.sequence)} ({event.event_type}): payload.{name} = "
                    f"{shown_number(value)} is out of bounds (a measurement: a number from 0 to 1e15)"
                )
        fields = _COUNTED.get(event.__class__)
        if fields is None:
            continue
        for name in fields:
            value = getattr(event.payload, name)
            if value is not None and (value.__class__ is not int or number_in(value, 0, MAX_METRIC) is None):
                return index, (
                    f"event {shown_number(event.sequence)} ({event.event_type}): payload.{name} = "
                    f"{shown_number(value)} is out of bounds (a count: an integer from 0 to 1e15)"
                )
    return None


# --- encoding and decoding -----------------------------------------------------------------

_encoder = msgspec.json.Encoder()
_request_decoder = msgspec.json.Decoder(ATPRequest)
_response_decoder = msgspec.json.Decoder(ATPResponse)
_event_decoder = msgspec.json.Decoder(KnownEvent)
_events_decoder = msgspec.json.Decoder(list[KnownEvent])
_unknown_event_decoder = msgspec.json.Decoder(UnknownEvent)
_VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")


def encode(message: msgspec.Struct) -> bytes:
    """Encode any protocol message as compact JSON."""
    return _encoder.encode(message)


def check_version(version: str, what: str) -> None:
    """Reject a message whose major version is not the one ATP speaks; accept any minor."""
    if version == PROTOCOL_VERSION:
        return
    match = _VERSION_RE.match(version)
    if match is None:
        raise ProtocolError(f"{what}: version {version!r} is not of the form MAJOR.MINOR")
    if int(match.group(1)) != PROTOCOL_MAJOR:
        raise ProtocolError(
            f"{what}: protocol version {version} is not supported; ATP speaks version {PROTOCOL_MAJOR}.x"
        )


def _problem(what: str, exc: Exception, data: bytes | str | None = None, type_: Any = None) -> ProtocolError:
    """A decoding failure as the agent's protocol violation: what, where, what was expected."""
    if isinstance(exc, UnicodeDecodeError):
        offset = exc.start
        if isinstance(data, (bytes, bytearray, memoryview)):
            try:
                bytes(data).decode("utf-8")
            except UnicodeDecodeError as whole:
                offset = whole.start
        return ProtocolError(
            f"{what} is not valid UTF-8: byte {offset} is {exc.object[exc.start : exc.start + 1]!r}"
        )
    if isinstance(exc, RecursionError):
        return ProtocolError(f"{what} is nested too deeply (ATP reads at most about {MAX_NESTING} levels)")
    text = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        return ProtocolError(f"{what}: {_all_said(text, data, type_)}")
    return ProtocolError(f"{what} is not valid JSON: {text}")


MAX_RESAID_BYTES = 1024 * 1024
"""A message that misses required fields is decoded a second time, untyped, to name every
field missing: only when it is at most this long (bytes, or characters of a ``str``). A longer
one gets msgspec's first error, so an error costs no more memory than the message's typed
decoding would have."""


def _all_said(text: str, data: bytes | str | None, type_: Any) -> str:
    """msgspec's error about a message, saying more: every required field missing where one
    is (not the first only; for a message of at most :data:`MAX_RESAID_BYTES`), the values
    allowed where an enumerated one is not (the value itself is msgspec's quote)."""
    split = message_path(text) if type_ is not None else None
    if split is None:
        return text
    words, parts = split
    where = text[len(words) :]
    at = type_at(type_, parts)
    if words.startswith("Invalid enum value") and at is not None:
        return f"{words} (allowed: {describe(at)}){where}"
    if (
        not words.startswith("Object missing required field")
        or not (isinstance(at, type) and issubclass(at, msgspec.Struct))
        or data is None
        or len(data) > MAX_RESAID_BYTES
    ):
        return text
    try:
        value: Any = msgspec.json.decode(data)
        for part in parts:
            value = value[part]
    except (*_DECODE_ERRORS, LookupError, TypeError):
        return text
    if not isinstance(value, dict):
        return text
    missing = [f.encode_name for f in msgspec.structs.fields(at) if f.required and f.encode_name not in value]
    if len(missing) < 2:
        return text
    return f"Object missing required fields {', '.join(f'`{name}`' for name in missing)}{where}"


_DECODE_ERRORS = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError)
"""What decoding agent bytes can raise; each becomes a :class:`ProtocolError`."""


def decode_request(data: bytes | str) -> ATPRequest:
    """Decode an ATP request (JSON). Raises :class:`ProtocolError` naming the field and what
    was expected, or when its major version is not :data:`PROTOCOL_MAJOR`."""
    try:
        request = _request_decoder.decode(data)
    except _DECODE_ERRORS as exc:
        raise _problem("ATP request", exc, data, ATPRequest) from None
    check_version(request.version, "ATP request")
    return request


def decode_response(data: bytes | str) -> ATPResponse:
    """Decode an agent's response (JSON). Raises :class:`ProtocolError` naming the field and
    what was expected, or when its major version is not :data:`PROTOCOL_MAJOR`."""
    try:
        response = _response_decoder.decode(data)
    except _DECODE_ERRORS as exc:
        raise _problem("ATP response", exc, data, ATPResponse) from None
    check_version(response.version, "ATP response")
    return response


def decode_event(data: bytes | str) -> Event:
    """Decode one event (JSON): of a known type as its class, of a type this version does not
    define as :class:`UnknownEvent`. Raises :class:`ProtocolError` for an event that is not
    valid (a known type with a bad payload included) or whose major version is not 1."""
    try:
        event: Event = _event_decoder.decode(data)
    except msgspec.ValidationError as exc:
        event = _decode_unknown_event(data, exc)
    except _DECODE_ERRORS as exc:
        raise _problem("ATP event", exc, data) from None
    if event.version != PROTOCOL_VERSION:
        check_version(event.version, "ATP event")
    return event


def decode_event_lines(data: bytes) -> list[KnownEvent]:
    """Decode JSON Lines of events in one call: the fast path for a stream of events. Raises
    :class:`ProtocolError` if any line is not an event of a known type (or a blank line is
    there); decode the lines one by one with :func:`decode_event` then, to keep the good ones."""
    try:
        events = _events_decoder.decode(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except _DECODE_ERRORS as exc:
        raise _problem("ATP events", exc) from None
    for event in events:
        if event.version != PROTOCOL_VERSION:
            check_version(event.version, "ATP event")
    return events


def _decode_unknown_event(data: bytes | str, original: msgspec.ValidationError) -> UnknownEvent:
    """An event that failed typed decoding is accepted only when its type is one we don't know."""
    try:
        event = _unknown_event_decoder.decode(data)
    except _DECODE_ERRORS:
        raise _problem("ATP event", original) from None
    check_version(event.version, "ATP event")
    if event.event_type in EVENT_TYPES:
        raise _problem("ATP event", original) from None
    return event
