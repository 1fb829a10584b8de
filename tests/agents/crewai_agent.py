"""CrewAI crews for the ``crewai`` adapter's tests: the real CrewAI, offline.

Every agent thinks with :class:`ScriptedLLM`, a ``BaseLLM`` that answers from a script instead
of a model API, and acts with real tools (arithmetic, reading a file). The script is a list of
steps, one per turn of the agent's conversation (the number of assistant messages in it so
far), so the model keeps no state of its own: one instance can serve runs going on at the same
time. A step is

- :class:`Use`: call a tool with these arguments,
- a string: the final answer,
- a function of the conversation's messages returning one of those (to answer from what the
  tools returned: :func:`tool_results`),
- an exception: the model call fails with it.

With ``function_calling=True`` the model declares native function calling, and CrewAI sends it
the tools' schemas and runs the tool calls it returns (OpenAI's format); without it, CrewAI
uses its ReAct text format (``Thought:`` / ``Action:`` / ``Action Input:`` / ``Final Answer:``),
which the model writes. Each call reports fixed token usage (:data:`INPUT_TOKENS`,
:data:`OUTPUT_TOKENS`) with CrewAI's LLM call events, as CrewAI's own providers do.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crewai import Agent, Crew, Task
from crewai.events.types.llm_events import LLMCallType
from crewai.llms.base_llm import BaseLLM, llm_call_context
from crewai.project import CrewBase, agent, crew, task
from crewai.tools import tool
from crewai.tools.tool_failure import ToolFailure
from pydantic import BaseModel, Field

INPUT_TOKENS = 100
OUTPUT_TOKENS = 20
HERE = Path(__file__).resolve().parent


@dataclass
class Use:
    """A step of a script: call ``tool`` with ``args``."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


class ScriptedLLM(BaseLLM):
    """A chat model that answers from a script (see the module), offline."""

    script: list[Any] = Field(default_factory=list)
    function_calling: bool = False

    def supports_function_calling(self) -> bool:
        return self.function_calling

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
        return INPUT_TOKENS  # (CrewAI's fallback estimate logs a warning on every call)

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
            step: Any = self.script[min(turn, len(self.script) - 1)] if self.script else "(no script)"
            if callable(step) and not isinstance(step, type):
                step = step(conversation)
            if isinstance(step, BaseException):
                self._emit_call_failed_event(error=str(step), from_task=from_task, from_agent=from_agent)
                raise step
            response = self._render(step, turn)
            usage = {
                "prompt_tokens": INPUT_TOKENS,
                "completion_tokens": OUTPUT_TOKENS,
                "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
            }
            self._track_token_usage_internal(usage)
            self._emit_call_completed_event(
                response=response,
                call_type=LLMCallType.LLM_CALL,
                from_task=from_task,
                from_agent=from_agent,
                messages=messages,
                usage=usage,
                finish_reason="tool_calls" if isinstance(step, Use) else "stop",
            )
            return response

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.call(messages, *args, **kwargs)

    def _render(self, step: Any, turn: int) -> Any:
        if isinstance(step, Use):
            arguments = json.dumps(step.args)
            if self.function_calling:
                return [
                    {
                        "id": f"call_{turn}",
                        "type": "function",
                        "function": {"name": step.tool, "arguments": arguments},
                    }
                ]
            return f"Thought: I should use {step.tool}.\nAction: {step.tool}\nAction Input: {arguments}"
        if self.function_calling:
            return str(step)
        return f"Thought: I know the final answer.\nFinal Answer: {step}"


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """What the tools returned so far in a conversation, in order (both formats)."""
    found: list[str] = []
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "tool":
            found.append(content.strip())
        elif message.get("role") == "assistant" and "\nObservation:" in content:
            found.append(content.split("\nObservation:", 1)[1].strip())
    return found


def task_text(messages: list[dict[str, Any]]) -> str:
    """The text of the conversation's first user message (the task, interpolated)."""
    for message in messages:
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


# --- tools: real work ------------------------------------------------------------------------


@tool("add")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool("multiply")
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool("Word Count")
def word_count(path: str) -> str:
    """Count the words of a text file (an absolute path, or one relative to the crews' folder)."""
    text = (HERE / path).read_text(encoding="utf-8")
    return json.dumps({"path": path, "words": len(text.split()), "first_line": text.splitlines()[0]})


@tool("broken_tool")
def broken_tool(reason: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"broken on purpose: {reason}")


