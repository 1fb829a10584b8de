"""What happens in a LangGraph run, as ATP events (for the ``langgraph`` adapter,
:mod:`atp.adapters.langgraph`): the graph's ``tasks`` stream as ``state_change`` events, the
LangChain callbacks of its models and tools (:func:`handler_class`) as ``llm_request`` and
``tool_call`` events, delivered in order on ATP's event loop (:class:`GraphRun`), and the counts
its metrics are made of."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from atp.adapters.langgraph_state import plain, text
from atp.adapters.python import RunEnded, call_in_loop
from atp.core.errors import AgentError
from atp.core.protocol import LLMRequestPayload, Metrics, StateChangePayload, ToolCallPayload, make_event
from atp.core.trace import EventSink

START_NODE = "__start__"
END_NODE = "__end__"
_OWN_FAILURES = ("RunEnded(", "TraceLimitExceeded(", "StorageError(")
"""The reprs of the run's own failures, which the callback handler raises on purpose."""


class GraphRun:
    """One run: its events (delivered on ATP's event loop's thread, from whatever thread the
    graph's callbacks run in, which waits for them), the nodes, and the counts for the metrics."""

    def __init__(self, task_id: str, sink: EventSink, message_type: type[Any]) -> None:
        self.task_id = task_id
        self.sink = sink
        self.message_type = message_type
        """LangChain's ``BaseMessage``: what a tool may return."""
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

    def on_loop(self, deliver: Callable[..., Any], *args: Any) -> Any:
        """``deliver(*args)`` (ATP's) on ATP's event loop's thread: at once there, else handed
        to it and waited for (:func:`~atp.adapters.python.call_in_loop`)."""
        if threading.get_ident() == self.loop_thread:
            return deliver(*args)
        return call_in_loop(self.loop, lambda: deliver(*args))

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
        self.tools[run_id] = (str(name), plain(value, masker=self.sink.masker), time.perf_counter())

    def tool_ended(self, run_id: Any, output: Any) -> None:
        name, value, started = self.tools.pop(run_id, ("tool", None, None))
        status, error = "success", None
        content = output
        if isinstance(output, self.message_type):
            content = output.content
            if getattr(output, "status", None) == "error":
                status, error = "error", text(content)
        self.emit(
            ToolCallPayload(
                tool=name,
                input=value,
                output=plain(content, masker=self.sink.masker),
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


def quiet_own_failures() -> None:
    """Put :class:`_OwnFailures` on LangChain's callback manager's logger (once)."""
    logger = logging.getLogger("langchain_core.callbacks.manager")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


def handler_class(base: type[Any]) -> type[Any]:
    """The callback handler class (LangChain's ``BaseCallbackHandler`` is ``base``): one
    instance per run, in the run's config, so concurrent runs keep their events apart."""

    class Handler(base):  # type: ignore[misc]
        run_inline = True  # called where the model or tool runs, not in another thread
        raise_error = True  # the run's failure (RunEnded, a flood) stops the graph

        def __init__(self, run: GraphRun) -> None:
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
