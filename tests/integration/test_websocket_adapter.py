"""The websocket adapter against real WebSocket servers on loopback: the example agent
(examples/agents/websocket_agent.py) and misbehaving ones (tests/agents/ws_faults.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

pytest.importorskip("websockets", reason="the websocket adapter needs the websockets package")

from websockets.asyncio.client import connect

from atp.adapters.websocket import WebSocketAdapter, WebSocketSettings
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, AgentRefused, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Context, FileArtifact, Task
from atp.core.results import RunStore, SuiteResults
from atp.core.suite import load_suite
from tests.conftest import AGENTS, EXAMPLES, PYTHON, write
from tests.facts import says
from tests.network import Server, Sink, free_port, run_agent_suite, runs_by_test, self_signed_certificate

AGENT = EXAMPLES / "agents" / "websocket_agent.py"
FAULTS = AGENTS / "ws_faults.py"


MiB = 1024 * 1024


@pytest.fixture(scope="module")
def agent() -> Iterator[Server]:
    server = Server([PYTHON, str(AGENT), "--port", "0"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def faults() -> Iterator[Server]:
    """One server for the faults a request's description names."""
    server = Server([PYTHON, str(FAULTS), "ok", "--port", "0"])
    yield server
    server.stop()


def run_suite(
    tmp_path: Path, plugins: Plugins, settings: str, tests: str, **options: Any
) -> tuple[SuiteResults, RunStore]:
    return run_agent_suite("websocket", tmp_path, plugins, settings, tests, **options)


def at(port: int, extra: str = "") -> str:
    return f"    endpoint: ws://127.0.0.1:{port}\n{extra}"


def request(description: str = "research", **context: Any) -> ATPRequest:
    return ATPRequest(
        version="1.0",
        task_id=str(uuid.uuid4()),
        task=Task(description=description, input_data={"company": "Slack"}),
        context=Context(**context) if context else None,
    )


async def with_adapter(settings: dict[str, Any], body: Any, base_dir: Path = Path(".")) -> Any:
    adapter = WebSocketAdapter(msgspec.convert(settings, WebSocketSettings), name="agent", base_dir=base_dir)
    await adapter.start()
    try:
        return await body(adapter)
    finally:
        await adapter.aclose()


def execute(endpoint: str, task: ATPRequest, **settings: Any) -> tuple[Any, Sink]:
    """``task`` through a started adapter: the response (or the exception raised) and the sink."""

    async def body(adapter: WebSocketAdapter) -> tuple[Any, Sink]:
        sink = Sink()
        try:
            return await adapter.execute(task, sink), sink
        except Exception as exc:  # (the test looks at it)
            return exc, sink

    return anyio.run(with_adapter, {"endpoint": endpoint, **settings}, body)


# --- the example agent ---------------------------------------------------------------------

RESEARCH = """\
  - id: research
    task: {description: "Find the competitors of Slack"}
    assertions:
      - {type: artifact_exists, config: {path: report.md}}
      - {type: contains, config: {path: report.md, pattern: "1. Microsoft Teams"}}
      - {type: must_use_tools, config: {tools: [web_search]}}
"""


def test_the_example_agent_passes_through_the_runner(tmp_path: Path, plugins: Plugins, agent: Server) -> None:
    results, store = run_suite(tmp_path, plugins, at(agent.port), RESEARCH)
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "passed", (run_.error, [c for c in run_.checks if not c.passed])
    assert [e.event_type for e in store.events(run_)] == ["progress", "tool_call", "llm_request", "progress"]
    assert [e.sequence for e in store.events(run_)] == [0, 1, 2, 3]
    report = next(a for a in run_.artifacts if isinstance(a, FileArtifact))
    assert report.content == (
        "# Competitors of Slack\n\n1. Microsoft Teams\n2. Zoom\n3. Google Chat\n4. Discord\n5. Mattermost\n"
    )
    structured = next(a for a in run_.artifacts if not isinstance(a, FileArtifact))
    assert structured.data == {
        "company": "Slack",
        "competitors": ["Microsoft Teams", "Zoom", "Google Chat", "Discord", "Mattermost"],
    }
    assert run_.warnings == []


