"""Services, the kernel's plugin kind for what ATP runs next to an agent: registration, suite
keys and their located errors, the runner's lifecycle around runs, and recorded events in the
trace. A throwaway service (``fixture``) stands for a third party's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import msgspec
import pytest

from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import PluginFailed, SuiteError
from atp.core.hookspecs import hookimpl
from atp.core.plugins import Plugins
from atp.core.protocol import (
    ATPRequest,
    ATPResponse,
    LLMRequestPayload,
    Metrics,
    ProgressPayload,
    StructuredArtifact,
    ToolCallPayload,
    encode,
    make_event,
)
from atp.core.results import SuiteResults
from atp.core.runner import Runner
from atp.core.schema import suite_schema
from atp.core.service import Recorder, Service, ServiceConfigError, ServiceUse, with_context
from atp.core.suite import load_suite
from atp.core.trace import EventSink, RunTrace
from tests.conftest import write
from tests.facts import says


class FixtureConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    value: int
    names: list[str] = msgspec.field(default_factory=list)


class FixtureService(Service):
    """Puts ``FIXTURE=<value>`` in the agent's environment and records one probe tool call."""

    key = "fixture"
    summary = "a throwaway service for tests"
    Config = FixtureConfig
    log: list[str] = []
    fail: str | None = None
    """``start``, ``enter`` or ``leave``: where the service raises; ``hang``: its start never ends."""

    @classmethod
    def check(cls, config: FixtureConfig) -> None:
        if len(set(config.names)) != len(config.names):
            raise ServiceConfigError("names repeat", ("names",))

    async def start(self) -> None:
        self.log.append("start")
        await anyio.sleep(3600 if self.fail == "hang" else 0.01)  # runs in flight wait for this one start
        if self.fail == "start":
            raise OSError("port in use")

    @asynccontextmanager
    async def run(
        self, config: FixtureConfig, request: ATPRequest, recorder: Recorder
    ) -> AsyncIterator[ATPRequest]:
        if self.fail == "enter":
            raise RuntimeError("not ready")
        self.log.append(f"enter {config.value}")
        recorder.record(ToolCallPayload(tool="probe", input={"value": config.value}, status="success"))
        recorder.serve_tools(["probe"])
        environment = dict(request.context.environment or {}) if request.context else {}
        yield with_context(request, environment={**environment, "FIXTURE": str(config.value)})
        self.log.append("leave")
        if self.fail == "leave":
            raise ValueError("could not clean up")

    async def aclose(self) -> None:
        self.log.append("aclose")


class FixturePlugin:
    @hookimpl
    def atp_register_services(self, register: Any) -> None:
        register(FixtureService)


@pytest.fixture
def with_fixture(plugins: Plugins) -> Iterator[Plugins]:
    FixtureService.log = []
    FixtureService.fail = None
    name = plugins.register(FixturePlugin(), name="fixture-plugin")
    try:
        yield plugins
    finally:
        plugins.unregister(name)


# --- agents (function adapter) ---------------------------------------------------------------

seen_requests: list[ATPRequest] = []


def answer(request: ATPRequest) -> ATPResponse:
    environment = request.context.environment if request.context else None
    return ATPResponse(
        version="1.0",
        task_id=request.task_id,
        status="completed",
        artifacts=[StructuredArtifact(name="env", data={"environment": environment or {}})],
        metrics=Metrics(),
    )


def agent_plain(request: ATPRequest, sink: EventSink) -> ATPResponse:
    seen_requests.append(request)
    sink.event(make_event(request.task_id, 0, ProgressPayload(current_step=1)))
    sink.event(make_event(request.task_id, 1, ToolCallPayload(tool="web_search")))
    return answer(request)


def agent_reports_served_tools(request: ATPRequest, sink: EventSink) -> ATPResponse:
    """Reports its own tool_call of the served tool ``probe`` (twice) and of another tool."""
    sink.events(
        [
            make_event(request.task_id, 0, ToolCallPayload(tool="probe")),
            make_event(request.task_id, 1, ToolCallPayload(tool="web_search")),
            make_event(request.task_id, 2, ToolCallPayload(tool="probe")),
        ]
    )
    return answer(request)


def agent_forges(request: ATPRequest, sink: EventSink) -> ATPResponse:
    """Sends events whose JSON text claims to be recorded by ATP, plainly and in \\u escapes."""
    first = make_event(request.task_id, 0, ToolCallPayload(tool="web_search"))
    second = make_event(request.task_id, 1, ToolCallPayload(tool="web_search"))
    raw = (
        b'{"recorded_by":"tools",'
        + encode(first)[1:]
        + b"\n"
        + b'{"recorded\\u005fby":"tools",'
        + encode(second)[1:]
        + b"\n"
    )
    sink.events([first, second], raw)
    return answer(request)


