"""A CrewAI crew's run as ATP events (for the ``crewai`` adapter, :mod:`atp.adapters.crewai`):
what CrewAI reports while the crew works (agents taking over, their steps, tool usage, LLM calls,
task completion) translated in the threads CrewAI emits it from, delivered to the run's sink on
ATP's event loop (:class:`CrewRun`), and the counts the run's metrics are made of."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

import anyio
import msgspec

from atp.adapters.crewai_artifacts import enum_value, jsonable
from atp.adapters.crewai_library import CrewAILibrary
from atp.core.protocol import (
    ErrorPayload,
    Event,
    LLMRequestPayload,
    Metrics,
    ProgressPayload,
    ReasoningPayload,
    StateChangePayload,
    ToolCallPayload,
    make_event,
)
from atp.core.secrets import Masker
from atp.core.text import shorten
from atp.core.trace import EventSink

MAX_WARNINGS = 5
"""Distinct problems translating CrewAI's events that a run reports (then it stays quiet)."""
NAME_CHARS = 200
"""A task's description stands for its name up to this many characters in an event."""
TOOL_DID_NOT_RETURN = "the tool did not return"
"""The error of a tool call CrewAI reports as finished with no output (the tool raised an
exception CrewAI does not catch, like SystemExit or KeyboardInterrupt)."""

Payload = msgspec.Struct


