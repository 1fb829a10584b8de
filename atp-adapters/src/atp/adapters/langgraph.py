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

import inspect
import math
import re
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import anyio

from atp.adapters.langgraph_driver import NOTHING, WORKER_THREADS, GraphDriver
from atp.adapters.langgraph_events import END_NODE, START_NODE, GraphRun, handler_class, quiet_own_failures
from atp.adapters.langgraph_settings import GraphConfig, LangGraphSettings, PositiveInt
from atp.adapters.langgraph_state import (
    ANSWER_PATH,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_ITEMS,
    STATE_ARTIFACT,
    default_artifacts,
    mapped_artifacts,
    state_data,
)
from atp.adapters.python import PythonAdapter, RunEnded, attribute_importer
from atp.core.adapter import Adapter
from atp.core.errors import AdapterError, AgentError, AtpError
from atp.core.isolation import AgentRaised, await_agent, call_agent
from atp.core.plugins import require
from atp.core.protocol import (
    PROTOCOL_VERSION,
    Artifact,
    ATPRequest,
    ATPResponse,
    ErrorPayload,
    StructuredArtifact,
    decode_request,
    encode,
)
from atp.core.secrets import Masker
from atp.core.text import describe
from atp.core.trace import EventSink

__all__ = [
    "ANSWER_PATH",
    "END_NODE",
    "FEATURE",
    "GRACE_SECONDS",
    "INSTALL",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "START_NODE",
    "STATE_ARTIFACT",
    "WORKER_THREADS",
    "GraphConfig",
    "LangGraphAdapter",
    "LangGraphSettings",
    "PositiveInt",
]

