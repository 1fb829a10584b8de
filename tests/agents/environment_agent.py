#!/usr/bin/env python3
"""An agent that needs a secret from ``context.environment``, over HTTP, WebSocket or gRPC, for
the tests of agents' ``secrets:`` (docs/agents.md, "Secrets and context.environment").

    python tests/agents/environment_agent.py http|websocket|grpc [--port N]

prints ``listening on PORT`` first, then serves until it is stopped. Each request is answered
from its ``context.environment``: without ``ATP_E2E_TOKEN`` there, the run fails (status
``failed``, error ``no token in context.environment``). With it, the agent does what a careless
agent would (the protocol says it must not, and ATP masks it anyway): an event quoting the
token, then a response whose ``env.txt`` file artifact holds the token, its SHA-256 and the
``REGION`` it was given, and whose ``result`` artifact holds the same data. (The http server
answers ``POST .../execute`` with one response, no events; ``/execute/stream`` is 404.)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN = "ATP_E2E_TOKEN"


def event(task_id: str, message: str) -> dict[str, Any]:
    return {
        "version": "1.0",
        "task_id": task_id,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "sequence": 0,
        "event_type": "progress",
        "payload": {"message": message},
    }


def answer(request: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events and the response for ``request``."""
    task_id = request["task_id"]
    environment = (request.get("context") or {}).get("environment") or {}
    token = environment.get(TOKEN)
    if not isinstance(token, str):
        return [], {
            "version": "1.0",
            "task_id": task_id,
            "status": "failed",
            "error": f"no token in context.environment (it has: {sorted(environment)})",
        }
    digest = hashlib.sha256(token.encode()).hexdigest()
    region = environment.get("REGION")
    text = f"token={token}\nsha256={digest}\nregion={region}\n"
    response = {
        "version": "1.0",
        "task_id": task_id,
        "status": "completed",
        "artifacts": [
            {"type": "file", "path": "env.txt", "content_type": "text/plain", "content": text},
            {
                "type": "structured",
                "name": "result",
                "data": {"token": token, "sha256": digest, "region": region},
            },
        ],
        "metrics": {},
    }
    return [event(task_id, f"calling the service with {token}")], response


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/execute"):
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _, response = answer(json.loads(body))
        data = json.dumps(response).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # (quiet)
        pass


def serve_http(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


async def serve_websocket(port: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    async def handle(connection: ServerConnection) -> None:
        events, response = answer(json.loads(await connection.recv()))
        for item in events:
            await connection.send(json.dumps(item))
        await connection.send(json.dumps(response))
        await connection.close()

    async with serve(handle, "127.0.0.1", port) as server:
        print(f"listening on {next(iter(server.sockets)).getsockname()[1]}", flush=True)
        await asyncio.Future()


async def serve_grpc(port: int) -> None:
    import grpc

    from atp.adapters.proto.atp.v1 import agent_pb2, agent_pb2_grpc

    class Agent(agent_pb2_grpc.AgentServicer):
        async def Health(self, request: Any, context: Any) -> Any:
            return agent_pb2.HealthResponse(serving=True, protocol_version="1.0")

        async def Execute(self, request: Any, context: Any) -> Any:
            events, response = answer(json.loads(request.request))
            return agent_pb2.ExecuteResponse(
                response=json.dumps(response).encode(), events=[json.dumps(e).encode() for e in events]
            )

        async def ExecuteStream(self, request: Any, context: Any) -> Any:
            events, response = answer(json.loads(request.request))
            for item in events:
                yield agent_pb2.ExecuteStreamItem(event=json.dumps(item).encode())
            yield agent_pb2.ExecuteStreamItem(response=json.dumps(response).encode())

    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServicer_to_server(Agent(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"listening on {bound}", flush=True)
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["http", "websocket", "grpc"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "http":
        serve_http(args.port)
    elif args.transport == "websocket":
        asyncio.run(serve_websocket(args.port))
    else:
        asyncio.run(serve_grpc(args.port))


if __name__ == "__main__":
    sys.exit(main())
