"""The ``crewai`` adapter: a CrewAI crew run inside the ATP process (docs/agents-crewai.md).

ATP imports the crew's module once per ``atp test`` and kicks the crew off for every run::

    agents:
      - name: research-crew
        type: crewai
        module: research_crew       # found as the python adapter finds its module
        crew: build_crew            # a function returning a new Crew (or a Crew object)
        path: [src]                 # optional: folders put at the front of sys.path
        input_mapper: my_inputs:map # optional: module:function(request) -> kickoff inputs

Each run calls ``crew.kickoff(inputs=...)`` in a worker thread with ``{"task": <the task's
description>, **<its input_data>}`` (or what ``input_mapper`` returns). What CrewAI reports
while the crew works (agents taking over, their steps, tool usage, LLM calls, task completion)
becomes ATP events as it happens: the adapter subscribes to CrewAI's event bus for the run's
own execution context (CrewAI's scoped stream sinks, which every thread CrewAI starts inherits),
so runs going on at the same time never see each other's events, and nothing a run does after
its time limit reaches a later run. The final output becomes ``output.md`` (and a structured
``output`` artifact when it has JSON or a pydantic model), each task's output a structured
artifact, and the metrics are this run's LLM calls, tokens, tool calls and agent steps.

CrewAI imports in seconds: it is imported when the adapter starts, never when ATP loads its
plugins. Unless ``telemetry: true``, CrewAI's anonymous telemetry and its execution tracing are
switched off for the ATP process before it is imported (the variables are set only where the
environment does not set them already). That choice is the process's: the first crewai agent
started makes it, and a later one asking otherwise gets a warning.

A run ends as soon as its events cannot be delivered (more than its limits allow), its crew
abandoned as at a time limit; a crew whose tasks ask for human input is refused.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import math
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

import anyio
import msgspec

from atp.adapters.python import PythonAdapter, attribute_importer, callable_problem
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError
from atp.core.plugins import require
from atp.core.protocol import (
    PROTOCOL_VERSION,
    Artifact,
    ATPRequest,
    ATPResponse,
    ErrorPayload,
    Event,
    FileArtifact,
    LLMRequestPayload,
    Metrics,
    ProgressPayload,
    ReasoningPayload,
    StateChangePayload,
    StructuredArtifact,
    ToolCallPayload,
    decode_request,
    encode,
    make_event,
)
from atp.core.text import shorten
from atp.core.trace import EventSink

TELEMETRY_OFF = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_TRACING_ENABLED": "false"}
"""What ``telemetry: false`` (the default) puts in the environment before CrewAI is imported,
where the environment does not say otherwise: CrewAI's anonymous usage telemetry and its
execution tracing (which on a first run would collect a trace and offer to upload it) off."""
OUTPUT_FILE = "output.md"
"""The file artifact holding the crew's final output as text."""
OUTPUT_NAME = "output"
"""The structured artifact holding the crew's final output as JSON, when it has one."""
MAX_WARNINGS = 5
"""Distinct problems translating CrewAI's events that a run reports (then it stays quiet)."""
MIN_CREWAI = (1, 5)
"""The oldest CrewAI whose events can be told apart by run: from 1.5 on, CrewAI calls the event
bus's handlers in a copy of the emitting thread's context (and from 1.15.2 on, it has the
scoped stream sinks the adapter prefers)."""
NAME_CHARS = 200
TOOL_DID_NOT_RETURN = "the tool did not return"
"""The error of a tool call CrewAI reports as finished with no output (the tool raised an
exception CrewAI does not catch, like SystemExit or KeyboardInterrupt)."""
"""A task's description stands for its name up to this many characters in an event."""

Payload = msgspec.Struct
logger = logging.getLogger("atp.adapters.crewai")

_TELEMETRY_LOCK = threading.Lock()
_telemetry: tuple[bool, str] | None = None
"""(``telemetry``, agent name) of the first crewai agent started in the process, which decided
about CrewAI's telemetry for the whole process."""


class CrewAISettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: str
    """The module that defines the crew, as Python imports it (``research_crew``,
    ``my_pkg.crews``), found as the python adapter finds its module."""
    crew: str
    """The module's attribute (dotted: ``crews.research``): a function that returns a new
    ``Crew`` for each run, a ``@CrewBase`` class (``Class().crew()`` per run), or a ``Crew``
    object, which every run then shares (runs of it take turns)."""
    path: list[str] = msgspec.field(default_factory=list)
    """Folders put at the front of ``sys.path`` before importing, relative to the folder of the
    file that defines the agent (which is always importable)."""
    input_mapper: str | None = None
    """``module:function`` called as ``function(request)`` for each run, returning the dict of
    kickoff inputs; by default they are ``{"task": description, **input_data}``."""
    telemetry: bool = False
    """Leave CrewAI's telemetry and tracing as the environment has them (off by default)."""

    def __post_init__(self) -> None:
        for setting, value in (("module", self.module), ("crew", self.crew)):
            problem = _dotted_problem(setting, value)
            if problem is not None:
                raise ValueError(problem)
        if self.input_mapper is not None:
            problem = callable_problem(self.input_mapper, "input_mapper")
            if problem is not None:
                raise ValueError(problem)
        for index, folder in enumerate(self.path):
            if not folder:
                raise ValueError(f"'path[{index}]' is empty")
            if "\0" in folder:
                raise ValueError(f"'path[{index}]' holds a NUL byte (\\0), which no path can")


def _dotted_problem(setting: str, value: str) -> str | None:
    """What is wrong with the form of the ``module`` or ``crew`` setting, or ``None``."""
    example = (
        "like research_crew or my_pkg.crews" if setting == "module" else "like build_crew or crews.research"
    )
    if "\0" in value:
        return f"'{setting}' holds a NUL byte (\\0), which no Python name can"
    if setting == "module" and (value.endswith(".py") or "/" in value or "\\" in value):
        stem = os.path.splitext(os.path.basename(value.replace("\\", "/")))[0] or "my_crew"
        return (
            f"'module' names a module, not a file: {value!r} is a path. Write the module's name "
            f"({stem!r}) and put its folder in 'path' (relative to the file that defines the "
            f"agent) unless it is that file's folder"
        )
    if ":" in value:
        module, _, attribute = value.partition(":")
        hint = f" (write module: {module} and crew: {attribute})" if setting == "module" else ""
        return f"'{setting}' {value!r} holds a ':'; the module and the crew are two settings{hint}"
    if not value or not all(part.isidentifier() for part in value.split(".")):
        return f"'{setting}' {value!r} is not a valid Python name (dotted identifiers, {example})"
    return None


# --- CrewAI, once imported --------------------------------------------------------------------


class _CrewAI:
    """What the adapter uses of the imported ``crewai``: the ``Crew`` and ``CrewOutput``
    classes, and how a run subscribes to the events of its own execution."""

    def __init__(self, stream_sinks: bool | None = None) -> None:
        from crewai import Crew

        self.Crew: type[Any] = Crew
        try:
            from crewai.crews.crew_output import CrewOutput
        except ImportError:  # pragma: no cover - an older layout
            from crewai import CrewOutput  # type: ignore[attr-defined,no-redef]
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

    def subscribe(self, run: _Run) -> Callable[[], None]:
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


_CURRENT_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("atp_crewai_run", default=None)
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
            import crewai.utilities.events as events  # type: ignore[no-redef]

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


# --- the adapter -----------------------------------------------------------------------------


class _Failed(Exception):
    """(Raised in a run's worker thread.) The user's code failed: ``what`` raised ``error``."""

    def __init__(self, what: str, error: BaseException) -> None:
        super().__init__(what)
        self.what = what
        self.error = error


class _Refused(Exception):
    """(Raised in a run's worker thread.) The run fails with this message, no traceback;
    ``error_type`` names the problem in the run's error event."""

    def __init__(self, message: str, error_type: str = "TypeError") -> None:
        super().__init__(message)
        self.error_type = error_type


