"""The ``python`` adapter (atp.adapters.python): an agent that is a Python callable run inside
ATP. Most agents here are functions of this module (``callable: tests.unit.test_python_adapter:NAME``);
the import tests write modules of their own into the test's folder."""

from __future__ import annotations

import os
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from atp.adapters.python import Emit, PythonAdapter, PythonSettings, RunEnded
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, ConfigError
from atp.core.plugins import Plugins
from atp.core.protocol import (
    PROTOCOL_VERSION,
    ATPRequest,
    ATPResponse,
    Event,
    Metrics,
    ProgressEvent,
    ProgressPayload,
    StructuredArtifact,
    Task,
    ToolCallEvent,
    ToolCallPayload,
    UnknownEvent,
    make_event,
)
from atp.core.results import SuiteResults
from atp.core.runner import Runner
from atp.core.suite import load_suite
from tests.conftest import write
from tests.facts import says

HERE = "tests.unit.test_python_adapter"
THIS_FILE = os.path.abspath(__file__)


# --- agents ----------------------------------------------------------------------------------


def answer(request: ATPRequest, **data: Any) -> ATPResponse:
    return ATPResponse(
        version=PROTOCOL_VERSION,
        task_id=request.task_id,
        status="completed",
        artifacts=[StructuredArtifact(name="result", data=data or {"answer": 42})],
        metrics=Metrics(),
    )


def sync_agent(request: ATPRequest, emit: Emit) -> ATPResponse:
    emit(make_event(request.task_id, 0, ToolCallPayload(tool="web_search")))
    return answer(request, thread=threading.current_thread().name)


async def async_agent(request: ATPRequest, emit: Emit) -> ATPResponse:
    await anyio.sleep(0)
    emit({"event_type": "tool_call", "payload": {"tool": "web_search"}})
    return answer(request, thread=threading.current_thread().name)


def emits_dicts(request: ATPRequest, emit: Emit) -> dict[str, Any]:
    emit({"event_type": "progress", "payload": {"message": "half way", "percentage": 50}})
    emit({"event_type": "tool_call", "payload": {"tool": "web_search"}})
    emit(make_event(request.task_id, 7, ProgressPayload(current_step=2)))  # its own number
    emit({"event_type": "custom_thing", "payload": {"x": 1}})  # a newer minor version's type
    emit({"event_type": "progress", "payload": {}, "sequence": 20, "timestamp": "2024-01-02T03:04:05Z"})
    emit({"event_type": "progress", "payload": {}})
    return {
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {}}],
        "metrics": {},
    }


def emits_from_its_own_thread(request: ATPRequest, emit: Emit) -> ATPResponse:
    worker = threading.Thread(
        target=emit, args=({"event_type": "tool_call", "payload": {"tool": "web_search"}},)
    )
    worker.start()
    worker.join(10)
    return answer(request)


async def emits_from_a_thread_of_an_async_agent(request: ATPRequest, emit: Emit) -> ATPResponse:
    await anyio.to_thread.run_sync(emit, {"event_type": "tool_call", "payload": {"tool": "web_search"}})
    return answer(request)


def returns_dict(request: ATPRequest, emit: Emit) -> dict[str, Any]:
    return {
        "status": "completed",
        "artifacts": [{"type": "structured", "name": "result", "data": {"a": 1}}],
        "metrics": {"total_steps": 3},
    }


def returns_none(request: ATPRequest, emit: Emit) -> None:
    return None


def returns_text(request: ATPRequest, emit: Emit) -> str:
    return "the answer is 42"


def returns_bad_status(request: ATPRequest, emit: Emit) -> dict[str, Any]:
    return {"status": "done", "artifacts": [], "metrics": {}}


def returns_no_metrics(request: ATPRequest, emit: Emit) -> dict[str, Any]:
    return {"status": "completed", "artifacts": []}


def returns_wrong_major(request: ATPRequest, emit: Emit) -> dict[str, Any]:
    return {"version": "2.0", "status": "completed", "artifacts": [], "metrics": {}}


def returns_unencodable(request: ATPRequest, emit: Emit) -> ATPResponse:
    return answer(request, thing=object())


def raises(request: ATPRequest, emit: Emit) -> ATPResponse:
    helper()
    raise AssertionError("unreachable")


def helper() -> None:
    raise ValueError("the model said no")