def test_parallel_runs_each_have_their_own_connection(
    tmp_path: Path, plugins: Plugins, agent: Server
) -> None:
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: research, input_data: {{company: {name}}}}}\n"
        f"    assertions: [{{type: contains, config: {{path: report.md, pattern: '# Competitors of {name}'}}}}]\n"
        for i, name in enumerate(["Slack", "Zoom"] * 4)
    )
    results, _ = run_suite(tmp_path, plugins, at(agent.port), tests, parallel=8)
    assert [test.runs[0].outcome for test in results.tests] == ["passed"] * 8


def test_the_agent_refuses_what_it_cannot_take(agent: Server) -> None:
    endpoint = f"ws://127.0.0.1:{agent.port}"
    good = request()
    for bad, problem in [
        (msgspec.structs.replace(good, task=Task(description="")), "the request has no task.description"),
        (
            msgspec.structs.replace(good, version="2.0"),
            "protocol version '2.0' is not supported; this agent speaks 1.x",
        ),
    ]:
        answer, _ = execute(endpoint, bad)
        assert (answer.status, answer.error_code, answer.error) == ("failed", "INVALID_REQUEST", problem)
        assert answer.task_id == good.task_id

    async def raw(message: str) -> dict[str, Any]:  # what the adapter never sends
        async with connect(endpoint) as connection:
            await connection.send(message)
            return json.loads(await connection.recv())

    for message, problem in [
        ("not json", "the request is not JSON: "),
        ('{"version": "1.0", "task": {"description": "x"}}', "the request has no task_id"),
    ]:
        answer = anyio.run(raw, message)
        assert (answer["status"], answer["error_code"]) == ("failed", "INVALID_REQUEST")
        assert answer["error"].startswith(problem)


