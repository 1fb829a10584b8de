#!/usr/bin/env python3
"""An HTTP agent on loopback that misbehaves on request, for the tests of the ``http`` adapter.

A raw asyncio server (HTTP/1.1 parsed just enough), so that it can do what no web framework
would: cut a stream in the middle, promise more body than it sends, go silent. Used in the
test's process (``with FaultyAgent() as agent: ...``), so that tests can read what it saw: the
requests and their headers (:attr:`FaultyAgent.seen`), the POSTs per path
(:attr:`FaultyAgent.posts`), the TCP connections it accepted (:attr:`FaultyAgent.connections`)
and the runs whose connection ATP closed (:attr:`FaultyAgent.closed`). Or as a program::

    python tests/agents/http_faults.py [--port N] [--stream-status 404] [--health-status 503]

which prints ``listening on PORT`` and serves until it is stopped.

A POST to a path ending in ``/execute`` is answered synchronously, one ending in
``/execute/stream`` as Server-Sent Events (unless the server was made with ``stream_status``:
then that status, 404 say, answers every ``/execute/stream``). The first word of the task's
description picks the behaviour, a number after it its count ``N`` (default 2):

- ``ok N``: the response (streaming: N events, then the response as ``event: response``);
- ``plain N``: streaming: a comment, a message without data, N events, then the response
  without an event name, its JSON over two ``data:`` lines (the SSE message rule);
- ``sync N``: the response as ``application/json`` whatever the path;
- ``slow N``: wait N milliseconds, then as ``ok 1``;
- ``refuse``: HTTP 422 with a JSON body ``{"error": ..., "error_code": "INVALID_REQUEST"}``;
- ``refuse_text``: HTTP 403 with a plain-text body;
- ``fail``: HTTP 500 with a JSON error body;
- ``fail_text``: HTTP 502 with an HTML body;
- ``not_response N``: ``{"hello": "world"}`` as the response (streaming: after N events);
- ``garbage N``: streaming: N events, then a message that is not JSON;
- ``other_task``: a response with another task_id;
- ``version2``: a response of protocol version 2.0 (streaming: after one event);
- ``version2event N``: streaming: N events, then an event of version 2.0;
- ``cut N``: N events in a chunked body, then the connection is dropped;
- ``cut_length N``: N events in a body whose Content-Length promises more, then the
  connection is closed;
- ``no_response N``: N events, then the chunked body ends cleanly;
- ``no_response_close N``: N events in a body delimited by closing the connection, then closed;
- ``huge``: a 2 MiB body with its Content-Length;
- ``huge_chunked``: a 2 MiB body in chunks, without a Content-Length;
- ``flood N``: streaming: N events of 300 KiB each (default 6), then the response;
- ``silence N``: N events (synchronous: none), then nothing until ATP closes the connection
  (its task_id is then added to :attr:`FaultyAgent.closed`);
- ``after_response``: streaming: the response, then an event, then nothing until ATP closes
  the connection (its task_id is then added to :attr:`FaultyAgent.closed`);
- ``cut_after_response``: streaming: an event and the response, then the connection is dropped
  (without the chunked body's end);
- ``redirect``: HTTP 307 to another URL on this server;
- ``echo``: streaming: an event quoting the ``Authorization`` header, then a response with
  the SHA-256 of each header the request had;
- ``echo_refuse``: HTTP 401 whose JSON error quotes the ``Authorization`` header.

``GET /health`` (any path ending in ``/health``) is answered with ``health_status`` (200 by
default; 404 like any unknown path, 503 ...).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import ssl
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

KiB = 1024
MiB = 1024 * KiB
REASONS = {
    200: "OK",
    307: "Temporary Redirect",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def event(task_id: str, sequence: int, message: str = "working", version: str = "1.0") -> bytes:
    return json.dumps(
        {
            "version": version,
            "task_id": task_id,
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            "sequence": sequence,
            "event_type": "progress",
            "payload": {"message": message},
        }
    ).encode()


def response(task_id: str, version: str = "1.0", **data: Any) -> bytes:
    return json.dumps(
        {
            "version": version,
            "task_id": task_id,
            "status": "completed",
            "artifacts": [{"type": "structured", "name": "result", "data": {"ok": True, **data}}],
            "metrics": {},
        }
    ).encode()


def sse(data: bytes, name: str | None = None) -> bytes:
    """One SSE message."""
    return (f"event: {name}\n".encode() if name else b"") + b"data: " + data + b"\n\n"


@dataclass
class Seen:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    """Lowercase names."""


class Connection:
    """Writing the answer to one request on one connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Whatever')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def whole(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.head(status, {"Content-Type": kind, "Content-Length": str(len(body))})
        self.writer.write(body)

    def chunked(self, kind: str = "text/event-stream") -> None:
        self.head(200, {"Content-Type": kind, "Transfer-Encoding": "chunked", "Cache-Control": "no-cache"})

    def chunk(self, data: bytes) -> None:
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")

    async def until_closed(self) -> None:
        """Wait until the client closes the connection."""
        while await self.reader.read(64 * KiB):
            pass


