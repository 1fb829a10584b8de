"""The agent-interface adapter against real Agent Interface Standard v1.0 servers on loopback
(tests/agents/agent_interface_agent.py): discovery and health at start, the A2A message and what
its answer becomes, the MCP tool mode, faults, headers and their masking, and the health and
conformance the adapter reports for `atp validate` and `atp list-agents --check`."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

pytest.importorskip("httpx", reason="the agent-interface adapter needs httpx")
pytest.importorskip("jsonschema", reason="the conformance checks need jsonschema")

from atp.adapters.agent_interface import AgentInterfaceAdapter, AgentInterfaceSettings
from atp.core.adapter import AgentUnhealthy, Health
from atp.core.errors import AdapterError, AgentError, AgentRefused, ConfigError, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Constraints, Task, ToolCallEvent
from tests.conftest import AGENTS, PYTHON
from tests.facts import says
from tests.network import Server, Sink, free_port, run_agent_suite, runs_by_test

MODES = ("healthy", "degraded", "unhealthy", "broken-tools", "broken-card", "no-health-status")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Server]]:
    """One agent per mode, started as the tests need them."""
    started: dict[str, Server] = {}
    yield started
    for server in started.values():
        server.stop()


@pytest.fixture
def agent(servers: dict[str, Server]) -> Any:
    def url(mode: str = "healthy") -> str:
        if mode not in servers:
            servers[mode] = Server([PYTHON, str(AGENTS / "agent_interface_agent.py"), "--mode", mode])
        return f"http://127.0.0.1:{servers[mode].port}"

    url.servers = servers  # type: ignore[attr-defined]
    return url


def received(server: Server, task_id: str, within: float = 5.0) -> list[dict[str, Any]]:
    """The requests the agent printed whose body carries ``task_id`` in its context."""
    import time

    deadline = time.monotonic() + within
    while True:
        found = []
        for line in list(server.lines):
            try:
                seen = json.loads(line)
            except ValueError:
                continue
            body = seen.get("body")
            if isinstance(body, dict) and (body.get("context") or {}).get("task_id") == task_id:
                found.append(seen)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def adapter_for(settings: dict[str, Any]) -> AgentInterfaceAdapter:
    return AgentInterfaceAdapter(
        msgspec.convert(settings, AgentInterfaceSettings), name="agent", base_dir=Path(".")
    )


def request(
    description: str = "hello", input_data: dict[str, Any] | None = None, **constraints: Any
) -> ATPRequest:
    return ATPRequest(
        version="1.0",
        task_id=str(uuid.uuid4()),
        task=Task(description=description, input_data=input_data),
        constraints=Constraints(**constraints) if constraints else None,
    )


def run(
    settings: dict[str, Any], *requests: ATPRequest
) -> tuple[list[Any], list[Sink], AgentInterfaceAdapter]:
    """Each request's answer (or the exception it raised) and its sink, through one started adapter."""
    adapter = adapter_for(settings)
    sinks = [Sink() for _ in requests]

    async def body() -> list[Any]:
        await adapter.start()
        answers: list[Any] = []
        try:
            for req, sink in zip(requests, sinks, strict=True):
                try:
                    answers.append(await adapter.execute(req, sink))
                except Exception as exc:  # (the test looks at it)
                    answers.append(exc)
        finally:
            await adapter.aclose()
        return answers

    return anyio.run(body), sinks, adapter


def starting(settings: dict[str, Any]) -> BaseException | None:
    adapter = adapter_for(settings)

    async def body() -> BaseException | None:
        try:
            await adapter.start()
        except Exception as exc:
            return exc
        finally:
            await adapter.aclose()
        return None

    return anyio.run(body)


# --- a run, end to end ---------------------------------------------------------------------------


def test_a_suite_runs_end_to_end_with_artifact_events_and_metrics(
    tmp_path: Path, plugins: Plugins, agent: Any
) -> None:
    settings = f"    endpoint: {agent()}\n    headers: {{X-Team: research}}\n"
    tests = (
        "  - id: hello\n"
        "    task: {description: hello, input_data: {city: Paris}}\n"
        "    constraints: {max_steps: 5, timeout_seconds: 30}\n"
        "    assertions:\n"
        "      - {type: must_use_tools, config: {tools: [lookup]}}\n"
        "      - {type: max_tool_calls, config: {limit: 1}}\n"
        "      - {type: contains, config: {name: result, pattern: 'done: hello'}}\n"
        "      - {type: schema, config: {name: result, schema: {type: object, required: [answer, payload]}}}\n"
    )
    results, store = run_agent_suite("agent-interface", tmp_path, plugins, settings, tests)
    hello = runs_by_test(results)["hello"]
    assert hello.outcome == "passed", (hello.error, hello.checks)
    assert hello.status == "completed"
    [artifact] = hello.artifacts
    assert artifact.name == "result"
    assert artifact.data["answer"] == "done: hello"
    assert artifact.data["payload"] == {"task": "hello", "city": "Paris"}
    assert artifact.data["action"] == "execute_task"
    assert artifact.data["from_agent"] == "atp" and artifact.data["to_agent"] == "test-agent-001"
    assert artifact.data["message_type"] == "REQUEST"
    assert artifact.data["context"] == {
        "task_id": hello.task_id,
        "constraints": {"max_steps": 5, "timeout_seconds": 30},
    }
    events = list(store.events(hello))
    assert [(e.event_type, e.sequence, e.payload.tool, e.payload.status) for e in events] == [
        ("tool_call", 0, "lookup", "success")
    ]
    assert hello.metrics.tool_calls == 1 and hello.metrics.wall_time_seconds is not None
    assert hello.trace.tool_calls == {"lookup": 1}
    [sent] = received(agent.servers["healthy"], hello.task_id)
    assert sent["method"] == "POST" and sent["path"] == "/a2a/message"
    headers = sent["headers"]
    assert headers["content-type"] == "application/json" and headers["accept"] == "application/json"
    assert headers["user-agent"] == "atp" and headers["x-team"] == "research"