def test_the_agent_calls_the_mock_tools_over_http(agent: Server) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    class Tools(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            calls.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            body = json.dumps(
                {
                    "status": "success",
                    "output": {"results": [{"title": "Rocket.Chat"}, {"title": "Zulip"}]},
                    "duration_ms": 12,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    tools = ThreadingHTTPServer(("127.0.0.1", 0), Tools)
    threading.Thread(target=tools.serve_forever, daemon=True).start()
    try:
        task = request(tools_endpoint=f"http://127.0.0.1:{tools.server_address[1]}/runs/abc/tools")
        answer, sink = execute(f"ws://127.0.0.1:{agent.port}", task)
    finally:
        tools.shutdown()
        tools.server_close()
    assert calls == [
        ("/runs/abc/tools/web_search", {"task_id": task.task_id, "input": {"query": "Slack competitors"}})
    ]
    call = next(event for event in sink.seen if event.event_type == "tool_call")
    assert call.payload.output == {"results": [{"title": "Rocket.Chat"}, {"title": "Zulip"}]}
    assert answer.status == "completed"
    assert answer.artifacts[0].content == "# Competitors of Slack\n\n1. Rocket.Chat\n2. Zulip\n"


def test_health_check(agent: Server, faults: Server) -> None:
    async def check(endpoint: str) -> bool:
        settings = msgspec.convert({"endpoint": endpoint, "connect_timeout": 2}, WebSocketSettings)
        return await WebSocketAdapter(settings, name="agent", base_dir=Path(".")).health_check()

    assert anyio.run(check, f"ws://127.0.0.1:{agent.port}") is True
    assert anyio.run(check, f"ws://127.0.0.1:{faults.port}/status/500") is False
    assert anyio.run(check, f"ws://127.0.0.1:{free_port()}") is False


# --- faults --------------------------------------------------------------------------------


def test_an_agent_that_cannot_be_reached_is_named(tmp_path: Path, plugins: Plugins) -> None:
    silent = Server([PYTHON, str(FAULTS), "silent", "--port", "0"])
    port = free_port()
    try:
        for endpoint, reason in [
            (
                f"ws://127.0.0.1:{port}/agent",
                "connection refused (is the agent running and listening there?)",
            ),
            ("ws://no-such-host.invalid:8765", "the host name 'no-such-host.invalid' cannot be resolved ("),
            (f"ws://127.0.0.1:{silent.port}", "no connection within 1 s (connect_timeout)"),
        ]:
            tests = "  - id: t\n    task: {description: x}\n    constraints: {timeout_seconds: 60}\n"
            results, _ = run_suite(
                tmp_path, plugins, f"    endpoint: {endpoint}\n    connect_timeout: 1\n", tests
            )
            run_ = results.tests[0].runs[0]
            assert run_.outcome == "error" and run_.status == "failed", run_.error
            assert run_.error.startswith(f"cannot reach agent 'agent' at {endpoint}: {reason}"), run_.error
            assert run_.duration_seconds < 30  # bounded by connect_timeout, not the run's time limit
    finally:
        silent.stop()


def test_a_refused_handshake_shows_its_http_status(faults: Server) -> None:
    where = f"GET ws://127.0.0.1:{faults.port}/status/{{}} (WebSocket handshake)"
    refused, sink = execute(f"ws://127.0.0.1:{faults.port}/status/403", request())
    assert isinstance(refused, AgentRefused) and refused.status == 403
    says(str(refused), where.format(403), "refused", "HTTP 403 Forbidden", "error_code UNAUTHORIZED")
    assert refused.evidence == "the token is not valid"
    failed, _ = execute(f"ws://127.0.0.1:{faults.port}/status/500", request())
    assert type(failed) is AgentError
    says(str(failed), where.format(500), "HTTP 500 Internal Server Error")
    assert bytes(failed.evidence or b"") == b"the agent is out of order\n"
    assert sink.seen == []


def test_a_port_that_is_not_a_websocket_server(tmp_path: Path, plugins: Plugins) -> None:
    tcp = Server([PYTHON, str(FAULTS), "tcp", "--port", "0"])
    try:
        results, _ = run_suite(tmp_path, plugins, at(tcp.port), "  - id: t\n    task: {description: x}\n")
    finally:
        tcp.stop()
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed", run_.error
    says(
        run_.error,
        f"ws://127.0.0.1:{tcp.port}",
        "WebSocket handshake failed",
        "did not receive a valid HTTP response",
        "WebSocket server",
    )


FAULTS_SUITE = [
    (
        "garbage",
        "{where}: the agent broke the protocol in message 2 (after 1 event): ATP response is not valid JSON: ",
        1,
    ),
    (
        "not_response",
        "{where}: the agent broke the protocol in message 2 (after 1 event): ATP response: Object missing "
        'required fields `version`, `status`, `artifacts`, `metrics`: \'{{"task_id": ',
        1,
    ),
    (
        "version2",
        "{where}: the agent broke the protocol in message 2 (after 1 event): ATP response: protocol version 2.0 "
        'is not supported; ATP speaks version 1.x: \'{{"version": "2.0"',
        1,
    ),
    ("other_task", "agent answered with task_id 'another-task', ", 1),
    (
        "cut",
        "{where}: the connection was cut after 3 events, before an ATP Response (no close frame received or sent)",
        3,
    ),
    ("cut 5", "{where}: the connection was cut after 5 events, before an ATP Response", 5),
    (
        "no_response",
        "{where}: the agent closed the connection (code 1000, normal closure) after 2 events without an "
        "ATP Response",
        2,
    ),
    (
        "internal",
        "{where}: the agent closed the connection (code 1011, internal error) after 2 events without an ATP "
        "Response: 'the model backend exploded'",
        2,
    ),
    (
        "refuse",
        "{where}: the agent refused the request: it closed the connection with code 1008 (policy violation) "
        "before any event: 'the task makes no sense'",
        0,
    ),
    (
        "huge",
        "{where}: the agent sent more than 1048576 bytes in one run (max_message_bytes), after 1 event",
        1,
    ),
    (
        "many",
        "{where}: the agent sent more than 1048576 bytes in one run (max_message_bytes), after 10 events",
        10,
    ),
]


def test_each_fault_fails_its_own_run_and_the_others_go_on(
    tmp_path: Path, plugins: Plugins, faults: Server
) -> None:
    tests = "".join(
        f"  - id: {mode.replace(' ', '_')}\n    task: {{description: {mode}}}\n"
        for mode, _, _ in FAULTS_SUITE
    )
    tests += "".join(f"  - id: ok{i}\n    task: {{description: ok}}\n" for i in range(3))
    results, store = run_suite(
        tmp_path, plugins, at(faults.port, f"    max_message_bytes: {MiB}\n"), tests, parallel=4
    )
    runs = runs_by_test(results)
    where = f"ws://127.0.0.1:{faults.port}"
    for mode, error, events in FAULTS_SUITE:
        run_ = runs[mode.replace(" ", "_")]
        assert run_.outcome == "failed" and run_.status == "failed", (mode, run_.error)
        assert run_.error.startswith(error.format(where=where)), (mode, run_.error)
        assert run_.trace.events == events == len(list(store.events(run_))), mode
        assert "Traceback" not in run_.error
    assert [runs[f"ok{i}"].outcome for i in range(3)] == ["passed"] * 3


def test_max_message_bytes_decides_what_is_too_large(faults: Server) -> None:
    failed, sink = execute(f"ws://127.0.0.1:{faults.port}", request("huge"), max_message_bytes=MiB)
    assert type(failed) is AgentError and "more than 1048576 bytes in one run (max_message_bytes)" in str(
        failed
    )
    assert sink.types() == ["progress"]
    # under the default limit (50 MiB) the 2 MiB message is read: an event, then the agent closes
    ended, sink = execute(f"ws://127.0.0.1:{faults.port}", request("huge"))
    assert str(ended).endswith("(code 1000, normal closure) after 2 events without an ATP Response"), ended
    assert len(sink.seen) == 2 and len(sink.seen[1].payload.message) == 2 * MiB


def test_the_time_limit_closes_the_connection_and_keeps_the_events(
    tmp_path: Path, plugins: Plugins, faults: Server
) -> None:
    tests = "  - id: t\n    task: {description: slow}\n    constraints: {timeout_seconds: 1}\n"
    tests += "  - id: ok\n    task: {description: ok}\n"
    results, store = run_suite(tmp_path, plugins, at(faults.port), tests)
    runs = runs_by_test(results)
    run_ = runs["t"]
    assert run_.status == "timeout"
    says(run_.error, "timed out after 1 s", "stopped")
    assert run_.trace.events == 2 and [e.sequence for e in store.events(run_)] == [0, 1]
    assert faults.printed(f"closed {run_.task_id}")  # the agent saw its connection closed
    assert runs["ok"].outcome == "passed"


def test_more_after_the_response_is_ignored(faults: Server) -> None:
    answer, sink = execute(f"ws://127.0.0.1:{faults.port}", request("after_response"))
    assert answer.status == "completed" and sink.seen == [] and sink.warnings == []


# --- headers, secrets, TLS, settings -------------------------------------------------------


def test_headers_go_with_the_handshake_and_secret_values_are_masked(
    tmp_path: Path, plugins: Plugins, faults: Server
) -> None:
    secret = "s3cr3t-t0ken-" + uuid.uuid4().hex
    settings = at(faults.port, f"    headers: {{Authorization: 'Bearer {secret}', X-Team: research}}\n")
    results, store = run_suite(
        tmp_path, plugins, settings, "  - id: t\n    task: {description: echo_headers}\n"
    )
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "passed", run_.error
    assert run_.artifacts[0].data["headers"] == {
        "Authorization": hashlib.sha256(f"Bearer {secret}".encode()).hexdigest(),
        "X-Team": hashlib.sha256(b"research").hexdigest(),
    }
    assert [event.payload.message for event in store.events(run_)] == ["called with ***"]
    written = [path for path in store.directory.rglob("*") if path.is_file()]
    assert written and all(secret not in path.read_text() for path in written)
    assert WebSocketAdapter.secret_values(
        msgspec.convert(
            {
                "endpoint": "wss://u:pw@h/agent?api_key=k3y",
                "headers": {"Authorization": f"Bearer {secret}", "X-Team": "r"},
            },
            WebSocketSettings,
        )
    ) == [f"Bearer {secret}", secret, "pw", "k3y"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


def test_tls_with_a_ca_bundle(
    tmp_path: Path, plugins: Plugins, agent: Server, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    shutil.copy(cert, tmp_path / "ca.pem")
    server = Server([PYTHON, str(AGENT), "--port", "0", "--tls-cert", str(cert), "--tls-key", str(key)])
    try:
        settings = f"    endpoint: wss://localhost:{server.port}\n    ca_bundle: ca.pem\n"
        results, _ = run_suite(tmp_path, plugins, settings, RESEARCH)
        assert results.tests[0].runs[0].outcome == "passed", results.tests[0].runs[0].error
        tests = "  - id: t\n    task: {description: x}\n"
        for endpoint, reason in [  # the system's CAs do not know the certificate; TLS to a plain server
            (f"wss://localhost:{server.port}", "its TLS certificate does not verify ("),
            (
                f"wss://127.0.0.1:{agent.port}",
                "the TLS handshake failed (the server closed the connection); "
                "does the agent speak TLS there?",
            ),
        ]:
            results, _ = run_suite(tmp_path, plugins, f"    endpoint: {endpoint}\n", tests)
            run_ = results.tests[0].runs[0]
            assert run_.outcome == "error", run_.error
            assert run_.error.startswith(f"cannot reach agent 'agent' at {endpoint}: {reason}"), run_.error
        results, _ = run_suite(
            tmp_path, plugins, f"    endpoint: wss://localhost:{server.port}\n    verify: false\n", tests
        )
        assert results.tests[0].runs[0].outcome == "passed", results.tests[0].runs[0].error
    finally:
        server.stop()


def test_a_ca_bundle_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    async def body(adapter: WebSocketAdapter) -> None:
        raise AssertionError("start must fail")

    with pytest.raises(AdapterError) as error:
        anyio.run(with_adapter, {"endpoint": "wss://localhost:1", "ca_bundle": "missing.pem"}, body, tmp_path)
    says(
        str(error.value),
        "agent 'agent'",
        f"ca_bundle {tmp_path / 'missing.pem'}",
        "No such file or directory",
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            "endpoint: http://localhost:8765",
            "'endpoint' 'http://localhost:8765' must be a URL starting with ws:// or wss://",
        ),
        ("endpoint: 'ws://localhost:8765/#x'", "has a #fragment"),
        (
            "{endpoint: 'ws://h:1', headers: {Sec-WebSocket-Key: x}}",
            "'headers' may not set 'Sec-WebSocket-Key'",
        ),
        (
            "{endpoint: 'wss://h:1', verify: false, ca_bundle: ca.pem}",
            "'ca_bundle' has no effect with 'verify: false'",
        ),
        (
            "{endpoint: 'ws://h:1', max_message_bytes: 10}",
            "'max_message_bytes' must be a whole number of bytes from 1024",
        ),
    ],
)
def test_bad_settings_are_located_when_the_suite_loads(
    tmp_path: Path, plugins: Plugins, settings: str, message: str
) -> None:
    if settings.startswith("{"):
        entry = "  - {name: agent, type: websocket, " + settings[1:] + "\n"
    else:
        entry = f"  - name: agent\n    type: websocket\n    {settings}\n"
    text = f"test_suite: websocket\nagents:\n{entry}tests:\n  - id: t\n    task: {{description: x}}\n"
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    with pytest.raises(SuiteError) as error:
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    assert message in str(error.value) and "suite.yaml:" in str(error.value), str(error.value)