def raises_agent_error(request: ATPRequest, emit: Emit) -> ATPResponse:
    raise AgentError("gave up politely", evidence="the evidence")


def raises_adapter_error(request: ATPRequest, emit: Emit) -> ATPResponse:
    raise AdapterError("cannot connect to the model")


def exits(request: ATPRequest, emit: Emit) -> ATPResponse:
    sys.exit(3)


def emits_garbage(request: ATPRequest, emit: Emit) -> ATPResponse:
    try:
        emit({"event_type": "tool_call", "payload": {"name": "web_search"}})  # 'tool' is missing
    except Exception:
        pass  # an agent that swallows the error does not hide it
    return answer(request)


def emits_a_string(request: ATPRequest, emit: Emit) -> ATPResponse:
    emit("searching the web")  # type: ignore[arg-type]
    return answer(request)


def emits_unencodable(request: ATPRequest, emit: Emit) -> ATPResponse:
    emit({"event_type": "tool_call", "payload": {"tool": "x", "input": object()}})
    return answer(request)


def floods(request: ATPRequest, emit: Emit) -> ATPResponse:
    for _ in range(100):
        emit({"event_type": "progress", "payload": {}})
    return answer(request)


class Agent:
    def __init__(self) -> None:
        self.calls = 0

    def run(self, request: ATPRequest, emit: Emit) -> ATPResponse:
        self.calls += 1
        return answer(request, calls=self.calls)

    async def __call__(self, request: ATPRequest, emit: Emit) -> ATPResponse:
        return answer(request, thread=threading.current_thread().name)


agent = Agent()
NOT_CALLABLE = 42


async def sleeps_forever(request: ATPRequest, emit: Emit) -> ATPResponse:
    emit({"event_type": "tool_call", "payload": {"tool": "web_search"}})
    try:
        await anyio.sleep(3600)
    finally:
        CANCELLED.append(request.task_id)
    raise AssertionError("unreachable")


CANCELLED: list[str] = []


def mutates_the_request(request: ATPRequest, emit: Emit) -> ATPResponse:
    request.task.description = "something else"
    return answer(request)


def returns_a_coroutine(request: ATPRequest, emit: Emit) -> Any:
    return async_agent(request, emit)


# Two plain functions that can only both finish when they run at the same time.
BARRIER = threading.Barrier(2)


def meets_the_other(request: ATPRequest, emit: Emit) -> ATPResponse:
    BARRIER.wait(timeout=20)
    return answer(request)


RELEASE = threading.Event()
LATE: list[BaseException | None] = []
"""What ``emit`` did for the function that outlived its run."""


def slow_or_fast(request: ATPRequest, emit: Emit) -> ATPResponse:
    if request.task.input_data and request.task.input_data.get("slow"):
        emit({"event_type": "progress", "payload": {"message": "started"}})
        RELEASE.wait(60)
        try:
            emit({"event_type": "progress", "payload": {"message": "too late"}})
        except BaseException as exc:
            LATE.append(exc)
        else:
            LATE.append(None)
    return answer(request)


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def restore_sys_path() -> Iterator[None]:
    """The adapter puts folders on sys.path and imports modules: undo both after each test."""
    path = list(sys.path)
    modules = set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if name.startswith("agent_"):
            del sys.modules[name]


def module(folder: Path, source: str, name: str | None = None) -> str:
    """A module of a name of its own (modules are imported once per process) in ``folder``."""
    name = name or f"agent_{uuid.uuid4().hex[:10]}"
    write(folder / f"{name}.py", source)
    return name


def request(description: str = "do it") -> ATPRequest:
    return ATPRequest(version=PROTOCOL_VERSION, task_id=str(uuid.uuid4()), task=Task(description=description))


class Sink:
    def __init__(self) -> None:
        self.received: list[tuple[Event, bytes | None]] = []
        self.threads: list[int] = []
        """The thread each event was delivered in."""
        self.lines: list[str] = []
        self.warnings: list[str] = []

    @property
    def got(self) -> list[Event]:
        return [event for event, _ in self.received]

    def event(self, event: Event, raw: bytes | None = None) -> None:
        self.received.append((event, raw))
        self.threads.append(threading.get_ident())

    def events(self, events: Any, raw: bytes | None = None) -> None:
        for event in events:
            self.event(event)

    def log(self, line: str) -> None:
        self.lines.append(line)

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def adapter(callable_: str, base_dir: Path, **settings: Any) -> PythonAdapter:
    return PythonAdapter(
        msgspec.convert({"callable": callable_, **settings}, PythonSettings),
        name="my-agent",
        base_dir=base_dir,
    )


