"""The http adapter against real HTTP servers on loopback (tests/agents/http_faults.py): the
synchronous and the Server-Sent Events wire, ``stream: auto``, health, TLS, the connection pool,
secrets, and every fault, each saying what happened and where."""

from __future__ import annotations

import hashlib
import json
import shutil
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

pytest.importorskip("httpx", reason="the http adapter needs httpx")

from atp.adapters.http import HttpAdapter, HttpSettings
from atp.core.config import agent_definitions, load_config, resolve_agent
from atp.core.errors import AdapterError, AgentError, AgentRefused, SuiteError
from atp.core.plugins import Plugins
from atp.core.protocol import ATPRequest, Task
from atp.core.results import RunStore, SuiteResults
from atp.core.suite import load_suite
from tests.agents.http_faults import FaultyAgent
from tests.conftest import write
from tests.facts import says
from tests.network import Sink, free_port, run_agent_suite, runs_by_test, self_signed_certificate

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def agent() -> Iterator[FaultyAgent]:
    """One server for the behaviours a request's description names."""
    with FaultyAgent() as server:
        yield server


def run_suite(
    tmp_path: Path, plugins: Plugins, settings: str, tests: str, **options: Any
) -> tuple[SuiteResults, RunStore]:
    return run_agent_suite("http", tmp_path, plugins, settings, tests, **options)


def at(url: str, extra: str = "") -> str:
    return f"    endpoint: {url}\n{extra}"


def cases(*descriptions: str, timeout: int | None = None) -> str:
    """One test per description, ids t0, t1 ..."""
    limit = f"\n    constraints: {{timeout_seconds: {timeout}}}" if timeout else ""
    return "".join(
        f"  - id: t{i}\n    task: {{description: '{d}'}}{limit}\n" for i, d in enumerate(descriptions)
    )


def request(description: str = "ok") -> ATPRequest:
    return ATPRequest(version="1.0", task_id=str(uuid.uuid4()), task=Task(description=description))


def adapter_for(settings: dict[str, Any], base_dir: Path = Path(".")) -> HttpAdapter:
    return HttpAdapter(msgspec.convert(settings, HttpSettings), name="agent", base_dir=base_dir)


async def with_adapter(settings: dict[str, Any], body: Any, base_dir: Path = Path(".")) -> Any:
    adapter = adapter_for(settings, base_dir)
    await adapter.start()
    try:
        return await body(adapter)
    finally:
        await adapter.aclose()


def execute(settings: dict[str, Any], description: str) -> tuple[Any, Sink]:
    """One run's answer (or the exception it raised) and its sink."""
    sink = Sink()

    async def body(adapter: HttpAdapter) -> Any:
        try:
            return await adapter.execute(request(description), sink)
        except Exception as exc:  # (the test looks at it)
            return exc

    return anyio.run(with_adapter, settings, body), sink


# --- the wire ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "path", "accept", "events"),
    [
        ("true", "/execute/stream", "text/event-stream, application/vnd.atp.v1+json", 3),
        ("auto", "/execute/stream", "text/event-stream, application/vnd.atp.v1+json", 3),
        ("false", "/execute", "application/vnd.atp.v1+json", 0),
    ],
)
def test_a_good_agent_passes_with_the_headers_atp_sends(
    tmp_path: Path, plugins: Plugins, stream: str, path: str, accept: str, events: int
) -> None:
    with FaultyAgent() as server:
        settings = at(
            server.url + "/agents/a1/", f"    stream: {stream}\n    headers: {{X-Team: research}}\n"
        )
        results, store = run_suite(tmp_path, plugins, settings, cases("ok 3", "ok 3"))
    for run_ in runs_by_test(results).values():
        assert run_.outcome == "passed", run_.error
        assert [e.sequence for e in store.events(run_)] == list(range(events))
        assert run_.artifacts[0].data["ok"] is True
    assert [seen.path for seen in server.seen] == [f"/agents/a1{path}"] * 2  # (the endpoint's path kept)
    for seen in server.seen:
        assert seen.method == "POST"
        assert seen.headers["content-type"] == "application/json"
        assert seen.headers["accept"] == accept
        assert seen.headers["x-team"] == "research"
        assert seen.headers["user-agent"] == "atp"


