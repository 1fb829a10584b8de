#!/usr/bin/env python3
"""One agent written from ATP Protocol 1.0 alone (issue 27), served over three transports of
the protocol's table: nothing of ATP is imported, and what it sends and expects comes from the
specification's text only (its messages and schemas, its Transport table, its FastAPI example,
its Error Codes, its Security section and its Tool Protocol appendix), not from ATP's adapters.

    python tests/agents/spec_agent.py cli          # one request line on stdin; events on stderr
    python tests/agents/spec_agent.py http      [--port N]   # FastAPI: /execute, /execute/stream
    python tests/agents/spec_agent.py websocket [--port N]   # websockets: one request message

The servers print ``listening on PORT`` first, then serve until stopped.

What it does with a request (the same on every transport):

- checks it (``version`` 1.x, ``task_id``, ``task.description``): else ``failed`` with
  ``error_code: INVALID_REQUEST``;
- needs the secret ``SEARCH_API_KEY`` in ``context.environment`` (Security: "Secrets MUST be
  passed via context.environment"): without it, ``failed`` with ``INVALID_REQUEST`` naming the
  variable, never a value. It never emits or logs the secret; its structured artifact carries
  the secret's SHA-256, so a test can tell the right one came;
- calls each tool of ``constraints.allowed_tools``, as the appendix shows:
  ``POST {context.tools_endpoint}/{tool}`` with ``{"task_id", "input"}`` (``input`` is
  ``task.input_data[tool]`` when that is an object, else ``{"query": task.description}``);
- emits the protocol's events as it goes, ``sequence`` from 0: ``progress`` (``current_step``,
  ``total_steps``, ``percentage``, ``message``), ``reasoning``, ``llm_request`` (``model`` and
  made-up tokens), ``tool_call`` (``tool``, ``input``, ``output``, ``duration_ms``, ``status``,
  ``error``), ``artifact_created``;
- answers ``completed`` with a file artifact ``report.md`` (content inline, its size and
  ``sha256:`` hash) and a structured artifact ``search_results`` holding each tool's
  ``output``, and the protocol's metrics; ``failed`` with ``TOOL_ERROR`` when a tool is not
  answered ``{"status": "success", ...}``.

Standard library only for the cli transport; FastAPI and uvicorn for http, as the
specification's example; the ``websockets`` package for websocket.
"""

import argparse
import hashlib
import json
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

VERSION = "1.0"
SECRET = "SEARCH_API_KEY"
MODEL = "spec-model-1"


class Failure(Exception):
    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.details = code, details or {}


def checked(request: Any) -> dict[str, Any]:
    """The request, if it is one this agent can take (Input Validation: "Agents MUST validate
    all input against schema")."""
    if not isinstance(request, dict):
        raise Failure("INVALID_REQUEST", "the request is not a JSON object")
    version = request.get("version")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise Failure("INVALID_REQUEST", f"unsupported protocol version {version!r}")
    task = request.get("task")
    if not isinstance(request.get("task_id"), str) or not isinstance(task, dict):
        raise Failure("INVALID_REQUEST", "task_id and task are required")
    if not isinstance(task.get("description"), str) or not task["description"]:
        raise Failure("INVALID_REQUEST", "task.description is required")
    for part in ("constraints", "context"):
        if not isinstance(request.get(part) or {}, dict):
            raise Failure("INVALID_REQUEST", f"{part} must be an object")
    return request


