"""A LangGraph agent for ATP's ``langgraph`` adapter: a ReAct graph (a model node, a tool node)
whose chat model is LangChain's scripted fake, so it runs without an API key, calling real
tools.

Swap :class:`ScriptedChatModel` for a real chat model (``ChatAnthropic``, ``ChatOpenAI``) and
the graph, the suite and ATP's events stay the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

NOTES = Path(__file__).resolve().parent / "notes"


# --- the tools: real work --------------------------------------------------------------------


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@tool
def read_note(name: str) -> str:
    """Read one of the notes (a file in the notes folder)."""
    path = (NOTES / name).resolve()
    if path.parent != NOTES:
        raise ValueError(f"{name!r} is not a note")
    return path.read_text()


TOOLS = [add, multiply, read_note]


# --- the model: scripted ---------------------------------------------------------------------


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model (it answers with the messages it is given), with a model name
    and a ``bind_tools`` that keeps it as it is: the script already says which tools to call."""

    model_name: str = "scripted-calculator"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


_ARITHMETIC = re.compile(r"\b(add|multiply)\s+(-?\d+(?:\.\d+)?)\s+and\s+(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_EXPRESSION = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)\s*([+*])\s*(-?\d+(?:\.\d+)?)(?!\.?\d)")
"""An arithmetic expression in the task's text: ``17 + 25``, ``4 * 5`` (a question such as
"What is 17 + 25?", as examples/frameworks/suite.yaml asks every agent it tests)."""
_OPERATION = {"+": "add", "*": "multiply"}
_NOTE = re.compile(r"\bnote\s+([\w.-]+\.txt)", re.IGNORECASE)


def script(messages: list[AnyMessage]) -> AIMessage:
    """What the model says next. A real model decides from the conversation; this one asks for
    the tool calls the task names ("add 2 and 3", or "17 + 25"), then answers with their
    results. Token counts are made up."""
    last = messages[-1]
    if isinstance(last, HumanMessage):
        text = str(last.content)
        calls = [
            {"name": name.lower(), "args": {"a": float(a), "b": float(b)}, "id": f"call_{index}"}
            for index, (name, a, b) in enumerate(_ARITHMETIC.findall(text))
        ]
        calls += [
            {"name": _OPERATION[sign], "args": {"a": float(a), "b": float(b)}, "id": f"expression_{index}"}
            for index, (a, sign, b) in enumerate(_EXPRESSION.findall(text))
        ]
        calls += [
            {"name": "read_note", "args": {"name": name}, "id": f"note_{index}"}
            for index, name in enumerate(_NOTE.findall(text))
        ]
        usage = {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52}
        if not calls:
            return AIMessage(content="I can add, multiply and read notes.", usage_metadata=usage)
        return AIMessage(content="", tool_calls=calls, usage_metadata=usage)
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.insert(0, message)
    lines = "\n".join(f"- {result.name}: {_number(result.content)}" for result in results)
    usage = {"input_tokens": 90, "output_tokens": 30, "total_tokens": 120}
    return AIMessage(content=f"# Results\n\n{lines}\n", usage_metadata=usage)


def _number(content: Any) -> str:
    text = str(content).strip()
    return text[:-2] if text.endswith(".0") else text


# --- the graph -------------------------------------------------------------------------------


def agent(state: MessagesState) -> dict[str, Any]:
    model = ScriptedChatModel(messages=iter([script(state["messages"])])).bind_tools(TOOLS)
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("agent", agent)
builder.add_node("tools", ToolNode(TOOLS, handle_tool_errors=True))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", tools_condition)  # tool calls -> "tools", else the end
builder.add_edge("tools", "agent")
graph = builder.compile()