def execute(target: PythonAdapter, req: ATPRequest | None = None) -> tuple[ATPResponse, Sink]:
    sink = Sink()

    async def go() -> ATPResponse:
        await target.start()
        return await target.execute(req or request(), sink)

    return anyio.run(go), sink


def agent_error(callable_: str, tmp_path: Path) -> tuple[AgentError, Sink]:
    sink = Sink()

    async def go() -> None:
        target = adapter(callable_, tmp_path)
        await target.start()
        await target.execute(request(), sink)

    with pytest.raises(AgentError) as caught:
        anyio.run(go)
    return caught.value, sink


def start_error(callable_: str, tmp_path: Path, **settings: Any) -> str:
    with pytest.raises(AdapterError) as caught:
        anyio.run(adapter(callable_, tmp_path, **settings).start)
    return str(caught.value)


def suite_text(callable_: str, tests: str, extra: str = "") -> str:
    return (
        f"test_suite: python\nagents:\n  - name: agent\n    type: python\n    callable: {callable_}\n{extra}"
        f"tests:\n{tests}"
    )


ONE_TEST = """
  - id: only
    task: {description: "do it"}
    assertions:
      - {type: artifact_exists, config: {name: result}}
      - {type: must_use_tools, config: {tools: [web_search]}}
"""


def run(tmp_path: Path, plugins: Plugins, text: str, **options: Any) -> tuple[SuiteResults, Runner]:
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    resolved = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, resolved, run_root=tmp_path / "runs", **options)
    return anyio.run(runner.run), runner