class CrewAIAdapter(Adapter):
    type: ClassVar[str] = "crewai"
    summary: ClassVar[str] = (
        "a CrewAI crew run inside ATP: module: my_crew, crew: build_crew (a function returning a Crew)"
    )
    Settings = CrewAISettings
    settings: CrewAISettings

    def __init__(self, settings: CrewAISettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.spec = f"{settings.module}:{settings.crew}"
        """The crew as ``module:attribute``, as messages name it."""
        self.importer: PythonAdapter = attribute_importer(
            self.spec, agent=name, base_dir=self.base_dir, path=settings.path
        )
        self.crewai: _CrewAI | None = None
        self.factory: Callable[[], Any] | None = None
        """What builds a new crew for each run, or ``None`` when the crew is a shared object."""
        self.shared: Any = None
        """The ``Crew`` object every run uses, when ``crew`` names one."""
        self.mapper: Callable[[ATPRequest], Any] | None = None
        self.mapper_importer: PythonAdapter | None = None
        self.cwd = Path.cwd()
        self._limiter: anyio.CapacityLimiter | None = None
        self._turns: anyio.Lock | None = None
        """Runs of a shared Crew object take turns."""
        self._busy = threading.Lock()
        """Held by the worker thread of the run that uses the shared Crew object (held on by a
        run that timed out while its thread runs on)."""
        self._runs: set[_Run] = set()
        self._aborted = False

    # --- starting -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Import CrewAI, the crew's module and the input mapper, once, in a worker thread
        (CrewAI takes seconds to import). Raises AdapterError saying what is wrong."""
        self.cwd = Path.cwd()
        self._limiter = anyio.CapacityLimiter(math.inf)  # --parallel is the bound
        self._turns = anyio.Lock()
        await anyio.to_thread.run_sync(self._load, abandon_on_cancel=True)

    def _load(self) -> None:
        """(In a worker thread.)"""
        self._choose_telemetry()
        module = require("crewai", install="atp-adapters[crewai]", feature="the crewai adapter")
        version = str(getattr(module, "__version__", ""))
        found = _version(version)
        if found is not None and found < MIN_CREWAI:
            oldest = ".".join(map(str, MIN_CREWAI))
            raise AdapterError(
                f"agent {self.name!r}: the crewai adapter needs CrewAI {oldest} or newer, and "
                f"{version} is installed; upgrade it with: pip install --upgrade 'crewai>={oldest}'",
                retryable=False,
            )
        crewai = _CrewAI()
        target = self.importer.import_attribute()
        self.factory, self.shared = self._crew_source(crewai, target)
        if self.settings.input_mapper is not None:
            self.mapper_importer = attribute_importer(
                self.settings.input_mapper, agent=self.name, base_dir=self.base_dir, path=self.settings.path
            )
            mapper = self.mapper_importer.import_attribute()
            self._check_mapper(mapper)
            self.mapper = mapper
        self.crewai = crewai

    def _choose_telemetry(self) -> None:
        """The first crewai agent started in the process decides about CrewAI's telemetry and
        tracing for the whole process (CrewAI reads them from the process's environment, which
        every crew shares); a later agent that asks otherwise is warned that its setting has no
        effect, and the environment is left as it is."""
        global _telemetry
        wanted = self.settings.telemetry
        with _TELEMETRY_LOCK:
            if _telemetry is None:
                _telemetry = (wanted, self.name)
                if not wanted:
                    for variable, value in TELEMETRY_OFF.items():
                        os.environ.setdefault(variable, value)
                return
            chosen, by = _telemetry
        if chosen != wanted:
            logger.warning(
                "agent %r: 'telemetry: %s' has no effect: CrewAI's telemetry and tracing were "
                "already %s for this atp process by agent %r, the first crewai agent started "
                "(the choice is the process's: run the suite by itself to change it)",
                self.name,
                "true" if wanted else "false",
                "left as the environment has them" if chosen else "switched off",
                by,
            )

    def _crew_source(self, crewai: _CrewAI, target: Any) -> tuple[Callable[[], Any] | None, Any]:
        """(factory, shared crew) for what ``crew`` names; AdapterError when it is neither."""
        if isinstance(target, crewai.Crew):
            return None, target
        if isinstance(target, type):
            if issubclass(target, crewai.Crew):
                raise self._error(
                    "it is the Crew class itself; name a Crew object, or a function that builds "
                    "and returns a new one"
                )
            if getattr(target, "is_crew_class", False):  # a @CrewBase class: Class().crew()
                return (lambda: target().crew()), None
        if not callable(target):
            raise self._error(f"it is {_a(target)}, not a crewai Crew or a function that returns one")
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return target, None
        try:
            signature.bind()
        except TypeError:
            raise self._error(
                f"a crew factory is called with no arguments, but its parameters are {signature}"
            ) from None
        return target, None

    def _check_mapper(self, mapper: Any) -> None:
        spec = self.settings.input_mapper or ""
        if not callable(mapper):
            raise AdapterError(
                f"agent {self.name!r}: cannot call 'input_mapper' {spec!r}: it is {_a(mapper)}, not a function",
                retryable=False,
            )
        try:
            signature = inspect.signature(mapper)
        except (TypeError, ValueError):
            return
        try:
            signature.bind(None)
        except TypeError:
            raise AdapterError(
                f"agent {self.name!r}: cannot call 'input_mapper' {spec!r}: it is called as "
                f"{spec.rpartition(':')[2]}(request), but its parameters are {signature}",
                retryable=False,
            ) from None

    def _error(self, problem: str) -> AdapterError:
        return AdapterError(
            f"agent {self.name!r}: cannot use 'crew' {self.spec!r}: {problem}", retryable=False
        )

    # --- the adapter --------------------------------------------------------------------------

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """ATP's working folder when it started: an in-process crew shares it (a task's
        ``output_file`` lands there)."""
        return self.cwd

    def abort(self) -> None:
        """End every run at once: what their crews report from now on is dropped, and no new
        run starts. (A thread cannot be stopped; an abandoned crew runs on.)"""
        self._aborted = True
        for run in list(self._runs):
            run.close()

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self.crewai is None:
            await self.start()
        assert self.crewai is not None and self._limiter is not None and self._turns is not None
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no run is started", retryable=False)
        run = _Run(self, self.crewai, request.task_id, sink)
        own = decode_request(encode(request))  # the crew's copy: what it changes, ATP never sees
        self._runs.add(run)
        try:
            if self.shared is not None:
                async with self._turns:
                    return await self._execute(run, own, request)
            return await self._execute(run, own, request)
        finally:
            run.close()
            self._runs.discard(run)

    async def _execute(self, run: _Run, own: ATPRequest, request: ATPRequest) -> ATPResponse:
        started = time.monotonic()
        try:
            done = await self._kickoff(run, own)
        except anyio.get_cancelled_exc_class():
            self._abandon(run)
            raise
        except _Refused as exc:
            run.drain()
            run.check()
            run.fail_event(exc.error_type, str(exc))
            raise AgentError(str(exc)) from None
        except _Failed as failed:
            run.drain()
            run.check()
            raise self._raised(run, failed) from None
        if done is None:  # delivering its events failed first (a flood): the run ends now
            self._abandon(run)
            assert run.failure is not None
            raise run.failure
        crew, output = done
        run.drain()
        run.check()
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="completed",
            artifacts=self._artifacts(crew, output),
            metrics=run.metrics(crew, time.monotonic() - started),
        )

    async def _kickoff(self, run: _Run, own: ATPRequest) -> tuple[Any, Any] | None:
        """The run's kickoff, in a worker thread: (crew, output), or ``None`` when delivering
        the run's events failed before it returned (more events than the run's limits allow,
        the run directory): then the thread is abandoned, as at a time limit, and the run ends
        at once instead of when the crew is done."""
        assert self._limiter is not None
        outcome: list[Any] = []
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await run.undeliverable.wait()
                group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                outcome.append(
                    await anyio.to_thread.run_sync(
                        run.kickoff, own, abandon_on_cancel=True, limiter=self._limiter
                    )
                )
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # raised as is, not in an exception group
                outcome.append(exc)
            group.cancel_scope.cancel()
        if not outcome:
            return None
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        result: tuple[Any, Any] = outcome[0]
        return result

    def _abandon(self, run: _Run) -> None:
        """The run ends before its kickoff returned: say that the crew runs on, and drop what
        it reports from now on."""
        if not run.returned:
            run.sink.warn(
                f"the crew {self.spec} was still running when its run ended; Python cannot "
                f"stop a thread, so it runs on in the background (what it does from now on "
                f"is not recorded)"
            )
        run.close()

    # --- in the run's worker thread ----------------------------------------------------------

    def inputs(self, request: ATPRequest) -> dict[str, Any]:
        """The kickoff inputs of a run."""
        if self.mapper is None:
            return {"task": request.task.description, **(request.task.input_data or {})}
        spec = self.settings.input_mapper
        try:
            result = self.mapper(request)
        except (Exception, SystemExit) as exc:
            raise _Failed(f"the input mapper {spec}", exc) from None
        if not isinstance(result, Mapping) or not all(isinstance(key, str) for key in result):
            raise _Refused(
                f"the input mapper {spec} returned {_a(result)}, not a dict of kickoff inputs (names to values)"
            )
        return dict(result)

    def new_crew(self) -> Any:
        """The crew of a run: a new one from the factory, or the shared object."""
        if self.factory is None:
            return self.shared
        try:
            crew = self.factory()
        except (Exception, SystemExit) as exc:
            raise _Failed(f"the crew factory {self.spec}", exc) from None
        assert self.crewai is not None
        if not isinstance(crew, self.crewai.Crew):
            raise _Refused(f"the crew factory {self.spec} returned {_a(crew)}, not a crewai Crew")
        return crew

    def check_crew(self, run: _Run, crew: Any, tasks: list[Any]) -> None:
        """(Before the kickoff.) Refuse a crew that would wait for a person; warn about memory
        that outlives the run."""
        remembering = bool(getattr(crew, "memory", None)) or any(
            getattr(agent, "memory", None) for agent in getattr(crew, "agents", None) or []
        )
        if remembering:
            run.note(
                f"the crew {self.spec} has memory: what its agents remember is saved (by default "
                f"under {_memory_folder()}) and kept across runs and atp invocations, so a run "
                f"may start from what earlier runs left there"
            )
        asking = [task for task in tasks if getattr(task, "human_input", False) is True]
        if asking:
            names = ", ".join(repr(_task_name(task) or "a task") for task in asking)
            which = "a task that asks" if len(asking) == 1 else "tasks that ask"
            raise _Refused(
                f"the crew {self.spec} has {which} for human input (human_input=True: {names}): "
                f"CrewAI would wait for a person to review the task's answer on ATP's standard "
                f"input, which a test run does not have; test the crew with human_input=False",
                "human_input",
            )

    # --- what the crew did -------------------------------------------------------------------

    def _raised(self, run: _Run, failed: _Failed) -> AgentError:
        """The crew (or its factory, or the input mapper) raised: its traceback to the run's
        log, an error event, the run's failure."""
        exc = failed.error
        for line in traceback.format_exception(type(exc), exc, _from_user(exc.__traceback__)):
            for part in line.rstrip("\n").split("\n"):
                run.sink.log(part)
        importer = self.mapper_importer if failed.what.startswith("the input mapper") else self.importer
        where = importer.where(exc.__traceback__) if importer is not None else ""
        if isinstance(exc, SystemExit):
            what = f"called sys.exit({exc.code!r})"
        else:
            what = f"raised {type(exc).__name__}: {exc}" if str(exc) else f"raised {type(exc).__name__}"
        run.fail_event(type(exc).__name__, str(exc) or type(exc).__name__)
        return AgentError(f"{failed.what} {what}{where}")

    def _artifacts(self, crew: Any, output: Any) -> list[Artifact]:
        raw = output.raw if isinstance(output.raw, str) else str(output.raw)
        artifacts: list[Artifact] = [
            FileArtifact(
                path=OUTPUT_FILE,
                content=raw,
                content_type="text/markdown",
                size_bytes=len(raw.encode("utf-8")),
            )
        ]
        data = _structured(output)
        if data is not None:
            artifacts.append(StructuredArtifact(name=OUTPUT_NAME, data=data))
        tasks = list(getattr(crew, "tasks", None) or [])
        outputs = list(getattr(output, "tasks_output", None) or [])
        taken = {OUTPUT_FILE, OUTPUT_NAME}
        for index, task_output in enumerate(outputs, 1):
            task = tasks[index - 1] if len(tasks) == len(outputs) else None
            own_name = getattr(task, "name", None) if task is not None else None
            name = (
                own_name
                if isinstance(own_name, str) and own_name and own_name not in taken
                else f"task_{index}"
            )
            while name in taken:  # (a task named like another artifact)
                name = f"{name}_{index}"
            taken.add(name)
            artifacts.append(StructuredArtifact(name=name, data=_task_data(index, task_output)))
        return artifacts


