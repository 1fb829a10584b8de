"""The grpc adapter against real grpc.aio servers on loopback: the example agent
(examples/agents/grpc_agent.py) and misbehaving ones (tests/agents/grpc_faults.py)."""

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

pytest.importorskip("grpc", reason="the grpc adapter needs atp-adapters[grpc]")

from atp.adapters.grpc import GrpcAdapter, GrpcSettings
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AgentError, AgentRefused, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Context, FileArtifact, Task
from atp.core.results import RunStore, SuiteResults
from atp.core.suite import load_suite
from tests.conftest import AGENTS, EXAMPLES, PYTHON, write
from tests.facts import says
from tests.network import Server, Sink, free_port, run_agent_suite, runs_by_test, self_signed_certificate

AGENT = EXAMPLES / "agents" / "grpc_agent.py"
FAULTS = AGENTS / "grpc_faults.py"
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def agent() -> Iterator[Server]:
    server = Server([PYTHON, str(AGENT), "--port", "0"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def faults() -> Iterator[Server]:
    """One server for the faults a request's description names (``cut`` ends it: not here)."""
    server = Server([PYTHON, str(FAULTS), "ok", "--port", "0"])
    yield server
    server.stop()


def fault_server(mode: str) -> Server:
    return Server([PYTHON, str(FAULTS), mode, "--port", "0"])


def run_suite(
    tmp_path: Path, plugins: Plugins, settings: str, tests: str, **options: Any
) -> tuple[SuiteResults, RunStore]:
    return run_agent_suite("grpc", tmp_path, plugins, settings, tests, **options)


def at(port: int, extra: str = "") -> str:
    return f"    endpoint: grpc://127.0.0.1:{port}\n{extra}"


def request(description: str = "research", **context: Any) -> ATPRequest:
    return ATPRequest(
        version="1.0",
        task_id=str(uuid.uuid4()),
        task=Task(description=description, input_data={"company": "Slack", "top": 3}),
        context=Context(**context) if context else None,
    )


async def with_adapter(settings: dict[str, Any], body: Any, base_dir: Path = Path(".")) -> Any:
    adapter = GrpcAdapter(msgspec.convert(settings, GrpcSettings), name="agent", base_dir=base_dir)
    await adapter.start()
    try:
        return await body(adapter)
    finally:
        await adapter.aclose()


# --- the example agent ---------------------------------------------------------------------

RESEARCH = """\
  - id: research
    task: {description: "Find the competitors of Slack", input_data: {company: Slack, top: 3}}
    assertions:
      - {type: artifact_exists, config: {path: report.md}}
      - {type: contains, config: {path: report.md, pattern: "Competitor analysis: Slack"}}
      - {type: must_use_tools, config: {tools: [web_search]}}
"""


@pytest.mark.parametrize("stream", ["true", "false", "auto"])
def test_the_example_agent_passes_streaming_and_unary(
    tmp_path: Path, plugins: Plugins, agent: Server, stream: str
) -> None:
    tests = RESEARCH + (
        "  - id: zoom\n    task: {description: 'Find the competitors of Zoom'}\n    assertions:\n"
        "      - {type: contains, config: {path: report.md, pattern: 'Slack Huddles'}}\n"
    )
    results, store = run_suite(tmp_path, plugins, at(agent.port, f"    stream: {stream}\n"), tests)
    runs = runs_by_test(results)
    research = runs["research"]
    assert research.outcome == "passed", (research.error, [c for c in research.checks if not c.passed])
    assert [e.event_type for e in store.events(research)] == [
        "reasoning",
        "progress",
        "tool_call",
        "llm_request",
        "progress",
        "tool_call",
        "artifact_created",
        "progress",
    ]
    assert research.trace.tool_calls == {"web_search": 1, "file_write": 1}
    report = next(a for a in research.artifacts if isinstance(a, FileArtifact))
    assert (
        report.content.startswith("# Competitor analysis: Slack\n")
        and "1. Microsoft Teams: 35%" in report.content
    )
    assert research.warnings == []
    zoom = runs["zoom"]  # the company named in the description; its top 5 holds Slack Huddles
    assert zoom.outcome == "passed", (zoom.error, zoom.checks)


def test_parallel_runs_share_one_channel(tmp_path: Path, plugins: Plugins, agent: Server) -> None:
    tests = "".join(
        f"  - id: t{i}\n    task: {{description: research, input_data: {{company: Zoom}}}}\n"
        for i in range(8)
    )
    results, _ = run_suite(tmp_path, plugins, at(agent.port), tests, parallel=8)
    assert [test.runs[0].outcome for test in results.tests] == ["passed"] * 8


def test_the_agent_refuses_a_malformed_request_and_version_2(agent: Server) -> None:
    async def body(adapter: GrpcAdapter) -> None:
        good = request()
        malformed = msgspec.structs.replace(good, task_id="")
        with pytest.raises(AgentRefused) as refused:
            await adapter.execute(malformed, Sink())
        assert refused.value.status == "INVALID_ARGUMENT"
        says(
            str(refused.value),
            f"grpc://127.0.0.1:{agent.port}/atp.v1.Agent/ExecuteStream",
            "refused",
            "INVALID_ARGUMENT",
            "error_code INVALID_REQUEST",
        )
        assert refused.value.evidence == "the request has no task_id"
        answer = await adapter.execute(msgspec.structs.replace(good, version="2.0"), Sink())
        assert (answer.status, answer.error_code) == ("failed", "INVALID_REQUEST")
        assert "2.0 is not supported" in (answer.error or "")

    anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{agent.port}"}, body)


def test_the_agent_calls_the_mock_tools_over_http(agent: Server) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    class Tools(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            calls.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            body = json.dumps(
                {
                    "status": "success",
                    "output": {"results": [{"name": "Rocket.Chat"}, {"name": "Zulip"}]},
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
        task = request(tools_endpoint=f"http://127.0.0.1:{tools.server_address[1]}/tools")

        async def body(adapter: GrpcAdapter) -> Any:
            sink = Sink()
            return await adapter.execute(task, sink), sink

        answer, sink = anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{agent.port}"}, body)
    finally:
        tools.shutdown()
    assert calls == [
        ("/tools/web_search", {"task_id": task.task_id, "input": {"query": "Slack competitors"}})
    ]
    call = next(event for event, _ in sink.received if event.event_type == "tool_call")
    assert call.payload.output == {"results": [{"name": "Rocket.Chat"}, {"name": "Zulip"}]}
    assert answer.status == "completed"
    assert "1. Rocket.Chat\n2. Zulip\n" in answer.artifacts[0].content


def test_events_reach_the_sink_with_their_raw_json(agent: Server) -> None:
    async def body(adapter: GrpcAdapter) -> Sink:
        sink = Sink()
        await adapter.execute(request(), sink)
        return sink

    sink = anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{agent.port}", "stream": True}, body)
    assert sink.received and all(
        raw is not None and json.loads(raw)["sequence"] == event.sequence for event, raw in sink.received
    )


# --- stream: auto, health ------------------------------------------------------------------


def test_auto_falls_back_to_execute_for_good_and_stream_true_says_why_not(
    tmp_path: Path, plugins: Plugins
) -> None:
    server = fault_server("unary_only")
    try:

        async def body(adapter: GrpcAdapter) -> tuple[Any, Sink, Any]:
            sink = Sink()
            first = await adapter.execute(request(), sink)
            assert adapter.stream is False
            return first, sink, await adapter.health_check()

        first, sink, healthy = anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{server.port}"}, body)
        assert first.status == "completed" and sink.types() == ["progress", "progress"]
        assert healthy is True  # no Health rpc: the server answers, that is enough
        results, _ = run_suite(
            tmp_path,
            plugins,
            at(server.port, "    stream: true\n"),
            "  - id: t\n    task: {description: x}\n",
        )
        run_ = results.tests[0].runs[0]
        assert run_.outcome == "error"
        says(
            run_.error,
            "agent 'agent'",
            f"grpc://127.0.0.1:{server.port}/atp.v1.Agent/ExecuteStream",
            "not implemented",
            "UNIMPLEMENTED: Method not implemented!",
            "'stream: false'",
            "'auto'",
        )
    finally:
        server.stop()


def test_health_check(agent: Server) -> None:
    unhealthy = fault_server("unhealthy")
    try:

        async def check(port: int) -> bool:
            adapter = GrpcAdapter(
                msgspec.convert({"endpoint": f"grpc://127.0.0.1:{port}", "connect_timeout": 2}, GrpcSettings),
                name="agent",
                base_dir=Path("."),
            )
            return await adapter.health_check()  # (not started: it opens and closes its channel)

        assert anyio.run(check, agent.port) is True
        assert anyio.run(check, unhealthy.port) is False
        assert anyio.run(check, free_port()) is False
    finally:
        unhealthy.stop()


# --- faults --------------------------------------------------------------------------------


def test_an_agent_that_cannot_be_reached_is_named_quickly(tmp_path: Path, plugins: Plugins) -> None:
    silent = fault_server("silent")
    port = free_port()
    try:
        for endpoint, reason in [
            (f"grpc://127.0.0.1:{port}", "connection refused (is the agent running and listening there?)"),
            (
                "grpc://no-such-host.invalid:50051",
                "the host name 'no-such-host.invalid' cannot be resolved (",
            ),
            (f"grpc://127.0.0.1:{silent.port}", "no connection within 1 s (connect_timeout)"),
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


FAULTS_SUITE = [
    (
        "refuse",
        "{where}/ExecuteStream: the agent refused the request with INVALID_ARGUMENT (error_code INVALID_REQUEST): "
        "'the task makes no sense'",
        0,
    ),
    (
        "internal",
        "{where}/ExecuteStream: the agent ended the call with the gRPC status INTERNAL, after 2 events: "
        "'the model backend exploded'",
        2,
    ),
    (
        "garbage",
        "{where}/ExecuteStream: the agent broke the protocol in message 2 (after 1 event): ATP event is not "
        "valid JSON: ",
        1,
    ),
    (
        "not_event",
        "{where}/ExecuteStream: the agent broke the protocol in message 1 (before any event): ATP event: "
        "Object missing required field `event_type`",
        0,
    ),
    (
        "empty_item",
        "{where}/ExecuteStream: the agent sent an empty item (message 2, after 1 event): neither its "
        "'event' nor its 'response' is set",
        1,
    ),
    (
        "version2",
        "{where}/ExecuteStream: the agent broke the protocol in message 2 (after 1 event): ATP response: "
        'protocol version 2.0 is not supported; ATP speaks version 1.x: \'{{"version": "2.0"',
        1,
    ),
    ("no_response", "{where}/ExecuteStream: the stream ended after 2 events without an ATP Response", 2),
    (
        "huge",
        "{where}/ExecuteStream: the agent sent a message of more than 1048576 bytes (max_message_bytes), "
        "after 1 event: ",
        1,
    ),
    (
        "many",
        "{where}/ExecuteStream: the agent sent more than 1048576 bytes in one run (max_message_bytes), "
        "after 10 events",
        10,
    ),
]


def test_each_fault_fails_its_own_run_and_the_others_go_on(
    tmp_path: Path, plugins: Plugins, faults: Server
) -> None:
    tests = "".join(f"  - id: {mode}\n    task: {{description: {mode}}}\n" for mode, _, _ in FAULTS_SUITE)
    tests += "".join(f"  - id: ok{i}\n    task: {{description: ok}}\n" for i in range(3))
    settings = at(faults.port, f"    max_message_bytes: {MiB}\n")
    results, store = run_suite(tmp_path, plugins, settings, tests, parallel=4)
    runs = runs_by_test(results)
    where = f"grpc://127.0.0.1:{faults.port}/atp.v1.Agent"
    for mode, error, events in FAULTS_SUITE:
        run_ = runs[mode]
        assert run_.outcome == "failed" and run_.status == "failed", (mode, run_.error)
        assert run_.error.startswith(error.format(where=where)), (mode, run_.error)
        assert run_.trace.events == events == len(list(store.events(run_))), mode
        assert "Traceback" not in run_.error
    assert [runs[f"ok{i}"].outcome for i in range(3)] == ["passed"] * 3


def test_a_refusal_is_an_agent_refused_with_its_status(faults: Server) -> None:
    async def body(adapter: GrpcAdapter) -> None:
        for stream in (True, False):
            adapter.stream = stream
            with pytest.raises(AgentRefused) as refused:
                await adapter.execute(request("refuse"), Sink())
            assert refused.value.status == "INVALID_ARGUMENT"
            assert refused.value.evidence == "the task makes no sense"

    anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{faults.port}"}, body)


def test_unary_faults(faults: Server) -> None:
    async def body(adapter: GrpcAdapter) -> None:
        where = f"grpc://127.0.0.1:{faults.port}/atp.v1.Agent/Execute"
        with pytest.raises(AgentError) as failed:
            await adapter.execute(request("version2"), Sink())
        says(
            str(failed.value),
            where,
            "broke the protocol",
            "not an ATP Response",
            "version 2.0 is not supported",
            "version 1.x",
        )
        assert failed.value.evidence is not None and json.loads(failed.value.evidence)["version"] == "2.0"
        with pytest.raises(AgentError) as failed:
            await adapter.execute(request("internal"), Sink())
        assert (
            str(failed.value)
            == f"{where}: the agent ended the call with the gRPC status INTERNAL, before any event"
        )

    anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{faults.port}", "stream": False}, body)


def test_a_stream_cut_in_the_middle_keeps_its_events(tmp_path: Path, plugins: Plugins) -> None:
    server = fault_server("cut")
    try:
        results, store = run_suite(
            tmp_path, plugins, at(server.port), "  - id: t\n    task: {description: cut}\n"
        )
    finally:
        server.stop()
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed"
    assert run_.error.startswith(
        f"grpc://127.0.0.1:{server.port}/atp.v1.Agent/ExecuteStream: the connection was cut after 3 events, "
        f"before an ATP Response (gRPC status UNAVAILABLE: "
    ), run_.error
    assert [e.sequence for e in store.events(run_)] == [0, 1, 2]


@pytest.mark.parametrize("stream", ["true", "false"])
def test_the_time_limit_cancels_the_call_and_keeps_the_events(
    tmp_path: Path, plugins: Plugins, faults: Server, stream: str
) -> None:
    tests = "  - id: t\n    task: {description: slow}\n    constraints: {timeout_seconds: 1}\n"
    tests += "  - id: ok\n    task: {description: ok}\n"
    results, store = run_suite(tmp_path, plugins, at(faults.port, f"    stream: {stream}\n"), tests)
    runs = runs_by_test(results)
    run_ = runs["t"]
    assert run_.status == "timeout"
    says(run_.error, "timed out after 1 s", "stopped")
    assert run_.trace.events == (2 if stream == "true" else 0) == len(list(store.events(run_)))
    assert faults.printed(f"cancelled {run_.task_id}")  # the agent saw its call cancelled
    assert runs["ok"].outcome == "passed"


def test_more_after_the_response_is_ignored_with_a_warning(faults: Server) -> None:
    async def body(adapter: GrpcAdapter) -> tuple[Any, Sink]:
        sink = Sink()
        return await adapter.execute(request("after_response"), sink), sink

    answer, sink = anyio.run(with_adapter, {"endpoint": f"grpc://127.0.0.1:{faults.port}"}, body)
    assert answer.status == "completed" and sink.received == []
    assert sink.warnings == [
        f"grpc://127.0.0.1:{faults.port}/atp.v1.Agent/ExecuteStream: the agent sent more after the ATP Response; "
        f"ATP ignored it and ended the call"
    ]


# --- metadata, secrets, TLS, settings ------------------------------------------------------


def test_metadata_is_sent_with_every_call_and_secret_values_are_masked(
    tmp_path: Path, plugins: Plugins, faults: Server
) -> None:
    secret = "s3cr3t-t0ken-" + uuid.uuid4().hex
    settings = at(
        faults.port,
        f"    headers: {{Authorization: 'Bearer {secret}'}}\n    metadata: {{X-Team: research}}\n",
    )
    results, store = run_suite(
        tmp_path, plugins, settings, "  - id: t\n    task: {description: echo_metadata}\n"
    )
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "passed", run_.error
    assert run_.artifacts[0].data["metadata"] == {
        "authorization": hashlib.sha256(f"Bearer {secret}".encode()).hexdigest(),
        "x-team": hashlib.sha256(b"research").hexdigest(),
    }
    assert [event.payload.message for event in store.events(run_)] == ["called with ***"]
    assert all(secret not in path.read_text() for path in store.directory.rglob("*") if path.is_file())
    assert GrpcAdapter.secret_values(
        msgspec.convert(
            {
                "endpoint": "grpc://h:1",
                "headers": {"Authorization": f"Bearer {secret}"},
                "metadata": {"x-api-key": "k3y-value"},
            },
            GrpcSettings,
        )
    ) == [f"Bearer {secret}", secret, "k3y-value"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


def test_tls_with_a_ca_bundle(tmp_path: Path, plugins: Plugins, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    shutil.copy(cert, tmp_path / "ca.pem")
    server = Server([PYTHON, str(AGENT), "--port", "0", "--tls-cert", str(cert), "--tls-key", str(key)])
    try:
        tests = RESEARCH
        results, _ = run_suite(
            tmp_path,
            plugins,
            f"    endpoint: grpcs://localhost:{server.port}\n    ca_bundle: ca.pem\n",
            tests,
        )
        assert results.tests[0].runs[0].outcome == "passed", results.tests[0].runs[0].error
        # the system's CAs do not know the certificate; plaintext to a TLS server, TLS to a plaintext one
        plain = Server([PYTHON, str(AGENT), "--port", "0"])
        try:
            for endpoint, reason in [
                (f"grpcs://localhost:{server.port}", "its TLS certificate does not verify ("),
                (f"grpc://localhost:{server.port}", "(if the agent speaks TLS, write grpcs://)"),
                (f"grpcs://localhost:{plain.port}", "the TLS handshake failed ("),
            ]:
                results, _ = run_suite(
                    tmp_path,
                    plugins,
                    f"    endpoint: {endpoint}\n",
                    "  - id: t\n    task: {description: x}\n",
                )
                run_ = results.tests[0].runs[0]
                assert run_.outcome == "error", run_.error
                assert (
                    run_.error.startswith(f"cannot reach agent 'agent' at {endpoint}: ")
                    and reason in run_.error
                ), run_.error
        finally:
            plain.stop()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            "endpoint: localhost:50051",
            "'endpoint' 'localhost:50051' needs its scheme: grpc://localhost:50051 (plaintext) "
            "or grpcs://localhost:50051 (TLS)",
        ),
        (
            "endpoint: http://localhost:50051",
            "'endpoint' 'http://localhost:50051' must be a URL starting with grpc:// or grpcs://",
        ),
        ("endpoint: grpc://localhost", "'endpoint' 'grpc://localhost' has no port; write grpc://host:port"),
        ("endpoint: grpc://localhost:1/atp", "without a path, query or user"),
        ("{endpoint: 'grpcs://h:1', verify: false}", "'verify: false' is not possible with gRPC"),
        (
            "{endpoint: 'grpc://h:1', ca_bundle: ca.pem}",
            "'ca_bundle' applies to TLS endpoints (grpcs://host:port)",
        ),
        (
            "{endpoint: 'grpc://h:1', metadata: {'x y': v}}",
            "'metadata' has the key 'x y', which is not a gRPC metadata key",
        ),
        (
            "{endpoint: 'grpc://h:1', metadata: {grpc-timeout: '1S'}}",
            "'metadata' may not set 'grpc-timeout': gRPC sets it",
        ),
        (
            "{endpoint: 'grpc://h:1', metadata: {x-name: 'Zoë'}}",
            "holds a character gRPC metadata cannot carry",
        ),
        ("{endpoint: 'grpc://h:1', stream: sometimes}", "stream"),
        ("{endpoint: 'grpc://h:1', streaming: true}", "streaming"),
    ],
)
def test_bad_settings_are_located_when_the_suite_loads(
    tmp_path: Path, plugins: Plugins, settings: str, message: str
) -> None:
    if settings.startswith("{"):
        entry = "  - {name: agent, type: grpc, " + settings[1:] + "\n"
    else:
        entry = f"  - name: agent\n    type: grpc\n    {settings}\n"
    text = f"test_suite: grpc\nagents:\n{entry}tests:\n  - id: t\n    task: {{description: x}}\n"
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    with pytest.raises(SuiteError) as error:
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    assert message in str(error.value) and "suite.yaml:" in str(error.value), str(error.value)