# --- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"callable": "my_agent"}, "'callable' must be 'module:attribute' (like my_agent:run"),
        (
            {"callable": "my_agent.run"},
            "a ':' separates the module from the function (did you mean 'my_agent:run'?)",
        ),
        (
            {"callable": "agents/my_agent.py:run"},
            "'callable' names a module, not a file: 'agents/my_agent.py' is a path. Write the module's name ('my_agent:run') and put its folder in 'path'",
        ),
        ({"callable": ":run"}, "'callable' ':run' has no module before the ':'"),
        ({"callable": "my_agent:"}, "'callable' 'my_agent:' has no attribute after the ':'"),
        ({"callable": "a:b:c"}, "'callable' 'a:b:c' has more than one ':'"),
        ({"callable": "my-agent:run"}, "'callable' 'my-agent:run': 'my-agent' is not a valid module name"),
        ({"callable": "my_agent:Agent..run"}, "'Agent..run' is not a valid attribute name"),
        ({"callable": "my_agent:run", "path": [""]}, "'path[0]' is empty"),
        ({"callable": "my_agent:run", "path": ["a\0b"]}, "'path[0]' holds a NUL byte"),
        ({"callable": "my_agent:run", "function": "x"}, "unknown field `function`"),
        ({"callable": 42}, "Expected `str`, got `int`"),
        ({}, "missing required field `callable`"),
    ],
)
def test_settings_are_checked_when_the_suite_loads(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(settings, PythonSettings)
    assert message in str(caught.value)


def test_good_settings(tmp_path: Path) -> None:
    settings = msgspec.convert(
        {"callable": "my_pkg.agent:Agent.run", "path": ["src", "/abs"]}, PythonSettings
    )
    assert settings.callable == "my_pkg.agent:Agent.run" and settings.path == ["src", "/abs"]
    assert msgspec.convert({"callable": "m:f"}, PythonSettings).path == []


def test_a_bad_callable_in_a_suite_is_located(tmp_path: Path, plugins: Plugins) -> None:
    with pytest.raises(ConfigError) as caught:
        run(tmp_path, plugins, suite_text("my_agent.run", ONE_TEST))
    assert str(caught.value).startswith(f"{tmp_path / 'suite.yaml'}:")
    assert "did you mean 'my_agent:run'?" in str(caught.value)


def test_the_common_keys_are_not_settings(tmp_path: Path, plugins: Plugins) -> None:
    """name, type and timeout are the kernel's (COMMON_AGENT_KEYS); the settings never see them."""
    suite = load_suite(
        write(tmp_path / "suite.yaml", suite_text(f"{HERE}:sync_agent", ONE_TEST, "    timeout: 5\n")),
        plugins.evaluators,
    )
    resolved = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    assert resolved.settings == PythonSettings(callable=f"{HERE}:sync_agent") and resolved.timeout == 5


def test_the_plugin_registers_python_and_not_the_testing_helper() -> None:
    import atp.adapters.plugin

    plugins = Plugins(entry_points=False)
    plugins.register(atp.adapters.plugin, name="adapters")
    assert set(plugins.adapters) == {
        "cli",
        "python",
        "http",
        "websocket",
        "grpc",
        "container",
        "langgraph",
        "crewai",
        "term-sdk",
        "agent-interface",
    }  # not "function"
    assert plugins.adapters["python"] is PythonAdapter


# --- running ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sync_agent", "async_agent"])
def test_sync_and_async_agents_pass_through_the_runner(tmp_path: Path, plugins: Plugins, name: str) -> None:
    results, runner = run(tmp_path, plugins, suite_text(f"{HERE}:{name}", ONE_TEST))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "passed" and run_.score == 100.0, run_.error
    assert run_.trace.tool_calls == {"web_search": 1}
    assert runner.store is not None
    [event] = list(runner.store.events(run_))
    assert isinstance(event, ToolCallEvent) and event.task_id == run_.task_id and event.sequence == 0


def test_a_plain_function_runs_in_a_worker_thread_and_an_async_one_on_the_loop(tmp_path: Path) -> None:
    loop_thread = threading.current_thread().name  # anyio.run runs the loop in this thread
    response, _ = execute(adapter(f"{HERE}:sync_agent", tmp_path))
    assert isinstance(response.artifacts[0], StructuredArtifact)
    assert response.artifacts[0].data["thread"] != loop_thread
    response, _ = execute(adapter(f"{HERE}:async_agent", tmp_path))
    assert isinstance(response.artifacts[0], StructuredArtifact)
    assert response.artifacts[0].data["thread"] == loop_thread
    # an object whose __call__ is async is awaited on the loop too
    response, _ = execute(adapter(f"{HERE}:agent", tmp_path))
    assert isinstance(response.artifacts[0], StructuredArtifact)
    assert response.artifacts[0].data["thread"] == loop_thread


def test_a_dotted_attribute_names_a_method_of_an_object(tmp_path: Path) -> None:
    target = adapter(f"{HERE}:agent.run", tmp_path)
    first, _ = execute(target)
    assert isinstance(first.artifacts[0], StructuredArtifact) and first.artifacts[0].data["calls"] >= 1


def test_a_coroutine_returned_by_a_plain_function_is_awaited(tmp_path: Path) -> None:
    response, sink = execute(adapter(f"{HERE}:returns_a_coroutine", tmp_path))
    assert response.status == "completed" and [type(e) for e in sink.got] == [ToolCallEvent]


def test_emit_fills_in_the_defaults_of_a_dict(tmp_path: Path) -> None:
    req = request()
    before = datetime.now(timezone.utc)
    response, sink = execute(adapter(f"{HERE}:emits_dicts", tmp_path), req)
    after = datetime.now(timezone.utc)
    events = sink.got
    assert [type(e) for e in events] == [
        ProgressEvent,
        ToolCallEvent,
        ProgressEvent,
        UnknownEvent,
        ProgressEvent,
        ProgressEvent,
    ]
    # counting from 0; an event's own number is kept and the count goes on after it
    assert [e.sequence for e in events] == [0, 1, 7, 8, 20, 21]
    assert all(e.version == PROTOCOL_VERSION and e.task_id == req.task_id for e in events)
    assert all(before <= e.timestamp <= after for e in events if e.sequence != 20)
    assert events[4].timestamp == datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert isinstance(events[0], ProgressEvent)
    assert events[0].payload == ProgressPayload(message="half way", percentage=50)
    assert isinstance(events[3], UnknownEvent) and events[3].event_type == "custom_thing"
    # the sink gets the JSON text too (nothing is encoded twice)
    raw = sink.received[0][1]
    assert raw is not None and b'"message":"half way"' in raw
    assert response.status == "completed" and response.task_id == req.task_id


def test_each_run_counts_its_events_from_zero(tmp_path: Path, plugins: Plugins) -> None:
    tests = ONE_TEST + ONE_TEST.replace("id: only", "id: second")
    results, runner = run(tmp_path, plugins, suite_text(f"{HERE}:emits_dicts", tests))
    assert runner.store is not None
    for test in results.tests:
        assert [e.sequence for e in runner.store.events(test.runs[0])] == [0, 1, 7, 8, 20, 21]


@pytest.mark.parametrize("name", ["emits_from_its_own_thread", "emits_from_a_thread_of_an_async_agent"])
def test_emit_from_any_thread_reaches_the_sink_on_the_loop(tmp_path: Path, name: str) -> None:
    response, sink = execute(adapter(f"{HERE}:{name}", tmp_path))
    assert response.status == "completed" and [type(e) for e in sink.got] == [ToolCallEvent]
    assert sink.threads == [threading.get_ident()]  # (anyio.run runs the event loop in this thread)


def test_the_agent_gets_a_copy_of_the_request(tmp_path: Path) -> None:
    req = request("the task")
    response, _ = execute(adapter(f"{HERE}:mutates_the_request", tmp_path), req)
    assert response.task_id == req.task_id and req.task.description == "the task"


def test_a_dict_response_is_decoded_with_the_requests_version_and_task_id(tmp_path: Path) -> None:
    req = request()
    response, _ = execute(adapter(f"{HERE}:returns_dict", tmp_path), req)
    assert response == ATPResponse(
        version=PROTOCOL_VERSION,
        task_id=req.task_id,
        status="completed",
        artifacts=[StructuredArtifact(name="result", data={"a": 1})],
        metrics=Metrics(total_steps=3),
    )


@pytest.mark.parametrize(
    ("name", "message", "evidence"),
    [
        (
            "returns_none",
            "the agent function {HERE}:returns_none returned None, not an ATPResponse or a dict of one",
            "None",
        ),
        (
            "returns_text",
            "returned str 'the answer is 42', not an ATPResponse or a dict of one",
            "'the answer is 42'",
        ),
        (
            "returns_bad_status",
            "returned a dict that is not a valid ATP response (ATP response: Invalid enum value 'done' (allowed: "
            "'completed', 'failed', 'timeout', 'cancelled' or 'partial') - at `$.status`)",
            b'"status":"done"',
        ),
        (
            "returns_no_metrics",
            "returned a dict that is not a valid ATP response (ATP response: Object missing required field `metrics`)",
            b'"artifacts":[]',
        ),
        (
            "returns_wrong_major",
            "returned a dict that is not a valid ATP response (ATP response: protocol version 2.0 is not supported",
            b'"version":"2.0"',
        ),
        (
            "returns_unencodable",
            "returned a response that cannot be written as JSON (TypeError: ",
            "object object at",
        ),
    ],
)
def test_what_is_not_a_response_fails_the_run_with_the_value_as_evidence(
    tmp_path: Path, name: str, message: str, evidence: str | bytes
) -> None:
    error, _ = agent_error(f"{HERE}:{name}", tmp_path)
    assert message.replace("{HERE}", HERE) in str(error)
    assert error.evidence is not None and evidence in error.evidence  # type: ignore[operator]


def test_an_exception_fails_the_run_naming_it_with_the_traceback_in_the_log(tmp_path: Path) -> None:
    error, sink = agent_error(f"{HERE}:raises", tmp_path)
    line = helper.__code__.co_firstlineno + 1
    says(str(error), f"agent function {HERE}:raises", "ValueError: the model said no", f"{THIS_FILE}:{line}")
    log = "\n".join(sink.lines)
    assert sink.lines[0] == "Traceback (most recent call last):"
    assert "in raises\n    helper()" in log and "in helper\n" in log
    assert sink.lines[-1] == "ValueError: the model said no"
    assert "anyio" not in log and "python.py" not in log  # ATP's own frames are left out


def test_the_reason_of_an_exception_is_located_in_the_agents_folder(tmp_path: Path) -> None:
    name = module(
        tmp_path,
        """
        def run(request, emit):
            import json
            return json.loads("{not json")
        """,
    )
    error, _ = agent_error(f"{name}:run", tmp_path)
    assert str(error).startswith(f"the agent function {name}:run raised JSONDecodeError: ")
    assert str(error).endswith(f", called from {name}.py:3)")
    assert "json/decoder.py:" in str(error)


def test_agent_and_adapter_errors_pass_through_unchanged(tmp_path: Path, plugins: Plugins) -> None:
    error, _ = agent_error(f"{HERE}:raises_agent_error", tmp_path)
    assert str(error) == "gave up politely" and error.evidence == "the evidence"
    results, _ = run(tmp_path, plugins, suite_text(f"{HERE}:raises_adapter_error", ONE_TEST))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "error" and run_.error == "cannot connect to the model"


def test_sys_exit_in_the_agent_fails_its_run_not_atp(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(tmp_path, plugins, suite_text(f"{HERE}:exits", ONE_TEST))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed" and run_.error is not None
    assert run_.error.startswith(f"the agent function {HERE}:exits called sys.exit(3) (at ")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "emits_garbage",
            "the agent emitted an event that is not a valid ATP event at {file}:{line} "
            "(ATP event: Object missing required field `tool` - at `$.payload`)",
        ),
        (
            "emits_a_string",
            "the agent called emit() with str 'searching the web' at {file}:{line} "
            "(emit() takes an ATP event, as atp.core.protocol.make_event builds one, or a dict of one)",
        ),
        (
            "emits_unencodable",
            "the agent emitted an event that cannot be written as JSON at {file}:{line} (TypeError: ",
        ),
    ],
)
def test_an_event_that_is_not_one_fails_the_run_even_when_the_agent_catches_it(
    tmp_path: Path, plugins: Plugins, name: str, message: str
) -> None:
    function = globals()[name]
    line = next(
        n
        for n, text in enumerate(Path(THIS_FILE).read_text().splitlines(), 1)
        if n > function.__code__.co_firstlineno and "emit(" in text
    )
    results, _ = run(tmp_path, plugins, suite_text(f"{HERE}:{name}", ONE_TEST))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed" and run_.status == "failed"
    assert run_.error is not None
    assert run_.error.startswith(message.format(file=THIS_FILE, line=line))


