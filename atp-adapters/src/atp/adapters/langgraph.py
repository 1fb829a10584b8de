"""The ``langgraph`` adapter: a LangGraph graph run inside the ATP process. Settings::

    agents:
      - name: my-graph
        type: langgraph
        module: my_agent             # the module, as Python imports it
        graph: graph                 # its attribute: a compiled graph, or a function returning one
        path: [src]                  # optional: folders put at the front of sys.path
        config: {recursion_limit: 40, configurable: {model: small}}
        input_key: messages          # the task becomes a user message in the state's "messages"
        input_mapper: my_agent:to_input      # or: (request) -> the graph's input
        output_mapper: my_agent:to_artifacts # (final state) -> artifacts

The module is imported as the ``python`` adapter imports its callable (the folder of the file
defining the agent and the ``path`` folders on ``sys.path``; errors saying what to do, before any
run). LangGraph itself is imported only when the adapter starts (``pip install
'atp-adapters[langgraph]'``). A factory is called once per ``atp test``; every run has a
``thread_id`` of its own (its task id), so a graph with a checkpointer keeps runs apart.

Each run streams the graph (``astream``, modes ``tasks`` and ``values``) with a callback handler
of its own in the run's config, and translates as things happen:

- a node starting: ``state_change`` (``from_state``: the node that ran before, ``to_state``: it),
  and ``__end__`` when the graph ends;
- a LangChain tool's call: ``tool_call`` (tool, input, output, duration, status ``success`` or
  ``error``);
- a chat model's (or LLM's) call: ``llm_request`` (model, input and output tokens when the model
  reports them, duration, stop reason);
- the exception that ends the graph: ``error``, and the run fails with its message
  (``GraphRecursionError`` named as such).

Metrics: ``total_steps`` (node executions), ``tool_calls``, ``llm_calls``, tokens, wall time. The
default artifacts are the last AI message's text (``answer.md``) and the final state's JSON-safe
parts (structured ``state``, at most :data:`MAX_ITEMS` values and about :data:`MAX_BYTES`, built in a
worker thread).

Every run's graph runs on an event loop of its own, in a worker thread of its own (with a thread
pool of its own for the nodes and tools that are plain ``def``): an exception the graph raises,
``SystemExit``, ``KeyboardInterrupt`` and ``GeneratorExit`` too, fails its run and nothing else;
an async node that blocks in sync code holds up its own run only. Its events are handed to ATP's
event loop and wait there to be delivered (:func:`~atp.adapters.python.call_in_loop`), in order.
At the time limit the run's stream is cancelled; what cannot be stopped (a plain ``def`` in its
thread, an async node stuck in sync code) is abandoned and runs on in the background, its model
and tool calls raising RunEnded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime as dt
import enum
import inspect
import logging
import math
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path, PurePath
from typing import Annotated, Any, ClassVar

import anyio
import msgspec

from atp.adapters.python import (
    PythonAdapter,
    PythonSettings,
    RunEnded,
    attribute_importer,
    call_in_loop,
    callable_problem,
)
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError
from atp.core.plugins import require
from atp.core.protocol import (
    PROTOCOL_VERSION,
    Artifact,
    ATPRequest,
    ATPResponse,
    ErrorPayload,
    FileArtifact,
    LLMRequestPayload,
    Metrics,
    ReferenceArtifact,
    StateChangePayload,
    StructuredArtifact,
    ToolCallPayload,
    decode_request,
    encode,
    make_event,
)
from atp.core.text import shorten
from atp.core.trace import EventSink

INSTALL = "atp-adapters[langgraph]"
FEATURE = "the langgraph adapter"
ANSWER_PATH = "answer.md"
"""The file artifact holding the last AI message's text (without an ``output_mapper``)."""
STATE_ARTIFACT = "state"
"""The structured artifact holding the final state's JSON-safe parts."""
START_NODE = "__start__"
END_NODE = "__end__"
MAX_DEPTH = 64
"""How deep :func:`_plain` follows nested values; deeper containers become a note, other
objects their ``repr``."""
MAX_ITEMS = 10_000
"""How many values :func:`_plain` converts (a shared value counts each time it appears); then
it stops with a ``<truncated: ...>`` note."""
MAX_BYTES = 1 << 20
"""About how many bytes of JSON :func:`_plain` makes (characters of text, keys and numbers);
then it stops with a ``<truncated: ...>`` note (a longer text is cut)."""
_INT_RANGE = (-(2**63), 2**64 - 1)
_NOTHING: Any = object()
_DROP: Any = object()
WORKER_THREADS = 64
"""Threads of a run's own thread pool (see :class:`_WorkerPool`): its plain ``def`` nodes and
tools each take one while they run."""
GRACE_SECONDS = 0.25
"""How long a cancelled run waits for its graph to wind down before abandoning its thread."""
_OWN_FAILURES = ("RunEnded(", "TraceLimitExceeded(", "StorageError(")
"""The reprs of the run's own failures, which the callback handler raises on purpose."""
_RECURSION_LIMIT = re.compile(r"Recursion limit of (\d+) reached")

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]


# --- settings --------------------------------------------------------------------------------


class GraphConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """What the suite may put in the graph's RunnableConfig (callbacks are ATP's own)."""

    recursion_limit: PositiveInt | None = None
    configurable: dict[str, Any] = msgspec.field(default_factory=dict)
    tags: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    run_name: str | None = None
    max_concurrency: PositiveInt | None = None

    def runnable_config(self) -> dict[str, Any]:
        """A fresh RunnableConfig dict of what is set."""
        config: dict[str, Any] = {"configurable": dict(self.configurable)}
        for name in ("recursion_limit", "run_name", "max_concurrency"):
            value = getattr(self, name)
            if value is not None:
                config[name] = value
        if self.tags:
            config["tags"] = list(self.tags)
        if self.metadata:
            config["metadata"] = dict(self.metadata)
        return config


class LangGraphSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: str
    """The module defining the graph, as Python imports it (``my_agent``, ``my_pkg.graphs``)."""
    graph: str = "graph"
    """Its attribute (dotted attributes too): a compiled graph, a ``StateGraph`` (compiled once),
    or a function returning one (called once per ``atp test``, with the config when it takes an
    argument)."""
    path: list[str] = msgspec.field(default_factory=list)
    """Folders put at the front of ``sys.path``, relative to the file defining the agent."""
    config: GraphConfig = msgspec.field(default_factory=GraphConfig)
    """The graph's RunnableConfig: ``recursion_limit``, ``configurable``, ``tags``, ``metadata``,
    ``run_name``, ``max_concurrency``."""
    input_key: str = "messages"
    """The state key the task's description goes to: ``messages`` makes it a user message."""
    input_mapper: str | None = None
    """``module:function`` taking the ATPRequest and returning the graph's input."""
    output_mapper: str | None = None
    """``module:function`` taking the final state and returning the artifacts."""

    def __post_init__(self) -> None:
        problem = _module_problem(self.module) or _graph_problem(self.graph)
        if problem is not None:
            raise ValueError(problem)
        PythonSettings(callable=f"{self.module}:{self.graph}", path=self.path)  # checks 'path'
        for setting in ("input_mapper", "output_mapper"):
            value = getattr(self, setting)
            if value is not None:
                problem = callable_problem(value, setting)
                if problem is not None:
                    raise ValueError(problem)
        if not self.input_key:
            raise ValueError("'input_key' is empty: name the state key the task's description goes to")


def _module_problem(value: str) -> str | None:
    if ":" in value:
        module, _, attribute = value.partition(":")
        return (
            f"'module' is the module's name alone, not {value!r}: write module: {module} and "
            f"graph: {attribute or 'graph'}"
        )
    if value.endswith(".py") or "/" in value or "\\" in value:
        stem = PurePath(value.replace("\\", "/")).stem or "my_agent"
        return (
            f"'module' names a module, not a file: {value!r} is a path. Write the module's name "
            f"({stem}) and put its folder in 'path' (relative to the file that defines the agent) "
            f"unless it is that file's folder"
        )
    if not value or not all(part.isidentifier() for part in value.split(".")):
        return f"'module' {value!r} is not a module name (dotted Python identifiers, like my_agent or my_pkg.graphs)"
    return None


def _graph_problem(value: str) -> str | None:
    if not value or not all(part.isidentifier() for part in value.split(".")):
        return (
            f"'graph' {value!r} is not an attribute name (a Python identifier, dotted for an "
            f"attribute of an attribute: graph, agents.research)"
        )
    return None


# --- the adapter -----------------------------------------------------------------------------


class _LangGraph:
    """The parts of LangGraph and LangChain the adapter uses, imported when it starts."""

    def __init__(self) -> None:
        require("langgraph", install=INSTALL, feature=FEATURE)
        require("langchain_core", install=INSTALL, feature=FEATURE)
        from langchain_core.callbacks import BaseCallbackHandler
        from langchain_core.messages import BaseMessage, HumanMessage
        from langgraph.errors import GraphRecursionError
        from langgraph.graph import StateGraph
        from langgraph.pregel import Pregel

        self.Pregel = Pregel
        self.StateGraph = StateGraph
        self.GraphRecursionError = GraphRecursionError
        self.BaseMessage = BaseMessage
        self.HumanMessage = HumanMessage
        self.Handler = _handler_class(BaseCallbackHandler)


