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

import inspect
import logging
import math
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

import anyio
import msgspec

from atp.adapters.crewai_artifacts import OUTPUT_FILE, OUTPUT_NAME, crew_artifacts
from atp.adapters.crewai_events import (
    MAX_WARNINGS,
    NAME_CHARS,
    TOOL_DID_NOT_RETURN,
    CrewRun,
    Payload,
    crew_usage,
    task_name,
)
from atp.adapters.crewai_library import CrewAILibrary
from atp.adapters.python import PythonAdapter, attribute_importer, callable_problem
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError, AtpError
from atp.core.isolation import AgentRaised, call_agent
from atp.core.plugins import require
from atp.core.protocol import PROTOCOL_VERSION, ATPRequest, ATPResponse, decode_request, encode
from atp.core.text import describe
from atp.core.trace import EventSink

__all__ = [
    "MAX_WARNINGS",
    "MIN_CREWAI",
    "NAME_CHARS",
    "OUTPUT_FILE",
    "OUTPUT_NAME",
    "TELEMETRY_OFF",
    "TOOL_DID_NOT_RETURN",
    "CrewAIAdapter",
    "CrewAISettings",
    "Payload",
]

TELEMETRY_OFF = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_TRACING_ENABLED": "false"}
"""What ``telemetry: false`` (the default) puts in the environment before CrewAI is imported,
where the environment does not say otherwise: CrewAI's anonymous usage telemetry and its
execution tracing (which on a first run would collect a trace and offer to upload it) off."""
MIN_CREWAI = (1, 5)
"""The oldest CrewAI whose events can be told apart by run: from 1.5 on, CrewAI calls the event
bus's handlers in a copy of the emitting thread's context (and from 1.15.2 on, it has the
scoped stream sinks the adapter prefers)."""

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
        self.crewai: CrewAILibrary | None = None
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
        self._runs: set[CrewRun] = set()
        self._aborted = False

    # --- starting -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Import CrewAI, the crew's module and the input mapper, once, in a worker thread
        (CrewAI takes seconds to import). Raises AdapterError saying what is wrong."""
        self.cwd = Path.cwd()
        self._limiter = anyio.CapacityLimiter(math.inf)  # --parallel is the bound
        self._turns = anyio.Lock()
        try:
            await anyio.to_thread.run_sync(call_agent, self._load, abandon_on_cancel=True)
        except AgentRaised as raised:  # (the agent's code raised what no check expected)
            exc = raised.raised
            if isinstance(exc, AtpError):
                raise exc from None
            what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise AdapterError(
                f"agent {self.name!r}: loading {self.spec} raised {what}", retryable=False
            ) from None

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
        crewai = CrewAILibrary()
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

    def _crew_source(self, crewai: CrewAILibrary, target: Any) -> tuple[Callable[[], Any] | None, Any]:
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
            raise self._error(
                f"it is {describe(target, self.masker)}, not a crewai Crew or a function that returns one"
            )
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
                f"agent {self.name!r}: cannot call 'input_mapper' {spec!r}: it is {describe(mapper, self.masker)}, not a function",
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
        run = CrewRun(self.crewai, request.task_id, sink)
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

    async def _execute(self, run: CrewRun, own: ATPRequest, request: ATPRequest) -> ATPResponse:
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
            artifacts=crew_artifacts(crew, output),
            metrics=run.metrics(crew, time.monotonic() - started),
        )

    async def _kickoff(self, run: CrewRun, own: ATPRequest) -> tuple[Any, Any] | None:
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
                        call_agent, self._run_crew, run, own, abandon_on_cancel=True, limiter=self._limiter
                    )
                )
            except AgentRaised as raised:  # raised as is, not in an exception group
                exc = raised.raised  # (the crew's objects are looked at all along: anything)
                known = isinstance(exc, (_Refused, _Failed, AtpError))
                outcome.append(exc if known else _Failed(f"the crew {self.spec}", exc))
            group.cancel_scope.cancel()
        if not outcome:
            return None
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        result: tuple[Any, Any] = outcome[0]
        return result

    def _abandon(self, run: CrewRun) -> None:
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

    def _run_crew(self, run: CrewRun, request: ATPRequest) -> tuple[Any, Any]:
        """(In the run's worker thread.) Kick the run's crew off, subscribed to its events;
        (crew, output)."""
        shared = self.factory is None
        if shared and not self._busy.acquire(blocking=False):
            run.returned = True
            raise _Refused(
                f"the crew object {self.spec} is still running a run that timed out (Python "
                f"cannot stop a thread), and runs of one Crew object cannot overlap; make 'crew' "
                f"a function that builds a new Crew for each run",
                "crew_busy",
            )
        undo = run.crewai.subscribe(run)
        try:
            inputs = self.inputs(request)
            crew = self.new_crew()
            run.crew = crew
            run.tasks = list(getattr(crew, "tasks", None) or [])
            self.check_crew(run, crew, run.tasks)
            run.usage_before = crew_usage(crew)
            try:
                output = call_agent(_kicked_off, run, crew, inputs)
            except (
                AgentRaised
            ) as raised:  # (a KeyboardInterrupt here is the crew's: signals reach the main thread)
                raise _Failed(f"the crew {self.spec}", raised.raised) from None
            finally:
                run.crewai.settle()
            if not hasattr(output, "raw"):
                raise _Refused(
                    f"the crew {self.spec} returned {describe(output, self.masker)} from kickoff(), not a CrewOutput"
                )
            return crew, output
        finally:
            undo()
            run.returned = True
            if shared:
                self._busy.release()

    def inputs(self, request: ATPRequest) -> dict[str, Any]:
        """The kickoff inputs of a run."""
        if self.mapper is None:
            return {"task": request.task.description, **(request.task.input_data or {})}
        spec = self.settings.input_mapper
        try:
            result = call_agent(self.mapper, request)
        except AgentRaised as raised:
            raise _Failed(f"the input mapper {spec}", raised.raised) from None
        if not isinstance(result, Mapping) or not all(isinstance(key, str) for key in result):
            raise _Refused(
                f"the input mapper {spec} returned {describe(result, self.masker)}, not a dict of kickoff inputs (names to values)"
            )
        return dict(result)

    def new_crew(self) -> Any:
        """The crew of a run: a new one from the factory, or the shared object."""
        if self.factory is None:
            return self.shared
        try:
            crew = call_agent(self.factory)
        except AgentRaised as raised:
            raise _Failed(f"the crew factory {self.spec}", raised.raised) from None
        assert self.crewai is not None
        if not isinstance(crew, self.crewai.Crew):
            raise _Refused(
                f"the crew factory {self.spec} returned {describe(crew, self.masker)}, not a crewai Crew"
            )
        return crew

    def check_crew(self, run: CrewRun, crew: Any, tasks: list[Any]) -> None:
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
            names = ", ".join(repr(task_name(task, run.sink.masker) or "a task") for task in asking)
            which = "a task that asks" if len(asking) == 1 else "tasks that ask"
            raise _Refused(
                f"the crew {self.spec} has {which} for human input (human_input=True: {names}): "
                f"CrewAI would wait for a person to review the task's answer on ATP's standard "
                f"input, which a test run does not have; test the crew with human_input=False",
                "human_input",
            )

    # --- what the crew did -------------------------------------------------------------------

    def _raised(self, run: CrewRun, failed: _Failed) -> AgentError:
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


# --- helpers ---------------------------------------------------------------------------------


def _version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version like ``1.15.3``, or ``None``."""
    parts = text.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1])


def _kicked_off(run: CrewRun, crew: Any, inputs: dict[str, Any]) -> Any:
    """(Agent code.) The crew's output: its kickoff, a streaming crew run to its end."""
    output = crew.kickoff(inputs=inputs)
    if not isinstance(output, run.crewai.CrewOutput) and hasattr(output, "result"):
        for _ in output:  # a streaming crew (stream=True): run it to its end
            pass
        output = output.result
    return output


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
