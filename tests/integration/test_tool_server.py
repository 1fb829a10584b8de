"""The mock tool server (the ``tools`` service of atp-adapters) on loopback, called over real HTTP:
what it answers, what it records into the run's trace, how runs are kept apart, and what a
misbehaving client gets."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from atp.adapters.tools import MAX_BODY_BYTES, Tool, ToolServer
from atp.core.protocol import ATPRequest, Constraints, Context, Task, ToolCallEvent
from atp.core.secrets import Masker
from atp.core.service import Recorder
from atp.core.trace import RunTrace, read_events


def tools(*specs: dict[str, Any]) -> list[Tool]:
    return msgspec.convert(list(specs), list[Tool])


def make_request(allowed: list[str] | None = None) -> ATPRequest:
    return ATPRequest(
        version="1.0",
        task_id=str(uuid.uuid4()),
        task=Task(description="call tools"),
        constraints=Constraints(allowed_tools=allowed),
        context=Context(workspace_path="/tmp/workspace", environment={"MODE": "test"}),
    )


class Run:
    """One run served: its endpoint, its trace, its events file."""

    def __init__(self, request: ATPRequest, trace: RunTrace, path: Path) -> None:
        self.request = request
        self.trace = trace
        self.path = path
        self.endpoint = request.context.tools_endpoint if request.context else None

    def body(self, tool_input: Any = None) -> dict[str, Any]:
        return {"task_id": self.request.task_id, "input": tool_input if tool_input is not None else {}}

    def recorded(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_bytes().splitlines()]


Scenario = Callable[[ToolServer, Callable[..., Any]], Awaitable[Any]]


def serve(tmp_path: Path, scenario: Scenario, masker: Masker | None = None) -> Any:
    """Run ``scenario(server, run_of)`` against a started server; ``run_of(config, allowed=None)``
    is an async context manager entering one run (its trace closed when it ends)."""
    from contextlib import asynccontextmanager

    async def main() -> Any:
        server = ToolServer()
        await server.start()

        @asynccontextmanager
        async def run_of(config: list[Tool], allowed: list[str] | None = None) -> Any:
            request = make_request(allowed)
            path = tmp_path / f"{request.task_id}.jsonl"
            trace = RunTrace(request.task_id, events_path=path, log_path=None, masker=masker)
            try:
                async with server.run(config, request, Recorder(trace, "tools")) as sent:
                    yield Run(sent, trace, path)
            finally:
                trace.close()

        try:
            return await scenario(server, run_of)
        finally:
            await server.aclose()

    return anyio.run(main)


def test_fixed_output_is_answered_and_recorded(tmp_path: Path) -> None:
    async def scenario(server: ToolServer, run_of: Any) -> None:
        config = tools({"name": "web_search", "output": {"results": [{"title": "Acme"}]}})
        async with run_of(config) as run, httpx.AsyncClient() as client:
            context = run.request.context
            assert context.workspace_path == "/tmp/workspace" and context.environment == {"MODE": "test"}
            # the protocol's spelling: the endpoint ends in /tools, a tool is at {tools_endpoint}/<name>
            assert run.endpoint.startswith(f"http://127.0.0.1:{server._port}/runs/")
            assert run.endpoint.endswith("/tools")
            reply = await client.post(f"{run.endpoint}/web_search", json=run.body({"q": "acme"}))
            assert reply.status_code == 200
            body = reply.json()
            assert body["status"] == "success" and body["output"] == {"results": [{"title": "Acme"}]}
            assert isinstance(body["duration_ms"], (int, float)) and body["duration_ms"] >= 0
        assert run.trace.summary.tool_calls == {"web_search": 1}
        assert run.trace.summary.out_of_order == 0
        [line] = run.recorded()
        assert line["recorded_by"] == "tools" and line["event_type"] == "tool_call"
        assert line["task_id"] == run.request.task_id
        payload = line["payload"]
        assert payload["tool"] == "web_search" and payload["input"] == {"q": "acme"}
        assert payload["output"] == {"results": [{"title": "Acme"}]} and payload["status"] == "success"
        [event] = list(read_events(run.path))  # ATP reads its recordings back as events
        assert isinstance(event, ToolCallEvent) and event.payload.tool == "web_search"

    serve(tmp_path, scenario)


def test_a_tool_is_called_at_the_endpoint_and_name_or_the_older_spelling(tmp_path: Path) -> None:
    """(issue 27) ``{tools_endpoint}/<name>`` as the protocol writes it, and the older
    ``{tools_endpoint}/tools/<name>`` of agents written before the endpoint ended in ``/tools``;
    a tool named ``tools`` is no ambiguity (a name has no ``/``); any other path is no tool's."""
    config = tools({"name": "web_search", "output": "found"}, {"name": "tools", "output": "listed"})

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:

            async def call(path: str) -> httpx.Response:
                return await client.post(run.endpoint + path, json=run.body())

            found = [
                await call(path) for path in ("/web_search", "/tools/web_search", "/tools", "/tools/tools")
            ]
            wrong = [
                await call(path)
                for path in ("", "/", "/tools/", "/web_search/", "/tools/tools/web_search", "/a/web_search")
            ]
            base = run.endpoint.removesuffix("/tools")
            beside = [await client.post(base + path, json=run.body()) for path in ("", "/web_search", "/x/y")]
        assert [(r.status_code, r.json()["output"]) for r in found] == [
            (200, "found"),
            (200, "found"),
            (200, "listed"),
            (200, "listed"),
        ]
        for reply in wrong + beside:
            assert reply.status_code == 404, reply.request.url
            assert reply.json()["error_code"] == "INVALID_REQUEST"
            assert reply.json()["error"] == "a tool is called at {tools_endpoint}/<name>"
        assert run.trace.summary.tool_calls == {"web_search": 2, "tools": 2}  # no path that is no tool's
        assert [w for w in run.trace.warnings if "no tool's address" in w] == [  # once per run
            f"the agent asked the tool server for {run.endpoint.split(str(server._port), 1)[1]!r}, "
            "which is no tool's address"
        ]

    serve(tmp_path, scenario)