def test_an_event_flood_fails_the_run(tmp_path: Path, plugins: Plugins) -> None:
    results, _ = run(tmp_path, plugins, suite_text(f"{HERE}:floods", ONE_TEST), max_events=50)
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed"
    says(run_.error, "flooded", "events", "more than 50")
    assert run_.trace.events == 50


# --- importing -------------------------------------------------------------------------------


def test_the_agents_folder_is_importable_and_the_module_is_imported_once(
    tmp_path: Path, plugins: Plugins
) -> None:
    name = module(
        tmp_path,
        """
        import threading
        from atp.core.protocol import ATPResponse, Metrics, StructuredArtifact

        IMPORTS = []
        IMPORTS.append(threading.current_thread() is threading.main_thread())

        def run(request, emit):
            emit({"event_type": "tool_call", "payload": {"tool": "web_search"}})
            return ATPResponse(version="1.0", task_id=request.task_id, status="completed",
                               artifacts=[StructuredArtifact(name="result", data={})], metrics=Metrics())
        """,
    )
    results, _ = run(tmp_path, plugins, suite_text(f"{name}:run", ONE_TEST), runs=3)
    assert results.summary.passed == 1 and results.summary.runs == 3
    assert sys.modules[name].IMPORTS == [False]  # once, in a worker thread