def test_the_payload_and_the_message_follow_the_settings(agent: Any) -> None:
    settings = {
        "endpoint": agent(),
        "action": "research",
        "from_agent": "atp-tests",
        "to_agent": "someone-else",
        "payload_key": "task",
        "input_key": "input",
        "payload": {"mode": "fast", "task": "overridden"},
    }
    answers, _, adapter = run(
        settings,
        request("hello", {"company": "Acme"}),
        request("hello", {"a2a_action": "summarize"}),
        request("hello"),
    )
    first, second, third = (answer.artifacts[0].data for answer in answers)
    assert first["payload"] == {"mode": "fast", "task": "hello", "input": {"company": "Acme"}}
    assert (first["action"], first["from_agent"], first["to_agent"]) == (
        "research",
        "atp-tests",
        "someone-else",
    )
    assert second["action"] == "summarize" and "a2a_action" not in json.dumps(second["payload"])
    assert third["payload"] == {"mode": "fast", "task": "hello"}  # (no input data: no input member)
    assert adapter.card is not None and adapter.card["agent_id"] == "test-agent-001"


def test_without_a_payload_key_the_description_is_not_sent(agent: Any) -> None:
    answers, _, _ = run({"endpoint": agent(), "payload_key": None}, request("slow 0", {"q": 1}))
    assert answers[0].artifacts[0].data["payload"] == {"q": 1}


def test_results_that_are_not_objects_are_wrapped_and_a_null_result_is_no_artifact(agent: Any) -> None:
    answers, sinks, _ = run({"endpoint": agent()}, request("scalar"), request("nothing"))
    scalar, nothing = answers
    assert scalar.status == "completed" and scalar.artifacts[0].data == {"value": "plain text"}
    assert nothing.status == "completed" and nothing.artifacts == []
    assert [sink.types() for sink in sinks] == [["tool_call"], ["tool_call"]]


def test_success_false_fails_the_run_with_the_agents_error(
    tmp_path: Path, plugins: Plugins, agent: Any
) -> None:
    tests = "  - id: fails\n    task: {description: fail}\n"
    results, store = run_agent_suite(
        "agent-interface", tmp_path, plugins, f"    endpoint: {agent()}\n", tests
    )
    fails = runs_by_test(results)["fails"]
    assert fails.outcome == "failed"
    assert fails.status == "failed"
    assert fails.error == "order 42 was not found"
    assert fails.artifacts == [] and list(store.events(fails)) == []
    assert fails.metrics.tool_calls == 0


def test_a_run_past_its_time_limit_times_out(tmp_path: Path, plugins: Plugins, agent: Any) -> None:
    tests = "  - id: slow\n    task: {description: slow 5}\n    constraints: {timeout_seconds: 1}\n"
    results, _ = run_agent_suite("agent-interface", tmp_path, plugins, f"    endpoint: {agent()}\n", tests)
    slow = runs_by_test(results)["slow"]
    assert slow.status == "timeout", slow.error
    assert slow.duration_seconds < 4


# --- discovery and health at start -----------------------------------------------------------------


def test_an_unhealthy_agent_is_refused_at_start_saying_what_it_reported(agent: Any) -> None:
    error = starting({"endpoint": agent("unhealthy")})
    assert isinstance(error, AgentUnhealthy) and isinstance(error, AdapterError)
    assert error.health == Health(
        status="unhealthy",
        detail="error rate 75%, 75 errors in 100 requests, LLM unavailable, last error: database unavailable",
    )
    says(
        str(error),
        "agent 'agent'",
        agent("unhealthy"),
        "unhealthy",
        "error rate 75%, 75 errors in 100 requests, LLM unavailable, last error: database unavailable",
        "allow_unhealthy: true",
    )


def test_an_unhealthy_agent_is_run_with_a_warning_when_allowed(
    agent: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="atp.adapters"):
        answers, _, adapter = run({"endpoint": agent("unhealthy"), "allow_unhealthy": True}, request("hello"))
    assert answers[0].status == "completed"
    assert adapter.started_health is not None and adapter.started_health.status == "unhealthy"
    assert "reports itself unhealthy" in caplog.text and "tested anyway (allow_unhealthy)" in caplog.text