def test_responses_are_chosen_by_input_then_the_default(tmp_path: Path) -> None:
    config = tools(
        {
            "name": "lookup",
            "responses": [
                {"match": {"input": {"id": 1}}, "output": {"name": "one"}},
                {
                    "match": {"input": {"filter": {"kind": "a"}, "tags": ["x", "y"]}},
                    "output": {"name": "nested"},
                },
                {"match": {"input": {"flag": True}}, "output": {"name": "flag"}},
                {"output": {"name": "other"}},
            ],
        },
        {
            "name": "strict",
            "responses": [
                {
                    "match": {"input": {"id": 1}},
                    "error": {"code": "TOOL_ERROR", "message": "nope", "status": 422},
                }
            ],
        },
    )

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:

            async def call(tool: str, tool_input: Any) -> httpx.Response:
                return await client.post(f"{run.endpoint}/{tool}", json=run.body(tool_input))

            assert (await call("lookup", {"id": 1, "extra": "ignored"})).json()["output"] == {"name": "one"}
            assert (await call("lookup", {"id": 1.0})).json()["output"] == {"name": "one"}  # numbers by value
            nested = {"filter": {"kind": "a", "size": 3}, "tags": ["x", "y"], "id": 2}
            assert (await call("lookup", nested)).json()["output"] == {"name": "nested"}
            # a list matches item by item, with the same length; true is not 1
            assert (await call("lookup", {"filter": {"kind": "a"}, "tags": ["x"]})).json()["output"] == {
                "name": "other"
            }
            assert (await call("lookup", {"flag": 1})).json()["output"] == {"name": "other"}
            assert (await call("lookup", {"flag": True})).json()["output"] == {"name": "flag"}
            assert (await call("lookup", {"id": "1"})).json()["output"] == {"name": "other"}
            matched_error = await call("strict", {"id": 1})
            assert matched_error.status_code == 422
            assert (
                matched_error.json()["error_code"] == "TOOL_ERROR" and matched_error.json()["error"] == "nope"
            )
            unmatched = await call("strict", {"id": 2})
            assert unmatched.status_code == 400 and unmatched.json()["error_code"] == "INVALID_REQUEST"
            assert "no response of tool 'strict' matches" in unmatched.json()["error"]
        assert run.trace.summary.tool_calls == {"lookup": 7, "strict": 2}
        statuses = [line["payload"]["status"] for line in run.recorded()]
        assert statuses == ["success"] * 7 + ["error", "error"]

    serve(tmp_path, scenario)


