"""A loopback HTTP agent for the benchmarks: answers ``POST /execute`` after ``--delay`` seconds,
and ``POST /execute/stream`` with ``--events`` Server-Sent Events then the response; ``GET
/health``. Plain asyncio (HTTP/1.1, keep-alive, Content-Length bodies only) so that the agent
costs as little as possible and the figures are ATP's.

    python bench/http_agent.py --port 0 --delay 0.1 --events 1000   # prints "listening on PORT"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys


def response(task_id: str) -> bytes:
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "status": "completed",
            "artifacts": [{"type": "structured", "name": "result", "data": {"answer": 42}}],
            "metrics": {"total_steps": 1},
        }
    ).encode()


def sse_events(task_id: str, count: int) -> bytes:
    """``count`` progress events as SSE messages, built once per request."""
    head = '{"version":"1.0","task_id":"%s","timestamp":"2026-01-01T00:00:00Z","sequence":' % task_id
    tail = ',"event_type":"progress","payload":{"message":"working"}}'
    return b"".join(b"data: %s%d%s\n\n" % (head.encode(), i, tail.encode()) for i in range(count))


async def serve(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float, events: int
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            if method == "GET" and path == "/health":
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n"
                    b'{"status":"ok"}'
                )
                continue
            task_id = json.loads(body)["task_id"]
            await asyncio.sleep(delay)
            if path == "/execute":
                data = response(task_id)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
            elif path == "/execute/stream":
                data = sse_events(task_id, events) + b"event: response\ndata: " + response(task_id) + b"\n\n"
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--events", type=int, default=0)
    args = parser.parse_args()
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, args.delay, args.events), "127.0.0.1", args.port, backlog=1024
    )
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