def test_a_degraded_agent_starts_with_a_warning(agent: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="atp.adapters"):
        answers, _, _ = run({"endpoint": agent("degraded")}, request("hello"))
    assert answers[0].status == "completed"
    assert (
        "agent 'agent': reports itself degraded (error rate 25%, 25 errors in 100 requests); its runs go on"
        in caplog.text
    )


def test_an_agent_that_cannot_be_reached_is_an_adapter_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    error = starting({"endpoint": url})
    assert isinstance(error, AdapterError) and not isinstance(error, AgentUnhealthy)
    says(str(error), "cannot reach", "agent 'agent'", f"{url}/health", "connection refused", "running")


def test_a_card_without_agent_id_fails_discovery_unless_to_agent_is_set(agent: Any) -> None:
    error = starting({"endpoint": agent("broken-card")})
    assert isinstance(error, AdapterError)
    assert str(error).startswith(
        f"agent 'agent': discovery failed: GET {agent('broken-card')}/agent-card: the agent card has no agent_id; "
        "is an Agent Interface Standard agent at"
    )
    answers, _, _ = run({"endpoint": agent("broken-card"), "to_agent": "chosen"}, request("hello"))
    assert answers[0].artifacts[0].data["to_agent"] == "chosen"


# --- malformed answers and HTTP faults -------------------------------------------------------------


def test_malformed_answers_are_agent_errors_with_the_answer_as_evidence(agent: Any) -> None:
    url = agent()
    answers, sinks, _ = run(
        {"endpoint": url},
        request("malformed"),
        request("not-json"),
        request("bad-tools"),
        request("http-500"),
    )
    malformed, not_json, bad_tools, http_500 = answers
    where = f"POST {url}/a2a/message"
    assert isinstance(malformed, AgentError)
    says(malformed.message, where, "not an A2A response", "Object missing required field `success`")
    assert malformed.evidence == b'{"result": 1}'
    assert isinstance(not_json, AgentError) and not_json.evidence == b"<html>oops</html>"
    says(not_json.message, where, "not an A2A response", "JSON is malformed")
    assert isinstance(bad_tools, AgentError)
    says(bad_tools.message, where, "not an A2A response", "Expected `str`, got `int` - at `$.tools_used[0]`")
    assert isinstance(http_500, AgentError) and not isinstance(http_500, AgentRefused)
    says(http_500.message, where, "HTTP 500 Internal Server Error")
    assert http_500.evidence == "boom"
    assert all(sink.seen == [] for sink in sinks)  # (no events from an answer that is not one)


# --- the MCP tool mode -------------------------------------------------------------------------------


def test_a_tool_is_called_directly_with_mcp_tool(tmp_path: Path, plugins: Plugins, agent: Any) -> None:
    tests = (
        "  - id: tool\n"
        "    task: {description: check lookup, input_data: {mcp_tool: lookup, parameters: {key: abc}}}\n"
        "    assertions:\n"
        "      - {type: must_use_tools, config: {tools: [lookup]}}\n"
        "      - {type: tool_called_with, config: {tool: lookup, input: {key: abc}}}\n"
        "      - {type: schema, config: {name: result, schema: {type: object, properties: {value: {const: ABC}}, required: [value]}}}\n"
        "  - id: sum\n"
        "    task: {description: check add, input_data: {mcp_tool: add, parameters: {a: 2, b: 3}}}\n"
        "    assertions:\n"
        "      - {type: contains, config: {name: result, pattern: '5'}}\n"
        "  - id: missing\n"
        "    task: {description: check lookup, input_data: {mcp_tool: lookup}}\n"
        "  - id: unknown\n"
        "    task: {description: check, input_data: {mcp_tool: 'no such/tool'}}\n"
    )
    results, store = run_agent_suite(
        "agent-interface", tmp_path, plugins, f"    endpoint: {agent()}\n", tests
    )
    runs = runs_by_test(results)
    tool = runs["tool"]
    assert tool.outcome == "passed", (tool.error, tool.checks)
    assert tool.artifacts[0].data == {"value": "ABC"}
    [event] = list(store.events(tool))
    assert isinstance(event, ToolCallEvent)
    assert (event.payload.tool, event.payload.input, event.payload.output, event.payload.status) == (
        "lookup",
        {"key": "abc"},
        {"value": "ABC"},
        "success",
    )
    assert event.payload.duration_ms is not None and tool.metrics.tool_calls == 1
    [sent] = received(agent.servers["healthy"], tool.task_id)
    assert sent["path"] == "/mcp/execute/lookup"
    assert sent["body"] == {
        "parameters": {"key": "abc"},
        "context": {"task_id": tool.task_id, "constraints": {"timeout_seconds": 300}},
    }
    assert runs["sum"].outcome == "passed" and runs["sum"].artifacts[0].data == {"value": 5}
    missing = runs["missing"]
    assert (missing.status, missing.error) == ("failed", "missing parameter: key")
    [failed_call] = list(store.events(missing))
    assert failed_call.payload.status == "error" and failed_call.payload.error == "missing parameter: key"
    unknown = runs["unknown"]
    assert unknown.outcome == "failed"
    says(
        unknown.error,
        f"POST {agent()}/mcp/execute/no%20such%2Ftool",
        "refused",
        "HTTP 404 Not Found",
        "'unknown tool no%20such%2Ftool'",
    )


