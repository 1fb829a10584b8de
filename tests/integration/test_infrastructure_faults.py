"""Faults of the infrastructure between ATP and an agent, against real servers on loopback: an
HTTP 429, 502, 503 or 504 (the agent, or a gateway before it, cannot take the request now), a
connection refused, a gRPC ``UNAVAILABLE`` or ``RESOURCE_EXHAUSTED``: each a retryable
:class:`~atp.core.errors.AdapterError` with the wait the agent asked for, never the agent's
refusal or failure. What no other try can fix (a program that does not exist) is an AdapterError
that is not retryable; the agent's own answers (another 4xx or 5xx) stay what they were."""

from __future__ import annotations

import json
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

pytest.importorskip("httpx", reason="the http adapters need httpx")

from atp.adapters.agent_interface import AgentInterfaceAdapter, AgentInterfaceSettings
from atp.adapters.cli import CliAdapter, CliSettings
from atp.adapters.http import HttpAdapter, HttpSettings
from atp.adapters.term_sdk import TermSdkAdapter, TermSdkSettings
from atp.core.errors import AdapterError, AgentError, AgentRefused
from atp.core.protocol import ATPRequest, Task
from tests.conftest import PYTHON
from tests.facts import says
from tests.network import Sink, free_port

Reply = tuple[int, dict[str, str], bytes]