@tool("exit_tool")
def exit_tool(code: int) -> str:
    """A tool that calls sys.exit (which CrewAI does not catch)."""
    sys.exit(code)


@tool("interrupt_tool")
def interrupt_tool(why: str) -> str:
    """A tool that raises KeyboardInterrupt (which CrewAI does not catch)."""
    raise KeyboardInterrupt(why)


@tool("lookup")
def lookup(key: str) -> Any:
    """Look a key up (there is no entry: the tool says it failed, without raising)."""
    return ToolFailure(message=f"no entry {key}")


MEETING = threading.Barrier(2)
"""Two runs of :func:`meeting_crew` can only both finish when they run at the same time."""


@tool("meet")
def meet(who: str) -> str:
    """Wait for the other run, then greet it."""
    MEETING.wait(timeout=30)
    return f"met while working for {who}"


RELEASES = {"factory": threading.Event(), "shared": threading.Event(), "flood": threading.Event()}
"""What lets the tool of the slow crews return: ``wait_for_release(what)`` waits for ``RELEASES[what]``."""
FINISHED = {"factory": threading.Event(), "shared": threading.Event(), "flood": threading.Event()}
"""Set when a slow crew, released, reached its final answer."""


@tool("wait_for_release")
def wait_for_release(what: str) -> str:
    """Wait until the test releases it."""
    RELEASES[what].wait(60)
    return f"released: {what}"


# --- crews -----------------------------------------------------------------------------------


def _numbers(messages: list[dict[str, Any]]) -> tuple[int, int]:
    found = re.findall(r"-?\d+", task_text(messages).split("Add", 1)[-1])
    return (int(found[0]), int(found[1])) if len(found) >= 2 else (0, 0)


def _add_the_numbers(messages: list[dict[str, Any]]) -> Use:
    a, b = _numbers(messages)
    return Use("add", {"a": a, "b": b})


def _first_number(text: str) -> int:
    """The number a tool returned (CrewAI may append reminders to what the model sees)."""
    match = re.match(r"\s*(-?\d+)", text)
    return int(match.group(1)) if match else 0


def _square_the_sum(messages: list[dict[str, Any]]) -> Use:
    total = _first_number(tool_results(messages)[-1])
    return Use("multiply", {"a": total, "b": total})


def _report_the_square(messages: list[dict[str, Any]]) -> str:
    return f"The result is {_first_number(tool_results(messages)[-1])}."


CALCULATOR_SCRIPT: list[Any] = [_add_the_numbers, _square_the_sum, _report_the_square]


def calculator(
    function_calling: bool = False, llm: BaseLLM | None = None, tools: list[Any] | None = None
) -> Agent:
    return Agent(
        role="Calculator",
        goal="Compute exactly what the task asks",
        backstory="A careful arithmetician who always uses the tools.",
        llm=llm
        or ScriptedLLM(
            model="scripted/calculator", script=CALCULATOR_SCRIPT, function_calling=function_calling
        ),
        tools=tools if tools is not None else [add, multiply],
        verbose=False,
        allow_delegation=False,
    )


def square_task(agent: Agent) -> Task:
    return Task(
        name="square",
        description="Add {task} and square the sum.",
        expected_output="The result, as a sentence.",
        agent=agent,
    )


def calculator_crew() -> Crew:
    """One agent, one task: add two numbers, square the sum (ReAct text tool calling)."""
    agent = calculator()
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def native_calculator_crew() -> Crew:
    """The same with native function calling."""
    agent = calculator(function_calling=True)
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


SHARED_LLM = ScriptedLLM(model="scripted/shared", script=CALCULATOR_SCRIPT)
"""One model for the crews of every run of :func:`shared_llm_crew`."""


def shared_llm_crew() -> Crew:
    """A new crew per run, all thinking with one model object."""
    agent = calculator(llm=SHARED_LLM)
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


class QuietLLM(ScriptedLLM):
    """A scripted model that emits no LLM call events (as some custom models do): only its
    token counters know what it did."""

    def _emit_call_started_event(self, *args: Any, **kwargs: Any) -> None:
        pass

    def _emit_call_completed_event(self, *args: Any, **kwargs: Any) -> None:
        pass


def quiet_crew() -> Crew:
    agent = calculator(llm=QuietLLM(model="scripted/quiet", script=CALCULATOR_SCRIPT))
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


shared_crew = calculator_crew()
"""A Crew object: every run of the agent that names it uses this one."""


class Report(BaseModel):
    title: str
    words: int
    summary: str