class CrewRun:
    """One run: its subscription to CrewAI's events, their translation into ATP events (in the
    threads CrewAI emits them from), their delivery to the sink (on ATP's event loop), and the
    counts its metrics are made of."""

    def __init__(self, crewai: CrewAILibrary, task_id: str, sink: EventSink) -> None:
        self.crewai = crewai
        self.task_id = task_id
        self.sink = sink
        self.loop = asyncio.get_running_loop()
        self.lock = threading.Lock()
        self.pending: list[tuple[Payload, datetime]] = []
        self.problems: list[str] = []
        self.scheduled = False
        self.closed = False
        self.returned = False
        self.failure: BaseException | None = None
        """The first failure delivering events (a flood, the run directory): the run's."""
        self.undeliverable = anyio.Event()
        """Set with :attr:`failure`: the run ends then, without waiting for its kickoff."""
        self.next_sequence = 0
        self.crew: Any = None
        self.tasks: list[Any] = []
        # the translation's state (under ``lock``)
        self.agents: list[str] = []
        """The roles of the agents at work, the innermost last (delegation nests them)."""
        self.state: str | None = None
        """The role of the agent that took over last (``from_state`` of the next state_change)."""
        self.failed: tuple[str, str | None] | None = None
        """(role, task) of the agent whose execution has just raised."""
        self.llm_started: dict[str, tuple[datetime, float | None]] = {}
        self.tool_started: dict[str, list[datetime]] = {}
        self.last_error: ErrorPayload | None = None
        self.tasks_done = 0
        # the counts
        self.llm_calls = 0
        self.steps = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.total_tokens = 0
        self.usage_seen = False
        self.usage_before: Any = None

    def receive(self, source: Any, event: Any) -> None:
        """(In the thread CrewAI emits ``event`` from.) Translate it and hand it to the event
        loop. Never raises into CrewAI: a problem becomes one of the run's warnings."""
        if self.closed:
            return
        kind = getattr(event, "type", None)
        method = _TRANSLATIONS.get(kind) if isinstance(kind, str) else None
        if method is None:
            return
        try:
            with self.lock:
                payloads = method(self, event)
        except Exception as exc:
            payloads = []
            problem = (
                f"an event of CrewAI ({getattr(event, 'type', '?')}) could not be translated: "
                f"{type(exc).__name__}: {exc}"
            )
            with self.lock:
                if problem not in self.problems and len(self.problems) < MAX_WARNINGS:
                    self.problems.append(problem)
        timestamp = _utc(getattr(event, "timestamp", None))
        with self.lock:
            if self.closed:
                return
            self.pending.extend((payload, timestamp) for payload in payloads)
            if self.scheduled or not (self.pending or self.problems):
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the event loop is closed: ATP has finished
            self.close()

    def note(self, message: str) -> None:
        """(In the run's worker thread.) A warning of the run's, delivered on the event loop."""
        with self.lock:
            if self.closed:
                return
            self.problems.append(message)
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the event loop is closed: ATP has finished
            self.close()

    # --- the event loop ---------------------------------------------------------------------

    def drain(self) -> None:
        """(On the event loop.) Deliver the events translated so far to the sink."""
        with self.lock:
            pending, self.pending = self.pending, []
            problems, self.problems = self.problems, []
            self.scheduled = False
        if self.closed or self.failure is not None:
            return
        for problem in problems:
            self.sink.warn(problem)
        if not pending:
            return
        events: list[Event] = []
        for payload, timestamp in pending:
            events.append(make_event(self.task_id, self.next_sequence, payload, timestamp=timestamp))
            self.next_sequence += 1
        try:
            self.sink.events(events)
        except Exception as exc:  # a flood (AgentError), the run directory (StorageError)
            self._undeliverable(exc)

    def fail_event(self, error_type: str, message: str) -> None:
        """(On the event loop.) The run's failure as an unrecoverable error event."""
        if self.closed or self.failure is not None:
            return
        payload = ErrorPayload(error_type=error_type, message=message, recoverable=False)
        try:
            self.sink.event(make_event(self.task_id, self.next_sequence, payload))
        except Exception as exc:
            self._undeliverable(exc)
        self.next_sequence += 1

    def _undeliverable(self, exc: Exception) -> None:
        """(On the event loop.) Delivering the run's events failed: that is the run's failure,
        nothing more the crew reports is translated, and the run ends (:meth:`~atp.adapters.crewai.CrewAIAdapter._kickoff`)."""
        self.failure = exc
        with self.lock:
            self.closed = True
            self.pending = []
        self.undeliverable.set()

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure

    def close(self) -> None:
        """The run is over: what its crew reports from now on is dropped."""
        with self.lock:
            self.closed = True
            self.pending = []

    def metrics(self, crew: Any, seconds: float) -> Metrics:
        """This run's counts; without LLM call events, the crew's own token accounting (what
        its LLMs counted during the run)."""
        input_tokens, output_tokens, total_tokens = self.input_tokens, self.output_tokens, self.total_tokens
        llm_calls: int | None = self.llm_calls
        if not self.llm_calls:
            after = crew_usage(crew)
            if after is not None:
                before = self.usage_before

                def grown(field: str) -> int:
                    return max(_count(after, field) - _count(before, field), 0)

                input_tokens, output_tokens = grown("prompt_tokens"), grown("completion_tokens")
                total_tokens = grown("total_tokens")
                llm_calls = grown("successful_requests")
                self.usage_seen = bool(input_tokens or output_tokens or total_tokens)
        return Metrics(
            total_tokens=(total_tokens or input_tokens + output_tokens) if self.usage_seen else None,
            input_tokens=input_tokens if self.usage_seen else None,
            output_tokens=output_tokens if self.usage_seen else None,
            total_steps=self.steps or None,
            tool_calls=self.tool_calls,
            llm_calls=llm_calls,
            wall_time_seconds=round(seconds, 6),
        )

    # --- the translation (under ``lock``, in CrewAI's threads) -------------------------------

    def _agent_started(self, event: Any) -> list[Payload]:
        role = _role(getattr(event, "agent", None))
        task = task_name(getattr(event, "task", None), self.sink.masker)
        previous, self.state = self.state, role
        self.agents.append(role)
        reason = f"task: {task}" if task else None
        if reason and self.failed == (role, task):  # CrewAI retries an agent that raised
            reason += " (again, after an error)"
        self.failed = None
        return [StateChangePayload(from_state=previous, to_state=role, reason=reason)]

    def _agent_ended(self, event: Any) -> list[Payload]:
        """An agent finished (or failed): when it was working for another (a manager that
        delegated to it), that one takes over again."""
        if not self.agents:
            return []
        role = self.agents.pop()
        if event.type != "agent_execution_completed":
            self.failed = (role, task_name(getattr(event, "task", None), self.sink.masker))
            return []
        if not self.agents:
            return []
        self.state = self.agents[-1]
        return [StateChangePayload(from_state=role, to_state=self.state, reason=f"{role} finished")]

    def _agent_step(self, event: Any) -> list[Payload]:
        answer = getattr(event, "formatted_answer", None)
        role = getattr(event, "agent_role", None) or "agent"
        thought = getattr(answer, "thought", None)
        if isinstance(thought, str):
            thought = thought.strip()
            if thought.startswith("Thought:"):
                thought = thought[len("Thought:") :].strip()
        tool = getattr(answer, "tool", None)
        if tool:
            try:
                tool = self.crewai.tool_name(str(tool)) or tool
            except Exception:
                pass
        step = f"{role}: use tool {tool}" if tool else f"{role}: final answer"
        return [ReasoningPayload(thought=thought or None, step=step)]

    def _task_completed(self, event: Any) -> list[Payload]:
        task = getattr(event, "task", None)
        output = getattr(event, "output", None)
        name = task_name(task, self.sink.masker) or getattr(output, "name", None) or "a task"
        agent = getattr(output, "agent", None)
        by = f" (agent: {agent})" if agent else ""
        if task is not None and any(task is own for own in self.tasks):
            self.tasks_done += 1
            total = len(self.tasks)
            return [
                ProgressPayload(
                    current_step=self.steps or None,
                    total_steps=None,
                    percentage=round(100.0 * min(self.tasks_done, total) / total, 2),
                    message=f"task {self.tasks_done} of {total} completed: {name}{by}",
                )
            ]
        return [ProgressPayload(current_step=self.steps or None, message=f"task completed: {name}{by}")]

    def _tool(self, event: Any) -> str:
        """The tool's name as CrewAI reports a finished call (in the form it gives tools for
        function calling: ``Word Count`` is ``word_count``), whichever event names it."""
        name = str(event.tool_name)
        try:
            return self.crewai.tool_name(name) or name
        except Exception:
            return name

    def _tool_started(self, event: Any) -> list[Payload]:
        self.tool_started.setdefault(self._tool(event), []).append(_utc(event.timestamp))
        return []

    def _tool_finished(self, event: Any) -> list[Payload]:
        tool = self._tool(event)
        started = self._tool_start(tool)
        began, ended = getattr(event, "started_at", None), getattr(event, "finished_at", None)
        if (
            isinstance(began, datetime)
            and isinstance(ended, datetime)
            and (began.tzinfo is None) == (ended.tzinfo is None)
        ):
            duration: float | None = max((ended - began).total_seconds() * 1000, 0.0)
        else:
            duration = _ms_since(started, event.timestamp)
        failure = getattr(event, "failure", None)
        self.tool_calls += 1
        if failure is not None:
            error: str | None = str(getattr(failure, "message", failure))
        elif event.output is None:
            # CrewAI reports every call it started as finished, also when the tool raised what
            # it does not catch (SystemExit, KeyboardInterrupt): then with no output at all (a
            # tool that returns None has the output "None")
            error = TOOL_DID_NOT_RETURN
        else:
            error = None
        return [
            ToolCallPayload(
                tool=tool,
                input=_tool_input(event.tool_args),
                output=jsonable(event.output),
                duration_ms=duration,
                status="error" if error is not None else "success",
                error=error,
            )
        ]

    def _tool_failed(self, event: Any) -> list[Payload]:
        tool = self._tool(event)
        started = self._tool_start(tool)
        self.tool_calls += 1
        return [
            ToolCallPayload(
                tool=tool,
                input=_tool_input(event.tool_args),
                duration_ms=_ms_since(started, event.timestamp),
                status="error",
                error=_error_text(event.error),
            )
        ]

    def _tool_refused(self, event: Any) -> list[Payload]:
        payload = ErrorPayload(
            error_type=event.type,
            message=f"{event.tool_name}: {_error_text(event.error)}",
            recoverable=True,
        )
        if payload == self.last_error:  # CrewAI reports one refusal several times
            return []
        self.last_error = payload
        return [payload]

    def _tool_start(self, tool: str) -> datetime | None:
        starts = self.tool_started.get(tool)
        return starts.pop() if starts else None

    def _llm_started(self, event: Any) -> list[Payload]:
        self.llm_started[str(event.call_id)] = (_utc(event.timestamp), getattr(event, "temperature", None))
        return []

    def _llm_completed(self, event: Any) -> list[Payload]:
        started, temperature = self.llm_started.pop(str(event.call_id), (None, None))
        if enum_value(getattr(event, "call_type", None)) == "tool_call":
            return []  # the result of a tool the LLM ran itself: its tool_call event says it
        self.last_error = None
        self.llm_calls += 1
        if getattr(event, "agent_role", None) or getattr(event, "agent_id", None):
            self.steps += 1
        input_tokens, output_tokens, _ = self._tokens(getattr(event, "usage", None))
        return [
            LLMRequestPayload(
                model=getattr(event, "model", None),
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                duration_ms=_ms_since(started, event.timestamp),
                temperature=temperature if isinstance(temperature, (int, float)) else None,
                stop_reason=getattr(event, "finish_reason", None),
            )
        ]

    def _llm_failed(self, event: Any) -> list[Payload]:
        self.llm_started.pop(str(getattr(event, "call_id", "")), None)
        model = getattr(event, "model", None)
        return [
            ErrorPayload(
                error_type="llm_call_failed",
                message=f"{model}: {event.error}" if model else str(event.error),
                recoverable=True,
            )
        ]

    def _tokens(self, usage: Any) -> tuple[int | None, int | None, int | None]:
        """(input, output, total) tokens of one LLM call, as CrewAI normalizes a provider's
        usage (each ``None`` when the call reported none)."""
        if not isinstance(usage, Mapping) or not usage:
            return None, None, None
        data = dict(usage)
        normalized = None
        if self.crewai.usage_from is not None:
            try:
                normalized = self.crewai.usage_from(data)
            except Exception:
                normalized = None
        if normalized is not None:
            prompt = int(normalized.prompt_tokens or 0)
            completion = int(normalized.completion_tokens or 0)
            total = int(normalized.total_tokens or 0) or prompt + completion
        else:
            prompt = _first_int(data, "prompt_tokens", "input_tokens", "prompt_token_count")
            completion = _first_int(data, "completion_tokens", "output_tokens", "candidates_token_count")
            total = _first_int(data, "total_tokens", "total_token_count") or prompt + completion
        self.usage_seen = True
        self.input_tokens += prompt
        self.output_tokens += completion
        self.total_tokens += total
        return prompt, completion, total