def test_path_folders_go_first_on_sys_path(tmp_path: Path) -> None:
    name = f"agent_{uuid.uuid4().hex[:10]}"
    module(
        tmp_path / "src",
        "def run(request, emit):\n    return {'status': 'failed', 'artifacts': [], 'metrics': {}}\n",
        name,
    )
    module(tmp_path / "other", "X = 1\n", name)  # the same name, later on the path
    target = adapter(f"{name}:run", tmp_path, path=["src", "other"])
    response, _ = execute(target)
    assert response.status == "failed"
    assert sys.path[:3] == [str(tmp_path / "src"), str(tmp_path / "other"), str(tmp_path)]


def test_a_missing_path_folder_is_an_adapter_error(tmp_path: Path) -> None:
    message = start_error("my_agent:run", tmp_path, path=["src"])
    says(
        message,
        "agent 'my-agent'",
        f"'path' folder {tmp_path / 'src'}",
        "does not exist",
        f"relative to {tmp_path}",
    )


def test_a_module_not_found_names_the_folders_searched(tmp_path: Path) -> None:
    message = start_error("no_such_agent_module:run", tmp_path)
    says(
        message,
        "agent 'my-agent'",
        "cannot import 'no_such_agent_module:run'",
        "no module named 'no_such_agent_module'",
        f"{tmp_path} (the agent's folder)",
        "'path' setting",
        f"relative to {tmp_path}",
    )
    assert len(message) < 800