class FaultyAgent:
    """The server, on its own event loop in a thread; ``with FaultyAgent() as agent`` starts and
    stops it. ``stream_status``: the status every ``/execute/stream`` is answered with instead
    of a stream (404, 405); ``health_status``: the answer to ``/health``; ``tls``: serve TLS."""

    def __init__(
        self, *, stream_status: int | None = None, health_status: int = 200, tls: ssl.SSLContext | None = None
    ) -> None:
        self.stream_status = stream_status
        self.health_status = health_status
        self.tls = tls
        self.seen: list[Seen] = []
        self.posts: collections.Counter[str] = collections.Counter()
        """POSTs per path (without the query)."""
        self.connections = 0
        """TCP connections accepted."""
        self.closed: list[str] = []
        """Task ids of ``silence`` runs whose connection the client closed."""
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FaultyAgent:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault server did not start")
        return self

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port, ssl=self.tls)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()
        # stopped: close the listener and every connection still open
        self._server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    def stop(self) -> None:
        if self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FaultyAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def closed_within(self, task_id: str, seconds: float = 5.0) -> bool:
        """Whether the client closed the connection of ``task_id`` (waiting up to ``seconds``)."""
        import time

        deadline = time.monotonic() + seconds
        while task_id not in self.closed and time.monotonic() < deadline:
            time.sleep(0.02)
        return task_id in self.closed

    # --- serving ---------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            first = await reader.read(1)
            if first == b"\x16":  # a TLS handshake: answered as HTTP servers do, in plaintext
                writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                return
            while True:
                try:
                    head = first + await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                first = b""
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, target, _ = request_line.split(" ", 2)
                headers = {}
                for line in lines:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.seen.append(Seen(method, target, headers))
                keep = await self._answer(method, target, headers, body, Connection(reader, writer))
                await writer.drain()
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, method: str, target: str, headers: dict[str, str], body: bytes, out: Connection
    ) -> bool:
        """Answer one request; False when the connection is to end after it."""
        path = target.partition("?")[0]
        if method == "GET" and path.endswith("/health"):
            out.whole(self.health_status, b'{"status": "ok"}' if self.health_status == 200 else b"not now")
            return True
        if method != "POST" or not path.endswith(("/execute", "/execute/stream")):
            out.whole(404, b"nothing here", "text/plain")
            return True
        self.posts[path] += 1
        streaming = path.endswith("/stream")
        if streaming and self.stream_status is not None:
            out.whole(self.stream_status, b'{"detail": "Not Found"}')
            return True
        request = json.loads(body)
        task_id = request["task_id"]
        word, _, count = request["task"]["description"].partition(" ")
        n = int(count) if count.strip().isdigit() else None
        if word == "slow":
            await asyncio.sleep((n or 0) / 1000)
            word, n = "ok", 1
        if streaming and word not in SYNC_ONLY:
            return await self._stream(word, n, task_id, headers, out)
        return await self._sync(word, n, task_id, headers, out)

    async def _sync(
        self, word: str, n: int | None, task_id: str, headers: dict[str, str], out: Connection
    ) -> bool:
        if word in ("ok", "sync", "plain", "echo"):
            out.whole(
                200, response(task_id, headers=hashed(headers)) if word == "echo" else response(task_id)
            )
        elif word == "refuse":
            out.whole(422, b'{"error": "the task makes no sense", "error_code": "INVALID_REQUEST"}')
        elif word == "refuse_text":
            out.whole(403, b"no entry for you\n", "text/plain")
        elif word == "fail":
            out.whole(500, b'{"error": "the model backend exploded", "error_code": "INTERNAL_ERROR"}')
        elif word == "fail_text":
            out.whole(502, b"<html><body>Bad Gateway</body></html>", "text/html")
        elif word == "not_response":
            out.whole(200, b'{"hello": "world"}')
        elif word == "other_task":
            out.whole(200, response("another-task"))
        elif word == "version2":
            out.whole(200, response(task_id, version="2.0"))
        elif word == "huge":
            out.whole(200, response(task_id, padding="x" * (2 * MiB)))
        elif word == "huge_chunked":
            out.chunked("application/json")
            data = response(task_id, padding="x" * (2 * MiB))
            for start in range(0, len(data), 64 * KiB):
                out.chunk(data[start : start + 64 * KiB])
                await out.writer.drain()
            out.end()
        elif word == "cut_length":
            data = response(task_id)
            out.head(200, {"Content-Type": "application/json", "Content-Length": str(len(data) + 100)})
            out.writer.write(data)
            return False
        elif word == "silence":
            await out.until_closed()
            self.closed.append(task_id)
            return False
        elif word == "redirect":
            out.head(
                307, {"Location": f"http://127.0.0.1:{self.port}/elsewhere/execute", "Content-Length": "0"}
            )
        elif word == "echo_refuse":
            error = {
                "error": f"the credentials {headers.get('authorization')!r} are not valid",
                "error_code": "UNAUTHORIZED",
            }
            out.whole(401, json.dumps(error).encode())
        else:
            out.whole(400, f"unknown behaviour {word!r}".encode(), "text/plain")
        return True

    async def _stream(
        self, word: str, n: int | None, task_id: str, headers: dict[str, str], out: Connection
    ) -> bool:
        count = n if n is not None else (6 if word == "flood" else 1 if word == "version2" else 2)
        if word == "cut_length":
            messages = b"".join(sse(event(task_id, sequence)) for sequence in range(count))
            out.head(200, {"Content-Type": "text/event-stream", "Content-Length": str(len(messages) + 1000)})
            out.writer.write(messages)
            await out.writer.drain()
            return False
        if word == "no_response_close":
            out.head(200, {"Content-Type": "text/event-stream", "Connection": "close"})
            for sequence in range(count):
                out.writer.write(sse(event(task_id, sequence)))
            await out.writer.drain()
            return False
        out.chunked()
        if word == "plain":
            out.chunk(b": keep-alive\n\n" + b"event: ping\n\n" + b"retry: 1000\n\n")
        if word == "cut_after_response":
            out.chunk(sse(event(task_id, 0)) + sse(response(task_id), "response"))
            await out.writer.drain()
            await asyncio.sleep(0.01)
            out.writer.transport.abort()
            return False
        if word == "after_response":
            out.chunk(sse(response(task_id), "response"))
            await out.writer.drain()
            await asyncio.sleep(0.01)
            out.chunk(sse(event(task_id, 0, "too late")))
            await out.writer.drain()
            await out.until_closed()
            self.closed.append(task_id)
            return False
        if word == "echo":
            out.chunk(sse(event(task_id, 0, f"called with {headers.get('authorization')}")))
            out.chunk(sse(response(task_id, headers=hashed(headers)), "response"))
            out.end()
            return True
        filler = "x" * (300 * KiB) if word == "flood" else "working"
        for sequence in range(count):
            out.chunk(sse(event(task_id, sequence, filler)))
        await out.writer.drain()
        if word == "cut":
            await asyncio.sleep(0.05)  # (the events reach the client before the connection drops)
            out.writer.transport.abort()
            return False
        if word == "silence":
            await out.until_closed()
            self.closed.append(task_id)
            return False
        if word == "no_response":
            out.end()
            return True
        if word == "plain":
            first, _, rest = response(task_id).partition(b", ")
            out.chunk(b"data: " + first + b",\ndata: " + rest + b"\n\n")  # (one message over two lines)
        elif word == "not_response":
            out.chunk(sse(b'{"hello": "world"}'))
        elif word == "garbage":
            out.chunk(sse(b"this is not JSON {"))
        elif word == "version2event":
            out.chunk(sse(event(task_id, count, version="2.0")))
        elif word == "version2":
            out.chunk(sse(response(task_id, version="2.0"), "response"))
        elif word == "other_task":
            out.chunk(sse(response("another-task"), "response"))
        else:
            out.chunk(sse(response(task_id), "response"))
        out.end()
        return True


SYNC_ONLY = frozenset(
    {
        "sync",
        "refuse",
        "refuse_text",
        "fail",
        "fail_text",
        "huge",
        "huge_chunked",
        "redirect",
        "echo_refuse",
    }
)
"""Behaviours answered the same on both paths (not as a stream)."""


def hashed(headers: dict[str, str]) -> dict[str, str]:
    """The SHA-256 of each header's value (never the values: they may be secrets)."""
    return {name: hashlib.sha256(value.encode()).hexdigest() for name, value in headers.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--stream-status", type=int, default=None, help="answer /execute/stream with this status"
    )
    parser.add_argument("--health-status", type=int, default=200)
    args = parser.parse_args()
    agent = FaultyAgent(stream_status=args.stream_status, health_status=args.health_status)
    agent.port = args.port
    agent.start()
    print(f"listening on {agent.port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        agent.stop()


if __name__ == "__main__":
    sys.exit(main())