class _Run:
    """One run: its subscription to CrewAI's events, their translation into ATP events (in the
    threads CrewAI emits them from), their delivery to the sink (on ATP's event loop), and the
    counts its metrics are made of."""

    def __init__(self, adapter: CrewAIAdapter, crewai: _CrewAI, task_id: str, sink: EventSink) -> None:
        self.adapter = adapter
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

    # --- the worker thread -----------------------------------------------------------------

    def kickoff(self, request: ATPRequest) -> tuple[Any, Any]:
        """(In a worker thread.) Kick the crew off, subscribed to its events; (crew, output)."""
        adapter = self.adapter
        shared = adapter.factory is None
        if shared and not adapter._busy.acquire(blocking=False):
            self.returned = True
            raise _Refused(
                f"the crew object {adapter.spec} is still running a run that timed out (Python "
                f"cannot stop a thread), and runs of one Crew object cannot overlap; make 'crew' "
                f"a function that builds a new Crew for each run",
                "crew_busy",
            )
        undo = self.crewai.subscribe(self)
        try:
            inputs = adapter.inputs(request)
            crew = adapter.new_crew()
            self.crew = crew
            self.tasks = list(getattr(crew, "tasks", None) or [])
            adapter.check_crew(self, crew, self.tasks)
            self.usage_before = _usage(crew)
            try:
                output = crew.kickoff(inputs=inputs)
                if not isinstance(output, self.crewai.CrewOutput) and hasattr(output, "result"):
                    for _ in output:  # a streaming crew (stream=True): run it to its end
                        pass
                    output = output.result
            except (
                BaseException
            ) as exc:  # (a KeyboardInterrupt here is the crew's: signals reach the main thread)
                raise _Failed(f"the crew {adapter.spec}", exc) from None
            finally:
                self.crewai.settle()
            if not hasattr(output, "raw"):
                raise _Refused(
                    f"the crew {adapter.spec} returned {_a(output)} from kickoff(), not a CrewOutput"
                )
            return crew, output
        finally:
            undo()
            self.returned = True
            if shared:
                adapter._busy.release()

    def receive(self, source: Any, event: Any) -> None:
        """(In the thread CrewAI emits ``event`` from.) Translate it and hand it to the event
        loop. Never raises into CrewAI: a problem becomes one of the run's warnings."""
        if self.closed:
            return
        method = _TRANSLATIONS.get(getattr(event, "type", None))  # type: ignore[arg-type]
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
        nothing more the crew reports is translated, and the run ends (:meth:`CrewAIAdapter._kickoff`)."""
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
            after = _usage(crew)
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
        task = _task_name(getattr(event, "task", None))
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
            self.failed = (role, _task_name(getattr(event, "task", None)))
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
        name = _task_name(task) or getattr(output, "name", None) or "a task"
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
                output=_jsonable(event.output),
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
        if _value(getattr(event, "call_type", None)) == "tool_call":
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


_TRANSLATIONS: dict[str, Callable[[_Run, Any], list[Payload]]] = {
    "agent_execution_started": _Run._agent_started,
    "agent_execution_completed": _Run._agent_ended,
    "agent_execution_error": _Run._agent_ended,
    "agent_logs_execution": _Run._agent_step,
    "task_completed": _Run._task_completed,
    "tool_usage_started": _Run._tool_started,
    "tool_usage_finished": _Run._tool_finished,
    "tool_usage_error": _Run._tool_failed,
    "tool_selection_error": _Run._tool_refused,
    "tool_validate_input_error": _Run._tool_refused,
    "llm_call_started": _Run._llm_started,
    "llm_call_completed": _Run._llm_completed,
    "llm_call_failed": _Run._llm_failed,
}
"""CrewAI's event types (their ``type``) the adapter translates; the others are ignored."""