def test_the_sse_message_rule_and_the_content_type_decides(agent: FaultyAgent) -> None:
    # comments and messages without data are skipped; the response has no event name and no
    # event_type, its JSON over two data: lines
    answer, sink = execute({"endpoint": agent.url, "stream": True}, "plain 2")
    assert answer.status == "completed" and sink.sequences() == [0, 1] and sink.warnings == []
    assert all(
        raw is not None and json.loads(raw)["sequence"] == event.sequence for event, raw in sink.received
    )
    # /execute/stream answered with application/json: read as the response
    answer, sink = execute({"endpoint": agent.url, "stream": True}, "sync")
    assert answer.status == "completed" and sink.received == []


def test_another_task_id_fails_the_run(tmp_path: Path, plugins: Plugins, agent: FaultyAgent) -> None:
    for stream in ("true", "false"):
        results, _ = run_suite(
            tmp_path, plugins, at(agent.url, f"    stream: {stream}\n"), cases("other_task")
        )
        run_ = results.tests[0].runs[0]
        assert run_.outcome == "failed"
        assert (
            run_.error
            == f"agent answered with task_id 'another-task', but the request's task_id was '{run_.task_id}'"
        )


# --- faults --------------------------------------------------------------------------------

STREAM_FAULTS = [
    # description, the reason (after "POST {url}/execute/stream: "), the events kept
    (
        "refuse",
        "the agent refused the request with HTTP 422 Unprocessable Entity (error_code INVALID_REQUEST): "
        "'the task makes no sense'",
        0,
    ),
    ("refuse_text", "the agent refused the request with HTTP 403 Forbidden: 'no entry for you\\n'", 0),
    (
        "fail",
        "the agent failed with HTTP 500 Internal Server Error (error_code INTERNAL_ERROR): "
        "'the model backend exploded'",
        0,
    ),
    (
        "not_response 1",
        "the agent broke the protocol in message 2 (after 1 event): ATP response: Object missing "
        'required fields `version`, `task_id`, `status`, `artifacts`, `metrics`: \'{"hello": "world"}\'',
        1,
    ),
    (
        "garbage 2",
        "the agent broke the protocol in message 3 (after 2 events): ATP response is not valid JSON: "
        "JSON is malformed: invalid character (byte 4): 'this is not JSON {'",
        2,
    ),
    (
        "version2",
        "the agent broke the protocol in message 2 (after 1 event): ATP response: protocol version 2.0 "
        'is not supported; ATP speaks version 1.x: \'{"version": "2.0"',
        1,
    ),
    (
        "version2event 2",
        "the agent broke the protocol in message 3 (after 2 events): ATP event: protocol version "
        '2.0 is not supported; ATP speaks version 1.x: \'{"version": "2.0"',
        2,
    ),
    (
        "cut 4",
        "the connection was cut after 4 events, before an ATP Response (peer closed connection without "
        "sending complete message body (incomplete chunked read))",
        4,
    ),
    (
        "cut_length 3",
        "the connection was cut after 3 events, before an ATP Response (peer closed connection "
        "without sending complete message body (received 606 bytes, expected 1606))",
        3,
    ),
    ("no_response 2", "the stream ended after 2 events without an ATP Response", 2),
    ("no_response_close 2", "the stream ended after 2 events without an ATP Response", 2),
    ("huge", "the agent sent more than 1048576 bytes in one run (max_message_bytes), before any event", 0),
    (
        "huge_chunked",
        "the agent sent more than 1048576 bytes in one run (max_message_bytes), before any event",
        0,
    ),
    ("flood", "the agent sent more than 1048576 bytes in one run (max_message_bytes), after 3 events", 3),
]


def test_each_stream_fault_fails_its_own_run_and_the_others_go_on(
    tmp_path: Path, plugins: Plugins, agent: FaultyAgent
) -> None:
    descriptions = [fault for fault, _, _ in STREAM_FAULTS] + ["ok 1"] * 3
    settings = at(agent.url, f"    stream: true\n    max_message_bytes: {MiB}\n")
    results, store = run_suite(tmp_path, plugins, settings, cases(*descriptions), parallel=4)
    runs = runs_by_test(results)
    where = f"POST {agent.url}/execute/stream: "
    for index, (fault, reason, events) in enumerate(STREAM_FAULTS):
        run_ = runs[f"t{index}"]
        assert run_.outcome == "failed" and run_.status == "failed", (fault, run_.error)
        assert run_.error.startswith(where + reason), (fault, run_.error)
        assert run_.trace.events == events, fault
        assert [e.sequence for e in store.events(run_)] == list(range(events)), fault
    assert [runs[f"t{len(STREAM_FAULTS) + i}"].outcome for i in range(3)] == ["passed"] * 3


