"""A CrewAI crew for ATP's ``crewai`` adapter that runs without an API key (docs/agents-crewai.md).

Two agents work on a company's competitors: an analyst reads a market table and adds up the
competitors' shares with two real tools, and a writer turns the analyst's findings into a
markdown report. Both think with :class:`ScriptedLLM`, a CrewAI ``BaseLLM`` that answers from a
script instead of calling a model API, so the example (and a suite testing it) needs no key
and no network. For a real model, give the agents ``LLM(model="openai/gpt-4o-mini")`` (or any
model CrewAI supports) instead of :func:`analyst_model` and :func:`writer_model`.

ATP builds a new crew for every run with :func:`build_crew` (a Crew keeps state between
kickoffs) and kicks it off with ``{"task": <the test's description>, **<its input_data>}``.

:func:`build_calculator_crew` is a smaller crew of the same parts: one agent that answers an
arithmetic question ("What is 17 + 25?") with the calculator, for examples/frameworks/suite.yaml,
which asks the same of agents of every framework ATP drives.
"""

from __future__ import annotations

import ast
import csv
import json
import operator
import re
from pathlib import Path
from typing import Any

from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM, llm_call_context
from crewai.tools import tool
from pydantic import BaseModel, Field

DATA = Path(__file__).resolve().parent / "data"


# --- tools -------------------------------------------------------------------------------------


@tool("read_table")
def read_table(name: str) -> str:
    """Read a CSV table of the data folder (its file name, like market.csv); returns its rows as JSON."""
    path = (DATA / name).resolve()
    if path.parent != DATA or not path.is_file():
        return f"there is no table {name!r}; the tables are: {', '.join(sorted(p.name for p in DATA.glob('*.csv')))}"
    with path.open(newline="", encoding="utf-8") as handle:
        return json.dumps(list(csv.DictReader(handle)))


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


@tool("calculator")
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression of numbers, + - * / and parentheses, like (44 + 12) * 2."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"not arithmetic: {ast.unparse(node)}")

    result = value(ast.parse(expression, mode="eval").body)
    return str(int(result) if float(result).is_integer() else result)


# --- a model that answers from a script --------------------------------------------------------


class Use(BaseModel):
    """A step of a script: call a tool."""

    tool: str
    args: dict[str, Any]


class ScriptedLLM(BaseLLM):
    """A chat model that answers from a script, for tests without a model API.

    The script has a step for each turn of the agent's conversation (the number of answers the
    model gave in it so far): a :class:`Use` (call a tool), a string (the final answer), or a
    function of the conversation's messages returning one of those (to answer from what the
    tools returned). The model writes CrewAI's ReAct format (``Action:`` / ``Action Input:`` /
    ``Final Answer:``), and reports token usage with CrewAI's LLM call events, as CrewAI's own
    model providers do, so the crew's events and metrics are those of a real model.
    """

    script: list[Any] = Field(default_factory=list)
    tokens_per_call: tuple[int, int] = (150, 30)
    """The (input, output) tokens each call reports."""

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        with llm_call_context():
            self._emit_call_started_event(
                messages=messages,
                tools=tools,
                callbacks=callbacks,
                available_functions=available_functions,
                from_task=from_task,
                from_agent=from_agent,
            )
            conversation = messages if isinstance(messages, list) else [{"role": "user", "content": messages}]
            turn = sum(1 for message in conversation if message.get("role") == "assistant")
            step = self.script[min(turn, len(self.script) - 1)]
            if callable(step) and not isinstance(step, Use):
                step = step(conversation)
            if isinstance(step, Use):
                response = f"Thought: I should use {step.tool}.\nAction: {step.tool}\nAction Input: {json.dumps(step.args)}"
            else:
                response = f"Thought: I can answer now.\nFinal Answer: {step}"
            prompt, completion = self.tokens_per_call
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            self._track_token_usage_internal(usage)
            self._emit_call_completed_event(
                response=response,
                call_type=LLMCallType.LLM_CALL,
                from_task=from_task,
                from_agent=from_agent,
                messages=messages,
                usage=usage,
            )
            return response

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
        return self.tokens_per_call[0]


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """What the tools returned so far in an agent's conversation."""
    return [
        str(message["content"]).split("\nObservation:", 1)[1].strip()
        for message in messages
        if message.get("role") == "assistant" and "\nObservation:" in str(message.get("content"))
    ]


def prompt(messages: list[dict[str, Any]]) -> str:
    """The task as the agent was given it (the conversation's first user message)."""
    return next(str(message.get("content")) for message in messages if message.get("role") == "user")


# --- the analyst's and the writer's "thinking" --------------------------------------------------


class Findings(BaseModel):
    company: str
    market: str
    competitors: dict[str, float]
    combined_share: float