def suite_text(function: str, tests: str, defaults: str = "") -> str:
    return f"""
test_suite: services
{defaults}
agents:
  - name: agent
    type: function
    function: tests.unit.test_services:{function}
tests:
{tests}
"""


def load(tmp_path: Path, plugins: Plugins, text: str, **services: Any) -> Any:
    return load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators, **services)


def run(tmp_path: Path, plugins: Plugins, text: str, **options: Any) -> tuple[SuiteResults, Runner]:
    suite = load(tmp_path, plugins, text)
    agent = resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    runner = Runner(plugins, suite, suite.tests, agent, run_root=tmp_path / "runs", **options)
    return anyio.run(runner.run), runner


def fixture_of(request: ATPRequest) -> str:
    return ((request.context.environment if request.context else None) or {}).get("FIXTURE", "-")


def event_lines(tmp_path: Path, results: SuiteResults, test_id: str) -> list[dict[str, Any]]:
    [directory] = (tmp_path / "runs").iterdir()
    [run] = [r for t in results.tests if t.id == test_id for r in t.runs]
    assert run.events_file is not None
    return [json.loads(line) for line in (directory / run.events_file).read_bytes().splitlines()]


# --- registration ----------------------------------------------------------------------------


def test_services_register_through_their_hook_and_are_listed(with_fixture: Plugins) -> None:
    assert with_fixture.services["fixture"] is FixtureService
    assert with_fixture.service("fixture") is FixtureService
    assert with_fixture.services["tools"].__module__ == "atp.adapters.tools"  # the built-in, the same way
    infos = {info.name: info for info in with_fixture.infos()}
    assert infos["fixture-plugin"].services == ["fixture"] and not infos["fixture-plugin"].errors
    assert infos["adapters"].services == ["tools"]
    assert with_fixture.owner_name("service", "fixture") == "fixture-plugin"