def test_a_missing_module_of_a_package_names_the_package(tmp_path: Path) -> None:
    package = f"agent_{uuid.uuid4().hex[:10]}"
    write(tmp_path / package / "__init__.py", "")
    message = start_error(f"{package}.nope:run", tmp_path)
    says(
        message,
        "agent 'my-agent'",
        f"cannot import '{package}.nope:run'",
        f"package '{package}' has no module 'nope'",
        str(tmp_path / package),
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "import os\nraise RuntimeError('no API key')\n",
            ("RuntimeError: no API key", "{name}.py:2"),
        ),
        (
            "def run(request, emit):\n    return (\n",
            ("SyntaxError: '(' was never closed", "{name}.py:2"),
        ),
        (
            "import no_such_dependency_anywhere\n",
            ("ModuleNotFoundError: No module named 'no_such_dependency_anywhere'", "{name}.py:1"),
        ),
        (
            "import sys\nsys.exit(2)\n",
            ("sys.exit(2)", "{name}.py:2", 'if __name__ == "__main__":'),
        ),
    ],
)
def test_a_module_that_raises_while_imported_is_an_adapter_error(
    tmp_path: Path, source: str, message: tuple[str, ...]
) -> None:
    name = module(tmp_path, source)
    says(
        start_error(f"{name}:run", tmp_path),
        "agent 'my-agent'",
        f"cannot import '{name}:run'",
        f"importing module '{name}'",
        *(fact.format(name=name) for fact in message),
    )


def test_the_error_names_the_library_line_and_the_agents_own(tmp_path: Path) -> None:
    name = module(tmp_path, "import json\nCONFIG = json.loads('{oops')\n")
    message = start_error(f"{name}:run", tmp_path)
    assert "raised JSONDecodeError: Expecting property name enclosed in double quotes" in message
    assert "json/decoder.py:" in message and message.endswith(f", called from {name}.py:2)")


def test_a_missing_attribute_says_what_is_there(tmp_path: Path) -> None:
    name = module(
        tmp_path, "from os.path import join\n\ndef run(request, emit): ...\n\ndef plan(request, emit): ...\n"
    )
    says(
        start_error(f"{name}:rnu", tmp_path),
        "agent 'my-agent'",
        f"cannot import '{name}:rnu'",
        f"{name}.py",
        "no attribute 'rnu'",
        "did you mean 'run'",
    )
    says(
        start_error(f"{name}:answer", tmp_path),
        "agent 'my-agent'",
        f"cannot import '{name}:answer'",
        f"{name}.py",
        "no attribute 'answer'",
        "plan, run",
    )
    says(
        start_error(f"{name}:run.inner", tmp_path),
        "agent 'my-agent'",
        f"cannot import '{name}:run.inner'",
        f"{name}:run has no attribute 'inner'",
    )


def test_what_is_not_callable_or_takes_other_arguments_is_an_adapter_error(tmp_path: Path) -> None:
    says(
        start_error(f"{HERE}:NOT_CALLABLE", tmp_path),
        "agent 'my-agent'",
        f"cannot call '{HERE}:NOT_CALLABLE'",
        "int 42",
        "not a function",
    )
    name = module(tmp_path, "def run(request): ...\n\nclass Agent:\n    def run(self, request, emit): ...\n")
    says(
        start_error(f"{name}:run", tmp_path),
        "agent 'my-agent'",
        f"cannot call '{name}:run'",
        "run(request, emit)",
        "(request)",
        "too many positional arguments",
    )
    says(
        start_error(f"{name}:Agent.run", tmp_path),
        "(self, request, emit)",
        "missing a required argument: 'emit'",
        "needs an instance",
        "module:agent.run",
    )


def test_an_import_failure_stops_the_suite_before_any_run(tmp_path: Path, plugins: Plugins) -> None:
    name = module(tmp_path, "raise ImportError('langgraph is not installed')\n")
    with pytest.raises(AdapterError, match="raised ImportError: langgraph is not installed"):
        run(tmp_path, plugins, suite_text(f"{name}:run", ONE_TEST))
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_artifacts_are_relative_to_the_working_folder_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = adapter(f"{HERE}:sync_agent", tmp_path / "elsewhere")
    anyio.run(target.start)
    assert target.artifact_dir(request()) == tmp_path


# --- threads and time limits -----------------------------------------------------------------