def test_a_wrong_mcp_tool_input_is_the_tests_error_not_the_agents(agent: Any) -> None:
    answers, _, _ = run(
        {"endpoint": agent()},
        request("x", {"mcp_tool": 5}),
        request("x", {"mcp_tool": "lookup", "parameters": [1]}),
        request("x", {"a2a_action": ""}),
    )
    assert all(isinstance(answer, ConfigError) for answer in answers)
    says(str(answers[0]), "task.input_data.mcp_tool", "name of the tool", "not 5")
    says(str(answers[1]), "task.input_data.parameters", "must be an object")


# --- headers and secrets -------------------------------------------------------------------------------


def test_headers_are_sent_on_every_request_and_masked_in_everything_written(
    tmp_path: Path, plugins: Plugins, agent: Any
) -> None:
    token = "t0ken-" + uuid.uuid4().hex
    url = agent()
    settings = f"    endpoint: {url}\n    headers: {{Authorization: 'Bearer {token}', X-Team: research}}\n"
    tests = (
        "  - id: echo\n    task: {description: echo-secret}\n"
        "  - id: tool\n    task: {description: x, input_data: {mcp_tool: lookup, parameters: {key: k}}}\n"
    )
    before = len(agent.servers["healthy"].lines)
    results, store = run_agent_suite("agent-interface", tmp_path, plugins, settings, tests)
    runs = runs_by_test(results)
    assert runs["echo"].outcome == "passed", runs["echo"].error
    assert runs["echo"].artifacts[0].data == {"authorization": "***"}
    import time

    time.sleep(0.2)
    seen = [json.loads(line) for line in agent.servers["healthy"].lines[before:]]
    paths = [(s["method"], s["path"]) for s in seen]
    assert ("GET", "/health") in paths and ("GET", "/agent-card") in paths
    assert ("POST", "/a2a/message") in paths and ("POST", "/mcp/execute/lookup") in paths
    assert all(s["headers"]["authorization"] == f"Bearer {token}" for s in seen)
    assert all(s["headers"]["x-team"] == "research" for s in seen)
    written = [path for path in store.directory.rglob("*") if path.is_file()]
    assert written and all(token not in path.read_text() for path in written)
    assert AgentInterfaceAdapter.secret_values(
        msgspec.convert(
            {
                "endpoint": "http://h/?api_key=k-1",
                "headers": {"Authorization": f"Bearer {token}", "X-Team": "r"},
            },
            AgentInterfaceSettings,
        )
    ) == [f"Bearer {token}", token, "k-1"]


# --- settings ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("action: ''", "'action' is empty"),
        ("discovery_timeout: 0", "'discovery_timeout' must be a number of seconds above 0 and at most 600"),
        ("{input_key: task}", "'input_key' and 'payload_key' name the same payload member"),
        ("to_agent: ''", "'to_agent' is empty (leave it out, or null)"),
        ("stream: true", "at agents[0].stream: unknown field 'stream'"),
    ],
)
def test_wrong_settings_are_refused_when_the_suite_loads(
    tmp_path: Path, plugins: Plugins, extra: str, expected: str
) -> None:
    extra_line = f"    {extra.strip('{}')}\n"
    with pytest.raises(SuiteError) as raised:
        run_agent_suite(
            "agent-interface",
            tmp_path,
            plugins,
            "    endpoint: http://127.0.0.1:9\n" + extra_line,
            "  - id: t\n    task: {description: x}\n",
        )
    assert expected in str(raised.value)


# --- health and conformance (atp validate, atp list-agents --check) -------------------------------------


def test_health_reports_the_agents_own_status(agent: Any) -> None:
    async def health(url: str) -> Health:
        return await adapter_for({"endpoint": url}).health()  # (not started: a client for the moment)

    assert anyio.run(health, agent()) == Health(
        status="healthy", detail="error rate 0%, 0 errors in 100 requests"
    )
    assert anyio.run(health, agent("degraded")).status == "degraded"
    assert anyio.run(health, agent("unhealthy")).status == "unhealthy"
    unknown = anyio.run(health, agent("no-health-status"))
    assert unknown.status == "unknown" and unknown.usable
    assert "answered without a status of the standard's" in unknown.detail
    gone = anyio.run(health, f"http://127.0.0.1:{free_port()}")
    assert gone.status == "unreachable" and not gone.usable and "connection refused" in gone.detail