def test_a_sequence_answers_per_call_and_its_last_answer_repeats(tmp_path: Path) -> None:
    config = tools(
        {
            "name": "flaky_api",
            "sequence": [
                {"error": {"code": "TOOL_ERROR", "message": "busy", "status": 503}},
                {"output": {"ok": True}},
            ],
        },
        {"name": "timeouts", "error": {"code": "TIMEOUT", "message": "slow"}},
    )

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:
            replies = [
                await client.post(f"{run.endpoint}/flaky_api", json=run.body({"n": n})) for n in range(4)
            ]
            fixed = await client.post(f"{run.endpoint}/timeouts", json=run.body())
        assert [r.status_code for r in replies] == [503, 200, 200, 200]
        first = replies[0].json()
        assert first["status"] == "error" and first["error_code"] == "TOOL_ERROR" and first["error"] == "busy"
        assert "duration_ms" in first
        assert [r.json().get("output") for r in replies[1:]] == [{"ok": True}] * 3
        assert (
            fixed.status_code == 504 and fixed.json()["error_code"] == "TIMEOUT"
        )  # the code's default status
        recorded = [line["payload"] for line in run.recorded()]
        assert recorded[0]["status"] == "error" and recorded[0]["error"] == "TOOL_ERROR: busy"
        assert "output" not in recorded[0]
        assert [p["input"] for p in recorded[:4]] == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]

    serve(tmp_path, scenario)


class _RealTool(BaseHTTPRequestHandler):
    """A real tool behind HTTP: answers by the path, keeps what it was sent."""

    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append({"path": self.path, "body": body})
        if self.path == "/weather":
            self._answer(200, {"status": "success", "output": {"city": body["input"]["city"], "temp_c": 21}})
        elif self.path == "/plain":
            self._answer(200, {"forecast": "sunny"})
        elif self.path == "/busy":
            self._answer(503, {"status": "error", "error": "overloaded", "error_code": "TOOL_ERROR"})
        elif self.path == "/drip":  # a byte every 0.3 s: each read is quick, the whole call is not
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "12")
            self.end_headers()
            for byte in b'{"output":1}':
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:  # (ATP gave up on it: the point)
                    return
                time.sleep(0.3)
        else:
            self._answer(200, None, raw=b"<html>not json</html>")

    def _answer(self, status: int, data: Any, raw: bytes | None = None) -> None:
        payload = raw if raw is not None else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def real_tool() -> Iterator[str]:
    _RealTool.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RealTool)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_proxy_calls_the_real_tool_and_records_what_came_back(tmp_path: Path, real_tool: str) -> None:
    config = tools(
        {"name": "weather", "proxy": f"{real_tool}/weather"},
        {"name": "plain", "proxy": f"{real_tool}/plain"},
        {"name": "busy", "proxy": f"{real_tool}/busy"},
        {"name": "garbage", "proxy": f"{real_tool}/garbage"},
        {"name": "down", "proxy": f"http://127.0.0.1:{closed_port()}/x", "timeout_seconds": 5},
    )

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:

            async def call(tool: str) -> httpx.Response:
                return await client.post(f"{run.endpoint}/{tool}", json=run.body({"city": "Oslo"}))

            weather, plain, busy, garbage, down = [
                await call(t) for t in ("weather", "plain", "busy", "garbage", "down")
            ]
        assert weather.status_code == 200 and weather.json()["output"] == {"city": "Oslo", "temp_c": 21}
        assert plain.json()["output"] == {"forecast": "sunny"}  # plain JSON: the output itself
        assert busy.status_code == 503 and busy.json()["error"] == "overloaded"
        assert garbage.status_code == 502 and garbage.json()["error_code"] == "TOOL_ERROR"
        assert "not JSON" in garbage.json()["error"]
        assert down.status_code == 502 and "could not be reached" in down.json()["error"]
        assert _RealTool.received[0] == {
            "path": "/weather",
            "body": {"task_id": run.request.task_id, "input": {"city": "Oslo"}},
        }
        recorded = {line["payload"]["tool"]: line["payload"] for line in run.recorded()}
        assert recorded["weather"]["output"] == {"city": "Oslo", "temp_c": 21}
        assert recorded["weather"]["status"] == "success"
        assert recorded["busy"]["error"] == "TOOL_ERROR: overloaded"
        assert recorded["down"]["status"] == "error"

    serve(tmp_path, scenario)