_TRANSLATIONS: dict[str, Callable[[CrewRun, Any], list[Payload]]] = {
    "agent_execution_started": CrewRun._agent_started,
    "agent_execution_completed": CrewRun._agent_ended,
    "agent_execution_error": CrewRun._agent_ended,
    "agent_logs_execution": CrewRun._agent_step,
    "task_completed": CrewRun._task_completed,
    "tool_usage_started": CrewRun._tool_started,
    "tool_usage_finished": CrewRun._tool_finished,
    "tool_usage_error": CrewRun._tool_failed,
    "tool_selection_error": CrewRun._tool_refused,
    "tool_validate_input_error": CrewRun._tool_refused,
    "llm_call_started": CrewRun._llm_started,
    "llm_call_completed": CrewRun._llm_completed,
    "llm_call_failed": CrewRun._llm_failed,
}
"""CrewAI's event types (their ``type``) the adapter translates; the others are ignored."""


# --- helpers ---------------------------------------------------------------------------------


def crew_usage(crew: Any) -> Any:
    """The crew's token accounting now (what its agents' LLMs counted so far), or ``None``."""
    try:
        return crew.calculate_usage_metrics()
    except Exception:
        return None


def _count(usage: Any, field: str) -> int:
    value = getattr(usage, field, 0) if usage is not None else 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tool_input(args: Any) -> Any:
    """A tool's arguments: a dict, or the text the LLM wrote when it is not JSON."""
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return args
        return parsed if isinstance(parsed, dict) else args
    return jsonable(args)


def _error_text(error: Any) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return str(error)


def _role(agent: Any) -> str:
    role = getattr(agent, "role", None)
    return str(role) if role else "agent"


def task_name(task: Any, masker: Masker | None) -> str | None:
    """A CrewAI task's name (or description) on one line, its secrets masked (``masker``, the
    run's) before it is cut to :data:`NAME_CHARS`."""
    if task is None:
        return None
    name = getattr(task, "name", None) or getattr(task, "description", None)
    return shorten(" ".join(str(name).split()), NAME_CHARS, masker) if name else None


def _first_int(data: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def _utc(moment: Any) -> datetime:
    """A CrewAI event's timestamp (UTC), or now."""
    if isinstance(moment, datetime):
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    return datetime.now(timezone.utc)


def _ms_since(started: datetime | None, ended: Any) -> float | None:
    if started is None:
        return None
    return max((_utc(ended) - started).total_seconds() * 1000, 0.0)