def test_conformance_checks_the_discovery_answers_against_the_standards_schemas(agent: Any) -> None:
    async def conformance(url: str) -> list[Any]:
        return await adapter_for({"endpoint": url}).conformance()

    good = anyio.run(conformance, agent())
    assert [(c.name, c.title, c.passed) for c in good] == [
        ("agent-card", "agent card schema", True),
        ("health", "health schema", True),
        ("mcp-tools", "MCP tools schema", True),
    ]
    says(good[0].message, "agent 'test-agent-001'", "Test Agent", "2 tools")
    says(good[2].message, "2 tools", "lookup, add")
    broken = {c.name: c for c in anyio.run(conformance, agent("broken-tools"))}
    assert broken["agent-card"].passed and broken["health"].passed
    tools = broken["mcp-tools"]
    assert not tools.passed
    says(tools.message, "GET /mcp/tools", "schema", "2 problems")
    assert tools.seen == (
        "at $.tools[0].parameters: 'type' is a required property",
        "at $.tools[1].parameters.properties.a.type: 'text' is not one of ['string', 'number', 'boolean', 'object', 'array']",
    )
    assert tools.fix is not None and "/mcp/tools" in tools.fix
    card = {c.name: c for c in anyio.run(conformance, agent("broken-card"))}["agent-card"]
    assert not card.passed and card.seen == ("at $: 'agent_id' is a required property",)
    unhealthy = {c.name: c for c in anyio.run(conformance, agent("unhealthy"))}["health"]
    assert unhealthy.passed and unhealthy.notes == ("GET /health answered HTTP 503 with its report",)
    gone = anyio.run(conformance, f"http://127.0.0.1:{free_port()}")
    assert [c.passed for c in gone] == [False, False, False]
    says(gone[0].message, "GET /agent-card", "no answer")
    assert "connection refused" in gone[0].seen[0]


# --- a server the adapter starts itself (command) ------------------------------------------------------

SERVER = str(AGENTS / "agent_interface_agent.py")
LAUNCH = (
    "import os, runpy, signal, sys\n"
    "if os.environ.get('PIDFILE'):\n"
    "    with open(os.environ['PIDFILE'], 'a') as f:\n"
    "        f.write(str(os.getpid()) + '\\n')\n"
    "if os.environ.get('IGNORE_TERM'):\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "sys.argv = ['agent_interface_agent.py', '--port', os.environ['PORT'], *sys.argv[1:]]\n"
    f"runpy.run_path({SERVER!r}, run_name='__main__')\n"
)
"""The test agent on the port ATP gives in ``PORT``; its pid appended to ``$PIDFILE``; SIGTERM
ignored with ``IGNORE_TERM``; its arguments are the agent's (``--mode unhealthy``)."""


def launched(pidfile: Path, *args: str, **settings: Any) -> dict[str, Any]:
    env = {"PIDFILE": str(pidfile), **settings.pop("env", {})}
    return {
        "command": [PYTHON, "-c", LAUNCH, *args],
        "endpoint": "http://127.0.0.1:{port}",
        "env": env,
        **settings,
    }


def pids(pidfile: Path) -> list[int]:
    return [int(line) for line in pidfile.read_text().split()] if pidfile.exists() else []


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of its own, where the server's log files go."""
    import tempfile

    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_the_adapter_starts_its_server_once_and_stops_it_at_the_end(
    tmp_path: Path, plugins: Plugins, temp: Path
) -> None:
    pidfile = tmp_path / "pids"
    settings = (
        f"    command: {json.dumps([PYTHON, '-c', LAUNCH])}\n"
        "    endpoint: 'http://127.0.0.1:{port}'\n"
        f"    env: {{PIDFILE: '{pidfile}'}}\n"
    )
    tests = "".join(
        f"  - id: t{n}\n    task: {{description: hello {n}}}\n"
        "    assertions: [{type: contains, config: {name: result, pattern: 'done: hello'}}]\n"
        for n in range(3)
    )
    results, _ = run_agent_suite("agent-interface", tmp_path, plugins, settings, tests, parallel=3)
    assert [run.outcome for run in runs_by_test(results).values()] == ["passed"] * 3
    [pid] = pids(pidfile)  # one server for every run
    assert gone(pid)
    assert list(temp.iterdir()) == []  # (its log is removed: nothing went wrong)


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ({}, "free"),  # endpoint with {port}: a free loopback port
        ({"port": "fixed"}, "fixed"),  # port: the PORT and {port}
        ({"endpoint": "fixed"}, "fixed"),  # an endpoint without {port}: its port
    ],
)
def test_the_server_is_given_its_port(tmp_path: Path, extra: dict[str, str], where: str) -> None:
    port = free_port()
    settings = launched(tmp_path / "pids")
    if "port" in extra:
        settings["port"] = port
    if "endpoint" in extra:
        settings["endpoint"] = f"http://127.0.0.1:{port}"
    adapter = adapter_for(settings)

    async def main() -> tuple[str, int]:
        await adapter.start()
        try:
            assert adapter.server is not None
            answer = await adapter.execute(request("hello"), Sink())
            assert answer.status == "completed"
            return adapter.endpoint, adapter.server.pid
        finally:
            await adapter.aclose()

    endpoint, pid = anyio.run(main)
    assert endpoint.startswith("http://127.0.0.1:") and "{port}" not in endpoint
    assert (endpoint == f"http://127.0.0.1:{port}") == (where == "fixed")
    assert gone(pid) and adapter.server is None