# --- helpers ---------------------------------------------------------------------------------


def _version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version like ``1.15.3``, or ``None``."""
    parts = text.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def _memory_folder() -> str:
    """Where CrewAI's memory keeps what it saves, unless the crew says otherwise."""
    storage = os.environ.get("CREWAI_STORAGE_DIR")
    if storage:
        return str(Path(storage) / "memory")
    try:
        import appdirs  # type: ignore[import-untyped]  # (a dependency of CrewAI's)
        from crewai_core.paths import get_project_directory_name

        return str(Path(appdirs.user_data_dir(get_project_directory_name(), "CrewAI")) / "memory")
    except Exception:
        return "CrewAI's data folder"


def _usage(crew: Any) -> Any:
    """The crew's token accounting now (what its agents' LLMs counted so far), or ``None``."""
    try:
        return crew.calculate_usage_metrics()
    except Exception:
        return None


def _count(usage: Any, field: str) -> int:
    value = getattr(usage, field, 0) if usage is not None else 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _structured(output: Any) -> dict[str, Any] | None:
    """An output's JSON (``json_dict``, or its pydantic model as JSON), or ``None``."""
    data = getattr(output, "json_dict", None)
    if not data:
        model = getattr(output, "pydantic", None)
        if model is not None and hasattr(model, "model_dump"):
            try:
                data = model.model_dump(mode="json")
            except Exception:
                data = None
    data = _jsonable(data) if data else None
    return data if isinstance(data, dict) else None