def test_unknown_and_disallowed_tools_are_tool_not_found_and_recorded(tmp_path: Path) -> None:
    config = tools({"name": "web_search", "output": 1}, {"name": "file_write", "output": 2})

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:
            unknown = await client.post(f"{run.endpoint}/database_query", json=run.body({"sql": "x"}))
        async with run_of(config, allowed=["web_search"]) as limited, httpx.AsyncClient() as client:
            disallowed = await client.post(f"{limited.endpoint}/file_write", json=limited.body())
            allowed = await client.post(f"{limited.endpoint}/web_search", json=limited.body())
        assert unknown.status_code == 404
        assert unknown.json()["error_code"] == "TOOL_NOT_FOUND" and unknown.json()["status"] == "error"
        assert unknown.json()["error_details"] == {
            "tool": "database_query",
            "available_tools": ["web_search", "file_write"],
        }
        assert disallowed.status_code == 404
        assert disallowed.json()["error_details"] == {"tool": "file_write", "available_tools": ["web_search"]}
        assert "allowed_tools" in disallowed.json()["error"]
        assert allowed.status_code == 200
        assert run.trace.summary.tool_calls == {"database_query": 1}
        [line] = run.recorded()
        assert line["payload"]["input"] == {"sql": "x"}
        assert line["payload"]["error"].startswith("TOOL_NOT_FOUND: ")
        assert limited.trace.summary.tool_calls == {"file_write": 1, "web_search": 1}

    serve(tmp_path, scenario)


def test_malformed_bodies_and_methods_are_invalid_requests_and_recorded(tmp_path: Path) -> None:
    config = tools({"name": "web_search", "output": 1})

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:
            url = f"{run.endpoint}/web_search"
            broken = await client.post(url, content=b'{"task_id": "x", "input": {')
            not_object = await client.post(url, content=b"[1, 2]")
            wrong_method = await client.get(url)
            fine = await client.post(url, json=run.body())
        for reply, status in ((broken, 400), (not_object, 400), (wrong_method, 405)):
            assert reply.status_code == status
            assert reply.json()["error_code"] == "INVALID_REQUEST" and reply.json()["status"] == "error"
        assert "not valid JSON" in broken.json()["error"]
        assert fine.status_code == 200  # the connection still serves after bad requests
        assert run.trace.summary.tool_calls == {"web_search": 4}
        assert [line["payload"]["status"] for line in run.recorded()] == [
            "error",
            "error",
            "error",
            "success",
        ]

    serve(tmp_path, scenario)


def test_a_wrong_task_id_is_answered_and_warned_about(tmp_path: Path) -> None:
    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(tools({"name": "t", "output": "ok"})) as run, httpx.AsyncClient() as client:
            for _ in range(2):
                reply = await client.post(f"{run.endpoint}/t", json={"task_id": "someone-else", "input": {}})
                assert reply.status_code == 200
        warnings = [w for w in run.trace.warnings if "task_id" in w]
        assert len(warnings) == 1 and "'someone-else'" in warnings[0] and run.request.task_id in warnings[0]

    serve(tmp_path, scenario)


def test_parallel_runs_have_separate_addresses_and_recordings(tmp_path: Path) -> None:
    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with (
            run_of(tools({"name": "a", "sequence": [{"output": 1}, {"output": 2}]})) as first,
            run_of(tools({"name": "b", "sequence": [{"output": 10}, {"output": 20}]})) as second,
            httpx.AsyncClient() as client,
        ):
            assert first.endpoint != second.endpoint

            async def calls(run: Run, tool: str) -> list[Any]:
                return [
                    (await client.post(f"{run.endpoint}/{tool}", json=run.body())).json()["output"]
                    for _ in range(3)
                ]

            async with anyio.create_task_group() as group:
                results: dict[str, list[Any]] = {}

                async def both(run: Run, tool: str) -> None:
                    results[tool] = await calls(run, tool)

                group.start_soon(both, first, "a")
                group.start_soon(both, second, "b")
            crossed = await client.post(f"{first.endpoint}/b", json=first.body())
        assert results == {"a": [1, 2, 2], "b": [10, 20, 20]}  # each run has its own sequence
        assert crossed.status_code == 404  # b is not a tool of the first run
        assert first.trace.summary.tool_calls == {"a": 3, "b": 1}
        assert second.trace.summary.tool_calls == {"b": 3}
        assert {line["task_id"] for line in first.recorded()} == {first.request.task_id}
        assert {line["task_id"] for line in second.recorded()} == {second.request.task_id}

    serve(tmp_path, scenario)


