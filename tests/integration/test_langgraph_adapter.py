"""The ``langgraph`` adapter (atp.adapters.langgraph) running real LangGraph graphs in-process:
the graphs of tests/agents/langgraph_agent.py, whose chat model is LangChain's scripted fake
(no API key) and whose tools do real work."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

pytest.importorskip("langgraph", reason="the langgraph adapter needs atp-adapters[langgraph]")

from atp.adapters.langgraph import (
    MAX_BYTES,
    MAX_ITEMS,
    WORKER_THREADS,
    LangGraphAdapter,
    LangGraphSettings,
)
from atp.adapters.langgraph_state import plain as _plain
from atp.adapters.python import RunEnded, call_in_loop
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, MissingDependencyError, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    ErrorEvent,
    Event,
    FileArtifact,
    LLMRequestEvent,
    StateChangeEvent,
    StructuredArtifact,
    Task,
    ToolCallEvent,
)
from atp.core.suite import load_suite
from atp.core.trace import TraceLimitExceeded
from tests.agents import langgraph_agent as agents
from tests.conftest import ROOT, write
from tests.facts import says
from tests.network import run_agent_suite, runs_by_test

MODULE = "tests.agents.langgraph_agent"
AGENT_FILE = "tests/agents/langgraph_agent.py"


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def restore_sys_path() -> Iterator[None]:
    path = list(sys.path)
    yield
    sys.path[:] = path


class Sink:
    """An EventSink keeping the events, the log lines and the warnings; ``fail_after`` events
    it refuses the next one as a full trace would."""

    masker = None

    def __init__(self, fail_after: int | None = None) -> None:
        self.got: list[Event] = []
        self.lines: list[str] = []
        self.warnings: list[str] = []
        self.threads: set[int] = set()
        self.fail_after = fail_after

    def event(self, event: Event, raw: bytes | None = None) -> None:
        if self.fail_after is not None and len(self.got) >= self.fail_after:
            raise TraceLimitExceeded(f"agent flooded ATP with events: more than {self.fail_after} in one run")
        self.got.append(event)
        self.threads.add(threading.get_ident())

    def events(self, events: Any, raw: bytes | None = None) -> None:
        for event in events:
            self.event(event)

    def log(self, line: str) -> None:
        self.lines.append(line)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def of(self, cls: type[Any]) -> list[Any]:
        return [event.payload for event in self.got if isinstance(event, cls)]


def adapter(graph: str = "graph", **settings: Any) -> LangGraphAdapter:
    return LangGraphAdapter(
        msgspec.convert({"module": MODULE, "graph": graph, **settings}, LangGraphSettings),
        name="my-graph",
        base_dir=ROOT,
    )


def request(description: str = "add 2 and 3, multiply 4 and 5", **task: Any) -> ATPRequest:
    return ATPRequest(
        version=PROTOCOL_VERSION, task_id=str(uuid.uuid4()), task=Task(description=description, **task)
    )


def execute(
    target: LangGraphAdapter, req: ATPRequest | None = None, sink: Sink | None = None
) -> tuple[ATPResponse, Sink]:
    sink = sink or Sink()

    async def go() -> ATPResponse:
        await target.start()
        return await target.execute(req or request(), sink)

    return anyio.run(go), sink


def start_error(graph: str = "graph", **settings: Any) -> str:
    with pytest.raises(AdapterError) as caught:
        anyio.run(adapter(graph, **settings).start)
    return str(caught.value)


def artifacts(response: ATPResponse) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for artifact in response.artifacts:
        if isinstance(artifact, FileArtifact):
            found[artifact.path] = artifact.content
        elif isinstance(artifact, StructuredArtifact):
            found[artifact.name] = artifact.data
    return found


def line_of(text: str) -> int:
    return (ROOT / AGENT_FILE).read_text().splitlines().index(text) + 1


# --- events, metrics, artifacts --------------------------------------------------------------


@pytest.mark.parametrize("graph", ["graph", "async_graph", "builder", "make_graph", "make_graph_async"])
def test_a_react_graph_becomes_state_changes_tool_calls_and_llm_requests(graph: str) -> None:
    response, sink = execute(adapter(graph))
    assert response.status == "completed" and response.error is None
    assert [(event.event_type, getattr(event.payload, "to_state", None)) for event in sink.got] == [
        ("state_change", "agent"),
        ("llm_request", None),
        ("state_change", "tools"),
        ("tool_call", None),  # the two tools run at the same time: in either order
        ("tool_call", None),
        ("state_change", "agent"),
        ("llm_request", None),
        ("state_change", "__end__"),
    ]
    assert [event.sequence for event in sink.got] == list(range(8))
    assert {event.task_id for event in sink.got} == {response.task_id}
    changes = [(change.from_state, change.to_state) for change in sink.of(StateChangeEvent)]
    assert changes == [("__start__", "agent"), ("agent", "tools"), ("tools", "agent"), ("agent", "__end__")]
    add, multiply = sorted(sink.of(ToolCallEvent), key=lambda call: call.tool)
    assert (add.tool, add.input, add.output, add.status, add.error) == (
        "add",
        {"a": 2.0, "b": 3.0},
        "5.0",
        "success",
        None,
    )
    assert (multiply.input, multiply.output, multiply.status) == ({"a": 4.0, "b": 5.0}, "20.0", "success")
    assert add.duration_ms is not None and 0 <= add.duration_ms < 5000
    first, last = sink.of(LLMRequestEvent)
    assert (first.model, first.input_tokens, first.output_tokens) == ("scripted-model", 12, 8)
    assert (last.model, last.input_tokens, last.output_tokens) == ("scripted-model", 30, 10)
    assert first.duration_ms is not None and first.duration_ms >= 0
    metrics = response.metrics
    assert (metrics.total_steps, metrics.tool_calls, metrics.llm_calls) == (3, 2, 2)
    assert (metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (42, 18, 60)
    assert metrics.wall_time_seconds is not None and 0 < metrics.wall_time_seconds < 30
    found = artifacts(response)
    assert found["answer.md"] == "The answer is 20.0.\n\n- add: 5.0\n- multiply: 20.0\n"
    messages = found["state"]["messages"]
    assert [message["type"] for message in messages] == ["human", "ai", "tool", "tool", "ai"]
    assert messages[0]["content"] == "add 2 and 3, multiply 4 and 5"
    assert messages[1]["tool_calls"][0] == {"name": "add", "args": {"a": 2.0, "b": 3.0}, "id": "call_0"}
    assert messages[2] == {"type": "tool", "content": "5.0", "name": "add", "tool_call_id": "call_0"}
    assert sink.warnings == []


def test_a_factory_is_called_once_per_atp_test_with_the_config_when_it_takes_it() -> None:
    before = len(agents.FACTORY_CALLS)
    target = adapter(
        "make_graph_with_config", config={"recursion_limit": 30, "configurable": {"model": "small"}}
    )

    async def go() -> list[ATPResponse]:
        await target.start()
        return [await target.execute(request(), Sink()) for _ in range(2)]

    responses = anyio.run(go)
    assert [response.status for response in responses] == ["completed", "completed"]
    assert agents.FACTORY_CALLS[before:] == [{"configurable": {"model": "small"}, "recursion_limit": 30}]


def test_a_file_a_tool_reads_is_its_output(tmp_path: Path) -> None:
    notes = write(tmp_path / "notes.txt", "the meeting is at noon\n")
    response, sink = execute(adapter(), request(f"read {notes}"))
    (call,) = sink.of(ToolCallEvent)
    assert (call.tool, call.input, call.output, call.status) == (
        "read_file",
        {"path": str(notes)},
        "the meeting is at noon\n",
        "success",
    )
    assert "- read_file: the meeting is at noon" in artifacts(response)["answer.md"]


def test_a_tool_error_the_graph_handles_is_a_failed_tool_call_and_the_run_goes_on() -> None:
    response, sink = execute(adapter(), request("divide 1 by 0"))
    assert response.status == "completed"
    (call,) = sink.of(ToolCallEvent)
    assert (call.tool, call.input, call.status, call.error) == (
        "divide",
        {"a": 1.0, "b": 0.0},
        "error",
        "ZeroDivisionError: float division by zero",
    )
    assert call.output is None and sink.of(ErrorEvent) == []
    assert artifacts(response)["answer.md"].startswith("Some tools failed.")
    assert artifacts(response)["state"]["messages"][2]["status"] == "error"


def test_a_graph_that_raises_fails_its_run_with_an_error_event_and_the_traceback_in_the_log() -> None:
    response, sink = execute(adapter("raising_graph"), request("add 1 and 1"))
    line = line_of('    raise ValueError("the model said no")')
    message = f"the graph raised ValueError: the model said no in node 'crash' (at {AGENT_FILE}:{line})"
    assert response.status == "failed" and response.error == message
    assert sink.got[-1].event_type == "error"
    (error,) = sink.of(ErrorEvent)
    assert (error.error_type, error.message, error.recoverable) == ("ValueError", message, False)
    assert [change.to_state for change in sink.of(StateChangeEvent)] == ["agent", "crash"]  # no __end__
    assert (response.metrics.total_steps, response.metrics.llm_calls, response.metrics.input_tokens) == (
        2,
        1,
        12,
    )
    assert [message["type"] for message in artifacts(response)["state"]["messages"]] == ["human", "ai"]
    assert sink.lines[0] == "Traceback (most recent call last):"
    assert sink.lines[-2:] == [
        "ValueError: the model said no",
        "During task with name 'crash' and id " + sink.lines[-1].rsplit("id ", 1)[1],
    ]


def test_a_tool_error_the_graph_does_not_handle_fails_the_run_naming_the_tools_node() -> None:
    response, sink = execute(adapter("strict_tools_graph"), request("divide 6 by 0"))
    line = line_of("    return a / b  # b == 0 raises ZeroDivisionError")
    assert response.status == "failed"
    says(response.error, "ZeroDivisionError: float division by zero", "node 'tools'", f"{AGENT_FILE}:{line}")
    assert [event.event_type for event in sink.got][-2:] == ["tool_call", "error"]
    assert sink.of(ToolCallEvent)[0].status == "error"


def test_the_recursion_limit_is_named() -> None:
    response, sink = execute(adapter("looping_graph", config={"recursion_limit": 6}), request("loop"))
    message = (
        "the graph hit its recursion limit of 6 steps without reaching its end (GraphRecursionError); "
        "set config.recursion_limit higher if it needs more steps"
    )
    assert response.status == "failed" and response.error == message
    assert [change.to_state for change in sink.of(StateChangeEvent)] == ["ping", "pong"] * 3
    (error,) = sink.of(ErrorEvent)
    assert (error.error_type, error.message) == ("GraphRecursionError", message)
    assert response.metrics.total_steps == 6


def test_a_graph_stopping_at_an_interrupt_completes_with_a_warning() -> None:
    response, sink = execute(adapter("interrupting_graph"), request("hello"))
    assert response.status == "completed"
    assert sink.warnings == [
        "the graph stopped at an interrupt in node 'review': ATP does not resume a graph; the run "
        "ends with the state at the interrupt"
    ]
    assert [change.to_state for change in sink.of(StateChangeEvent)] == ["agent", "review"]  # no __end__
    assert artifacts(response)["answer.md"] == "I can only add, multiply, divide and read files."


def test_a_checkpointer_keeps_runs_apart_by_their_task_id() -> None:
    target = adapter("memory_graph")

    async def go() -> list[ATPResponse]:
        await target.start()
        return [await target.execute(request(f"add {n} and 1"), Sink()) for n in (1, 2)]

    first, second = anyio.run(go)
    assert len(artifacts(first)["state"]["messages"]) == len(artifacts(second)["state"]["messages"]) == 4
    assert artifacts(second)["answer.md"].startswith("The answer is 3.0.")


# --- time limits and parallel runs -----------------------------------------------------------


def test_the_time_limit_cancels_the_graph_and_keeps_the_events_so_far(
    tmp_path: Path, plugins: Plugins
) -> None:
    settings = f"    module: {MODULE}\n    graph: slow_graph\n    path: [{ROOT}]\n"
    tests = """
  - id: slow
    task: {description: "add 2 and 2 slowly"}
    constraints: {timeout_seconds: 1}