def test_port_in_the_command_is_replaced_too(tmp_path: Path) -> None:
    adapter = adapter_for(
        {"command": [PYTHON, SERVER, "--port", "{port}"], "endpoint": "http://127.0.0.1:{port}"}
    )

    async def main() -> Health:
        return await adapter.health()  # (not started: the server is started for the check, then stopped)

    assert anyio.run(main) == Health(status="healthy", detail="error rate 0%, 0 errors in 100 requests")
    assert adapter.server is None


def test_a_server_that_exits_at_start_is_reported_at_once_with_its_exit_code_and_log(temp: Path) -> None:
    script = (
        "import sys, time; time.sleep(0.2); sys.stderr.write('fatal: no model configured\\n'); sys.exit(3)"
    )
    started = time.perf_counter()
    error = starting({"command": [PYTHON, "-c", script], "endpoint": "http://127.0.0.1:{port}"})
    assert time.perf_counter() - started < 5  # (not the 15 s health_timeout)
    assert isinstance(error, AdapterError) and not isinstance(error, AgentUnhealthy)
    [log] = temp.iterdir()  # (kept: the error names it)
    assert log.name.startswith("atp-agent-") and log.suffix == ".log"
    says(
        str(error),
        "agent 'agent'",
        "exited with code 3",
        "before it became healthy",
        "GET /health",
        f"log ({log})",
        "fatal: no model configured",
    )
    assert log.read_text() == "fatal: no model configured\n"


def test_a_command_that_cannot_start_is_refused_before_anything_starts(tmp_path: Path) -> None:
    adapter = AgentInterfaceAdapter(
        msgspec.convert(
            {"command": ["./no-such-agent"], "endpoint": "http://127.0.0.1:{port}"}, AgentInterfaceSettings
        ),
        name="agent",
        base_dir=tmp_path,
    )
    health = anyio.run(adapter.health)
    assert health.status == "unreachable"
    assert health.detail.startswith("agent 'agent': cannot start './no-such-agent': ")
    assert health.detail.endswith("/no-such-agent does not exist")


def test_a_server_that_never_answers_is_stopped_after_the_health_timeout(tmp_path: Path, temp: Path) -> None:
    pidfile = tmp_path / "pid"
    script = "import os, time; open(os.environ['PIDFILE'], 'w').write(str(os.getpid())); print('warming up', flush=True); time.sleep(60)"
    settings = {
        "command": [PYTHON, "-c", script],
        "endpoint": "http://127.0.0.1:{port}",
        "env": {"PIDFILE": str(pidfile)},
        "health_timeout": 1,
    }
    started = time.perf_counter()
    error = starting(settings)
    assert 1.0 <= time.perf_counter() - started < 5
    assert isinstance(error, AdapterError)
    [log] = temp.iterdir()
    assert re.fullmatch(
        r"agent 'agent': the agent server did not become healthy within 1 s \(health_timeout\): GET "
        r"http://127\.0\.0\.1:\d+/health last answered connection refused \(is the agent running and listening "
        rf"there\?\); its log \({re.escape(str(log))}\) ends with: warming up",
        str(error),
    ), str(error)
    assert gone(pids(pidfile)[0])