def test_the_address_of_an_ended_run_answers_404_and_its_connections_are_closed(tmp_path: Path) -> None:
    async def scenario(server: ToolServer, run_of: Any) -> None:
        host, port = "127.0.0.1", server._port
        reader, writer = await asyncio.open_connection(host, port)
        async with run_of(tools({"name": "t", "output": "ok"})) as run:
            path = run.endpoint.split(str(port), 1)[1] + "/t"
            body = json.dumps(run.body()).encode()
            head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            for _ in range(2):  # keep-alive: two calls on one connection
                writer.write(head.encode() + body)
                status_line = await reader.readline()
                assert status_line.startswith(b"HTTP/1.1 200"), status_line
                await _skip_answer(reader)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed when the run ended
        writer.close()
        async with httpx.AsyncClient() as client:
            stale = await client.post(f"{run.endpoint}/t", json=run.body())
            guessed = await client.post(f"http://{host}:{port}/runs/not-a-token/tools/t", json=run.body())
        assert stale.status_code == 404 and stale.json()["error_code"] == "TOOL_NOT_FOUND"
        assert guessed.status_code == 404
        assert run.trace.summary.tool_calls == {"t": 2}  # the stale call is nobody's

    serve(tmp_path, scenario)


async def _skip_answer(reader: asyncio.StreamReader) -> bytes:
    length = 0
    while True:
        line = await reader.readline()
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        if line == b"\r\n":
            return await reader.readexactly(length)


def test_a_stuck_or_oversized_client_does_not_hold_up_other_runs(tmp_path: Path) -> None:
    async def scenario(server: ToolServer, run_of: Any) -> None:
        port = server._port
        async with run_of(tools({"name": "t", "output": "ok", "delay_ms": 0})) as run:
            path = run.endpoint.split(str(port), 1)[1] + "/t"
            # a client that sends half its headers and then nothing
            _, stuck = await asyncio.open_connection("127.0.0.1", port)
            stuck.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Le".encode())
            # a client announcing a body over the limit
            big_reader, big = await asyncio.open_connection("127.0.0.1", port)
            big.write(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode()
            )
            async with httpx.AsyncClient() as client:
                with anyio.fail_after(5):
                    reply = await client.post(f"{run.endpoint}/t", json=run.body())
            assert reply.status_code == 200
            status_line = await asyncio.wait_for(big_reader.readline(), 5)
            assert status_line.startswith(b"HTTP/1.1 413")
            # a client whose headers never end
            long_reader, long = await asyncio.open_connection("127.0.0.1", port)
            long.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Filler: ".encode() + b"a" * (100 * 1024))
            assert (await asyncio.wait_for(long_reader.readline(), 5)).startswith(b"HTTP/1.1 431")
            for writer in (stuck, big, long):
                writer.close()
        assert run.trace.summary.tool_calls == {"t": 1}  # what never became a call is not recorded

    serve(tmp_path, scenario)


def test_recorded_calls_are_masked(tmp_path: Path) -> None:
    secret = "sk-live-abcdef123456"

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with (
            run_of(tools({"name": "login", "output": {"token": secret}})) as run,
            httpx.AsyncClient() as client,
        ):
            reply = await client.post(f"{run.endpoint}/login", json=run.body({"password": secret}))
            assert reply.json()["output"] == {"token": secret}  # the agent gets the tool's answer
        text = run.path.read_text()
        assert secret not in text and text.count("***") == 2

    serve(tmp_path, scenario, masker=Masker([secret]))