SYNC_FAULTS = [
    (
        "refuse",
        "the agent refused the request with HTTP 422 Unprocessable Entity (error_code INVALID_REQUEST): "
        "'the task makes no sense'",
    ),
    (
        "not_response",
        "the agent broke the protocol: its answer is not an ATP Response (ATP response: Object "
        'missing required fields `version`, `task_id`, `status`, `artifacts`, `metrics`): \'{"hello": "world"}\'',
    ),
    (
        "version2",
        "the agent broke the protocol: its answer is not an ATP Response (ATP response: protocol version "
        '2.0 is not supported; ATP speaks version 1.x): \'{"version": "2.0"',
    ),
    (
        "cut_length",
        "the connection was cut before any event, before an ATP Response (peer closed connection "
        "without sending complete message body (received ",
    ),
    ("huge", "the agent sent more than 1048576 bytes in one run (max_message_bytes), before any event"),
    (
        "huge_chunked",
        "the agent sent more than 1048576 bytes in one run (max_message_bytes), before any event",
    ),
]


def test_each_synchronous_fault_says_what_and_where(
    tmp_path: Path, plugins: Plugins, agent: FaultyAgent
) -> None:
    settings = at(agent.url, f"    stream: false\n    max_message_bytes: {MiB}\n")
    results, _ = run_suite(
        tmp_path, plugins, settings, cases(*(fault for fault, _ in SYNC_FAULTS)), parallel=4
    )
    runs = runs_by_test(results)
    for index, (fault, reason) in enumerate(SYNC_FAULTS):
        run_ = runs[f"t{index}"]
        assert run_.outcome == "failed", (fault, run_.error)
        assert run_.error.startswith(f"POST {agent.url}/execute: {reason}"), (fault, run_.error)


def test_a_4xx_is_a_refusal_with_its_status_and_a_5xx_is_not(agent: FaultyAgent) -> None:
    for stream in (True, False):
        refused, _ = execute({"endpoint": agent.url, "stream": stream}, "refuse")
        assert isinstance(refused, AgentRefused) and refused.status == 422
        assert refused.evidence == "the task makes no sense"  # (the JSON's error, not the whole body)
        text, _ = execute({"endpoint": agent.url, "stream": stream}, "refuse_text")
        assert (
            isinstance(text, AgentRefused) and text.status == 403 and text.evidence == b"no entry for you\n"
        )
        failed, _ = execute({"endpoint": agent.url, "stream": stream}, "fail")
        assert isinstance(failed, AgentError) and not isinstance(failed, AgentRefused)
        assert failed.evidence == "the model backend exploded"


def test_a_redirect_is_refused_and_not_followed(agent: FaultyAgent) -> None:
    before = len(agent.seen)
    for stream, path in ((True, "/execute/stream"), (False, "/execute")):
        answer, _ = execute({"endpoint": agent.url, "stream": stream}, "redirect")
        assert isinstance(answer, AgentError)
        says(
            str(answer),
            f"POST {agent.url}{path}",
            "redirect (HTTP 307)",
            f"'{agent.url}/elsewhere/execute'",
            "does not follow redirects",
            "'endpoint'",
        )
    assert [seen.path for seen in agent.seen[before:]] == [
        "/execute/stream",
        "/execute",
    ]  # nothing to /elsewhere


def test_an_agent_that_cannot_be_reached_is_an_error_naming_it(tmp_path: Path, plugins: Plugins) -> None:
    port = free_port()
    for endpoint, reason in [
        (f"http://127.0.0.1:{port}", "connection refused (is the agent running and listening there?)"),
        ("http://no-such-host.invalid:8000", "the host name 'no-such-host.invalid' cannot be resolved ("),
    ]:
        results, _ = run_suite(tmp_path, plugins, at(endpoint, "    connect_timeout: 2\n"), cases("ok"))
        run_ = results.tests[0].runs[0]
        assert run_.outcome == "error" and run_.status == "failed", run_.error
        assert run_.error.startswith(f"cannot reach agent 'agent' at {endpoint}/execute/stream: {reason}"), (
            run_.error
        )
        assert run_.duration_seconds < 5