def _task_data(index: int, output: Any) -> dict[str, Any]:
    """A task's output as the data of its structured artifact."""
    raw = getattr(output, "raw", "")
    data: dict[str, Any] = {
        "index": index,
        "name": getattr(output, "name", None),
        "description": getattr(output, "description", None),
        "expected_output": getattr(output, "expected_output", None),
        "agent": getattr(output, "agent", None),
        "raw": raw if isinstance(raw, str) else str(raw),
        "output_format": _value(getattr(output, "output_format", None)),
    }
    structured = _structured(output)
    if structured is not None:
        data["json"] = structured
    result = _jsonable(data)
    return result if isinstance(result, dict) else {"raw": str(raw)}


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: a pydantic model as its JSON, what JSON cannot hold as text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value

    def fallback(item: Any) -> Any:
        if hasattr(item, "model_dump"):
            try:
                return item.model_dump(mode="json")
            except Exception:
                pass
        return str(item)

    try:
        return msgspec.json.decode(msgspec.json.encode(value, enc_hook=fallback))
    except Exception:
        return str(value)


def _tool_input(args: Any) -> Any:
    """A tool's arguments: a dict, or the text the LLM wrote when it is not JSON."""
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return args
        return parsed if isinstance(parsed, dict) else args
    return _jsonable(args)


def _error_text(error: Any) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return str(error)


def _role(agent: Any) -> str:
    role = getattr(agent, "role", None)
    return str(role) if role else "agent"


def _task_name(task: Any) -> str | None:
    if task is None:
        return None
    name = getattr(task, "name", None) or getattr(task, "description", None)
    return shorten(" ".join(str(name).split()), NAME_CHARS) if name else None


def _value(item: Any) -> Any:
    """An enum's value (CrewAI's call types and output formats), or the item."""
    return getattr(item, "value", item)


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


def _a(value: object) -> str:
    """A value for a message: ``None``, or its type and a short repr."""
    if value is None:
        return "None"
    try:
        text = repr(value)
    except Exception:
        text = "..."
    return f"{type(value).__name__} {shorten(text, 120)}"


_ANYIO = os.path.dirname(os.path.abspath(anyio.__file__)) + os.sep
_THIS_FILE = os.path.abspath(__file__)


def _from_user(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without the frames of this module and anyio at its start."""
    while tb is not None:
        filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if filename != _THIS_FILE and not filename.startswith(_ANYIO):
            return tb
        tb = tb.tb_next
    return tb
