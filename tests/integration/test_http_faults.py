"""The ``http`` adapter against an agent that misbehaves in every way the protocol allows a
network agent to: a real HTTP server on loopback (plain asyncio, so that it can do what no web
framework would: cut a stream, lie about a body), run through the real `atp test` command. Each
fault must give its own run a clear result, never a traceback, while the other runs go on."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ATP, write


def event(task_id: str, sequence: int) -> bytes:
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": "2026-01-01T00:00:00Z",
            "sequence": sequence,
            "event_type": "progress",
            "payload": {"message": f"step {sequence}"},
        }
    ).encode()


def response(task_id: str, **changes: Any) -> bytes:
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "status": "completed",
            "artifacts": [],
            "metrics": {},
            **changes,
        }
    ).encode()


class FaultyAgent:
    """An HTTP agent whose behaviour is the first word of the task description (then a count)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.closed: list[str] = []
        """Task ids of ``silence`` runs whose connection ATP closed."""
        self.headers: list[dict[str, str]] = []
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._connection, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in head[1:] if line)
                }
                self.headers.append(headers)
                body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
                if not await self._answer(body, reader, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection is to be dropped."""
        task_id = request["task_id"]
        word, _, count = request["task"]["description"].partition(" ")
        events = int(count or 3)

        def plain(status: str, data: bytes, kind: str = "application/json") -> None:
            writer.write(
                f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(data)}\r\n\r\n".encode()
                + data
            )

        def chunk(data: bytes) -> None:
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))

        if word == "ok":
            plain("200 OK", response(task_id))
        elif word == "refused":
            plain(
                "422 Unprocessable Entity",
                b'{"error": "the description is too vague", "error_code": "INVALID_REQUEST"}',
            )
        elif word == "broken":
            plain("503 Service Unavailable", b"upstream busy, try later", "text/plain")
        elif word == "notresponse":
            plain("200 OK", b'{"hello": "world"}')
        elif word == "version2":
            plain("200 OK", response(task_id, version="2.0"))
        elif word == "huge":
            plain("200 OK", response(task_id, error="x" * 2_000_000))
        elif word == "redirect":
            writer.write(
                b"HTTP/1.1 302 Found\r\nlocation: http://elsewhere.invalid/\r\ncontent-length: 0\r\n\r\n"
            )
        else:  # Server-Sent Events, in chunks
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            for sequence in range(events):
                chunk(b"data: " + event(task_id, sequence) + b"\n\n")
            await writer.drain()
            if word == "cut":
                writer.transport.abort()  # no terminating chunk: the stream is cut in the middle
                return False
            if word == "silence":
                await reader.read()  # until ATP closes the connection
                self.closed.append(task_id)
                return False
            if word == "stream":
                chunk(b"event: response\ndata: " + response(task_id) + b"\n\n")
            elif word == "version2event":
                chunk(b"data: " + event(task_id, events).replace(b'"1.0"', b'"2.0"') + b"\n\n")
            chunk(b"")  # the end of the body (``noresponse``: without a response)
        await writer.drain()
        return True


@pytest.fixture(scope="module")
def agent() -> Iterator[FaultyAgent]:
    server = FaultyAgent()
    yield server
    server.close()


def atp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", "AGENT_TOKEN": "tok-3f9a7c1e5d"},
        capture_output=True,
        text=True,
        timeout=120,
    )


FAULTS = {
    "ok": None,
    "stream": None,
    "refused": "the agent refused the request with HTTP 422",
    "broken": "answered 503 Service Unavailable",  # (an infrastructure fault: the run is an error)
    "notresponse": "its answer is not an ATP Response",
    "version2": "protocol version 2.0 is not supported",
    "huge": "more than 1048576 bytes in one run",
    "redirect": "ATP does not follow redirects",
    "cut 4": "the connection was cut after 4 events",
    "noresponse 2": "the stream ended after 2 events without an ATP Response",
    "version2event 2": "protocol version 2.0 is not supported",
}


def test_every_fault_fails_its_own_run_and_the_others_go_on(agent: FaultyAgent, tmp_path: Path) -> None:
    tests = "".join(
        f"  - id: t{index}\n    task: {{description: '{fault}'}}\n" for index, fault in enumerate(FAULTS)
    )
    write(
        tmp_path / "suite.yaml",
        (
            "test_suite: faults\nagents:\n"
            f"  - {{name: a, type: http, endpoint: 'http://127.0.0.1:{agent.port}', max_message_bytes: 1048576,\n"
            "     headers: {Authorization: 'Bearer ${AGENT_TOKEN}'}}\n"
            f"tests:\n{tests}"
        ),
    )
    result = atp(
        "test", "--suite=suite.yaml", "--parallel=4", "--output=json", "--output-file=r.json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    runs = {test["id"]: test["runs"][0] for test in json.loads((tmp_path / "r.json").read_text())["tests"]}
    for index, (fault, words) in enumerate(FAULTS.items()):
        run = runs[f"t{index}"]
        if words is None:
            assert run["outcome"] == "passed", (fault, run)
            continue
        assert run["outcome"] == ("error" if fault == "broken" else "failed"), (fault, run)
        assert words in run["error"], (fault, run["error"])
        assert "/execute" in run["error"], (fault, run["error"])  # where: the URL
    assert "(error_code INVALID_REQUEST): 'the description is too vague'" in runs["t2"]["error"]
    assert "answered 503 Service Unavailable: upstream busy, try later" in runs["t3"]["error"]
    assert runs["t8"]["trace"]["events"] == 4  # the events before the cut are kept
    # The headers reached the agent; the secret value is in no file of the run directory.
    sent = [headers for headers in agent.headers if headers.get("authorization") == "Bearer tok-3f9a7c1e5d"]
    assert sent and all(h["content-type"] == "application/json" for h in sent)
    assert all("application/vnd.atp.v1+json" in h["accept"] for h in sent)
    for path in (tmp_path / ".atp").rglob("*"):
        if path.is_file():
            assert "tok-3f9a7c1e5d" not in path.read_text(errors="replace"), path


def test_a_stream_that_goes_silent_times_out_with_its_events_kept(agent: FaultyAgent, tmp_path: Path) -> None:
    write(
        tmp_path / "suite.yaml",
        (
            "test_suite: silent\nagents:\n"
            f"  - {{name: a, type: http, endpoint: 'http://127.0.0.1:{agent.port}', stream: true}}\n"
            "tests:\n  - id: quiet\n    task: {description: 'silence 5'}\n    constraints: {timeout_seconds: 1}\n"
            "  - id: fine\n    task: {description: ok}\n"
        ),
    )
    result = atp("test", "--suite=suite.yaml", "--output=json", "--output-file=r.json", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    runs = {test["id"]: test["runs"][0] for test in json.loads((tmp_path / "r.json").read_text())["tests"]}
    quiet = runs["quiet"]
    assert quiet["status"] == "timeout" and "timed out after 1 s" in quiet["error"]
    assert quiet["trace"]["events"] == 5 and quiet["trace"]["by_type"] == {"progress": 5}
    assert quiet["task_id"] in agent.closed  # ATP closed the connection
    assert runs["fine"]["outcome"] == "passed"


def test_an_agent_that_cannot_be_reached_is_an_error_naming_the_endpoint(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = sock.getsockname()[1]
    write(
        tmp_path / "suite.yaml",
        (
            "test_suite: down\nagents:\n"
            f"  - {{name: refused, type: http, endpoint: 'http://127.0.0.1:{down}'}}\n"
            "  - {name: nowhere, type: http, endpoint: 'http://agent.invalid:8000', connect_timeout: 5}\n"
            "tests:\n  - id: t\n    task: {description: ok}\n"
        ),
    )
    for name, words in (("refused", f"127.0.0.1:{down}"), ("nowhere", "agent.invalid")):
        result = atp(
            "test",
            "--suite=suite.yaml",
            f"--agent={name}",
            "--output=json",
            "--output-file=r.json",
            cwd=tmp_path,
        )
        assert result.returncode == 1, result.stdout + result.stderr
        [test] = json.loads((tmp_path / "r.json").read_text())["tests"]
        run = test["runs"][0]
        assert run["outcome"] == "error", run
        assert f"cannot reach agent {name!r}" in run["error"] and words in run["error"], run["error"]
        assert "Traceback" not in result.stdout + result.stderr
