"""LangGraph graphs for the tests of the ``langgraph`` adapter: real LangGraph, a scripted fake
chat model from LangChain's testing utilities (no API key), real tools.

The chat model is ``GenericFakeChatModel``, which answers with the AI messages it is given. Its
script is written for each call from the conversation so far (:func:`next_reply`): the task asks
for a calculation or a file, the model asks for the tool calls that do it, then answers with the
tools' results. So every run (and runs in parallel) gets the conversation its task calls for.
Every scripted message reports token usage (``usage_metadata``) and the model has a name.
"""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt
from typing_extensions import TypedDict

MODEL = "scripted-model"
FIRST_USAGE = {"input_tokens": 12, "output_tokens": 8, "total_tokens": 20}
LAST_USAGE = {"input_tokens": 30, "output_tokens": 10, "total_tokens": 40}


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model with a model name and tools that can be bound (its own
    ``bind_tools`` raises NotImplementedError): the script already says which tools to call."""

    model_name: str = MODEL

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


# --- real tools ------------------------------------------------------------------------------


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b  # b == 0 raises ZeroDivisionError


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return Path(path).read_text()


TOOLS = [add, multiply, divide, read_file]
_CALL = re.compile(r"\b(add|multiply|divide)\s+(-?\d+(?:\.\d+)?)\s+(?:and|by)\s+(-?\d+(?:\.\d+)?)")
_READ = re.compile(r"\bread\s+(\S+)")


def next_reply(messages: list[AnyMessage]) -> AIMessage:
    """The model's next message: the tool calls the task asks for, then the answer."""
    last = messages[-1]
    if isinstance(last, HumanMessage):
        text = str(last.content)
        calls = [
            {"name": name, "args": {"a": float(a), "b": float(b)}, "id": f"call_{index}"}
            for index, (name, a, b) in enumerate(_CALL.findall(text))
        ]
        calls += [
            {"name": "read_file", "args": {"path": path}, "id": f"call_read_{index}"}
            for index, path in enumerate(_READ.findall(text))
        ]
        if calls:
            return AIMessage(content="", tool_calls=calls, usage_metadata=dict(FIRST_USAGE))  # type: ignore[arg-type]
        return AIMessage(
            content="I can only add, multiply, divide and read files.", usage_metadata=dict(LAST_USAGE)
        )  # type: ignore[arg-type]
    results = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.insert(0, message)
    lines = [f"- {result.name}: {result.content}" for result in results]
    failed = any(result.status == "error" for result in results)
    head = "Some tools failed." if failed else f"The answer is {results[-1].content}." if results else "Done."
    return AIMessage(content=head + "\n\n" + "\n".join(lines) + "\n", usage_metadata=dict(LAST_USAGE))  # type: ignore[arg-type]


def model_for(messages: list[AnyMessage]) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter([next_reply(messages)]))


# --- the ReAct graph: agent -> tools -> agent -> end ------------------------------------------


def agent(state: MessagesState) -> dict[str, Any]:
    """A plain def node: LangGraph runs it in a worker thread."""
    model = model_for(state["messages"]).bind_tools(TOOLS)
    return {"messages": [model.invoke(state["messages"])]}


async def async_agent(state: MessagesState) -> dict[str, Any]:
    """The same as an async def node, on the event loop."""
    model = model_for(state["messages"]).bind_tools(TOOLS)
    return {"messages": [await model.ainvoke(state["messages"])]}


def react(node: Any = agent) -> StateGraph:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", node)
    builder.add_node("tools", ToolNode(TOOLS, handle_tool_errors=True))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


graph = react().compile()
async_graph = react(async_agent).compile()
builder = react()  # not compiled: the adapter compiles it
memory_graph = react().compile(checkpointer=InMemorySaver())
"""With a checkpointer: the state of a thread_id lives on between its invocations."""


class Meeting:
    """Runs that wait for each other: a node that returns only once ``size`` runs reach it.
    (Every run has an event loop of its own, in a thread of its own: they meet at a
    ``threading`` event, not an asyncio one.)"""

    def __init__(self, size: int) -> None:
        self.size = size
        self.arrived = 0
        self.lock = threading.Lock()
        self.all_here = threading.Event()

    async def __call__(self, state: MessagesState) -> dict[str, Any]:
        with self.lock:
            self.arrived += 1
            if self.arrived >= self.size:
                self.all_here.set()
        for _ in range(2000):
            if self.all_here.is_set():
                return {}
            await asyncio.sleep(0.01)
        raise TimeoutError("the other run never came")