def call_tool(endpoint: str, task_id: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """The appendix's call: ``POST {tools_endpoint}/{tool}``, its JSON answer."""
    body = json.dumps({"task_id": task_id, "input": tool_input}).encode()
    post = urllib.request.Request(
        f"{endpoint.rstrip('/')}/{tool}",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(post, timeout=30) as reply:
            answer = json.loads(reply.read())
    except urllib.error.HTTPError as failed:
        try:
            answer = json.loads(failed.read())
        except ValueError:
            answer = {}
        answer.setdefault("error", f"HTTP {failed.code}")
        answer["status"] = "error"
    except (OSError, ValueError) as failed:
        return {"status": "error", "error": str(failed)}
    return answer if isinstance(answer, dict) else {"status": "error", "error": "not a JSON object"}


class Run:
    """One execution: the events it emits, in sequence, and its metrics."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.task_id: str = request["task_id"]
        self.sequence = 0
        self.started = time.monotonic()
        self.input_tokens = self.output_tokens = self.llm_calls = self.tool_calls = 0
        self.steps = 0

    def event(self, event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        message = {
            "version": VERSION,
            "task_id": self.task_id,
            "timestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
            "sequence": self.sequence,
            "event_type": event_type,
            "payload": payload,
        }
        self.sequence += 1
        return message

    def llm(self, input_tokens: int, output_tokens: int) -> dict[str, Any]:
        self.llm_calls += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        return self.event(
            "llm_request",
            {
                "model": MODEL,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "duration_ms": 120,
                "temperature": 0.2,
                "stop_reason": "end_turn",
            },
        )

    def progress(self, total: int, message: str) -> dict[str, Any]:
        self.steps += 1
        return self.event(
            "progress",
            {
                "current_step": self.steps,
                "total_steps": total,
                "percentage": round(100 * self.steps / total),
                "message": message,
            },
        )

    def metrics(self) -> dict[str, Any]:
        tokens = self.input_tokens + self.output_tokens
        return {
            "total_tokens": tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_steps": self.steps,
            "tool_calls": self.tool_calls,
            "llm_calls": self.llm_calls,
            "wall_time_seconds": round(time.monotonic() - self.started, 3),
            "cost_usd": round(tokens * 0.000002, 6),
        }

    def response(self, status: str, artifacts: list[dict[str, Any]], **error: Any) -> dict[str, Any]:
        return {
            "version": VERSION,
            "task_id": self.task_id,
            "status": status,
            "artifacts": artifacts,
            "metrics": self.metrics(),
            "error": None,
            "trace_id": f"trace_{self.task_id}",
            **error,
        }


def failed(task_id: str, failure: Failure, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Error Response, with the optional error code extension."""
    return {
        "version": VERSION,
        "task_id": task_id,
        "status": "failed",
        "artifacts": [],
        "metrics": metrics or {"total_tokens": 0, "total_steps": 0, "wall_time_seconds": 0},
        "error": str(failure),
        "error_code": failure.code,
        "error_details": failure.details,
    }


def report(task: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """The file artifact: a markdown report, inline, with its size and hash."""
    lines = [f"# {task['description']}", ""]
    for tool, output in results.items():
        lines += [f"## {tool}", "", "```json", json.dumps(output, indent=2, sort_keys=True), "```", ""]
    data = "\n".join(lines).encode()
    return {
        "type": "file",
        "path": "report.md",
        "content_type": "text/markdown",
        "size_bytes": len(data),
        "content_hash": "sha256:" + hashlib.sha256(data).hexdigest(),
        "content": data.decode(),
    }


def execute(raw: Any) -> Iterator[dict[str, Any]]:
    """The agent: its events as they happen, then its response (always last)."""
    try:
        request = checked(raw)
    except Failure as failure:
        task_id = raw.get("task_id") if isinstance(raw, dict) else None
        yield failed(task_id if isinstance(task_id, str) else "", failure)
        return
    run = Run(request)
    task, context = request["task"], request.get("context") or {}
    environment = context.get("environment") or {}
    key = environment.get(SECRET) if isinstance(environment, dict) else None
    if not isinstance(key, str) or not key:
        missing = Failure(
            "INVALID_REQUEST", f"{SECRET} is missing from context.environment", {"missing": [SECRET]}
        )
        yield failed(run.task_id, missing)
        return
    tools = [t for t in (request.get("constraints") or {}).get("allowed_tools") or [] if isinstance(t, str)]
    endpoint = context.get("tools_endpoint")
    if tools and not isinstance(endpoint, str):
        yield failed(
            run.task_id, Failure("TOOL_NOT_FOUND", "tools are allowed but no context.tools_endpoint")
        )
        return
    total = len(tools) + 2
    inputs = task.get("input_data") or {}
    yield run.progress(total, "planning")
    yield run.event(
        "reasoning",
        {"thought": "Call each allowed tool, then write the report", "plan": tools, "step": "planning"},
    )
    yield run.llm(800, 120)
    results: dict[str, Any] = {}
    for tool in tools:
        tool_input = (
            inputs.get(tool) if isinstance(inputs.get(tool), dict) else {"query": task["description"]}
        )
        yield run.progress(total, f"calling {tool}")
        began = time.monotonic()
        answer = call_tool(str(endpoint), run.task_id, tool, tool_input)
        run.tool_calls += 1
        ok = answer.get("status") == "success"
        yield run.event(
            "tool_call",
            {
                "tool": tool,
                "input": tool_input,
                "output": answer.get("output") if ok else None,
                "duration_ms": round(1000 * (time.monotonic() - began)),
                "status": "success" if ok else "error",
                "error": None if ok else str(answer.get("error")),
            },
        )
        if not ok:
            details = {"tool": tool, "error": answer.get("error")}
            yield failed(run.task_id, Failure("TOOL_ERROR", f"tool {tool} failed", details), run.metrics())
            return
        results[tool] = answer.get("output")
    yield run.progress(total, "writing the report")
    yield run.llm(1500, 400)
    document = report(task, results)
    yield run.event(
        "artifact_created",
        {"artifact_type": "file", "path": "report.md", "size_bytes": document["size_bytes"]},
    )
    found = {
        "type": "structured",
        "name": "search_results",
        "schema": "search_results_v1",
        "data": {"results": results, "key_sha256": hashlib.sha256(key.encode()).hexdigest()},
    }
    yield run.response("completed", [document, found])


# --- stdin/stdout: "Line (JSON)" in, "Line (JSON)" out, events as "stderr lines" ---


def serve_cli() -> None:
    line = sys.stdin.readline()
    try:
        request: Any = json.loads(line)
    except ValueError:
        request = None
    for message in execute(request):
        if "event_type" in message:
            print(json.dumps(message), file=sys.stderr, flush=True)
        else:
            print(json.dumps(message), flush=True)


# --- HTTP: "POST body" in, "Response body" out, events as an "SSE stream" (the FastAPI example) ---


def serve_http(port: int) -> None:
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse
    from pydantic import BaseModel

    app = FastAPI()

    class ATPRequest(BaseModel):
        version: str
        task_id: str
        task: dict[str, Any]
        constraints: dict[str, Any] | None = None
        context: dict[str, Any] | None = None
        metadata: dict[str, Any] | None = None

    @app.post("/execute")
    def run_execute(request: ATPRequest) -> dict[str, Any]:
        """Synchronous execution: the response when done."""
        *_, response = execute(request.model_dump())
        return response

    @app.post("/execute/stream")
    def run_execute_stream(request: ATPRequest) -> StreamingResponse:
        """Streaming execution: SSE events, then the final response."""

        def event_generator() -> Iterator[str]:
            for message in execute(request.model_dump()):
                yield f"data: {json.dumps(message)}\n\n"

        return StreamingResponse(event_generator(), media_type="text/event-stream")

    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # (connections wait in the backlog while uvicorn starts)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


# --- WebSocket: the request a "Message", events "Messages", the response a "Message" ---


async def serve_websocket(port: int) -> None:
    import asyncio

    from websockets.asyncio.server import ServerConnection, serve
    from websockets.exceptions import ConnectionClosed

    async def handle(connection: ServerConnection) -> None:
        try:
            request: Any = json.loads(await connection.recv())
        except ValueError:
            request = None
        except ConnectionClosed:  # (a client that connects and leaves: nothing to do)
            return
        messages = execute(request)
        while (message := await asyncio.to_thread(next, messages, None)) is not None:
            await connection.send(json.dumps(message))

    async with serve(handle, "127.0.0.1", port) as server:
        print(f"listening on {next(iter(server.sockets)).getsockname()[1]}", flush=True)
        await asyncio.Future()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["cli", "http", "websocket"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "cli":
        serve_cli()
    elif args.transport == "http":
        serve_http(args.port)
    else:
        import asyncio

        asyncio.run(serve_websocket(args.port))


if __name__ == "__main__":
    main()