class Agent(ThreadingHTTPServer):
    """An HTTP agent on loopback whose answer to anything under ``/NAME/`` is the reply set for
    ``NAME`` (:meth:`reply`): its status, headers and body. ``GET .../health`` and ``GET
    .../agent-card`` answer as a healthy Agent Interface Standard agent (for the agent-interface
    adapter's discovery). A WebSocket handshake to ``/NAME`` gets the reply too."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: dict[str, Reply] = {}
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def reply(self, name: str, status: int, body: bytes = b"", **headers: str) -> str:
        """Answer the requests under ``/name/`` so; the URL of ``/name``."""
        self.replies[name] = (status, {key.replace("_", "-"): value for key, value in headers.items()}, body)
        return f"{self.url}/{name}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: Agent
    protocol_version = "HTTP/1.1"  # (a WebSocket client reads no HTTP/1.0 answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _reply(self) -> None:
        name = self.path.strip("/").split("/")[0]
        self._answer(*self.server.replies.get(name, (404, {}, b"no such agent")))

    def do_GET(self) -> None:
        if self.path.endswith("/health"):
            self._answer(200, {"Content-Type": "application/json"}, b'{"status": "healthy"}')
        elif self.path.endswith("/agent-card"):
            self._answer(200, {"Content-Type": "application/json"}, b'{"agent_id": "busy-agent"}')
        else:
            self._reply()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply()


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    server = Agent()
    yield server
    server.close()


def request(description: str = "hello") -> ATPRequest:
    return ATPRequest(version="1.0", task_id=str(uuid.uuid4()), task=Task(description=description))


def run(adapter: Any, description: str = "hello") -> Any:
    """One run through the started ``adapter``: its response, or the exception it raised."""

    async def body() -> Any:
        try:
            await adapter.start()
            return await adapter.execute(request(description), Sink())
        except Exception as exc:  # (the test looks at it)
            return exc
        finally:
            await adapter.aclose()

    return anyio.run(body)


def http(endpoint: str, stream: bool | str = False) -> Any:
    return run(
        HttpAdapter(
            msgspec.convert({"endpoint": endpoint, "stream": stream}, HttpSettings),
            name="agent",
            base_dir=Path("."),
        )
    )


# --- http -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "path"), [(False, "/execute"), (True, "/execute/stream"), ("auto", "/execute/stream")]
)
def test_a_503_with_retry_after_is_a_retryable_fault_with_its_wait(
    agent: Agent, stream: bool | str, path: str
) -> None:
    url = agent.reply("busy", 503, b"upstream busy", Retry_After="2")
    fault = http(url, stream)
    assert type(fault) is AdapterError, fault
    assert fault.retryable is True and fault.retry_after == 2.0
    says(
        str(fault),
        "agent 'agent'",
        f"POST {url}{path}",
        "503 Service Unavailable",
        "retry after 2 s",
        "upstream busy",
    )


def test_a_429_with_an_http_date_waits_until_that_date(agent: Agent) -> None:
    url = agent.reply(
        "limited", 429, b'{"error": "slow down"}', Retry_After=formatdate(time.time() + 30, usegmt=True)
    )
    fault = http(url)
    assert type(fault) is AdapterError and fault.retryable
    assert fault.retry_after is not None and 25 <= fault.retry_after <= 30
    says(str(fault), f"POST {url}/execute", "429 Too Many Requests", "retry after ", '{"error": "slow down"}')
    past = agent.reply("limited-past", 429, Retry_After="Wed, 21 Oct 2015 07:28:00 GMT")
    fault = http(past)
    assert type(fault) is AdapterError and fault.retry_after == 0.0
    says(str(fault), "agent 'agent'", f"POST {past}/execute", "429 Too Many Requests", "retry after 0 s")


@pytest.mark.parametrize(("status", "phrase"), [(502, "Bad Gateway"), (504, "Gateway Timeout")])
def test_a_gateway_fault_without_retry_after_has_no_wait(agent: Agent, status: int, phrase: str) -> None:
    url = agent.reply(
        f"gateway{status}", status, b"<html><body>upstream</body></html>", Content_Type="text/html"
    )
    fault = http(url)
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after is None
    says(
        str(fault),
        "agent 'agent'",
        f"POST {url}/execute",
        f"{status} {phrase}",
        "<html><body>upstream</body></html>",
    )
    assert "retry after" not in str(fault)


def test_a_502_of_the_faulty_agent_is_a_fault_in_both_modes() -> None:
    from tests.agents.http_faults import FaultyAgent

    with FaultyAgent() as server:
        for stream, path in ((True, "/execute/stream"), (False, "/execute")):
            fault = run(
                HttpAdapter(
                    HttpSettings(endpoint=server.url, stream=stream), name="agent", base_dir=Path(".")
                ),
                "fail_text",
            )
            assert type(fault) is AdapterError and fault.retryable and fault.retry_after is None
            says(
                str(fault),
                "agent 'agent'",
                f"POST {server.url}{path}",
                "502 Bad Gateway",
                "<html><body>Bad Gateway</body></html>",
            )


def test_the_quoted_body_is_short_and_printable(agent: Agent) -> None:
    url = agent.reply("noisy", 503, b"\x1b[2J\x1b]0;owned\x07busy\r\n" + b"x" * 5000)
    fault = http(url)
    assert type(fault) is AdapterError
    message = str(fault)
    assert "\x1b" not in message and "\x07" not in message and "\n" not in message and "\r" not in message
    assert "\\e[2J\\e]0;owned\\x07busy\\r\\n" in message
    assert len(message) < 400 and "more characters" in message


@pytest.mark.parametrize(("status", "kind"), [(500, AgentError), (400, AgentRefused), (404, AgentRefused)])
def test_other_statuses_stay_the_agents_answer(agent: Agent, status: int, kind: type[Exception]) -> None:
    url = agent.reply(f"answer{status}", status, b'{"error": "no"}', Retry_After="2")
    fault = http(url)
    assert isinstance(fault, kind) and not isinstance(fault, AdapterError), fault
    assert isinstance(fault, AgentRefused) == (kind is AgentRefused)


def test_a_refused_connection_is_a_retryable_fault() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    fault = http(url)
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after is None
    assert str(fault).startswith(f"cannot reach agent 'agent' at {url}/execute: connection refused")


# --- agent-interface --------------------------------------------------------------------------


def test_agent_interface_a2a_message_answered_503_is_a_retryable_fault(agent: Agent) -> None:
    url = agent.reply("a2a", 503, b'{"error": "overloaded"}', Retry_After="1.5")
    adapter = AgentInterfaceAdapter(
        msgspec.convert({"endpoint": url}, AgentInterfaceSettings), name="agent", base_dir=Path(".")
    )
    fault = run(adapter)
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after == 1.5
    says(
        str(fault),
        "agent 'agent'",
        f"POST {url}/a2a/message",
        "503 Service Unavailable",
        "retry after 1.5 s",
        '{"error": "overloaded"}',
    )


def test_agent_interface_tool_call_answered_429_is_a_retryable_fault(agent: Agent) -> None:
    url = agent.reply("mcp", 429, Retry_After_Ms="250")
    adapter = AgentInterfaceAdapter(
        msgspec.convert({"endpoint": url}, AgentInterfaceSettings), name="agent", base_dir=Path(".")
    )

    async def body() -> Any:
        await adapter.start()
        try:
            task = ATPRequest(
                version="1.0", task_id="t", task=Task(description="x", input_data={"mcp_tool": "search"})
            )
            return await adapter.execute(task, Sink())
        except Exception as exc:
            return exc
        finally:
            await adapter.aclose()

    fault = anyio.run(body)
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after == 0.25
    says(
        str(fault),
        "agent 'agent'",
        f"POST {url}/mcp/execute/search",
        "429 Too Many Requests",
        "retry after 0.25 s",
    )


def test_agent_interface_other_statuses_stay_the_agents_answer(agent: Agent) -> None:
    url = agent.reply("a2a-refuses", 422, b'{"error": "what?"}')
    adapter = AgentInterfaceAdapter(
        msgspec.convert({"endpoint": url}, AgentInterfaceSettings), name="agent", base_dir=Path(".")
    )
    fault = run(adapter)
    assert isinstance(fault, AgentRefused) and fault.status == 422


# --- websocket --------------------------------------------------------------------------------


def test_a_websocket_handshake_answered_503_is_a_retryable_fault(agent: Agent) -> None:
    pytest.importorskip("websockets", reason="the websocket adapter needs the websockets package")
    from atp.adapters.websocket import WebSocketAdapter, WebSocketSettings

    agent.reply("ws-busy", 503, b"try later", Retry_After="4")
    endpoint = f"ws://127.0.0.1:{agent.server_address[1]}/ws-busy"
    fault = run(WebSocketAdapter(WebSocketSettings(endpoint=endpoint), name="agent", base_dir=Path(".")))
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after == 4.0
    says(
        str(fault),
        "agent 'agent'",
        f"GET {endpoint} (WebSocket handshake)",
        "503 Service Unavailable",
        "retry after 4 s",
        "try later",
    )
    agent.reply("ws-refuses", 403, b"no")
    refused = run(
        WebSocketAdapter(
            WebSocketSettings(endpoint=endpoint.replace("ws-busy", "ws-refuses")),
            name="agent",
            base_dir=Path("."),
        )
    )
    assert isinstance(refused, AgentRefused) and refused.status == 403


def test_a_websocket_connection_refused_is_a_retryable_fault() -> None:
    pytest.importorskip("websockets", reason="the websocket adapter needs the websockets package")
    from atp.adapters.websocket import WebSocketAdapter, WebSocketSettings

    endpoint = f"ws://127.0.0.1:{free_port()}"
    fault = run(WebSocketAdapter(WebSocketSettings(endpoint=endpoint), name="agent", base_dir=Path(".")))
    assert type(fault) is AdapterError and fault.retryable
    assert "connection refused" in str(fault)


# --- term-sdk ---------------------------------------------------------------------------------

TERM_AGENT = """\
import os
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, **headers):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer(200, b'{"status": "ok"}')

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer(503, b'{"error": "the model is overloaded"}', Retry_After="3")