@pytest.mark.parametrize(("stream", "events"), [("true", 3), ("false", 0)])
def test_the_time_limit_closes_the_connection_and_keeps_the_events(
    tmp_path: Path, plugins: Plugins, agent: FaultyAgent, stream: str, events: int
) -> None:
    tests = cases("silence 3", timeout=1) + "  - id: after\n    task: {description: 'ok 1'}\n"
    results, store = run_suite(tmp_path, plugins, at(agent.url, f"    stream: {stream}\n"), tests)
    runs = runs_by_test(results)
    run_ = runs["t0"]
    assert run_.status == "timeout" and run_.outcome == "failed"
    says(run_.error, "timed out after 1 s", "stopped")
    assert run_.trace.events == events and [e.sequence for e in store.events(run_)] == list(range(events))
    assert agent.closed_within(run_.task_id)  # the agent saw ATP close the connection
    assert runs["after"].outcome == "passed"


def test_what_follows_the_response_is_not_waited_for(agent: FaultyAgent) -> None:
    started = time.monotonic()
    answer, sink = execute({"endpoint": agent.url, "stream": True}, "after_response")
    assert answer.status == "completed" and sink.received == []
    assert time.monotonic() - started < 2
    assert agent.closed_within(answer.task_id)  # the unfinished stream's connection is closed
    # a connection dropped after the response does not undo it
    answer, sink = execute({"endpoint": agent.url, "stream": True}, "cut_after_response")
    assert answer.status == "completed" and sink.sequences() == [0] and sink.warnings == []


# --- stream: auto, the connection pool, health ---------------------------------------------


@pytest.mark.parametrize("status", [404, 405])
def test_auto_falls_back_to_execute_once_for_parallel_runs(
    tmp_path: Path, plugins: Plugins, status: int
) -> None:
    with FaultyAgent(stream_status=status) as server:
        results, _ = run_suite(tmp_path, plugins, at(server.url), cases(*["ok 1"] * 8), parallel=8)
    assert [test.runs[0].outcome for test in results.tests] == ["passed"] * 8
    assert server.posts == {"/execute/stream": 1, "/execute": 8}  # decided once; the probing run too


def test_stream_true_against_an_agent_without_streaming_says_what_to_set(
    tmp_path: Path, plugins: Plugins
) -> None:
    with FaultyAgent(stream_status=404) as server:
        results, _ = run_suite(tmp_path, plugins, at(server.url, "    stream: true\n"), cases("ok"))
    run_ = results.tests[0].runs[0]
    assert run_.outcome == "failed"
    says(
        run_.error,
        f"POST {server.url}/execute/stream",
        "refused",
        "HTTP 404 Not Found",
        "no streaming endpoint",
        "'stream: false'",
        "'auto'",
        """'{"detail": "Not Found"}'""",
    )


@pytest.mark.parametrize("stream", ["true", "false"])
def test_runs_share_one_pool_of_connections(tmp_path: Path, plugins: Plugins, stream: str) -> None:
    with FaultyAgent() as server:
        results, _ = run_suite(
            tmp_path, plugins, at(server.url, f"    stream: {stream}\n"), cases(*["ok 2"] * 6)
        )
        assert [test.runs[0].outcome for test in results.tests] == ["passed"] * 6
        assert server.connections == 1  # one after the other: one keep-alive connection
    with FaultyAgent() as server:
        results, _ = run_suite(
            tmp_path,
            plugins,
            at(server.url, f"    stream: {stream}\n"),
            cases(*["slow 100"] * 16),
            parallel=4,
        )
        assert [test.runs[0].outcome for test in results.tests] == ["passed"] * 16
        assert sum(server.posts.values()) == 16
        assert server.connections <= 4  # at most --parallel: reused, not one per run


def test_health_check(agent: FaultyAgent) -> None:
    async def check(url: str, started: bool) -> bool:
        adapter = adapter_for({"endpoint": url, "connect_timeout": 2})
        if not started:
            return await adapter.health_check()  # (opens its client, asks, closes it again)
        await adapter.start()
        try:
            return await adapter.health_check()
        finally:
            await adapter.aclose()

    for status, healthy in ((200, True), (404, True), (405, True), (501, True), (500, False), (503, False)):
        with FaultyAgent(health_status=status) as server:
            for started in (False, True):
                assert anyio.run(check, server.url + "/v1", started) is healthy, (status, started)
            assert [(seen.method, seen.path) for seen in server.seen] == [("GET", "/v1/health")] * 2
    assert anyio.run(check, f"http://127.0.0.1:{free_port()}", False) is False
    assert anyio.run(check, "http://no-such-host.invalid:8000", False) is False


