"""The ``crewai`` adapter (atp.adapters.crewai) with the real CrewAI, offline: the crews of
tests/agents/crewai_agent.py think with a scripted model and call real tools.

Checked here: the events a kickoff becomes (agents taking over, their steps, tool calls with
input, output and status, LLM calls with model and tokens, task completion, errors), the
metrics and artifacts, a crew that raises, a tool that exits, input mapping, runs at the same
time keeping their events apart (with CrewAI's scoped stream sinks, and with handlers on its
global bus), a run that times out, a run flooded with events, a crew asking for human input,
telemetry, and the settings' errors."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import msgspec
import pytest

import atp.adapters.crewai as crewai_adapter
from atp.adapters.crewai import CrewAIAdapter, CrewAISettings
from atp.adapters.crewai_library import CrewAILibrary as _CrewAI
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, ConfigError
from atp.core.plugins import Plugins
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    ErrorEvent,
    Event,
    FileArtifact,
    LLMRequestEvent,
    ProgressEvent,
    ReasoningEvent,
    ReasoningPayload,
    StateChangeEvent,
    StructuredArtifact,
    Task,
    ToolCallEvent,
)
from atp.core.suite import load_suite
from atp.core.trace import TraceLimitExceeded
from tests.conftest import AGENTS, PYTHON, ROOT, write
from tests.facts import says

MODULE = "crewai_agent"
SOURCE = (AGENTS / "crewai_agent.py").read_text()


@pytest.fixture(scope="module", autouse=True)
def crewai_offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """CrewAI's files (the latest kickoff's task outputs) go to a folder of the test's, not the
    home folder; its telemetry and tracing are off (the adapter's default does it too)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("crewai-data")))
        patch.setenv("CREWAI_DISABLE_TELEMETRY", "true")
        patch.setenv("CREWAI_TRACING_ENABLED", "false")
        yield


@pytest.fixture(scope="module")
def crews() -> ModuleType:
    """tests/agents/crewai_agent.py, as the adapter imports it (a module of its folder)."""
    anyio.run(adapter("calculator_crew").start)
    return importlib.import_module(MODULE)


class Sink:
    masker = None

    def __init__(self) -> None:
        self.got: list[Event] = []
        self.lines: list[str] = []
        self.warnings: list[str] = []

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.got.append(event)

    def events(self, events: Any, raw: bytes | None = None) -> None:
        self.got.extend(events)

    def log(self, line: str) -> None:
        self.lines.append(line)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def of(self, cls: type[Any]) -> list[Any]:
        return [event.payload for event in self.got if isinstance(event, cls)]


def adapter(crew: str, **settings: Any) -> CrewAIAdapter:
    return CrewAIAdapter(
        msgspec.convert({"module": MODULE, "crew": crew, **settings}, CrewAISettings),
        name="crew",
        base_dir=AGENTS,
    )


def request(description: str = "2 and 3", **input_data: Any) -> ATPRequest:
    return ATPRequest(
        version=PROTOCOL_VERSION,
        task_id=str(uuid.uuid4()),
        task=Task(description=description, input_data=input_data or None),
    )


def execute(target: CrewAIAdapter, req: ATPRequest | None = None) -> tuple[ATPResponse, Sink]:
    sink = Sink()

    async def go() -> ATPResponse:
        await target.start()
        return await target.execute(req or request(), sink)

    return anyio.run(go), sink


def failure(target: CrewAIAdapter, req: ATPRequest | None = None) -> tuple[AgentError, Sink]:
    sink = Sink()

    async def go() -> None:
        await target.start()
        await target.execute(req or request(), sink)

    with pytest.raises(AgentError) as caught:
        anyio.run(go)
    return caught.value, sink


def start_error(crew: str, **settings: Any) -> str:
    with pytest.raises(AdapterError) as caught:
        anyio.run(adapter(crew, **settings).start)
    return str(caught.value)


def line_of(text: str) -> int:
    """The line of tests/agents/crewai_agent.py that holds ``text``."""
    return next(number for number, line in enumerate(SOURCE.splitlines(), 1) if text in line)


def artifact(response: ATPResponse, name: str) -> Any:
    for item in response.artifacts:
        if getattr(item, "name", None) == name or getattr(item, "path", None) == name:
            return item
    raise AssertionError(f"no artifact {name}: {response.artifacts}")


def check_sequence(sink: Sink, task_id: str) -> None:
    assert [event.sequence for event in sink.got] == list(range(len(sink.got)))
    assert {event.task_id for event in sink.got} == {task_id}
    stamps = [event.timestamp for event in sink.got]
    assert stamps == sorted(stamps)


# --- one crew, one task ----------------------------------------------------------------------


@pytest.mark.parametrize("crew", ["calculator_crew", "native_calculator_crew"])
def test_a_crew_becomes_events_metrics_and_artifacts(crews: ModuleType, crew: str) -> None:
    """Add 2 and 3 with the add tool, square the sum with multiply: in CrewAI's ReAct text
    format and with native function calling, the same tool calls, LLM calls and metrics."""
    req = request("2 and 3")
    response, sink = execute(adapter(crew), req)
    assert response.status == "completed" and response.task_id == req.task_id
    check_sequence(sink, req.task_id)

    assert sink.of(StateChangeEvent)[0] == sink.got[0].payload
    state = sink.of(StateChangeEvent)
    assert [(s.from_state, s.to_state, s.reason) for s in state] == [(None, "Calculator", "task: square")]

    tools = sink.of(ToolCallEvent)
    assert [(t.tool, t.input, t.output, t.status) for t in tools] == [
        ("add", {"a": 2, "b": 3}, "5", "success"),
        ("multiply", {"a": 5, "b": 5}, "25", "success"),
    ]
    assert all(t.duration_ms is not None and t.duration_ms >= 0 and t.error is None for t in tools)

    llm = sink.of(LLMRequestEvent)
    model = "scripted/calculator"
    assert [(c.model, c.input_tokens, c.output_tokens) for c in llm] == [(model, 100, 20)] * 3
    assert [c.stop_reason for c in llm] == ["tool_calls", "tool_calls", "stop"]
    assert all(c.duration_ms is not None and c.duration_ms >= 0 for c in llm)

    types = [event.event_type for event in sink.got]
    assert types.index("llm_request") < types.index("tool_call") and types[-1] == "progress"
    steps = sink.of(ReasoningEvent)
    if crew == "calculator_crew":  # the ReAct format reports every step, with its thought
        assert [(s.step, s.thought) for s in steps] == [
            ("Calculator: use tool add", "I should use add."),
            ("Calculator: use tool multiply", "I should use multiply."),
            ("Calculator: final answer", "I know the final answer."),
        ]
    else:  # native function calling: CrewAI reports the final answer only
        assert [(s.step, s.thought) for s in steps] == [("Calculator: final answer", None)]
    (progress,) = sink.of(ProgressEvent)
    assert (progress.current_step, progress.percentage) == (3, 100.0)
    says(progress.message, "task 1 of 1", "completed", "square", "Calculator")
    assert not sink.of(ErrorEvent) and not sink.warnings

    metrics = response.metrics
    assert (metrics.llm_calls, metrics.tool_calls, metrics.total_steps) == (3, 2, 3)
    assert (metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (300, 60, 360)
    assert metrics.wall_time_seconds is not None and metrics.wall_time_seconds > 0

    output = artifact(response, "output.md")
    assert isinstance(output, FileArtifact)
    assert (output.content, output.content_type, output.size_bytes) == (
        "The result is 25.",
        "text/markdown",
        17,
    )
    square = artifact(response, "square")
    assert isinstance(square, StructuredArtifact)
    assert square.data["raw"] == "The result is 25." and square.data["agent"] == "Calculator"
    assert square.data["index"] == 1 and square.data["output_format"] == "raw"
    assert [getattr(a, "name", None) or getattr(a, "path", None) for a in response.artifacts] == [
        "output.md",
        "square",
    ]


def test_two_tasks_two_agents_and_a_structured_output(crews: ModuleType, tmp_path: Path) -> None:
    """A researcher counts a file's words with a tool, a writer reports them as a pydantic
    model: both agents take over in turn, each task's completion is reported, each task's
    output is an artifact, and the final output is structured too. The tool "Word Count" is
    named as CrewAI names it for function calling: word_count."""
    notes = write(tmp_path / "notes.txt", "Crews count words\nthe second line\n")
    req = request("Report on the file", path=str(notes))
    response, sink = execute(adapter("two_task_crew"), req)
    check_sequence(sink, req.task_id)
    state = sink.of(StateChangeEvent)
    assert [(s.from_state, s.to_state) for s in state] == [(None, "Researcher"), ("Researcher", "Writer")]
    assert state[1].reason == "task: report"
    assert [(t.tool, t.input) for t in sink.of(ToolCallEvent)] == [("word_count", {"path": str(notes)})]
    assert sink.of(ReasoningEvent)[0] == ReasoningPayload(
        thought="I should use Word Count.", step="Researcher: use tool word_count"
    )
    assert json.loads(sink.of(ToolCallEvent)[0].output) == {
        "path": str(notes),
        "words": 6,
        "first_line": "Crews count words",
    }
    assert [c.model for c in sink.of(LLMRequestEvent)] == [
        "scripted/researcher",
        "scripted/researcher",
        "scripted/writer",
    ]
    assert [(p.message, p.percentage, p.current_step) for p in sink.of(ProgressEvent)] == [
        ("task 1 of 2 completed: research (agent: Researcher)", 50.0, 2),
        ("task 2 of 2 completed: report (agent: Writer)", 100.0, 3),
    ]
    report = {"title": "Word count", "words": 6, "summary": "Crews count words"}
    assert json.loads(artifact(response, "output.md").content) == report
    assert artifact(response, "output").data == report
    research = artifact(response, "research").data
    assert research["raw"] == f"The file {notes} has 6 words; it begins: Crews count words"
    assert research["agent"] == "Researcher" and "json" not in research
    written = artifact(response, "report").data
    assert written["json"] == report and written["output_format"] == "pydantic" and written["index"] == 2
    assert [getattr(a, "name", None) or a.path for a in response.artifacts] == [
        "output.md",
        "output",
        "research",
        "report",
    ]
    assert (response.metrics.llm_calls, response.metrics.tool_calls, response.metrics.total_steps) == (
        3,
        1,
        3,
    )


def test_a_crewbase_class_builds_a_crew_per_run(crews: ModuleType) -> None:
    response, _ = execute(adapter("MathCrew"), request("1 and 2"))
    assert artifact(response, "output.md").content == "The result is 9."


# --- failures --------------------------------------------------------------------------------


def test_a_crew_that_raises_fails_its_run_with_an_error_event(crews: ModuleType) -> None:
    """The model raises on its second call; CrewAI tries the agent twice more (its
    max_retry_limit), then gives up: the run fails with the exception (where the crew's module
    raised it), the traceback is the run's log, and every attempt's events are kept."""
    req = request("1 and 2")
    error, sink = failure(adapter("failing_crew"), req)
    line = line_of("raise step")
    says(error.message, f"{MODULE}:failing_crew", "RuntimeError: the model is down", f"{MODULE}.py:{line}")
    assert [(s.from_state, s.to_state, s.reason) for s in sink.of(StateChangeEvent)] == [
        (None, "Calculator", "task: square"),
        ("Calculator", "Calculator", "task: square (again, after an error)"),
        ("Calculator", "Calculator", "task: square (again, after an error)"),
    ]
    assert [t.tool for t in sink.of(ToolCallEvent)] == ["add"] * 3
    errors = sink.of(ErrorEvent)
    assert [(e.error_type, e.message, e.recoverable) for e in errors] == [
        *[("llm_call_failed", "scripted/failing: the model is down", True)] * 3,
        ("RuntimeError", "the model is down", False),
    ]
    assert sink.got[-1].payload == errors[-1]
    check_sequence(sink, req.task_id)
    assert sink.lines[0] == "Traceback (most recent call last):"
    assert sink.lines[-1] == "RuntimeError: the model is down"


def test_a_missing_input_fails_the_run(crews: ModuleType) -> None:
    """The two-task crew's description needs {path}, which the request does not give."""
    error, sink = failure(adapter("two_task_crew"), request("no path"))
    assert error.message.startswith(
        f"the crew {MODULE}:two_task_crew raised ValueError: Missing required template variable "
        f"'Template variable 'path' not found in inputs dictionary' in description (at "
    )
    assert [e.error_type for e in sink.of(ErrorEvent)] == ["ValueError"]


def test_a_tool_that_raises_is_a_failed_tool_call(crews: ModuleType) -> None:
    """CrewAI tells the model its tool failed (trying it again first) and goes on."""
    response, sink = execute(adapter("broken_tool_crew"), request("1 and 1"))
    tools = sink.of(ToolCallEvent)
    assert tools and all(
        (t.tool, t.input, t.status, t.error)
        == ("broken_tool", {"reason": "test"}, "error", "RuntimeError: broken on purpose: test")
        for t in tools
    )
    assert response.metrics.tool_calls == len(tools)
    assert artifact(response, "output.md").content == "I could not compute it."


def test_a_tool_that_reports_a_failure_is_a_failed_tool_call(crews: ModuleType) -> None:
    """A tool that returns a ToolFailure, and (with native function calling) a tool the model
    made up, which CrewAI reports as a failed call."""
    response, sink = execute(adapter("failing_lookup_crew"))
    assert [(t.tool, t.input, t.output, t.status, t.error) for t in sink.of(ToolCallEvent)] == [
        ("lookup", {"key": "k"}, "no entry k", "error", "no entry k"),
        ("no_such_tool", {}, "Tool not found", "error", "Tool not found"),
    ]
    assert response.status == "completed" and response.metrics.tool_calls == 2


def test_a_tool_that_exits_is_a_failed_tool_call(crews: ModuleType) -> None:
    """A tool that raises what CrewAI does not catch (sys.exit): CrewAI still reports the call
    finished, with no output; it is a failed call, and the SystemExit fails the run."""
    error, sink = failure(adapter("exiting_tool_crew"))
    line = line_of("sys.exit(code)")
    says(error.message, f"{MODULE}:exiting_tool_crew", "sys.exit(3)", f"{MODULE}.py:{line}")
    assert [(t.tool, t.input, t.output, t.status, t.error) for t in sink.of(ToolCallEvent)] == [
        ("exit_tool", {"code": 3}, None, "error", "the tool did not return")
    ]
    error, sink = failure(adapter("interrupting_tool_crew"))  # (not ATP's Ctrl-C: the crew's own)
    line = line_of("raise KeyboardInterrupt(why)")
    says(error.message, f"{MODULE}:interrupting_tool_crew", "KeyboardInterrupt: no", f"{MODULE}.py:{line}")
    assert [(t.tool, t.status, t.error) for t in sink.of(ToolCallEvent)] == [
        ("interrupt_tool", "error", "the tool did not return")
    ]
    assert [(e.error_type, e.recoverable) for e in sink.of(ErrorEvent)] == [("KeyboardInterrupt", False)]


def test_a_made_up_tool_is_a_recoverable_error(crews: ModuleType) -> None:
    """In CrewAI's text format, a tool that does not exist is no call: CrewAI reports (several
    times) that it cannot select it, which is one recoverable error event."""
    response, sink = execute(adapter("made_up_tool_crew"))
    assert not sink.of(ToolCallEvent) and response.metrics.tool_calls == 0
    (error,) = sink.of(ErrorEvent)
    assert (error.error_type, error.recoverable) == ("tool_selection_error", True)
    assert error.message.startswith("no_such_tool: Action 'no_such_tool' don't exist")
    assert artifact(response, "output.md").content == "Gave up."


def test_a_crew_asking_for_human_input_is_refused(crews: ModuleType) -> None:
    """A task with human_input=True would have CrewAI read ATP's standard input: the run is
    refused before the kickoff (no model call); the crew's memory, which outlives the run, is
    a warning."""
    error, sink = failure(adapter("human_input_crew"))
    says(
        error.message,
        f"{MODULE}:human_input_crew",
        "human_input=True",
        "'square'",
        "standard input",
        "human_input=False",
    )
    assert [(e.error_type, e.recoverable) for e in sink.of(ErrorEvent)] == [("human_input", False)]
    assert not sink.of(LLMRequestEvent)
    (warning,) = sink.warnings
    says(warning, f"{MODULE}:human_input_crew", "memory", "/memory", "kept across runs")


def test_a_factory_that_raises_or_returns_no_crew_fails_the_run(crews: ModuleType) -> None:
    error, sink = failure(adapter("factory_raises"))
    line = line_of('raise ValueError("no crew today")')
    says(
        error.message, f"factory {MODULE}:factory_raises", "ValueError: no crew today", f"{MODULE}.py:{line}"
    )
    assert [(e.error_type, e.recoverable) for e in sink.of(ErrorEvent)] == [("ValueError", False)]
    error, sink = failure(adapter("not_a_crew"))
    says(
        error.message, f"factory {MODULE}:not_a_crew", "dict {'agents': [], 'tasks': []}", "not a crewai Crew"
    )
    assert [e.error_type for e in sink.of(ErrorEvent)] == ["TypeError"]


# --- inputs ----------------------------------------------------------------------------------


def test_the_default_inputs_are_the_description_and_the_input_data(crews: ModuleType) -> None:
    response, _ = execute(adapter("calculator_crew"), request("3 and 4"))
    assert artifact(response, "output.md").content == "The result is 49."
    response, _ = execute(adapter("calculator_crew"), request("3 and 4", task="4 and 5"))  # input_data wins
    assert artifact(response, "output.md").content == "The result is 81."


def test_an_input_mapper_makes_the_inputs(crews: ModuleType) -> None:
    target = adapter("calculator_crew", input_mapper=f"{MODULE}:numbers_from_input")
    response, sink = execute(target, request("ignored", a=6, b=1))
    assert artifact(response, "output.md").content == "The result is 49."
    assert sink.of(ToolCallEvent)[0].input == {"a": 6, "b": 1}
    error, sink = failure(adapter("calculator_crew", input_mapper=f"{MODULE}:inputs_not_a_dict"))
    says(error.message, f"input mapper {MODULE}:inputs_not_a_dict", "list ['not', 'a', 'dict']", "not a dict")
    error, _ = failure(adapter("calculator_crew", input_mapper=f"{MODULE}:numbers_from_input"), request("x"))
    says(error.message, f"input mapper {MODULE}:numbers_from_input", "KeyError: 'a'", f"{MODULE}.py:")


# --- runs at the same time -------------------------------------------------------------------


def run_together(target: CrewAIAdapter, *requests: ATPRequest) -> list[tuple[ATPResponse, Sink]]:
    results: list[tuple[ATPResponse, Sink] | None] = [None] * len(requests)

    async def one(index: int, req: ATPRequest) -> None:
        sink = Sink()
        results[index] = (await target.execute(req, sink), sink)

    async def go() -> None:
        await target.start()
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for index, req in enumerate(requests):
                    group.start_soon(one, index, req)

    anyio.run(go)
    return [result for result in results if result is not None]


@pytest.mark.parametrize("scoped", [True, False], ids=["stream-sinks", "bus-handlers"])
def test_runs_at_the_same_time_keep_their_events_apart(crews: ModuleType, scoped: bool) -> None:
    """Two runs whose tool waits for the other (both in flight at once): each run's events are
    its own. With CrewAI's scoped stream sinks, and with the handlers on the global bus that
    older CrewAI versions need (filtered by the run's execution context)."""
    target = adapter("meeting_crew")
    anyio.run(target.start)
    if not scoped:
        target.crewai = _CrewAI(stream_sinks=False)
        assert not target.crewai.scoped
    first, second = request("2 and 3"), request("10 and 20")
    (one, one_sink), (two, two_sink) = run_together(target, first, second)
    for req, response, sink, a, b in ((first, one, one_sink, 2, 3), (second, two, two_sink, 10, 20)):
        assert {event.task_id for event in sink.got} == {req.task_id}
        assert [event.sequence for event in sink.got] == list(range(len(sink.got)))
        calls = sorted((t.tool, json.dumps(t.input), t.output) for t in sink.of(ToolCallEvent))
        assert calls == [
            ("add", json.dumps({"a": a, "b": b}), str(a + b)),
            ("meet", json.dumps({"who": f"run {a}"}), f"met while working for run {a}"),
        ]
        assert len(sink.of(LLMRequestEvent)) == 3 and len(sink.of(ProgressEvent)) == 1
        assert artifact(response, "output.md").content == f"The sum is {a + b}."
        assert (response.metrics.llm_calls, response.metrics.tool_calls, response.metrics.input_tokens) == (
            3,
            2,
            300,
        )
        if scoped:
            assert [t.tool for t in sink.of(ToolCallEvent)] == ["meet", "add"]


def test_a_model_shared_by_the_runs_counts_each_run_alone(crews: ModuleType) -> None:
    """The crew's own token accounting is its LLM objects' lifetime totals; a run's metrics
    are what its own LLM calls reported, however many runs the model served before."""
    target = adapter("shared_llm_crew")
    for _ in range(2):
        response, _ = execute(target)
        assert (
            response.metrics.input_tokens,
            response.metrics.output_tokens,
            response.metrics.llm_calls,
        ) == (300, 60, 3)
    assert crews.SHARED_LLM.get_token_usage_summary().prompt_tokens >= 600


def test_without_llm_call_events_the_metrics_are_the_crews_accounting(crews: ModuleType) -> None:
    """A model that emits no LLM call events: no llm_request events, and the metrics are what
    the crew's token accounting grew by during the run."""
    response, sink = execute(adapter("quiet_crew"))
    assert not sink.of(LLMRequestEvent) and len(sink.of(ToolCallEvent)) == 2
    metrics = response.metrics
    assert (metrics.llm_calls, metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (
        3,
        300,
        60,
        360,
    )
    assert (metrics.tool_calls, metrics.total_steps) == (2, None)


def test_runs_of_a_crew_object_take_turns(crews: ModuleType) -> None:
    target = adapter("shared_crew")
    results = run_together(target, request("1 and 1"), request("2 and 2"))
    assert sorted(artifact(response, "output.md").content for response, _ in results) == [
        "The result is 16.",
        "The result is 4.",
    ]
    assert all(response.metrics.input_tokens == 300 for response, _ in results)


# --- time limits -----------------------------------------------------------------------------


def run_until(target: CrewAIAdapter, seconds: float, req: ATPRequest) -> Sink:
    """A run cancelled after ``seconds`` (as the platform's time limit cancels it)."""
    sink = Sink()

    async def go() -> None:
        await target.start()
        with anyio.move_on_after(seconds) as scope:
            await target.execute(req, sink)
        assert scope.cancelled_caught

    anyio.run(go)
    return sink


def test_a_run_that_times_out_records_nothing_more(crews: ModuleType) -> None:
    """The crew's thread cannot be stopped: it runs on, released after the time limit, and
    what it reports then reaches neither its run nor the next one."""
    target = adapter("slow_crew")
    slow = request("1 and 1")
    sink = run_until(target, 1.0, slow)
    assert sink.warnings == [
        f"the crew {MODULE}:slow_crew was still running when its run ended; Python cannot stop a thread, "
        f"so it runs on in the background (what it does from now on is not recorded)"
    ]
    before = list(sink.got)
    assert [event.event_type for event in before] == ["state_change", "llm_request"]
    crews.RELEASES["factory"].set()
    assert crews.FINISHED["factory"].wait(30)
    time.sleep(0.3)  # the abandoned crew's last events
    assert sink.got == before
    response, after = execute(target, request("1 and 1"))  # released: this run goes through
    assert {event.task_id for event in after.got} == {response.task_id}
    assert [t.output for t in after.of(ToolCallEvent)] == ["released: factory"]


def test_a_crew_object_still_running_after_its_time_limit_refuses_the_next_run(crews: ModuleType) -> None:
    target = adapter("slow_shared_crew")
    run_until(target, 1.0, request())
    error, sink = failure(target)
    says(error.message, f"{MODULE}:slow_shared_crew", "still running", "timed out", "make 'crew' a function")
    assert [(e.error_type, e.recoverable) for e in sink.of(ErrorEvent)] == [("crew_busy", False)]
    crews.RELEASES["shared"].set()
    assert crews.FINISHED["shared"].wait(30)
    time.sleep(0.3)
    response, _ = execute(target)
    assert response.status == "completed"


class LimitedSink(Sink):
    """A sink that takes ``limit`` events, then raises the run's flood error (as ATP's does)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def events(self, events: Any, raw: bytes | None = None) -> None:
        room = self.limit - len(self.got)
        self.got.extend(list(events)[:room])
        if len(events) > room:
            raise TraceLimitExceeded(f"agent flooded ATP with events: more than {self.limit} in one run")

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.events([event])


def test_a_flood_of_events_ends_the_run_at_once(crews: ModuleType) -> None:
    """More events than the run may hold end the run then, with the flood error, not when the
    kickoff returns (this crew's would wait a minute): its thread is abandoned as at a time
    limit, and what it does from then on is not recorded."""
    target = adapter("flood_crew")
    sink = LimitedSink(20)

    async def go() -> None:
        await target.start()
        await target.execute(request(), sink)

    started = time.monotonic()
    try:
        with pytest.raises(TraceLimitExceeded) as caught:
            anyio.run(go)
        assert time.monotonic() - started < 20
        assert not crews.FINISHED["flood"].is_set()
    finally:
        crews.RELEASES["flood"].set()
    says(str(caught.value), "flooded", "events", "more than 20")
    assert sink.warnings == [
        f"the crew {MODULE}:flood_crew was still running when its run ended; Python cannot stop a thread, "
        f"so it runs on in the background (what it does from now on is not recorded)"
    ]
    before = list(sink.got)
    assert len(before) == 20
    assert crews.FINISHED["flood"].wait(30)
    time.sleep(0.3)  # the abandoned crew's last events
    assert sink.got == before


# --- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"module": "crews/my_crew.py", "crew": "build"},
            "'module' names a module, not a file: 'crews/my_crew.py' is a path. Write the module's name ('my_crew')",
        ),
        (
            {"module": "my_crew:build", "crew": "build"},
            "'module' 'my_crew:build' holds a ':'; the module and the crew are two settings (write module: my_crew and crew: build)",
        ),
        (
            {"module": "my_crew", "crew": "build crew"},
            "'crew' 'build crew' is not a valid Python name (dotted identifiers, like build_crew or crews.research)",
        ),
        (
            {"module": "my_crew", "crew": "build", "input_mapper": "inputs.map"},
            "'input_mapper' must be 'module:attribute'",
        ),
        ({"module": "my_crew", "crew": "build", "path": [""]}, "'path[0]' is empty"),
        ({"module": "my_crew"}, "Object missing required field `crew`"),
        ({"module": "my_crew", "crew": "build", "inputs": {}}, "Object contains unknown field `inputs`"),
    ],
)
def test_settings_are_checked_when_the_suite_loads(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(settings, CrewAISettings)
    assert message in str(caught.value)


def test_a_bad_setting_in_a_suite_is_located(tmp_path: Path, plugins: Plugins) -> None:
    text = (
        "test_suite: s\nagents:\n  - name: crew\n    type: crewai\n    module: my_crew.py\n    crew: build\n"
        "tests:\n  - id: t\n    task: {description: x}\n"
    )
    with pytest.raises(ConfigError) as caught:
        suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["crew"], plugins.adapters)
    assert str(caught.value).startswith(f"{tmp_path / 'suite.yaml'}:")
    assert "'module' names a module, not a file" in str(caught.value)


def test_what_cannot_be_used_stops_the_suite_at_start(crews: ModuleType) -> None:
    agent = "agent 'crew':"
    says(
        start_error("calculatr_crew"),
        agent,
        f"cannot import '{MODULE}:calculatr_crew'",
        f"{MODULE}.py",
        "no attribute 'calculatr_crew'",
        "did you mean 'calculator_crew'",
    )
    says(start_error("NOT_A_CREW"), agent, f"'crew' '{MODULE}:NOT_A_CREW'", "int 42", "not a crewai Crew")
    says(start_error("Crew"), agent, f"'crew' '{MODULE}:Crew'", "Crew class itself")
    says(
        start_error("needs_an_argument"),
        agent,
        f"'crew' '{MODULE}:needs_an_argument'",
        "no arguments",
        "(topic: 'str') -> 'Crew'",
    )
    says(
        start_error("calculator_crew", input_mapper=f"{MODULE}:mapper_without_parameters"),
        agent,
        f"'input_mapper' '{MODULE}:mapper_without_parameters'",
        "mapper_without_parameters(request)",
        "() -> 'dict[str, Any]'",
    )
    says(
        start_error("calculator_crew", input_mapper=f"{MODULE}:NOT_A_CREW"),
        agent,
        f"'input_mapper' '{MODULE}:NOT_A_CREW'",
        "int 42",
        "not a function",
    )
    missing = start_error("crew", module="no_such_crew_module")
    says(missing, agent, "cannot import 'no_such_crew_module:crew'", "no module named 'no_such_crew_module'")
    says(
        start_error("crew", path=["no_such_folder"]),
        agent,
        f"'path' folder {AGENTS / 'no_such_folder'}",
        "does not exist",
        f"relative to {AGENTS}",
    )


def test_a_crewai_too_old_to_tell_runs_apart_is_refused(
    crews: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import crewai

    monkeypatch.setattr(crewai, "__version__", "1.4.1")
    says(
        start_error("calculator_crew"),
        "agent 'crew'",
        "CrewAI 1.5 or newer",
        "1.4.1 is installed",
        "pip install --upgrade 'crewai>=1.5'",
    )


def test_importing_the_adapter_does_not_import_crewai() -> None:
    code = "import sys, atp.adapters.crewai, atp.adapters.plugin; print('crewai' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


def test_telemetry_is_off_unless_asked_for(crews: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first crewai agent started in the process decides (below: a fresh process each time)."""
    monkeypatch.delenv("CREWAI_DISABLE_TELEMETRY")
    monkeypatch.delenv("CREWAI_TRACING_ENABLED")
    monkeypatch.setattr(crewai_adapter, "_telemetry", None)
    anyio.run(adapter("calculator_crew", telemetry=True).start)
    assert "CREWAI_DISABLE_TELEMETRY" not in os.environ and "CREWAI_TRACING_ENABLED" not in os.environ
    monkeypatch.setattr(crewai_adapter, "_telemetry", None)
    anyio.run(adapter("calculator_crew").start)
    assert (
        os.environ["CREWAI_DISABLE_TELEMETRY"] == "true" and os.environ["CREWAI_TRACING_ENABLED"] == "false"
    )
    monkeypatch.setattr(crewai_adapter, "_telemetry", None)
    monkeypatch.setenv("CREWAI_TRACING_ENABLED", "true")  # the environment's own choice stays
    anyio.run(adapter("calculator_crew").start)
    assert os.environ["CREWAI_TRACING_ENABLED"] == "true"


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "atp.adapters.crewai"]


def test_the_first_crewai_agent_decides_about_telemetry(
    crews: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The variables are the process's: a later agent asking otherwise is warned, and changes
    nothing."""
    monkeypatch.delenv("CREWAI_DISABLE_TELEMETRY")
    monkeypatch.delenv("CREWAI_TRACING_ENABLED")
    monkeypatch.setattr(crewai_adapter, "_telemetry", None)
    anyio.run(
        CrewAIAdapter(
            CrewAISettings(module=MODULE, crew="calculator_crew"), name="first", base_dir=AGENTS
        ).start
    )
    anyio.run(adapter("calculator_crew").start)  # the same choice: nothing to say
    assert not warned(caplog)
    anyio.run(adapter("calculator_crew", telemetry=True).start)
    assert (
        os.environ["CREWAI_DISABLE_TELEMETRY"] == "true" and os.environ["CREWAI_TRACING_ENABLED"] == "false"
    )
    assert warned(caplog) == [
        "agent 'crew': 'telemetry: true' has no effect: CrewAI's telemetry and tracing were already switched off "
        "for this atp process by agent 'first', the first crewai agent started (the choice is the process's: "
        "run the suite by itself to change it)"
    ]
    monkeypatch.setattr(crewai_adapter, "_telemetry", None)
    monkeypatch.delenv("CREWAI_DISABLE_TELEMETRY")
    monkeypatch.delenv("CREWAI_TRACING_ENABLED")
    caplog.clear()
    anyio.run(
        CrewAIAdapter(
            CrewAISettings(module=MODULE, crew="calculator_crew", telemetry=True),
            name="first",
            base_dir=AGENTS,
        ).start
    )
    anyio.run(adapter("calculator_crew").start)
    assert "CREWAI_DISABLE_TELEMETRY" not in os.environ and "CREWAI_TRACING_ENABLED" not in os.environ
    assert warned(caplog) == [
        "agent 'crew': 'telemetry: false' has no effect: CrewAI's telemetry and tracing were already left as the "
        "environment has them for this atp process by agent 'first', the first crewai agent started (the choice "
        "is the process's: run the suite by itself to change it)"
    ]


def test_the_kernel_resolves_the_agent(tmp_path: Path, plugins: Plugins) -> None:
    text = (
        f"test_suite: s\nagents:\n  - name: crew\n    type: crewai\n    module: {MODULE}\n    crew: calculator_crew\n"
        f"    path: [{AGENTS}]\n    timeout: 30\ntests:\n  - id: t\n    task: {{description: x}}\n"
    )
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    resolved = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["crew"], plugins.adapters)
    assert resolved.settings == CrewAISettings(module=MODULE, crew="calculator_crew", path=[str(AGENTS)])
    assert resolved.timeout == 30


@pytest.mark.parametrize(
    ("factory", "raised"),
    [("factory_interrupts", "KeyboardInterrupt"), ("factory_odd", "Odd: no crew, oddly")],
)
def test_a_factory_raising_what_is_not_an_exception_fails_its_run_only(
    crews: ModuleType, factory: str, raised: str
) -> None:
    """(issue 26, kind 4) Not an interruption of ATP: the run's failure, named."""
    error, _ = failure(adapter(factory))
    says(error.message, f"factory {MODULE}:{factory}", raised)
