#!/usr/bin/env python3
"""gRPC agents that misbehave in one way each, for the tests of the ``grpc`` adapter.

    python tests/agents/grpc_faults.py MODE [--port N]

prints ``listening on PORT`` first, then serves ``atp.v1.Agent`` until it is stopped (``silent``:
a TCP port that accepts connections and never speaks HTTP/2). A request whose task description
begins with the name of a mode is served in that mode (so one server serves a suite whose tests
each have their fault); other requests in the server's ``MODE``. It prints ``cancelled TASK_ID``
when ATP cancels a call. Modes (``ok``: one event, then a response):

- ``unary_only``: ``Execute`` only (``ExecuteStream`` and ``Health`` unimplemented), with events;
- ``refuse``: every call ends with INVALID_ARGUMENT and a JSON error body;
- ``internal``: every call ends with INTERNAL, after two events when streaming;
- ``garbage``: one event, then an event item that is not JSON;
- ``not_event``: an item marked as an event that is an ATP Response;
- ``empty_item``: one event, then an item with neither field set;
- ``version2``: one event, then a response of protocol version 2.0;
- ``cut``: three events, then the process ends without a word (the connection is cut);
- ``no_response``: two events, then the stream ends (status OK) without a response;
- ``huge``: one event, then a single event larger than 1 MiB;
- ``many``: events of 100 KiB each, more than 1 MiB in all, then a response;
- ``slow``: two events, then nothing until the call is cancelled;
- ``after_response``: the response, then one more event;
- ``unhealthy``: ``Health`` says not serving; runs answer normally;
- ``echo_metadata``: an event with the call's ``authorization``, then a response with the SHA-256
  of its ``authorization`` and ``x-team`` metadata.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import sys
from datetime import datetime, timezone
from typing import Any

import grpc

from atp.adapters.proto.atp.v1 import agent_pb2, agent_pb2_grpc

MiB = 1024 * 1024


def event(task_id: str, sequence: int, message: str = "working", **extra: Any) -> bytes:
    return json.dumps(
        {
            "version": "1.0",
            "task_id": task_id,
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "sequence": sequence,
            "event_type": "progress",
            "payload": {"message": message, **extra},
        }
    ).encode()


def response(task_id: str, version: str = "1.0", **extra: Any) -> bytes:
    return json.dumps(
        {
            "version": version,
            "task_id": task_id,
            "status": "completed",
            "artifacts": [{"type": "structured", "name": "result", "data": {"ok": True, **extra}}],
            "metrics": {},
        }
    ).encode()


def item(**fields: bytes) -> agent_pb2.ExecuteStreamItem:
    return agent_pb2.ExecuteStreamItem(**fields)


MODES = frozenset(
    {
        "ok",
        "unary_only",
        "refuse",
        "internal",
        "garbage",
        "not_event",
        "empty_item",
        "version2",
        "cut",
        "no_response",
        "huge",
        "many",
        "slow",
        "after_response",
        "unhealthy",
        "echo_metadata",
    }
)


class Faulty(agent_pb2_grpc.AgentServicer):
    def __init__(self, mode: str) -> None:
        self.mode = mode

    def mode_of(self, request: Any) -> tuple[str, str]:
        """The request's task_id, and the mode its description names (else the server's)."""
        data = json.loads(request.request)
        words = data["task"]["description"].split()
        return data["task_id"], words[0] if words and words[0] in MODES else self.mode

    async def Health(self, request: Any, context: Any) -> Any:
        if self.mode == "unary_only":
            return await super().Health(request, context)  # type: ignore[misc]  # UNIMPLEMENTED
        return agent_pb2.HealthResponse(serving=self.mode != "unhealthy", protocol_version="1.0")

    async def Execute(self, request: Any, context: Any) -> Any:
        task_id, mode = self.mode_of(request)
        if mode == "refuse":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                json.dumps({"error": "the task makes no sense", "error_code": "INVALID_REQUEST"}),
            )
        if mode == "internal":
            await context.abort(grpc.StatusCode.INTERNAL, "the model backend exploded")
        if mode == "version2":
            return agent_pb2.ExecuteResponse(response=response(task_id, "2.0"))
        if mode == "echo_metadata":
            return agent_pb2.ExecuteResponse(response=self.echo(task_id, context))
        if mode == "slow":
            await self.hang(task_id)
        events = [event(task_id, 0, "searching"), event(task_id, 1, "writing")]
        return agent_pb2.ExecuteResponse(response=response(task_id), events=events)

    async def ExecuteStream(self, request: Any, context: Any) -> Any:
        if self.mode == "unary_only":
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not implemented!")
        task_id, mode = self.mode_of(request)
        if mode == "refuse":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                json.dumps({"error": "the task makes no sense", "error_code": "INVALID_REQUEST"}),
            )
        if mode == "after_response":
            yield item(response=response(task_id))
            yield item(event=event(task_id, 0, "too late"))
            return
        if mode == "echo_metadata":
            authorization = dict(context.invocation_metadata()).get("authorization", "")
            yield item(event=event(task_id, 0, f"called with {authorization}"))
            yield item(response=self.echo(task_id, context))
            return
        if mode == "not_event":
            yield item(event=response(task_id))
            return
        if mode == "huge":
            yield item(event=event(task_id, 0))
            yield item(event=event(task_id, 1, "x" * (2 * MiB)))
            return
        if mode == "many":
            for sequence in range(20):
                yield item(event=event(task_id, sequence, "x" * (100 * 1024)))
            yield item(response=response(task_id))
            return
        count = {"cut": 3, "internal": 2, "no_response": 2, "slow": 2}.get(mode, 1)
        for sequence in range(count):
            yield item(event=event(task_id, sequence))
        if mode == "cut":
            await asyncio.sleep(0.3)  # (the events reach ATP before the process ends)
            os._exit(1)
        if mode == "internal":
            await context.abort(grpc.StatusCode.INTERNAL, "the model backend exploded")
        if mode == "no_response":
            return
        if mode == "slow":
            await self.hang(task_id)
        if mode == "garbage":
            yield item(event=b"this is not JSON {")
            return
        if mode == "empty_item":
            yield item()
            return
        yield item(response=response(task_id, "2.0" if mode == "version2" else "1.0"))

    @staticmethod
    def echo(task_id: str, context: Any) -> bytes:
        """A response with the SHA-256 of each metadata value the call had (not the values)."""
        metadata = {
            key: hashlib.sha256(value.encode()).hexdigest()
            for key, value in context.invocation_metadata()
            if key in ("authorization", "x-team")
        }
        return response(task_id, metadata=metadata)

    @staticmethod
    async def hang(task_id: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            print(f"cancelled {task_id}", flush=True)
            raise


async def serve(mode: str, port: int) -> None:
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServicer_to_server(Faulty(mode), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"listening on {bound}", flush=True)
    await server.wait_for_termination()


def silent(port: int) -> None:
    """Accept connections and never answer: a server that does not speak HTTP/2."""
    listener = socket.create_server(("127.0.0.1", port))
    print(f"listening on {listener.getsockname()[1]}", flush=True)
    held = []
    while True:
        connection, _ = listener.accept()
        held.append(connection)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=sorted(MODES | {"silent"}))
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "silent":
        silent(args.port)
    else:
        asyncio.run(serve(args.mode, args.port))


if __name__ == "__main__":
    sys.exit(main())