def test_health_tells_an_agent_it_cannot_reach_from_one_that_fails_its_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`atp validate` and `atp list-agents --check` say "cannot reach it" (start the agent) for an
    agent nothing answers for, and what failed for one that answers wrongly."""
    import socket

    import atp.adapters.http as http
    from atp.core.adapter import Health

    monkeypatch.setattr(http, "HEALTH_SECONDS", 0.5)

    def health(url: str) -> Health:
        return anyio.run(adapter_for({"endpoint": url, "connect_timeout": 2}).health)

    with FaultyAgent() as server:
        assert health(server.url) == Health(status="healthy")
    with FaultyAgent(health_status=503) as server:
        assert health(server.url) == Health(
            status="unhealthy", detail=f"GET {server.url}/health answered HTTP 503 Service Unavailable"
        )
    with FaultyAgent(health_status=302) as server:
        redirected = health(server.url)
        assert redirected.status == "unhealthy"
        assert redirected.detail.startswith(
            f"GET {server.url}/health failed: the agent answered with a redirect (HTTP 302)"
        )
    port = free_port()
    assert health(f"http://127.0.0.1:{port}") == Health(
        status="unreachable",
        detail=f"cannot reach agent 'agent' at http://127.0.0.1:{port}/health: connection refused (is the agent "
        "running and listening there?)",
    )
    with socket.socket() as silent:  # (accepts connections, never answers)
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert health(url) == Health(
            status="unhealthy", detail=f"GET {url}/health failed: no answer within 0.5 s"
        )


def test_a_network_adapter_without_health_of_its_own_says_when_it_cannot_reach_the_agent() -> None:
    pytest.importorskip("websockets", reason="the websocket adapter needs websockets")
    from atp.adapters.websocket import WebSocketAdapter, WebSocketSettings

    port = free_port()
    settings = msgspec.convert({"endpoint": f"ws://127.0.0.1:{port}/ws"}, WebSocketSettings)
    health = anyio.run(WebSocketAdapter(settings, name="agent", base_dir=Path(".")).health)
    assert health.status == "unreachable"
    assert health.detail == (
        f"cannot reach agent 'agent' at ws://127.0.0.1:{port}/ws: connection refused (is the agent running and "
        "listening there?)"
    )


# --- secrets, TLS, settings ----------------------------------------------------------------


def test_secret_header_values_are_masked_in_everything_written(
    tmp_path: Path, plugins: Plugins, agent: FaultyAgent
) -> None:
    token = "t0ken-" + uuid.uuid4().hex
    key = "k3y-" + uuid.uuid4().hex
    settings = at(
        f"{agent.url}/?api_key={key}", f"    headers: {{Authorization: 'Bearer {token}', X-Team: research}}\n"
    )
    results, store = run_suite(tmp_path, plugins, settings, cases("echo", "echo_refuse"))
    runs = runs_by_test(results)
    echo, refused = runs["t0"], runs["t1"]
    assert echo.outcome == "passed", echo.error
    sent = echo.artifacts[0].data["headers"]  # what the agent received, as SHA-256
    assert sent["authorization"] == hashlib.sha256(f"Bearer {token}".encode()).hexdigest()
    assert sent["x-team"] == hashlib.sha256(b"research").hexdigest()
    assert [event.payload.message for event in store.events(echo)] == ["called with ***"]
    assert refused.outcome == "failed"
    says(
        refused.error,
        f"POST {agent.url}/execute/stream?api_key=***",
        "refused",
        "HTTP 401 Unauthorized",
        "error_code UNAUTHORIZED",
        "'the credentials '***' are not valid'",
    )
    written = [path for path in store.directory.rglob("*") if path.is_file()]
    assert written and all(token not in path.read_text() and key not in path.read_text() for path in written)
    assert HttpAdapter.secret_values(
        msgspec.convert(
            {
                "endpoint": f"https://user:pw-1@h/?api_key={key}",
                "headers": {"Authorization": f"Bearer {token}", "X-Team": "r"},
            },
            HttpSettings,
        )
    ) == [f"Bearer {token}", token, "pw-1", key]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


def test_tls_with_a_ca_bundle(
    tmp_path: Path, plugins: Plugins, agent: FaultyAgent, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    shutil.copy(cert, tmp_path / "ca.pem")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with FaultyAgent(tls=tls) as server:
        for extra in ("    ca_bundle: ca.pem\n", "    verify: false\n"):
            results, store = run_suite(tmp_path, plugins, at(server.url, extra), cases("ok 2"))
            run_ = results.tests[0].runs[0]
            assert run_.outcome == "passed", (extra, run_.error)
            assert len(list(store.events(run_))) == 2
        for endpoint, extra, reason in [
            (server.url, "", "its TLS certificate does not verify ("),  # (the system's CAs do not know it)
            (
                agent.url.replace("http:", "https:"),
                "    ca_bundle: ca.pem\n",
                "the TLS handshake failed (",
            ),  # (plaintext)
        ]:
            results, _ = run_suite(
                tmp_path, plugins, at(endpoint, extra + "    connect_timeout: 3\n"), cases("ok")
            )
            run_ = results.tests[0].runs[0]
            assert run_.outcome == "error", run_.error
            assert run_.error.startswith(
                f"cannot reach agent 'agent' at {endpoint}/execute/stream: {reason}"
            ), run_.error
    with pytest.raises(AdapterError, match=r"agent 'agent': cannot read its ca_bundle .*missing\.pem: "):
        anyio.run(
            adapter_for({"endpoint": "https://127.0.0.1:1", "ca_bundle": "missing.pem"}, tmp_path).start
        )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            "endpoint: ftp://localhost:8000",
            "'endpoint' 'ftp://localhost:8000' must be a URL starting with http:// or https://",
        ),
        ("endpoint: localhost:8000", "must be a URL starting with http:// or https://"),
        ("endpoint: 'http://'", "'endpoint' 'http://' names no host"),
        ("endpoint: 'http://localhost:0'", "has port 0, which no agent can listen on"),
        ("endpoint: 'http://localhost:99999'", "is not a valid URL: Port out of range"),
        ("endpoint: 'http://h/#top'", "has a #fragment, which is never sent to a server"),
        (
            'endpoint: "http://local\\0host:8000"',
            "'endpoint' holds a space or a control character, which no URL can",
        ),
        (
            "{endpoint: 'http://h', headers: {'X-A': \"a\\0b\"}}",
            "'headers' value of 'X-A' holds a line break or NUL byte",
        ),
        (
            "{endpoint: 'http://h', headers: {'X-A': \"a\\r\\nb\"}}",
            "'headers' value of 'X-A' holds a line break or NUL byte",
        ),
        (
            "{endpoint: 'http://h', headers: {'a b': v}}",
            "'headers' has the name 'a b', which is not a valid HTTP header name",
        ),
        (
            "{endpoint: 'http://h', headers: {Host: other}}",
            "'headers' may not set 'Host': the http/https adapter sets it",
        ),
        (
            "{endpoint: 'http://h', connect_timeout: 0}",
            "'connect_timeout' must be a number of seconds above 0 and at most 600",
        ),
        (
            "{endpoint: 'http://h', connect_timeout: -1}",
            "'connect_timeout' must be a number of seconds above 0",
        ),
        (
            "{endpoint: 'http://h', connect_timeout: .nan}",
            "'connect_timeout' must be a number of seconds above 0",
        ),
        (
            "{endpoint: 'http://h', connect_timeout: 601}",
            "'connect_timeout' must be a number of seconds above 0",
        ),
        ("{endpoint: 'http://h', connect_timeout: soon}", "connect_timeout"),
        (
            "{endpoint: 'http://h', max_message_bytes: 10}",
            "'max_message_bytes' must be a whole number of bytes from 1024",
        ),
        ("{endpoint: 'http://h', max_message_bytes: 2048.5}", "max_message_bytes"),
        (
            "{endpoint: 'https://h', verify: false, ca_bundle: ca.pem}",
            "'ca_bundle' has no effect with 'verify: false'",
        ),
        ("{endpoint: 'http://h', stream: sometimes}", "stream"),
        ("{endpoint: 'http://h', streaming: true}", "streaming"),
    ],
)
def test_bad_settings_are_located_when_the_suite_loads(
    tmp_path: Path, plugins: Plugins, settings: str, message: str
) -> None:
    if settings.startswith("{"):
        entry = "  - {name: agent, type: http, " + settings[1:] + "\n"
    else:
        entry = f"  - name: agent\n    type: http\n    {settings}\n"
    text = f"test_suite: http\nagents:\n{entry}tests:\n  - id: t\n    task: {{description: x}}\n"
    suite = load_suite(write(tmp_path / "suite.yaml", text), plugins.evaluators)
    with pytest.raises(SuiteError) as error:
        resolve_agent(agent_definitions(load_config(cwd=tmp_path), suite)["agent"], plugins.adapters)
    assert message in str(error.value) and "suite.yaml:" in str(error.value), str(error.value)