class LangGraphAdapter(Adapter):
    type: ClassVar[str] = "langgraph"
    summary: ClassVar[str] = "a LangGraph graph run inside ATP: module, graph (atp-adapters[langgraph])"
    Settings = LangGraphSettings
    settings: LangGraphSettings

    def __init__(self, settings: LangGraphSettings, *, name: str, base_dir: Path) -> None:
        super().__init__(settings, name=name, base_dir=base_dir)
        self.spec = f"{settings.module}:{settings.graph}"
        self.importer: PythonAdapter = attribute_importer(
            self.spec, agent=name, base_dir=self.base_dir, path=settings.path
        )
        self.graph: Any = None
        """The compiled graph, once :meth:`start` has it."""
        self.input_mapper: Callable[[ATPRequest], Any] | None = None
        self.output_mapper: Callable[[Any], Any] | None = None
        self.cwd = Path.cwd()
        self._lg: _LangGraph | None = None
        self._runs: set[_Run] = set()
        self._aborted = False
        self._limiter: anyio.CapacityLimiter | None = None

    async def start(self) -> None:
        """Import LangGraph, the module and the mappers, and make the graph, once (in a worker
        thread: importing LangGraph takes a second). AdapterError saying what is wrong."""
        self.cwd = Path.cwd()
        self._limiter = anyio.CapacityLimiter(math.inf)  # --parallel is the bound
        _quiet_own_failures()
        lg, found = await anyio.to_thread.run_sync(self._load, abandon_on_cancel=True)
        if inspect.isawaitable(found):  # an async factory
            try:
                found = await found
            except Exception as exc:
                raise self._factory_failed(exc) from exc
            found = await anyio.to_thread.run_sync(self._as_graph, lg, found, True, abandon_on_cancel=True)
        self._lg, self.graph = lg, found
        self._check_input_key()

    def artifact_dir(self, request: ATPRequest) -> Path | None:
        """ATP's working folder when it started: an in-process graph shares it."""
        return self.cwd

    def abort(self) -> None:
        """End every run: their callbacks raise RunEnded from now on, and no new run starts."""
        self._aborted = True
        for run in list(self._runs):
            run.closed = True

    async def execute(self, request: ATPRequest, sink: EventSink) -> ATPResponse:
        if self.graph is None or self._lg is None:
            await self.start()
        lg = self._lg
        assert lg is not None
        if self._aborted:
            raise AdapterError(f"agent {self.name!r}: ATP is stopping; no run is started", retryable=False)
        run = _Run(request.task_id, sink, lg)
        self._runs.add(run)
        try:
            return await self._execute(request, run, lg)
        finally:
            run.closed = True
            self._runs.discard(run)

    # --- a run ----------------------------------------------------------------------------------

    async def _off_loop(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in a worker thread (abandoned if the run is cancelled)."""
        return await anyio.to_thread.run_sync(function, *args, abandon_on_cancel=True, limiter=self._limiter)

    async def _execute(self, request: ATPRequest, run: _Run, lg: _LangGraph) -> ATPResponse:
        started = time.perf_counter()
        own = decode_request(encode(request))  # the graph's copy: what it changes, ATP never sees
        graph_input = await self._graph_input(own, lg)
        config = self.settings.config.runnable_config()
        config["configurable"].setdefault("thread_id", request.task_id)
        config["callbacks"] = [lg.Handler(run)]
        driver = _Driver(self.graph, graph_input, config, run)
        try:
            await self._off_loop(driver.drive)
        except anyio.get_cancelled_exc_class():
            run.closed = True
            driver.stop()
            with anyio.CancelScope(shield=True), anyio.move_on_after(GRACE_SECONDS):
                await driver.done.wait()  # (an async node cancelled at once is not left running)
            run.cancelled()
            raise
        run.check()  # a failure of ATP's own (a flood of events) comes first
        final, failure = driver.final, driver.failure
        if failure is not None:
            return await self._failed(request, run, failure, final, started, lg)
        if run.interrupted:
            run.sink.warn(
                f"the graph stopped at an interrupt in node {', '.join(map(repr, run.interrupted))}: "
                f"ATP does not resume a graph; the run ends with the state at the interrupt"
            )
        else:
            run.finished()
        artifacts = await self._artifacts(final, lg)
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="completed",
            artifacts=artifacts,
            metrics=run.metrics(time.perf_counter() - started),
        )

    async def _graph_input(self, request: ATPRequest, lg: _LangGraph) -> Any:
        mapper = self.input_mapper
        if mapper is not None:
            try:
                value = mapper(request)
                if inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                raise self._mapper_failed("input_mapper", exc) from None
            return value
        key = self.settings.input_key
        text = request.task.description
        data: dict[str, Any] = {key: [lg.HumanMessage(content=text)] if key == "messages" else text}
        for name, value in (request.task.input_data or {}).items():
            data.setdefault(name, value)
        return data

    async def _failed(
        self, request: ATPRequest, run: _Run, exc: BaseException, final: Any, started: float, lg: _LangGraph
    ) -> ATPResponse:
        """The graph raised ``exc``: an error event, the traceback in the log, a failed response
        (with the metrics so far and the last state seen)."""
        name = type(exc).__name__
        if isinstance(exc, lg.GraphRecursionError):
            match = _RECURSION_LIMIT.search(str(exc))
            limit = match.group(1) if match else str(self.settings.config.recursion_limit or "its")
            message = (
                f"the graph hit its recursion limit of {limit} steps without reaching its end "
                f"({name}); set config.recursion_limit higher if it needs more steps"
            )
        else:
            if isinstance(exc, SystemExit):
                what = f"called sys.exit({exc.code!r})"
            elif isinstance(exc, RunEnded):
                what = f"stopped: {exc}"
            else:
                what = f"raised {name}: {exc}" if str(exc) else f"raised {name}"
            node = run.failed_nodes.get(id(exc))
            where = f" in node {node!r}" if node else ""
            message = f"the graph {what}{where}{self.importer.where(exc.__traceback__)}"
        for line in traceback.format_exception(type(exc), exc, exc.__traceback__):
            for part in line.rstrip("\n").split("\n"):
                run.sink.log(part)
        run.emit(ErrorPayload(error_type=name, message=message, recoverable=False))
        artifacts: list[Artifact] = []
        if final is not _NOTHING:
            artifacts.append(
                StructuredArtifact(name=STATE_ARTIFACT, data=await self._off_loop(_state_data, final))
            )
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="failed",
            artifacts=artifacts,
            metrics=run.metrics(time.perf_counter() - started),
            error=message,
        )

    async def _artifacts(self, final: Any, lg: _LangGraph) -> list[Artifact]:
        """The run's artifacts, built in a worker thread (a large state takes time)."""
        state = {} if final is _NOTHING else final
        mapper = self.output_mapper
        if mapper is None:
            return await self._off_loop(_default_artifacts, state, lg)
        try:
            value = await self._off_loop(mapper, state)
            if inspect.isawaitable(value):
                value = await value
        except (Exception, SystemExit) as exc:
            raise self._mapper_failed("output_mapper", exc) from None
        return await self._off_loop(self._mapped_artifacts, value)  # type: ignore[no-any-return]

    def _mapped_artifacts(self, value: Any) -> list[Artifact]:
        """What the output mapper returned, as artifacts: a list of artifacts (or dicts of them),
        one artifact, ``None``, or a dict of ``name: value`` (text: a file of that path; a dict: a
        structured artifact of that name; anything else: a structured artifact ``{"value": ...}``)."""
        items: list[Any]
        if value is None:
            return []
        if isinstance(value, (FileArtifact, StructuredArtifact, ReferenceArtifact)):
            items = [value]
        elif isinstance(value, (list, tuple)):
            items = [_plain(item) if isinstance(item, Mapping) else item for item in value]
        elif isinstance(value, Mapping):
            items = []
            for key, item in value.items():
                name = str(key)
                if isinstance(item, str):
                    items.append(FileArtifact(path=name, content=item))
                elif isinstance(item, Mapping):
                    items.append({"type": "structured", "name": name, "data": _plain(item)})
                else:
                    items.append({"type": "structured", "name": name, "data": {"value": _plain(item)}})
        else:
            raise AgentError(
                f"the output_mapper {self.settings.output_mapper} returned {type(value).__name__}, "
                f"not artifacts: return a list of artifacts, or a dict of name: text or data",
                evidence=_repr(value),
            )
        try:
            return msgspec.convert(
                [msgspec.to_builtins(item) if isinstance(item, msgspec.Struct) else item for item in items],
                list[Artifact],
            )
        except (msgspec.MsgspecError, TypeError, ValueError) as exc:
            raise AgentError(
                f"the output_mapper {self.settings.output_mapper} returned what are not valid "
                f"ATP artifacts ({exc})",
                evidence=_repr(value),
            ) from None

    def _mapper_failed(self, setting: str, exc: BaseException) -> AgentError:
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return AgentError(
            f"the {setting} {getattr(self.settings, setting)} raised {what}{self.importer.where(exc.__traceback__)}"
        )

    # --- starting -------------------------------------------------------------------------------

    def _load(self) -> tuple[_LangGraph, Any]:
        """(In a worker thread.) LangGraph, and the graph (or an awaitable of it)."""
        lg = _LangGraph()
        found = self.importer.import_attribute()
        graph = self._as_graph(lg, found, False)
        for setting in ("input_mapper", "output_mapper"):
            spec = getattr(self.settings, setting)
            if spec is None:
                continue
            importer = attribute_importer(
                spec, agent=self.name, base_dir=self.base_dir, path=self.settings.path
            )
            function = importer.import_attribute()
            if not callable(function):
                raise AdapterError(
                    f"agent {self.name!r}: {setting} {spec!r} is {_a(function)}, not a function",
                    retryable=False,
                )
            setattr(self, setting, function)
        return lg, graph

    def _as_graph(self, lg: _LangGraph, found: Any, made: bool) -> Any:
        """The compiled graph ``found`` is or makes (``made``: a factory returned it)."""
        if isinstance(found, lg.Pregel):
            return found
        if isinstance(found, lg.StateGraph):
            try:
                return found.compile()
            except Exception as exc:
                raise AdapterError(
                    f"agent {self.name!r}: compiling the StateGraph {self.spec} raised "
                    f"{type(exc).__name__}: {exc}{self.importer.where(exc.__traceback__)}",
                    retryable=False,
                ) from exc
        if made:
            raise AdapterError(
                f"agent {self.name!r}: the graph factory {self.spec} returned {_a(found)}, not a "
                f"LangGraph graph (return builder.compile())",
                retryable=False,
            )
        if isinstance(found, type) or not callable(found):
            raise AdapterError(
                f"agent {self.name!r}: {self.spec} is {_a(found)}, not a LangGraph graph: name a "
                f"compiled graph (builder.compile()) or a function that returns one",
                retryable=False,
            )
        made_graph = self._call_factory(found)
        if inspect.isawaitable(made_graph):
            return made_graph
        return self._as_graph(lg, made_graph, True)

    def _call_factory(self, factory: Callable[..., Any]) -> Any:
        args: tuple[Any, ...] = ()
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            signature = None
        if signature is not None:
            try:
                signature.bind()
            except TypeError:
                try:
                    signature.bind(None)
                except TypeError:
                    raise AdapterError(
                        f"agent {self.name!r}: the graph factory {self.spec} is called with no "
                        f"argument or with the config, but its parameters are {signature}",
                        retryable=False,
                    ) from None
                args = (self.settings.config.runnable_config(),)
        try:
            return factory(*args)
        except Exception as exc:
            raise self._factory_failed(exc) from exc

    def _factory_failed(self, exc: Exception) -> AdapterError:
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return AdapterError(
            f"agent {self.name!r}: the graph factory {self.spec} raised {what}{self.importer.where(exc.__traceback__)}",
            retryable=False,
        )

    def _check_input_key(self) -> None:
        """Without an input mapper, ``input_key`` must be a key of the graph's input (when the
        graph says what its input is)."""
        if self.settings.input_mapper is not None:
            return
        try:
            schema = self.graph.get_input_jsonschema()
        except Exception:
            return
        keys = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(keys, Mapping) or not keys or self.settings.input_key in keys:
            return
        raise AdapterError(
            f"agent {self.name!r}: the input of graph {self.spec} has no key "
            f"{self.settings.input_key!r} (its keys: {', '.join(map(str, keys))}); set 'input_key' "
            f"to the key the task's description goes to, or write an 'input_mapper'",
            retryable=False,
        )


# --- what happens in a run -------------------------------------------------------------------


class _Driver:
    """One run's graph, streamed on an event loop of its own in the worker thread that calls
    :meth:`drive`: what the graph raises (``SystemExit`` and ``KeyboardInterrupt``, which asyncio
    raises out of its loop, too) is :attr:`failure`, never ATP's; its plain ``def`` nodes and
    tools run in a thread pool of its own that does not wait for the threads it abandons."""

    def __init__(self, graph: Any, graph_input: Any, config: dict[str, Any], run: _Run) -> None:
        self.graph = graph
        self.graph_input = graph_input
        self.config = config
        self.run = run
        self.final: Any = _NOTHING
        """The last state the stream gave."""
        self.failure: BaseException | None = None
        """What ended the graph, if it did not end well."""
        self.done = anyio.Event()
        """Set (on ATP's event loop) once :meth:`drive` has returned."""
        self._atp_loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def drive(self) -> None:
        """(In a worker thread.) Stream the graph to its end, on a new event loop, as
        ``asyncio.run`` would."""
        loop = asyncio.new_event_loop()
        executor = _WorkerPool()
        loop.set_default_executor(executor)
        loop.set_exception_handler(self._loop_error)
        asyncio.set_event_loop(loop)
        try:
            with self._lock:
                if self._stopped:
                    return
                task = self._task = loop.create_task(self._stream())
                self._loop = loop
            while not task.done():
                try:
                    loop.run_until_complete(task)
                except BaseException as exc:  # raised out of the loop by a task of the graph's
                    if task.done():
                        break
                    if self.failure is None:
                        self.failure = exc
                    task.cancel()
        finally:
            try:
                _cancel_tasks(loop)
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                executor.shutdown(wait=False, cancel_futures=True)
                asyncio.set_event_loop(None)
                loop.close()
                with contextlib.suppress(RuntimeError):  # (ATP's loop is closed: nobody waits)
                    self._atp_loop.call_soon_threadsafe(self.done.set)

    async def _stream(self) -> None:
        run = self.run
        stream = self.graph.astream(self.graph_input, self.config, stream_mode=["tasks", "values"])
        try:
            async for mode, chunk in stream:
                if mode == "values":
                    self.final = chunk
                elif mode == "tasks":
                    run.task(chunk)
                run.check()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # (sys.exit(), GeneratorExit in a node end the run only)
            if self.failure is None:
                self.failure = exc
        finally:
            with contextlib.suppress(Exception):  # (after a GeneratorExit it raises RuntimeError)
                await stream.aclose()

    def stop(self) -> None:
        """(From ATP's event loop.) Cancel the stream; :meth:`drive` returns once it has ended
        (or never, if the graph blocks: its thread is abandoned)."""
        with self._lock:
            self._stopped = True
            loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: drive() has returned
                loop.call_soon_threadsafe(task.cancel)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The graph's event loop's exception handler: what it reports goes to the run's log
        (while the run lasts)."""
        run = self.run
        if run.closed:
            return
        exc = context.get("exception")
        text = str(context.get("message") or "an error in the graph's event loop")
        if isinstance(exc, BaseException):
            text += f": {type(exc).__name__}: {exc}"
        with contextlib.suppress(BaseException):
            run.on_loop(run.sink.log, text)


def _cancel_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks left on ``loop`` and let them end (as ``asyncio.run`` does)."""
    for _ in range(3):  # (a task may start another as it ends)
        tasks = asyncio.all_tasks(loop)
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


class _Run:
    """One run: its events (delivered on ATP's event loop's thread, from whatever thread the
    graph's callbacks run in, which waits for them), the nodes, and the counts for the metrics."""

    def __init__(self, task_id: str, sink: EventSink, lg: _LangGraph) -> None:
        self.task_id = task_id
        self.sink = sink
        self.lg = lg
        self.loop_thread = threading.get_ident()
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.failure: BaseException | None = None
        """The first failure delivering an event (a flood, the run directory): the run's."""
        self.next_sequence = 0
        self.steps = 0
        self.tool_calls = 0
        self.llm_calls = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.last_node: str | None = None
        self.running: dict[str, str] = {}
        """Task id: node name, for the nodes started and not finished."""
        self.failed_nodes: dict[int, str] = {}
        """id(exception): the node that raised it."""
        self.interrupted: list[str] = []
        """The nodes that stopped at an interrupt (``langgraph.types.interrupt``)."""
        self.tools: dict[Any, tuple[str, Any, float]] = {}
        self.llms: dict[Any, tuple[str | None, float | None, float]] = {}
        self._warned = False

    # --- events ---------------------------------------------------------------------------------

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure

    def on_loop(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` on ATP's event loop's thread: at once there, else handed to it
        and waited for (:func:`~atp.adapters.python.call_in_loop`)."""
        if threading.get_ident() == self.loop_thread:
            return function(*args)
        return call_in_loop(self.loop, lambda: function(*args))

    def emit(self, payload: msgspec.Struct) -> None:
        """Deliver an event made of ``payload`` on ATP's event loop's thread, waiting for it
        there when called from another thread (so events keep their order, and a graph making
        events in a tight loop goes at the pace they are delivered). Raises the run's failure,
        or RunEnded once the run is over, so that a graph that goes on stops at its next model or
        tool call."""
        self.alive()
        self.on_loop(self._deliver_alive, payload, dt.datetime.now(dt.timezone.utc))

    def _deliver(self, payload: msgspec.Struct, timestamp: dt.datetime) -> None:
        event = make_event(self.task_id, self.next_sequence, payload, timestamp=timestamp)
        self.next_sequence += 1
        try:
            self.sink.event(event)
        except Exception as exc:  # a flood (AgentError), the run directory (StorageError)
            self.failure = exc
            raise
        if isinstance(payload, ToolCallPayload):
            self.tool_calls += 1
        elif isinstance(payload, LLMRequestPayload):
            self.llm_calls += 1
            if payload.input_tokens is not None:
                self.input_tokens = (self.input_tokens or 0) + payload.input_tokens
            if payload.output_tokens is not None:
                self.output_tokens = (self.output_tokens or 0) + payload.output_tokens

    def _deliver_alive(self, payload: msgspec.Struct, timestamp: dt.datetime) -> None:
        """(On the event loop.) The event, unless the run is over or failed (then that is raised)."""
        self.alive()
        self._deliver(payload, timestamp)

    def guarded(self, what: Callable[..., None], *args: Any) -> None:
        """Run a translation ``what``: the run's own failures go up (into the graph, which stops),
        a bug in the translation becomes a warning and the graph goes on."""
        try:
            what(*args)
        except (RunEnded, AgentError) as exc:
            raise exc from None
        except Exception as exc:
            if exc is self.failure:
                raise
            if not self._warned:
                self._warned = True
                with contextlib.suppress(Exception):
                    self.on_loop(
                        self.sink.warn,
                        f"ATP could not translate a LangGraph callback: {type(exc).__name__}: {exc}",
                    )

    def metrics(self, seconds: float) -> Metrics:
        tokens = None
        if self.input_tokens is not None or self.output_tokens is not None:
            tokens = (self.input_tokens or 0) + (self.output_tokens or 0)
        return Metrics(
            total_tokens=tokens,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_steps=self.steps,
            tool_calls=self.tool_calls,
            llm_calls=self.llm_calls,
            wall_time_seconds=round(seconds, 6),
        )

    # --- nodes ----------------------------------------------------------------------------------

    def task(self, chunk: Any) -> None:
        """A ``tasks`` stream item: a node starting (``input``, ``triggers``) or finished
        (``result``, ``error``)."""
        if not isinstance(chunk, Mapping):
            return
        name = str(chunk.get("name"))
        task_id = str(chunk.get("id"))
        if "triggers" in chunk and "result" not in chunk:
            self.steps += 1
            self.running[task_id] = name
            self.emit(StateChangePayload(from_state=self.last_node or START_NODE, to_state=name))
            return
        self.running.pop(task_id, None)
        self.last_node = name
        if chunk.get("interrupts") and name not in self.interrupted:
            self.interrupted.append(name)
        error = chunk.get("error")
        if isinstance(error, BaseException):
            self.failed_nodes[id(error)] = name

    def finished(self) -> None:
        self.emit(StateChangePayload(from_state=self.last_node or START_NODE, to_state=END_NODE))

    def cancelled(self) -> None:
        """The run is cancelled (its time limit, or ATP stopping)."""
        self.closed = True
        running = self.running.copy()
        if running:
            names = sorted(set(running.values()))
            nodes = (
                f"node {names[0]!r} was" if len(names) == 1 else f"nodes {', '.join(map(repr, names))} were"
            )
            self.sink.warn(
                f"the run ended while {nodes} running: cancelled, but what cannot be stopped (a "
                f"node or tool that is a plain def, an async node blocking in sync code) is "
                f"abandoned and runs on in the background (its model and tool calls raise "
                f"RunEnded from now on)"
            )

    # --- LangChain callbacks --------------------------------------------------------------------

    def alive(self) -> None:
        """Raise the run's failure, or RunEnded once it is over: a graph still running in a
        thread after its run ended stops at its next model or tool call."""
        if self.failure is not None:
            raise self.failure
        if self.closed:
            raise RunEnded("the run is over (it timed out or ATP was stopped)")

    def llm_started(self, run_id: Any, serialized: Any, metadata: Any, kwargs: Mapping[str, Any]) -> None:
        self.alive()
        params = kwargs.get("invocation_params")
        params = params if isinstance(params, Mapping) else {}
        temperature = params.get("temperature")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            temperature = None
        self.llms[run_id] = (_model_name(serialized, metadata, params), temperature, time.perf_counter())

    def llm_ended(self, run_id: Any, response: Any) -> None:
        model, temperature, started = self.llms.pop(run_id, (None, None, None))
        input_tokens, output_tokens, reported_model, stop_reason = _usage(response)
        self.emit(
            LLMRequestPayload(
                model=reported_model or model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                duration_ms=_ms(started),
                temperature=temperature,
                stop_reason=stop_reason,
            )
        )

    def llm_failed(self, run_id: Any, error: BaseException) -> None:
        model, temperature, started = self.llms.pop(run_id, (None, None, None))
        self.emit(
            LLMRequestPayload(
                model=model, duration_ms=_ms(started), temperature=temperature, stop_reason="error"
            )
        )

    def tool_started(
        self, run_id: Any, serialized: Any, input_str: Any, inputs: Any, kwargs: Mapping[str, Any]
    ) -> None:
        self.alive()
        name = (
            (serialized.get("name") if isinstance(serialized, Mapping) else None)
            or kwargs.get("name")
            or "tool"
        )
        value = inputs if inputs is not None else input_str
        self.tools[run_id] = (str(name), _plain(value), time.perf_counter())

    def tool_ended(self, run_id: Any, output: Any) -> None:
        name, value, started = self.tools.pop(run_id, ("tool", None, None))
        status, error = "success", None
        content = output
        if isinstance(output, self.lg.BaseMessage):
            content = output.content
            if getattr(output, "status", None) == "error":
                status, error = "error", _text(content)
        self.emit(
            ToolCallPayload(
                tool=name,
                input=value,
                output=_plain(content),
                duration_ms=_ms(started),
                status=status,
                error=error,
            )
        )

    def tool_failed(self, run_id: Any, error: BaseException) -> None:
        name, value, started = self.tools.pop(run_id, ("tool", None, None))
        what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        self.emit(
            ToolCallPayload(tool=name, input=value, duration_ms=_ms(started), status="error", error=what)
        )


class _WorkerPool(concurrent.futures.ThreadPoolExecutor):
    """A run's own thread pool, the default executor of its event loop: LangGraph runs a node
    (and LangChain a tool) that is a plain ``def`` there. A thread abandoned at a time limit
    runs on, so the pool does not wait for its threads when the run's loop ends (the ``atp``
    command exits without waiting for them either)."""

    def __init__(self) -> None:
        super().__init__(max_workers=WORKER_THREADS, thread_name_prefix="atp-langgraph")

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)


class _OwnFailures(logging.Filter):
    """Leaves out LangChain's warning "Error in AtpLangGraphHandler.on_...: RunEnded(...)" (or
    TraceLimitExceeded, StorageError): the handler raises them on purpose, to stop a run's graph,
    and the run reports them itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 3 and args[0] == "AtpLangGraphHandler":
            return not (isinstance(args[2], str) and args[2].startswith(_OWN_FAILURES))
        return True


_FILTER = _OwnFailures()


def _quiet_own_failures() -> None:
    """Put :class:`_OwnFailures` on LangChain's callback manager's logger (once)."""
    logger = logging.getLogger("langchain_core.callbacks.manager")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


def _handler_class(base: type[Any]) -> type[Any]:
    """The callback handler class (LangChain's ``BaseCallbackHandler`` is ``base``): one
    instance per run, in the run's config, so concurrent runs keep their events apart."""

    class Handler(base):  # type: ignore[misc]
        run_inline = True  # called where the model or tool runs, not in another thread
        raise_error = True  # the run's failure (RunEnded, a flood) stops the graph

        def __init__(self, run: _Run) -> None:
            super().__init__()
            self.run = run

        @property
        def ignore_chain(self) -> bool:  # (tools are "agent" events for LangChain: not ignored)
            return True

        @property
        def ignore_retriever(self) -> bool:
            return True

        @property
        def ignore_custom_event(self) -> bool:
            return True

        def on_chat_model_start(
            self, serialized: Any, messages: Any, *, run_id: Any, metadata: Any = None, **kwargs: Any
        ) -> None:
            self.run.guarded(self.run.llm_started, run_id, serialized, metadata, kwargs)

        def on_llm_start(
            self, serialized: Any, prompts: Any, *, run_id: Any, metadata: Any = None, **kwargs: Any
        ) -> None:
            self.run.guarded(self.run.llm_started, run_id, serialized, metadata, kwargs)

        def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
            self.run.guarded(self.run.llm_ended, run_id, response)

        def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
            self.run.guarded(self.run.llm_failed, run_id, error)

        def on_tool_start(
            self, serialized: Any, input_str: Any, *, run_id: Any, inputs: Any = None, **kwargs: Any
        ) -> None:
            self.run.guarded(self.run.tool_started, run_id, serialized, input_str, inputs, kwargs)

        def on_tool_end(self, output: Any, *, run_id: Any, **kwargs: Any) -> None:
            self.run.guarded(self.run.tool_ended, run_id, output)

        def on_tool_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
            self.run.guarded(self.run.tool_failed, run_id, error)

    Handler.__name__ = Handler.__qualname__ = "AtpLangGraphHandler"
    return Handler


# --- translating values ----------------------------------------------------------------------


def _model_name(serialized: Any, metadata: Any, params: Mapping[str, Any]) -> str | None:
    """The model a call is for: LangChain's ``ls_model_name``, the call's ``model`` parameter,
    else the model class."""
    if isinstance(metadata, Mapping):
        name = metadata.get("ls_model_name")
        if isinstance(name, str) and name:
            return name
    for key in ("model", "model_name", "model_id"):
        name = params.get(key)
        if isinstance(name, str) and name:
            return name
    if isinstance(serialized, Mapping):
        ids = serialized.get("id")
        if isinstance(ids, list) and ids and isinstance(ids[-1], str):
            return ids[-1]
        name = serialized.get("name")
        if isinstance(name, str) and name:
            return name
    kind = params.get("_type")
    return kind if isinstance(kind, str) and kind else None


def _usage(response: Any) -> tuple[int | None, int | None, str | None, str | None]:
    """Input and output tokens, the model named in the answer, and the stop reason, from an
    ``LLMResult``: its messages' ``usage_metadata`` (or ``llm_output["token_usage"]``)."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    stop: str | None = None
    for generations in getattr(response, "generations", None) or []:
        for generation in generations or []:
            message = getattr(generation, "message", None)
            usage = getattr(message, "usage_metadata", None)
            if isinstance(usage, Mapping):
                count = _count(usage.get("input_tokens"))
                if count is not None:
                    input_tokens = (input_tokens or 0) + count
                count = _count(usage.get("output_tokens"))
                if count is not None:
                    output_tokens = (output_tokens or 0) + count
            meta = getattr(message, "response_metadata", None)
            info = getattr(generation, "generation_info", None)
            for source in (meta, info):
                if not isinstance(source, Mapping):
                    continue
                for key in ("model_name", "model"):
                    if model is None and isinstance(source.get(key), str) and source[key]:
                        model = source[key]
                for key in ("stop_reason", "finish_reason"):
                    if stop is None and isinstance(source.get(key), str) and source[key]:
                        stop = source[key]
    output = getattr(response, "llm_output", None)
    if isinstance(output, Mapping):
        usage = output.get("token_usage") or output.get("usage")
        if input_tokens is None and output_tokens is None and isinstance(usage, Mapping):
            input_tokens = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
            output_tokens = _count(usage.get("completion_tokens", usage.get("output_tokens")))
        if model is None and isinstance(output.get("model_name"), str):
            model = output["model_name"]
    return input_tokens, output_tokens, model, stop


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _ms(started: float | None) -> float | None:
    return None if started is None else round((time.perf_counter() - started) * 1000, 3)


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text of its content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif (
                isinstance(block, Mapping)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                parts.append(block["text"])
        return "".join(parts)
    return "" if content is None else str(content)


def _last_ai_text(state: Any, lg: _LangGraph) -> str | None:
    messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    if not isinstance(messages, (list, tuple)):
        return None
    for message in reversed(messages):
        if isinstance(message, lg.BaseMessage) and message.type == "ai":
            return _text(message.content)
    return None


def _default_artifacts(state: Any, lg: _LangGraph) -> list[Artifact]:
    """(In a worker thread.) The last AI message's text and the state's JSON-safe parts."""
    artifacts: list[Artifact] = []
    answer = _last_ai_text(state, lg)
    if answer is not None:
        artifacts.append(FileArtifact(path=ANSWER_PATH, content=answer, content_type="text/markdown"))
    artifacts.append(StructuredArtifact(name=STATE_ARTIFACT, data=_state_data(state)))
    return artifacts


def _state_data(state: Any) -> dict[str, Any]:
    """The JSON-safe parts of a state: messages as dicts, objects JSON cannot hold left out."""
    data = _plain(state, keep=False)
    if isinstance(data, dict):
        return data
    return {} if data is _DROP else {"value": data}


def _plain(value: Any, *, keep: bool = True) -> Any:
    """``value`` as JSON can hold it: messages as dicts, pydantic models and dataclasses as their
    fields; what is not data becomes its ``repr`` (``keep``) or is left out. At most
    :data:`MAX_ITEMS` values and about :data:`MAX_BYTES` (then a ``<truncated: ...>`` note), at
    most :data:`MAX_DEPTH` levels; a value met again is converted once, a cycle is a note."""
    return _Plain(keep).convert(value, 0)


_CONTAINERS = (Mapping, list, tuple, set, frozenset)


class _Plain:
    """One conversion of :func:`_plain`: its budget, the values converted so far (by id, each
    kept alive meanwhile), and the containers being converted (for cycles)."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.items = 0
        self.bytes = 0
        self.done: dict[int, tuple[Any, Any, int, int]] = {}
        """id: (the value, what it became, the values and bytes that took)."""
        self.open: set[int] = set()

    def full(self) -> bool:
        return self.items >= MAX_ITEMS or self.bytes >= MAX_BYTES

    def note(self, more: int | None = None, what: str = "items") -> str:
        """The note saying the budget is spent (and how many ``what`` are left out)."""
        self.items = max(self.items, MAX_ITEMS)
        left = f"{more:,} more {what} left out, " if more else ""
        return f"<truncated: {left}past ATP's budget of {MAX_ITEMS:,} values or {MAX_BYTES // 1024:,} KiB>"

    def text(self, value: str) -> str:
        room = MAX_BYTES - self.bytes
        if len(value) + 2 <= room:
            self.bytes += len(value) + 2
            return value
        self.bytes = MAX_BYTES
        kept = max(room - 2, 0)
        return value[:kept] + self.note(len(value) - kept, "characters")

    def convert(self, value: Any, depth: int) -> Any:
        self.items += 1
        if value is None or isinstance(value, bool):
            self.bytes += 5
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int):
            self.bytes += 8
            return value if _INT_RANGE[0] <= value <= _INT_RANGE[1] else self.text(_repr(value))
        if isinstance(value, float):
            self.bytes += 12
            return value if math.isfinite(value) else str(value)
        key = id(value)
        if key in self.open:
            return f"<cycle: a {type(value).__name__} inside itself>"
        known = self.done.get(key)
        if known is not None:
            _, result, items, size = known
            if self.items + items > MAX_ITEMS or self.bytes + size > MAX_BYTES:
                return self.note()
            self.items += items
            self.bytes += size
            return result
        if depth >= MAX_DEPTH:
            if isinstance(value, _CONTAINERS):
                return f"<a {type(value).__name__} nested deeper than {MAX_DEPTH} levels>"
            return self.text(_repr(value)) if self.keep else _DROP
        items, size = self.items, self.bytes
        self.open.add(key)
        try:
            result = self.convert_object(value, depth + 1)
        finally:
            self.open.discard(key)
        self.done[key] = (value, result, self.items - items, self.bytes - size)
        return result

    def convert_object(self, value: Any, depth: int) -> Any:
        keep = self.keep
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for index, (key, item) in enumerate(value.items()):
                if self.full():
                    out["<truncated>"] = self.note(_len(value) - index, "entries")
                    break
                name = key if isinstance(key, str) else str(key)
                self.bytes += len(name) + 4
                item = self.convert(item, depth)
                if item is not _DROP:
                    out[name] = item
            return out
        if isinstance(value, (list, tuple, set, frozenset)):
            items: list[Any] = []
            for index, item in enumerate(value):
                if self.full():
                    items.append(self.note(len(value) - index))
                    break
                item = self.convert(item, depth)
                if item is not _DROP:
                    items.append(item)
            return items
        messages = sys.modules.get("langchain_core.messages")
        if messages is not None and isinstance(value, messages.BaseMessage):
            return self.message(value, depth)
        if isinstance(value, (bytes, bytearray)):
            return self.text(bytes(value[: MAX_BYTES + 1]).decode("utf-8", "replace"))
        if isinstance(value, (dt.datetime, dt.date, dt.time)):
            return self.text(value.isoformat())
        if isinstance(value, (uuid.UUID, PurePath, Decimal)):
            return self.text(str(value))
        if isinstance(value, enum.Enum):
            return self.convert(value.value, depth)
        if not isinstance(value, type):
            dump = getattr(value, "model_dump", None)
            if callable(dump):
                try:
                    dumped = dump(mode="json")
                except Exception:
                    pass
                else:
                    return self.convert(dumped, depth)
            if dataclasses.is_dataclass(value):
                fields: dict[str, Any] = {}
                for field in dataclasses.fields(value):
                    if self.full():
                        fields["<truncated>"] = self.note()
                        break
                    item = self.convert(getattr(value, field.name, None), depth)
                    if item is not _DROP:
                        fields[field.name] = item
                return fields
        return self.text(_repr(value)) if keep else _DROP

    def message(self, message: Any, depth: int) -> dict[str, Any]:
        """A LangChain message as a small dict: type, content, and what it has of name, tool
        calls, tool call id, status and token usage."""
        data: dict[str, Any] = {"type": message.type, "content": self.convert(message.content, depth)}
        name = getattr(message, "name", None)
        if name:
            data["name"] = self.convert(name, depth)
        calls = getattr(message, "tool_calls", None)
        if calls:
            data["tool_calls"] = [
                {
                    "name": call.get("name"),
                    "args": self.convert(call.get("args"), depth),
                    "id": call.get("id"),
                }
                for call in calls
                if isinstance(call, Mapping)
            ]
        for key in ("tool_call_id", "usage_metadata"):
            value = getattr(message, key, None)
            if value:
                data[key] = self.convert(value, depth)
        if getattr(message, "status", None) == "error":
            data["status"] = "error"
        return data


def _len(value: Any) -> int:
    try:
        return len(value)
    except Exception:
        return 0


def _a(value: object) -> str:
    """A value for a message: ``None``, or its type and a short repr."""
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return f"{type(value).__name__} {shorten(_repr(value), 120)}"


def _repr(value: object) -> str:
    try:
        return repr(value)
    except Exception as exc:
        return f"<{type(value).__name__} whose repr() raised {type(exc).__name__}>"