def test_plain_functions_run_at_the_same_time_with_parallel(tmp_path: Path, plugins: Plugins) -> None:
    """Each of the two runs waits for the other: they pass only when both run at once."""
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(2))
    BARRIER.reset()
    results, _ = run(tmp_path, plugins, suite_text(f"{HERE}:meets_the_other", tests), parallel=2)
    assert results.summary.passed == 2, [r.error for t in results.tests for r in t.runs]


def test_a_plain_function_does_not_block_the_event_loop(tmp_path: Path) -> None:
    """The function waits for what a task on the event loop does while it runs."""
    started, done = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def waits_for_the_loop(request: ATPRequest, emit: Emit) -> ATPResponse:
        started.set()
        seen["loop ran"] = done.wait(20)
        return answer(request)

    target = adapter(f"{HERE}:sync_agent", tmp_path)

    async def go() -> None:
        await target.start()
        target.function = waits_for_the_loop

        async def loop_work() -> None:
            while not started.is_set():
                await anyio.sleep(0.005)
            await anyio.sleep(0.01)
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(loop_work)
            await target.execute(request(), Sink())

    anyio.run(go)
    assert seen == {"loop ran": True}


def test_a_plain_function_outliving_its_timeout_is_abandoned(tmp_path: Path, plugins: Plugins) -> None:
    tests = (
        "  - id: slow\n    task: {description: x, input_data: {slow: true}}\n"
        "  - id: fast\n    task: {description: x}\n"
        "  - id: fast_too\n    task: {description: x}\n"
    )
    RELEASE.clear()
    LATE.clear()
    try:
        results, _ = run(
            tmp_path, plugins, suite_text(f"{HERE}:slow_or_fast", tests, "    timeout: 0.5\n"), parallel=2
        )
        # ATP is done while the function still waits in its thread
        assert not LATE
        slow, fast, fast_too = (t.runs[0] for t in results.tests)
        assert slow.status == "timeout"
        says(slow.error, "timed out after 0.5 s", "stopped")
        (warning,) = slow.warnings
        says(warning, f"{HERE}:slow_or_fast", "still running", "background", "RunEnded")
        assert slow.trace.events == 1  # what it sent in time is kept
        assert fast.outcome == fast_too.outcome == "passed"
    finally:
        RELEASE.set()
    for _ in range(2000):
        if LATE:
            break
        threading.Event().wait(0.01)
    assert len(LATE) == 1 and isinstance(LATE[0], RunEnded)


def test_an_async_function_is_cancelled_at_its_timeout(tmp_path: Path, plugins: Plugins) -> None:
    CANCELLED.clear()
    results, _ = run(tmp_path, plugins, suite_text(f"{HERE}:sleeps_forever", ONE_TEST, "    timeout: 0.3\n"))
    run_ = results.tests[0].runs[0]
    assert run_.status == "timeout"
    says(run_.error, "timed out after 0.3 s", "stopped")
    assert run_.warnings == [] and run_.trace.events == 1
    assert [run_.task_id] == CANCELLED  # its finally ran: it was stopped, not abandoned


def test_emit_raises_run_ended_once_the_run_is_over(tmp_path: Path) -> None:
    """While ATP still runs: the abandoned function's next emit reaches the loop and is refused."""
    release, outcome = threading.Event(), []
    sink = Sink()

    def lingers(request: ATPRequest, emit: Emit) -> ATPResponse:
        release.wait(20)
        try:
            emit({"event_type": "progress", "payload": {}})
        except RunEnded as exc:
            outcome.append(str(exc))
        return answer(request)

    target = adapter(f"{HERE}:sync_agent", tmp_path)

    async def go() -> None:
        await target.start()
        target.function = lingers
        with anyio.move_on_after(0.1):
            await target.execute(request(), sink)
        release.set()
        with anyio.fail_after(20):
            while not outcome:
                await anyio.sleep(0.01)

    anyio.run(go)
    assert outcome == ["the run is over (it timed out or ATP was stopped); the event was dropped"]
    assert sink.got == [] and len(sink.warnings) == 1


def test_after_abort_no_run_starts(tmp_path: Path) -> None:
    target = adapter(f"{HERE}:sync_agent", tmp_path)

    async def go() -> None:
        await target.start()
        target.abort()
        await target.execute(request(), Sink())

    with pytest.raises(AdapterError, match="ATP is stopping"):
        anyio.run(go)