HTTPServer(("127.0.0.1", int(os.environ["AGENT_PORT"])), Handler).serve_forever()
"""


def test_term_sdk_start_answered_503_is_a_retryable_fault(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(textwrap.dedent(TERM_AGENT))
    settings = msgspec.convert({"command": [PYTHON, "agent.py"], "stop_grace": 0.5}, TermSdkSettings)
    fault = run(TermSdkAdapter(settings, name="agent", base_dir=tmp_path))
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after == 3.0
    assert "/start answered 503 Service Unavailable (retry after 3 s): " in str(fault)
    assert str(fault).startswith("agent 'agent': POST http://127.0.0.1:")


# --- grpc -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grpc_agent() -> Iterator[int]:
    """A gRPC agent that ends every call with the status its task's description names, and the
    trailing metadata after it (``UNAVAILABLE grpc-retry-pushback-ms=1500``)."""
    grpc = pytest.importorskip("grpc", reason="the grpc adapter needs grpcio")
    from atp.adapters.proto.atp.v1 import agent_pb2_grpc

    def end(request: Any, context: Any) -> None:
        words = json.loads(request.request)["task"]["description"].split()
        if len(words) > 1:
            key, _, value = words[1].partition("=")
            context.set_trailing_metadata(((key, value),))
        context.abort(getattr(grpc.StatusCode, words[0]), f"the agent says {words[0]}")

    class Servicer(agent_pb2_grpc.AgentServicer):  # type: ignore[misc]
        def Execute(self, request: Any, context: Any) -> Any:
            end(request, context)

        def ExecuteStream(self, request: Any, context: Any) -> Any:
            end(request, context)
            yield from ()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    agent_pb2_grpc.add_AgentServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


def grpc_run(endpoint: str, description: str, stream: bool) -> Any:
    from atp.adapters.grpc import GrpcAdapter, GrpcSettings

    return run(
        GrpcAdapter(GrpcSettings(endpoint=endpoint, stream=stream), name="agent", base_dir=Path(".")),
        description,
    )


@pytest.mark.parametrize(("stream", "rpc"), [(True, "ExecuteStream"), (False, "Execute")])
def test_grpc_unavailable_and_resource_exhausted_are_retryable_faults(
    grpc_agent: int, stream: bool, rpc: str
) -> None:
    endpoint = f"grpc://127.0.0.1:{grpc_agent}"
    fault = grpc_run(endpoint, "UNAVAILABLE grpc-retry-pushback-ms=1500", stream)
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after == 1.5, fault
    says(
        str(fault),
        "agent 'agent'",
        f"{endpoint}/atp.v1.Agent/{rpc}",
        "gRPC status UNAVAILABLE",
        "retry after 1.5 s",
        "the agent says UNAVAILABLE",
    )
    fault = grpc_run(endpoint, "RESOURCE_EXHAUSTED", stream)
    assert type(fault) is AdapterError and fault.retryable and fault.retry_after is None, fault
    fault = grpc_run(endpoint, "UNAVAILABLE grpc-retry-pushback-ms=-1", stream)  # (asks for no other try)
    assert type(fault) is AdapterError and not fault.retryable and fault.retry_after is None, fault


def test_grpc_deadline_exceeded_is_the_agents_failure_not_a_fault(grpc_agent: int) -> None:
    fault = grpc_run(f"grpc://127.0.0.1:{grpc_agent}", "DEADLINE_EXCEEDED", False)
    assert isinstance(fault, AgentError) and not isinstance(fault, AdapterError), fault


def test_a_grpc_connection_refused_is_a_retryable_fault() -> None:
    pytest.importorskip("grpc", reason="the grpc adapter needs grpcio")
    fault = grpc_run(f"grpc://127.0.0.1:{free_port()}", "hello", False)
    assert type(fault) is AdapterError and fault.retryable, fault
    assert "cannot reach agent 'agent'" in str(fault)


# --- what no other try fixes --------------------------------------------------------------------


def test_a_cli_program_that_does_not_exist_is_not_retryable(tmp_path: Path) -> None:
    adapter = CliAdapter(CliSettings(command=["/nonexistent/agent-binary"]), name="agent", base_dir=tmp_path)
    fault = run(adapter)  # (start refuses it)
    assert type(fault) is AdapterError and fault.retryable is False
    says(str(fault), "agent 'agent'", "cannot start '/nonexistent/agent-binary'", "does not exist")

    async def unstarted() -> Any:  # (a run that starts it anyway: the system refuses it)
        try:
            return await adapter.execute(request(), Sink())
        except Exception as exc:
            return exc

    fault = anyio.run(unstarted)
    assert type(fault) is AdapterError and fault.retryable is False
    assert str(fault).startswith("agent 'agent': cannot start '/nonexistent/agent-binary' in ")


def test_an_adapter_that_was_not_started_is_not_retryable(agent: Agent) -> None:
    adapter = HttpAdapter(HttpSettings(endpoint=agent.url), name="agent", base_dir=Path("."))

    async def body() -> Any:
        try:
            return await adapter.execute(request(), Sink())
        except Exception as exc:
            return exc

    fault = anyio.run(body)
    assert type(fault) is AdapterError and fault.retryable is False