MEETING = Meeting(2)


def _meeting() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("meet", MEETING)
    builder.add_node("agent", async_agent)
    builder.add_node("tools", ToolNode(TOOLS, handle_tool_errors=True))
    builder.add_edge(START, "meet")
    builder.add_edge("meet", "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


meeting_graph = _meeting()
"""The ReAct graph after a node 'meet' where two runs wait for each other: both are in flight."""
FACTORY_CALLS: list[Any] = []


def make_graph() -> Any:
    FACTORY_CALLS.append(None)
    return react().compile()


def make_graph_with_config(config: dict[str, Any]) -> Any:
    FACTORY_CALLS.append(config)
    return react().compile()


async def make_graph_async() -> Any:
    return react(async_agent).compile()


def make_nothing() -> Any:
    return {"not": "a graph"}


def make_broken() -> Any:
    raise RuntimeError("no model configured")


NOT_A_GRAPH = 42


# --- graphs that fail ------------------------------------------------------------------------


def crashing_node(state: MessagesState) -> dict[str, Any]:
    raise ValueError("the model said no")


def _crashing() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("crash", crashing_node)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "crash")
    builder.add_edge("crash", END)
    return builder.compile()


raising_graph = _crashing()
"""The model answers, then the node 'crash' raises ValueError."""


def _strict_tools() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(TOOLS))  # LangGraph's default: a tool's exception ends the graph
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


strict_tools_graph = _strict_tools()


def ping(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="ping", usage_metadata=dict(FIRST_USAGE))]}  # type: ignore[arg-type]


def pong(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content="pong")]}


def _looping() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("ping", ping)
    builder.add_node("pong", pong)
    builder.add_edge(START, "ping")
    builder.add_edge("ping", "pong")
    builder.add_edge("pong", "ping")  # forever
    return builder.compile()


looping_graph = _looping()

CANCELLED: list[str] = []
"""The task of every run of ``slow_graph`` cancelled while it slept."""


async def sleepy(state: MessagesState) -> dict[str, Any]:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        CANCELLED.append(str(state["messages"][0].content))
        raise
    return {}


def _slow() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("sleep", sleepy)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "sleep")
    builder.add_edge("sleep", END)
    return builder.compile()


slow_graph = _slow()
"""The model answers, then the async node 'sleep' sleeps for an hour (a timeout cancels it)."""

RELEASE = threading.Event()
LATE: list[BaseException | None] = []
"""What the model call of ``stuck_graph``'s thread met after the run's end."""


def stuck(state: MessagesState) -> dict[str, Any]:
    """A plain def node that blocks (no timeout can stop its thread) until released, then calls
    the model: the run is over by then."""
    RELEASE.wait(60)
    try:
        model_for(state["messages"]).invoke(state["messages"])
    except BaseException as exc:
        LATE.append(exc)
        raise
    LATE.append(None)
    return {}


def _stuck() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("stuck", stuck)
    builder.add_edge(START, "stuck")
    builder.add_edge("stuck", END)
    return builder.compile()


stuck_graph = _stuck()


def review(state: MessagesState) -> dict[str, Any]:
    approved = interrupt("approve the answer?")  # stops the graph: nobody resumes it in a test
    return {"messages": [AIMessage(content=f"approved: {approved}")]}


def _interrupting() -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("review", review)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=InMemorySaver())


interrupting_graph = _interrupting()


# --- a graph without messages: input_key, mappers ---------------------------------------------


class QuestionState(TypedDict, total=False):
    question: str
    numbers: list[float]
    answer: str
    opened: Any


def solve(state: QuestionState) -> dict[str, Any]:
    numbers = state.get("numbers") or []
    total = add.invoke({"a": sum(numbers[:-1]), "b": numbers[-1]}) if numbers else 0
    return {"answer": f"{state['question']}: {total:g}", "opened": threading.Lock()}


def _question() -> Any:
    builder = StateGraph(QuestionState)
    builder.add_node("solve", solve)
    builder.add_edge(START, "solve")
    builder.add_edge("solve", END)
    return builder.compile()