"""
    results, _ = run_agent_suite("langgraph", tmp_path, plugins, settings, tests)
    run = runs_by_test(results)["slow"]
    assert run.status == "timeout"
    says(run.error, "timed out after 1 s", "stopped")
    assert "add 2 and 2 slowly" in agents.CANCELLED  # the async node was cancelled, not left running
    assert run.trace.llm_calls == 1 and run.trace.by_type["state_change"] == 2  # agent, then sleep
    assert run.metrics.llm_calls == 1 and run.metrics.input_tokens == 12
    assert any("node 'sleep' was running" in warning for warning in run.warnings)


def test_a_plain_def_node_outliving_its_run_stops_at_its_next_model_call() -> None:
    sink = Sink()
    target = adapter("stuck_graph")

    async def go() -> None:
        await target.start()
        with anyio.move_on_after(0.5):
            await target.execute(request("hang"), sink)

    agents.RELEASE.clear()
    anyio.run(go)
    assert [warning.split(":")[0] for warning in sink.warnings] == [
        "the run ended while node 'stuck' was running"
    ]
    agents.RELEASE.set()
    for _ in range(200):
        if agents.LATE:
            break
        threading.Event().wait(0.05)
    assert len(agents.LATE) == 1 and isinstance(agents.LATE[0], RunEnded)
    assert [event.event_type for event in sink.got] == ["state_change"]  # nothing after the run's end


def test_runs_in_parallel_keep_their_events_apart() -> None:
    target = adapter("meeting_graph")
    tasks = {"add 2 and 3": "add", "multiply 4 and 5": "multiply"}
    sinks = {description: Sink() for description in tasks}
    requests = {description: request(description) for description in tasks}
    responses: dict[str, ATPResponse] = {}

    async def one(description: str) -> None:
        responses[description] = await target.execute(requests[description], sinks[description])

    async def go() -> None:
        await target.start()
        async with anyio.create_task_group() as group:
            for description in tasks:
                group.start_soon(one, description)

    anyio.run(go)  # the node 'meet' returns only once both runs reached it
    for description, tool in tasks.items():
        sink, response = sinks[description], responses[description]
        assert response.status == "completed"
        assert {event.task_id for event in sink.got} == {requests[description].task_id}
        assert [call.tool for call in sink.of(ToolCallEvent)] == [tool]
        assert [event.sequence for event in sink.got] == list(range(len(sink.got)))
        assert (response.metrics.tool_calls, response.metrics.llm_calls, response.metrics.total_steps) == (
            1,
            2,
            4,
        )


def test_a_flood_of_events_fails_the_run() -> None:
    with pytest.raises(AgentError) as raised:
        execute(adapter(), sink=Sink(fail_after=2))
    says(str(raised.value), "flooded", "events", "more than 2")


# --- input and output ------------------------------------------------------------------------


def test_input_key_puts_the_description_and_input_data_in_the_state() -> None:
    response, sink = execute(
        adapter("question_graph", input_key="question"), request("the sum", input_data={"numbers": [1, 2, 3]})
    )
    assert response.status == "completed"
    found = artifacts(response)
    assert "answer.md" not in found  # no messages: no AI message to take the answer from
    assert found["state"] == {
        "question": "the sum",
        "numbers": [1, 2, 3],
        "answer": "the sum: 6",
    }  # the lock left out
    assert [event.event_type for event in sink.got] == ["state_change", "tool_call", "state_change"]
    assert (response.metrics.tool_calls, response.metrics.llm_calls, response.metrics.input_tokens) == (
        1,
        0,
        None,
    )


@pytest.mark.parametrize("mapper", ["to_input", "to_input_async"])
def test_an_input_mapper_builds_the_input_and_an_output_mapper_the_artifacts(mapper: str) -> None:
    response, _ = execute(
        adapter("question_graph", input_mapper=f"{MODULE}:{mapper}", output_mapper=f"{MODULE}:to_artifacts"),
        request("total", input_data={"numbers": [2, 5]}),
    )
    assert response.status == "completed"
    assert response.artifacts == [
        FileArtifact(path="answer.txt", content="total: 7"),
        StructuredArtifact(name="numbers", data={"items": [2, 5]}),
        StructuredArtifact(name="count", data={"value": 2}),
    ]


def test_an_output_mapper_may_return_a_list_of_artifacts() -> None:
    response, _ = execute(
        adapter("question_graph", input_key="question", output_mapper=f"{MODULE}:to_artifact_list"),
        request("nothing"),
    )
    assert response.artifacts == [StructuredArtifact(name="result", data={"answer": "nothing: 0"})]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"output_mapper": f"{MODULE}:to_garbage"},
            f"the output_mapper {MODULE}:to_garbage returned int, not artifacts: return a list of artifacts, "
            "or a dict of name: text or data",
        ),
        (
            {"output_mapper": f"{MODULE}:to_bad_artifacts"},
            f"the output_mapper {MODULE}:to_bad_artifacts returned what are not valid ATP artifacts "
            "(Object missing required field `path` - at `$[0]`)",
        ),
        (
            {"input_mapper": f"{MODULE}:mapper_raises"},
            f"the input_mapper {MODULE}:mapper_raises raised KeyError: 'numbers' (at {AGENT_FILE}:LINE)",
        ),
        (
            {"output_mapper": f"{MODULE}:mapper_raises"},
            f"the output_mapper {MODULE}:mapper_raises raised KeyError: 'numbers' (at {AGENT_FILE}:LINE)",
        ),
    ],
)
def test_a_mapper_that_fails_fails_the_run(settings: dict[str, Any], message: str) -> None:
    message = message.replace("LINE", str(line_of('    raise KeyError("numbers")')))
    with pytest.raises(AgentError) as caught:
        execute(adapter("question_graph", input_key="question", **settings), request("x"))
    assert str(caught.value) == message


# --- settings and start errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"module": "agents/my_agent.py"},
            "'module' names a module, not a file: 'agents/my_agent.py' is a path. "
            "Write the module's name (my_agent) and put its folder in 'path'",
        ),
        (
            {"module": "my_agent:graph"},
            "'module' is the module's name alone, not 'my_agent:graph': write "
            "module: my_agent and graph: graph",
        ),
        ({"module": "my agent"}, "'module' 'my agent' is not a module name"),
        ({"graph": "graph()"}, "'graph' 'graph()' is not an attribute name"),
        ({"input_mapper": "my_agent.to_input"}, "'input_mapper' must be 'module:attribute'"),
        ({"output_mapper": "my_agent:"}, "'output_mapper' 'my_agent:' has no attribute after the ':'"),
        ({"input_key": ""}, "'input_key' is empty"),
        ({"path": [""]}, "'path[0]' is empty"),
        ({"config": {"recursion_limit": 0}}, "Expected `int` >= 1 - at `$.config.recursion_limit`"),
        ({"config": {"callbacks": []}}, "Object contains unknown field `callbacks` - at `$.config`"),
        ({"graph_name": "g"}, "Object contains unknown field `graph_name`"),
    ],
)
def test_settings_are_checked_when_the_suite_loads(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert({"module": "my_agent", **settings}, LangGraphSettings)
    assert message in str(caught.value)


def test_a_settings_error_in_a_suite_is_located(tmp_path: Path, plugins: Plugins) -> None:
    suite = load_suite(
        write(
            tmp_path / "suite.yaml",
            """
        test_suite: s
        agents:
          - name: g
            type: langgraph
            module: my_agent.py
        tests:
          - id: t
            task: {description: x}
        """,
        ),
        plugins.evaluators,
    )
    with pytest.raises(SuiteError) as caught:
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["g"], plugins.adapters)
    assert f"{tmp_path / 'suite.yaml'}:3: at agents[0]: 'module' names a module, not a file" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("graph", "settings", "message"),
    [
        (
            "graph",
            {"module": "no_such_graph_module"},
            "agent 'my-graph': cannot import 'no_such_graph_module:graph': no module named 'no_such_graph_module'",
        ),
        (
            "grahp",
            {},
            f"agent 'my-graph': cannot import '{MODULE}:grahp': module '{MODULE}' ({AGENT_FILE}) has "
            "no attribute 'grahp'; did you mean 'graph'?",
        ),
        (
            "NOT_A_GRAPH",
            {},
            f"agent 'my-graph': {MODULE}:NOT_A_GRAPH is int 42, not a LangGraph graph: name a "
            "compiled graph (builder.compile()) or a function that returns one",
        ),
        ("Meeting", {}, f"agent 'my-graph': {MODULE}:Meeting is the class Meeting, not a LangGraph graph"),
        (
            "make_nothing",
            {},
            f"agent 'my-graph': the graph factory {MODULE}:make_nothing returned dict "
            "{'not': 'a graph'}, not a LangGraph graph (return builder.compile())",
        ),
        (
            "make_broken",
            {},
            f"agent 'my-graph': the graph factory {MODULE}:make_broken raised RuntimeError: no "
            f"model configured (at {AGENT_FILE}:LINE)",
        ),
        (
            "question_graph",
            {},
            f"agent 'my-graph': the input of graph {MODULE}:question_graph has no key "
            "'messages' (its keys: question, numbers, answer, opened); set 'input_key' to the "
            "key the task's description goes to, or write an 'input_mapper'",
        ),
        (
            "graph",
            {"output_mapper": f"{MODULE}:to_nothing"},
            f"agent 'my-graph': cannot import '{MODULE}:to_nothing': module '{MODULE}' ({AGENT_FILE}) has no "
            "attribute 'to_nothing'",
        ),
        (
            "graph",
            {"input_mapper": f"{MODULE}:NOT_A_GRAPH"},
            f"agent 'my-graph': input_mapper '{MODULE}:NOT_A_GRAPH' is int 42, not a function",
        ),
        (
            "graph",
            {"path": ["no-such-folder"]},
            f"agent 'my-graph': its 'path' folder {ROOT / 'no-such-folder'} does not exist",
        ),
    ],
)
def test_what_keeps_a_graph_from_starting_is_an_adapter_error(
    graph: str, settings: dict[str, Any], message: str
) -> None:
    message = message.replace("LINE", str(line_of('    raise RuntimeError("no model configured")')))
    assert start_error(graph, **settings).startswith(message)


def test_without_langgraph_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph", None)
    with pytest.raises(MissingDependencyError) as caught:
        anyio.run(adapter().start)
    assert str(caught.value).startswith(
        "the langgraph adapter needs the Python package 'langgraph', which is not installed"
    )
    assert str(caught.value).endswith("install it with: pip install 'atp-adapters[langgraph]'")


def test_the_adapter_module_does_not_import_langgraph() -> None:
    code = "import sys, atp.adapters.plugin, atp.adapters.langgraph; print(sorted(m for m in sys.modules if m.startswith(('langgraph', 'langchain'))))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_the_plugin_registers_the_langgraph_type(plugins: Plugins) -> None:
    assert plugins.adapters["langgraph"] is LangGraphAdapter


# --- hostile graphs --------------------------------------------------------------------------


def test_events_from_a_thread_wait_for_the_event_loop_so_a_flood_cannot_hold_up_the_timeout() -> None:
    agents.FLOOD_CALLS.clear()
    sink = Sink()
    target = adapter("flood_graph")
    ticks: list[float] = []

    async def ticker() -> None:  # the event loop stays free while the node floods it
        while True:
            ticks.append(time.monotonic())
            await anyio.sleep(0.05)

    async def go() -> float:
        await target.start()
        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            started = time.monotonic()
            with anyio.move_on_after(1):
                await target.execute(request("flood"), sink)
            group.cancel_scope.cancel()
        return time.monotonic() - started

    gc.collect()
    gc.disable()  # what is measured is the flood's hold on the loop, not a collection of the test process's heap
    try:
        elapsed = anyio.run(go)
    finally:
        gc.enable()
    assert elapsed < 1.6  # (without waiting, the loop's queue holds hundreds of thousands of events)
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.5
    for _ in range(100):
        if agents.FLOOD_CALLS:
            break
        threading.Event().wait(0.05)
    assert agents.FLOOD_CALLS and agents.FLOOD_CALLS[0] < 200_000  # the node stopped: RunEnded
    assert isinstance(agents.FLOOD_STOPPED[-1], RunEnded)
    calls = sink.of(ToolCallEvent)
    assert calls and [call.input["a"] for call in calls] == list(range(len(calls)))  # in order
    assert [event.sequence for event in sink.got] == list(range(len(sink.got)))


def test_call_in_loop_waits_for_the_call_and_raises_what_it_raised() -> None:
    seen: list[int] = []

    def fails() -> None:
        raise ValueError("on the loop")

    async def go() -> tuple[Any, BaseException | None]:
        loop = asyncio.get_running_loop()

        def in_thread() -> tuple[Any, BaseException | None]:
            result = call_in_loop(loop, lambda: seen.append(threading.get_ident()) or 7)
            try:
                call_in_loop(loop, fails)
            except ValueError as exc:
                return result, exc
            return result, None

        return await anyio.to_thread.run_sync(in_thread)

    result, error = anyio.run(go)
    assert result == 7 and str(error) == "on the loop" and seen == [threading.get_ident()]
    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(RunEnded, match="ATP has finished"):
        call_in_loop(loop, lambda: None)


def test_a_state_of_shared_values_a_cycle_and_millions_of_items_is_cut_to_the_budget() -> None:
    started = time.monotonic()
    response, _ = execute(adapter("shared_state_graph"), request("state"))
    assert time.monotonic() - started < 5
    assert response.status == "completed"
    data = artifacts(response)["state"]["data"]
    assert len(msgspec.json.encode(data)) < 2 * MAX_BYTES
    text = msgspec.json.encode(data).decode()
    assert "<truncated: " in text
    assert data["cycle"] == ["<cycle: a list inside itself>"]


def test_plain_converts_a_shared_value_once_and_keeps_to_its_budget() -> None:
    shared: list[Any] = [0]
    for _ in range(60):
        shared = [shared, shared]
    started = time.monotonic()
    out = _plain({"shared": shared, "text": "x" * (2 * MAX_BYTES), "many": dict.fromkeys(range(100_000), 1)})
    assert time.monotonic() - started < 2
    encoded = msgspec.json.encode(out)
    assert len(encoded) < MAX_BYTES + 100_000
    assert b"<truncated: " in encoded
    small = [1, 2]
    assert _plain({"a": small, "b": small, "c": [small, small]}) == {
        "a": [1, 2],
        "b": [1, 2],
        "c": [[1, 2], [1, 2]],
    }
    assert re.fullmatch(
        r"<truncated: \d more items left out, past ATP's budget .*>",
        _plain([list(range(MAX_ITEMS + 5))])[0][-1],
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # LangGraph's coroutines
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
@pytest.mark.parametrize(
    ("graph", "error", "error_type"),
    [
        ("exiting_graph", "the graph called sys.exit(3)", "SystemExit"),
        ("async_exiting_graph", "the graph called sys.exit(4)", "SystemExit"),
        ("generator_exit_graph", "the graph raised GeneratorExit: closing", "GeneratorExit"),
        (
            "keyboard_interrupt_graph",
            "the graph raised KeyboardInterrupt: in an async node",
            "KeyboardInterrupt",
        ),
    ],
)
def test_sys_exit_generator_exit_and_keyboard_interrupt_in_a_node_fail_the_run_only(
    graph: str, error: str, error_type: str
) -> None:
    target = adapter(graph)
    sinks = [Sink(), Sink()]

    async def go() -> list[ATPResponse]:
        await target.start()
        return [await target.execute(request("x"), sink) for sink in sinks]

    for response, sink in zip(anyio.run(go), sinks, strict=True):
        assert response.status == "failed" and response.error is not None
        assert response.error.startswith(error + " (at " + AGENT_FILE)
        assert [payload.error_type for payload in sink.of(ErrorEvent)] == [error_type]
    gc.collect()  # (the coroutines a GeneratorExit went through say they ignored it when collected)


def test_an_async_node_blocking_in_sync_code_times_out_without_holding_up_atp() -> None:
    agents.UNBLOCK.clear()
    sink = Sink()
    target = adapter("async_blocking_graph")

    async def go() -> float:
        await target.start()
        started = time.monotonic()
        with anyio.move_on_after(0.5):
            await target.execute(request("block"), sink)
        return time.monotonic() - started

    try:
        assert anyio.run(go) < 1.2  # the time limit and a short grace
    finally:
        agents.UNBLOCK.set()
    assert [warning.split(":")[0] for warning in sink.warnings] == [
        "the run ended while node 'node' was running"
    ]


def test_abandoned_plain_def_nodes_do_not_use_up_the_threads_of_later_runs() -> None:
    agents.UNBLOCK.clear()
    target = adapter("blocking_graph")
    done: list[str] = []

    async def blocked() -> None:
        with anyio.move_on_after(0.3):
            await target.execute(request("block"), Sink())

    async def go() -> ATPResponse:
        await target.start()
        async with anyio.create_task_group() as group:
            for _ in range(WORKER_THREADS + 6):
                group.start_soon(blocked)
        done.append("blocked")
        with anyio.fail_after(10):
            return await target.execute(request("fine"), Sink())

    try:
        response = anyio.run(go)
    finally:
        agents.UNBLOCK.set()
    assert done == ["blocked"] and response.status == "completed"
    assert artifacts(response)["answer.md"] == "fine"


def test_langchain_does_not_warn_of_the_failures_the_handler_raises_on_purpose(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_core.callbacks.manager"):
        with pytest.raises(AgentError, match="agent flooded ATP with events"):
            execute(adapter(), sink=Sink(fail_after=2))
        logging.getLogger("langchain_core.callbacks.manager").warning(
            "Error in %s.%s callback: %s", "AtpLangGraphHandler", "on_tool_end", repr(RunEnded("over"))
        )
        logging.getLogger("langchain_core.callbacks.manager").warning(
            "Error in %s.%s callback: %s", "OtherHandler", "on_tool_end", repr(ValueError("kept"))
        )
    messages = [record.getMessage() for record in caplog.records]
    assert not any("AtpLangGraphHandler" in message for message in messages)
    assert messages == ["Error in OtherHandler.on_tool_end callback: ValueError('kept')"]


@pytest.mark.parametrize("setting", ["input_mapper", "output_mapper"])
@pytest.mark.parametrize(
    ("mapper", "raised"), [("mapper_interrupts", "KeyboardInterrupt"), ("mapper_cancels", "CancelledError")]
)
def test_a_mapper_raising_what_is_not_an_exception_fails_its_run_only(
    setting: str, mapper: str, raised: str
) -> None:
    """(issue 26, kind 4) Not an interruption of ATP, nor ATP's cancellation: the run's failure."""
    with pytest.raises(AgentError) as caught:
        execute(
            adapter("question_graph", input_key="question", **{setting: f"{MODULE}:{mapper}"}), request("x")
        )
    says(str(caught.value), setting, f"{MODULE}:{mapper}", raised)
