#!/usr/bin/env python3
"""WebSocket agents that misbehave in one way each, for the tests of the ``websocket`` adapter.

    python tests/agents/ws_faults.py MODE [--port N]

prints ``listening on PORT`` first, then serves until it is stopped. A request whose task
description begins with the name of a mode is served in that mode, so one server serves a
suite whose tests each have their fault (``cut 5``: a number after the mode is its count);
other requests in the server's ``MODE``. Modes (``ok``: one event, then a response):

- ``garbage``: one event, then a message that is not JSON;
- ``not_response``: one event, then a JSON object that is neither an event nor a response;
- ``version2``: one event, then a response of protocol version 2.0;
- ``other_task``: one event, then a response with another task_id;
- ``cut N``: N events (default 3), then the TCP connection is dropped without a close frame;
- ``no_response``: two events, then a clean close (code 1000) without a response;
- ``internal``: two events, then a close with code 1011 and a reason;
- ``refuse``: a close with code 1008 (policy violation) and a reason, before any event;
- ``huge``: one event, then a single message of 2 MiB;
- ``many``: events of 100 KiB each, 2 MiB in all, then a response;
- ``slow``: two events, then nothing; prints ``closed TASK_ID`` when ATP closes the connection;
- ``after_response``: the response, then one more event;
- ``echo_headers``: an event quoting the handshake's ``Authorization`` header, then a response
  with the SHA-256 of its ``Authorization`` and ``X-Team`` headers.

Whatever the mode, a handshake for the path ``/status/403`` or ``/status/500`` is answered with
that HTTP status (the 403 with a JSON error body). Two modes that are not WebSocket servers at
all: ``tcp`` answers every connection with a line of text that is not HTTP and closes it;
``silent`` accepts connections and never says a word.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import socket
from datetime import datetime, timezone
from typing import Any

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

MiB = 1024 * 1024
MODES = frozenset(
    {
        "ok",
        "garbage",
        "not_response",
        "version2",
        "other_task",
        "cut",
        "no_response",
        "internal",
        "refuse",
        "huge",
        "many",
        "slow",
        "after_response",
        "echo_headers",
    }
)


def event(task_id: str, sequence: int, message: str = "working") -> str:
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "sequence": sequence,
            "event_type": "progress",
            "payload": {"message": message},
        }
    )


def response(task_id: str, version: str = "1.0", **data: Any) -> str:
    return json.dumps(
        {
            "version": version,
            "task_id": task_id,
            "status": "completed",
            "artifacts": [{"type": "structured", "name": "result", "data": {"ok": True, **data}}],
            "metrics": {},
        }
    )


def refuse_handshake(connection: ServerConnection, request: Request) -> Response | None:
    """The handshake of ``/status/403`` and ``/status/500`` is answered with that status."""
    if request.path == "/status/403":
        body = json.dumps({"error": "the token is not valid", "error_code": "UNAUTHORIZED"})
        answer = connection.respond(403, body)
        answer.headers["Content-Type"] = "application/json"
        return answer
    if request.path == "/status/500":
        return connection.respond(500, "the agent is out of order\n")
    return None


def hashed(headers: Headers) -> dict[str, str]:
    return {
        name: hashlib.sha256(headers[name].encode()).hexdigest()
        for name in ("Authorization", "X-Team")
        if name in headers
    }


class Faulty:
    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def __call__(self, connection: ServerConnection) -> None:
        try:
            request = json.loads(await connection.recv())
        except ConnectionClosed:
            return
        task_id = request["task_id"]
        words = request["task"]["description"].split()
        mode = words[0] if words and words[0] in MODES else self.mode
        count = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
        try:
            await self.serve(connection, task_id, mode, count)
        except ConnectionClosed:
            pass

    async def serve(self, connection: ServerConnection, task_id: str, mode: str, count: int | None) -> None:
        send = connection.send
        if mode == "refuse":
            await connection.close(1008, "the task makes no sense")
            return
        if mode == "after_response":
            await send(response(task_id))
            await send(event(task_id, 0, "too late"))
            return
        if mode == "echo_headers":
            await send(
                event(task_id, 0, f"called with {connection.request.headers.get('Authorization', '')}")
            )
            await send(response(task_id, headers=hashed(connection.request.headers)))
            return
        if mode == "many":
            for sequence in range(20):
                await send(event(task_id, sequence, "x" * (100 * 1024)))
            await send(response(task_id))
            return
        events = (
            count
            if count is not None
            else {"cut": 3, "no_response": 2, "internal": 2, "slow": 2}.get(mode, 1)
        )
        for sequence in range(events):
            await send(event(task_id, sequence))
        if mode == "cut":
            await asyncio.sleep(0.2)  # (the events reach ATP before the connection drops)
            connection.transport.abort()
        elif mode == "internal":
            await connection.close(1011, "the model backend exploded")
        elif mode == "slow":
            await connection.wait_closed()
            print(f"closed {task_id}", flush=True)
        elif mode == "garbage":
            await send("this is not JSON {")
        elif mode == "not_response":
            await send(json.dumps({"task_id": task_id, "answer": 42}))
        elif mode == "huge":
            await send(event(task_id, events, "x" * (2 * MiB)))
        elif mode == "other_task":
            await send(response("another-task"))
        elif mode != "no_response":
            await send(response(task_id, "2.0" if mode == "version2" else "1.0"))


async def serve_websocket(mode: str, port: int) -> None:
    server = await serve(Faulty(mode), "127.0.0.1", port, process_request=refuse_handshake, max_size=MiB)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def serve_tcp(port: int, *, silent: bool) -> None:
    """A TCP port that is not a WebSocket server: a line of text, or nothing at all."""
    listener = socket.create_server(("127.0.0.1", port))
    print(f"listening on {listener.getsockname()[1]}", flush=True)
    held = []
    while True:
        connection, _ = listener.accept()
        if silent:
            held.append(connection)
            continue
        connection.recv(65536)  # (the handshake request, read so that closing does not reset)
        connection.sendall(b"220 mail.example.com ESMTP ready\r\n")
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES | {"tcp", "silent"}))
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.mode in ("tcp", "silent"):
        serve_tcp(args.port, silent=args.mode == "silent")
    else:
        asyncio.run(serve_websocket(args.mode, args.port))


if __name__ == "__main__":
    main()