question_graph = _question()
"""State ``question`` / ``numbers`` -> ``answer`` (and a lock, which no JSON can hold)."""


def to_input(request: Any) -> dict[str, Any]:
    """An input mapper: the request's description and input_data."""
    data = request.task.input_data or {}
    return {"question": request.task.description, "numbers": data.get("numbers", [])}


async def to_input_async(request: Any) -> dict[str, Any]:
    return to_input(request)


def to_artifacts(state: dict[str, Any]) -> dict[str, Any]:
    """An output mapper: the answer as a file, the numbers as data."""
    return {
        "answer.txt": state["answer"],
        "numbers": {"items": state.get("numbers", [])},
        "count": len(state.get("numbers", [])),
    }


def to_artifact_list(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "structured", "name": "result", "data": {"answer": state["answer"]}}]


def to_garbage(state: dict[str, Any]) -> Any:
    return 42


def to_bad_artifacts(state: dict[str, Any]) -> Any:
    return [{"type": "file"}]  # no path


def mapper_raises(value: Any) -> Any:
    raise KeyError("numbers")


# --- hostile graphs --------------------------------------------------------------------------


class AnyState(TypedDict, total=False):
    messages: list[Any]
    data: Any


def _one_node(node: Any, state: Any = MessagesState) -> Any:
    builder = StateGraph(state)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder.compile()


FLOOD_CALLS: list[int] = []
"""How many tool calls each run of ``flood_graph`` made before it stopped."""
FLOOD_STOPPED: list[BaseException] = []


def flood(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
    """A plain def node calling a tool in a tight loop: 200,000 tool_call events."""
    calls = 0
    try:
        for i in range(200_000):
            add.invoke({"a": i, "b": 1}, config)
            calls += 1
    except BaseException as exc:
        FLOOD_STOPPED.append(exc)
        raise
    finally:
        FLOOD_CALLS.append(calls)
    return {"messages": [AIMessage(content="flooded")]}


flood_graph = _one_node(flood)


def _exits(state: MessagesState) -> dict[str, Any]:
    sys.exit(3)


async def _exits_async(state: MessagesState) -> dict[str, Any]:
    sys.exit(4)


def _generator_exit(state: MessagesState) -> dict[str, Any]:
    raise GeneratorExit("closing")


async def _interrupts_async(state: MessagesState) -> dict[str, Any]:
    raise KeyboardInterrupt("in an async node")


exiting_graph = _one_node(_exits)
async_exiting_graph = _one_node(_exits_async)
generator_exit_graph = _one_node(_generator_exit)
keyboard_interrupt_graph = _one_node(_interrupts_async)

UNBLOCK = threading.Event()
"""Releases the nodes of ``blocking_graph`` and ``async_blocking_graph`` (at the end of a test)."""


def _blocks(state: MessagesState) -> dict[str, Any]:
    """A plain def node that blocks when the task says so."""
    if state["messages"][-1].content == "block":
        UNBLOCK.wait(120)
    return {"messages": [AIMessage(content="fine")]}


async def _blocks_async(state: MessagesState) -> dict[str, Any]:
    """An async node that blocks in sync code (its event loop with it)."""
    UNBLOCK.wait(120)
    return {"messages": [AIMessage(content="late")]}


blocking_graph = _one_node(_blocks)
async_blocking_graph = _one_node(_blocks_async)


def _shared_state(state: AnyState) -> dict[str, Any]:
    """A state of 2**40 leaves written out (a list holding the same list twice, 40 deep), and a
    list holding itself."""
    shared: list[Any] = [0]
    for _ in range(40):
        shared = [shared, shared]
    cycle: list[Any] = []
    cycle.append(cycle)
    return {"data": {"cycle": cycle, "shared": shared, "big": list(range(3_000_000))}}


shared_state_graph = _one_node(_shared_state, AnyState)


def mapper_interrupts(value: Any) -> Any:
    """A mapper raising what is not an Exception (its own KeyboardInterrupt)."""
    raise KeyboardInterrupt


async def mapper_cancels(value: Any) -> Any:
    """An async mapper raising a CancelledError of its own making."""
    import asyncio

    raise asyncio.CancelledError
