"""What the ``crewai`` adapter (:mod:`atp.adapters.crewai`) uses of CrewAI once it is imported:
its ``Crew`` and ``CrewOutput`` classes, and how a run subscribes to the events of its own
execution (CrewAI's scoped stream sinks, or, in an older CrewAI, handlers on its global event
bus filtered by the run's execution context)."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol


class Receiver(Protocol):
    """A run, as CrewAI's events reach it (:meth:`~atp.adapters.crewai_events.CrewRun.receive`)."""

    def receive(self, source: Any, event: Any) -> None: ...


class CrewAILibrary:
    """What the adapter uses of the imported ``crewai``: the ``Crew`` and ``CrewOutput``
    classes, and how a run subscribes to the events of its own execution."""

    def __init__(self, stream_sinks: bool | None = None) -> None:
        from crewai import Crew

        self.Crew: type[Any] = Crew
        try:
            from crewai.crews.crew_output import CrewOutput
        except ImportError:  # pragma: no cover - an older layout
            from crewai import CrewOutput
        self.CrewOutput: type[Any] = CrewOutput
        try:
            from crewai.types.usage_metrics import UsageMetrics

            self.usage_from: Callable[[dict[str, Any]], Any] | None = UsageMetrics.from_provider_dict
        except (ImportError, AttributeError):  # pragma: no cover - older CrewAI
            self.usage_from = None
        try:
            from crewai.utilities.string_utils import sanitize_tool_name

            self.tool_name: Callable[[str], str] = sanitize_tool_name
        except ImportError:  # pragma: no cover - older CrewAI
            self.tool_name = str
        self.add_sink: Callable[[Any], Any] | None = None
        self.reset_sinks: Callable[[Any], None] | None = None
        if stream_sinks is not False:
            try:
                from crewai.events.stream_context import add_stream_sink, reset_stream_sinks

                self.add_sink, self.reset_sinks = add_stream_sink, reset_stream_sinks
            except ImportError:  # older CrewAI: handlers on the bus, filtered by context
                if stream_sinks:
                    raise
        if self.add_sink is None:
            _listen_on_the_bus()

    @property
    def scoped(self) -> bool:
        """Whether runs get their events from CrewAI's scoped stream sinks (in order, in the
        emitting thread), rather than from handlers on the global bus (see :func:`_listen_on_the_bus`)."""
        return self.add_sink is not None

    def subscribe(self, run: Receiver) -> Callable[[], None]:
        """(In the run's worker thread, before kickoff.) Deliver the events of everything the
        crew does from this thread's execution context on to ``run``; returns the undo."""
        if self.add_sink is not None and self.reset_sinks is not None:
            token = self.add_sink(run.receive)
            reset = self.reset_sinks
            return lambda: reset(token)
        token_var = _CURRENT_RUN.set(run)
        return lambda: _CURRENT_RUN.reset(token_var)

    def settle(self) -> None:
        """(In the run's worker thread, after kickoff.) With handlers on the bus, wait for the
        ones CrewAI still runs in its thread pool, so that the run's events are all in."""
        if self.add_sink is None:
            from crewai.events.event_bus import crewai_event_bus

            crewai_event_bus.flush(timeout=10)


_CURRENT_RUN: contextvars.ContextVar[Receiver | None] = contextvars.ContextVar("atp_crewai_run", default=None)
"""The run whose kickoff this execution context belongs to (for the bus handlers of older CrewAI)."""
_BUS_LOCK = threading.Lock()
_bus_handlers: list[Any] = []


def _listen_on_the_bus() -> None:
    """For a CrewAI without scoped stream sinks: one handler on the global event bus, once per
    process, for each event type the adapter translates. CrewAI calls it in a copy of the
    emitting thread's context, so :data:`_CURRENT_RUN` names the run the event belongs to (an
    event of no run is ignored). CrewAI runs these handlers in a thread pool: events reach the
    run in the order the handlers run, which is not always the order they happened."""
    with _BUS_LOCK:
        if _bus_handlers:
            return
        from crewai.events.event_bus import crewai_event_bus

        try:
            import crewai.events as events
        except ImportError:  # pragma: no cover - older CrewAI
            # (an older CrewAI's module, not in the one mypy sees)
            import crewai.utilities.events as events  # type: ignore[import-not-found,no-redef]

        def handler(source: Any, event: Any) -> None:
            run = _CURRENT_RUN.get()
            if run is not None:
                run.receive(source, event)

        for name in _BUS_EVENT_CLASSES:
            cls = getattr(events, name, None)
            if cls is not None:
                crewai_event_bus.on(cls)(handler)
                _bus_handlers.append(cls)


_BUS_EVENT_CLASSES = (
    "AgentExecutionStartedEvent",
    "AgentExecutionCompletedEvent",
    "AgentExecutionErrorEvent",
    "AgentLogsExecutionEvent",
    "TaskCompletedEvent",
    "ToolUsageStartedEvent",
    "ToolUsageFinishedEvent",
    "ToolUsageErrorEvent",
    "ToolSelectionErrorEvent",
    "ToolValidateInputErrorEvent",
    "LLMCallStartedEvent",
    "LLMCallCompletedEvent",
    "LLMCallFailedEvent",
)