def _count_the_file(messages: list[dict[str, Any]]) -> Use:
    match = re.search(r"words of the file '([^']+)'", task_text(messages))
    return Use("Word Count", {"path": match.group(1) if match else "missing.txt"})


def _notes(messages: list[dict[str, Any]]) -> str:
    counted = json.loads(tool_results(messages)[-1])
    return f"The file {counted['path']} has {counted['words']} words; it begins: {counted['first_line']}"


def _report(messages: list[dict[str, Any]]) -> str:
    text = task_text(messages)
    words = re.search(r"has (\d+) words", text)
    begins = re.search(r"it begins: (.+)", text)
    return json.dumps(
        {
            "title": "Word count",
            "words": int(words.group(1)) if words else -1,
            "summary": begins.group(1).strip() if begins else "",
        }
    )


def two_task_crew() -> Crew:
    """Two agents, two tasks: a researcher counts a file's words with a tool, a writer turns
    its notes (the first task's output, in the second's context) into a JSON report."""
    researcher = Agent(
        role="Researcher",
        goal="Find the facts",
        backstory="Reads files.",
        llm=ScriptedLLM(model="scripted/researcher", script=[_count_the_file, _notes]),
        tools=[word_count],
        verbose=False,
        allow_delegation=False,
    )
    writer = Agent(
        role="Writer",
        goal="Write the report",
        backstory="Writes short reports.",
        llm=ScriptedLLM(model="scripted/writer", script=[_report]),
        verbose=False,
        allow_delegation=False,
    )
    research = Task(
        name="research",
        description="Count the words of the file '{path}'. Say how many and how it begins.",
        expected_output="Notes",
        agent=researcher,
    )
    report = Task(
        name="report",
        description="Write the report about {path}.",
        expected_output="A JSON report",
        agent=writer,
        context=[research],
        output_pydantic=Report,
    )
    return Crew(agents=[researcher, writer], tasks=[research, report], verbose=False)