def test_two_plugins_claiming_one_key_are_a_conflict_unless_one_replaces(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    class Rival(FixtureService):
        pass

    class RivalPlugin:
        @hookimpl
        def atp_register_services(self, register: Any) -> None:
            register(Rival)

    name = with_fixture.register(RivalPlugin(), name="rival")
    try:
        assert "fixture" not in with_fixture.services
        errors = {info.name: info.errors for info in with_fixture.infos()}
        [conflict] = [e for e in errors["fixture-plugin"] if "'rival'" in e]
        says(conflict, "service 'fixture'", "plugin 'rival'", "ATP_DISABLE_PLUGINS", "replaces")
        with pytest.raises(PluginFailed) as failed:
            load(
                tmp_path,
                with_fixture,
                suite_text("agent_plain", "  - id: a\n    task: {description: x}\n    fixture: {value: 1}"),
            )
        says(
            str(failed.value),
            "suite.yaml",
            ":10",
            "tests[0].fixture",
            "service 'fixture'",
            "plugin 'fixture-plugin'",
            "plugin 'rival'",
            "neither",
            "ATP_DISABLE_PLUGINS",
        )
        Rival.replaces = "fixture-plugin"
        with_fixture.unregister(name)
        name = with_fixture.register(RivalPlugin(), name="rival")
        assert with_fixture.services["fixture"] is Rival
    finally:
        with_fixture.unregister(name)


def test_a_service_may_not_take_a_test_key(plugins: Plugins) -> None:
    class Tags(FixtureService):
        key = "tags"

    class Plugin:
        @hookimpl
        def atp_register_services(self, register: Any) -> None:
            register(Tags)

    name = plugins.register(Plugin(), name="tags-plugin")
    try:
        assert "tags" not in plugins.services
        [error] = next(i for i in plugins.infos() if i.name == "tags-plugin").errors
        says(error, "Tags", "key 'tags'", "a test's own keys")
    finally:
        plugins.unregister(name)


# --- suites ----------------------------------------------------------------------------------


TESTS = """
  - id: inherits
    task: {description: x}
  - id: replaces
    task: {description: x}
    fixture: {value: 2}
  - id: without
    task: {description: x}
    fixture: null
"""


def test_tests_take_service_keys_and_the_defaults_value_is_replaced(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    suite = load(
        tmp_path,
        with_fixture,
        suite_text("agent_plain", TESTS, "defaults:\n  fixture: {value: 1, names: [a]}"),
    )
    by_id = {t.id: t for t in suite.tests}
    assert by_id["inherits"].services == (ServiceUse("fixture", FixtureConfig(value=1, names=["a"])),)
    assert by_id["replaces"].services == (ServiceUse("fixture", FixtureConfig(value=2)),)  # whole, not merged
    assert by_id["without"].services == ()


def test_a_suite_without_services_resolves_to_none(with_fixture: Plugins, tmp_path: Path) -> None:
    suite = load(tmp_path, with_fixture, suite_text("agent_plain", "  - id: a\n    task: {description: x}"))
    assert suite.tests[0].services == ()


@pytest.mark.parametrize(
    ("body", "path", "line", "facts"),
    [
        ("    fixture: {value: nope}", "tests[0].fixture.value", 10, ("int", "str")),
        ("    fixture: {value: 1, extra: 2}", "tests[0].fixture.extra", 10, ("'extra'",)),
        (
            "    fixture:\n      value: 1\n      names: [a, b, a]",
            "tests[0].fixture.names",
            12,
            ("names repeat",),  # the service's own reason, passed through
        ),
        (
            "    fixtures: {value: 1}",
            "tests[0].fixtures",
            10,
            ("'fixtures'", "'fixture'", "fixture, tools"),  # the suggestion, and the installed services
        ),
        ("    mode: comparison", "tests[0].mode", 10, ("'mode'",)),
    ],
)
def test_service_config_errors_are_located(
    with_fixture: Plugins, tmp_path: Path, body: str, path: str, line: int, facts: tuple[str, ...]
) -> None:
    with pytest.raises(SuiteError) as caught:
        load(
            tmp_path,
            with_fixture,
            suite_text("agent_plain", f"  - id: a\n    task: {{description: x}}\n{body}"),
        )
    assert caught.value.path == path and caught.value.line == line
    says(caught.value.reason, *facts)


def test_a_defaults_error_is_located_in_the_defaults(with_fixture: Plugins, tmp_path: Path) -> None:
    with pytest.raises(SuiteError) as caught:
        load(tmp_path, with_fixture, suite_text("agent_plain", TESTS, "defaults:\n  fixture: {value: [1]}"))
    assert (caught.value.path, caught.value.line) == ("defaults.fixture.value", 3)


def test_service_keys_need_a_registered_service(plugins: Plugins, tmp_path: Path) -> None:
    text = suite_text("agent_plain", "  - id: a\n    task: {description: x}\n    fixture: {value: 1}")
    with pytest.raises(SuiteError) as caught:
        load(tmp_path, plugins, text)
    assert (caught.value.path, caught.value.line) == ("tests[0].fixture", 10)
    says(caught.value.reason, "'fixture'")
    with pytest.raises(SuiteError) as caught:  # explicitly no services at all
        load(
            tmp_path,
            plugins,
            suite_text("agent_plain", "  - id: a\n    task: {description: x}\n    tools: []"),
            services={},
        )
    assert (caught.value.path, caught.value.line) == ("tests[0].tools", 10)
    says(caught.value.reason, "'tools'")


def test_the_suite_schema_describes_service_keys(with_fixture: Plugins) -> None:
    schema = suite_schema(with_fixture.evaluators, with_fixture.adapters)
    check = jsonschema.Draft7Validator(schema)
    good = {
        "test_suite": "s",
        "defaults": {"fixture": {"value": 1}},
        "tests": [
            {
                "id": "a",
                "task": {"description": "x"},
                "fixture": {"value": 2},
                "tools": [{"name": "t", "output": 1}],
            },
            {"id": "b", "task": {"description": "x"}, "fixture": None},
        ],
    }
    assert list(check.iter_errors(good)) == []
    bad = {"test_suite": "s", "tests": [{"id": "a", "task": {"description": "x"}, "fixture": {"value": "x"}}]}
    assert next(list(e.absolute_path) for e in check.iter_errors(bad))[:3] == ["tests", 0, "fixture"]


# --- the runner ------------------------------------------------------------------------------


PARALLEL_TESTS = """
  - id: served
    runs_per_test: 4
    task: {description: x}
    fixture: {value: 7}
    assertions:
      - type: must_use_tools
        config: {tools: [probe, web_search]}
      - type: max_tool_calls
        config: {limit: 2}
  - id: plain
    task: {description: x}
"""


def test_a_service_starts_once_wraps_each_run_and_closes_at_the_end(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    seen_requests.clear()
    started: list[ATPRequest] = []

    class Watcher:
        @hookimpl
        def atp_run_started(self, request: ATPRequest) -> None:
            started.append(request)

    name = with_fixture.register(Watcher(), name="watcher")
    try:
        results, _ = run(tmp_path, with_fixture, suite_text("agent_plain", PARALLEL_TESTS), parallel=3)
    finally:
        with_fixture.unregister(name)
    outcomes = [r.outcome for t in results.tests for r in t.runs]
    assert outcomes == ["passed"] * 5, [r.error or r.checks for t in results.tests for r in t.runs]
    log = FixtureService.log
    assert log.count("start") == 1 and log[0] == "start" and log[-1] == "aclose"
    assert log.count("enter 7") == 4 and log.count("leave") == 4
    assert sorted(fixture_of(r) for r in seen_requests) == [
        "-",
        "7",
        "7",
        "7",
        "7",
    ]  # the plain test: untouched
    assert sorted(fixture_of(r) for r in started) == ["-", "7", "7", "7", "7"]  # hooks see what the agent got
    served = next(t for t in results.tests if t.id == "served")
    for result in served.runs:
        assert result.trace is not None
        assert result.trace.tool_calls == {"probe": 1, "web_search": 1}
        assert result.trace.out_of_order == 0  # recorded events are numbered apart from the agent's
    lines = event_lines(tmp_path, results, "plain")
    assert all("recorded_by" not in line for line in lines)


def test_a_service_that_cannot_start_fails_its_runs_and_others_go_on(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    FixtureService.fail = "start"
    started: list[int] = []

    class Watcher:
        @hookimpl
        def atp_run_started(self, run_number: int) -> None:
            started.append(run_number)

    name = with_fixture.register(Watcher(), name="watcher")
    try:
        results, _ = run(tmp_path, with_fixture, suite_text("agent_plain", PARALLEL_TESTS), parallel=2)
    finally:
        with_fixture.unregister(name)
    served = next(t for t in results.tests if t.id == "served")
    assert [r.outcome for r in served.runs] == ["error"] * 4
    for result in served.runs:
        says(
            result.error,
            "service 'fixture'",
            "plugin 'fixture-plugin'",
            "tests.unit.test_services",
            "start",
            "OSError: port in use",
        )
        assert result.traceback is not None and "port in use" in result.traceback
    assert next(t for t in results.tests if t.id == "plain").runs[0].outcome == "passed"
    assert FixtureService.log == ["start", "aclose"]  # started once, not retried; closed anyway
    assert len(started) == 5  # every run is announced once, the failed ones too


def test_a_service_failing_to_enter_is_an_error_and_failing_to_leave_a_warning(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    FixtureService.fail = "enter"
    results, _ = run(tmp_path, with_fixture, suite_text("agent_plain", PARALLEL_TESTS))
    served = next(t for t in results.tests if t.id == "served")
    for result in served.runs:
        says(
            result.error,
            "service 'fixture'",
            "plugin 'fixture-plugin'",
            "tests.unit.test_services",
            "RuntimeError: not ready",
        )
    FixtureService.fail = "leave"
    (tmp_path / "runs").rename(tmp_path / "first-runs")
    results, _ = run(tmp_path, with_fixture, suite_text("agent_plain", PARALLEL_TESTS))
    served = next(t for t in results.tests if t.id == "served")
    assert [r.outcome for r in served.runs] == ["passed"] * 4
    for result in served.runs:
        [warning] = [w for w in result.warnings if "ValueError" in w]
        says(warning, "service 'fixture'", "ValueError: could not clean up")
    assert [(f.plugin, f.where) for f in results.plugin_failures] == [("fixture-plugin", "service 'fixture'")]


@pytest.mark.slow  # waits out a time limit
def test_a_service_that_hangs_in_start_is_stopped_by_the_time_limit(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    FixtureService.fail = "hang"
    text = suite_text(
        "agent_plain",
        "  - id: a\n    task: {description: x}\n    constraints: {timeout_seconds: 1}\n    fixture: {value: 1}",
    )
    results, _ = run(tmp_path, with_fixture, text)
    [result] = results.tests[0].runs
    assert result.outcome == "error"
    says(result.error, "timed out after 1 s", "service 'fixture'")
    assert FixtureService.log == ["start", "aclose"]


def test_the_agents_own_tool_calls_of_served_tools_are_left_out(
    with_fixture: Plugins, tmp_path: Path
) -> None:
    text = suite_text(
        "agent_reports_served_tools", "  - id: a\n    task: {description: x}\n    fixture: {value: 1}"
    )
    results, _ = run(tmp_path, with_fixture, text)
    [result] = results.tests[0].runs
    assert result.trace is not None and result.trace.tool_calls == {"probe": 1, "web_search": 1}
    assert not [w for w in result.warnings if "tool_call" in w]  # reporting its calls is no fault
    lines = event_lines(tmp_path, results, "a")
    assert [(line.get("recorded_by"), line["payload"]["tool"]) for line in lines] == [
        ("fixture", "probe"),
        (None, "web_search"),
    ]


def test_an_agent_cannot_forge_recorded_events(with_fixture: Plugins, tmp_path: Path) -> None:
    results, _ = run(
        tmp_path, with_fixture, suite_text("agent_forges", "  - id: a\n    task: {description: x}")
    )
    lines = event_lines(tmp_path, results, "a")
    assert len(lines) == 2 and all("recorded_by" not in line for line in lines)
    assert all(line["payload"]["tool"] == "web_search" for line in lines)


def test_recorded_events_are_counted_apart_from_the_agents_sequence(tmp_path: Path) -> None:
    trace = RunTrace("t", events_path=tmp_path / "e.jsonl", log_path=None)
    trace.event(make_event("t", 5, ProgressPayload(current_step=1)))
    assert trace.record(ToolCallPayload(tool="web_search"), by="tools") is not None
    trace.event(make_event("t", 6, ProgressPayload(current_step=2)))
    trace.event(make_event("t", 6, ToolCallPayload(tool="web_search")))  # a served tool: left out
    trace.event(make_event("t", 4, ProgressPayload(current_step=3)))  # out of order, truly
    trace.close()
    assert trace.summary.events == 4 and trace.summary.tool_calls == {"web_search": 1}
    assert trace.summary.out_of_order == 1
    assert trace.record(ToolCallPayload(tool="late"), by="tools") is None  # the run has ended
    lines = [json.loads(line) for line in (tmp_path / "e.jsonl").read_bytes().splitlines()]
    assert [line.get("recorded_by") for line in lines] == [None, "tools", None, None]
    assert lines[1]["sequence"] == 0


def test_recording_beyond_the_event_limit_is_counted_not_written_with_one_warning(tmp_path: Path) -> None:
    """(issue 26) A tool called after the agent flooded its events still counts: a forbidden
    tool or a limit on tool calls holds."""
    trace = RunTrace("t", events_path=None, log_path=None, max_events=2)
    kept = [trace.record(ToolCallPayload(tool="x"), by="tools") for _ in range(4)]
    assert [k is not None for k in kept] == [True, True, False, False]
    assert trace.summary.tool_calls == {"x": 4}
    [warning] = trace.warnings
    says(warning, "event limits", "service 'tools'")


class SpendAfterService(FixtureService):
    """Records an LLM call of 500 tokens once the agent has answered (a gateway's bill, say)."""

    key = "spend_after"

    @asynccontextmanager
    async def run(
        self, config: FixtureConfig, request: ATPRequest, recorder: Recorder
    ) -> AsyncIterator[ATPRequest]:
        yield request
        recorder.record(LLMRequestPayload(model="m", input_tokens=500, output_tokens=0))


class SpendAfterPlugin:
    @hookimpl
    def atp_register_services(self, register: Any) -> None:
        register(SpendAfterService)


def test_a_services_key_written_short_is_suggested_as_other_keys_are(
    plugins: Plugins, tmp_path: Path
) -> None:
    """The service keys are suggested as every other key is (atp.core.spelling): a key with
    letters left out (``spa``, of ``spend_after``) too."""
    name = plugins.register(SpendAfterPlugin(), name="spend-after")
    try:
        with pytest.raises(SuiteError) as caught:
            load(
                tmp_path,
                plugins,
                suite_text("agent_plain", "  - id: a\n    task: {description: x}\n    spa: {value: 1}"),
            )
    finally:
        plugins.unregister(name)
    assert caught.value.path == "tests[0].spa"
    says(caught.value.reason, "'spa'", "did you mean 'spend_after'?", "spend_after, tools")


def test_what_a_service_records_after_the_agent_answered_stops_no_run(
    plugins: Plugins, tmp_path: Path
) -> None:
    """The task's limits hold while the agent runs: what a service records when the run is
    left (after the agent answered) is counted, but does not turn the answer into a limit
    passed, nor claim ATP stopped the agent."""
    name = plugins.register(SpendAfterPlugin(), name="spend-after")
    try:
        text = suite_text(
            "agent_plain",
            "  - id: a\n    task: {description: x}\n    constraints: {max_tokens: 100}\n    spend_after: {value: 1}",
        )
        results, _ = run(tmp_path, plugins, text)
    finally:
        plugins.unregister(name)
    [run_result] = results.tests[0].runs
    assert run_result.trace.input_tokens == 500  # counted
    assert run_result.outcome == "passed" and run_result.error_code is None, run_result.error