def test_a_server_that_stays_unhealthy_is_refused_with_its_report_and_stopped_at_the_end(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pids"
    adapter = adapter_for(launched(pidfile, "--mode", "unhealthy", health_timeout=0.5))

    async def main() -> BaseException | None:
        try:
            await adapter.start()
        except AgentUnhealthy as exc:
            assert not gone(pids(pidfile)[0])  # (it runs on: atp validate still checks its answers)
            checks = await adapter.conformance()
            assert [c.passed for c in checks] == [True, True, True]
            return exc
        finally:
            await adapter.aclose()
        return None

    error = anyio.run(main)
    assert isinstance(error, AgentUnhealthy) and error.health.status == "unhealthy"
    assert "reports itself unhealthy (error rate 75%" in str(error)
    assert gone(pids(pidfile)[0])


def test_a_server_that_ignores_sigterm_is_killed_after_the_stop_grace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pidfile = tmp_path / "pids"
    adapter = adapter_for(launched(pidfile, env={"IGNORE_TERM": "1"}, stop_grace=0.5))

    async def main() -> float:
        await adapter.start()
        assert (await adapter.execute(request("hello"), Sink())).status == "completed"
        started = time.perf_counter()
        await adapter.aclose()
        return time.perf_counter() - started

    with caplog.at_level(logging.WARNING, logger="atp.adapters"):
        seconds = anyio.run(main)
    assert 0.5 <= seconds < 4
    assert (
        "agent 'agent': the agent server did not exit within 0.5 s of SIGTERM (stop_grace); ATP killed it"
        in caplog.text
    )
    assert gone(pids(pidfile)[0])


def test_abort_kills_the_server_at_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pidfile = tmp_path / "pids"
    adapter = adapter_for(launched(pidfile, env={"IGNORE_TERM": "1"}, stop_grace=30))

    async def main() -> float:
        await adapter.start()
        started = time.perf_counter()
        adapter.abort()
        await adapter.aclose()
        return time.perf_counter() - started

    with caplog.at_level(logging.WARNING, logger="atp.adapters"):
        assert anyio.run(main) < 5  # (not the 30 s grace)
    assert gone(pids(pidfile)[0])
    assert "ATP killed it" not in caplog.text


def test_a_server_that_exits_while_the_runs_go_on_fails_the_next_runs_saying_so(
    tmp_path: Path, temp: Path
) -> None:
    pidfile = tmp_path / "pids"
    adapter = adapter_for(launched(pidfile))

    async def main() -> list[Any]:
        await adapter.start()
        try:
            first = await adapter.execute(request("hello"), Sink())
            os.kill(pids(pidfile)[-1], signal.SIGKILL)
            failed = []
            for _ in range(2):
                try:
                    await adapter.execute(request("hello"), Sink())
                except AgentError as exc:
                    failed.append(exc)
            return [first, *failed]
        finally:
            await adapter.aclose()

    first, *failed = anyio.run(main)
    assert first.status == "completed" and len(failed) == 2
    [log] = temp.iterdir()
    for error in failed:
        says(error.message, "agent server", "killed by signal SIGKILL", f"log ({log})")
        assert "listening on" in error.evidence or '"path"' in error.evidence


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"endpoint": "http://127.0.0.1:{port}"},
            "'endpoint' holds {port}, the port of the agent server ATP starts, "
            "but there is no 'command' to start one",
        ),
        (
            {"endpoint": "http://127.0.0.1:9", "env": {"A": "1"}},
            "'env' is for the agent server ATP starts: it needs 'command'",
        ),
        (
            {"endpoint": "http://127.0.0.1:9", "port": 9},
            "'port' is for the agent server ATP starts: it needs 'command'",
        ),
        (
            {"endpoint": "http://127.0.0.1:9", "cwd": "x"},
            "'cwd' is for the agent server ATP starts: it needs 'command'",
        ),
        ({"endpoint": "http://127.0.0.1:{port}", "command": []}, "'command' is empty"),
        (
            {"endpoint": "http://127.0.0.1:{port}", "command": "a", "env": {"PORT": "1"}},
            "'env' may not set PORT: ATP sets it to the agent's port (use 'port')",
        ),
        (
            {"endpoint": "http://127.0.0.1:{port}", "command": "a", "health_timeout": 0},
            "Expected `float` > 0.0 - at `$.health_timeout`",
        ),
        (
            {"endpoint": "http://127.0.0.1:{port}", "command": "a", "stop_grace": -1},
            "Expected `float` >= 0.0 - at `$.stop_grace`",
        ),
        (
            {"endpoint": "ftp://127.0.0.1:{port}", "command": "a"},
            "must be a URL starting with http:// or https://",
        ),
    ],
)
def test_the_server_settings_are_checked(options: dict[str, Any], message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as raised:
        msgspec.convert(options, AgentInterfaceSettings)
    assert message in str(raised.value)


# --- hostile agents: secrets echoed at start, discovery that never ends, huge answers ------------------


def test_agent_text_at_start_is_masked_and_cut_in_its_errors_and_warnings(
    agent: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """What the adapter says at start reaches the terminal as it is (`atp: error:`, a warning):
    the agent's text in it (a last_error, a card's error) echoing the agent's headers is masked
    with their secrets and cut, not copied whole."""
    token = "sk-" + uuid.uuid4().hex
    headers = {"Authorization": f"Bearer {token}"}
    unhealthy = starting({"endpoint": agent("echo-unhealthy"), "headers": headers})
    assert isinstance(unhealthy, AgentUnhealthy)
    assert token not in str(unhealthy) and token not in unhealthy.health.detail
    assert "last error: rejected credentials *** xxx" in str(unhealthy)
    assert "more characters)" in str(unhealthy) and len(str(unhealthy)) < 700  # (not the 5,000 characters)
    card = starting({"endpoint": agent("echo-card"), "headers": headers})
    assert isinstance(card, AdapterError) and not isinstance(card, AgentUnhealthy)
    assert token not in str(card) and "no card: rejected credentials *** xxx" in str(card)
    assert len(str(card)) < 700
    with caplog.at_level(logging.WARNING, logger="atp.adapters"):
        answers, _, _ = run({"endpoint": agent("echo-degraded"), "headers": headers}, request("hello"))
    assert answers[0].status == "completed"
    assert "reports itself degraded" in caplog.text and "rejected credentials ***" in caplog.text
    assert token not in caplog.text and len(caplog.text) < 1000


def test_a_discovery_answer_that_never_ends_fails_within_the_discovery_timeout(agent: Any) -> None:
    """httpx's timeouts are per read: /health sending a byte every 0.2 s held `atp test` for ever."""
    url = agent("drip")
    started = time.perf_counter()
    error = starting({"endpoint": url, "discovery_timeout": 1})
    assert time.perf_counter() - started < 4
    assert isinstance(error, AgentUnhealthy)
    says(
        str(error),
        "agent 'agent'",
        "health cannot be checked",
        f"GET {url}/health failed",
        "no answer within 1 s",
        "discovery_timeout",
        "'endpoint'",
        "allow_unhealthy: true",
    )
    health = anyio.run(adapter_for({"endpoint": url, "discovery_timeout": 1}).health)
    assert health == Health(
        status="unhealthy",
        detail=f"GET {url}/health failed: no answer within 1 s (discovery_timeout); is 'endpoint' right?",
    )


def test_a_health_request_that_fails_is_not_called_a_report(agent: Any) -> None:
    url = agent("health-404")
    error = starting({"endpoint": url})
    assert isinstance(error, AgentUnhealthy)
    assert "reports itself" not in str(error)
    says(
        str(error),
        "agent 'agent'",
        "health cannot be checked",
        f"GET {url}/health failed",
        "HTTP 404 Not Found",
        "'endpoint'",
    )
    says(
        anyio.run(adapter_for({"endpoint": url}).health).detail,
        f"GET {url}/health failed",
        "HTTP 404 Not Found",
        "'endpoint'",
    )


def test_conformance_counts_at_most_100_problems_and_reads_at_most_4_mib(agent: Any) -> None:
    async def conformance(url: str) -> dict[str, Any]:
        return {c.name: c for c in await adapter_for({"endpoint": url}).conformance()}

    many = anyio.run(conformance, agent("many-tools"))["mcp-tools"]
    assert not many.passed
    says(many.message, "GET /mcp/tools", "schema", "over 100 problems")
    assert len(many.seen) == 6 and many.seen[-1] == "... and over 95 more"
    huge = anyio.run(conformance, agent("huge-tools"))["mcp-tools"]
    assert not huge.passed
    says(huge.message, "GET /mcp/tools", "no usable answer")
    assert huge.seen == (
        f"GET {agent('huge-tools')}/mcp/tools: the agent sent more than 4194304 bytes in one answer (the most ATP "
        "reads of a discovery answer, 4 MiB)",
    )


def test_a_long_schema_check_does_not_hold_the_time_limit(agent: Any) -> None:
    """The schemas are checked on a worker thread: a time limit ends the checks on time, however
    long the answer takes to check (`atp validate --timeout`)."""
    url = agent("valid-tools")

    async def checks(limit: float) -> tuple[float, list[Any] | None]:
        started = time.perf_counter()
        found = None
        with anyio.move_on_after(limit):
            found = await adapter_for({"endpoint": url}).conformance()
        return time.perf_counter() - started, found

    whole, found = anyio.run(checks, 120)
    assert found is not None and found[2].passed and found[2].message.endswith("and 14990 more")
    if whole < 1.0:
        pytest.skip(f"the check took {whole:.2f} s here: too quick to interrupt")
    seconds, cut = anyio.run(checks, 0.2)
    assert cut is None and seconds < max(0.2 + 0.5, whole / 2), (seconds, whole)


def test_tool_names_that_are_not_names_are_refused_before_any_request(agent: Any) -> None:
    url = agent()
    server = agent.servers["healthy"]
    requests = [request("x", {"mcp_tool": name}) for name in (".", "..", "L" * 2000)]
    answers, _, _ = run({"endpoint": url}, *requests)
    assert all(isinstance(answer, ConfigError) for answer in answers), answers
    says(str(answers[0]), "task.input_data.mcp_tool", "'.'", "not a tool name", "/mcp/execute/.")
    says(str(answers[2]), "task.input_data.mcp_tool", "2000 characters", "at most 1024 bytes")
    for sent in requests:
        assert received(server, sent.task_id, within=0.3) == []


def test_a_url_httpx_will_not_send_is_an_adapter_error_not_a_crash() -> None:
    endpoint = "http://127.0.0.1:9/" + "a" * 70_000
    error = starting({"endpoint": endpoint})
    assert isinstance(error, AdapterError) and not isinstance(error, AgentUnhealthy)
    assert str(error).endswith("/health: ATP cannot send a request to this URL (URL too long)")


@pytest.mark.parametrize("how", ["endpoint", "port"])
def test_a_server_port_another_program_holds_is_refused_before_the_server_starts(
    tmp_path: Path, agent: Any, how: str
) -> None:
    """A `command` on the endpoint's own port that something else holds: ATP would have run
    discovery and every test against that program."""
    port = int(agent().rsplit(":", 1)[1])  # (the healthy test agent listens there)
    pidfile = tmp_path / "pids"
    settings = launched(pidfile)
    if how == "endpoint":
        settings["endpoint"] = f"http://127.0.0.1:{port}"
    else:
        settings["port"] = port
    error = starting(settings)
    assert isinstance(error, AdapterError)
    says(
        str(error),
        "agent 'agent'",
        f"port {port} on 127.0.0.1",
        "in use by another program",
        "'command'",
        "{port} in 'endpoint'",
        "leave 'port' out",
    )
    assert pids(pidfile) == []  # (never started)