def test_the_server_binds_loopback_only_and_closes(tmp_path: Path) -> None:
    async def scenario(server: ToolServer, run_of: Any) -> int:
        assert server._server is not None
        assert {s.getsockname()[0] for s in server._server.sockets} == {"127.0.0.1"}
        return server._port

    port = serve(tmp_path, scenario)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_delay_ms_holds_the_answer(tmp_path: Path) -> None:
    config = tools(
        {"name": "slow", "output": "late", "delay_ms": 300},
        {
            "name": "mixed",
            "sequence": [{"output": "quick", "delay_ms": 0}, {"output": "slow", "delay_ms": 250}],
        },
    )

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:
            slow = (await client.post(f"{run.endpoint}/slow", json=run.body())).json()
            quick = (await client.post(f"{run.endpoint}/mixed", json=run.body())).json()
            later = (await client.post(f"{run.endpoint}/mixed", json=run.body())).json()
        assert slow["output"] == "late" and slow["duration_ms"] >= 300
        assert quick["duration_ms"] < 250 <= later["duration_ms"]
        assert [line["payload"]["duration_ms"] >= 250 for line in run.recorded()] == [True, False, True]

    serve(tmp_path, scenario)


def test_a_proxied_tools_time_limit_bounds_the_whole_call(tmp_path: Path, real_tool: str) -> None:
    """(issue 26) Not each read: a tool dripping a byte every 0.3 s is stopped at 1 s."""
    config = tools({"name": "drip", "proxy": f"{real_tool}/drip", "timeout_seconds": 1})

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(config) as run, httpx.AsyncClient() as client:
            started = time.monotonic()
            answer = await client.post(f"{run.endpoint}/drip", json=run.body({}))
            took = time.monotonic() - started
        assert answer.json()["error_code"] == "TIMEOUT" and took < 2.5, (answer.json(), took)

    serve(tmp_path, scenario)


def test_one_runs_idle_connections_do_not_keep_another_runs_calls_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(issue 26) A run's agent holding connections open: past the server's bound the idle ones
    are closed for newcomers, and past a run's own bound its calls are refused, not others'."""
    monkeypatch.setattr("atp.adapters.tools.MAX_CONNECTIONS", 20)
    monkeypatch.setattr("atp.adapters.tools.MAX_RUN_CONNECTIONS", 5)

    async def scenario(server: ToolServer, run_of: Any) -> None:
        port = server._port
        config = tools({"name": "t", "output": "ok"})
        async with run_of(config) as greedy, run_of(config) as fair:
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
            statuses = []
            held = []
            for _ in range(6):  # six kept-alive connections of one run, each with a call
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                held.append(writer)
                statuses.append(await _call(reader, writer, greedy, port))
            async with httpx.AsyncClient() as client:
                answer = await client.post(f"{fair.endpoint}/t", json=fair.body())
            for writer in [*held, *(w for _, w in idle)]:
                writer.close()
        assert statuses == [200] * 5 + [429]
        assert answer.status_code == 200, answer.text
        assert fair.trace.summary.tool_calls == {"t": 1} and greedy.trace.summary.tool_calls == {"t": 5}

    serve(tmp_path, scenario)


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, run: Any, port: int) -> int:
    """One call of tool ``t`` of ``run`` on a connection kept open; the answer's status."""
    path = run.endpoint.split(str(port), 1)[1] + "/t"
    body = json.dumps(run.body()).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    status_line = await reader.readline()
    await _skip_answer(reader)
    return int(status_line.split()[1])


def test_what_the_tool_server_quotes_of_a_call_holds_no_piece_of_a_secret_at_its_cut(tmp_path: Path) -> None:
    """(issue 26, kind 1) A task id, a tool name and a path the agent sent, quoted in the run's
    warnings and recordings, are masked before they are cut: a secret straddling the cut shows
    no part of itself."""
    secret = "sk-live-TOOLSERVER-0123456789abcdef"
    masker = Masker([secret])
    straddling = "x" * 190 + secret  # the quotes are cut at 200 characters

    async def scenario(server: ToolServer, run_of: Any) -> None:
        async with run_of(tools({"name": "t", "output": "ok"})) as run, httpx.AsyncClient() as client:
            await client.post(f"{run.endpoint}/t", json={"task_id": straddling, "input": {}})
            await client.post(f"{run.endpoint}/{straddling}", json=run.body())
            await client.post(f"{run.endpoint}/a/b/{straddling}", json=run.body())
        shown = "\n".join(run.trace.warnings) + run.path.read_text()
        assert len(run.trace.warnings) >= 2, run.trace.warnings
        pieces = [secret[i : i + 6] for i in range(len(secret) - 5)]
        assert not [piece for piece in pieces if piece in shown], shown

    serve(tmp_path, scenario, masker)