def failing_crew() -> Crew:
    """A crew whose model fails after one good step: the tool is used, then the call raises."""
    agent = calculator(
        llm=ScriptedLLM(
            model="scripted/failing",
            script=[_add_the_numbers, RuntimeError("the model is down")],
        )
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def broken_tool_crew() -> Crew:
    """A crew whose tool raises (CrewAI tells the model and goes on)."""
    agent = calculator(
        llm=ScriptedLLM(
            model="scripted/broken",
            script=[Use("broken_tool", {"reason": "test"}), "I could not compute it."],
        ),
        tools=[broken_tool],
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def failing_lookup_crew() -> Crew:
    """A crew whose tool returns a ToolFailure (natively: "no such tool" is one too)."""
    agent = calculator(
        llm=ScriptedLLM(
            model="scripted/lookup",
            function_calling=True,
            script=[Use("lookup", {"key": "k"}), Use("no_such_tool", {}), "Nothing found."],
        ),
        tools=[lookup],
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def exiting_tool_crew() -> Crew:
    """A crew whose tool calls sys.exit(3): CrewAI reports the call finished, with no output,
    and the SystemExit ends the kickoff."""
    agent = calculator(
        llm=ScriptedLLM(model="scripted/exit", script=[Use("exit_tool", {"code": 3}), "Never here."]),
        tools=[exit_tool],
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def interrupting_tool_crew() -> Crew:
    """A crew whose tool raises KeyboardInterrupt (in the run's thread: the crew's own)."""
    agent = calculator(
        llm=ScriptedLLM(
            model="scripted/interrupt", script=[Use("interrupt_tool", {"why": "no"}), "Never here."]
        ),
        tools=[interrupt_tool],
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


FLOOD_CALLS = 30
"""The add calls of :func:`flood_crew` before it waits for ``RELEASES["flood"]``."""


def _flood(messages: list[dict[str, Any]]) -> Use | str:
    turn = sum(1 for message in messages if message.get("role") == "assistant")
    if turn < FLOOD_CALLS:  # (new arguments each time: CrewAI refuses a repeated identical call)
        return Use("add", {"a": turn, "b": 1})
    if turn == FLOOD_CALLS:
        return Use("wait_for_release", {"what": "flood"})
    FINISHED["flood"].set()
    return "Flooded."


def flood_crew() -> Crew:
    """A crew that calls add again and again, then waits for ``RELEASES["flood"]`` (a minute at
    most): a run with a small event limit is flooded long before its kickoff could return."""
    agent = calculator(
        llm=ScriptedLLM(model="scripted/flood", script=[_flood]), tools=[add, wait_for_release]
    )
    agent.max_iter = FLOOD_CALLS + 10
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def human_input_crew() -> Crew:
    """A crew whose task asks a person to review its answer (and whose crew has memory)."""
    agent = calculator()
    task = square_task(agent)
    task.human_input = True
    return Crew(agents=[agent], tasks=[task], memory=True, verbose=False)


def made_up_tool_crew() -> Crew:
    """A crew whose model (CrewAI's text format) calls a tool that does not exist."""
    agent = calculator(
        llm=ScriptedLLM(model="scripted/made-up", script=[Use("no_such_tool", {"x": 1}), "Gave up."])
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def _meet_then_add(messages: list[dict[str, Any]]) -> Use:
    a, _ = _numbers(messages)
    return Use("meet", {"who": f"run {a}"})


def meeting_crew() -> Crew:
    """Adds after meeting the other run (see :data:`MEETING`): two runs at the same time."""
    agent = calculator(
        llm=ScriptedLLM(model="scripted/meeting", script=[_meet_then_add, _add_the_numbers, _sum_is]),
        tools=[meet, add],
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def _sum_is(messages: list[dict[str, Any]]) -> str:
    return f"The sum is {_first_number(tool_results(messages)[-1])}."


def _slowly(what: str) -> list[Any]:
    def finish(messages: list[dict[str, Any]]) -> str:
        FINISHED[what].set()
        return "Finally done."

    return [Use("wait_for_release", {"what": what}), finish]


def slow_crew() -> Crew:
    """A crew whose tool waits for ``RELEASES["factory"]``, then calls the model again."""
    agent = calculator(
        llm=ScriptedLLM(model="scripted/slow", script=_slowly("factory")), tools=[wait_for_release]
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


def _slow_shared_crew() -> Crew:
    agent = calculator(
        llm=ScriptedLLM(model="scripted/slow", script=_slowly("shared")), tools=[wait_for_release]
    )
    return Crew(agents=[agent], tasks=[square_task(agent)], verbose=False)


slow_shared_crew = _slow_shared_crew()
"""A Crew object whose tool waits for ``RELEASES["shared"]``."""


@CrewBase
class MathCrew:
    """The calculator as a ``@CrewBase`` class (its ``crew()`` builds the crew)."""

    agents_config = "no_such_agents.yaml"
    tasks_config = "no_such_tasks.yaml"

    @agent
    def calculator(self) -> Agent:
        return calculator()

    @task
    def square(self) -> Task:
        return square_task(self.calculator())

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, verbose=False)


def _first_step(messages: list[dict[str, Any]]) -> Use | BaseException:
    text = task_text(messages)
    if "crash" in text:
        return RuntimeError("asked to crash")
    if "wait" in text:
        return Use("wait_for_release", {"what": "factory"})
    return _add_the_numbers(messages)


def e2e_crew() -> Crew:
    """The calculator on the test's own description (``{task}``); its model fails when the
    description says "crash", and waits for ``RELEASES["factory"]`` when it says "wait"."""
    agent = calculator(
        llm=ScriptedLLM(model="scripted/e2e", script=[_first_step, _square_the_sum, _report_the_square]),
        tools=[add, multiply, wait_for_release],
    )
    solve = Task(
        name="solve", description="{task}", expected_output="The result, as a sentence.", agent=agent
    )
    return Crew(agents=[agent], tasks=[solve], verbose=False)


def needs_an_argument(topic: str) -> Crew:
    raise AssertionError("never called")


def not_a_crew() -> dict[str, Any]:
    return {"agents": [], "tasks": []}


def factory_raises() -> Crew:
    raise ValueError("no crew today")


NOT_A_CREW = 42


# --- input mappers ---------------------------------------------------------------------------


def numbers_from_input(request: Any) -> dict[str, Any]:
    """Kickoff inputs from the request's input_data: ``task`` is "<a> and <b>"."""
    data = request.task.input_data or {}
    return {"task": f"{data['a']} and {data['b']}"}


def inputs_not_a_dict(request: Any) -> list[str]:
    return ["not", "a", "dict"]


def mapper_without_parameters() -> dict[str, Any]:
    return {}


class Odd(BaseException):
    """Neither an Exception nor anything Python itself raises."""


def factory_interrupts() -> Crew:
    raise KeyboardInterrupt


def factory_odd() -> Crew:
    raise Odd("no crew, oddly")