INSTALL = "atp-adapters[langgraph]"
FEATURE = "the langgraph adapter"
GRACE_SECONDS = 0.25
"""How long a cancelled run waits for its graph to wind down before abandoning its thread."""
_RECURSION_LIMIT = re.compile(r"Recursion limit of (\d+) reached")
_T = TypeVar("_T")


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
        self.Handler = handler_class(BaseCallbackHandler)


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
        self._runs: set[GraphRun] = set()
        self._aborted = False
        self._limiter: anyio.CapacityLimiter | None = None

    async def start(self) -> None:
        """Import LangGraph, the module and the mappers, and make the graph, once (in a worker
        thread: importing LangGraph takes a second). AdapterError saying what is wrong."""
        self.cwd = Path.cwd()
        self._limiter = anyio.CapacityLimiter(math.inf)  # --parallel is the bound
        quiet_own_failures()
        try:
            lg, found = await anyio.to_thread.run_sync(call_agent, self._load, abandon_on_cancel=True)
        except AgentRaised as raised:  # (the agent's code raised what no check expected)
            raise self._failed_at_start(raised.raised) from None
        if call_agent(inspect.isawaitable, found):  # an async factory
            try:
                found = await await_agent(found)
            except AgentRaised as raised:
                raise self._factory_failed(raised.raised) from None
            try:
                found = await anyio.to_thread.run_sync(
                    call_agent, self._as_graph, lg, found, True, abandon_on_cancel=True
                )
            except AgentRaised as raised:
                raise self._failed_at_start(raised.raised) from None
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
        run = GraphRun(request.task_id, sink, lg.BaseMessage)
        self._runs.add(run)
        try:
            return await self._execute(request, run, lg)
        finally:
            run.closed = True
            self._runs.discard(run)

    # --- a run ----------------------------------------------------------------------------------

    async def _off_loop(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args)`` in a worker thread (abandoned if the run is cancelled)."""
        return await anyio.to_thread.run_sync(function, *args, abandon_on_cancel=True, limiter=self._limiter)

    async def _execute(self, request: ATPRequest, run: GraphRun, lg: _LangGraph) -> ATPResponse:
        started = time.perf_counter()
        own = decode_request(encode(request))  # the graph's copy: what it changes, ATP never sees
        graph_input = await self._graph_input(own, lg)
        config = self.settings.config.runnable_config()
        config["configurable"].setdefault("thread_id", request.task_id)
        config["callbacks"] = [lg.Handler(run)]
        driver = GraphDriver(self.graph, graph_input, config, run)
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
        artifacts = await self._artifacts(final, lg, run.sink.masker)
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
                value = call_agent(mapper, request)
                if call_agent(inspect.isawaitable, value):
                    value = await await_agent(value)
            except AgentRaised as raised:
                raise self._mapper_failed("input_mapper", raised.raised) from None
            return value
        key = self.settings.input_key
        text = request.task.description
        data: dict[str, Any] = {key: [lg.HumanMessage(content=text)] if key == "messages" else text}
        for name, value in (request.task.input_data or {}).items():
            data.setdefault(name, value)
        return data

    async def _failed(
        self,
        request: ATPRequest,
        run: GraphRun,
        exc: BaseException,
        final: Any,
        started: float,
        lg: _LangGraph,
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
        if final is not NOTHING:
            artifacts.append(
                StructuredArtifact(
                    name=STATE_ARTIFACT, data=await self._off_loop(state_data, final, run.sink.masker)
                )
            )
        return ATPResponse(
            version=PROTOCOL_VERSION,
            task_id=request.task_id,
            status="failed",
            artifacts=artifacts,
            metrics=run.metrics(time.perf_counter() - started),
            error=message,
        )

    async def _artifacts(self, final: Any, lg: _LangGraph, masker: Masker | None) -> list[Artifact]:
        """The run's artifacts, built in a worker thread (a large state takes time); ``masker``
        (the run's) masks a text before the state's budget cuts it."""
        state = {} if final is NOTHING else final
        mapper = self.output_mapper
        if mapper is None:
            return await self._off_loop(default_artifacts, state, lg.BaseMessage, masker)
        try:
            value = await self._off_loop(call_agent, mapper, state)
            if call_agent(inspect.isawaitable, value):
                value = await await_agent(value)
        except AgentRaised as raised:
            raise self._mapper_failed("output_mapper", raised.raised) from None
        return await self._off_loop(mapped_artifacts, value, self.settings.output_mapper, masker)

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
                    f"agent {self.name!r}: {setting} {spec!r} is {_a(function, self.masker)}, not a function",
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
                return call_agent(found.compile)
            except AgentRaised as raised:
                exc = raised.raised
                raise AdapterError(
                    f"agent {self.name!r}: compiling the StateGraph {self.spec} raised "
                    f"{type(exc).__name__}: {exc}{self.importer.where(exc.__traceback__)}",
                    retryable=False,
                ) from exc
        if made:
            raise AdapterError(
                f"agent {self.name!r}: the graph factory {self.spec} returned {_a(found, self.masker)}, not a "
                f"LangGraph graph (return builder.compile())",
                retryable=False,
            )
        if isinstance(found, type) or not callable(found):
            raise AdapterError(
                f"agent {self.name!r}: {self.spec} is {_a(found, self.masker)}, not a LangGraph graph: name a "
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
            return call_agent(factory, *args)
        except AgentRaised as raised:
            raise self._factory_failed(raised.raised) from None

    def _failed_at_start(self, exc: BaseException) -> AtpError:
        """What the agent's code raised while the graph was loaded, where no check expected it."""
        if isinstance(exc, AtpError):
            return exc
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return AdapterError(
            f"agent {self.name!r}: loading {self.spec} raised {what}{self.importer.where(exc.__traceback__)}",
            retryable=False,
        )

    def _factory_failed(self, exc: BaseException) -> AdapterError:
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
            schema = call_agent(self.graph.get_input_jsonschema)
        except AgentRaised:
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


def _a(value: object, masker: Masker | None) -> str:
    """A value for a message: ``None``, or its type and a short repr, masked (a class by its
    name)."""
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return describe(value, masker)