def _rows(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    company = re.search(r"The company: (.+?)\.", prompt(messages)).group(1)  # type: ignore[union-attr]
    rows = json.loads(tool_results(messages)[0].split("\n\n")[0])
    return company, rows


def _competitors(messages: list[dict[str, Any]]) -> tuple[str, str, dict[str, float]]:
    company, rows = _rows(messages)
    market = next(row["market"] for row in rows if row["product"] == company)
    shares = {
        row["product"]: float(row["share_percent"])
        for row in rows
        if row["market"] == market and row["product"] != company
    }
    return company, market, shares


def add_up_the_shares(messages: list[dict[str, Any]]) -> Use:
    _, _, shares = _competitors(messages)
    return Use(tool="calculator", args={"expression": " + ".join(f"{share:g}" for share in shares.values())})


def findings(messages: list[dict[str, Any]]) -> str:
    company, market, shares = _competitors(messages)
    combined = float(tool_results(messages)[-1].split()[0])
    return Findings(
        company=company, market=market, competitors=shares, combined_share=combined
    ).model_dump_json()


def report(messages: list[dict[str, Any]]) -> str:
    found = Findings.model_validate_json(re.search(r"\{.*\}", prompt(messages), re.DOTALL).group(0))  # type: ignore[union-attr]
    leader = max(found.competitors, key=found.competitors.__getitem__)
    lines = "\n".join(f"- {name}: {share:g}%" for name, share in found.competitors.items())
    return (
        f"# Competitors of {found.company}\n\n## Overview\n\n{found.company} competes in {found.market} "
        f"with {len(found.competitors)} products of the table.\n\n## Competitors\n\n{lines}\n\n## Summary\n\n"
        f"Together they hold {found.combined_share:g}% of the market; {leader} leads.\n"
    )


def analyst_model() -> BaseLLM:
    return ScriptedLLM(
        model="scripted/analyst",
        script=[Use(tool="read_table", args={"name": "market.csv"}), add_up_the_shares, findings],
    )


def writer_model() -> BaseLLM:
    return ScriptedLLM(model="scripted/writer", script=[report])


# --- a one-agent crew that does arithmetic (examples/frameworks/suite.yaml) ------------------------

_EXPRESSION = re.compile(r"-?\d+(?:\.\d+)?(?:\s*[-+*/]\s*-?\d+(?:\.\d+)?)+")
"""An arithmetic expression in a task's text: ``17 + 25`` of "What is 17 + 25?"."""


def use_the_calculator(messages: list[dict[str, Any]]) -> Use | str:
    """Hand the expression the task asks about to the calculator (the model does no arithmetic);
    a task without one is answered at once."""
    found = _EXPRESSION.search(prompt(messages).split("Current Task:", 1)[-1])
    if found is None:
        return "I answer arithmetic questions, such as: What is 17 + 25?"
    return Use(tool="calculator", args={"expression": found.group(0)})


def the_number(messages: list[dict[str, Any]]) -> str:
    """The final answer: what the calculator returned."""
    return tool_results(messages)[-1].split()[0]


def calculator_model() -> BaseLLM:
    return ScriptedLLM(model="scripted/calculator", script=[use_the_calculator, the_number])


def build_calculator_crew() -> Crew:
    """A new one-agent crew that answers an arithmetic question (the task's description) with
    the calculator; examples/frameworks/suite.yaml tests it beside other frameworks' agents."""
    calculator_agent = Agent(
        role="Calculator",
        goal="Answer arithmetic questions exactly",
        backstory="You never do arithmetic in your head: you use the calculator and report its result.",
        llm=calculator_model(),
        tools=[calculator],
        allow_delegation=False,
        verbose=False,
    )
    calculate = Task(
        name="calculate",
        description="{task}",
        expected_output="The number alone.",
        agent=calculator_agent,
    )
    return Crew(agents=[calculator_agent], tasks=[calculate], verbose=False)


# --- the crew ------------------------------------------------------------------------------------


def build_crew() -> Crew:
    """A new crew (ATP calls this for every run)."""
    analyst = Agent(
        role="Market analyst",
        goal="Find a company's competitors and their market shares in the data",
        backstory="You read the market tables and check every number with the calculator.",
        llm=analyst_model(),
        tools=[read_table, calculator],
        allow_delegation=False,
        verbose=False,
    )
    writer = Agent(
        role="Report writer",
        goal="Write short, well-structured markdown reports",
        backstory="You turn an analyst's findings into a report with Overview, Competitors and Summary.",
        llm=writer_model(),
        allow_delegation=False,
        verbose=False,
    )
    research = Task(
        name="research",
        description="{task}\nThe company: {company}. Use the table market.csv.",
        expected_output="The competitors in the company's market, their shares, and their combined share.",
        agent=analyst,
        output_pydantic=Findings,
    )
    write = Task(
        name="report",
        description="Write a markdown report on the competitors of {company}.",
        expected_output="A markdown report with the sections Overview, Competitors and Summary.",
        agent=writer,
        context=[research],
    )
    return Crew(agents=[analyst, writer], tasks=[research, write], verbose=False)


if __name__ == "__main__":  # python examples/crewai/research_crew.py: one kickoff, without ATP
    print(build_crew().kickoff(inputs={"task": "Find the competitors of Slack", "company": "Slack"}).raw)
